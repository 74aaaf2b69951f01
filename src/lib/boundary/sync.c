/* SPDX-License-Identifier: Apache-2.0 */
/* The sync protocol between the parent and the sandbox (its setup child,
 * then its pid 1): fixed-size messages on a SOCK_SEQPACKET pair, fds passed
 * with them, and the owner watch that ties the sandbox to the parent. */
#include <errno.h>
#include <fcntl.h>
#include <grp.h>
#include <linux/sched.h>
#include <net/if.h>
#include <netinet/in.h>
#include <sched.h>
#include <signal.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/mount.h>
#include <poll.h>
#include <sys/prctl.h>
#include <sys/resource.h>
#include <sys/signalfd.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/wait.h>

#include "cgroup.h"
#include "confine.h"
#include "idle.h"
#include "mounts.h"
#include "spawn.h"
#include "util.h"
#include "spawn-internal.h"

int spawn_sync_send(int fd, uint32_t type, int code, int value, const char *text)
{
        struct sync_msg m = {.type = type, .code = code, .value = value};
        if (text)
                snprintf(m.text, sizeof(m.text), "%s", text);
        ssize_t n;
        do
                n = send(fd, &m, sizeof(m), MSG_NOSIGNAL);
        while (n < 0 && errno == EINTR);
        return n == (ssize_t)sizeof(m) ? 0 : -EIO;
}

int spawn_sync_recv(int fd, struct sync_msg *m, int *fds, size_t max_fds, size_t *ret_nfds)
{
        char control[CMSG_SPACE(sizeof(int) * SPAWN_LISTEN_MAX)];
        struct iovec iov = {.iov_base = m, .iov_len = sizeof(*m)};
        struct msghdr mh = {.msg_iov = &iov,
                            .msg_iovlen = 1,
                            .msg_control = control,
                            .msg_controllen = sizeof(control)};
        ssize_t n;
        int resets = 0;
        /* A peer that exits with our message unread in its queue makes the
         * kernel report ECONNRESET once, ahead of what it sent us before:
         * read on to get its last report. */
        do
                n = recvmsg(fd, &mh, MSG_CMSG_CLOEXEC);
        while (n < 0 && (errno == EINTR || (errno == ECONNRESET && resets++ < 1)));
        if (n < 0)
                return -errno;
        if (n == 0)
                return -ECONNRESET;
        if (n != (ssize_t)sizeof(*m))
                return -EBADMSG;
        m->text[sizeof(m->text) - 1] = '\0';
        size_t nfds = 0;
        spawn_sync_take_fds(&mh, fds, fds && ret_nfds ? max_fds : 0, &nfds);
        if (ret_nfds)
                *ret_nfds = nfds;
        return 0;
}

void spawn_sync_take_fds(struct msghdr *mh, int *fds, size_t max_fds, size_t *nfds)
{
        for (struct cmsghdr *c = CMSG_FIRSTHDR(mh); c; c = CMSG_NXTHDR(mh, c)) {
                if (c->cmsg_level != SOL_SOCKET || c->cmsg_type != SCM_RIGHTS)
                        continue;
                size_t k = (c->cmsg_len - CMSG_LEN(0)) / sizeof(int);
                int *in = (int *)CMSG_DATA(c);
                for (size_t i = 0; i < k; i++) {
                        if (*nfds < max_fds)
                                fds[(*nfds)++] = in[i];
                        else
                                close(in[i]);
                }
        }
}

int spawn_send_fds(int sock, uint32_t type, const int *fds, size_t n)
{
        struct sync_msg m = {.type = type};
        char control[CMSG_SPACE(sizeof(int) * SPAWN_LISTEN_MAX)];
        memset(control, 0, sizeof(control));
        struct iovec iov = {.iov_base = &m, .iov_len = sizeof(m)};
        struct msghdr mh = {.msg_iov = &iov,
                            .msg_iovlen = 1,
                            .msg_control = control,
                            .msg_controllen = CMSG_SPACE(sizeof(int) * n)};
        struct cmsghdr *c = CMSG_FIRSTHDR(&mh);
        c->cmsg_level = SOL_SOCKET;
        c->cmsg_type = SCM_RIGHTS;
        c->cmsg_len = CMSG_LEN(sizeof(int) * n);
        memcpy(CMSG_DATA(c), fds, sizeof(int) * n);
        return sendmsg(sock, &mh, MSG_NOSIGNAL) < 0 ? -errno : 0;
}

/* A sandbox never outlives its owner (the supervisor, or `airlock run`).
 * The kernel sends pid 1 SIGKILL when the owner dies, and pid 1's death
 * empties the pid namespace. The parent-death signal is cleared by every
 * credential change that touches the effective or fs ids (setresuid,
 * setresgid), so it is set again after each one; then the owner is checked
 * once more, because it may have died before the signal was armed. getppid()
 * cannot tell: across a pid namespace it is 0 whether the owner lives or
 * not. The sync socket can: the owner holds its other end, and the kernel
 * closes it when the owner dies. Returns false when the owner is gone. */
bool spawn_watch_owner(int sync)
{
        if (prctl(PR_SET_PDEATHSIG, SIGKILL, 0, 0, 0) < 0)
                return false;
        struct pollfd pfd = {.fd = sync, .events = POLLRDHUP};
        int n;
        do
                n = poll(&pfd, 1, 0);
        while (n < 0 && errno == EINTR);
        return !(n > 0 && (pfd.revents & (POLLHUP | POLLRDHUP | POLLERR | POLLNVAL)));
}

_Noreturn void spawn_child_fail(int sync, enum spawn_failure kind, const struct al_error *e,
                                int exit_code)
{
        spawn_sync_send(sync, SYNC_ERROR, e->code, kind, e->msg);
        _exit(exit_code);
}

int spawn_send_msg(int fd, const struct sync_msg *m)
{
        ssize_t n;
        do
                n = send(fd, m, sizeof(*m), MSG_NOSIGNAL);
        while (n < 0 && errno == EINTR);
        return n == (ssize_t)sizeof(*m) ? 0 : -EIO;
}

int spawn_send_msg_fd(int fd, const struct sync_msg *m, int pass_fd)
{
        char control[CMSG_SPACE(sizeof(int))];
        memset(control, 0, sizeof(control));
        struct iovec iov = {.iov_base = (void *)m, .iov_len = sizeof(*m)};
        struct msghdr mh = {.msg_iov = &iov,
                            .msg_iovlen = 1,
                            .msg_control = control,
                            .msg_controllen = sizeof(control)};
        struct cmsghdr *c = CMSG_FIRSTHDR(&mh);
        c->cmsg_level = SOL_SOCKET;
        c->cmsg_type = SCM_RIGHTS;
        c->cmsg_len = CMSG_LEN(sizeof(int));
        memcpy(CMSG_DATA(c), &pass_fd, sizeof(int));
        ssize_t n;
        do
                n = sendmsg(fd, &mh, MSG_NOSIGNAL);
        while (n < 0 && errno == EINTR);
        return n == (ssize_t)sizeof(*m) ? 0 : -EIO;
}

int spawn_read_exit(int sync_fd, int *ret_status)
{
        struct sync_msg m;
        int r = spawn_sync_recv(sync_fd, &m, NULL, 0, NULL);
        if (r < 0)
                return r;
        if (m.type != SYNC_EXIT)
                return -EBADMSG;
        *ret_status = m.value;
        return 0;
}

static int exec_request(int sync_fd, int id, char *const *argv, char *const *envp, const char *cwd,
                        const int fds[3], uint32_t tty, long uid)
{
        if (uid < SPAWN_EXEC_OWN_USER || uid > 65535)
                return -EINVAL;
        size_t argc = strv_length(argv), envc = strv_length(envp);
        size_t len = 8 + strlen(cwd ? cwd : "") + 1;
        for (size_t i = 0; i < argc; i++)
                len += strlen(argv[i]) + 1;
        for (size_t i = 0; i < envc; i++)
                len += strlen(envp[i]) + 1;
        if (argc == 0 || len > EXEC_PAYLOAD_MAX)
                return -E2BIG;
        _cleanup_free_ char *payload = xcalloc(1, len);
        uint32_t a = (uint32_t)argc, e = (uint32_t)envc;
        memcpy(payload, &a, 4);
        memcpy(payload + 4, &e, 4);
        char *p = payload + 8;
        p = stpcpy(p, cwd ? cwd : "") + 1;
        for (size_t i = 0; i < argc; i++)
                p = stpcpy(p, argv[i]) + 1;
        for (size_t i = 0; i < envc; i++)
                p = stpcpy(p, envp[i]) + 1;

        struct sync_msg m = {
            .type = SYNC_EXEC, .id = id, .value = (int32_t)tty, .as_user = (uint32_t)(uid + 1)};
        char control[CMSG_SPACE(sizeof(int) * 3)];
        memset(control, 0, sizeof(control));
        struct iovec iov[2] = {{.iov_base = &m, .iov_len = sizeof(m)},
                               {.iov_base = payload, .iov_len = len}};
        struct msghdr mh = {.msg_iov = iov, .msg_iovlen = 2};
        if (fds) {
                mh.msg_control = control;
                mh.msg_controllen = CMSG_SPACE(sizeof(int) * 3);
                struct cmsghdr *c = CMSG_FIRSTHDR(&mh);
                c->cmsg_level = SOL_SOCKET;
                c->cmsg_type = SCM_RIGHTS;
                c->cmsg_len = CMSG_LEN(sizeof(int) * 3);
                memcpy(CMSG_DATA(c), fds, sizeof(int) * 3);
        }
        return sendmsg(sync_fd, &mh, MSG_NOSIGNAL) < 0 ? -errno : 0;
}

int spawn_exec_request(int sync_fd, int id, char *const *argv, char *const *envp, const char *cwd,
                       const int fds[3])
{
        return exec_request(sync_fd, id, argv, envp, cwd, fds, 0, SPAWN_EXEC_OWN_USER);
}

int spawn_exec_pty_request(int sync_fd, int id, char *const *argv, char *const *envp,
                           const char *cwd, const struct spawn_pty *pty)
{
        uint32_t rows = pty->rows ? pty->rows : 24, cols = pty->cols ? pty->cols : 80;
        if (rows > 0x7fff || cols > 0x7fff)
                return -EINVAL;
        return exec_request(sync_fd, id, argv, envp, cwd, NULL, SYNC_TTY_ON | rows << 15 | cols,
                            SPAWN_EXEC_OWN_USER);
}

int spawn_exec_request_as(int sync_fd, int id, char *const *argv, char *const *envp,
                          const char *cwd, const int fds[3], const struct spawn_pty *pty, long uid)
{
        if (!pty)
                return exec_request(sync_fd, id, argv, envp, cwd, fds, 0, uid);
        uint32_t rows = pty->rows ? pty->rows : 24, cols = pty->cols ? pty->cols : 80;
        if (rows > 0x7fff || cols > 0x7fff)
                return -EINVAL;
        return exec_request(sync_fd, id, argv, envp, cwd, NULL, SYNC_TTY_ON | rows << 15 | cols,
                            uid);
}

int spawn_kill_request(int sync_fd, int id, int sig)
{
        struct sync_msg m = {.type = SYNC_KILL, .id = id, .value = sig};
        return spawn_send_msg(sync_fd, &m);
}

int spawn_read_event(int sync_fd, struct spawn_event *ev)
{
        struct sync_msg m;
        int fd = -1;
        size_t nfds = 0;
        int r = spawn_sync_recv(sync_fd, &m, &fd, 1, &nfds);
        if (r < 0)
                return r;
        memset(ev, 0, sizeof(*ev));
        ev->id = m.id;
        ev->pty_fd = -1;
        /* Only a start report brings an fd (a terminal's master). */
        if (nfds && m.type != SYNC_STARTED) {
                close(fd);
                nfds = 0;
        }
        switch (m.type) {
        case SYNC_STARTED:
                ev->type = SPAWN_EVENT_STARTED;
                if (nfds)
                        ev->pty_fd = fd;
                break;
        case SYNC_ERROR:
                ev->type = SPAWN_EVENT_FAILED;
                ev->failure = (enum spawn_failure)m.value;
                ev->err = m.code;
                snprintf(ev->message, sizeof(ev->message), "%s", m.text);
                break;
        case SYNC_EXIT:
                ev->type = SPAWN_EVENT_EXIT;
                ev->status = m.value;
                ev->cpu_user_ms = m.usage[0];
                ev->cpu_system_ms = m.usage[1];
                ev->max_rss_kb = m.usage[2];
                break;
        default:
                return -EBADMSG;
        }
        return 0;
}
