/* SPDX-License-Identifier: Apache-2.0 */
/* Hooks outside .git/hooks: a repository whose own config sets
 * core.hooksPath to a directory of its working tree (`.githooks`, husky's
 * `.husky/_`) runs whatever is there at the user's next `git commit` on
 * the host, and that directory is an ordinary one the agent writes. And
 * the hook managers' own files (pre-commit's .pre-commit-config.yaml,
 * husky's .husky/ scripts) name commands run at each commit. What the run
 * made or changed there is moved aside; the host's own hooks stay
 * (lib/git). */
#include <criterion/criterion.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "fs.h"
#include "gitguard.h"
#include "policy.h"
#include "util.h"

#include "gitguard-test-util.h"

static void repo_at(const char *top, const char *config)
{
        char rel[256];
        static const char *const dirs[] = {".git", ".git/objects", ".git/refs", ".git/hooks"};
        for (size_t i = 0; i < sizeof(dirs) / sizeof(dirs[0]); i++) {
                snprintf(rel, sizeof(rel), "%s%s%s", top, *top ? "/" : "", dirs[i]);
                dir(rel);
        }
        snprintf(rel, sizeof(rel), "%s%s.git/HEAD", top, *top ? "/" : "");
        put(rel, "ref: refs/heads/main\n");
        snprintf(rel, sizeof(rel), "%s%s.git/config", top, *top ? "/" : "");
        put(rel, config);
}

static void workspace(void)
{
        snprintf(ws, sizeof(ws), "/tmp/airlock-gghp-XXXXXX");
        cr_assert_not_null(mkdtemp(ws));
}

static struct gitguard *begin(void)
{
        return gg_begin_at(ws);
}

Test(gitguard_hookspath, hooks_the_run_put_in_a_relative_hooks_path_are_moved_aside)
{
        workspace();
        repo_at("", "[core]\n\tbare = false\n\thooksPath = .githooks\n");
        dir(".githooks");
        put(".githooks/pre-commit", "#!/bin/sh\nmake lint\n");
        put(".githooks/commit-msg", "#!/bin/sh\nexit 0\n");
        struct gitguard *g = begin();
        put(".githooks/post-checkout", "#!/bin/sh\ntouch /tmp/airlock-pwned\n");
        put(".githooks/pre-commit", "#!/bin/sh\ntouch /tmp/airlock-pwned\n");
        int n = gitguard_finish(g, NULL, "t", NULL, NULL);
        cr_expect_eq(n, 2, "findings: %d", n);
        cr_expect_not(exists(".githooks/post-checkout"), "a hook the run added stayed");
        cr_expect_not(exists(".githooks/pre-commit"), "a hook the run rewrote stayed");
        cr_expect(exists(".githooks/pre-commit.airlock-quarantine"));
        /* The host's own, untouched, stays. */
        cr_expect(exists(".githooks/commit-msg"));
        fs_remove_tree(AT_FDCWD, ws, 100);
}

Test(gitguard_hookspath, the_hosts_own_hooks_path_stays)
{
        workspace();
        repo_at("", "[core]\n\thooksPath = .githooks\n");
        dir(".githooks");
        put(".githooks/pre-commit", "#!/bin/sh\nmake lint\n");
        struct gitguard *g = begin();
        int n = gitguard_finish(g, NULL, "t", NULL, NULL);
        cr_expect_eq(n, 0, "findings: %d", n);
        cr_expect(exists(".githooks/pre-commit"));
        cr_expect(exists(".git/config"));
        fs_remove_tree(AT_FDCWD, ws, 100);
}

Test(gitguard_hookspath, an_absolute_hooks_path_in_a_nested_repository)
{
        workspace();
        dir("sub");
        dir("tools");
        dir("tools/hooks");
        char cfg[256];
        snprintf(cfg, sizeof(cfg), "[core]\n\thooksPath = %s/tools/hooks\n", ws);
        repo_at("sub", cfg);
        struct gitguard *g = begin();
        put("tools/hooks/pre-push", "#!/bin/sh\ntouch /tmp/airlock-pwned\n");
        int n = gitguard_finish(g, NULL, "t", NULL, NULL);
        cr_expect_eq(n, 1, "findings: %d", n);
        cr_expect_not(exists("tools/hooks/pre-push"));
        fs_remove_tree(AT_FDCWD, ws, 100);
}

Test(gitguard_hookspath, a_hooks_path_the_run_turned_into_a_link_is_moved_aside)
{
        workspace();
        repo_at("", "[core]\n\thooksPath = .githooks\n");
        dir(".githooks");
        dir("src");
        struct gitguard *g = begin();
        char p[512];
        path(p, sizeof(p), ".githooks");
        cr_assert_eq(rmdir(p), 0);
        cr_assert_eq(symlink("src", p), 0);
        put("src/pre-commit", "#!/bin/sh\ntouch /tmp/airlock-pwned\n");
        gitguard_finish(g, NULL, "t", NULL, NULL);
        cr_expect_not(exists(".githooks"), "the link git follows to the agent's hooks stayed");
        fs_remove_tree(AT_FDCWD, ws, 100);
}

Test(gitguard_hookspath, hook_managers_files_the_run_made_are_moved_aside)
{
        workspace();
        repo_at("", "[core]\n\tbare = false\n");
        dir("pkg");
        struct gitguard *g = begin();
        put(".pre-commit-config.yaml", "repos:\n- repo: local\n  hooks:\n  - id: x\n"
                                       "    name: x\n    entry: touch /tmp/airlock-pwned\n"
                                       "    language: system\n");
        dir("pkg/.husky");
        put("pkg/.husky/pre-commit", "touch /tmp/airlock-pwned\n");
        int n = gitguard_finish(g, NULL, "t", NULL, NULL);
        cr_expect_eq(n, 2, "findings: %d", n);
        cr_expect_not(exists(".pre-commit-config.yaml"));
        cr_expect_not(exists("pkg/.husky"));
        fs_remove_tree(AT_FDCWD, ws, 100);
}

Test(gitguard_hookspath, the_users_own_relative_hooks_path_names_one_in_each_tree)
{
        workspace();
        /* ~/.gitconfig: `core.hooksPath = .githooks` for every repository. */
        char home[64];
        snprintf(home, sizeof(home), "/tmp/airlock-gghome-XXXXXX");
        cr_assert_not_null(mkdtemp(home));
        char p[512];
        snprintf(p, sizeof(p), "%s/.gitconfig", home);
        FILE *f = fopen(p, "we");
        cr_assert_not_null(f);
        fputs("[core]\n\thooksPath = .githooks\n", f);
        fclose(f);
        cr_assert_eq(setenv("HOME", home, 1), 0);
        unsetenv("XDG_CONFIG_HOME");
        dir("sub");
        repo_at("sub", "[core]\n\tbare = false\n");
        struct gitguard *g = begin();
        dir("sub/.githooks");
        put("sub/.githooks/pre-commit", "#!/bin/sh\ntouch /tmp/airlock-pwned\n");
        int n = gitguard_finish(g, NULL, "t", NULL, NULL);
        cr_expect_eq(n, 1, "findings: %d", n);
        cr_expect_not(exists("sub/.githooks/pre-commit"));
        fs_remove_tree(AT_FDCWD, ws, 100);
        fs_remove_tree(AT_FDCWD, home, 10);
}

Test(gitguard_hookspath, the_script_a_hosts_hook_links_to_is_checked)
{
        workspace();
        repo_at("", "[core]\n\tbare = false\n");
        dir("scripts");
        put("scripts/pre-commit.sh", "#!/bin/sh\nmake lint\n");
        put("scripts/post-merge.sh", "#!/bin/sh\nmake deps\n");
        char p[512];
        path(p, sizeof(p), ".git/hooks/pre-commit");
        cr_assert_eq(symlink("../../scripts/pre-commit.sh", p), 0);
        path(p, sizeof(p), ".git/hooks/post-merge");
        char abs[512];
        snprintf(abs, sizeof(abs), "%s/scripts/post-merge.sh", ws);
        cr_assert_eq(symlink(abs, p), 0);
        struct gitguard *g = begin();
        put("scripts/pre-commit.sh", "#!/bin/sh\ntouch /tmp/airlock-pwned\n");
        int n = gitguard_finish(g, NULL, "t", NULL, NULL);
        cr_expect_eq(n, 1, "findings: %d", n);
        cr_expect_not(exists("scripts/pre-commit.sh"), "the script the hook runs stayed");
        /* The host's own links stay, and what they lead to untouched. */
        cr_expect(exists(".git/hooks/pre-commit"));
        cr_expect(exists("scripts/post-merge.sh"));
        fs_remove_tree(AT_FDCWD, ws, 100);
}
