/* SPDX-License-Identifier: Apache-2.0 */
#pragma once

#include <stdbool.h>
#include <sys/types.h>

/* One way to start a helper program: fork (or clone3), put the file
 * descriptors the caller names in place, close-on-exec everything else,
 * reset signal dispositions and the signal mask, exec. The exec's errno
 * comes back over a close-on-exec pipe, so a program that cannot be run is
 * an error of child_spawn (-errno), never a child that exits 127.
 *
 * Not for the sandbox itself: spawn.c's sequence (namespaces, pid 1,
 * confinement) is its own. */

#define CHILD_FDS_MAX 8

/* Values of child_spawn.fds[i] other than a descriptor. */
#define CHILD_FD_CLOSED  (-1) /* nothing at i */
#define CHILD_FD_NULL    (-2) /* /dev/null (read-write) at i */
#define CHILD_FD_INHERIT (-3) /* i as the parent has it (only for 0, 1, 2) */

struct child_spawn {
        const char *path; /* what is executed; with search_path, a name looked up in PATH */
        char *const *argv;
        char *const *envp; /* the whole environment; NULL: an empty one */
        /* fds[i] lands on descriptor i in the child, for i < n_fds (at least
         * 3: stdin, stdout, stderr). Every other descriptor is closed on exec. */
        int fds[CHILD_FDS_MAX];
        unsigned n_fds;
        const char *cwd;  /* NULL: the parent's */
        bool search_path; /* execvpe rather than execve */
        bool setsid;      /* a new session (and process group) */
        bool setpgid;     /* a new process group, set by both sides (no race) */
        bool want_pidfd;  /* *ret_pidfd: a pidfd from clone3 (-1 where the kernel has none) */
        /* No signal at exit (clone3 exit_signal 0): a waitpid(-1) reaper does
         * not collect it; wait for it with its pidfd or __WALL. */
        bool no_exit_signal;
};

/* Start s->path; returns 0 with *ret_pid (and *ret_pidfd when asked) once
 * the exec has succeeded, or -errno (fork, setting up the child, or the exec
 * itself; such a child has been reaped). */
int child_spawn(const struct child_spawn *s, pid_t *ret_pid, int *ret_pidfd);

/* Wait for pid, retrying on EINTR: its wait status, or -errno. */
int child_wait(pid_t pid);

/* A helper process of this one, joined to it by a SOCK_SEQPACKET pair: in
 * the helper, returns 0 with *ret_sock its end, every signal blocked (the
 * caller's handlers are not its own) and its life bound to the caller's
 * (PR_SET_PDEATHSIG SIGKILL; it has _exited if the caller was already
 * gone); it closes what it must not hold itself. In the caller, returns 1
 * with *ret_sock the caller's end (close-on-exec) and *ret_pid the helper;
 * -errno when it cannot be forked. Fork it while the caller has one thread. */
int child_helper_fork(int *ret_sock, pid_t *ret_pid);
