/* SPDX-License-Identifier: Apache-2.0 */
/* A host path that root acts on, opened only when nobody but root and the
 * caller can change what it names. Root resolves a workspace or a state
 * directory by its path; a directory on that path another user can write
 * lets them swap what follows it (for a symbolic link to /etc or to a third
 * user's files) between the moment the path is given and the moment root
 * uses it. */
#pragma once

#include <stdbool.h>
#include <sys/types.h>

#include "error.h"

/* The uid root acts for besides itself: the user sudo ran it for
 * (SUDO_UID, when the real uid is 0), else 0. sudo sets it in root's own
 * environment; nothing another user controls. */
uid_t trusted_caller(void);

/* Open `path` (O_PATH; a relative path is taken from the current
 * directory) by walking it one component at a time from /, following
 * symbolic links as the kernel would, and refuse it when a directory
 * looked up on the way can be changed by someone other than root or
 * `caller`:
 *   - a directory owned by another user;
 *   - a directory group- or world-writable without the sticky bit;
 *   - in a sticky directory (/tmp), an entry owned by another user.
 * With `whole`, the last component is held to the same rule (its owner and
 * its mode), for a directory whose content root trusts (a state directory).
 * Returns the fd, with the resolved path in real (PATH_MAX bytes);
 * -EPERM with err naming the component, its owner and what to do when
 * refused; another -errno (err set) when the path cannot be walked. */
int trusted_open(const char *path, uid_t caller, bool whole, char *real, const char *what,
                 struct al_error *err);

struct stat;
/* Whether another user could write what st describes: owned by neither
 * root nor caller, or group- or world-writable. */
bool trusted_stat_foreign(const struct stat *st, uid_t caller);
