/* SPDX-License-Identifier: Apache-2.0 */
/* What `airlock diff` (and the daemon's diff job) costs the host for a
 * file of very many short lines: a 64 MiB file of newlines the agent added
 * took 6.4 GB of memory and 14 s to show, so a file at the default
 * limits.disk (1 GiB) would take about 100 GB. A file shown whole (added
 * or deleted) is streamed; two versions are compared only up to a number
 * of lines (lib/review). */
#include <criterion/criterion.h>
#include <fcntl.h>
#include <ftw.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include "review.h"
#include "util.h"

#define MiB (1024 * 1024)
/* What one diff may hold at once, with the files' own bytes. */
#define MEMORY_MAX (256LL * MiB)

#if defined(__SANITIZE_ADDRESS__)
#define ASAN 1
#elif defined(__has_feature)
#if __has_feature(address_sanitizer)
#define ASAN 1
#endif
#endif

static char top[64], ws[128], state[128];

static int rm_entry(const char *p, const struct stat *st, int flag, struct FTW *ftw)
{
        return remove(p);
}

static void setup(void)
{
        snprintf(top, sizeof(top), "/var/tmp/airlock-test-rdsize-XXXXXX");
        cr_assert_not_null(mkdtemp(top));
        snprintf(ws, sizeof(ws), "%s/ws", top);
        cr_assert_eq(mkdir(ws, 0755), 0);
        struct al_error err = {0};
        char *dir = NULL;
        cr_assert_eq(review_create(top, "big", ws, 1, &dir, &err), 0, "%s", err.msg);
        snprintf(state, sizeof(state), "%s", dir);
        free(dir);
}

static void teardown(void)
{
        nftw(top, rm_entry, 16, FTW_DEPTH | FTW_PHYS);
}

TestSuite(review_diff_size, .init = setup, .fini = teardown, .timeout = 60);

/* path holding `lines` copies of line. */
static void lines_file(const char *path, const char *line, size_t lines)
{
        size_t ll = strlen(line), chunk = 65536 / ll * ll;
        char *buf = xcalloc(chunk, 1);
        for (size_t o = 0; o < chunk; o += ll)
                memcpy(buf + o, line, ll);
        int fd = open(path, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
        cr_assert(fd >= 0, "%s", path);
        size_t left = lines * ll;
        while (left) {
                size_t n = left < chunk ? left : chunk;
                cr_assert_eq(write(fd, buf, n), (ssize_t)n);
                left -= n;
        }
        close(fd);
        free(buf);
}

static void manifest(const char *json)
{
        char p[256];
        snprintf(p, sizeof(p), "%s/manifest.json", state);
        FILE *f = fopen(p, "we");
        cr_assert_not_null(f);
        fputs(json, f);
        fclose(f);
}

/* review_diff in a child, its output to out_path; the child's peak memory
 * in *ret_rss (bytes). The child's address space is capped (but under
 * ASan, which reserves terabytes of it), so that the code before the fix
 * fails fast instead of taking the machine's memory. */
static int diff_in_child(const char *out_path, long long *ret_rss)
{
        pid_t pid = fork();
        cr_assert(pid >= 0);
        if (pid == 0) {
#ifndef ASAN
                struct rlimit rl = {.rlim_cur = 2048LL * MiB, .rlim_max = 2048LL * MiB};
                setrlimit(RLIMIT_AS, &rl);
#endif
                FILE *out = fopen(out_path, "we");
                if (!out)
                        _exit(3);
                struct al_error err = {0};
                int r = review_diff(state, out, &err);
                if (fclose(out) != 0)
                        _exit(4);
                if (r < 0) {
                        fprintf(stderr, "review_diff: %s\n", err.msg);
                        _exit(1);
                }
                _exit(0);
        }
        int st;
        struct rusage ru;
        cr_assert_eq(wait4(pid, &st, 0, &ru), pid);
        *ret_rss = (long long)ru.ru_maxrss * 1024;
        return WIFEXITED(st) ? WEXITSTATUS(st) : 128 + WTERMSIG(st);
}

static size_t count_lines_starting(const char *path, char c, size_t *ret_total)
{
        FILE *f = fopen(path, "re");
        cr_assert_not_null(f);
        char *line = NULL;
        size_t cap = 0, n = 0, total = 0;
        ssize_t k;
        while ((k = getline(&line, &cap, f)) > 0) {
                total++;
                if (line[0] == c && k == 2)
                        n++;
        }
        free(line);
        fclose(f);
        *ret_total = total;
        return n;
}

Test(review_diff_size, a_new_file_of_many_lines_is_streamed)
{
        char p[256], out[256];
        snprintf(p, sizeof(p), "%s/changes/big.txt", state);
        lines_file(p, "\n", 16 * MiB);
        manifest("{\"entries\":[{\"path\":\"big.txt\",\"type\":\"file\",\"mode\":420}],"
                 "\"deleted\":[],\"opaque\":[],\"skipped\":[]}");
        snprintf(out, sizeof(out), "%s/out", top);
        long long rss = 0;
        int r = diff_in_child(out, &rss);
        cr_assert_eq(r, 0, "the diff failed (%d)", r);
        cr_expect_lt(rss, MEMORY_MAX, "peak memory %lld MiB for a 16 MiB file", rss / MiB);
        size_t total, plus = count_lines_starting(out, '+', &total);
        /* Every line shown, each as "+". */
        cr_expect_eq(plus, (size_t)16 * MiB, "%zu added lines shown", plus);
}

Test(review_diff_size, a_deleted_file_of_many_lines_is_streamed)
{
        char p[256], out[256];
        snprintf(p, sizeof(p), "%s/gone.txt", ws);
        lines_file(p, "\n", 16 * MiB);
        manifest("{\"entries\":[],\"deleted\":[\"gone.txt\"],\"opaque\":[],\"skipped\":[]}");
        snprintf(out, sizeof(out), "%s/out", top);
        long long rss = 0;
        int r = diff_in_child(out, &rss);
        cr_assert_eq(r, 0, "the diff failed (%d)", r);
        cr_expect_lt(rss, MEMORY_MAX, "peak memory %lld MiB for a 16 MiB file", rss / MiB);
        size_t total, minus = count_lines_starting(out, '-', &total);
        cr_expect_eq(minus, (size_t)16 * MiB, "%zu removed lines shown", minus);
}

Test(review_diff_size, two_versions_of_too_many_lines_are_not_compared)
{
        char p[256], out[256];
        snprintf(p, sizeof(p), "%s/big.txt", ws);
        lines_file(p, "a\n", 16 * MiB);
        snprintf(p, sizeof(p), "%s/changes/big.txt", state);
        lines_file(p, "b\n", 16 * MiB);
        manifest("{\"entries\":[{\"path\":\"big.txt\",\"type\":\"file\",\"mode\":420}],"
                 "\"deleted\":[],\"opaque\":[],\"skipped\":[]}");
        snprintf(out, sizeof(out), "%s/out", top);
        long long rss = 0;
        int r = diff_in_child(out, &rss);
        cr_assert_eq(r, 0, "the diff failed (%d)", r);
        cr_expect_lt(rss, MEMORY_MAX, "peak memory %lld MiB for two 32 MiB files", rss / MiB);
        /* Said, on a line of its own. */
        char *text = NULL;
        size_t len = 0;
        cr_assert_eq(read_file_at(AT_FDCWD, out, 1 << 20, &text, &len), 0);
        cr_expect_not_null(strstr(text, "too many lines to compare"), "%s", text);
        free(text);
}
