/* SPDX-License-Identifier: Apache-2.0 */
#pragma once

#include <stdbool.h>
#include <stddef.h>

#include "error.h"

/* The Landlock ABI the kernel offers, 0 when Landlock is unavailable. */
int landlock_abi(void);

/* Restrict the calling thread: reads and execution everywhere, writes only
 * beneath the given paths (which must exist; missing ones are skipped) and
 * to the character devices under /dev that a process needs (null, zero, full,
 * tty, ptmx, pts). Call after the new root is in place, before seccomp.
 * Returns 0 when Landlock is unavailable and `required` is false.
 *
 * The caller sets PR_SET_NO_NEW_PRIVS first: landlock_restrict_self needs it
 * (or CAP_SYS_ADMIN). Write rights the running ABI does not know are left
 * unhandled: REFER (cross-directory rename and link) needs ABI 2, TRUNCATE
 * ABI 3, IOCTL_DEV ABI 5. The restriction applies to the calling thread and
 * its future children only, and to files opened after it. */
int landlock_restrict_writes(const char *const *paths, size_t n, bool required,
                             struct al_error *err);

/* The same in two steps: build the ruleset (*ret_fd, close-on-exec; -1 when
 * Landlock is unavailable and `required` is false), then restrict the calling
 * thread with it. One ruleset may restrict any number of processes: each gets
 * its own copy of the rules at landlock_restrict_fd(). Rules are bound to the
 * files the paths name when it is built. */
int landlock_build_writes(const char *const *paths, size_t n, bool required, int *ret_fd,
                          struct al_error *err);
int landlock_restrict_fd(int ruleset_fd, struct al_error *err);
