/* SPDX-License-Identifier: Apache-2.0 */
#pragma once

#include <jansson.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

#include "error.h"

/* The files API's operations on a sandbox's host workspace. Every path is
 * resolved beneath the workspace with openat2(RESOLVE_BENEATH): no `..`, no
 * symbolic link and no /proc magic link leads out of it, and writes follow no
 * symbolic link at all. The workspace is written to by the sandbox, so none of
 * what is found there is trusted. */

#define FILES_MAX_SIZE  (16u << 20) /* bytes per file read or written */
#define FILES_LIST_MAX  10000       /* entries per listing */
#define FILES_DEPTH_MAX 256         /* directories deep, for recursive removal */

/* A client's path, checked and made relative to the workspace: either
 * relative, or absolute beneath /workspace (where the sandbox sees it).
 * No `..` components, no empty path; "." is the workspace itself (allowed
 * only where `allow_root`). Returns -EINVAL or -EXDEV (outside) with `err`
 * naming the path. */
int files_clean_path(const char *path, bool allow_root, char **ret, struct al_error *err);

/* O_PATH handle on the workspace directory. */
int files_open_root(const char *workspace, int *ret_fd, struct al_error *err);

/* A regular file of at most `max` bytes. -EFBIG when larger, -EINVAL when not
 * a regular file, -EXDEV when the path leads out of the workspace. */
int files_read(int root, const char *rel, size_t max, char **ret, size_t *ret_len,
               struct al_error *err);

/* Replace or create a regular file atomically (a temporary file renamed into
 * place). Missing parent directories are created when `parents`. A symbolic
 * link anywhere on the path is refused (-ELOOP), so is a directory or special
 * file at the target. New entries get the owner of their directory. */
int files_write(int root, const char *rel, const void *data, size_t len, bool parents,
                struct al_error *err);

/* As files_write, with permission bits `mode` (never a set-id or sticky
 * bit), or the default when mode < 0. */
int files_write_mode(int root, const char *rel, const void *data, size_t len, bool parents,
                     int mode, struct al_error *err);

/* Remove a file, a symbolic link (not what it points to) or an empty
 * directory; a whole tree when `recursive`. */
int files_delete(int root, const char *rel, bool recursive, struct al_error *err);

/* {"path", "entries": [{"name", "type", "size", "mode", "mtime"}], "truncated"}
 * sorted by name; names that are not UTF-8 are left out and counted in
 * "skipped". */
int files_list(int root, const char *rel, size_t max, json_t **ret, struct al_error *err);

/* As files_list, down to `depth` levels (1 to FILES_LIST_DEPTH_MAX; 1 is
 * files_list's), each entry with its "path" beneath `rel`, sorted by path;
 * symbolic links are listed, never entered. */
#define FILES_LIST_DEPTH_MAX 32
int files_list_tree(int root, const char *rel, unsigned depth, size_t max, json_t **ret,
                    struct al_error *err);

/* As files_list (depth 0) or files_list_tree, leaving out each entry that
 * is a denied entry of `deny` itself, by identity, and never entering one:
 * a directory holding one that is moved beneath `rel` after the request
 * was checked shows none of its names, sizes or modes. */
struct files_deny;
int files_list_deny(int root, const char *rel, unsigned depth, size_t max,
                    const struct files_deny *deny, json_t **ret, struct al_error *err);

/* A directory; with `parents` its missing parents too, and an existing
 * directory is no error. New directories get the owner of their parent. */
int files_mkdir(int root, const char *rel, bool parents, struct al_error *err);

/* Move `from` to `to` (both beneath the workspace, the directories holding
 * them reached following no symbolic link); -EEXIST when `to` exists
 * unless `overwrite`. A link is moved as a link. */
int files_rename(int root, const char *from, const char *to, bool overwrite, struct al_error *err);

/* {"path", "name", "type", "size", "mode", "mtime"[, "target"]} of `rel`,
 * resolved as reads are, the last component not followed. */
int files_stat(int root, const char *rel, json_t **ret, struct al_error *err);

/* A regular file opened for reading, of any size, for streaming. */
int files_open_read(int root, const char *rel, int *ret_fd, uint64_t *ret_size,
                    struct al_error *err);

/* Append to an existing regular file (never through a link): how a client
 * writes a file larger than one request, piece by piece. */
int files_append(int root, const char *rel, const void *data, size_t len, struct al_error *err);

/* Remove `name` in `dirfd` and, if it is a directory, all of it, without
 * following any symbolic link. */
int files_remove_tree(int dirfd, const char *name);
