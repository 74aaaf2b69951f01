/* SPDX-License-Identifier: Apache-2.0 */
#pragma once

/* A sandbox's connect() as the supervisor sees it, without a sandbox: a
 * child process installs a seccomp filter that sends every connect() to
 * this process (SECCOMP_RET_USER_NOTIF), hands the listener over, and
 * reports what its connect() calls returned on a pipe; this process serves
 * the listener with sv_connect_notify (supervisor/connect-notify.c) on its
 * own event loop. Used by test-connect-notify-*.c. */

#include <criterion/criterion.h>
#include <errno.h>
#include <stdarg.h>
#include <event2/event.h>
#include <linux/filter.h>
#include <linux/seccomp.h>
#include <stddef.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/socket.h>
#include <sys/syscall.h>
#include <unistd.h>

#include "netgate/netgate.h"
#include "policy.h"
#include "supervisor/connect-notify.h"
#include "util.h"

/* Sends fd over the socket `over` in an SCM_RIGHTS message (one byte). */
static inline bool cnt_sendmsg_fd(int over, int fd)
{
        char cbuf[CMSG_SPACE(sizeof(int))];
        memset(cbuf, 0, sizeof(cbuf));
        struct iovec iov = {.iov_base = "x", .iov_len = 1};
        struct msghdr m = {
            .msg_iov = &iov, .msg_iovlen = 1, .msg_control = cbuf, .msg_controllen = sizeof(cbuf)};
        struct cmsghdr *c = CMSG_FIRSTHDR(&m);
        c->cmsg_level = SOL_SOCKET;
        c->cmsg_type = SCM_RIGHTS;
        c->cmsg_len = CMSG_LEN(sizeof(int));
        memcpy(CMSG_DATA(c), &fd, sizeof(int));
        return sendmsg(over, &m, 0) == 1;
}

/* In a child: cnt_sendmsg_fd, or exit 90. */
static inline void cnt_send_fd(int over, int fd)
{
        if (!cnt_sendmsg_fd(over, fd))
                _exit(90);
}

static inline int cnt_recv_fd(int over)
{
        char cbuf[CMSG_SPACE(sizeof(int))], b;
        struct iovec iov = {.iov_base = &b, .iov_len = 1};
        struct msghdr m = {
            .msg_iov = &iov, .msg_iovlen = 1, .msg_control = cbuf, .msg_controllen = sizeof(cbuf)};
        if (recvmsg(over, &m, MSG_CMSG_CLOEXEC) != 1)
                return -1;
        struct cmsghdr *c = CMSG_FIRSTHDR(&m);
        if (!c || c->cmsg_type != SCM_RIGHTS)
                return -1;
        int fd;
        memcpy(&fd, CMSG_DATA(c), sizeof(int));
        return fd;
}

/* In the child: every later connect() of this process and its children
 * goes to the listener, sent over `over`. */
static inline void cnt_filter_connect(int over)
{
        struct sock_filter f[] = {
            BPF_STMT(BPF_LD | BPF_W | BPF_ABS, offsetof(struct seccomp_data, nr)),
            BPF_JUMP(BPF_JMP | BPF_JEQ | BPF_K, __NR_connect, 0, 1),
            BPF_STMT(BPF_RET | BPF_K, SECCOMP_RET_USER_NOTIF),
            BPF_STMT(BPF_RET | BPF_K, SECCOMP_RET_ALLOW),
        };
        struct sock_fprog prog = {.len = ARRAY_SIZE(f), .filter = f};
        if (prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) < 0)
                _exit(91);
        int l = (int)syscall(SYS_seccomp, SECCOMP_SET_MODE_FILTER, SECCOMP_FILTER_FLAG_NEW_LISTENER,
                             &prog);
        if (l < 0)
                _exit(92);
        cnt_send_fd(over, l);
        close(l);
}

/* In the child: the errno (0: success) of a call, to the parent. */
static inline void cnt_report(int pipe_w, int r)
{
        int e = r < 0 ? errno : 0;
        if (write(pipe_w, &e, sizeof(e)) != sizeof(e))
                _exit(93);
}

struct cnt_wait {
        struct event_base *base;
        int fd;
        int value;
        bool got;
};

static inline void cnt_on_report(evutil_socket_t fd, short what, void *ud)
{
        struct cnt_wait *w = ud;
        if (!(what & EV_TIMEOUT) && read((int)fd, &w->value, sizeof(w->value)) == sizeof(w->value))
                w->got = true;
        event_base_loopbreak(w->base);
}

/* Run the loop (serving the notifications) until the child reports on
 * `pipe_r` or `timeout_ms` pass: the errno reported, or -1 on a timeout. */
static inline int cnt_serve_until_report(struct event_base *base, int pipe_r, int timeout_ms)
{
        struct cnt_wait w = {.base = base, .fd = pipe_r};
        struct event *ev = event_new(base, pipe_r, EV_READ, cnt_on_report, &w);
        struct timeval tv = {timeout_ms / 1000, (timeout_ms % 1000) * 1000};
        event_add(ev, &tv);
        event_base_dispatch(base);
        event_free(ev);
        return w.got ? w.value : -1;
}

/* A test that wraps syscall() (-Wl,--wrap=syscall) forwards what it does
 * not stand in for: CNT_SYSCALL_WRAP(n, a) { body } defines the wrapper,
 * its six arguments in a[], the body run before the real call. */
long __real_syscall(long n, ...);
long __wrap_syscall(long n, ...);
#define CNT_SYSCALL_WRAP(n, a)                                                                   \
        static void cnt_syscall_before(long n, const long *a);                                   \
        long __wrap_syscall(long n, ...)                                                          \
        {                                                                                         \
                va_list ap;                                                                       \
                va_start(ap, n);                                                                  \
                long v[6];                                                                        \
                for (int i = 0; i < 6; i++)                                                       \
                        v[i] = va_arg(ap, long);                                                  \
                va_end(ap);                                                                       \
                cnt_syscall_before(n, v);                                                         \
                return __real_syscall(n, v[0], v[1], v[2], v[3], v[4], v[5]);                     \
        }                                                                                         \
        static void cnt_syscall_before(long n, const long *a)
