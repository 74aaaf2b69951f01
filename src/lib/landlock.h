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
 * Returns 0 when Landlock is unavailable and `required` is false. */
int landlock_restrict_writes(const char *const *paths, size_t n, bool required,
                             struct al_error *err);
