/* SPDX-License-Identifier: Apache-2.0 */
/* gitguard's reading of git config as an attacker who writes every byte
 * and path of the workspace sees it (lib/git): the reader's cost on a
 * hostile file, and what it opens, as root, because a config names it
 * (a FIFO here; a device such as a watchdog, a tape or a tty in the real
 * attack, whose driver acts on open alone). */
#include <criterion/criterion.h>
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

static void append(const char *rel, const char *text)
{
        char p[512];
        path(p, sizeof(p), rel);
        FILE *f = fopen(p, "ae");
        cr_assert_not_null(f, "%s", p);
        fputs(text, f);
        fclose(f);
}

static struct gitguard *begin(void)
{
        struct policy *p = policy_new();
        struct al_error e = {0};
        char json[512];
        snprintf(json, sizeof(json), "{\"workspace\": {\"path\": \"%s\", \"mode\": \"rw\"}}", ws);
        cr_assert_eq(policy_load_string(p, json, "policy.json", &e), 0, "%s", e.msg);
        cr_assert_eq(policy_finalize(p, "/", "/root", &e), 0, "%s", e.msg);
        struct gitguard *g = gitguard_begin(p);
        cr_assert_not_null(g);
        policy_free(p);
        return g;
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
