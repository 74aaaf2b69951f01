/* SPDX-License-Identifier: Apache-2.0 */
#pragma once

#include <stdbool.h>
#include <stddef.h>
#include <sys/types.h>

struct sock_fprog;

#include "error.h"
#include "policy.h"

/* The last steps of the spawn sequence, in the command's own process:
 * setsid, close_range, rlimits, Landlock, every capability dropped,
 * no_new_privs, seccomp last, then execve with the clean environment. */
struct confine_config {
        const struct policy *policy;
        uid_t uid;
        gid_t gid;
        const char *cwd;
        const char *const *write_paths; /* Landlock allow-list */
        size_t n_write_paths;
        char *const *argv;
        char *const *envp;
        int keep_fd; /* kept open across close_range (CLOEXEC), or -1 */
        /* A ruleset pid 1 built once for write_paths (landlock_build_writes),
         * used in place of building one here; below 3 (stdio is never one):
         * none, build it from write_paths. */
        int landlock_fd;
        /* This process inherited Airlock's seccomp filter from pid 1, which
         * installed it on itself once (seccomp_install): not loaded again. */
        bool seccomp_inherited;
        bool ctty; /* fd 0 is a terminal of the sandbox's own: make it the new
                    * session's controlling terminal */
        const struct sock_fprog *extra_filter; /* spawn_config.extra_filter, or NULL */
};

/* Returns only on failure, with `err` set; *ret_exec_errno is non-zero when
 * execve itself failed. */
int confine_and_exec(const struct confine_config *c, int *ret_exec_errno, struct al_error *err);

/* confine_and_exec() in two halves, for a process made ready before its
 * command is known (an idle sandbox's prepared process, init.c): every step
 * but the working directory and execve, with c->cwd, argv and envp unused;
 * then, once they are known, chdir(c->cwd) by the caller and confine_exec(). */
int confine_prepare(const struct confine_config *c, struct al_error *err);
int confine_exec(const struct confine_config *c, int *ret_exec_errno, struct al_error *err);

/* Build the Landlock ruleset confine_and_exec() would for `c` (its policy's
 * tier and write_paths) into *ret_fd, close-on-exec; -1 for the gvisor tier,
 * which takes no ruleset. pid 1 builds it once and hands it to every command
 * as landlock_fd. */
int confine_landlock_build(const struct confine_config *c, int *ret_fd, struct al_error *err);

/* Close every descriptor from 3 up but the n in `keep` (negative ones are
 * ignored) and the trace descriptor (trace.h), which is close-on-exec. */
void confine_close_except(const int *keep, size_t n);

/* Drop every capability from every set, lock the securebits. */
int confine_drop_caps(struct al_error *err);

/* The highest capability this kernel knows (/proc/sys/kernel/cap_last_cap),
 * found with prctl once per process tree. */
int confine_last_cap(void);
/* The same, keeping the capabilities of mask `keep` (1 << CAP_x) permitted
 * and effective in this process alone: the bounding set loses them too. */
int confine_drop_caps_but(uint64_t keep, struct al_error *err);
