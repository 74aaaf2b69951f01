/* SPDX-License-Identifier: Apache-2.0 */
#include <errno.h>
#include <fcntl.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "realcache.h"
#include "util.h"

struct realcache_entry {
        char *path;
        char *real; /* NULL: resolving it failed with err */
        int err;
        /* The directory `real` names, O_PATH, opened the first time a path
         * beneath it is asked for; -1: not yet, -2: it could not be. */
        int fd;
};

/* The entries, and an open-addressing index of them by path (FNV-1a;
 * slot value: entry index + 1, 0: empty): a plan asks for about 160 paths
 * under some 60 directories, and a linear search compared strings 19,000
 * times a start. */
struct realcache {
        struct realcache_entry *e;
        size_t n;
        size_t *slots;
        size_t n_slots; /* a power of two, at least twice n */
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
                if (rc->e[i].fd >= 0)
                        close(rc->e[i].fd);
        }
        free(rc->e);
        free(rc->slots);
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

static int system_realpath(const char *path, char real[PATH_MAX], struct stat *ret_st)
{
        if (!realpath(path, real))
                return -errno;
        return ret_st && lstat(real, ret_st) < 0 ? -errno : 0;
}

/* a (alen bytes), then b when not NULL, into dst of PATH_MAX bytes; the
 * length, or -1 when it does not fit. Paths are built a few hundred times a
 * start: snprintf's formatting cost more than the lookups. */
static ssize_t path_join(char dst[PATH_MAX], const char *a, size_t alen, const char *b)
{
        size_t blen = b ? strlen(b) : 0;
        if (alen + blen >= PATH_MAX)
                return -1;
        memcpy(dst, a, alen);
        if (blen)
                memcpy(dst + alen, b, blen);
        dst[alen + blen] = '\0';
        return (ssize_t)(alen + blen);
}

static uint64_t hash_path(const char *p)
{
        uint64_t h = 1469598103934665603ull;
        for (; *p; p++)
                h = (h ^ (unsigned char)*p) * 1099511628211ull;
        return h;
}

static ssize_t find(const struct realcache *rc, const char *dir)
{
        if (!rc->n_slots)
                return -1;
        size_t mask = rc->n_slots - 1;
        for (size_t i = (size_t)hash_path(dir) & mask;; i = (i + 1) & mask) {
                size_t k = rc->slots[i];
                if (!k)
                        return -1;
                if (STREQ(rc->e[k - 1].path, dir))
                        return (ssize_t)(k - 1);
        }
}

/* Index entry k (already in rc->e), growing the index to keep it at most
 * half full. */
static void index_entry(struct realcache *rc, size_t k)
{
        if (2 * (k + 1) > rc->n_slots) {
                size_t n = rc->n_slots ? 2 * rc->n_slots : 64;
                free(rc->slots);
                rc->slots = xcalloc(n, sizeof(*rc->slots));
                rc->n_slots = n;
                for (size_t j = 0; j < k; j++)
                        index_entry(rc, j);
        }
        size_t mask = rc->n_slots - 1;
        size_t i = (size_t)hash_path(rc->e[k].path) & mask;
        while (rc->slots[i])
                i = (i + 1) & mask;
        rc->slots[i] = k + 1;
}

/* The remembered answer of entry k: 0 and it in `real`, or its -errno. */
static int remembered(const struct realcache *rc, size_t k, char real[PATH_MAX],
                      struct stat *ret_st)
{
        const struct realcache_entry *e = &rc->e[k];
        if (!e->real)
                return e->err;
        (void)path_join(real, e->real, strlen(e->real), NULL); /* it fit once */
        if (!ret_st)
                return 0;
        return (e->fd >= 0 ? fstat(e->fd, ret_st) : lstat(real, ret_st)) < 0 ? -errno : 0;
}

static size_t lookup(struct realcache *rc, const char *dir)
{
        ssize_t k = find(rc, dir);
        if (k >= 0)
                return (size_t)k;
        char real[PATH_MAX];
        int r = realcache_resolve_stat(rc, dir, real, NULL);
        rc->e = xrealloc(rc->e, rc->n + 1, sizeof(*rc->e));
        rc->e[rc->n++] = (struct realcache_entry){
            .path = xstrdup(dir), .real = r < 0 ? NULL : xstrdup(real), .err = r, .fd = -1};
        index_entry(rc, rc->n - 1);
        return rc->n - 1;
}

/* Entry k's directory, opened once: each home holds a dozen deny
 * entries, and a lookup of one name in an open directory walks one
 * component, not the whole path again. */
static int dir_fd(struct realcache *rc, size_t k)
{
        struct realcache_entry *e = &rc->e[k];
        if (e->fd == -1) {
                e->fd = open(e->real, O_PATH | O_DIRECTORY | O_CLOEXEC);
                if (e->fd < 0)
                        e->fd = -2;
        }
        return e->fd;
}

int realcache_resolve(struct realcache *rc, const char *path, char real[PATH_MAX])
{
        return realcache_resolve_stat(rc, path, real, NULL);
}

int realcache_resolve_stat(struct realcache *rc, const char *path, char real[PATH_MAX],
                           struct stat *ret_st)
{
        if (!rc || !plain(path) || strlen(path) >= PATH_MAX)
                return system_realpath(path, real, ret_st);
        if (STREQ(path, "/")) {
                snprintf(real, PATH_MAX, "/");
                return ret_st && lstat("/", ret_st) < 0 ? -errno : 0;
        }
        /* A directory already met as a parent (each home, each ancestor
         * of a missing entry): its answer, without another lookup. */
        ssize_t known = find(rc, path);
        if (known >= 0)
                return remembered(rc, (size_t)known, real, ret_st);
        const char *slash = strrchr(path, '/');
        char parent[PATH_MAX];
        (void)path_join(parent, path, slash == path ? 1 : (size_t)(slash - path), NULL);
        size_t k = lookup(rc, parent);
        if (!rc->e[k].real)
                return rc->e[k].err;
        const char *preal = rc->e[k].real;
        char cand[PATH_MAX];
        /* preal "/": "/" and the name; else preal, "/" and the name. */
        ssize_t n = path_join(cand, preal, STREQ(preal, "/") ? 0 : strlen(preal), slash);
        if (n < 0)
                return system_realpath(path, real, ret_st);
        struct stat st;
        int dfd = dir_fd(rc, k);
        if ((dfd >= 0 ? fstatat(dfd, slash + 1, &st, AT_SYMLINK_NOFOLLOW) : lstat(cand, &st)) < 0)
                return -errno;
        if (S_ISLNK(st.st_mode))
                return system_realpath(path, real, ret_st);
        memcpy(real, cand, (size_t)n + 1);
        if (ret_st)
                *ret_st = st;
        return 0;
}
