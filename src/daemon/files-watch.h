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

struct files_watch;

int files_watch_new(int root, const char *rel, bool recursive, struct files_watch **ret,
                    struct al_error *err);
/* The inotify fd to poll (non-blocking). */
int files_watch_fd(const struct files_watch *w);
/* Read what is pending and append its events to `out`; 0 when nothing was
 * pending; -ENOENT once the watched directory itself is gone (removed or
 * moved away), other -errno when the fd failed. */
int files_watch_read(struct files_watch *w, json_t *out);
struct files_watch *files_watch_free(struct files_watch *w);
