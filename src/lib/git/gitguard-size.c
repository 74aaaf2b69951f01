/* SPDX-License-Identifier: Apache-2.0 */
/* gitguard's judgement of sizes: files host git reads whole at the
 * commands a shell prompt runs, made too large by the run. A sparse file
 * costs the agent no disk and no quota, yet git reads (and holds in
 * memory) every byte of its size: a 1 GiB sparse HEAD keeps every
 * `git status` busy for seconds and a gigabyte, a larger one makes git die
 * for want of memory, and the host's memory with it. The walk that applies
 * this is gitguard.c. */
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>

#include "gitguard-internal.h"
#include "util.h"

/* A file past SPARSE_MIN whose blocks hold less than an eighth of its size
 * is sparse (or zeros a compressing file system stored as nothing): git
 * never writes one. */
#define SPARSE_MIN (1024 * 1024)
/* A loose ref is one object name, or "ref: " and a ref name; git's own
 * never approach this. */
#define REF_MAX (64 * 1024)
/* Git itself ignores an attributes file past this (later versions an
 * ignore file too): what is larger is no file of the user's. */
#define WORKTREE_MAX (100 * 1024 * 1024)

static bool sparse(const struct stat *st)
{
        return st->st_size > SPARSE_MIN &&
               (unsigned long long)st->st_blocks * 512ULL * 8ULL < (unsigned long long)st->st_size;
}

/* HEAD and the pseudo-refs beside it that git resolves as refs (FETCH_HEAD
 * holds one line per ref fetched, and may be large). */
static bool pseudo_ref(const char *name)
{
        size_t n = strlen(name);
        if (STREQ(name, "AUTO_MERGE"))
                return true;
        if (n < 4 || !STREQ(name + n - 4, "HEAD") || STREQ(name, "FETCH_HEAD"))
                return false;
        return strspn(name, "ABCDEFGHIJKLMNOPQRSTUVWXYZ_") == n;
}

bool gitguard_size_skips(const char *inner)
{
        /* Objects are read through their headers and in windows, never
         * whole; git-lfs's store is read on demand. */
        size_t k = strcspn(inner, "/");
        return (k == 7 && strncmp(inner, "objects", 7) == 0) ||
               (k == 3 && strncmp(inner, "lfs", 3) == 0);
}

const char *gitguard_size_reason(const struct stat *st, const char *inner, char *buf, size_t len)
{
        if (!S_ISREG(st->st_mode))
                return NULL;
        bool top = !strchr(inner, '/');
        bool ref = strncmp(inner, "refs/", 5) == 0 || (top && pseudo_ref(inner));
        if (sparse(st))
                snprintf(buf, len,
                         "a sparse file of %lld bytes in a git directory (host git would read "
                         "all of it)",
                         (long long)st->st_size);
        else if (ref && st->st_size > REF_MAX)
                snprintf(buf, len,
                         "a ref of %lld bytes (host git reads each ref whole, at every command "
                         "that resolves it)",
                         (long long)st->st_size);
        else
                return NULL;
        return buf;
}

bool gitguard_worktree_read_match(const char *name)
{
        static const char *const names[] = {".gitignore", ".gitattributes", ".mailmap",
                                            ".gitmodules"};
        for (size_t i = 0; i < ARRAY_SIZE(names); i++)
                if (strcasecmp(name, names[i]) == 0)
                        return true;
        return false;
}

const char *gitguard_worktree_size_reason(const struct stat *st, char *buf, size_t len)
{
        if (!S_ISREG(st->st_mode))
                return NULL;
        if (sparse(st))
                snprintf(buf, len,
                         "a sparse file of %lld bytes git reads whole (host git would read all "
                         "of it at every status or log)",
                         (long long)st->st_size);
        else if (st->st_size > WORKTREE_MAX)
                snprintf(buf, len,
                         "a file of %lld bytes git reads whole (more than the %d MiB git "
                         "itself takes)",
                         (long long)st->st_size, WORKTREE_MAX >> 20);
        else
                return NULL;
        return buf;
}
