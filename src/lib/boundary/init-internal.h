/* SPDX-License-Identifier: Apache-2.0 */
#pragma once
/* What the files of pid 1 share (init.c, init-serve.c, init-warm.c); nothing
 * outside src/lib/boundary includes it. */

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

#include "confine.h"
#include "spawn-internal.h"

/* The command's process: stdio, then confine_and_exec(). Failures go to
 * pid 1 over `errfd` (close-on-exec: silence means execve worked). */
struct command {
        char *const *argv;
        char *const *envp;
        const char *cwd;
        int fds[3];
        bool ctty;        /* fds[0] is the sandbox's own pty slave */
        uint32_t as_user; /* 1 + another inside uid (policy "users"); 0: the sandbox's */
};

/* Work an idle sandbox's pid 1 does once, not per command; a command it
 * forks inherits the result. */
struct init_once {
        bool signals_default; /* every disposition is SIG_DFL already */
        int landlock;         /* confine_landlock_build()'s ruleset, or -1 */
        bool seccomp;         /* pid 1 runs under the sandbox's filter */
};
extern struct init_once init_once;

void init_set_stdio(int fd, int target);
/* Every disposition back to the default (sets init_once.signals_default). */
void init_reset_signals(void);
/* The confinement of a command of this sandbox, before who and what. */
void init_command_config(const struct spawn_config *cfg, const char **paths, size_t max_paths,
                         struct confine_config *cc);
/* A command's process could not start it: say why over `errfd`, exit. */
_Noreturn void init_command_fail(int errfd, const char *argv0, int exec_errno,
                                 struct al_error *err);
_Noreturn void init_command_main(struct child_ctx *ctx, const struct command *cmd, int errfd);
void init_wipe_host_identity(void);
/* Close every fd from 3 up but a, b and pid 1's Landlock ruleset (and the
 * trace's, confine.h). */
void init_close_all_but(int a, int b);
/* An exec request's payload into argv/env arrays pointing into buf. */
int init_parse_exec(char *buf, size_t len, const char **cwd, char ***argv, char ***envp);

/* The prepared process (init-warm.c). */
/* How long it may take from its request to execve before it is killed and
 * the request refused (it may have been stopped). */
enum { WARM_EXEC_TIMEOUT_MS = 5000 };
/* This sandbox uses one and has none ready. */
bool warm_wanted(const struct child_ctx *ctx);
/* Fork the next one, if wanted. */
void warm_start(struct child_ctx *ctx, int sync, int sfd);
/* Hand it a request: its pid, with *ret_fd the channel on which it reports a
 * failure or, closed by execve, its start; -1 when there is none or it could
 * not take the request (nothing was started). */
pid_t warm_take(int id, const char *payload, size_t len, const int *fds, int *ret_fd);
/* What became of a request handed to the prepared process (pid, its
 * channel fd), read within WARM_EXEC_TIMEOUT_MS: it passed execve; it
 * failed (*m is its SYNC_ERROR); it died or was stopped before it took the
 * request, which never ran (killed, to be reaped; serve it by a fork); or
 * it took the request and was stopped or misbehaved (killed: refuse it). */
enum warm_outcome { WARM_EXECED, WARM_FAILED, WARM_UNTAKEN, WARM_LOST };
enum warm_outcome warm_wait(pid_t pid, int fd, struct sync_msg *m);
/* pid, a child of pid 1, is stopped (a process inside, as the same user,
 * may stop it before its execve); its stop is taken (waitid WSTOPPED). */
bool init_child_stopped(pid_t pid);
/* pid was the prepared process, dead unused: true (it is forgotten). */
bool warm_reaped(pid_t pid);
/* After a SIGCHLD: a prepared process that was stopped is let go. */
void warm_check_stopped(void);
/* A request was served: a prepared process lost before may be replaced. */
void warm_served(void);
