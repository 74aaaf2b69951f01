/* SPDX-License-Identifier: Apache-2.0 */
#pragma once

#include <limits.h>
#include <sys/types.h>

/* airlock agent's sandbox: an `airlock supervise` child (docs/control.md)
 * with the policy in a private directory, driven over its control socket
 * and destroyed at the end. */

struct policy;

struct sandbox_proc {
        char id[17];        /* set by the caller */
        char dir[PATH_MAX]; /* private: the policy file and the run dir */
        char policy_path[PATH_MAX + 32];
        char run_dir[PATH_MAX + 32];
        char sock[PATH_MAX + 64];
        pid_t pid;
};

struct agent_sandbox_opts {
        const char *secrets, *account, *state_root;
        const char *audit_rotate; /* SIZE[:KEEP] or never, passed to the supervisor */
};

/* Start the supervisor and wait for its ready line; msg says why not. */
int agent_sandbox_start(struct sandbox_proc *sb, const struct agent_sandbox_opts *a,
                        struct policy *p, const char *audit_path, char *msg, size_t msglen);
/* Destroy the sandbox and wait for its supervisor. */
void agent_sandbox_stop(struct sandbox_proc *sb);
void agent_sandbox_remove_dir(struct sandbox_proc *sb);
