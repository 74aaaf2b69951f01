/* SPDX-License-Identifier: Apache-2.0 */
/* Batch mode's syncs in a helper process (audit_set_background_sync()): an
 * event loop that appends records never waits on the disk for the periodic
 * fdatasync. A process, not a thread: the supervisor clones the sandbox
 * with raw clone3, and a child of a threaded process would wait forever in
 * its C library's setresuid() for a thread it does not have
 * (cgroup-warm.c says the same).
 *
 * Each sync asked for sends the log's descriptor (SCM_RIGHTS: after a
 * rotation, the new file's) over a socket pair; the helper syncs it and
 * answers with 0 or the errno. Answers are collected without waiting on
 * the next request and by audit_flush(), which waits for every one, so
 * what audit_flush() promises (the lines written so far are on the disk)
 * holds as before. A failure is kept and returned by the writer's next
 * call. The helper ends when the writer closes its end, and is killed
 * with its parent. A helper that is gone leaves the writer syncing inline.
 *
 * The helper is forked by the first sync handed to it, not when it is
 * asked for: a run that ends within one batch (a short command) syncs its
 * end inline in audit_flush() as it always did, and a fork at the start
 * and a wait at the end (about 0.3 ms of a cold start) were spent for
 * nothing. A helper that cannot be forked leaves the writer syncing inline:
 * slower, never less durable. */
#include <errno.h>
#include <fcntl.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

#include "audit-internal.h"
#include "child.h"
#include "util.h"

struct audit_syncer {
        int sock;
        pid_t pid;            /* 0: not started yet */
        unsigned outstanding; /* syncs asked for and not yet answered */
        int err;              /* a failed sync's -errno, until the writer hears of it */
        bool gone;            /* the helper died or could not be forked: sync inline */
};

_Noreturn static void helper_main(int sock)
{
        if (sock > 3)
                syscall(SYS_close_range, 3, (unsigned)sock - 1, 0);
        syscall(SYS_close_range, (unsigned)sock + 1, ~0U, 0);
        for (;;) {
                char byte;
                struct iovec iov = {.iov_base = &byte, .iov_len = 1};
                union {
                        char buf[CMSG_SPACE(sizeof(int))];
                        struct cmsghdr align;
                } u;
                struct msghdr m = {.msg_iov = &iov,
                                   .msg_iovlen = 1,
                                   .msg_control = u.buf,
                                   .msg_controllen = sizeof(u.buf)};
                ssize_t n = recvmsg(sock, &m, MSG_CMSG_CLOEXEC);
                if (n < 0 && errno == EINTR)
                        continue;
                if (n <= 0)
                        _exit(0);
                int fd = -1;
                struct cmsghdr *c = CMSG_FIRSTHDR(&m);
                if (c && c->cmsg_level == SOL_SOCKET && c->cmsg_type == SCM_RIGHTS &&
                    c->cmsg_len == CMSG_LEN(sizeof(int)))
                        memcpy(&fd, CMSG_DATA(c), sizeof(int));
                int st = fd < 0 ? EINVAL : fdatasync(fd) < 0 ? errno : 0;
                if (fd >= 0)
                        close(fd);
                if (send(sock, &st, sizeof(st), MSG_NOSIGNAL) != (ssize_t)sizeof(st))
                        _exit(0);
        }
}

/* Fork the helper; -errno when it cannot be. */
static int helper_start(struct audit_syncer *s)
{
        int sock;
        pid_t pid;
        int r = child_helper_fork(&sock, &pid);
        if (r == 0)
                helper_main(sock);
        if (r < 0)
                return r;
        s->sock = sock;
        s->pid = pid;
        return 0;
}

int audit_set_background_sync(struct audit *a)
{
        if (!a || a->opt.sync != AUDIT_SYNC_BATCH)
                return -EINVAL;
        if (a->syncer)
                return 0;
        struct audit_syncer *s = xcalloc(1, sizeof(*s));
        s->sock = -1;
        a->syncer = s;
        return 0;
}

int audit_background_sync_now(struct audit *a)
{
        int r = audit_set_background_sync(a);
        if (r < 0)
                return r;
        struct audit_syncer *s = a->syncer;
        if (s->pid != 0 || s->gone)
                return 0;
        r = helper_start(s);
        if (r < 0)
                s->gone = true; /* syncs inline: slower, as durable */
        return r;
}

/* Take the helper's answers: those ready, or (wait) every one. */
static void collect(struct audit_syncer *s, bool wait)
{
        while (s->outstanding > 0 && !s->gone) {
                int st;
                ssize_t n = recv(s->sock, &st, sizeof(st), wait ? 0 : MSG_DONTWAIT);
                if (n == (ssize_t)sizeof(st)) {
                        s->outstanding--;
                        if (st != 0 && s->err == 0)
                                s->err = -st;
                        continue;
                }
                if (n < 0 && errno == EINTR)
                        continue;
                if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK))
                        return;
                /* The helper is gone: what it had not answered is not known
                 * to be on the disk. */
                s->gone = true;
                s->outstanding = 0;
                if (s->err == 0)
                        s->err = -EIO;
        }
}

static int take_err(struct audit_syncer *s)
{
        int r = s->err;
        s->err = 0;
        return r;
}

/* Hand what is pending to the helper; the failure of an earlier sync,
 * if any. */
int audit_syncer_start(struct audit *a)
{
        struct audit_syncer *s = a->syncer;
        if (s->pid == 0 && !s->gone && helper_start(s) < 0)
                s->gone = true;
        collect(s, false);
        int r = take_err(s);
        if (r < 0)
                return r;
        if (s->gone)
                return audit_flush(a);
        char byte = 0;
        struct iovec iov = {.iov_base = &byte, .iov_len = 1};
        union {
                char buf[CMSG_SPACE(sizeof(int))];
                struct cmsghdr align;
        } u;
        memset(&u, 0, sizeof(u));
        struct msghdr m = {.msg_iov = &iov,
                           .msg_iovlen = 1,
                           .msg_control = u.buf,
                           .msg_controllen = sizeof(u.buf)};
        struct cmsghdr *c = CMSG_FIRSTHDR(&m);
        c->cmsg_level = SOL_SOCKET;
        c->cmsg_type = SCM_RIGHTS;
        c->cmsg_len = CMSG_LEN(sizeof(int));
        memcpy(CMSG_DATA(c), &a->fd, sizeof(int));
        for (;;) {
                if (sendmsg(s->sock, &m, MSG_DONTWAIT | MSG_NOSIGNAL) == 1)
                        break;
                if (errno == EINTR)
                        continue;
                if (errno == EAGAIN || errno == EWOULDBLOCK)
                        return 0; /* syncs queued already: asked again at the next tick */
                s->gone = true;
                return audit_flush(a);
        }
        s->outstanding++;
        a->flush_deadline = 0;
        return 0;
}

/* Wait for every answer; the failure of a sync the helper did, if any. */
int audit_syncer_wait(struct audit *a)
{
        struct audit_syncer *s = a->syncer;
        if (!s)
                return 0;
        collect(s, true);
        return take_err(s);
}

bool audit_syncer_usable(const struct audit *a)
{
        return a->syncer && !a->syncer->gone;
}

void audit_syncer_free(struct audit *a)
{
        struct audit_syncer *s = a->syncer;
        if (!s)
                return;
        if (s->pid > 0) {
                close(s->sock); /* the helper ends at the end of its stream */
                while (waitpid(s->pid, NULL, 0) < 0 && errno == EINTR)
                        ;
        }
        free(s);
        a->syncer = NULL;
}
