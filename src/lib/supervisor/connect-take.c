/* SPDX-License-Identifier: Apache-2.0 */
/* Descriptors taken from the sandbox, never closed here when that could
 * block (connect-take.h). */
#include <errno.h>
#include <fcntl.h>
#include <linux/sched.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/socket.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

#include "connect-take.h"
#include "util.h"

#ifndef P_PIDFD
#define P_PIDFD 3
#endif

static int fdinfo_number(const char *buf, const char *name, int base, unsigned long long *ret)
{
        const char *p = strstr(buf, name);
        if (!p)
                return -EIO;
        p += strlen(name);
        p += strspn(p, " \t");
        char *end = NULL;
        errno = 0;
        unsigned long long v = strtoull(p, &end, base);
        if (errno || end == p || *p == '-' || (*end != '\n' && *end != '\0'))
                return -EIO;
        *ret = v;
        return 0;
}

int cn_read_small(const char *path, char *buf, size_t size)
{
        _cleanup_close_ int f = open(path, O_RDONLY | O_CLOEXEC);
        if (f < 0)
                return -errno;
        ssize_t n = read(f, buf, size - 1);
        if (n <= 0)
                return n < 0 ? -errno : -EIO;
        buf[n] = '\0';
        return 0;
}

int cn_fdinfo_read(pid_t pid, int fd, struct cn_fdinfo *ret)
{
        char path[64], buf[1024];
        snprintf(path, sizeof(path), "/proc/%d/fdinfo/%d", (int)pid, fd);
        int r = cn_read_small(path, buf, sizeof(buf));
        if (r < 0)
                return r;
        unsigned long long flags = 0, mnt = 0, ino = 0;
        r = fdinfo_number(buf, "\nflags:", 8, &flags);
        if (r < 0 || (r = fdinfo_number(buf, "\nmnt_id:", 10, &mnt)) < 0 ||
            (r = fdinfo_number(buf, "\nino:", 10, &ino)) < 0)
                return r;
        if (mnt > (unsigned long long)INT64_MAX)
                return -EIO;
        *ret =
            (struct cn_fdinfo){.flags = (unsigned long)flags, .mnt_id = (long long)mnt, .ino = ino};
        return 0;
}

int cn_tgid_of(pid_t tid, pid_t *ret)
{
        char path[64], buf[2048];
        snprintf(path, sizeof(path), "/proc/%d/status", (int)tid);
        int r = cn_read_small(path, buf, sizeof(buf));
        if (r < 0)
                return r;
        unsigned long long v = 0;
        if (fdinfo_number(buf, "\nTgid:", 10, &v) < 0 || v == 0 || v > INT32_MAX)
                return -EIO;
        *ret = (pid_t)v;
        return 0;
}

/* The closers alive, by their pidfds. One process, one supervisor loop:
 * this is the process's. */
static int closers[CN_CLOSERS_MAX];
static size_t n_closers;

static void reap(void)
{
        size_t k = 0;
        for (size_t i = 0; i < n_closers; i++) {
                siginfo_t si;
                memset(&si, 0, sizeof(si));
                int r =
                    waitid((idtype_t)P_PIDFD, (id_t)closers[i], &si, WEXITED | WNOHANG | __WALL);
                /* ECHILD: reaped by a wait of someone else's (__WALL). */
                if ((r == 0 && si.si_pid != 0) || (r < 0 && errno == ECHILD)) {
                        close(closers[i]);
                        continue;
                }
                closers[k++] = closers[i];
        }
        n_closers = k;
}

size_t cn_closers_live(void)
{
        reap();
        return n_closers;
}

bool cn_helper_room(void)
{
        reap();
        return n_closers < CN_CLOSERS_MAX;
}

int cn_helper_add(int pidfd)
{
        if (!cn_helper_room())
                return -EAGAIN;
        closers[n_closers++] = pidfd;
        return 0;
}

/* A process sharing this fd table closes `fd` and exits: raw system calls
 * only (its memory is a copy taken at any point of the loop). It exits
 * with no signal to the parent, so no one else's wait() sees it. */
static int closer_start(int fd)
{
        reap();
        if (n_closers >= CN_CLOSERS_MAX)
                return -EAGAIN;
        pid_t parent = getpid();
        int pidfd = -1;
        struct clone_args args;
        memset(&args, 0, sizeof(args));
        args.flags = CLONE_FILES | CLONE_PIDFD;
        args.pidfd = (uint64_t)(uintptr_t)&pidfd;
        args.exit_signal = 0;
        long pid = syscall(SYS_clone3, &args, sizeof(args));
        if (pid < 0)
                return -errno;
        if (pid == 0) {
                sigset_t all;
                sigfillset(&all);
                (void)syscall(SYS_rt_sigprocmask, SIG_SETMASK, &all, NULL, sizeof(long));
                (void)syscall(SYS_prctl, PR_SET_PDEATHSIG, SIGKILL, 0, 0, 0);
                if (syscall(SYS_getppid) == parent)
                        (void)syscall(SYS_close, fd);
                for (;;)
                        (void)syscall(SYS_exit, 0);
        }
        closers[n_closers++] = pidfd;
        return 0;
}

/* Whether closing `fd` here is sure not to wait: a socket (no flush) that
 * does not linger (SO_LINGER makes the last close of a TCP socket wait for
 * its end to be acknowledged; the sandbox may have set it, and closed its
 * own copies). */
static bool closes_at_once(int fd)
{
        int domain = 0;
        socklen_t l = sizeof(domain);
        if (getsockopt(fd, SOL_SOCKET, SO_DOMAIN, &domain, &l) < 0)
                return false;
        struct linger lg = {0};
        l = sizeof(lg);
        if (getsockopt(fd, SOL_SOCKET, SO_LINGER, &lg, &l) < 0)
                return false;
        return !lg.l_onoff || lg.l_linger == 0;
}

void cn_drop(int fd)
{
        if (fd < 0)
                return;
        if (closes_at_once(fd)) {
                close(fd);
                return;
        }
        (void)closer_start(fd); /* none: kept open, never closed here */
}

static bool is_socket(int fd)
{
        int domain = 0;
        socklen_t l = sizeof(domain);
        return getsockopt(fd, SOL_SOCKET, SO_DOMAIN, &domain, &l) == 0;
}

int cn_copy_socket(int pidfd, int fd, int *ret_copy)
{
        /* Room for a closer first: once taken, a file must not stay here. */
        reap();
        if (n_closers >= CN_CLOSERS_MAX)
                return -EAGAIN;
        int copy = (int)syscall(SYS_pidfd_getfd, pidfd, fd, 0);
        if (copy < 0)
                return -errno;
        if (!is_socket(copy)) {
                cn_drop(copy);
                return -ENOTSOCK;
        }
        *ret_copy = copy;
        return 0;
}

int cn_take_socket(pid_t tid, int fd, long long sock_mnt, int *ret_copy, unsigned long *ret_flags)
{
        if (fd < 0)
                return -EBADF;
        if (sock_mnt < 0)
                return -EOPNOTSUPP; /* which are sockets cannot be told */
        struct cn_fdinfo fi;
        int r = cn_fdinfo_read(tid, fd, &fi);
        if (r == -ENOENT)
                return -EBADF;
        if (r < 0)
                return r;
        if (fi.mnt_id != sock_mnt)
                return -ENOTSOCK; /* never taken */
        pid_t tgid = 0;
        r = cn_tgid_of(tid, &tgid);
        if (r < 0)
                return r;
        _cleanup_close_ int pidfd = (int)syscall(SYS_pidfd_open, tgid, 0);
        if (pidfd < 0)
                return -errno;
        r = cn_copy_socket(pidfd, fd, ret_copy);
        if (r < 0)
                return r;
        *ret_flags = fi.flags;
        return 0;
}
