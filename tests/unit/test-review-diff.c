/* SPDX-License-Identifier: Apache-2.0 */
/* review_diff computes its hunks in process (libgit2). This checks them
 * against /usr/bin/diff -u, which review ran before, for seeded random
 * edits of text files: changed lines, inserted and removed ones, a last
 * line with and without its newline, new files. */
#include <criterion/criterion.h>
#include <fcntl.h>
#include <ftw.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "review.h"
#include "util.h"

#define ROUNDS 300

static char top[64];

static int rm_entry(const char *p, const struct stat *st, int flag, struct FTW *ftw)
{
        return remove(p);
}

static void setup(void)
{
        snprintf(top, sizeof(top), "/var/tmp/airlock-test-review-diff-XXXXXX");
        cr_assert_not_null(mkdtemp(top));
}

static void teardown(void)
{
        nftw(top, rm_entry, 16, FTW_DEPTH | FTW_PHYS);
}

TestSuite(review_diff, .init = setup, .fini = teardown, .timeout = 60);

static unsigned long long rng = 0x9e3779b97f4a7c15ULL;

static unsigned rnd(unsigned n)
{
        rng ^= rng << 13;
        rng ^= rng >> 7;
        rng ^= rng << 17;
        return (unsigned)(rng % n);
}

struct text {
        char lines[64][8];
        unsigned n;
        bool final_newline;
};

static void text_random(struct text *t)
{
        static const char *const alphabets[] = {"ab", "abc", "abcdefgh", "abcdefghijklmnop0123"};
        const char *alpha = alphabets[rnd(4)];
        size_t na = strlen(alpha);
        t->n = rnd(40);
        for (unsigned i = 0; i < t->n; i++) {
                unsigned len = rnd(4);
                for (unsigned k = 0; k < len; k++)
                        t->lines[i][k] = alpha[rnd((unsigned)na)];
                t->lines[i][len] = '\0';
        }
        t->final_newline = rnd(10) < 7;
}

/* One to four edits: a line inserted, removed or changed; sometimes the
 * last line's newline comes or goes. */
static void text_edit(struct text *t)
{
        unsigned edits = 1 + rnd(4);
        for (unsigned e = 0; e < edits; e++) {
                unsigned op = rnd(3), i = rnd(t->n + 1);
                if (op == 0 && t->n < 64) {
                        memmove(t->lines[i + 1], t->lines[i], (t->n - i) * sizeof(t->lines[0]));
                        snprintf(t->lines[i], sizeof(t->lines[i]), "%c", 'a' + rnd(3));
                        t->n++;
                } else if (op == 1 && i < t->n) {
                        memmove(t->lines[i], t->lines[i + 1], (t->n - i - 1) * sizeof(t->lines[0]));
                        t->n--;
                } else if (i < t->n && strlen(t->lines[i]) < 6) {
                        strcat(t->lines[i], "x");
                }
        }
        if (rnd(8) == 0)
                t->final_newline = !t->final_newline;
}

static void text_write(const struct text *t, const char *path)
{
        FILE *f = fopen(path, "we");
        cr_assert_not_null(f, "%s", path);
        for (unsigned i = 0; i < t->n; i++)
                fprintf(f, "%s%s", t->lines[i], i + 1 < t->n || t->final_newline ? "\n" : "");
        cr_assert_eq(fclose(f), 0);
        cr_assert_eq(chmod(path, 0644), 0);
}

static void append_cmd(char **buf, size_t *len, const char *cmd)
{
        FILE *p = popen(cmd, "re");
        cr_assert_not_null(p);
        char chunk[4096];
        size_t n;
        FILE *m = open_memstream(buf, len);
        while ((n = fread(chunk, 1, sizeof(chunk), p)) > 0)
                fwrite(chunk, 1, n, m);
        fclose(m);
        int status = pclose(p);
        cr_assert(WIFEXITED(status) && WEXITSTATUS(status) <= 1, "%s: status %d", cmd, status);
}

Test(review_diff, hunks_as_usr_bin_diff_wrote_them)
{
        if (access("/usr/bin/diff", X_OK) < 0)
                cr_skip_test("no /usr/bin/diff to compare with");
        char root[128];
        snprintf(root, sizeof(root), "%s/state", top);
        unsigned compared = 0;
        for (unsigned round = 0; round < ROUNDS; round++) {
                char ws[192], upper[192], cmd[1024], id[32];
                snprintf(ws, sizeof(ws), "%s/ws%u", top, round);
                snprintf(upper, sizeof(upper), "%s/up%u", top, round);
                cr_assert_eq(mkdir(ws, 0755), 0);
                cr_assert_eq(mkdir(upper, 0755), 0);

                struct text a, b;
                text_random(&a);
                b = a;
                text_edit(&b);
                char wf[256], uf[256], nf[256];
                snprintf(wf, sizeof(wf), "%s/f", ws);
                snprintf(uf, sizeof(uf), "%s/f", upper);
                snprintf(nf, sizeof(nf), "%s/n", upper);
                text_write(&a, wf);
                text_write(&b, uf);
                struct text c;
                text_random(&c);
                text_write(&c, nf);

                /* What review wrote with /usr/bin/diff: each entry's header
                 * lines, then diff -u's output under git's labels. */
                char *want = NULL, *part = NULL;
                size_t wlen = 0, plen = 0;
                FILE *w = open_memstream(&want, &wlen);
                snprintf(cmd, sizeof(cmd),
                         "LC_ALL=C /usr/bin/diff -u --label a/f --label b/f %s %s", wf, uf);
                append_cmd(&part, &plen, cmd);
                if (plen > 0) /* capture leaves out an identical file */
                        fprintf(w, "diff --git a/f b/f\n%s", part);
                free(part);
                part = NULL;
                snprintf(cmd, sizeof(cmd),
                         "LC_ALL=C /usr/bin/diff -u --label /dev/null --label b/n /dev/null %s",
                         nf);
                append_cmd(&part, &plen, cmd);
                fprintf(w, "diff --git a/n b/n\nnew file mode 100644\n%s", part);
                free(part);
                fclose(w);

                struct al_error err = {0};
                char *sdir = NULL;
                snprintf(id, sizeof(id), "d%u", round);
                cr_assert_eq(review_create(root, id, ws, 1, &sdir, &err), 0, "%s", err.msg);
                int fd = open(upper, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
                cr_assert_geq(fd, 0);
                struct review_summary sum;
                cr_assert_eq(review_capture(fd, sdir, 0, &sum, &err), 0, "%s", err.msg);
                close(fd);

                char *got = NULL;
                size_t glen = 0;
                FILE *g = open_memstream(&got, &glen);
                cr_assert_eq(review_diff(sdir, g, &err), 0, "review_diff: %s", err.msg);
                fclose(g);
                cr_assert_str_eq(got, want, "round %u", round);
                compared++;
                free(got);
                free(want);
                free(sdir);
        }
        cr_assert_eq(compared, ROUNDS);
}
