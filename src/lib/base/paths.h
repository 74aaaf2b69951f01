/* SPDX-License-Identifier: Apache-2.0 */
#pragma once

#include <sys/types.h>

/* Where Airlock keeps things when no flag says otherwise: one place for the
 * defaults that the CLI, the daemon and the library share. For root the
 * system directories; for anyone else their home (state) and
 * $XDG_RUNTIME_DIR (sockets and run directories). */

#define PATHS_STATE_ROOT_SYSTEM "/var/lib/airlock"
#define PATHS_STATE_ROOT_HOME   ".local/state/airlock" /* beneath $HOME */
#define PATHS_RUN_ROOT_SYSTEM   "/run/airlock"
#define PATHS_RUN_ROOT_XDG      "airlock" /* beneath $XDG_RUNTIME_DIR */

/* Each returns a new string, or NULL when the directory it depends on
 * (home, or xdg_runtime for a user) is missing or not absolute. */

/* Sandboxes kept for review (DIR/sandboxes/ID), the git state: /var/lib/airlock
 * or ~/.local/state/airlock. */
char *paths_state_root(uid_t uid, const char *home);
/* The daemon's state: <state root>/daemon. */
char *paths_daemon_state_dir(uid_t uid, const char *home);
/* The audit log: <state root>/audit/audit.jsonl. */
char *paths_audit_log(uid_t uid, const char *home);
/* The daemon's API socket: /run/airlock/airlockd.sock or
 * $XDG_RUNTIME_DIR/airlock/airlockd.sock. */
char *paths_daemon_socket(uid_t uid, const char *xdg_runtime);
/* The daemon's per-sandbox run directories: /run/airlock/sandboxes or
 * $XDG_RUNTIME_DIR/airlock/sandboxes. */
char *paths_sandbox_run_dir(uid_t uid, const char *xdg_runtime);

/* NAME in the directory of the running program (/proc/self/exe): where
 * Airlock's own helpers sit (airlock-git, airlock-tool). NULL when the
 * program's path cannot be read. */
char *paths_beside_self(const char *name);
