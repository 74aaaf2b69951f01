/* SPDX-License-Identifier: Apache-2.0 */
#pragma once

#include <stdbool.h>

#include "error.h"

struct policy;

/* The files API works on the host's directory, as the daemon (root), not
 * through the sandbox's mounts: the sandbox's deny list (the mandatory
 * entries, filesystem.denyRead, Airlock's own state, the daemon's secrets
 * file), which inside is a mask over each entry, must hold here as well.
 *
 * A deny set is the entries the sandbox's masks cover, resolved as the
 * supervisor resolves them (mounts_plan_new, as the caller) and held by
 * identity (device and inode), so that a rename by the sandbox cannot move
 * an entry out of it; filesystem.allowRead entries are shown again, as
 * inside. */
struct files_deny;

/* secrets_path: the daemon's --secrets file, or NULL. */
int files_deny_new(const struct policy *p, const char *home, const char *secrets_path,
                   struct files_deny **ret, struct al_error *err);
struct files_deny *files_deny_free(struct files_deny *fd);
/* Whether each entry is still what it was when the set was made (the same
 * file, or still absent): a set kept between requests is made again when
 * an entry was replaced (a rename over the secrets file) or appeared. */
bool files_deny_fresh(const struct files_deny *fd);

/* 0 when `rel` beneath `root` (resolved as reads resolve it: links within
 * the workspace followed; the nearest existing directory above it when it
 * does not exist yet) is neither a denied entry nor beneath one; with
 * `tree`, also when no denied entry lies beneath it (a tar, a recursive
 * list, watch or removal, a rename of a directory). -EACCES with err
 * naming the path otherwise. */
int files_deny_check(const struct files_deny *fd, int root, const char *rel, bool tree,
                     struct al_error *err);

/* The same for what `opened` is (an fd the operation itself opened, so
 * that a path the sandbox changes between the check and the use cannot
 * lead elsewhere). */
int files_deny_check_fd(const struct files_deny *fd, int root, int opened, const char *rel,
                        struct al_error *err);

/* Whether st is a denied entry itself (false for a NULL set). */
struct stat;
bool files_deny_has(const struct files_deny *fd, const struct stat *st);

/* Whether `name` in directory `dir` (dirfd: the same directory, O_PATH
 * will do, or -1) names a denied entry: one that was there under that name
 * when the set was made (gone or not yet made since), or a denied file
 * under that name now. For what reports names without opening them (a
 * watch's events). False for a NULL set. */
bool files_deny_named(const struct files_deny *fd, int dirfd, const struct stat *dir,
                      const char *name);

/* The HTTP side (http/files.c): the check for sandbox sb's host workspace
 * (a workspace the daemon made holds nothing of the host's: no check), the
 * refusal sent as 403 path_denied. -1 when a reply was sent. */
struct daemon;
struct sandbox;
struct evhttp_request;
int files_deny_guard(struct daemon *d, struct evhttp_request *req, const struct sandbox *sb,
                     int root, const char *rel, bool tree);
/* The same for an fd the request opened (files_deny_check_fd). */
int files_deny_guard_fd(struct daemon *d, struct evhttp_request *req, const struct sandbox *sb,
                        int root, int opened, const char *rel);
/* The sandbox's deny set, for a walk that checks each entry itself (NULL
 * for a workspace the daemon made); -1 when a reply was sent. */
int files_deny_for(struct daemon *d, struct evhttp_request *req, const struct sandbox *sb,
                   struct files_deny **ret);
