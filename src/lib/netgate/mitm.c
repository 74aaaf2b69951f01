/* SPDX-License-Identifier: Apache-2.0 */
#include <errno.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include <event2/buffer.h>
#include <event2/bufferevent.h>
#include <event2/bufferevent_ssl.h>
#include <event2/event.h>
#include <openssl/err.h>
#include <openssl/ssl.h>

#include "netgate/netgate-internal.h"
#include "netgate/tls.h"
#include "util.h"

/* TLS termination for the routes with "terminate": the sandbox's CONNECT
 * to such a route's host and port is answered by the gate itself. The
 * gate runs the TLS server handshake over the sandbox's connection with a
 * leaf for that host signed by the sandbox's CA (ca.c), and the plain
 * requests inside go over a socket pair into the routes' front-end
 * (route.c), which serves them as calls through the route: its inject,
 * strip and record rules, the sentinels, the upstream's verification with
 * the route's CA file or the host's store, the private address check, the
 * budgets and the scrubbing of the answers. Nothing here parses HTTP. */

#define HANDSHAKE_TIMEOUT_S 30
#define IDLE_TIMEOUT_S      300

struct netgate_mitm {
        struct netgate *g;
        struct netgate_mitm *prev, *next;
        struct bufferevent *tls;   /* the sandbox's side, decrypted */
        struct bufferevent *plain; /* our end of the pair into route.c */
        bool tls_eof, plain_eof, shut_plain;
};

static void mitm_free(struct netgate_mitm *m)
{
        if (m->prev)
                m->prev->next = m->next;
        else if (m->g->mitms == m)
                m->g->mitms = m->next;
        if (m->next)
                m->next->prev = m->prev;
        if (m->tls) {
                netgate_tls_clear_errors(m->tls);
                bufferevent_free(m->tls);
        }
        if (m->plain)
                bufferevent_free(m->plain);
        ERR_clear_error();
        netgate_conn_count(m->g, -1);
        free(m);
}

void netgate_mitm_close_all(struct netgate *g)
{
        while (g->mitms)
                mitm_free(g->mitms);
}

/* Move what one side read to the other, within the gate's buffer bound:
 * past it, reading stops until the other side has written it out. */
static void move(struct bufferevent *from, struct bufferevent *to)
{
        struct evbuffer *out = bufferevent_get_output(to);
        evbuffer_add_buffer(out, bufferevent_get_input(from));
        if (evbuffer_get_length(out) >= NETGATE_BUF_HIGH)
                bufferevent_disable(from, EV_READ);
}

/* Both directions are over once the route's side has closed and what it
 * sent has reached the sandbox, or the sandbox's side has ended and the
 * route's side has answered and closed. */
static void maybe_done(struct netgate_mitm *m)
{
        if (m->tls_eof && !m->shut_plain &&
            evbuffer_get_length(bufferevent_get_output(m->plain)) == 0) {
                shutdown(bufferevent_getfd(m->plain), SHUT_WR);
                m->shut_plain = true;
        }
        if (m->plain_eof && evbuffer_get_length(bufferevent_get_output(m->tls)) == 0)
                mitm_free(m);
}

static void tls_read_cb(struct bufferevent *bev, void *ud)
{
        struct netgate_mitm *m = ud;
        move(m->tls, m->plain);
}

static void plain_read_cb(struct bufferevent *bev, void *ud)
{
        struct netgate_mitm *m = ud;
        move(m->plain, m->tls);
}

static void tls_write_cb(struct bufferevent *bev, void *ud)
{
        struct netgate_mitm *m = ud;
        if (!m->plain_eof)
                bufferevent_enable(m->plain, EV_READ);
        maybe_done(m);
}

static void plain_write_cb(struct bufferevent *bev, void *ud)
{
        struct netgate_mitm *m = ud;
        if (!m->tls_eof)
                bufferevent_enable(m->tls, EV_READ);
        maybe_done(m);
}

static void tls_event_cb(struct bufferevent *bev, short what, void *ud)
{
        struct netgate_mitm *m = ud;
        struct timeval tv;
        if (what & BEV_EVENT_CONNECTED) {
                /* A sandbox that stops reading is as silent as one that
                 * stops writing. */
                struct timeval tw;
                bufferevent_set_timeouts(m->tls, netgate_secs(&tv, IDLE_TIMEOUT_S),
                                         netgate_secs(&tw, IDLE_TIMEOUT_S));
                return;
        }
        if (what & (BEV_EVENT_ERROR | BEV_EVENT_TIMEOUT)) {
                /* A failed handshake (the client does not trust the
                 * sandbox's CA), a broken or silent client: nothing more
                 * can be delivered to it. */
                mitm_free(m);
                return;
        }
        if (what & BEV_EVENT_EOF) {
                move(m->tls, m->plain);
                m->tls_eof = true;
                maybe_done(m);
        }
}

static void plain_event_cb(struct bufferevent *bev, short what, void *ud)
{
        struct netgate_mitm *m = ud;
        if (what & BEV_EVENT_ERROR) {
                mitm_free(m);
                return;
        }
        if (what & BEV_EVENT_EOF) {
                move(m->plain, m->tls);
                m->plain_eof = true;
                maybe_done(m);
        }
}

int netgate_mitm_start(struct netgate *g, struct bufferevent *down, SSL_CTX *ctx,
                       const struct netgate_route *rt)
{
        int sv[2];
        struct timeval tv;
        if (socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC | SOCK_NONBLOCK, 0, sv) < 0) {
                netgate_bev_free(down);
                return -errno;
        }
        ERR_clear_error();
        struct netgate_mitm *m = xcalloc(1, sizeof(*m));
        m->g = g;
        netgate_conn_count(g, +1);
        m->next = g->mitms;
        if (g->mitms)
                g->mitms->prev = m;
        g->mitms = m;

        /* The pair's side is rate limited in route.c; the raw side leaves
         * the group so that the filter can free it with itself. */
        bufferevent_remove_from_rate_limit_group(down);
        bufferevent_setcb(down, NULL, NULL, NULL, NULL);
        bufferevent_set_timeouts(down, NULL, NULL);
        SSL *ssl = SSL_new(ctx);
        if (ssl)
                m->tls =
                    bufferevent_openssl_filter_new(g->base, down, ssl, BUFFEREVENT_SSL_ACCEPTING,
                                                   BEV_OPT_CLOSE_ON_FREE | BEV_OPT_DEFER_CALLBACKS);
        if (!m->tls) {
                if (ssl)
                        SSL_free(ssl);
                bufferevent_free(down);
                close(sv[0]);
                close(sv[1]);
                mitm_free(m);
                return -ENOMEM;
        }
        bufferevent_openssl_set_allow_dirty_shutdown(m->tls, 1);
        m->plain =
            bufferevent_socket_new(g->base, sv[1], BEV_OPT_CLOSE_ON_FREE | BEV_OPT_DEFER_CALLBACKS);
        if (!m->plain) {
                close(sv[0]);
                close(sv[1]);
                mitm_free(m);
                return -ENOMEM;
        }
        bufferevent_setcb(m->tls, tls_read_cb, tls_write_cb, tls_event_cb, m);
        bufferevent_setcb(m->plain, plain_read_cb, plain_write_cb, plain_event_cb, m);
        bufferevent_set_timeouts(m->tls, netgate_secs(&tv, HANDSHAKE_TIMEOUT_S), NULL);
        bufferevent_enable(m->tls, EV_READ | EV_WRITE);
        bufferevent_enable(m->plain, EV_READ | EV_WRITE);
        netgate_routes_accept_terminated(g->routes, sv[0], rt);
        return 0;
}
