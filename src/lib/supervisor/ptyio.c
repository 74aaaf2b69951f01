/* SPDX-License-Identifier: Apache-2.0 */
#include <errno.h>
#include <signal.h>
#include <sys/ioctl.h>
#include <termios.h>
#include <unistd.h>

#include "ptyio.h"
#include "term.h"
#include "util.h"

/* Input waits here while the sandbox does not read: the user's input is not
 * read on until it drained, so the buffer never grows. */
#define PTYIO_BUF 4096

struct ptyio {
        int in_fd, master, tty_fd;
        struct event *ev_in, *ev_out, *ev_winch;
        bool in_polled; /* ev_in watches in_fd; else in_fd is a file, read on */
        bool paused;    /* the user's input is someone else's (ptyio_pause) */
        char buf[PTYIO_BUF];
        size_t len, off;
};

static void stop_input(struct ptyio *p)
{
        if (p->ev_in)
                event_del(p->ev_in);
        if (p->ev_out)
                event_del(p->ev_out);
        p->len = p->off = 0;
}

/* Write what is buffered; true when it all went. */
static bool drain(struct ptyio *p)
{
        while (p->off < p->len) {
                ssize_t n = write(p->master, p->buf + p->off, p->len - p->off);
                if (n < 0 && errno == EINTR)
                        continue;
                if (n < 0 && errno == EAGAIN)
                        return false;
                if (n <= 0) {
                        /* EIO: the sandbox's side is gone. */
                        stop_input(p);
                        return false;
                }
                p->off += (size_t)n;
        }
        p->len = p->off = 0;
        return true;
}

/* Read input again: when it is ready (polled), or at once (a file). */
static void want_input(struct ptyio *p)
{
        if (p->paused)
                return;
        if (p->in_polled)
                event_add(p->ev_in, NULL);
        else
                event_active(p->ev_in, EV_READ, 0);
}

static void on_input(evutil_socket_t fd, short what, void *arg)
{
        struct ptyio *p = arg;
        ssize_t n = read(p->in_fd, p->buf, sizeof(p->buf));
        if (n < 0 && (errno == EAGAIN || errno == EINTR))
                return;
        if (n <= 0) {
                /* The end of the input is the terminal's end-of-file
                 * character, as if typed: a command reading at the start of
                 * a line sees its end. */
                if (n == 0 && p->len == 0)
                        (void)write_full(p->master, "\x04", 1);
                stop_input(p);
                return;
        }
        p->len = (size_t)n;
        p->off = 0;
        if (!drain(p)) {
                if (p->len) {
                        event_del(p->ev_in);
                        event_add(p->ev_out, NULL);
                }
        } else if (!p->in_polled)
                want_input(p);
}

static void on_writable(evutil_socket_t fd, short what, void *arg)
{
        struct ptyio *p = arg;
        if (drain(p)) {
                event_del(p->ev_out);
                want_input(p);
        }
}

void ptyio_resize(struct ptyio *p)
{
        uint16_t rows, cols;
        if (!p || p->tty_fd < 0 || term_size(p->tty_fd, &rows, &cols) < 0)
                return;
        struct winsize ws = {.ws_row = rows, .ws_col = cols};
        /* The kernel sends SIGWINCH to the terminal's foreground job. */
        (void)ioctl(p->master, TIOCSWINSZ, &ws);
}

static void on_winch(evutil_socket_t sig, short what, void *arg)
{
        ptyio_resize(arg);
}

struct ptyio *ptyio_start(struct event_base *base, int in_fd, int master, int tty_fd)
{
        struct ptyio *p = xcalloc(1, sizeof(*p));
        p->in_fd = in_fd;
        p->master = master;
        p->tty_fd = tty_fd;
        evutil_make_socket_nonblocking(master);
        p->ev_out = event_new(base, master, EV_WRITE | EV_PERSIST, on_writable, p);
        /* A regular file or /dev/null cannot be polled: it is read on
         * until its end, as fast as the terminal takes it. */
        if (in_fd >= 0) {
                p->in_polled = true;
                p->ev_in = event_new(base, in_fd, EV_READ | EV_PERSIST, on_input, p);
                if (p->ev_in && event_add(p->ev_in, NULL) < 0) {
                        event_free(p->ev_in);
                        p->in_polled = false;
                        p->ev_in = event_new(base, -1, 0, on_input, p);
                        if (p->ev_in)
                                want_input(p);
                }
        }
        if (tty_fd >= 0) {
                p->ev_winch = evsignal_new(base, SIGWINCH, on_winch, p);
                event_add(p->ev_winch, NULL);
        }
        return p;
}

struct ptyio *ptyio_free(struct ptyio *p)
{
        if (!p)
                return NULL;
        struct event *evs[] = {p->ev_in, p->ev_out, p->ev_winch};
        for (size_t i = 0; i < ARRAY_SIZE(evs); i++)
                if (evs[i])
                        event_free(evs[i]);
        free(p);
        return NULL;
}

void ptyio_pause(struct ptyio *p, bool pause)
{
        if (!p || p->paused == pause)
                return;
        p->paused = pause;
        if (pause) {
                if (p->ev_in)
                        event_del(p->ev_in);
        } else if (p->ev_in && p->len == 0)
                want_input(p);
}
