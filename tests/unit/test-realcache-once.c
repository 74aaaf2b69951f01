/* SPDX-License-Identifier: Apache-2.0 */
/* The deny list under every home asks for the same directories again and
 * again (each home, and each ancestor of a missing entry): a directory the
 * cache has looked up, as a path's parent, is answered from what it
 * remembered when it is asked for itself, not looked up once more. Shown
 * by changing the tree behind the cache's back: the remembered answer
 * comes back (a cache lives for one plan, see realcache.h). */
#include <criterion/criterion.h>
#include <errno.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "realcache.h"

TestSuite(realcache_once, .timeout = 10);

Test(realcache_once, a_known_directory_is_not_looked_up_again)
{
        char tmpl[] = "/tmp/airlock-realcache-once-XXXXXX";
        cr_assert_not_null(mkdtemp(tmpl));
        char buf[PATH_MAX], root[PATH_MAX / 2], p[PATH_MAX], got[PATH_MAX];
        cr_assert_not_null(realpath(tmpl, buf)); /* /tmp may itself be a link */
        cr_assert_lt(strlen(buf), sizeof(root));
        memcpy(root, buf, strlen(buf) + 1);
        snprintf(p, sizeof(p), "%s/home", root);
        cr_assert_eq(mkdir(p, 0755), 0);

        struct realcache *rc = realcache_new();
        /* home/.config/gcloud: remembers home (there) and home/.config
         * (missing) as parents. */
        snprintf(p, sizeof(p), "%s/home/.config/gcloud", root);
        cr_assert_eq(realcache_resolve(rc, p, got), -ENOENT);

        /* Now .config appears and home goes: the cache's answers are the
         * ones it had. */
        snprintf(p, sizeof(p), "%s/home/.config", root);
        cr_assert_eq(mkdir(p, 0755), 0);
        cr_assert_eq(realcache_resolve(rc, p, got), -ENOENT, "home/.config looked up again");
        cr_assert_eq(rmdir(p), 0);
        snprintf(p, sizeof(p), "%s/home", root);
        cr_assert_eq(rmdir(p), 0);
        cr_assert_eq(realcache_resolve(rc, p, got), 0, "home looked up again");
        cr_assert_str_eq(got, p);

        /* A fresh cache sees the tree as it is. */
        realcache_free(rc);
        rc = realcache_new();
        cr_assert_eq(realcache_resolve(rc, p, got), -ENOENT);
        realcache_free(rc);
        cr_assert_eq(rmdir(root), 0);
}
