/* SPDX-License-Identifier: Apache-2.0 */
/* The plan's cache of real paths finds what it remembered through an index
 * (realcache.c), grown as the directories it met grow past 32, 64, 128...:
 * with hundreds of homes and their subdirectories, some of them links,
 * every answer is still realpath()'s, asked twice (the second from what was
 * remembered), in an order that interleaves new and known directories. */
#include <criterion/criterion.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "realcache.h"

TestSuite(realcache_many, .timeout = 20);

#define HOMES 300

static char root[PATH_MAX / 2];

static void check(struct realcache *rc, const char *p)
{
        char want[PATH_MAX], got[PATH_MAX];
        int we = realpath(p, want) ? 0 : -errno;
        struct stat st;
        int r = realcache_resolve_stat(rc, p, got, &st);
        cr_assert_eq(r, we, "%s: %d, realpath says %d", p, r, we);
        if (r == 0) {
                cr_assert_str_eq(got, want, "%s", p);
                struct stat ws;
                cr_assert_eq(lstat(want, &ws), 0);
                cr_assert_eq(st.st_ino, ws.st_ino, "%s: not the stat of %s", p, want);
        }
}

Test(realcache_many, hundreds_of_directories_answer_as_realpath)
{
        char tmpl[] = "/tmp/airlock-realcache-many-XXXXXX";
        cr_assert_not_null(mkdtemp(tmpl));
        char buf[PATH_MAX];
        cr_assert_not_null(realpath(tmpl, buf));
        cr_assert_lt(strlen(buf), sizeof(root));
        memcpy(root, buf, strlen(buf) + 1);
        char p[PATH_MAX];
        for (int i = 0; i < HOMES; i++) {
                snprintf(p, sizeof(p), "%s/h%d", root, i);
                if (i % 7 == 3) { /* a home that is a link to another */
                        char t[64];
                        snprintf(t, sizeof(t), "h%d", i - 1);
                        cr_assert_eq(symlink(t, p), 0);
                        continue;
                }
                cr_assert_eq(mkdir(p, 0755), 0);
                snprintf(p, sizeof(p), "%s/h%d/.config", root, i);
                cr_assert_eq(mkdir(p, 0755), 0);
                if (i % 2) {
                        snprintf(p, sizeof(p), "%s/h%d/.ssh", root, i);
                        cr_assert_eq(mkdir(p, 0700), 0);
                        snprintf(p, sizeof(p), "%s/h%d/.netrc", root, i);
                        close(open(p, O_CREAT | O_WRONLY | O_CLOEXEC, 0600));
                }
        }
        static const char *const names[] = {"/.ssh",    "/.netrc", "/.config/gh",
                                            "/.config", "/.aws/x", ""};
        struct realcache *rc = realcache_new();
        for (int pass = 0; pass < 2; pass++)
                for (int i = 0; i < HOMES + 5; i++) /* five homes that do not exist */
                        for (size_t n = 0; n < sizeof(names) / sizeof(names[0]); n++) {
                                snprintf(p, sizeof(p), "%s/h%d%s", root, i, names[n]);
                                check(rc, p);
                        }
        realcache_free(rc);
        char cmd[PATH_MAX + 16];
        snprintf(cmd, sizeof(cmd), "rm -rf %s", root);
        cr_assert_eq(system(cmd), 0);
}
