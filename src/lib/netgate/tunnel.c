/* SPDX-License-Identifier: Apache-2.0 */
#include <errno.h>
#include <fcntl.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include <event2/buffer.h>
#include <event2/bufferevent.h>
#include <event2/event.h>
#include <event2/util.h>

#include "netgate/exchange.h"
#include "netgate/netgate-internal.h"
#include "netgate/tunnel.h"
#include "util.h"

#define SPLICE_PIPE_SIZE (256 * 1024)
#define SPLICE_ROUNDS    16 /* reads per callback before yielding to the loop */

static void splice_run(struct netgate_tunnel_dir *d);

static void tunnel_end(struct netgate_tunnel *t, const char *reason)
{
        t->end(t->ud, reason);
}

void netgate_tunnel_init(struct netgate_tunnel *t)
{
        *t = (struct netgate_tunnel){.client_fd = -1, .up_fd = -1};
        for (int i = 0; i < 2; i++)
                t->dir[i].pipe_r = t->dir[i].pipe_w = -1;
}

static void dir_release(struct netgate_tunnel_dir *d)
{
        if (d->ev_rd)
                event_free(d->ev_rd);
        if (d->ev_wr)
                event_free(d->ev_wr);
        if (d->pre)
                evbuffer_free(d->pre);
        if (d->pipe_r >= 0)
                close(d->pipe_r);
        if (d->pipe_w >= 0)
                close(d->pipe_w);
        d->ev_rd = d->ev_wr = NULL;
        d->reading = false;
        d->pre = NULL;
        d->pipe_r = d->pipe_w = -1;
}

static int relay(struct netgate_tunnel *t, struct evbuffer *src, struct evbuffer *dst, bool up)
{
        size_t dlen = evbuffer_get_length(dst), slen = evbuffer_get_length(src);
        size_t room = dlen < NETGATE_BUF_HIGH ? NETGATE_BUF_HIGH - dlen : 0;
        size_t n = netgate_budget_allows(t->g, slen < room ? slen : room);
        if (n > 0) {
                evbuffer_remove_buffer(src, dst, n);
                netgate_exchange_account(t->x, up, n);
        }
        if (n == 0 && slen > 0 && room > 0)
                return -EDQUOT;
        return 0;
}

static void tunnel_pump(struct netgate_tunnel *t)
{
        struct evbuffer *cin = bufferevent_get_input(t->client);
        struct evbuffer *cout = bufferevent_get_output(t->client);
        struct evbuffer *uin = bufferevent_get_input(t->up);
        struct evbuffer *uout = bufferevent_get_output(t->up);

        if (relay(t, cin, uout, true) < 0 || relay(t, uin, cout, false) < 0) {
                tunnel_end(t, "budget_bytes");
                return;
        }
        if (t->client_eof && !t->shut_up && evbuffer_get_length(cin) == 0 &&
            evbuffer_get_length(uout) == 0) {
                shutdown(bufferevent_getfd(t->up), SHUT_WR);
                t->shut_up = true;
        }
        if (t->up_eof && !t->shut_client && evbuffer_get_length(uin) == 0 &&
            evbuffer_get_length(cout) == 0) {
                shutdown(bufferevent_getfd(t->client), SHUT_WR);
                t->shut_client = true;
        }
        if (t->shut_up && t->shut_client) {
                tunnel_end(t, NULL);
                return;
        }
        if (!t->client_eof && evbuffer_get_length(uout) < NETGATE_BUF_HIGH)
                bufferevent_enable(t->client, EV_READ);
        else
                bufferevent_disable(t->client, EV_READ);
        if (!t->up_eof && evbuffer_get_length(cout) < NETGATE_BUF_HIGH)
                bufferevent_enable(t->up, EV_READ);
        else
                bufferevent_disable(t->up, EV_READ);
}

/* ---- the bufferevent relay's callbacks ---- */

static void client_read_cb(struct bufferevent *bev, void *ud)
{
        tunnel_pump(ud);
}

static void client_write_cb(struct bufferevent *bev, void *ud)
{
        tunnel_pump(ud);
}

static void client_event_cb(struct bufferevent *bev, short what, void *ud)
{
        struct netgate_tunnel *t = ud;
        if (!(what & BEV_EVENT_EOF)) {
                tunnel_end(t, (what & BEV_EVENT_TIMEOUT) ? "timeout" : "client_closed");
                return;
        }
        t->client_eof = true;
        tunnel_pump(t);
}

static void up_read_cb(struct bufferevent *bev, void *ud)
{
        tunnel_pump(ud);
}

static void up_write_cb(struct bufferevent *bev, void *ud)
{
        tunnel_pump(ud);
}

static void up_event_cb(struct bufferevent *bev, short what, void *ud)
{
        struct netgate_tunnel *t = ud;
        if (what & BEV_EVENT_EOF) {
                t->up_eof = true;
                tunnel_pump(t);
                return;
        }
        tunnel_end(t, (what & BEV_EVENT_TIMEOUT) ? "timeout" : NULL);
}

static void splice_done_check(struct netgate_tunnel *t)
{
        if (t->dir[0].done && t->dir[1].done)
                tunnel_end(t, NULL);
}

static void splice_cb(evutil_socket_t fd, short what, void *ud)
{
        splice_run(ud);
}

/* Read from the source (on) or not (off): the persistent read event is
 * registered or taken off only when that changes, so a direction that
 * relays request after request costs no epoll_ctl. */
static void want_read(struct netgate_tunnel_dir *d, bool on)
{
        if (d->reading == on)
                return;
        if (on)
                event_add(d->ev_rd, NULL);
        else
                event_del(d->ev_rd);
        d->reading = on;
}

/* The destination is full: stop reading until it drains. */
static void wait_writable(struct netgate_tunnel_dir *d)
{
        want_read(d, false);
        event_add(d->ev_wr, NULL);
}

/* Move what there is from the source to the destination. A read shorter
 * than asked ends the turn without a read that would only say EAGAIN: the
 * read event is level-triggered, so what came in meanwhile, or the end of
 * the stream, wakes the direction again. */
static void splice_run(struct netgate_tunnel_dir *d)
{
        struct netgate_tunnel *t = d->t;
        bool drained = false;
        for (int rounds = 0;;) {
                if (evbuffer_get_length(d->pre) > 0) {
                        int n = evbuffer_write(d->pre, d->dst);
                        if (n >= 0)
                                continue;
                        if (errno == EINTR)
                                continue;
                        if (errno == EAGAIN || errno == EWOULDBLOCK) {
                                wait_writable(d);
                                return;
                        }
                        tunnel_end(t, NULL);
                        return;
                }
                if (d->in_pipe > 0) {
                        ssize_t n = splice(d->pipe_r, NULL, d->dst, NULL, d->in_pipe,
                                           SPLICE_F_MOVE | SPLICE_F_NONBLOCK);
                        if (n > 0) {
                                d->in_pipe -= (size_t)n;
                                continue;
                        }
                        if (n < 0 && errno == EINTR)
                                continue;
                        if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK)) {
                                wait_writable(d);
                                return;
                        }
                        tunnel_end(t, NULL);
                        return;
                }
                if (d->eof) {
                        want_read(d, false);
                        shutdown(d->dst, SHUT_WR);
                        d->done = true;
                        splice_done_check(t);
                        return;
                }
                if (drained || rounds++ >= SPLICE_ROUNDS) {
                        want_read(d, true);
                        return;
                }
                size_t want = netgate_budget_allows(t->g, SPLICE_PIPE_SIZE);
                if (want == 0) {
                        tunnel_end(t, "budget_bytes");
                        return;
                }
                ssize_t n =
                    splice(d->src, NULL, d->pipe_w, NULL, want, SPLICE_F_MOVE | SPLICE_F_NONBLOCK);
                if (n > 0) {
                        d->in_pipe += (size_t)n;
                        drained = (size_t)n < want;
                        netgate_exchange_account(t->x, d->up, (size_t)n);
                        continue;
                }
                if (n == 0) {
                        d->eof = true;
                        continue;
                }
                if (errno == EINTR)
                        continue;
                if (errno == EAGAIN || errno == EWOULDBLOCK) {
                        want_read(d, true);
                        return;
                }
                tunnel_end(t, NULL);
                return;
        }
}

/* Hand both sockets to a splice() relay: bytes go socket to pipe to socket
 * inside the kernel. Returns <0 (and changes nothing) when pipes are short. */
static int start_splice(struct netgate_tunnel *t, const void *reply, size_t n)
{
        int pipes[2][2] = {{-1, -1}, {-1, -1}};
        for (int i = 0; i < 2; i++) {
                if (pipe2(pipes[i], O_CLOEXEC | O_NONBLOCK) < 0) {
                        int r = -errno;
                        if (i == 1) {
                                close(pipes[0][0]);
                                close(pipes[0][1]);
                        }
                        return r;
                }
                fcntl(pipes[i][1], F_SETPIPE_SZ, SPLICE_PIPE_SIZE);
        }
        int cfd = fcntl(bufferevent_getfd(t->client), F_DUPFD_CLOEXEC, 3);
        int ufd = cfd < 0 ? -1 : fcntl(bufferevent_getfd(t->up), F_DUPFD_CLOEXEC, 3);
        if (cfd < 0 || ufd < 0) {
                int r = -errno;
                if (cfd >= 0)
                        close(cfd);
                for (int i = 0; i < 2; i++) {
                        close(pipes[i][0]);
                        close(pipes[i][1]);
                }
                return r;
        }
        t->client_fd = cfd;
        t->up_fd = ufd;
        for (int i = 0; i < 2; i++) {
                struct netgate_tunnel_dir *d = &t->dir[i];
                d->t = t;
                d->up = i == 0;
                d->src = d->up ? cfd : ufd;
                d->dst = d->up ? ufd : cfd;
                d->pipe_r = pipes[i][0];
                d->pipe_w = pipes[i][1];
                d->pre = evbuffer_new();
                d->ev_rd = event_new(t->g->base, d->src, EV_READ | EV_PERSIST, splice_cb, d);
                d->ev_wr = event_new(t->g->base, d->dst, EV_WRITE, splice_cb, d);
        }
        /* What the bufferevents already read goes first, in order: the
         * client's early bytes (a TLS ClientHello sent with CONNECT), and the
         * reply followed by any upstream greeting. */
        struct evbuffer *cin = bufferevent_get_input(t->client);
        struct evbuffer *uin = bufferevent_get_input(t->up);
        netgate_exchange_account(t->x, true, evbuffer_get_length(cin));
        netgate_exchange_account(t->x, false, evbuffer_get_length(uin));
        evbuffer_add_buffer(t->dir[0].pre, cin);
        evbuffer_add(t->dir[1].pre, reply, n);
        evbuffer_add_buffer(t->dir[1].pre, uin);
        netgate_bev_free(t->client);
        netgate_bev_free(t->up);
        t->client = t->up = NULL;
        /* Both directions start from the loop, not from here: the caller
         * still holds the connection. */
        event_active(t->dir[0].ev_rd, EV_READ, 1);
        event_active(t->dir[1].ev_rd, EV_READ, 1);
        return 0;
}

void netgate_tunnel_start(struct netgate_tunnel *t, struct netgate *g, struct netgate_exchange *x,
                          void (*end)(void *ud, const char *reason), void *ud,
                          struct bufferevent *client, struct bufferevent *up, const void *reply,
                          size_t n)
{
        t->g = g;
        t->x = x;
        t->end = end;
        t->ud = ud;
        t->client = client;
        t->up = up;
        t->shut_up = t->shut_client = false;
        t->client_eof = t->up_eof = false;
        if (!t->g->rate_group && start_splice(t, reply, n) == 0)
                return;
        bufferevent_setcb(t->client, client_read_cb, client_write_cb, client_event_cb, t);
        bufferevent_setcb(t->up, up_read_cb, up_write_cb, up_event_cb, t);
        bufferevent_set_timeouts(t->client, NULL, NULL);
        bufferevent_set_timeouts(t->up, NULL, NULL);
        bufferevent_write(t->client, reply, n);
        bufferevent_enable(t->up, EV_READ | EV_WRITE);
        tunnel_pump(t);
}

bool netgate_tunnel_client_done(const struct netgate_tunnel *t)
{
        if (t->client_fd >= 0)
                return t->dir[0].done;
        return t->client && t->shut_up;
}

void netgate_tunnel_release(struct netgate_tunnel *t)
{
        if (t->client)
                netgate_bev_free(t->client);
        if (t->up)
                netgate_bev_free(t->up);
        t->client = t->up = NULL;
        free(t->guard);
        t->guard = NULL;
        for (int i = 0; i < 2; i++)
                dir_release(&t->dir[i]);
        if (t->client_fd >= 0)
                close(t->client_fd);
        if (t->up_fd >= 0)
                close(t->up_fd);
        t->client_fd = t->up_fd = -1;
}
