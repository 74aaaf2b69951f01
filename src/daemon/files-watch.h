/* SPDX-License-Identifier: Apache-2.0 */
#pragma once

#include <jansson.h>
#include <stdbool.h>

#include "error.h"

/* inotify on a directory of the workspace (and, when recursive, on every
 * directory beneath it, new ones included), turned into events named by
 * their path beneath the workspace:
 *   {"type": "create"|"modify"|"delete", "path", "dir"}
 *   {"type": "rename", "from", "path", "dir"}
 *   {"type": "overflow"}  events were lost (the kernel's queue, or the
 *                         watch limit below)
 * Directories are reached as the files API reaches them: beneath the
 * workspace, following no symbolic link; a link is never watched through. */

#define FILES_WATCH_DIRS_MAX 4096

/* Every directory watched holds one of the kernel's inotify watches, which
 * are counted per user: the daemon's are root's, shared with the host's
 * own services. So all watches of this process together hold at most
 * FILES_WATCH_TOTAL_MAX directories, and never more than a quarter of
 * /proc/sys/fs/inotify/max_user_watches; the watches of one owner (a
 * grant) hold at most FILES_WATCH_OWNER_MAX, so that one grant cannot
 * spend what the others would watch with. */
#define FILES_WATCH_TOTAL_MAX 32768
#define FILES_WATCH_OWNER_MAX 8192

struct files_watch;

/* owner: who the watch is charged to (a grant's token hash; NULL: one
 * shared owner). -ENOSPC (err says which budget) when not even the
 * directory asked for can be watched. */
int files_watch_new(int root, const char *rel, bool recursive, const char *owner,
                    struct files_watch **ret, struct al_error *err);
/* As files_watch_new, never watching a directory that is a denied entry
 * of `deny` (owned by the watch from here on, even on error): one moved
 * into the tree after the request was checked is not entered. */
struct files_deny;
int files_watch_new_deny(int root, const char *rel, bool recursive, const char *owner,
                         struct files_deny *deny, struct files_watch **ret, struct al_error *err);
/* The inotify fd to poll (non-blocking). */
int files_watch_fd(const struct files_watch *w);
/* Read what is pending and append its events to `out`; 0 when nothing was
 * pending; -ENOENT once the watched directory itself is gone (removed or
 * moved away), other -errno when the fd failed. */
int files_watch_read(struct files_watch *w, json_t *out);
struct files_watch *files_watch_free(struct files_watch *w);
