/* SPDX-License-Identifier: Apache-2.0 */
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

TestSuite(realcache, .timeout = 10);

static char root[PATH_MAX / 2];

static void set_root(const char *tmpl)
{
        char buf[PATH_MAX];
        cr_assert_not_null(realpath(tmpl, buf)); /* /tmp may itself be a link */
        cr_assert_lt(strlen(buf), sizeof(root));
        memcpy(root, buf, strlen(buf) + 1);
}

static void mk(const char *rel, char kind, const char *link)
{
        char p[PATH_MAX + 64];
        snprintf(p, sizeof(p), "%s/%s", root, rel);
        if (kind == 'd')
                cr_assert_eq(mkdir(p, 0755), 0, "%s", p);
        else if (kind == 'f')
                close(open(p, O_CREAT | O_WRONLY, 0644));
        else
                cr_assert_eq(symlink(link, p), 0, "%s", p);
}

/* Every answer (path or errno) is realpath()'s, asked twice so that the
 * second comes from what was remembered. */
static void same(struct realcache *rc, const char *rel)
{
        char p[PATH_MAX + 64], want[PATH_MAX], got[PATH_MAX];
        snprintf(p, sizeof(p), "%s%s%s", rel[0] == '/' ? "" : root, rel[0] == '/' ? "" : "/", rel);
        int we = realpath(p, want) ? 0 : -errno;
        for (int i = 0; i < 2; i++) {
                int r = realcache_resolve(rc, p, got);
                cr_assert_eq(r, we, "%s: %d, realpath says %d", p, r, we);
                if (r == 0)
                        cr_assert_str_eq(got, want, "%s", p);
        }
}

Test(realcache, answers_as_realpath_does)
{
        char tmpl[] = "/tmp/airlock-realcache-XXXXXX";
        cr_assert_not_null(mkdtemp(tmpl));
        set_root(tmpl);
        mk("home", 'd', NULL);
        mk("home/a", 'd', NULL);
        mk("home/a/.ssh", 'd', NULL);
        mk("home/a/.netrc", 'f', NULL);
        mk("home/b", 'l', "a");         /* a home that is a link */
        mk("home/a/cfg", 'l', "/etc");  /* an absolute link */
        mk("home/a/loop", 'l', "loop"); /* a loop */
        mk("home/a/dangling", 'l', "nowhere");
        mk("home/file", 'f', NULL);
        struct realcache *rc = realcache_new();
        static const char *const paths[] = {
            "home",
            "home/a/.ssh",
            "home/a/.netrc",
            "home/a/.aws",
            "home/b/.ssh",
            "home/b/.aws/x",
            "home/a/cfg",
            "home/a/cfg/passwd",
            "home/a/loop",
            "home/a/loop/x",
            "home/a/dangling",
            "home/file/x",
            "home/file",
            "home/nobody/.ssh",
            "home/a/../b/.ssh",
            "home/a/./.ssh",
            "home//a/.ssh",
            "home/a/.ssh/",
            "/",
            "/nonexistent/.ssh",
            "relative/path",
        };
        for (size_t i = 0; i < sizeof(paths) / sizeof(paths[0]); i++)
                same(rc, paths[i]);
        /* A NULL cache is realpath() itself. */
        same(NULL, "home/b/.ssh");
        realcache_free(rc);
        char cmd[PATH_MAX + 16];
        snprintf(cmd, sizeof(cmd), "rm -rf %s", root);
        cr_assert_eq(system(cmd), 0);
}

Test(realcache, a_directory_not_searchable)
{
        if (geteuid() == 0)
                cr_skip_test("root searches every directory");
        char tmpl[] = "/tmp/airlock-realcache-XXXXXX";
        cr_assert_not_null(mkdtemp(tmpl));
        set_root(tmpl);
        mk("closed", 'd', NULL);
        mk("closed/x", 'd', NULL);
        char p[PATH_MAX + 64];
        snprintf(p, sizeof(p), "%s/closed", root);
        chmod(p, 0600);
        struct realcache *rc = realcache_new();
        same(rc, "closed/x");
        same(rc, "closed/y");
        realcache_free(rc);
        chmod(p, 0755);
        char cmd[PATH_MAX + 16];
        snprintf(cmd, sizeof(cmd), "rm -rf %s", root);
        cr_assert_eq(system(cmd), 0);
}
