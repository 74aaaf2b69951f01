/* SPDX-License-Identifier: Apache-2.0 */
#pragma once

#include <stdint.h>
#include <sys/types.h>

/* File system helpers shared by the library, the daemon and the CLI. Both
 * follow the -errno convention (docs/internals/errors.md). */

/* How deep fs_remove_tree goes by default: deeper trees are left in place
 * with -ELOOP rather than recursing without bound. */
#define FS_REMOVE_DEPTH_MAX 256

/* openat2(2): open path relative to dirfd under the RESOLVE_* rules in
 * resolve. flags are passed as given (add O_CLOEXEC yourself); mode is used
 * only with O_CREAT or O_TMPFILE. Retried while the kernel answers EAGAIN (a
 * rename raced the lookup). Returns the fd or -errno. */
int fs_openat2(int dirfd, const char *path, int flags, mode_t mode, uint64_t resolve);

/* Remove name beneath dirfd (AT_FDCWD and a path work too), a whole tree
 * when it is a directory. No symbolic link is followed: a link is removed,
 * never what it points to. Nothing deeper than max_depth directories is
 * entered (-ELOOP). An entry already gone counts as removed. On error the
 * rest is still removed where it can be; returns 0 or the first -errno. */
int fs_remove_tree(int dirfd, const char *name, unsigned max_depth);
