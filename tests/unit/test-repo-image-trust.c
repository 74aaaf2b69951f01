/* SPDX-License-Identifier: Apache-2.0 */
/* A repository's .airlock/isolation.json naming an image: the image decides
 * every program the agent runs, so an untrusted repository may not pick one
 * among those the operator imported. Without trust, a container-tier run
 * with no image of its own is refused naming the fix; the operator's own
 * image always wins. */
#include <criterion/criterion.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "fs.h"
#include "policy.h"
#include "repo.h"
#include "util.h"

static char ws[64];

static void setup(void)
{
        snprintf(ws, sizeof(ws), "/tmp/airlock-repoimg-XXXXXX");
        cr_assert_not_null(mkdtemp(ws));
        char p[128];
        snprintf(p, sizeof(p), "%s/.airlock", ws);
        cr_assert_eq(mkdir(p, 0755), 0);
        snprintf(p, sizeof(p), "%s/.airlock/isolation.json", ws);
        FILE *f = fopen(p, "w");
        cr_assert_not_null(f);
        fputs("{\"image\": \"attacker-pick\"}", f);
        fclose(f);
}

static void teardown(void)
{
        fs_remove_tree(AT_FDCWD, ws, FS_REMOVE_DEPTH_MAX);
}

static struct policy *container(bool trusted, const char *image)
{
        struct policy *p = policy_new();
        struct al_error e = {0};
        cr_assert_eq(policy_load_string(p, "{\"tier\": \"container\"}", "p", &e), 0, "%s", e.msg);
        p->workspace = xstrdup(ws);
        p->trust_repo_config = trusted;
        if (image)
                p->image = xstrdup(image);
        cr_assert_eq(policy_finalize(p, "/", "/root", &e), 0, "%s", e.msg);
        return p;
}

Test(repo_image, untrusted_pick_refused, .init = setup, .fini = teardown)
{
        struct policy *p = container(false, NULL);
        struct al_error e = {0};
        int r = repo_config_apply_workspace(p, ws, "/root", &e);
        cr_assert_lt(r, 0, "an untrusted repository picked image %s", p->image ? p->image : "-");
        cr_assert_null(p->image);
        cr_assert(strstr(e.msg, "attacker-pick") && strstr(e.msg, "--image") &&
                      strstr(e.msg, "--trust-repo-config"),
                  "%s", e.msg);
        policy_free(p);
}

Test(repo_image, trusted_pick_taken, .init = setup, .fini = teardown)
{
        struct policy *p = container(true, NULL);
        struct al_error e = {0};
        cr_assert_eq(repo_config_apply_workspace(p, ws, "/root", &e), 0, "%s", e.msg);
        cr_assert_str_eq(p->image, "attacker-pick");
        policy_free(p);
}

Test(repo_image, operator_image_wins_untrusted, .init = setup, .fini = teardown)
{
        struct policy *p = container(false, "debian");
        struct al_error e = {0};
        cr_assert_eq(repo_config_apply_workspace(p, ws, "/root", &e), 0, "%s", e.msg);
        cr_assert_str_eq(p->image, "debian");
        cr_assert(p->repo_applied && strstr(p->repo_applied, "notTrusted") &&
                      strstr(p->repo_applied, "attacker-pick"),
                  "%s", p->repo_applied ? p->repo_applied : "(none)");
        policy_free(p);
}

Test(repo_image, namespace_tier_unaffected, .init = setup, .fini = teardown)
{
        struct policy *p = policy_new();
        struct al_error e = {0};
        p->workspace = xstrdup(ws);
        cr_assert_eq(policy_finalize(p, "/", "/root", &e), 0, "%s", e.msg);
        cr_assert_eq(repo_config_apply_workspace(p, ws, "/root", &e), 0, "%s", e.msg);
        cr_assert_null(p->image);
        policy_free(p);
}

/* The name is checked as an image name when the file is read: the
 * repository's bytes never reach a message (a terminal's escapes). */
Test(repo_image, bad_name_refused_at_load, .init = setup, .fini = teardown)
{
        static const char *const bad[] = {
            "{\"image\": \"\\u001b]0;owned\\u0007deb\"}",
            "{\"image\": \"../../x\"}",
            "{\"image\": \"\"}",
            "{\"image\": \"deb\\nian\"}",
        };
        char p[128];
        snprintf(p, sizeof(p), "%s/.airlock/isolation.json", ws);
        for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
                FILE *f = fopen(p, "w");
                cr_assert_not_null(f);
                fputs(bad[i], f);
                fclose(f);
                struct repo_config *rc = NULL;
                struct al_error e = {0};
                cr_assert_lt(repo_config_load(ws, &rc, &e), 0, "%s was accepted", bad[i]);
                cr_assert_null(strchr(e.msg, '\x1b'), "%s", e.msg);
                cr_assert(strstr(e.msg, "image"), "%s", e.msg);
        }
        /* An id and a plain name are fine. */
        FILE *f = fopen(p, "w");
        cr_assert_not_null(f);
        fputs("{\"image\": \"0123456789abcdef0123456789abcdef0123456789abcdef0123456789abcdef\"}",
              f);
        fclose(f);
        struct repo_config *rc = NULL;
        struct al_error e = {0};
        cr_assert_eq(repo_config_load(ws, &rc, &e), 0, "%s", e.msg);
        repo_config_free(rc);
}
