/* SPDX-License-Identifier: Apache-2.0 */
#include <errno.h>
#include <string.h>
#include <unistd.h>

#include <event2/buffer.h>
#include <event2/bufferevent.h>
#include <event2/event.h>
#include <event2/util.h>

#include "netgate/client.h"
#include "netgate/exchange.h"
#include "netgate/http.h"
#include "netgate/netgate-internal.h"
#include "netgate/tls.h"
#include "netgate/upstream.h"
#include "util.h"

/* The gate's HTTP client (client.h): both sides' callbacks, the kept
 * upstream connection, the retry, the exchange and the close, for every
 * front-end. */

static void pump(struct netgate_client *cl)
{
        netgate_exchange_pump(&cl->x, cl->down, cl->up);
}

static void drop_upstream(struct netgate_client *cl)
{
        netgate_upstream_stop(&cl->u);
        if (cl->up) {
                netgate_bev_free(cl->up);
                cl->up = NULL;
        }
        cl->up_idle = false;
        cl->up_reused = false;
        cl->up_host[0] = '\0';
        cl->up_key = NULL;
        cl->up_tls = NULL;
}

void netgate_client_drop_idle(struct netgate_client *cl)
{
        if (cl->up && cl->up_idle)
                drop_upstream(cl);
}

void netgate_client_close(struct netgate_client *cl)
{
        drop_upstream(cl);
        cl->state = NETGATE_CLIENT_CLOSING;
        if (netgate_linger_start(&cl->linger, cl->down, cl->x.client_eof))
                cl->ops->end(cl->ud, NULL);
}

void netgate_client_answer(struct netgate_client *cl, int status, const char *phrase,
                           const char *header, const char *reason, const char *line)
{
        netgate_client_answer_ex(cl, status, phrase, header, reason, NULL, line);
}

void netgate_client_answer_ex(struct netgate_client *cl, int status, const char *phrase,
                              const char *header, const char *reason, const char *extra,
                              const char *line)
{
        netgate_exchange_answer_ex(&cl->x, cl->down, status, phrase, header, reason, extra, line);
        netgate_client_close(cl);
}

void netgate_client_begin(struct netgate_client *cl)
{
        cl->x.bytes_up = cl->x.bytes_down = 0;
        cl->x.status = 0;
        cl->have_addr = false;
}

/* ---- the exchange ---- */

static void start_exchange(struct netgate_client *cl)
{
        struct evbuffer *out = bufferevent_get_output(cl->up);
        size_t before = evbuffer_get_length(out);
        cl->state = NETGATE_CLIENT_EXCHANGE;
        bool held = netgate_bev_hold(cl->x.g, cl->up);
        cl->ops->write_head(cl->ud, out);
        netgate_exchange_account(&cl->x, true, evbuffer_get_length(out) - before);
        netgate_bev_push(cl->up, held);
        netgate_exchange_start(&cl->x, cl->down, cl->up);
}

static void exchange_done(void *ud)
{
        struct netgate_client *cl = ud;
        struct timeval tv;
        cl->ops->done(cl->ud);
        if (cl->up && netgate_exchange_keep_upstream(&cl->x, cl->up)) {
                cl->up_idle = true;
                cl->up_reused = false;
        } else
                drop_upstream(cl);
        if (cl->x.close_after || !cl->x.req_done || cl->x.reqp->head.minor == 0) {
                netgate_client_close(cl);
                return;
        }
        cl->state = NETGATE_CLIENT_HEAD;
        netgate_http_parser_init(cl->x.reqp, NETGATE_HTTP_REQUEST);
        cl->x.reqp->origin_form = cl->origin_form;
        bufferevent_set_timeouts(cl->down, netgate_secs(&tv, NETGATE_HEAD_TIMEOUT_S), NULL);
        bufferevent_enable(cl->down, EV_READ);
        cl->ops->read(cl->ud);
}

/* The upstream failed the exchange. A kept connection that the server
 * closed before answering a body-less request is retried once, on a fresh
 * connection to the same checked address, with the same TLS layer and
 * peer name. */
static void exchange_upstream_failed(void *ud)
{
        struct netgate_client *cl = ud;
        if (netgate_exchange_retryable(&cl->x, cl->up_reused)) {
                drop_upstream(cl);
                cl->state = NETGATE_CLIENT_CONNECTING;
                cl->u.addr = cl->addr;
                cl->u.host = cl->host;
                cl->u.port = cl->port;
                cl->u.tls = cl->tls;
                netgate_upstream_reopen(&cl->u);
                return;
        }
        if (!cl->x.resp_sent) {
                cl->ops->failed(cl->ud, "upstream_failed",
                                cl->x.last_errno ? cl->x.last_errno : ECONNRESET, NULL);
                return;
        }
        cl->ops->end(cl->ud, "upstream_failed");
}

static void exchange_end(void *ud, const char *reason)
{
        struct netgate_client *cl = ud;
        cl->ops->end(cl->ud, reason);
}

static const struct netgate_exchange_ops exchange_ops = {
    .done = exchange_done,
    .upstream_failed = exchange_upstream_failed,
    .end = exchange_end,
};

/* ---- the upstream's callbacks ---- */

static void up_event_cb(struct bufferevent *bev, short what, void *ud)
{
        struct netgate_client *cl = ud;
        int err = EVUTIL_SOCKET_ERROR();
        if (cl->state != NETGATE_CLIENT_EXCHANGE) {
                /* A kept upstream went away or timed out while idle. */
                drop_upstream(cl);
                return;
        }
        cl->x.up_eof = true;
        if (!(what & BEV_EVENT_EOF)) {
                /* Never 0: an error is not the clean end of a body that
                 * the close delimits. */
                cl->x.last_errno = (what & BEV_EVENT_TIMEOUT) ? ETIMEDOUT : (err ? err : EIO);
                netgate_tls_clear_errors(bev);
        }
        pump(cl);
}

static void up_read_cb(struct bufferevent *bev, void *ud)
{
        struct netgate_client *cl = ud;
        if (cl->state == NETGATE_CLIENT_EXCHANGE)
                pump(cl);
        else
                drop_upstream(cl); /* bytes from an idle upstream answer nothing */
}

static void up_write_cb(struct bufferevent *bev, void *ud)
{
        struct netgate_client *cl = ud;
        if (cl->state == NETGATE_CLIENT_EXCHANGE)
                pump(cl);
}

/* ---- the engine's ops ---- */

static void upstream_connected(void *ud, struct bufferevent *up)
{
        struct netgate_client *cl = ud;
        cl->addr = cl->u.addr;
        cl->have_addr = true;
        cl->x.last_errno = 0;
        if (cl->tunnel) {
                struct bufferevent *down = cl->down;
                cl->state = NETGATE_CLIENT_TUNNEL;
                cl->down = NULL;
                cl->ops->tunnel(cl->ud, down, up);
                return;
        }
        cl->up = up;
        bufferevent_setcb(up, up_read_cb, up_write_cb, up_event_cb, cl);
        snprintf(cl->up_host, sizeof(cl->up_host), "%s", cl->host->name);
        cl->up_port = cl->port;
        cl->up_tls = cl->tls;
        cl->up_key = cl->key;
        cl->up_addr = cl->addr;
        cl->up_reused = false;
        start_exchange(cl);
}

static void upstream_refused(void *ud, const char *range)
{
        struct netgate_client *cl = ud;
        cl->addr = cl->u.addr;
        cl->have_addr = true;
        cl->ops->refused(cl->ud, range);
}

static void upstream_failed(void *ud, const char *reason, int err, const char *detail)
{
        struct netgate_client *cl = ud;
        cl->addr = cl->u.addr;
        cl->have_addr = cl->u.have_addr;
        cl->x.last_errno = err;
        cl->ops->failed(cl->ud, reason, err, detail);
}

static const struct netgate_upstream_ops upstream_ops = {
    .connected = upstream_connected,
    .refused = upstream_refused,
    .failed = upstream_failed,
};

static void open_upstream(struct netgate_client *cl, const struct netgate_host *host, uint16_t port,
                          const struct netgate_tls *tls, bool tunnel)
{
        drop_upstream(cl);
        cl->host = host;
        cl->port = port;
        cl->tls = tls;
        cl->tunnel = tunnel;
        cl->state = NETGATE_CLIENT_CONNECTING;
        /* Reading on (bytes wait in the bounded input) notices a sandbox
         * that leaves while the gate resolves and connects. */
        bufferevent_enable(cl->down, EV_READ);
        netgate_upstream_open(&cl->u, host, port, tls);
}

void netgate_client_send(struct netgate_client *cl, const struct netgate_host *host, uint16_t port,
                         const struct netgate_tls *tls, const void *key)
{
        cl->key = key;
        if (cl->up && cl->up_idle && cl->up_port == port && cl->up_tls == tls &&
            cl->up_key == key && STREQ(cl->up_host, host->name)) {
                struct timeval tv;
                cl->host = host;
                cl->port = port;
                cl->tls = tls;
                cl->tunnel = false;
                cl->up_reused = true;
                cl->up_idle = false;
                /* The request goes to the address the kept connection
                 * reaches, checked when it was opened: record that. */
                cl->addr = cl->up_addr;
                cl->have_addr = true;
                bufferevent_set_timeouts(cl->up, netgate_secs(&tv, NETGATE_IO_TIMEOUT_S),
                                         netgate_secs(&tv, NETGATE_IO_TIMEOUT_S));
                start_exchange(cl);
                return;
        }
        open_upstream(cl, host, port, tls, false);
}

void netgate_client_tunnel(struct netgate_client *cl, const struct netgate_host *host,
                           uint16_t port)
{
        cl->key = NULL;
        open_upstream(cl, host, port, NULL, true);
}

/* ---- the sandbox's callbacks ---- */

static void down_read_cb(struct bufferevent *bev, void *ud)
{
        struct netgate_client *cl = ud;
        switch (cl->state) {
        case NETGATE_CLIENT_HEAD:
                cl->ops->read(cl->ud);
                break;
        case NETGATE_CLIENT_EXCHANGE:
                pump(cl);
                break;
        case NETGATE_CLIENT_CLOSING:
                if (netgate_linger_read(&cl->linger, cl->down))
                        cl->ops->end(cl->ud, NULL);
                break;
        default:
                break;
        }
}

static void down_write_cb(struct bufferevent *bev, void *ud)
{
        struct netgate_client *cl = ud;
        switch (cl->state) {
        case NETGATE_CLIENT_EXCHANGE:
                pump(cl);
                break;
        case NETGATE_CLIENT_CLOSING:
                if (netgate_linger_write(&cl->linger, cl->down, cl->x.client_eof))
                        cl->ops->end(cl->ud, NULL);
                break;
        default:
                break;
        }
}

static void down_event_cb(struct bufferevent *bev, short what, void *ud)
{
        struct netgate_client *cl = ud;
        /* Reading the client is left on once its request is complete
         * (exchange.c), so the head timeout runs on while the answer is on
         * its way: it ends nothing then. libevent has stopped reading; the
         * end of the exchange starts it again with a fresh timeout. */
        if ((what & BEV_EVENT_TIMEOUT) && (what & BEV_EVENT_READING) &&
            cl->state == NETGATE_CLIENT_EXCHANGE && cl->x.req_done)
                return;
        if (!(what & BEV_EVENT_EOF)) {
                cl->ops->end(cl->ud, (what & BEV_EVENT_TIMEOUT) ? "timeout" : "client_closed");
                return;
        }
        cl->x.client_eof = true;
        switch (cl->state) {
        case NETGATE_CLIENT_EXCHANGE:
                cl->x.close_after = true;
                pump(cl);
                break;
        case NETGATE_CLIENT_CLOSING:
                if (netgate_linger_eof(&cl->linger, cl->down))
                        cl->ops->end(cl->ud, NULL);
                break;
        case NETGATE_CLIENT_CONNECTING:
                /* A half-closed HTTP client still gets its answer; a tunnel
                 * nobody will use is dropped. */
                if (!cl->tunnel) {
                        cl->x.close_after = true;
                        break;
                }
                cl->ops->end(cl->ud, "client_closed");
                break;
        default:
                cl->ops->end(cl->ud, "client_closed");
                break;
        }
}

/* ---- a connection ---- */

int netgate_client_accept(struct netgate_client *cl, struct netgate *g, int fd,
                          const struct netgate_client_ops *ops,
                          const struct netgate_exchange_filter *filter, void *ud,
                          long head_timeout_s)
{
        struct timeval tv;
        struct bufferevent *bev =
            bufferevent_socket_new(g->base, fd, BEV_OPT_CLOSE_ON_FREE | BEV_OPT_DEFER_CALLBACKS);
        if (!bev) {
                close(fd);
                return -ENOMEM;
        }
        netgate_set_nodelay(fd);
        *cl = (struct netgate_client){.g = g, .ops = ops, .ud = ud, .down = bev};
        cl->x.g = g;
        cl->x.ops = &exchange_ops;
        cl->x.ud = cl;
        cl->x.filter = filter;
        cl->x.filter_ud = ud;
        netgate_upstream_init(&cl->u, g, &upstream_ops, cl);
        netgate_setup_bufferevent(g, bev);
        bufferevent_setcb(bev, down_read_cb, down_write_cb, down_event_cb, cl);
        bufferevent_set_timeouts(bev, netgate_secs(&tv, head_timeout_s), NULL);
        bufferevent_enable(bev, EV_READ | EV_WRITE);
        return 0;
}

void netgate_client_release(struct netgate_client *cl)
{
        drop_upstream(cl);
        if (cl->down) {
                netgate_bev_free(cl->down);
                cl->down = NULL;
        }
        netgate_exchange_release(&cl->x);
        free(cl->x.reqp);
        free(cl->x.respp);
        cl->x.reqp = cl->x.respp = NULL;
}
