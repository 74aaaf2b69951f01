/* SPDX-License-Identifier: Apache-2.0 */
/* gitguard's reading of git config as an attacker who writes every byte
 * and path of the workspace sees it (lib/git): the reader's cost on a
 * hostile file, and what it opens, as root, because a config names it
 * (a FIFO here; a device such as a watchdog, a tape or a tty in the real
 * attack, whose driver acts on open alone). */
#include <criterion/criterion.h>
#include <dirent.h>
#include <fcntl.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "fs.h"
#include "gitguard-internal.h"
#include "gitguard.h"
#include "policy.h"
#include "util.h"

#include "gitguard-test-util.h"

static char outside[64]; /* a directory of the host's, outside ws */
static char fifo[128];
static pid_t writer = -1;

static void sh(const char *cmd)
{
        int r = system(cmd);
        cr_assert_eq(r, 0, "%s: %d", cmd, r);
}

static void setup_ws(void)
{
        if (access("/usr/bin/git", X_OK) != 0 && access("/bin/git", X_OK) != 0)
                cr_skip_test("git is not installed");
        snprintf(ws, sizeof(ws), "/tmp/airlock-ggia2-XXXXXX");
        cr_assert_not_null(mkdtemp(ws));
        snprintf(outside, sizeof(outside), "/tmp/airlock-ggia2-out-XXXXXX");
        cr_assert_not_null(mkdtemp(outside));
        char cmd[512];
        snprintf(cmd, sizeof(cmd), "git init -q -b main %s", ws);
        sh(cmd);
        /* A FIFO, and a writer that gets through its open only once
         * something opens the FIFO for reading. */
        snprintf(fifo, sizeof(fifo), "%s/fifo", outside);
        cr_assert_eq(mkfifo(fifo, 0600), 0);
        writer = fork();
        cr_assert_geq(writer, 0);
        if (writer == 0) {
                alarm(20);
                int fd = open(fifo, O_WRONLY | O_CLOEXEC);
                _exit(fd >= 0 ? 0 : 1);
        }
        /* Asleep in its open (an open before it gets there is not seen). */
        char st[64], text[256];
        snprintf(st, sizeof(st), "/proc/%d/stat", (int)writer);
        for (int i = 0; i < 500; i++) {
                FILE *f = fopen(st, "re");
                size_t k = f ? fread(text, 1, sizeof(text) - 1, f) : 0;
                if (f)
                        fclose(f);
                text[k] = '\0';
                const char *paren = strrchr(text, ')');
                if (paren && paren[1] == ' ' && paren[2] == 'S')
                        return;
                usleep(2000);
        }
        cr_assert_fail("the FIFO's writer never blocked in its open");
}

/* Whether the FIFO was opened for reading (the writer got through). */
static bool fifo_opened(void)
{
        for (int i = 0; i < 20; i++) {
                if (waitpid(writer, NULL, WNOHANG) == writer) {
                        writer = -1;
                        return true;
                }
                usleep(10 * 1000);
        }
        return false;
}

static void cleanup(void)
{
        if (writer > 0) {
                kill(writer, SIGKILL);
                waitpid(writer, NULL, 0);
                writer = -1;
        }
        fs_remove_tree(AT_FDCWD, ws, 100);
        fs_remove_tree(AT_FDCWD, outside, 100);
}

static struct gitguard *begin(void)
{
        return gg_begin_now(ws);
}

static double now(void)
{
        struct timespec t;
        clock_gettime(CLOCK_MONOTONIC, &t);
        return (double)t.tv_sec + (double)t.tv_nsec / 1e9;
}

/* A megabyte of line, and the best of three times of the check on it. */
static double check_time(const char *line)
{
        size_t max = 1024 * 1024, l = strlen(line), n = 4;
        char *b = xcalloc(max + 1, 1);
        memcpy(b, "[a]\n", 4);
        while (n + l < max) {
                memcpy(b + n, line, l);
                n += l;
        }
        double best = 1e9;
        for (int i = 0; i < 3; i++) {
                char reason[256];
                double t = now();
                (void)gitguard_config_check(b, n, reason, sizeof(reason));
                t = now() - t;
                best = t < best ? t : best;
        }
        free(b);
        return best;
}

/* The control for the two below: the test's FIFO works. */
Test(gitguard_include_attacks2, the_fifo_tells_an_open)
{
        setup_ws();
        int fd = open(fifo, O_RDONLY | O_NONBLOCK | O_CLOEXEC);
        cr_assert_geq(fd, 0);
        cr_expect(fifo_opened(), "the writer did not see the open: the tests prove nothing");
        close(fd);
        cleanup();
}

/* The start reads the workspace's config as it is (another run's agent
 * may be writing it): an include of a FIFO or device outside the tree is
 * never opened as root. */
Test(gitguard_include_attacks2, the_start_never_opens_a_fifo_an_include_names)
{
        setup_ws();
        char cfg[512];
        snprintf(cfg, sizeof(cfg), "[include]\n\tpath = %s\n", fifo);
        append(".git/config", cfg);
        struct gitguard *g = begin();
        cr_expect_not(fifo_opened(), "gitguard_begin opened the FIFO an include names");
        gitguard_discard(g);
        cleanup();
}

/* What the start makes read-only (boundary/protect.c) is read the same
 * way: through an absolute include, and through a link in the tree. */
Test(gitguard_include_attacks2, the_protected_targets_never_open_an_included_fifo)
{
        setup_ws();
        char cfg[512], gd[512];
        snprintf(cfg, sizeof(cfg), "[include]\n\tpath = %s\n", fifo);
        append(".git/config", cfg);
        snprintf(gd, sizeof(gd), "%s/.git", ws);
        size_t n = 0;
        char **t = gitguard_config_targets(ws, gd, ws, &n);
        strv_free(t);
        cr_expect_not(fifo_opened(), "gitguard_config_targets opened the FIFO an include names");
        cleanup();
}

Test(gitguard_include_attacks2, the_protected_targets_never_open_a_fifo_an_included_link_leads_to)
{
        setup_ws();
        append(".git/config", "[include]\n\tpath = ../inc.cfg\n");
        char p[512], gd[512];
        path(p, sizeof(p), "inc.cfg");
        cr_assert_eq(symlink(fifo, p), 0);
        snprintf(gd, sizeof(gd), "%s/.git", ws);
        size_t n = 0;
        char **t = gitguard_config_targets(ws, gd, ws, &n);
        strv_free(t);
        cr_expect_not(fifo_opened(), "gitguard_config_targets opened the FIFO a link leads to");
        cleanup();
}

/* A megabyte of short keys ("b=c") costs the check about what a megabyte
 * of keys without values does: it cost seconds (each value's buffer was
 * sized for the rest of the file), at each of the reads of each config
 * of each repository the agent made. */
Test(gitguard_include_attacks2, a_megabyte_of_short_keys_is_read_in_linear_time)
{
        double ref = check_time("b\n"), t = check_time("b=c\n");
        cr_expect_lt(t, 8 * ref + 0.05, "b=c: %.3f s, b: %.3f s", t, ref);
}

/* A config's bytes as real host git reads them: an include git follows
 * is one gitguard's reader names (else the file it includes goes
 * unchecked), and a core.fsmonitor git does not take for "false" is one
 * the check refuses. */
static char tmpd[64];

static void put_bytes(const char *name, const char *b, size_t n)
{
        char p[256];
        snprintf(p, sizeof(p), "%s/%s", tmpd, name);
        int fd = open(p, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
        cr_assert_geq(fd, 0);
        cr_assert_eq(write(fd, b, n), (ssize_t)n);
        close(fd);
}

/* Whether host git, reading c.cfg, read inc.cfg too. */
static bool git_follows(void)
{
        char cmd[512];
        snprintf(cmd, sizeof(cmd),
                 "cd %s && env -i PATH=/usr/bin:/bin HOME=%s GIT_CONFIG_NOSYSTEM=1 timeout 10 git "
                 "config --file c.cfg --includes --list 2>/dev/null | grep -q '^user.name=inc$'",
                 tmpd, tmpd);
        return system(cmd) == 0;
}

/* Whether host git reads core.fsmonitor in c.cfg as false. */
static bool git_says_false(void)
{
        char cmd[512];
        snprintf(cmd, sizeof(cmd),
                 "cd %s && env -i PATH=/usr/bin:/bin HOME=%s GIT_CONFIG_NOSYSTEM=1 timeout 10 git "
                 "config --file c.cfg --type=bool core.fsmonitor 2>/dev/null | grep -q '^false$'",
                 tmpd, tmpd);
        return system(cmd) == 0;
}

#define B(s)                                                                                       \
        {                                                                                          \
                s, sizeof(s) - 1                                                                   \
        }

Test(gitguard_include_attacks2, every_include_git_follows_is_one_gitguard_reads)
{
        if (access("/usr/bin/git", X_OK) != 0 && access("/bin/git", X_OK) != 0)
                cr_skip_test("git is not installed");
        snprintf(tmpd, sizeof(tmpd), "/tmp/airlock-ggia2-git-XXXXXX");
        cr_assert_not_null(mkdtemp(tmpd));
        put_bytes("inc.cfg", "[user]\n\tname = inc\n", 19);
        static const struct {
                const char *b;
                size_t n;
        } cases[] = {
            B("[include]\n\tpath = inc.cfg\n"),            /* the control */
            B("[include]\n\tpath = inc.cfg\\"),            /* a backslash at the end */
            B("[include]\n\tpath = inc.cfg\0zz\n"),        /* a NUL ends the value */
            B("[include]\n\tpath = \"inc.cfg\0zz\"\n"),    /* within quotes too */
            B("[include]\n\tpath = \\\n    inc.cfg\n"),    /* blanks after a continuation */
            B("[include]\n\tpath = \\\r\n\t inc.cfg\r\n"), /* the same, CRLF */
            B("[user]\n\tx = a\0b\n[include]\n\tpath = inc.cfg\n"), /* after a NUL */
        };
        bool control = false;
        for (size_t i = 0; i < ARRAY_SIZE(cases); i++) {
                put_bytes("c.cfg", cases[i].b, cases[i].n);
                if (!git_follows())
                        continue;
                control |= i == 0;
                size_t n = 0;
                char **inc = gitguard_config_includes(cases[i].b, cases[i].n, &n);
                bool found = false;
                for (size_t k = 0; k < n; k++)
                        found |= STREQ(inc[k], "inc.cfg");
                strv_free(inc);
                cr_expect(found, "case %zu: git follows the include, gitguard does not", i);
        }
        cr_expect(control, "git did not follow the plain include: the test proves nothing");
        fs_remove_tree(AT_FDCWD, tmpd, 10);
}

Test(gitguard_include_attacks2, a_fsmonitor_git_does_not_read_as_false_is_refused)
{
        if (access("/usr/bin/git", X_OK) != 0 && access("/bin/git", X_OK) != 0)
                cr_skip_test("git is not installed");
        snprintf(tmpd, sizeof(tmpd), "/tmp/airlock-ggia2-git-XXXXXX");
        cr_assert_not_null(mkdtemp(tmpd));
        /* Git's blanks are space, tab, CR and LF only: "false\v" is a
         * program's name to it, run from PATH. */
        static const char *const values[] = {"false",   "false\v",     "no\f",     "0\v",
                                             "off \f ", "\"false\"\v", "false\\\n"};
        for (size_t i = 0; i < ARRAY_SIZE(values); i++) {
                char text[128];
                int n = snprintf(text, sizeof(text), "[core]\n\tfsmonitor = %s\n", values[i]);
                put_bytes("c.cfg", text, (size_t)n);
                bool git_false = git_says_false();
                if (i == 0)
                        cr_expect(git_false, "git did not read false: the test proves nothing");
                char reason[256] = "";
                bool refused = gitguard_config_check(text, (size_t)n, reason, sizeof(reason)) != 0;
                cr_expect(git_false || refused, "case %zu: git runs a program gitguard let stay",
                          i);
        }
        fs_remove_tree(AT_FDCWD, tmpd, 10);
}

/* Host git, as the user runs it in ws after the run; whether the agent's
 * program (touching outside/pwned) ran. */
static bool host_git_runs_it(void)
{
        char cmd[1024], marker[160];
        snprintf(marker, sizeof(marker), "%s/pwned", outside);
        snprintf(cmd, sizeof(cmd),
                 "cd %s && env -i PATH=/usr/bin:/bin HOME=%s GIT_CONFIG_NOSYSTEM=1 timeout 20 git "
                 "status >/dev/null 2>&1",
                 ws, outside);
        if (system(cmd) < 0)
                cr_log_warn("%s: %m", cmd);
        return access(marker, F_OK) == 0;
}

static void agent_sets_fsmonitor(const char *rel)
{
        char t[256];
        snprintf(t, sizeof(t), "[core]\n\tfsmonitor = \"touch %s/pwned\"\n", outside);
        append(rel, t);
}

/* The host's link to a config of the tree (.gitconfig-shared ->
 * conf/team.cfg): git resolves what that file includes from the link's
 * directory (the path it opened), not from conf/. */
static void layout_linked_include(void)
{
        append(".git/config", "[include]\n\tpath = ../.gitconfig-shared\n");
        dir("conf");
        put("conf/team.cfg", "[include]\n\tpath = local.cfg\n");
        char p[512];
        path(p, sizeof(p), ".gitconfig-shared");
        cr_assert_eq(symlink("conf/team.cfg", p), 0);
}

Test(gitguard_include_attacks2, without_the_scan_a_linked_configs_include_runs)
{
        setup_ws();
        layout_linked_include();
        agent_sets_fsmonitor("local.cfg");
        cr_expect(host_git_runs_it(), "host git did not run it: the test below proves nothing");
        cleanup();
}

Test(gitguard_include_attacks2, a_linked_configs_includes_are_read_from_the_links_directory)
{
        setup_ws();
        layout_linked_include();
        struct gitguard *g = begin();
        usleep(30 * 1000);
        agent_sets_fsmonitor("local.cfg");
        int n = gitguard_finish(g, NULL, "t", NULL, NULL);
        cr_expect_geq(n, 1, "findings: %d", n);
        cr_expect_not(host_git_runs_it(), "host git ran the agent's program");
        cleanup();
}

/* The same file included by its own path and through the link: its
 * relative includes are read from both directories, each checked. */
Test(gitguard_include_attacks2, a_config_included_by_two_paths_is_read_from_both_directories)
{
        setup_ws();
        append(".git/config", "[include]\n\tpath = ../conf/team.cfg\n");
        layout_linked_include();
        struct gitguard *g = begin();
        usleep(30 * 1000);
        agent_sets_fsmonitor("local.cfg");
        int n = gitguard_finish(g, NULL, "t", NULL, NULL);
        cr_expect_geq(n, 1, "findings: %d", n);
        cr_expect_not(host_git_runs_it(), "host git ran the agent's program");
        cleanup();
}

/* Includes that make the scan open a directory per component, hundreds
 * deep ("/usr/../usr/../…"): a megabyte of them cost the start 12 s and
 * the end as much. Past the scan's walk (32768 directories), the config
 * naming them is moved aside, a finding. */
Test(gitguard_include_attacks2, includes_past_the_scans_walk_fail_closed)
{
        setup_ws();
        size_t cap = 64 * 4200, n = 0;
        char *t = xcalloc(cap, 1);
        n += (size_t)snprintf(t, cap, "[include]\n");
        for (int i = 0; i < 60; i++) {
                n += (size_t)snprintf(t + n, cap - n, "\tpath = /usr");
                for (int k = 0; k < 580; k++)
                        n += (size_t)snprintf(t + n, cap - n, "/../usr");
                n += (size_t)snprintf(t + n, cap - n, "/x%d.cfg\n", i);
        }
        append(".git/config", t);
        free(t);
        struct gitguard *g = begin();
        int found = gitguard_finish(g, NULL, "t", NULL, NULL);
        cr_expect_geq(found, 1, "findings: %d", found);
        cr_expect_not(exists(".git/config"), "the config stayed");
        cleanup();
}

/* The start, with a config including the same megabyte file n times. */
static double begin_time(int n)
{
        char *t = xcalloc((size_t)n * 32 + 16, 1);
        size_t k = (size_t)snprintf(t, 16, "[include]\n");
        for (int i = 0; i < n; i++)
                k += (size_t)snprintf(t + k, 32, "\tpath = ../big.cfg\n");
        put(".git/config", t);
        free(t);
        double best = 1e9;
        for (int i = 0; i < 2; i++) {
                double t0 = now();
                struct gitguard *g = begin();
                char gd[512];
                snprintf(gd, sizeof(gd), "%s/.git", ws);
                size_t nt = 0;
                strv_free(gitguard_config_targets(ws, gd, ws, &nt));
                double d = now() - t0;
                gitguard_discard(g);
                best = d < best ? d : best;
        }
        return best;
}

/* A file included three hundred times is read once by the start's
 * readers (it cost the start 1.5 s, and the protected targets 7 s). */
Test(gitguard_include_attacks2, a_file_included_many_times_is_read_once)
{
        setup_ws();
        size_t max = 1024 * 1024, n = 4;
        char *b = xcalloc(max + 1, 1);
        memcpy(b, "[a]\n", 4);
        while (n + 4 < max) {
                memcpy(b + n, "b=c\n", 4);
                n += 4;
        }
        put("big.cfg", b);
        free(b);
        double once = begin_time(1), many = begin_time(300);
        cr_expect_lt(many, 10 * once + 0.1, "300 includes: %.3f s, one: %.3f s", many, once);
        cleanup();
}

/* ... and each time it is included it sets what git reads from it: the
 * last core.hooksPath is the one git reads. */
Test(gitguard_include_attacks2, a_file_included_again_sets_its_hooks_path_again)
{
        setup_ws();
        put("x.cfg", "[core]\n\thooksPath = from-x\n");
        put("y.cfg", "[user]\n\tname = y\n");
        put("main.cfg", "[include]\n\tpath = x.cfg\n[core]\n\thooksPath = from-main\n"
                        "[include]\n\tpath = x.cfg\n\tpath = y.cfg\n\tpath = y.cfg\n");
        char m[512], cmd[1024];
        path(m, sizeof(m), "main.cfg");
        char *v = gitguard_hooks_path_of(NULL, m, NULL);
        snprintf(cmd, sizeof(cmd),
                 "env -i PATH=/usr/bin:/bin HOME=%s GIT_CONFIG_NOSYSTEM=1 git config --file %s "
                 "--includes core.hooksPath | grep -qx from-x",
                 outside, m);
        cr_expect_eq(system(cmd), 0, "git does not read from-x: the test proves nothing");
        cr_expect_str_eq(v ? v : "(none)", "from-x");
        free(v);
        put("main.cfg", "[include]\n\tpath = x.cfg\n[core]\n\thooksPath = from-main\n"
                        "[include]\n\tpath = y.cfg\n\tpath = y.cfg\n");
        v = gitguard_hooks_path_of(NULL, m, NULL);
        cr_expect_str_eq(v ? v : "(none)", "from-main");
        free(v);
        cleanup();
}

static int open_fds(void)
{
        int n = 0;
        DIR *d = opendir("/proc/self/fd");
        cr_assert_not_null(d);
        while (readdir(d))
                n++;
        closedir(d);
        return n;
}

/* Every path the readers take (links, outside files, FIFOs, cycles,
 * the walk's end) closes what it opened. */
Test(gitguard_include_attacks2, the_scan_leaks_no_descriptor)
{
        setup_ws();
        char cfg[512];
        snprintf(cfg, sizeof(cfg),
                 "[include]\n\tpath = %s\n\tpath = /usr/../usr/nothing.cfg\n\tpath = ../self.cfg\n",
                 fifo);
        append(".git/config", cfg);
        put("self.cfg", "[include]\n\tpath = self.cfg\n[core]\n\thooksPath = hooks\n");
        layout_linked_include();
        int before = open_fds();
        for (int i = 0; i < 3; i++) {
                struct gitguard *g = begin();
                agent_sets_fsmonitor("local.cfg");
                (void)gitguard_finish(g, NULL, "t", NULL, NULL);
                char gd[512];
                snprintf(gd, sizeof(gd), "%s/.git", ws);
                size_t n = 0;
                strv_free(gitguard_config_targets(ws, gd, ws, &n));
        }
        cr_expect_eq(open_fds(), before, "descriptors before: %d, after: %d", before, open_fds());
        cleanup();
}

/* Your own ~/.gitconfig naming a program by a relative path
 * (core.fsmonitor = tools/fsmon.sh): host git runs it from each working
 * tree, where it is an ordinary file the agent writes. */
static void global_relative_fsmonitor(void)
{
        char p[256];
        snprintf(p, sizeof(p), "%s/.gitconfig", outside);
        FILE *f = fopen(p, "we");
        cr_assert_not_null(f);
        fputs("[core]\n\tfsmonitor = tools/fsmon.sh\n", f);
        fclose(f);
        cr_assert_eq(setenv("HOME", outside, 1), 0);
        unsetenv("XDG_CONFIG_HOME");
        dir("tools");
}

static void agent_writes_fsmon(void)
{
        char t[256], p[512];
        snprintf(t, sizeof(t), "#!/bin/sh\ntouch %s/pwned\necho 0\n", outside);
        put("tools/fsmon.sh", t);
        path(p, sizeof(p), "tools/fsmon.sh");
        cr_assert_eq(chmod(p, 0755), 0);
}

Test(gitguard_include_attacks2, without_the_scan_a_global_relative_program_runs)
{
        setup_ws();
        global_relative_fsmonitor();
        agent_writes_fsmon();
        cr_expect(host_git_runs_it(), "host git did not run it: the test below proves nothing");
        cleanup();
}

Test(gitguard_include_attacks2, a_program_your_own_config_names_relatively_is_checked_in_each_tree)
{
        setup_ws();
        global_relative_fsmonitor();
        struct gitguard *g = begin();
        usleep(30 * 1000);
        agent_writes_fsmon();
        int n = gitguard_finish(g, NULL, "t", NULL, NULL);
        cr_expect_geq(n, 1, "findings: %d", n);
        cr_expect_not(host_git_runs_it(), "host git ran the agent's program");
        cleanup();
}

/* Repositories the agent made, each with a megabyte of config that names
 * nothing: the scan reads 16 MiB of what the run wrote, and moves the
 * rest aside unread (100 MiB cost the end 2.8 s). */
Test(gitguard_include_attacks2, configs_the_run_wrote_past_the_scans_bytes_are_moved_aside)
{
        setup_ws();
        struct gitguard *g = begin();
        usleep(30 * 1000);
        size_t max = 1024 * 1024 - 8, n = 4;
        char *b = xcalloc(max + 1, 1);
        memcpy(b, "[a]\n", 4);
        while (n + 4 < max) {
                memcpy(b + n, "b=c\n", 4);
                n += 4;
        }
        for (int i = 0; i < 24; i++) {
                char r[64];
                snprintf(r, sizeof(r), "r%d", i);
                dir(r);
                snprintf(r, sizeof(r), "r%d/.git", i);
                dir(r);
                snprintf(r, sizeof(r), "r%d/.git/objects", i);
                dir(r);
                snprintf(r, sizeof(r), "r%d/.git/refs", i);
                dir(r);
                snprintf(r, sizeof(r), "r%d/.git/HEAD", i);
                put(r, "ref: refs/heads/main\n");
                snprintf(r, sizeof(r), "r%d/.git/config", i);
                put(r, b);
        }
        free(b);
        int found = gitguard_finish(g, NULL, "t", NULL, NULL);
        cr_expect_geq(found, 8, "findings: %d", found);
        cleanup();
}
