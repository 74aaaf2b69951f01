/* SPDX-License-Identifier: Apache-2.0 */
/* A repository's mount source is checked when the config is applied (inside
 * the workspace, no link on the way); the agent can still swap a directory
 * of that path for a link before the mount is made. The mount must be made
 * from what lies beneath the workspace, without links, at mount time. */
#include <criterion/criterion.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "fs.h"
#include "mounts.h"
#include "policy.h"
#include "repo.h"
#include "util.h"

static char top[64], ws[96], outside[96];

static void put(const char *path, const char *text)
{
        FILE *f = fopen(path, "w");
        cr_assert_not_null(f);
        fputs(text, f);
        fclose(f);
}

static void setup(void)
{
        char p[160];
        snprintf(top, sizeof(top), "/tmp/airlock-rmr-XXXXXX");
        cr_assert_not_null(mkdtemp(top));
        snprintf(ws, sizeof(ws), "%s/ws", top);
        snprintf(outside, sizeof(outside), "%s/outside", top);
        cr_assert_eq(mkdir(ws, 0755), 0);
        cr_assert_eq(mkdir(outside, 0755), 0);
        snprintf(p, sizeof(p), "%s/.airlock", ws);
        cr_assert_eq(mkdir(p, 0755), 0);
        snprintf(p, sizeof(p), "%s/sub", ws);
        cr_assert_eq(mkdir(p, 0755), 0);
        snprintf(p, sizeof(p), "%s/sub/data", ws);
        put(p, "workspace\n");
        snprintf(p, sizeof(p), "%s/data", outside);
        put(p, "host secret\n");
        snprintf(p, sizeof(p), "%s/.airlock/isolation.json", ws);
        put(p, "{\"mounts\": [{\"source\": \"sub/data\", \"target\": \"/data\"}]}");
}

static void teardown(void)
{
        fs_remove_tree(AT_FDCWD, top, FS_REMOVE_DEPTH_MAX);
}

static struct policy *applied_policy(void)
{
        struct policy *p = policy_new();
        struct al_error e = {0};
        p->workspace = xstrdup(ws);
        p->trust_repo_config = true;
        cr_assert_eq(policy_finalize(p, "/", "/root", &e), 0, "%s", e.msg);
        struct repo_config *rc = NULL;
        cr_assert_eq(repo_config_load(ws, &rc, &e), 0, "%s", e.msg);
        json_t *applied = NULL;
        cr_assert_eq(repo_config_apply(rc, p, "/", "/root", &applied, &e), 0, "%s", e.msg);
        json_decref(applied);
        repo_config_free(rc);
        cr_assert_eq(p->n_mounts, 1u);
        return p;
}

Test(repo_mount_race, link_swapped_in_after_the_check_is_refused, .init = setup, .fini = teardown,
     .timeout = 20)
{
        struct policy *p = applied_policy();
        /* The agent, after the check: sub becomes a link out of the workspace. */
        char a[160], b[160];
        snprintf(a, sizeof(a), "%s/sub", ws);
        snprintf(b, sizeof(b), "%s/sub.old", ws);
        cr_assert_eq(rename(a, b), 0);
        cr_assert_eq(symlink(outside, a), 0);

        struct mounts_plan *plan = NULL;
        struct al_error e = {0};
        int r = mounts_plan_new(p, "/root", &plan, &e);
        if (r >= 0) {
                /* Whatever the plan holds must not be the outside file. */
                cr_assert(plan->mount_reals[0] == NULL ||
                              strncmp(plan->mount_reals[0], outside, strlen(outside)) != 0,
                          "the repository's mount resolved outside the workspace: %s",
                          plan->mount_reals[0]);
                mounts_plan_free(plan, p->n_mounts);
        } else {
                cr_assert(strstr(e.msg, "sub/data"), "%s", e.msg);
        }
        policy_free(p);
}

Test(repo_mount_race, unchanged_source_is_planned, .init = setup, .fini = teardown, .timeout = 20)
{
        struct policy *p = applied_policy();
        struct mounts_plan *plan = NULL;
        struct al_error e = {0};
        cr_assert_eq(mounts_plan_new(p, "/root", &plan, &e), 0, "%s", e.msg);
        char want[160];
        snprintf(want, sizeof(want), "%s/sub/data", ws);
        char real[4096];
        cr_assert_not_null(realpath(want, real));
        cr_assert_str_eq(plan->mount_reals[0], real);
        if (geteuid() == 0)
                cr_assert_geq(plan->mount_ro_fds[0], 0);
        mounts_plan_free(plan, p->n_mounts);
        policy_free(p);
}

/* As root the plan walks the workspace once (trusted_open) and pins it; a
 * repository's mount source must then be found beneath that pinned
 * directory, not beneath whatever the workspace's path names later. An
 * agent of another sandbox whose workspace holds this one's path (it
 * writes there as the caller) swaps the workspace for a link to a host
 * directory between the plan's walk and the mount. */
Test(repo_mount_race, workspace_swapped_after_the_walk_is_not_followed, .init = setup,
     .fini = teardown, .timeout = 20)
{
        if (geteuid() != 0)
                cr_skip_test("needs root (the workspace is pinned only as root)");
        struct policy *p = applied_policy();
        struct mounts_plan *plan = NULL;
        struct al_error e = {0};
        cr_assert_eq(mounts_plan_new(p, "/root", &plan, &e), 0, "%s", e.msg);
        cr_assert_geq(plan->workspace_fd, 0);

        /* The host directory the swap points at holds sub/data too. */
        char a[320], b[160];
        snprintf(a, sizeof(a), "%s/sub", outside);
        cr_assert_eq(mkdir(a, 0755), 0);
        snprintf(a, sizeof(a), "%s/sub/data", outside);
        put(a, "host secret\n");
        snprintf(b, sizeof(b), "%s.old", ws);
        cr_assert_eq(rename(ws, b), 0);
        cr_assert_eq(symlink(outside, ws), 0);

        int fd = mounts_open_source(p, plan->workspace_fd, &p->mounts[0]);
        cr_assert_geq(fd, 0, "%s", strerror(-fd));
        char proc[64], real[4096];
        snprintf(proc, sizeof(proc), "/proc/self/fd/%d", fd);
        ssize_t n = readlink(proc, real, sizeof(real) - 1);
        cr_assert_gt(n, 0);
        real[n] = '\0';
        close(fd);
        cr_assert(strncmp(real, outside, strlen(outside)) != 0,
                  "the repository's mount source was found through the swapped path: %s", real);
        snprintf(a, sizeof(a), "%s/sub/data", b);
        cr_assert_str_eq(real, a);
        mounts_plan_free(plan, p->n_mounts);
        policy_free(p);
}
