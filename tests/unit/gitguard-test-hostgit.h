/* SPDX-License-Identifier: Apache-2.0 */
#pragma once

/* The gitguard attack tests that run real host git after the scan: a
 * repository at ws (git init), a HOME of the host user's outside it, the
 * agent's program (it creates marker), and host git run as the user would
 * run it once the run is over. */

#include <criterion/criterion.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <unistd.h>

#include "fs.h"
#include "gitguard.h"

#define GG_TEST_PUT_MODE 0755
#include "gitguard-test-util.h"

static char home[64];    /* the host user's HOME for host git, outside ws */
static char marker[128]; /* what the agent's program would create */
static char link_path[128];

static inline void sh(const char *cmd)
{
        int r = system(cmd);
        cr_assert_eq(r, 0, "%s: %d", cmd, r);
}

static inline bool have_git(void)
{
        return access("/usr/bin/git", X_OK) == 0 || access("/bin/git", X_OK) == 0;
}

static inline void setup_ws(void)
{
        if (!have_git())
                cr_skip_test("git is not installed");
        snprintf(ws, sizeof(ws), "/tmp/airlock-ggia-XXXXXX");
        cr_assert_not_null(mkdtemp(ws));
        snprintf(home, sizeof(home), "/tmp/airlock-ggia-home-XXXXXX");
        cr_assert_not_null(mkdtemp(home));
        snprintf(marker, sizeof(marker), "%s/pwned", home);
        char cmd[512];
        snprintf(cmd, sizeof(cmd), "git init -q -b main %s", ws);
        sh(cmd);
        link_path[0] = '\0';
}

static inline void cleanup(void)
{
        if (link_path[0])
                unlink(link_path);
        fs_remove_tree(AT_FDCWD, ws, 100);
        fs_remove_tree(AT_FDCWD, home, 100);
}

/* Host git, as the user would run it after the run, in ws/sub, with env
 * ("NAME=VALUE ...", after the defaults) in its environment. */
static inline void host_git_env(const char *env, const char *sub, const char *args)
{
        char cmd[1536];
        snprintf(cmd, sizeof(cmd),
                 "cd %s/%s && env -i PATH=/usr/bin:/bin HOME=%s GIT_CONFIG_NOSYSTEM=1 %s "
                 "timeout 20 git -c user.name=u -c user.email=u@example.com %s >/dev/null 2>&1",
                 ws, sub, home, env, args);
        if (system(cmd) < 0)
                cr_log_warn("%s: %m", cmd);
}

static inline void host_git(const char *sub, const char *args)
{
        host_git_env("", sub, args);
}

static inline bool pwned(void)
{
        return access(marker, F_OK) == 0;
}

static inline struct gitguard *begin(void)
{
        return gg_begin_at(ws);
}

/* The agent's program: a config setting it, and a hook running it. */
static inline void fsmonitor_text(char *buf, size_t n)
{
        snprintf(buf, n, "[core]\n\tfsmonitor = \"touch %s\"\n", marker);
}

static inline void agent_sets_fsmonitor(const char *rel)
{
        char t[256];
        fsmonitor_text(t, sizeof(t));
        append(rel, t);
}

static inline void agent_hook(const char *rel)
{
        char t[256];
        snprintf(t, sizeof(t), "#!/bin/sh\ntouch %s\n", marker);
        put(rel, t);
}

static inline int finish(struct gitguard *g)
{
        return gitguard_finish(g, NULL, "t", NULL, NULL);
}

/* A file of the host's, outside the workspace, at an absolute path. */
static inline void write_host(const char *p, const char *text)
{
        FILE *f = fopen(p, "we");
        cr_assert_not_null(f, "%s", p);
        fputs(text, f);
        fclose(f);
}

/* The end of the run: the scan found something, the agent's file `rel`
 * was moved aside, and host git (`git ARGS` in ws/sub) then runs none of
 * the agent's programs. */
static inline void expect_caught_at(struct gitguard *g, const char *rel, const char *sub,
                                    const char *args)
{
        int n = finish(g);
        cr_expect_geq(n, 1, "findings: %d", n);
        cr_expect_not(exists(rel), "the agent's %s stayed", rel);
        host_git(sub, args);
        cr_expect_not(pwned(), "host git %s ran the agent's program", args);
        cleanup();
}
