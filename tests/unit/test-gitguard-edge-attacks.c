/* SPDX-License-Identifier: Apache-2.0 */
/* Where the paths the host's git config names lead, as an attacker who
 * writes every file of the workspace but not .git/config sees it: a ".."
 * after a directory the agent turned into a symbolic link is taken by the
 * kernel from where the link leads (`tools/../.githooks` is beside the
 * link's target), not by text; and the user's own configs are those host
 * git reads, GIT_CONFIG_GLOBAL and GIT_CONFIG_SYSTEM included. Each test
 * lets the "agent" write after the start, runs the scan, then runs real
 * host git and checks the program the agent planted did not run
 * (lib/git). */
#include <criterion/criterion.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include "fs.h"
#include "gitguard.h"
#include "policy.h"
#include "util.h"

#include "gitguard-test-hostgit.h"

/* The agent turns the directory tools into a link to evil/deep: a ".."
 * after it is then evil, for git. */
static void agent_links_tools(void)
{
        char p[512];
        path(p, sizeof(p), "tools");
        cr_assert_eq(rmdir(p), 0);
        dir("evil");
        dir("evil/deep");
        cr_assert_eq(symlink("evil/deep", p), 0);
}

static void hooks_path_through_tools(void)
{
        setup_ws();
        append(".git/config", "[core]\n\thooksPath = tools/../.githooks\n");
        dir("tools");
        dir(".githooks");
}

/* The control: host git takes the ".." from the link's target, and runs
 * the agent's hook there (so the test below can fail). */
Test(gitguard_edge_attacks, without_the_scan_git_takes_dotdot_from_the_links_target)
{
        hooks_path_through_tools();
        agent_links_tools();
        dir("evil/.githooks");
        agent_hook("evil/.githooks/pre-commit");
        host_git(".", "commit -q --allow-empty -m x");
        cr_expect(pwned(), "host git did not run the hook: the tests prove nothing");
        cleanup();
}

Test(gitguard_edge_attacks, a_hooks_path_with_dotdot_after_the_agents_link)
{
        hooks_path_through_tools();
        struct gitguard *g = begin();
        agent_links_tools();
        dir("evil/.githooks");
        agent_hook("evil/.githooks/pre-commit");
        int n = finish(g);
        cr_expect_geq(n, 1, "findings: %d", n);
        host_git(".", "commit -q --allow-empty -m x");
        cr_expect_not(pwned(), "host git ran the agent's hook beside the link's target");
        cleanup();
}

Test(gitguard_edge_attacks, an_include_with_dotdot_after_the_agents_link)
{
        setup_ws();
        append(".git/config", "[include]\n\tpath = ../tools/../shared.cfg\n");
        dir("tools");
        struct gitguard *g = begin();
        agent_links_tools();
        agent_sets_fsmonitor("evil/shared.cfg");
        expect_caught_at(g, "evil/shared.cfg", ".", "status");
}

Test(gitguard_edge_attacks, an_absolute_program_with_dotdot_after_the_agents_link)
{
        setup_ws();
        char cfg[256];
        snprintf(cfg, sizeof(cfg), "[core]\n\tfsmonitor = %s/tools/../fsm.sh\n", ws);
        append(".git/config", cfg);
        dir("tools");
        struct gitguard *g = begin();
        agent_links_tools();
        agent_hook("evil/fsm.sh");
        expect_caught_at(g, "evil/fsm.sh", ".", "status");
}

/* The host's own ".." with no link on the way is read as before: its
 * hooks stay, the agent's are moved aside. */
Test(gitguard_edge_attacks, a_hooks_path_with_dotdot_and_no_link_is_still_checked)
{
        hooks_path_through_tools();
        put(".githooks/commit-msg", "#!/bin/sh\nexit 0\n");
        struct gitguard *g = begin();
        agent_hook(".githooks/pre-commit");
        int n = finish(g);
        cr_expect_eq(n, 1, "findings: %d", n);
        cr_expect(exists(".githooks/commit-msg"), "the host's own hook was moved");
        host_git(".", "commit -q --allow-empty -m x");
        cr_expect_not(pwned(), "host git ran the agent's hook");
        cleanup();
}

/* A nested .git pointer the agent wrote through its own link and a "..":
 * git reads the repository beside the link's target. */
Test(gitguard_edge_attacks, a_pointer_with_dotdot_after_the_agents_link_is_moved_aside)
{
        setup_ws();
        dir("tools");
        struct gitguard *g = begin();
        agent_links_tools();
        char cmd[512];
        snprintf(cmd, sizeof(cmd), "git init -q --bare %s/g && git init -q --bare %s/evil/g", ws,
                 ws);
        sh(cmd);
        dir("sub");
        put("sub/.git", "gitdir: ../tools/../g\n");
        finish(g);
        cr_expect_not(exists("sub/.git"), "a pointer read past a link by text stayed");
        cleanup();
}

/* The config the environment variable var names, text in it, read by
 * the scan and by host git (env: the rest of host git's environment); the
 * agent's program at rel (in directory d), run by `git args`. */
static void env_config_attack(const char *var, const char *text, const char *env, const char *d,
                              const char *rel, const char *args)
{
        setup_ws();
        char cfg[192], full[320];
        snprintf(cfg, sizeof(cfg), "%s/env.cfg", home);
        write_host(cfg, text);
        cr_assert_eq(setenv(var, cfg, 1), 0);
        struct gitguard *g = begin();
        dir(d);
        agent_hook(rel);
        int n = finish(g);
        cr_expect_geq(n, 1, "findings: %d", n);
        cr_expect_not(exists(rel), "the agent's %s stayed", rel);
        snprintf(full, sizeof(full), "%s %s=%s", env, var, cfg);
        host_git_env(full, ".", args);
        cr_expect_not(pwned(), "host git ran the program the config %s names runs", var);
        cleanup();
}

/* GIT_CONFIG_GLOBAL names the user's global config in place of
 * ~/.gitconfig: its relative core.hooksPath is a directory of each
 * working tree. */
Test(gitguard_edge_attacks, a_hooks_path_in_the_config_git_config_global_names)
{
        env_config_attack("GIT_CONFIG_GLOBAL", "[core]\n\thooksPath = .githooks\n", "", ".githooks",
                          ".githooks/pre-commit", "commit -q --allow-empty -m x");
}

/* GIT_CONFIG_SYSTEM names the system config in place of /etc/gitconfig:
 * a program it names by a relative path runs from the working tree. */
Test(gitguard_edge_attacks, a_program_in_the_config_git_config_system_names)
{
        env_config_attack("GIT_CONFIG_SYSTEM", "[core]\n\tfsmonitor = tools/fsm.sh\n",
                          "GIT_CONFIG_NOSYSTEM=0", "tools", "tools/fsm.sh", "status");
}

/* core.worktree in the repository's own config is its working tree even
 * where a .git sits elsewhere: a relative core.hooksPath starts there. */
Test(gitguard_edge_attacks, a_relative_hooks_path_under_core_worktree)
{
        setup_ws();
        append(".git/config", "[core]\n\tworktree = ../tree\n\thooksPath = .githooks\n");
        dir("tree");
        struct gitguard *g = begin();
        dir("tree/.githooks");
        agent_hook("tree/.githooks/pre-commit");
        int n = finish(g);
        cr_expect_geq(n, 1, "findings: %d", n);
        host_git("tree", "commit -q --allow-empty -m x");
        cr_expect_not(pwned(), "host git ran the hook under core.worktree");
        cleanup();
}

/* The workspace is the directory tools of a repository of the user's
 * (outer): the user's own relative program or hooks directory, run from
 * outer's working tree, lies in the workspace. */
static char outer[64];

static struct gitguard *begin_in_outer(const char *global_config)
{
        setup_ws();
        snprintf(outer, sizeof(outer), "%s", ws);
        cr_assert_lt(strlen(outer) + 6, sizeof(ws));
        memcpy(ws + strlen(outer), "/tools", 7);
        cr_assert_eq(mkdir(ws, 0755), 0);
        char cfg[192];
        snprintf(cfg, sizeof(cfg), "%s/.gitconfig", home);
        write_host(cfg, global_config);
        cr_assert_eq(setenv("HOME", home, 1), 0);
        unsetenv("XDG_CONFIG_HOME");
        return begin();
}

static void cleanup_outer(void)
{
        cleanup();
        fs_remove_tree(AT_FDCWD, outer, 100);
}

Test(gitguard_edge_attacks, the_users_relative_program_in_the_enclosing_working_tree)
{
        struct gitguard *g = begin_in_outer("[core]\n\tfsmonitor = tools/fsm.sh\n");
        agent_hook("fsm.sh");
        int n = finish(g);
        cr_expect_geq(n, 1, "findings: %d", n);
        cr_expect_not(exists("fsm.sh"), "the agent's program stayed");
        host_git("..", "status");
        cr_expect_not(pwned(), "host git ran the agent's program from the enclosing tree");
        cleanup_outer();
}

Test(gitguard_edge_attacks, the_users_relative_hooks_path_in_the_enclosing_working_tree)
{
        struct gitguard *g = begin_in_outer("[core]\n\thooksPath = tools/hooks\n");
        dir("hooks");
        agent_hook("hooks/pre-commit");
        int n = finish(g);
        cr_expect_geq(n, 1, "findings: %d", n);
        host_git("..", "commit -q --allow-empty -m x");
        cr_expect_not(pwned(), "host git ran the agent's hook from the enclosing tree");
        cleanup_outer();
}

/* The host's config includes more files than the scan reads (4096): the
 * agent's program in one past that point was not looked at. The config
 * naming them fails closed. */
Test(gitguard_edge_attacks, includes_past_the_scans_bound_fail_closed)
{
        setup_ws();
        dir("inc");
        char line[64];
        append(".git/config", "[include]\n");
        for (int i = 0; i < 4100; i++) {
                snprintf(line, sizeof(line), "\tpath = ../inc/%d.cfg\n", i);
                append(".git/config", line);
        }
        put("inc/4099.cfg", "[user]\n\tname = Team\n");
        struct gitguard *g = begin();
        agent_sets_fsmonitor("inc/4099.cfg");
        int n = finish(g);
        cr_expect_geq(n, 1, "findings: %d", n);
        host_git(".", "status");
        cr_expect_not(pwned(), "host git ran the program in an include past the bound");
        cleanup();
}

/* Whether the start-time protection (gitguard_config_targets) names
 * ws/rel. */
static bool protected_at_start(const char *rel)
{
        char gd[128], want[512];
        snprintf(gd, sizeof(gd), "%s/.git", ws);
        path(want, sizeof(want), rel);
        size_t n = 0;
        char **t = gitguard_config_targets(ws, gd, ws, &n);
        bool found = false;
        for (size_t i = 0; i < n; i++)
                found = found || STREQ(t[i], want);
        strv_free(t);
        return found;
}

/* The host's config names a file of the workspace by another spelling
 * (through the user's own link to it): protected all the same while the
 * sandbox runs, as it is for host git. */
Test(gitguard_edge_attacks, the_start_protects_what_another_spelling_names)
{
        setup_ws();
        snprintf(link_path, sizeof(link_path), "%s-link", ws);
        cr_assert_eq(symlink(ws, link_path), 0);
        char cfg[256];
        snprintf(cfg, sizeof(cfg), "[include]\n\tpath = %s/shared.cfg\n", link_path);
        append(".git/config", cfg);
        put("shared.cfg", "[user]\n\tname = Team\n");
        cr_expect(protected_at_start("shared.cfg"), "an include by the link's path is writable");
        cleanup();
}

/* ... and a ".." after a link of the tree, where the kernel takes it. */
Test(gitguard_edge_attacks, the_start_protects_where_dotdot_after_a_link_leads)
{
        setup_ws();
        dir("evil");
        dir("evil/deep");
        char p[512];
        path(p, sizeof(p), "tools");
        cr_assert_eq(symlink("evil/deep", p), 0);
        append(".git/config", "[include]\n\tpath = ../tools/../shared.cfg\n");
        put("evil/shared.cfg", "[user]\n\tname = Team\n");
        cr_expect(protected_at_start("evil/shared.cfg"), "the file git includes is writable");
        cleanup();
}

/* A repository the agent made names a file host git opens by path
 * (core.excludesFile at every status): a FIFO (no writer: git blocks for
 * good) or a device (as root, a watchdog's driver acts on the open). Here
 * a FIFO outside the workspace, and a writer that gets through its open
 * only once host git opens it. */
Test(gitguard_edge_attacks, a_file_an_agents_config_makes_git_open_elsewhere)
{
        setup_ws();
        char fifo[128], cmd[512];
        snprintf(fifo, sizeof(fifo), "%s/fifo", home);
        cr_assert_eq(mkfifo(fifo, 0600), 0);
        struct gitguard *g = begin();
        snprintf(cmd, sizeof(cmd),
                 "git init -q -b main %s/sub && git -C %s/sub config "
                 "core.excludesFile %s",
                 ws, ws, fifo);
        sh(cmd);
        int n = finish(g);
        cr_expect_geq(n, 1, "findings: %d", n);
        cr_expect_not(exists("sub/.git/config"), "the agent's config stayed");
        pid_t writer = fork();
        cr_assert_geq(writer, 0);
        if (writer == 0) {
                alarm(20);
                int fd = open(fifo, O_WRONLY | O_CLOEXEC);
                _exit(fd >= 0 ? 0 : 1);
        }
        host_git("sub", "status");
        bool opened = false;
        for (int i = 0; i < 20 && !opened; i++) {
                opened = waitpid(writer, NULL, WNOHANG) == writer;
                usleep(10 * 1000);
        }
        if (!opened) {
                kill(writer, SIGKILL);
                waitpid(writer, NULL, 0);
        }
        cr_expect_not(opened, "host git opened the file the agent's config named");
        cleanup();
}

/* A repository the agent made sends host git's requests (and the user's
 * credentials, from the user's helper) through a proxy of its choosing,
 * with TLS verification off: moved aside. */
Test(gitguard_edge_attacks, a_proxy_an_agents_config_names_is_moved_aside)
{
        setup_ws();
        struct gitguard *g = begin();
        char cmd[512];
        snprintf(cmd, sizeof(cmd),
                 "git init -q -b main %s/sub && git -C %s/sub config http.proxy "
                 "http://127.0.0.1:9 && git init -q -b main %s/sub2 && git -C %s/sub2 config "
                 "http.https://example.com/.sslVerify false",
                 ws, ws, ws, ws);
        sh(cmd);
        int n = finish(g);
        cr_expect_geq(n, 2, "findings: %d", n);
        cr_expect_not(exists("sub/.git/config"), "the agent's http.proxy stayed");
        cr_expect_not(exists("sub2/.git/config"), "the agent's http.sslVerify false stayed");
        cleanup();
}
