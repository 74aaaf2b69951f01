/* SPDX-License-Identifier: Apache-2.0 */
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <unistd.h>

#include "ctl.h"
#include "util.h"

int ctl_send(int fd, const char *text, const int *fds, size_t n_fds)
{
        struct iovec iov = {.iov_base = (void *)text, .iov_len = strlen(text)};
        union {
                char buf[CMSG_SPACE(sizeof(int) * 4)];
                struct cmsghdr align;
        } u;
        struct msghdr mh = {.msg_iov = &iov, .msg_iovlen = 1};
        if (n_fds > 4)
                return -EINVAL;
        if (n_fds) {
                memset(&u, 0, sizeof(u));
                mh.msg_control = u.buf;
                mh.msg_controllen = CMSG_SPACE(sizeof(int) * n_fds);
                struct cmsghdr *c = CMSG_FIRSTHDR(&mh);
                c->cmsg_level = SOL_SOCKET;
                c->cmsg_type = SCM_RIGHTS;
                c->cmsg_len = CMSG_LEN(sizeof(int) * n_fds);
                memcpy(CMSG_DATA(c), fds, sizeof(int) * n_fds);
        }
        if (sendmsg(fd, &mh, MSG_NOSIGNAL) < 0)
                return -errno;
        return 0;
}

int ctl_recv(int fd, char *buf, size_t size, int *fds, size_t max_fds, size_t *ret_nfds)
{
        struct iovec iov = {.iov_base = buf, .iov_len = size - 1};
        union {
                char b[CMSG_SPACE(sizeof(int) * 4)];
                struct cmsghdr align;
        } u;
        struct msghdr mh = {
            .msg_iov = &iov, .msg_iovlen = 1, .msg_control = u.b, .msg_controllen = sizeof(u.b)};
        ssize_t n = recvmsg(fd, &mh, MSG_CMSG_CLOEXEC);
        if (n < 0)
                return -errno;
        if (n == 0)
                return -ECONNRESET;
        if (mh.msg_flags & (MSG_TRUNC | MSG_CTRUNC))
                n = -EMSGSIZE;
        size_t got = 0;
        for (struct cmsghdr *c = CMSG_FIRSTHDR(&mh); c; c = CMSG_NXTHDR(&mh, c)) {
                if (c->cmsg_level != SOL_SOCKET || c->cmsg_type != SCM_RIGHTS)
                        continue;
                size_t k = (c->cmsg_len - CMSG_LEN(0)) / sizeof(int);
                int tmp[4];
                memcpy(tmp, CMSG_DATA(c), sizeof(int) * (k > 4 ? 4 : k));
                for (size_t i = 0; i < k && i < 4; i++) {
                        if (got < max_fds && n >= 0)
                                fds[got++] = tmp[i];
                        else
                                close(tmp[i]);
                }
        }
        if (ret_nfds)
                *ret_nfds = got;
        if (n < 0) {
                for (size_t i = 0; i < got; i++)
                        close(fds[i]);
                return (int)n;
        }
        buf[n] = '\0';
        return (int)n;
}

int ctl_addr(const char *path, struct sockaddr_un *sa, int *ret_dirfd)
{
        *sa = (struct sockaddr_un){.sun_family = AF_UNIX};
        *ret_dirfd = -1;
        if (strlen(path) < sizeof(sa->sun_path)) {
                memcpy(sa->sun_path, path, strlen(path) + 1);
                return 0;
        }
        /* A CRI container id is 64 characters: under a long --root the
         * path does not fit, its directory's descriptor does. */
        const char *slash = strrchr(path, '/');
        if (!slash || strlen(slash + 1) > 32)
                return -ENAMETOOLONG;
        _cleanup_free_ char *dir = xasprintf("%.*s", (int)(slash - path), path);
        int dfd = open(*dir ? dir : "/", O_PATH | O_DIRECTORY | O_CLOEXEC);
        if (dfd < 0)
                return -errno;
        snprintf(sa->sun_path, sizeof(sa->sun_path), "/proc/self/fd/%d/%s", dfd, slash + 1);
        *ret_dirfd = dfd;
        return 0;
}

int ctl_connect(const char *path)
{
        struct sockaddr_un sa;
        _cleanup_close_ int dfd = -1;
        int r = ctl_addr(path, &sa, &dfd);
        if (r < 0)
                return r;
        int fd = socket(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC, 0);
        if (fd < 0)
                return -errno;
        if (connect(fd, (struct sockaddr *)&sa, sizeof(sa)) < 0) {
                r = -errno;
                close(fd);
                return r;
        }
        return fd;
}
