/* SPDX-License-Identifier: Apache-2.0 */
#include <errno.h>
#include <signal.h>
#include <sys/ioctl.h>
#include <unistd.h>

#include "term.h"

/* tcsetattr from a background process group stops us with SIGTTOU unless
 * it is ignored or blocked; restoring must never stop the caller. */
static int set_mode(int fd, const struct termios *t)
{
        sigset_t ttou, old;
        sigemptyset(&ttou);
        sigaddset(&ttou, SIGTTOU);
        sigprocmask(SIG_BLOCK, &ttou, &old);
        int r;
        do
                r = tcsetattr(fd, TCSADRAIN, t);
        while (r < 0 && errno == EINTR);
        int e = errno;
        sigprocmask(SIG_SETMASK, &old, NULL);
        return r < 0 ? -e : 0;
}

int term_raw(int fd, struct term_saved *ret)
{
        struct termios t;
        ret->fd = -1;
        if (!isatty(fd))
                return -ENOTTY;
        if (tcgetattr(fd, &t) < 0)
                return -errno;
        ret->tio = t;
        cfmakeraw(&t);
        t.c_cc[VMIN] = 1;
        t.c_cc[VTIME] = 0;
        int r = set_mode(fd, &t);
        if (r < 0)
                return r;
        ret->fd = fd;
        return 0;
}

void term_restore(struct term_saved *s)
{
        if (s->fd < 0)
                return;
        (void)set_mode(s->fd, &s->tio);
        s->fd = -1;
}

int term_size(int fd, uint16_t *ret_rows, uint16_t *ret_cols)
{
        struct winsize ws;
        if (ioctl(fd, TIOCGWINSZ, &ws) < 0)
                return -errno;
        if (ws.ws_row == 0 || ws.ws_col == 0)
                return -ENOTTY;
        *ret_rows = ws.ws_row;
        *ret_cols = ws.ws_col;
        return 0;
}
