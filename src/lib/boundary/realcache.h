/* SPDX-License-Identifier: Apache-2.0 */
#pragma once

#include <limits.h>
#include <sys/stat.h>

/* realpath() for many paths that share directories (the deny list under
 * every home, resolved on each start): the real path of each directory is
 * found once and remembered (a directory met as a parent and then asked
 * for itself, as a home or the ancestor of a missing entry, costs nothing
 * more), each further path costs one lstat of its last component. The
 * answer is realpath()'s, errno included: a path with "." or ".." or an
 * empty component, or whose last component is a symbolic link, goes to
 * realpath() itself. Remembered answers go stale when the tree changes:
 * keep a cache for one plan, not longer. */
struct realcache;

struct realcache *realcache_new(void);
struct realcache *realcache_free(struct realcache *rc);
/* 0 and the real path in `real`, or -errno; a NULL cache is realpath(). */
int realcache_resolve(struct realcache *rc, const char *path, char real[PATH_MAX]);
/* The same, and what is at the real path (lstat) in *ret_st when not
 * NULL: the stat the lookup made, not another. The cache holds its
 * directories open (O_PATH, close-on-exec) until it is freed: free it
 * before anything is cloned or forked. */
int realcache_resolve_stat(struct realcache *rc, const char *path, char real[PATH_MAX],
                           struct stat *ret_st);
