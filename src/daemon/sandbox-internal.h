/* SPDX-License-Identifier: Apache-2.0 */
#pragma once

#include <sys/types.h>

#include "daemon.h"

/* What sandbox.c shares with its parts (sandbox-status.c,
 * sandbox-reattach.c, sandbox-cleanup.c), and with nothing else. */

/* A pidfd for pid, or -errno. */
int sandbox_pidfd_open(pid_t pid);
void pidfd_kill(struct sandbox *sb, int sig);
struct sandbox *sandbox_alloc(struct daemon *d, const char *id);
void sandbox_free(struct sandbox *sb);
/* Watch the supervisor's pidfd: its exit ends the sandbox. */
int watch_exit(struct sandbox *sb);
/* Stopping: the status calls in flight end with -ECANCELED. */
void sandbox_status_cancel_all(struct daemon *d);
/* Remove a tree in a child process, off the loop (sandbox-cleanup.c). */
void remove_tree_async(struct daemon *d, const char *path);
