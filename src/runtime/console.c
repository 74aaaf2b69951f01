/* SPDX-License-Identifier: Apache-2.0 */
#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <termios.h>
#include <unistd.h>

#include "console.h"
#include "ctl.h"
#include "util.h"

int rt_console_open(const char *socket_path, uint16_t rows, uint16_t cols, int *ret_slave,
                    struct al_error *err)
{
        _cleanup_close_ int master = posix_openpt(O_RDWR | O_NOCTTY | O_CLOEXEC);
        if (master < 0)
                return al_error_set(err, errno, "terminal: opening a pty");
        char name[64];
        if (grantpt(master) < 0 || unlockpt(master) < 0 || ptsname_r(master, name, sizeof(name)))
                return al_error_set(err, errno, "terminal: unlocking the pty");
        _cleanup_close_ int slave = open(name, O_RDWR | O_NOCTTY | O_CLOEXEC);
        if (slave < 0)
                return al_error_set(err, errno, "terminal: opening %s", name);
        /* The host side only carries bytes: the sandbox's own pty does the
         * line discipline, so echo and editing happen once. */
        struct termios t;
        if (tcgetattr(slave, &t) == 0) {
                cfmakeraw(&t);
                (void)tcsetattr(slave, TCSANOW, &t);
        }
        if (rows && cols) {
                struct winsize ws = {.ws_row = rows, .ws_col = cols};
                (void)ioctl(master, TIOCSWINSZ, &ws);
        }
        struct sockaddr_un sa = {.sun_family = AF_UNIX};
        if (strlen(socket_path) >= sizeof(sa.sun_path))
                return al_error_set_message(err, ENAMETOOLONG, "--console-socket %s: too long",
                                            socket_path);
        memcpy(sa.sun_path, socket_path, strlen(socket_path) + 1);
        _cleanup_close_ int s = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
        if (s < 0 || connect(s, (struct sockaddr *)&sa, sizeof(sa)) < 0)
                return al_error_set(err, errno, "--console-socket %s", socket_path);
        struct iovec iov = {.iov_base = name, .iov_len = strlen(name)};
        union {
                char buf[CMSG_SPACE(sizeof(int))];
                struct cmsghdr align;
        } u;
        memset(&u, 0, sizeof(u));
        struct msghdr mh = {.msg_iov = &iov,
                            .msg_iovlen = 1,
                            .msg_control = u.buf,
                            .msg_controllen = sizeof(u.buf)};
        struct cmsghdr *c = CMSG_FIRSTHDR(&mh);
        c->cmsg_level = SOL_SOCKET;
        c->cmsg_type = SCM_RIGHTS;
        c->cmsg_len = CMSG_LEN(sizeof(int));
        memcpy(CMSG_DATA(c), &master, sizeof(int));
        if (sendmsg(s, &mh, MSG_NOSIGNAL) < 0)
                return al_error_set(err, errno, "--console-socket %s: sending the terminal",
                                    socket_path);
        *ret_slave = TAKE_FD(slave);
        return 0;
}

void rt_console_winsize(int host_slave, int inner_master)
{
        struct winsize ws;
        if (ioctl(host_slave, TIOCGWINSZ, &ws) == 0 && ws.ws_row && ws.ws_col)
                (void)ioctl(inner_master, TIOCSWINSZ, &ws);
}

int rt_console_pump(int from, int to)
{
        char buf[4096];
        ssize_t n = read(from, buf, sizeof(buf));
        if (n < 0 && (errno == EINTR || errno == EAGAIN))
                return 0;
        if (n <= 0)
                return -1;
        /* A reader that went away drops the output, not the container. */
        (void)write_full(to, buf, (size_t)n);
        return 0;
}

void rt_console_drain(int from, int to)
{
        for (int i = 0; i < 256; i++) {
                struct pollfd pf = {.fd = from, .events = POLLIN};
                if (poll(&pf, 1, 0) <= 0 || !(pf.revents & POLLIN))
                        return;
                if (rt_console_pump(from, to) < 0)
                        return;
        }
}
