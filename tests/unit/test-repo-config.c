/* SPDX-License-Identifier: Apache-2.0 */
/* The tier in the policy, and the repository config (.airlock/isolation.json):
 * strict validation of a hostile file, minimumTier always, the rest only
 * tightening or only when trusted. */
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
        snprintf(ws, sizeof(ws), "/tmp/airlock-repo-XXXXXX");
        cr_assert_not_null(mkdtemp(ws));
        char p[128];
        snprintf(p, sizeof(p), "%s/.airlock", ws);
        cr_assert_eq(mkdir(p, 0755), 0);
        snprintf(p, sizeof(p), "%s/fix", ws);
        cr_assert_eq(mkdir(p, 0755), 0);
}

static void teardown(void)
{
        fs_remove_tree(AT_FDCWD, ws, FS_REMOVE_DEPTH_MAX);
}

static void write_cfg(const char *text)
{
        char p[128];
        snprintf(p, sizeof(p), "%s/.airlock/isolation.json", ws);
        unlink(p);
        FILE *f = fopen(p, "w");
        cr_assert_not_null(f);
        fputs(text, f);
        fclose(f);
}

static struct policy *finalized(bool trusted)
{
        struct policy *p = policy_new();
        struct al_error e = {0};
        p->workspace = xstrdup(ws);
        p->trust_repo_config = trusted;
        cr_assert_eq(policy_finalize(p, "/", "/root", &e), 0, "%s", e.msg);
        return p;
}

static void load_fails(const char *text, const char *part)
{
        struct repo_config *rc = NULL;
        struct al_error e = {0};
        write_cfg(text);
        cr_assert_lt(repo_config_load(ws, &rc, &e), 0, "%s was accepted", text);
        cr_assert(strstr(e.msg, part), "%s: \"%s\" lacks \"%s\"", text, e.msg, part);
        cr_assert_null(rc);
}

Test(tier, names_round_trip)
{
        for (int t = 0; t < POLICY_TIER_COUNT_; t++) {
                enum policy_tier back;
                cr_assert_eq(policy_tier_parse(policy_tier_name((enum policy_tier)t), &back), 0);
                cr_assert_eq((int)back, t);
        }
        enum policy_tier x;
        cr_assert_lt(policy_tier_parse("vm", &x), 0);
        cr_assert_lt(policy_tier_parse(NULL, &x), 0);
        cr_assert_null(policy_tier_name(POLICY_TIER_COUNT_));
}

Test(tier, policy_key_checked_and_serialized)
{
        struct policy *p = policy_new();
        struct al_error e = {0};
        cr_assert_lt(policy_load_string(p, "{\"tier\": \"chroot\"}", "p", &e), 0);
        cr_assert(strstr(e.msg, "tier"), "%s", e.msg);
        cr_assert_eq(
            policy_load_string(p, "{\"tier\": \"container\", \"image\": \"deb\"}", "p", &e), 0,
            "%s", e.msg);
        char *j = policy_to_json(p);
        cr_assert(strstr(j, "\"tier\":\"container\"") && strstr(j, "\"image\":\"deb\""), "%s", j);
        free(j);
        policy_free(p);
        /* The default tier leaves the canonical form as it was. */
        p = policy_new();
        j = policy_to_json(p);
        cr_assert_null(strstr(j, "tier"), "%s", j);
        free(j);
        policy_free(p);
}

Test(repo_config, none_is_fine, .init = setup, .fini = teardown)
{
        struct repo_config *rc = (void *)1;
        struct al_error e = {0};
        cr_assert_eq(repo_config_load(ws, &rc, &e), 0);
        cr_assert_null(rc);
}

Test(repo_config, hostile_files_refused, .init = setup, .fini = teardown)
{
        load_fails("{\"minimumTier\": \"kernel\"}", "minimumTier");
        load_fails("{\"other\": 1}", "unknown key");
        load_fails("{\"env\": {\"A\": \"1\", \"A\": \"2\"}}", "duplicate");
        load_fails("{\"mounts\": [{\"source\": \"../x\", \"target\": \"/x\"}]}",
                   "inside the workspace");
        load_fails("{\"mounts\": [{\"source\": \"/etc\", \"target\": \"/x\"}]}",
                   "inside the workspace");
        load_fails("{\"mounts\": [{\"source\": \"fix\", \"target\": \"/x\", \"readonly\": false}]}",
                   "read-only");
        load_fails("{\"mounts\": [{\"source\": \"fix\", \"target\": \"/x\", \"extra\": 1}]}",
                   "mounts[0]");
        load_fails("{\"allowedDomains\": [1]}", "allowedDomains[0]");
        load_fails("[]", "object");
        /* A link in its place is not followed. */
        char p[128];
        snprintf(p, sizeof(p), "%s/.airlock/isolation.json", ws);
        unlink(p);
        cr_assert_eq(symlink("/etc/passwd", p), 0);
        struct repo_config *rc = NULL;
        struct al_error e = {0};
        cr_assert_lt(repo_config_load(ws, &rc, &e), 0);
        cr_assert(strstr(e.msg, "symbolic link"), "%s", e.msg);
}

Test(repo_config, minimum_tier_always, .init = setup, .fini = teardown)
{
        write_cfg("{\"minimumTier\": \"container\"}");
        struct repo_config *rc = NULL;
        struct al_error e = {0};
        cr_assert_eq(repo_config_load(ws, &rc, &e), 0, "%s", e.msg);
        struct policy *p = finalized(true);
        json_t *applied = NULL;
        cr_assert_lt(repo_config_apply(rc, p, "/", "/root", &applied, &e), 0);
        cr_assert(strstr(e.msg, "requires tier container") && strstr(e.msg, "is namespace"), "%s",
                  e.msg);
        p->tier = POLICY_TIER_GVISOR; /* stronger is fine */
        cr_assert_eq(repo_config_apply(rc, p, "/", "/root", &applied, &e), 0, "%s", e.msg);
        json_decref(applied);
        policy_free(p);
        repo_config_free(rc);
}

Test(repo_config, reach_only_when_trusted, .init = setup, .fini = teardown)
{
        write_cfg("{\"allowedDomains\": [\"pypi.org\"], \"mounts\": [{\"source\": \"fix\", "
                  "\"target\": \"/fix\"}], \"env\": {\"A\": \"1\"}, \"limits\": {\"memory\": "
                  "\"64M\", \"pids\": 100000}}");
        struct repo_config *rc = NULL;
        struct al_error e = {0};
        cr_assert_eq(repo_config_load(ws, &rc, &e), 0, "%s", e.msg);
        for (int trusted = 0; trusted < 2; trusted++) {
                struct policy *p = finalized(trusted);
                uint64_t pids = p->limits.pids;
                json_t *applied = NULL;
                cr_assert_eq(repo_config_apply(rc, p, "/", "/root", &applied, &e), 0, "%s", e.msg);
                cr_assert_eq(p->n_net_allow, trusted ? 1u : 0u);
                cr_assert_eq(p->n_mounts, trusted ? 1u : 0u);
                if (trusted)
                        cr_assert(p->mounts[0].readonly);
                cr_assert_eq(p->net_mode, trusted ? POLICY_NET_GATED : POLICY_NET_NONE);
                cr_assert_eq(p->n_env, trusted ? 1u : 0u);
                cr_assert_eq(p->limits.memory, 64ULL << 20); /* tightened */
                cr_assert_eq(p->limits.pids, pids);          /* never loosened */
                cr_assert_eq(json_object_get(applied, "notTrusted") == NULL, trusted == 1);
                json_decref(applied);
                policy_free(p);
        }
        repo_config_free(rc);
}
