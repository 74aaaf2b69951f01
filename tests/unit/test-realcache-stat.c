/* SPDX-License-Identifier: Apache-2.0 */
/* realcache_resolve_stat(): what is at the real path comes back with it
 * (the lookup's own stat, a link's last component followed like
 * realpath()), and the directories the cache holds open for its lookups
 * are all closed when it is freed: none may reach a sandbox cloned after
 * the plan. */
#include <criterion/criterion.h>
#include <dirent.h>
#include <errno.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "realcache.h"
#include "util.h"

TestSuite(realcache_stat, .timeout = 10);

static int open_fds(void)
{
        DIR *d = opendir("/proc/self/fd");
        cr_assert_not_null(d);
        int n = 0;
        struct dirent *de;
        while ((de = readdir(d)))
                n += de->d_name[0] != '.';
        closedir(d);
        return n;
}

Test(realcache_stat, stat_and_no_descriptor_left)
{
        char tmpl[] = "/tmp/airlock-realcache-stat-XXXXXX";
        cr_assert_not_null(mkdtemp(tmpl));
        char root[PATH_MAX / 2], p[PATH_MAX], got[PATH_MAX], buf[PATH_MAX];
        cr_assert_not_null(realpath(tmpl, buf));
        cr_assert_lt(strlen(buf), sizeof(root));
        memcpy(root, buf, strlen(buf) + 1);
        const char *homes[] = {"a", "b", "c"};
        for (size_t i = 0; i < 3; i++) {
                snprintf(p, sizeof(p), "%s/%s", root, homes[i]);
                cr_assert_eq(mkdir(p, 0755), 0);
        }
        snprintf(p, sizeof(p), "%s/a/.netrc", root);
        FILE *f = fopen(p, "w");
        cr_assert_not_null(f);
        fclose(f);
        snprintf(p, sizeof(p), "%s/b/.ssh", root);
        cr_assert_eq(mkdir(p, 0700), 0);
        snprintf(buf, sizeof(buf), "%s/b/.ssh", root);
        snprintf(p, sizeof(p), "%s/c/.ssh", root);
        cr_assert_eq(symlink(buf, p), 0);

        int before = open_fds();
        struct realcache *rc = realcache_new();
        struct stat st;
        for (size_t i = 0; i < 3; i++) {
                snprintf(p, sizeof(p), "%s/%s/.netrc", root, homes[i]);
                int r = realcache_resolve_stat(rc, p, got, &st);
                if (i == 0) {
                        cr_assert_eq(r, 0);
                        cr_expect_str_eq(got, p);
                        cr_expect(S_ISREG(st.st_mode), "a/.netrc: a file");
                } else
                        cr_expect_eq(r, -ENOENT, "%s", p);
                snprintf(p, sizeof(p), "%s/%s/.ssh", root, homes[i]);
                r = realcache_resolve_stat(rc, p, got, &st);
                if (i == 0)
                        cr_expect_eq(r, -ENOENT);
                else {
                        cr_assert_eq(r, 0, "%s", p);
                        cr_expect_str_eq(got, buf, "c/.ssh is the link's target");
                        cr_expect(S_ISDIR(st.st_mode), "%s: a directory", p);
                        cr_expect_eq(st.st_mode & 07777, 0700);
                }
        }
        /* A directory the cache met as a parent, asked for itself. */
        snprintf(p, sizeof(p), "%s/b", root);
        cr_assert_eq(realcache_resolve_stat(rc, p, got, &st), 0);
        cr_expect(S_ISDIR(st.st_mode));
        /* A file as a parent: what realpath() says. */
        snprintf(p, sizeof(p), "%s/a/.netrc/x", root);
        cr_expect_eq(realcache_resolve_stat(rc, p, got, &st), -ENOTDIR);
        realcache_free(rc);
        cr_expect_eq(open_fds(), before, "the cache left a descriptor open");

        snprintf(buf, sizeof(buf), "rm -rf '%s'", root);
        cr_assert_eq(system(buf), 0);
}
