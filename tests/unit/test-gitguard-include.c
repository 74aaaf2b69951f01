/* SPDX-License-Identifier: Apache-2.0 */
/* Config the host's own .git/config includes from the working tree
 * (`[include] path = ../.gitconfig`, an includeIf): an ordinary file the
 * agent writes, which host git reads as config at every command. A
 * core.fsmonitor the run adds there ran at the user's next `git status`.
 * What the run made or changed in an included file is moved aside, as in
 * .git/config; the host's own stays (lib/git). */
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

static void repo(const char *config)
{
        snprintf(ws, sizeof(ws), "/tmp/airlock-gginc-XXXXXX");
        cr_assert_not_null(mkdtemp(ws));
        dir(".git");
        dir(".git/objects");
        dir(".git/refs");
        dir(".git/hooks");
        put(".git/HEAD", "ref: refs/heads/main\n");
        put(".git/config", config);
}

static struct gitguard *begin(void)
{
        return gg_begin_at(ws);
}

#define FSMONITOR "[core]\n\tfsmonitor = touch /tmp/airlock-pwned\n"

Test(gitguard_include, a_program_the_run_adds_to_an_included_file_is_moved_aside)
{
        repo("[core]\n\tbare = false\n[include]\n\tpath = ../.gitconfig-shared\n");
        put(".gitconfig-shared", "[user]\n\tname = Team\n");
        struct gitguard *g = begin();
        put(".gitconfig-shared", "[user]\n\tname = Team\n" FSMONITOR);
        int n = gitguard_finish(g, NULL, "t", NULL, NULL);
        cr_expect_eq(n, 1, "findings: %d", n);
        cr_expect_not(exists(".gitconfig-shared"), "the included fsmonitor stayed");
        cr_expect(exists(".gitconfig-shared.airlock-quarantine"));
        /* The host's config, unchanged, stays. */
        cr_expect(exists(".git/config"));
        fs_remove_tree(AT_FDCWD, ws, 100);
}

Test(gitguard_include, the_hosts_own_included_settings_stay)
{
        repo("[include]\n\tpath = ../.gitconfig-shared\n");
        put(".gitconfig-shared", "[filter \"lfs\"]\n\tclean = git-lfs clean -- %f\n");
        struct gitguard *g = begin();
        int n = gitguard_finish(g, NULL, "t", NULL, NULL);
        cr_expect_eq(n, 0, "findings: %d", n);
        cr_expect(exists(".gitconfig-shared"));
        fs_remove_tree(AT_FDCWD, ws, 100);
}

Test(gitguard_include, include_if_and_nested_includes_are_followed)
{
        char cfg[512];
        snprintf(cfg, sizeof(cfg),
                 "[includeIf \"gitdir:%s/\"]\n\tpath = %s/tools/git.cfg\n[include]\n\tpath = "
                 "../conf/a.cfg\n",
                 "/x", "/nonexistent");
        repo(cfg);
        dir("conf");
        put("conf/a.cfg", "[include]\n\tpath = b.cfg\n");
        put("conf/b.cfg", "[user]\n\tname = Team\n");
        /* includeIf, by an absolute path inside the tree. */
        dir("tools");
        snprintf(cfg, sizeof(cfg), "[includeIf \"onbranch:main\"]\n\tpath = %s/tools/git.cfg\n",
                 ws);
        char p[512];
        path(p, sizeof(p), ".git/config");
        FILE *f = fopen(p, "ae");
        cr_assert_not_null(f);
        fputs(cfg, f);
        fclose(f);
        struct gitguard *g = begin();
        put("conf/b.cfg", FSMONITOR);
        put("tools/git.cfg", FSMONITOR);
        int n = gitguard_finish(g, NULL, "t", NULL, NULL);
        cr_expect_eq(n, 2, "findings: %d", n);
        cr_expect_not(exists("conf/b.cfg"), "an include two deep stayed");
        cr_expect_not(exists("tools/git.cfg"), "an includeIf's file stayed");
        cr_expect(exists("conf/a.cfg"));
        fs_remove_tree(AT_FDCWD, ws, 100);
}

Test(gitguard_include, an_included_file_the_run_turned_into_a_link_is_moved_aside)
{
        repo("[include]\n\tpath = ../.gitconfig-shared\n");
        put(".gitconfig-shared", "[user]\n\tname = Team\n");
        dir("src");
        struct gitguard *g = begin();
        put("src/evil.cfg", FSMONITOR);
        char p[512];
        path(p, sizeof(p), ".gitconfig-shared");
        cr_assert_eq(unlink(p), 0);
        cr_assert_eq(symlink("src/evil.cfg", p), 0);
        gitguard_finish(g, NULL, "t", NULL, NULL);
        cr_expect_not(exists(".gitconfig-shared"), "the link to the agent's config stayed");
        fs_remove_tree(AT_FDCWD, ws, 100);
}

Test(gitguard_include, an_include_naming_a_directory_leaves_it_alone)
{
        repo("[include]\n\tpath = ../conf\n");
        dir("conf");
        put("conf/x", "data\n");
        struct gitguard *g = begin();
        int n = gitguard_finish(g, NULL, "t", NULL, NULL);
        cr_expect_eq(n, 0, "findings: %d", n);
        cr_expect(exists("conf/x"), "the host's directory was moved aside");
        fs_remove_tree(AT_FDCWD, ws, 100);
}
