/* SPDX-License-Identifier: Apache-2.0 */
#include <errno.h>
#include <fcntl.h>
#include <linux/sched.h>
#include <signal.h>
#include <stdint.h>
#include <sys/prctl.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

#include "child.h"
#include "util.h"

#ifndef CLOSE_RANGE_CLOEXEC
#define CLOSE_RANGE_CLOEXEC (1U << 2)
#endif

/* In the child: report errno on the pipe and end. Async-signal-safe. */
static _Noreturn void child_fail(int errfd)
{
        int e = errno;
        ssize_t k;
        do
                k = write(errfd, &e, sizeof(e));
        while (k < 0 && errno == EINTR);
        _exit(127);
}

/* Mark every descriptor from `from` on close-on-exec. */
static int cloexec_from(unsigned from)
{
        if (syscall(SYS_close_range, from, ~0U, CLOSE_RANGE_CLOEXEC) == 0)
                return 0;
        struct rlimit rl;
        unsigned max = 65536;
        if (getrlimit(RLIMIT_NOFILE, &rl) == 0 && rl.rlim_cur < max)
                max = (unsigned)rl.rlim_cur;
        for (unsigned fd = from; fd < max; fd++) {
                int fl = fcntl((int)fd, F_GETFD);
                if (fl >= 0 && !(fl & FD_CLOEXEC))
                        (void)fcntl((int)fd, F_SETFD, fl | FD_CLOEXEC);
        }
        return 0;
}

/* Everything between fork and exec: only async-signal-safe calls. */
static _Noreturn void child_run(const struct child_spawn *s, int errfd)
{
        static char *const empty[] = {NULL};
        unsigned n = s->n_fds;
        int src[CHILD_FDS_MAX];

        for (int sig = 1; sig < NSIG; sig++)
                (void)signal(sig, SIG_DFL);
        sigset_t none;
        sigemptyset(&none);
        sigprocmask(SIG_SETMASK, &none, NULL);

        if (s->setsid && setsid() < 0)
                child_fail(errfd);
        if (s->setpgid && setpgid(0, 0) < 0)
                child_fail(errfd);

        /* Out of the way of the targets first, so that no dup2 below
         * clobbers a source still to be placed. */
        if (errfd < (int)n) {
                errfd = fcntl(errfd, F_DUPFD_CLOEXEC, (int)n);
                if (errfd < 0)
                        _exit(127);
        }
        for (unsigned i = 0; i < n; i++) {
                int fd = s->fds[i];
                if (fd == CHILD_FD_NULL) {
                        fd = open("/dev/null", O_RDWR | O_CLOEXEC);
                        if (fd < 0)
                                child_fail(errfd);
                }
                if (fd >= 0) {
                        int moved = fcntl(fd, F_DUPFD_CLOEXEC, (int)n);
                        if (moved < 0)
                                child_fail(errfd);
                        fd = moved;
                }
                src[i] = fd;
        }
        for (unsigned i = 0; i < n; i++) {
                if (src[i] >= 0) {
                        if (dup2(src[i], (int)i) < 0)
                                child_fail(errfd);
                } else if (src[i] == CHILD_FD_CLOSED)
                        (void)close((int)i);
                /* CHILD_FD_INHERIT: left as it is */
        }
        if (cloexec_from(n) < 0)
                child_fail(errfd);
        if (s->cwd && chdir(s->cwd) < 0)
                child_fail(errfd);
        char *const *envp = s->envp ? s->envp : empty;
        if (s->search_path)
                execvpe(s->path, s->argv, envp);
        else
                execve(s->path, s->argv, envp);
        child_fail(errfd);
}

int child_spawn(const struct child_spawn *s, pid_t *ret_pid, int *ret_pidfd)
{
        if (s->n_fds < 3 || s->n_fds > CHILD_FDS_MAX)
                return -EINVAL;
        for (unsigned i = 3; i < s->n_fds; i++)
                if (s->fds[i] == CHILD_FD_INHERIT)
                        return -EINVAL;
        int p[2];
        if (pipe2(p, O_CLOEXEC) < 0)
                return -errno;
        _cleanup_close_ int rd = p[0];
        _cleanup_close_ int wr = p[1];

        /* Signals stay blocked until the child has reset its handlers: a
         * signal sent to it before then would run the parent's handler in
         * the child. */
        sigset_t all, old;
        sigfillset(&all);
        sigprocmask(SIG_SETMASK, &all, &old);
        int pidfd = -1;
        pid_t pid = -1;
        if (s->want_pidfd || s->no_exit_signal) {
                struct clone_args ca = {
                    .flags = s->want_pidfd ? CLONE_PIDFD : 0,
                    .pidfd = (uint64_t)(uintptr_t)&pidfd,
                    .exit_signal = s->no_exit_signal ? 0 : SIGCHLD,
                };
                pid = (pid_t)syscall(SYS_clone3, &ca, sizeof(ca));
                if (pid < 0 && errno == ENOSYS)
                        pidfd = -1;
                else if (pid == 0)
                        child_run(s, wr);
        }
        if (pid < 0 && (!(s->want_pidfd || s->no_exit_signal) || errno == ENOSYS)) {
                pid = fork();
                if (pid == 0)
                        child_run(s, wr);
        }
        int e = errno;
        sigprocmask(SIG_SETMASK, &old, NULL);
        if (pid < 0)
                return -e;
        if (s->setpgid)
                (void)setpgid(pid, pid); /* as the child does: whoever is first */
        closep(&wr);
        wr = -1;

        int child_errno = 0;
        ssize_t k;
        do
                k = read(rd, &child_errno, sizeof(child_errno));
        while (k < 0 && errno == EINTR);
        if (k == (ssize_t)sizeof(child_errno) && child_errno > 0) {
                while (waitpid(pid, NULL, __WALL) < 0 && errno == EINTR)
                        ;
                if (pidfd >= 0)
                        close(pidfd);
                return -child_errno;
        }
        *ret_pid = pid;
        if (ret_pidfd)
                *ret_pidfd = pidfd;
        else if (pidfd >= 0)
                close(pidfd);
        return 0;
}

int child_wait(pid_t pid)
{
        int status;
        while (waitpid(pid, &status, 0) < 0)
                if (errno != EINTR)
                        return -errno;
        return status;
}

int child_helper_fork(int *ret_sock, pid_t *ret_pid)
{
        int sv[2];
        if (socketpair(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC, 0, sv) < 0)
                return -errno;
        pid_t parent = getpid();
        sigset_t all, old;
        sigfillset(&all);
        sigprocmask(SIG_SETMASK, &all, &old);
        pid_t pid = fork();
        if (pid == 0) {
                close(sv[0]);
                if (prctl(PR_SET_PDEATHSIG, SIGKILL) < 0 || getppid() != parent)
                        _exit(0);
                *ret_sock = sv[1];
                return 0;
        }
        int e = errno;
        sigprocmask(SIG_SETMASK, &old, NULL);
        close(sv[1]);
        if (pid < 0) {
                close(sv[0]);
                return -e;
        }
        *ret_sock = sv[0];
        *ret_pid = pid;
        return 1;
}
