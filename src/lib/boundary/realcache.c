/* SPDX-License-Identifier: Apache-2.0 */
#include <errno.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "realcache.h"
#include "util.h"

struct realcache_entry {
        char *path;
        char *real; /* NULL: resolving it failed with err */
        int err;
};

struct realcache {
        struct realcache_entry *e;
        size_t n;
};

struct realcache *realcache_new(void)
{
        return xcalloc(1, sizeof(struct realcache));
}

struct realcache *realcache_free(struct realcache *rc)
{
        if (!rc)
                return NULL;
        for (size_t i = 0; i < rc->n; i++) {
                free(rc->e[i].path);
                free(rc->e[i].real);
        }
        free(rc->e);
        free(rc);
        return NULL;
}

/* Absolute, no empty, "." or ".." component, no trailing slash. */
static bool plain(const char *p)
{
        if (p[0] != '/')
                return false;
        if (p[1] == '\0')
                return true;
        for (const char *c = p + 1;;) {
                size_t len = strcspn(c, "/");
                if (len == 0 || (len == 1 && c[0] == '.') ||
                    (len == 2 && c[0] == '.' && c[1] == '.'))
                        return false;
                if (c[len] == '\0')
                        return true;
                c += len + 1;
        }
}

static int system_realpath(const char *path, char real[PATH_MAX])
{
        return realpath(path, real) ? 0 : -errno;
}

/* The remembered answer for `dir`: true and it in *ret. */
static bool remembered(const struct realcache *rc, const char *dir, char real[PATH_MAX], int *ret)
{
        for (size_t i = 0; i < rc->n; i++)
                if (STREQ(rc->e[i].path, dir)) {
                        if (!rc->e[i].real) {
                                *ret = rc->e[i].err;
                                return true;
                        }
                        snprintf(real, PATH_MAX, "%s", rc->e[i].real);
                        *ret = 0;
                        return true;
                }
        return false;
}

static int lookup(struct realcache *rc, const char *dir, char real[PATH_MAX])
{
        int r;
        if (remembered(rc, dir, real, &r))
                return r;
        r = realcache_resolve(rc, dir, real);
        rc->e = xrealloc(rc->e, rc->n + 1, sizeof(*rc->e));
        rc->e[rc->n++] = (struct realcache_entry){
            .path = xstrdup(dir), .real = r < 0 ? NULL : xstrdup(real), .err = r};
        return r;
}

int realcache_resolve(struct realcache *rc, const char *path, char real[PATH_MAX])
{
        if (!rc || !plain(path) || strlen(path) >= PATH_MAX)
                return system_realpath(path, real);
        if (STREQ(path, "/")) {
                snprintf(real, PATH_MAX, "/");
                return 0;
        }
        /* A directory already met as a parent (each home, each ancestor
         * of a missing entry): its answer, without another lstat. */
        int known;
        if (remembered(rc, path, real, &known))
                return known;
        const char *slash = strrchr(path, '/');
        char parent[PATH_MAX], preal[PATH_MAX];
        snprintf(parent, sizeof(parent), "%.*s", slash == path ? 1 : (int)(slash - path), path);
        int r = lookup(rc, parent, preal);
        if (r < 0)
                return r;
        char cand[PATH_MAX];
        int n = snprintf(cand, sizeof(cand), "%s/%s", STREQ(preal, "/") ? "" : preal, slash + 1);
        if (n < 0 || (size_t)n >= sizeof(cand))
                return system_realpath(path, real);
        struct stat st;
        if (lstat(cand, &st) < 0)
                return -errno;
        if (S_ISLNK(st.st_mode))
                return system_realpath(path, real);
        memcpy(real, cand, (size_t)n + 1);
        return 0;
}
