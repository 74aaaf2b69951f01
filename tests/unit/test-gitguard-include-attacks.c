/* SPDX-License-Identifier: Apache-2.0 */
/* What the host's own git config reads or runs from the working tree by
 * ways the end-of-run scan did not follow: an included file reached
 * through the host's own symbolic link, or through a symlinked spelling of
 * the workspace (another path to it, /proc/self/cwd, ~user/), a
 * core.hooksPath set in an included file, a relative core.hooksPath of a
 * linked worktree or of a submodule whose pointer is absolute, and include
 * chains deeper than git reads. Each test lets the "agent" write after the
 * start, runs the scan, then runs real host git in the workspace and checks
 * the program the agent planted did not run (lib/git). */
#include <criterion/criterion.h>
#include <fcntl.h>
#include <limits.h>
#include <pwd.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "fs.h"
#include "gitguard.h"
#include "policy.h"
#include "util.h"

#include "gitguard-test-hostgit.h"

/* The control: without the scan, host git runs the planted program (so
 * each test below can fail). */
Test(gitguard_include_attacks, without_the_scan_host_git_runs_an_included_program)
{
        setup_ws();
        append(".git/config", "[include]\n\tpath = ../shared.cfg\n");
        agent_sets_fsmonitor("shared.cfg");
        host_git(".", "status");
        cr_expect(pwned(), "host git did not run the included fsmonitor: the tests prove nothing");
        cleanup();
}

Test(gitguard_include_attacks, the_hosts_own_link_to_an_included_file_is_followed)
{
        setup_ws();
        append(".git/config", "[include]\n\tpath = ../.gitconfig-shared\n");
        dir("conf");
        put("conf/real.cfg", "[user]\n\tname = Team\n");
        char p[512];
        path(p, sizeof(p), ".gitconfig-shared");
        cr_assert_eq(symlink("conf/real.cfg", p), 0);
        struct gitguard *g = begin();
        agent_sets_fsmonitor("conf/real.cfg");
        int n = finish(g);
        cr_expect_geq(n, 1, "findings: %d", n);
        cr_expect_not(exists("conf/real.cfg"), "the file the host's link leads to stayed");
        cr_expect(exists(".gitconfig-shared"), "the host's own link was moved");
        host_git(".", "status");
        cr_expect_not(pwned(), "host git ran the agent's program");
        cleanup();
}

Test(gitguard_include_attacks, an_include_naming_the_workspace_through_a_link)
{
        setup_ws();
        snprintf(link_path, sizeof(link_path), "%s-link", ws);
        cr_assert_eq(symlink(ws, link_path), 0);
        char cfg[512];
        snprintf(cfg, sizeof(cfg), "[includeIf \"gitdir:%s/\"]\n\tpath = %s/shared.cfg\n",
                 link_path, link_path);
        append(".git/config", cfg);
        put("shared.cfg", "[user]\n\tname = Team\n");
        struct gitguard *g = begin();
        agent_sets_fsmonitor("shared.cfg");
        expect_caught_at(g, "shared.cfg", ".", "status");
}

Test(gitguard_include_attacks, a_workspace_given_through_a_link_and_named_by_its_real_path)
{
        setup_ws();
        snprintf(link_path, sizeof(link_path), "%s-link", ws);
        cr_assert_eq(symlink(ws, link_path), 0);
        char cfg[512];
        snprintf(cfg, sizeof(cfg), "[include]\n\tpath = %s/shared.cfg\n", ws);
        append(".git/config", cfg);
        put("shared.cfg", "[user]\n\tname = Team\n");
        struct gitguard *g = gg_begin_at(link_path);
        agent_sets_fsmonitor("shared.cfg");
        expect_caught_at(g, "shared.cfg", ".", "status");
}

Test(gitguard_include_attacks, an_include_through_proc_self_cwd_fails_closed)
{
        setup_ws();
        append(".git/config", "[include]\n\tpath = /proc/self/cwd/shared.cfg\n");
        put("shared.cfg", "[user]\n\tname = Team\n");
        dir("sub");
        put("sub/shared.cfg", "[user]\n\tname = Team\n");
        struct gitguard *g = begin();
        agent_sets_fsmonitor("shared.cfg");
        agent_sets_fsmonitor("sub/shared.cfg");
        int n = finish(g);
        cr_expect_geq(n, 1, "findings: %d", n);
        host_git(".", "status");
        host_git("sub", "status");
        cr_expect_not(pwned(), "host git ran the agent's program");
        cleanup();
}

Test(gitguard_include_attacks, an_include_through_another_users_home_spelling)
{
        setup_ws();
        /* ~root/../tmp/... is this workspace, as git expands it. */
        struct passwd *pw = getpwuid(getuid());
        cr_assert_not_null(pw);
        char cfg[512];
        int depth = 0;
        for (const char *c = pw->pw_dir; *c; c++)
                depth += *c == '/';
        /* Climb out of the home directory, however deep it is. */
        char climb[256] = "";
        for (int i = 1; i < depth; i++)
                strncat(climb, "/..", sizeof(climb) - strlen(climb) - 1);
        snprintf(cfg, sizeof(cfg), "[include]\n\tpath = ~%s%s/..%s/shared.cfg\n", pw->pw_name,
                 climb, ws);
        append(".git/config", cfg);
        put("shared.cfg", "[user]\n\tname = Team\n");
        struct gitguard *g = begin();
        agent_sets_fsmonitor("shared.cfg");
        expect_caught_at(g, "shared.cfg", ".", "status");
}

Test(gitguard_include_attacks, a_hooks_path_set_in_an_included_file)
{
        setup_ws();
        append(".git/config", "[include]\n\tpath = ../shared.cfg\n");
        put("shared.cfg", "[core]\n\thooksPath = .githooks\n");
        dir(".githooks");
        struct gitguard *g = begin();
        agent_hook(".githooks/pre-commit");
        expect_caught_at(g, ".githooks/pre-commit", ".", "commit -q --allow-empty -m x");
}

Test(gitguard_include_attacks, a_relative_hooks_path_in_a_linked_worktree)
{
        setup_ws();
        append(".git/config", "[core]\n\thooksPath = .githooks\n");
        host_git(".", "commit -q --allow-empty -m init");
        host_git(".", "worktree add -q wt2");
        cr_assert(exists("wt2/.git"));
        dir("wt2/.githooks");
        struct gitguard *g = begin();
        agent_hook("wt2/.githooks/pre-commit");
        expect_caught_at(g, "wt2/.githooks/pre-commit", "wt2", "commit -q --allow-empty -m x");
}

Test(gitguard_include_attacks, a_hooks_path_in_a_linked_worktrees_config_worktree)
{
        setup_ws();
        append(".git/config", "[extensions]\n\tworktreeConfig = true\n");
        host_git(".", "config core.repositoryformatversion 1");
        host_git(".", "commit -q --allow-empty -m init");
        host_git(".", "worktree add -q wt2");
        put(".git/worktrees/wt2/config.worktree", "[core]\n\thooksPath = hooks2\n");
        dir("wt2/hooks2");
        struct gitguard *g = begin();
        agent_hook("wt2/hooks2/pre-commit");
        expect_caught_at(g, "wt2/hooks2/pre-commit", "wt2", "commit -q --allow-empty -m x");
}

Test(gitguard_include_attacks, a_relative_hooks_path_of_a_submodule_with_an_absolute_pointer)
{
        setup_ws();
        dir(".git/modules");
        char cmd[512];
        snprintf(cmd, sizeof(cmd),
                 "git init -q -b main --separate-git-dir=%s/.git/modules/sub %s/sub", ws, ws);
        sh(cmd);
        append(".git/modules/sub/config", "[core]\n\thooksPath = .githooks\n");
        dir("sub/.githooks");
        struct gitguard *g = begin();
        agent_hook("sub/.githooks/pre-commit");
        expect_caught_at(g, "sub/.githooks/pre-commit", "sub", "commit -q --allow-empty -m x");
}

Test(gitguard_include_attacks, includes_deeper_than_git_reads_are_recorded)
{
        setup_ws();
        /* A cycle in the host's own includes: git stops at its depth. */
        append(".git/config", "[include]\n\tpath = ../a.cfg\n");
        put("a.cfg", "[include]\n\tpath = b.cfg\n");
        put("b.cfg", "[include]\n\tpath = a.cfg\n");
        struct gitguard *g = begin();
        int n = finish(g);
        cr_expect_geq(n, 1, "an include chain deeper than git reads was passed over");
        cleanup();
}

Test(gitguard_include_attacks, odd_spellings_of_an_include_in_the_hosts_config)
{
        setup_ws();
        /* Case, quotes, a continuation line, a key on the header's line. */
        append(".git/config", "[InClUdE] PaTh = \"../sha\"\\\n\"red.cfg\"\n"
                              "[INCLUDEIF \"hasconfig:remote.*.url:https://x/**\"]\n"
                              "\tpath = ../other.cfg\n");
        put("shared.cfg", "[user]\n\tname = Team\n");
        put("other.cfg", "[include]\n\tpath = conf/deep.cfg\n");
        dir("conf");
        put("conf/deep.cfg", "[user]\n\tname = Team\n");
        struct gitguard *g = begin();
        agent_sets_fsmonitor("shared.cfg");
        agent_sets_fsmonitor("conf/deep.cfg");
        int n = finish(g);
        cr_expect_geq(n, 2, "findings: %d", n);
        cr_expect_not(exists("shared.cfg"));
        cr_expect_not(exists("conf/deep.cfg"));
        host_git(".", "status");
        cr_expect_not(pwned(), "host git ran the agent's program");
        cleanup();
}

Test(gitguard_include_attacks, a_program_an_included_file_names_in_the_tree)
{
        setup_ws();
        append(".git/config", "[include]\n\tpath = ../shared.cfg\n");
        put("shared.cfg", "[core]\n\tfsmonitor = tools/fsm.sh\n");
        dir("tools");
        put("tools/fsm.sh", "#!/bin/sh\nexit 1\n");
        struct gitguard *g = begin();
        agent_hook("tools/fsm.sh");
        expect_caught_at(g, "tools/fsm.sh", ".", "status");
}

Test(gitguard_include_attacks, an_include_in_the_hosts_config_worktree)
{
        setup_ws();
        append(".git/config", "[extensions]\n\tworktreeConfig = true\n");
        host_git(".", "config core.repositoryformatversion 1");
        put(".git/config.worktree", "[include]\n\tpath = ../shared.cfg\n");
        put("shared.cfg", "[user]\n\tname = Team\n");
        struct gitguard *g = begin();
        agent_sets_fsmonitor("shared.cfg");
        expect_caught_at(g, "shared.cfg", ".", "status");
}

/* The workspace is a linked worktree of a repository outside it (`git
 * worktree add ../agent-ws`): that repository's config is the host's, but
 * its relative core.hooksPath names a directory of the workspace. */
Test(gitguard_include_attacks, a_workspace_that_is_a_linked_worktree_of_an_outside_repository)
{
        setup_ws();
        char cmd[1024];
        snprintf(cmd, sizeof(cmd),
                 "git init -q -b main %s/repo && git -C %s/repo -c user.name=u "
                 "-c user.email=u@e commit -q --allow-empty -m init && "
                 "printf '[core]\\n\\thooksPath = .githooks\\n' >> %s/repo/.git/config && "
                 "rm -rf %s && git -C %s/repo worktree add -q %s",
                 home, home, home, ws, home, ws);
        sh(cmd);
        dir(".githooks");
        struct gitguard *g = begin();
        agent_hook(".githooks/pre-commit");
        expect_caught_at(g, ".githooks/pre-commit", ".", "commit -q --allow-empty -m x");
}

/* The same for a workspace inside a linked worktree: its config is the
 * repository's (commondir), with the worktree's config.worktree over it. */
Test(gitguard_include_attacks, a_workspace_inside_a_linked_worktree_of_an_outside_repository)
{
        setup_ws();
        char cmd[1024];
        snprintf(cmd, sizeof(cmd),
                 "git init -q -b main %s/repo && git -C %s/repo -c user.name=u "
                 "-c user.email=u@e commit -q --allow-empty -m init && "
                 "printf '[core]\\n\\thooksPath = pkg/hooks\\n' >> %s/repo/.git/config && "
                 "git -C %s/repo worktree add -q %s/wt && mkdir -p %s/wt/pkg/hooks",
                 home, home, home, home, home, home);
        sh(cmd);
        /* This test's workspace is wt/pkg. */
        char inner[64];
        snprintf(inner, sizeof(inner), "%s", ws);
        cr_assert_lt(snprintf(ws, sizeof(ws), "%s/wt/pkg", home), (int)sizeof(ws));
        struct gitguard *g = begin();
        agent_hook("hooks/pre-commit");
        int n = finish(g);
        cr_expect_geq(n, 1, "findings: %d", n);
        cr_expect_not(exists("hooks/pre-commit"), "the agent's hook stayed");
        host_git(".", "commit -q --allow-empty -m x");
        cr_expect_not(pwned(), "host git ran the agent's hook");
        fs_remove_tree(AT_FDCWD, inner, 100);
        snprintf(ws, sizeof(ws), "%s", inner);
        cleanup();
}

/* The host's own link to a config outside the workspace is not followed
 * out of it, nor is what it leads to moved. */
Test(gitguard_include_attacks, a_link_out_of_the_workspace_is_the_hosts)
{
        setup_ws();
        char out[128];
        snprintf(out, sizeof(out), "%s/outside.cfg", home);
        FILE *f = fopen(out, "we");
        cr_assert_not_null(f);
        fputs("[user]\n\tname = Team\n", f);
        fclose(f);
        append(".git/config", "[include]\n\tpath = ../shared.cfg\n");
        char p[512];
        path(p, sizeof(p), "shared.cfg");
        cr_assert_eq(symlink(out, p), 0);
        struct gitguard *g = begin();
        int n = finish(g);
        cr_expect_eq(n, 0, "findings: %d", n);
        cr_expect(exists("shared.cfg"));
        cr_expect_eq(access(out, F_OK), 0);
        cleanup();
}

/* A submodule's own config includes a file of the superproject's tree. */
Test(gitguard_include_attacks, an_include_in_a_submodules_config)
{
        setup_ws();
        dir(".git/modules");
        char cmd[512];
        snprintf(cmd, sizeof(cmd),
                 "git init -q -b main --separate-git-dir=%s/.git/modules/sub %s/sub", ws, ws);
        sh(cmd);
        append(".git/modules/sub/config", "[include]\n\tpath = ../../../shared.cfg\n");
        put("shared.cfg", "[user]\n\tname = Team\n");
        struct gitguard *g = begin();
        agent_sets_fsmonitor("shared.cfg");
        expect_caught_at(g, "shared.cfg", "sub", "status");
}

/* A host config that includes one file many times over, to git's depth:
 * the scan reads a bounded number of them and says so. */
Test(gitguard_include_attacks, a_wide_include_tree_is_bounded, .timeout = 20)
{
        setup_ws();
        append(".git/config", "[include]\n\tpath = ../a.cfg\n");
        put("a.cfg", "[include]\n\tpath = a.cfg\n\tpath = a.cfg\n\tpath = a.cfg\n"
                     "\tpath = a.cfg\n");
        struct gitguard *g = begin();
        int n = finish(g);
        cr_expect_geq(n, 1, "findings: %d", n);
        cleanup();
}

/* The user's own ~/.gitconfig includes a file of the workspace (an
 * includeIf for the project's directory): git reads it as config in every
 * repository there. */
Test(gitguard_include_attacks, a_file_of_the_workspace_the_users_global_config_includes)
{
        setup_ws();
        cr_assert_eq(setenv("HOME", home, 1), 0);
        char p[256], cfg[512];
        snprintf(p, sizeof(p), "%s/.gitconfig", home);
        snprintf(cfg, sizeof(cfg), "[includeIf \"gitdir:%s/\"]\n\tpath = %s/.gitconfig-local\n", ws,
                 ws);
        write_host(p, cfg);
        put(".gitconfig-local", "[user]\n\tname = Team\n");
        struct gitguard *g = begin();
        agent_sets_fsmonitor(".gitconfig-local");
        expect_caught_at(g, ".gitconfig-local", ".", "status");
}

/* The repository's config includes a file of the host's outside the
 * workspace, which includes one of the workspace in turn. */
Test(gitguard_include_attacks, an_include_out_of_the_workspace_and_back_in)
{
        setup_ws();
        char p[256], cfg[512];
        snprintf(p, sizeof(p), "%s/team.cfg", home);
        snprintf(cfg, sizeof(cfg), "[include]\n\tpath = %s/local.cfg\n", ws);
        write_host(p, cfg);
        snprintf(cfg, sizeof(cfg), "[include]\n\tpath = %s\n", p);
        append(".git/config", cfg);
        put("local.cfg", "[user]\n\tname = Team\n");
        struct gitguard *g = begin();
        agent_sets_fsmonitor("local.cfg");
        expect_caught_at(g, "local.cfg", ".", "status");
}

/* The repository's config includes a file of another read-write tree of
 * the run (a mount the agent writes, scanned as a tree of its own, where
 * that file is no repository's config): the config fails closed. */
Test(gitguard_include_attacks, an_include_in_another_read_write_tree)
{
        setup_ws();
        char other[128], cfg[512];
        snprintf(other, sizeof(other), "%s/rw", home);
        cr_assert_eq(mkdir(other, 0755), 0);
        snprintf(cfg, sizeof(cfg), "[include]\n\tpath = %s/team.cfg\n", other);
        append(".git/config", cfg);
        char p[256];
        snprintf(p, sizeof(p), "%s/team.cfg", other);
        FILE *f = fopen(p, "we");
        cr_assert_not_null(f);
        fputs("[user]\n\tname = Team\n", f);
        fclose(f);
        usleep(30 * 1000);
        struct policy *pol = policy_new();
        struct al_error e = {0};
        char json[768];
        snprintf(json, sizeof(json),
                 "{\"workspace\": {\"path\": \"%s\", \"mode\": \"rw\"}, \"filesystem\": "
                 "{\"mounts\": [{\"source\": \"%s\", \"target\": \"/mnt/rw\", "
                 "\"readonly\": false}]}}",
                 ws, other);
        cr_assert_eq(policy_load_string(pol, json, "policy.json", &e), 0, "%s", e.msg);
        cr_assert_eq(policy_finalize(pol, "/", "/root", &e), 0, "%s", e.msg);
        struct gitguard *g = gitguard_begin(pol);
        cr_assert_not_null(g);
        policy_free(pol);
        f = fopen(p, "ae");
        cr_assert_not_null(f);
        char t[256];
        fsmonitor_text(t, sizeof(t));
        fputs(t, f);
        fclose(f);
        int n = finish(g);
        cr_expect_geq(n, 1, "findings: %d", n);
        host_git(".", "status");
        cr_expect_not(pwned(), "host git ran the agent's program");
        cleanup();
}
