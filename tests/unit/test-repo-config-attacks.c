/* SPDX-License-Identifier: Apache-2.0 */
/* Attacks on the repository config (.airlock/isolation.json): what it asks
 * for is applied only when it tightens, or when trusted; nothing it is let
 * say is accepted and then dropped. */
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
        snprintf(ws, sizeof(ws), "/tmp/airlock-repoatk-XXXXXX");
        cr_assert_not_null(mkdtemp(ws));
        char p[128];
        snprintf(p, sizeof(p), "%s/.airlock", ws);
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

static struct policy *finalized(const char *policy_json, bool trusted)
{
        struct policy *p = policy_new();
        struct al_error e = {0};
        if (policy_json)
                cr_assert_eq(policy_load_string(p, policy_json, "test", &e), 0, "%s", e.msg);
        p->workspace = xstrdup(ws);
        p->trust_repo_config = trusted;
        cr_assert_eq(policy_finalize(p, "/", "/root", &e), 0, "%s", e.msg);
        return p;
}

static json_t *apply(const char *cfg, struct policy *p)
{
        struct repo_config *rc = NULL;
        struct al_error e = {0};
        json_t *applied = NULL;
        write_cfg(cfg);
        cr_assert_eq(repo_config_load(ws, &rc, &e), 0, "%s", e.msg);
        cr_assert_eq(repo_config_apply(rc, p, "/", "/root", &applied, &e), 0, "%s", e.msg);
        repo_config_free(rc);
        return applied;
}

/* limits.io was accepted by the parser and then never applied: a repository
 * asking for an I/O ceiling got none, and the audit said nothing. */
Test(repo_config_attacks, io_limits_tighten, .init = setup, .fini = teardown)
{
        struct policy *p = finalized("{\"limits\": {\"io\": {\"readBps\": \"1M\"}}}", false);
        json_t *applied =
            apply("{\"limits\": {\"io\": {\"writeBps\": \"2M\", \"readBps\": \"8M\"}}}", p);
        cr_assert_eq(p->limits.io.write_bps, 2ULL << 20, "writeBps not tightened");
        cr_assert_eq(p->limits.io.read_bps, 1ULL << 20, "readBps loosened");
        json_t *io = json_object_get(json_object_get(applied, "limits"), "io");
        cr_assert(json_is_object(io) &&
                      json_integer_value(json_object_get(io, "writeBps")) == 2LL << 20,
                  "the audit does not say what was applied");
        json_decref(applied);
        policy_free(p);
}

/* A repository's env reached every process the agent started without
 * trust: LD_PRELOAD (or BASH_ENV, PYTHONSTARTUP, NODE_OPTIONS...) naming a
 * file of the repository ran its code in the agent before the agent read
 * a line. Now env is asked, and applied only when trusted. */
Test(repo_config_attacks, env_only_when_trusted, .init = setup, .fini = teardown)
{
        const char *cfg = "{\"env\": {\"LD_PRELOAD\": \"/workspace/.x.so\", \"BASH_ENV\": "
                          "\"/workspace/.x.sh\"}}";
        for (int trusted = 0; trusted < 2; trusted++) {
                struct policy *p = finalized("{\"env\": {\"BASH_ENV\": \"/etc/mine\"}}", trusted);
                json_t *applied = apply(cfg, p);
                bool preload = false;
                for (size_t i = 0; i < p->n_env; i++) {
                        preload = preload || STREQ(p->env[i].key, "LD_PRELOAD");
                        if (STREQ(p->env[i].key, "BASH_ENV")) /* the operator's wins */
                                cr_assert_str_eq(p->env[i].value, "/etc/mine");
                }
                cr_assert_eq(preload, trusted == 1, "trusted=%d: LD_PRELOAD %s", trusted,
                             preload ? "applied" : "not applied");
                json_t *nt = json_object_get(applied, "notTrusted");
                cr_assert_eq(json_is_array(json_object_get(nt, "env")), trusted == 0,
                             "notTrusted does not name the env it refused");
                json_decref(applied);
                policy_free(p);
        }
}
