/* SPDX-License-Identifier: Apache-2.0 */
#include <errno.h>
#include <inttypes.h>
#include <stdarg.h>
#include <event2/buffer.h>
#include <event2/bufferevent.h>
#include <event2/event.h>
#include <event2/http.h>
#include <event2/listener.h>
#include <netinet/in.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>

#include "daemon.h"
#include "http.h"
#include "httpguard.h"
#include "httphead.h"
#include "netgate/http.h"
#include "util.h"

/* Each API connection gets its bufferevent from here (evhttp_set_bevcb), and
 * a watcher on that bufferevent's input buffer runs on every read, before
 * libevent's HTTP parser. It reads the bytes with the strict parser of
 * netgate/http.c and holds a request head back until it is complete and
 * passes: libevent only ever parses heads that two readers cannot read
 * differently (RFC 9112), and the watcher knows where each body ends because
 * it frames bodies the same way. A head that fails is replaced by a small
 * request of its own, which route() answers with the reason and closes.
 *
 * Lifetime: libevent has no hook for the end of a server connection that is
 * free for us to take (the close callback belongs to the exec streams). The
 * watcher holds a reference on the bufferevent, made with
 * BEV_OPT_CLOSE_ON_FREE: when evhttp frees it, its callbacks are cleared but
 * it, and its descriptor, live on until a sweep sees the cleared callbacks
 * and drops the reference. The descriptor is closed only then, so its number
 * cannot be reused while the old events are still registered. */

#define SWEEP_MS       250
#define BACKOFF_MIN_MS 100
#define BACKOFF_MAX_MS 1000
#define RETRY_AFTER_S  "1"
/* Bytes a client may send ahead while its previous request is answered
 * (libevent keeps reading then, to see a close): pipelined requests. */
#define PIPELINE_MAX (1u << 20)

/* What libevent reads in place of a refused head. */
static const char refused_head[] = "GET / HTTP/1.1\r\nConnection: close\r\n\r\n";

enum conn_state {
        C_IDLE, /* between requests */
        C_HEAD, /* a head is arriving, held back */
        C_BODY, /* a body is passing through */
        C_DEAD, /* refused: the rest is dropped */
};

struct peer {
        int family; /* AF_UNIX: uid; AF_INET(6): addr */
        uid_t uid;
        unsigned char addr[16];
};

struct conn {
        struct conn *next;
        struct bufferevent *bev;
        struct event *timer;
        struct evbuffer *hold; /* the head so far, raw */
        struct netgate_http_parser *parser;
        struct netgate_http_body body;
        enum conn_state state;
        bool classified;
        bool timed; /* the deadline has been started once */
        bool busy;  /* in the watcher: its own changes are not new input */
        bool upgraded; /* switched protocols (a WebSocket): no longer HTTP */
        struct peer peer;
        uint64_t requests;
        int status; /* refused: the answer's status */
        char message[256];
};

static struct {
        struct daemon *d;
        struct http_limits lim;
        struct conn *conns;
        size_t n_conns;
        struct event *sweep_timer;
        struct evconnlistener *listeners[4];
        size_t n_listeners;
        struct event *backoff_timer;
        uint64_t backoff_ms;
        struct log_limit accept_log;
} G;

static bool conn_dead(struct conn *c)
{
        bufferevent_data_cb r, w;
        bufferevent_event_cb e;
        void *arg;
        bufferevent_getcb(c->bev, &r, &w, &e, &arg);
        return !r && !w && !e;
}

/* Whether libevent is answering a request rather than reading one: it stops
 * reading when it hands a request over, and while it writes an answer it
 * reads with no read callback, only to see the client close. */
static bool conn_answering(struct conn *c)
{
        bufferevent_data_cb r, w;
        bufferevent_event_cb e;
        void *arg;
        bufferevent_getcb(c->bev, &r, &w, &e, &arg);
        return !r || !(bufferevent_get_enabled(c->bev) & EV_READ);
}

static void on_input(struct evbuffer *buf, const struct evbuffer_cb_info *info, void *arg);

static void conn_free(struct conn *c)
{
        evbuffer_remove_cb(bufferevent_get_input(c->bev), on_input, c);
        if (c->timer)
                event_free(c->timer);
        if (c->hold)
                evbuffer_free(c->hold);
        free(c->parser);
        bufferevent_decref(c->bev);
        free(c);
}

static void sweep(void)
{
        for (struct conn **pc = &G.conns; *pc;) {
                struct conn *c = *pc;
                if (conn_dead(c)) {
                        *pc = c->next;
                        G.n_conns--;
                        conn_free(c);
                } else
                        pc = &c->next;
        }
}

static void on_sweep(evutil_socket_t fd, short what, void *arg)
{
        sweep();
        if (!G.conns)
                event_del(G.sweep_timer);
}

static struct conn *conn_of(struct evhttp_request *req)
{
        struct evhttp_connection *evcon = evhttp_request_get_connection(req);
        struct bufferevent *bev = evcon ? evhttp_connection_get_bufferevent(evcon) : NULL;
        for (struct conn *c = G.conns; c && bev; c = c->next)
                if (c->bev == bev)
                        return c;
        return NULL;
}

void http_guard_upgraded(struct evhttp_request *req)
{
        struct conn *c = conn_of(req);
        if (!c)
                return;
        c->upgraded = true;
        event_del(c->timer);
}

static void refuse(struct conn *c, int status, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));
static void refuse(struct conn *c, int status, const char *fmt, ...)
{
        if (c->status)
                return;
        c->status = status;
        va_list ap;
        va_start(ap, fmt);
        vsnprintf(c->message, sizeof(c->message), fmt, ap);
        va_end(ap);
}

/* Close now: libevent sees the end of the stream and frees the connection. */
static void conn_close(struct conn *c)
{
        c->state = C_DEAD;
        int fd = bufferevent_getfd(c->bev);
        if (fd >= 0)
                shutdown(fd, SHUT_RDWR);
}

static bool peer_eq(const struct peer *a, const struct peer *b)
{
        if (a->family != b->family)
                return false;
        if (a->family == AF_UNIX)
                return a->uid == b->uid;
        return memcmp(a->addr, b->addr, sizeof(a->addr)) == 0;
}

/* Who is at the other end, and whether one more connection from them is
 * within the caps. Done once, before the first request is read. */
static void classify(struct conn *c)
{
        if (c->classified)
                return;
        c->classified = true;
        int fd = bufferevent_getfd(c->bev);
        struct sockaddr_storage ss;
        socklen_t len = sizeof(ss);
        if (fd < 0 || getpeername(fd, (struct sockaddr *)&ss, &len) < 0) {
                refuse(c, 503, "the connection's peer is unknown");
                return;
        }
        c->peer.family = ss.ss_family;
        if (ss.ss_family == AF_UNIX) {
                struct ucred cr;
                socklen_t cl = sizeof(cr);
                if (getsockopt(fd, SOL_SOCKET, SO_PEERCRED, &cr, &cl) < 0) {
                        refuse(c, 503, "the connection's peer is unknown");
                        return;
                }
                c->peer.uid = cr.uid;
        } else if (ss.ss_family == AF_INET) {
                memcpy(c->peer.addr, &((struct sockaddr_in *)&ss)->sin_addr, 4);
        } else if (ss.ss_family == AF_INET6) {
                const struct in6_addr *a = &((struct sockaddr_in6 *)&ss)->sin6_addr;
                if (IN6_IS_ADDR_V4MAPPED(a)) {
                        c->peer.family = AF_INET;
                        memcpy(c->peer.addr, a->s6_addr + 12, 4);
                } else
                        memcpy(c->peer.addr, a->s6_addr, 16);
        }
        sweep();
        uint64_t same = 0;
        for (struct conn *o = G.conns; o; o = o->next)
                if (o != c && o->classified && !o->status && peer_eq(&o->peer, &c->peer))
                        same++;
        if ((G.lim.max_connections && G.n_conns > G.lim.max_connections) ||
            (G.lim.max_peer_connections && same >= G.lim.max_peer_connections))
                G.d->metrics.http_refused_connections++;
        if (G.lim.max_connections && G.n_conns > 2 * G.lim.max_connections)
                /* Far past the maximum: not worth a descriptor until a head
                 * comes. Closed before any HTTP was spoken. */
                conn_close(c);
        if (G.lim.max_connections && G.n_conns > G.lim.max_connections)
                refuse(c, 503,
                       "the daemon has %zu connections open, its maximum is %" PRIu64
                       ": try again later",
                       G.n_conns - 1, G.lim.max_connections);
        else if (G.lim.max_peer_connections && same >= G.lim.max_peer_connections)
                refuse(c, 429,
                       "this client has %" PRIu64 " connections open, the maximum per "
                       "client is %" PRIu64 ": close some or try again later",
                       same, G.lim.max_peer_connections);
}

static void deadline_start(struct conn *c)
{
        if (!evtimer_pending(c->timer, NULL)) {
                struct timeval tv = {.tv_sec = (time_t)(G.lim.request_timeout_ms / 1000),
                                     .tv_usec =
                                         (suseconds_t)(G.lim.request_timeout_ms % 1000) * 1000};
                evtimer_add(c->timer, &tv);
        }
}

static void on_timer(evutil_socket_t fd, short what, void *arg)
{
        struct conn *c = arg;
        if (conn_dead(c) || c->upgraded)
                return;
        if (!c->timed) {
                /* The first turn after accept(): the descriptor is known now,
                 * and the first request's deadline runs from here. */
                c->timed = true;
                classify(c);
                deadline_start(c);
                return;
        }
        if (c->state == C_IDLE && c->requests > 0)
                return; /* between requests: evhttp's idle timeout applies */
        if (c->state != C_DEAD && conn_answering(c)) {
                /* A request is being answered (an exec stream may last long):
                 * a head pipelined behind it is timed once it is read. */
                deadline_start(c);
                return;
        }
        if (c->state != C_DEAD)
                G.d->metrics.http_deadline_closes++;
        conn_close(c);
}

static void request_done(struct conn *c)
{
        c->state = C_IDLE;
        event_del(c->timer);
}

/* A refused head: what libevent reads instead is a request route() answers
 * with c->status, and nothing after it. */
static void head_refused(struct conn *c, struct evbuffer *out)
{
        evbuffer_drain(c->hold, evbuffer_get_length(c->hold));
        evbuffer_add(out, refused_head, sizeof(refused_head) - 1);
        free(c->parser);
        c->parser = NULL;
        c->state = C_DEAD;
        c->requests++;
}

static void head_done(struct conn *c, struct evbuffer *out)
{
        char msg[sizeof(c->message)];
        const struct netgate_http_head *h = &c->parser->head;
        int status = http_head_check(h, msg, sizeof(msg));
        if (status) {
                G.d->metrics.http_refused_heads++;
                refuse(c, status, "%s", msg);
                head_refused(c, out);
                return;
        }
        if (c->status) {
                head_refused(c, out);
                return;
        }
        /* Copied, not moved: a moved chain keeps its whole allocation, and
         * a stream of small heads would cost a chain each. */
        size_t n = evbuffer_get_length(c->hold);
        evbuffer_add(out, evbuffer_pullup(c->hold, -1), n);
        evbuffer_drain(c->hold, n);
        c->requests++;
        netgate_http_body_init(&c->body, h->framing, h->length);
        free(c->parser);
        c->parser = NULL;
        if (c->body.framing == NETGATE_HTTP_BODY_NONE)
                request_done(c);
        else
                c->state = C_BODY;
}

static void head_failed(struct conn *c, int r, const char *more, size_t n, struct evbuffer *out)
{
        char msg[sizeof(c->message)];
        if (evbuffer_get_length(c->hold) < NETGATE_HTTP_HEAD_MAX + 1)
                evbuffer_add(c->hold, more, n);
        size_t len = evbuffer_get_length(c->hold);
        const char *head = (const char *)evbuffer_pullup(c->hold, -1);
        int status = http_head_explain(head, len, r, msg, sizeof(msg));
        G.d->metrics.http_refused_heads++;
        refuse(c, status, "%s", msg);
        head_refused(c, out);
}

/* Read fresh bytes; what libevent should see of them goes to `out`. False
 * when that is exactly `data`, so the buffer can be left as it is. */
static bool scan(struct conn *c, const char *data, size_t n, struct evbuffer *out)
{
        bool changed = false;
        size_t i = 0;
        while (i < n) {
                switch (c->state) {
                case C_DEAD:
                        return true;
                case C_BODY: {
                        size_t used = 0, off, run;
                        int r = netgate_http_body_feed(&c->body, data + i, n - i, SIZE_MAX, &used,
                                                       &off, &run);
                        if (r < 0) {
                                /* Bad chunking: libevent is inside the body,
                                 * where no answer can be slipped in. */
                                conn_close(c);
                                return true;
                        }
                        evbuffer_add(out, data + i, used);
                        i += used;
                        if (r == 1)
                                request_done(c);
                        break;
                }
                case C_IDLE:
                        c->parser = malloc(sizeof(*c->parser));
                        if (!c->parser) {
                                conn_close(c);
                                return true;
                        }
                        netgate_http_parser_init(c->parser, NETGATE_HTTP_REQUEST);
                        c->parser->origin_form = true;
                        c->state = C_HEAD;
                        deadline_start(c);
                        /* fall through */
                case C_HEAD: {
                        changed = true;
                        size_t used = 0;
                        int r = netgate_http_parser_feed(c->parser, data + i, n - i, &used);
                        if (r < 0) {
                                head_failed(c, r, data + i, n - i, out);
                                return true;
                        }
                        evbuffer_add(c->hold, data + i, used);
                        i += used;
                        if (r == 1)
                                head_done(c, out);
                        break;
                }
                }
        }
        return changed;
}

static void on_input(struct evbuffer *buf, const struct evbuffer_cb_info *info, void *arg)
{
        struct conn *c = arg;
        if (c->busy || info->n_added == 0 || conn_dead(c) || c->upgraded)
                return;
        c->busy = true;
        classify(c);
        size_t len = evbuffer_get_length(buf);
        size_t n = info->n_added < len ? info->n_added : len;
        size_t keep = len - n;

        if (c->state == C_BODY && c->body.framing == NETGATE_HTTP_BODY_LENGTH &&
            c->body.remaining > n) {
                c->body.remaining -= n; /* the common case of a large body */
                c->busy = false;
                return;
        }
        char *data = malloc(n ? n : 1);
        struct evbuffer *out = evbuffer_new();
        struct evbuffer_ptr p;
        if (!data || !out || evbuffer_ptr_set(buf, &p, keep, EVBUFFER_PTR_SET) < 0 ||
            evbuffer_copyout_from(buf, &p, data, n) != (ev_ssize_t)n) {
                conn_close(c);
                evbuffer_drain(buf, len);
        } else if (scan(c, data, n, out)) {
                /* Put `out` where the fresh bytes were, after what libevent
                 * has not read yet. */
                struct evbuffer *front = evbuffer_new();
                if (!front) {
                        conn_close(c);
                        evbuffer_drain(buf, len);
                } else {
                        evbuffer_remove_buffer(buf, front, keep);
                        evbuffer_drain(buf, n);
                        evbuffer_add_buffer(buf, front);
                        evbuffer_add_buffer(buf, out);
                        evbuffer_free(front);
                }
        }
        if (out)
                evbuffer_free(out);
        free(data);
        if (c->state != C_DEAD && conn_answering(c) &&
            evbuffer_get_length(buf) + evbuffer_get_length(c->hold) > PIPELINE_MAX) {
                /* Nothing reads these while the answer lasts: a client
                 * that keeps sending would grow the daemon without end. */
                G.d->metrics.http_refused_connections++;
                conn_close(c);
                evbuffer_drain(buf, evbuffer_get_length(buf));
        }
        c->busy = false;
}

static struct bufferevent *on_new_connection(struct event_base *base, void *arg)
{
        G.backoff_ms = 0; /* accept() works again */
        sweep();
        struct bufferevent *bev = bufferevent_socket_new(base, -1, BEV_OPT_CLOSE_ON_FREE);
        struct conn *c = bev ? calloc(1, sizeof(*c)) : NULL;
        if (c) {
                c->bev = bev;
                c->timer = evtimer_new(base, on_timer, c);
                c->hold = evbuffer_new();
        }
        if (!c || !c->timer || !c->hold ||
            !evbuffer_add_cb(bufferevent_get_input(bev), on_input, c)) {
                /* libevent makes a bufferevent of its own, which route()
                 * refuses: it is not watched. */
                if (c) {
                        if (c->timer)
                                event_free(c->timer);
                        if (c->hold)
                                evbuffer_free(c->hold);
                        free(c);
                }
                if (bev)
                        bufferevent_free(bev);
                return NULL;
        }
        bufferevent_incref(bev);
        c->next = G.conns;
        G.conns = c;
        G.n_conns++;
        /* The descriptor is set once this returns; look at it next turn. */
        static const struct timeval now = {0, 0};
        evtimer_add(c->timer, &now);
        if (!evtimer_pending(G.sweep_timer, NULL)) {
                struct timeval tv = {0, SWEEP_MS * 1000};
                evtimer_add(G.sweep_timer, &tv);
        }
        return bev;
}

bool http_guard_refused(struct daemon *d, struct evhttp_request *req)
{
        struct conn *c = conn_of(req);
        struct evkeyvalq *out = evhttp_request_get_output_headers(req);
        if (c && c->classified && !c->status)
                return false;
        evhttp_add_header(out, "Connection", "close");
        if (!c) {
                evhttp_add_header(out, "Retry-After", RETRY_AFTER_S);
                reply_error(d, req, 503, "overloaded", "the daemon could not take the connection");
                return true;
        }
        if (!c->classified)
                classify(c);
        if (!c->status)
                return false;
        if (c->status == 429 || c->status == 503)
                evhttp_add_header(out, "Retry-After", RETRY_AFTER_S);
        const char *code = c->status == 429   ? "too_many_connections"
                           : c->status == 503 ? "overloaded"
                                              : "bad_request";
        reply_error(d, req, c->status, code, "%s", c->message);
        return true;
}

/* Out of descriptors (or memory), accept() fails at once every time it is
 * tried: stop listening for a while instead of spinning. */
static void on_accept_error(struct evconnlistener *lev, void *arg)
{
        int e = EVUTIL_SOCKET_ERROR();
        sweep();
        for (size_t i = 0; i < G.n_listeners; i++)
                evconnlistener_disable(G.listeners[i]);
        G.d->metrics.http_accept_pauses++;
        G.backoff_ms = G.backoff_ms ? G.backoff_ms * 2 : BACKOFF_MIN_MS;
        if (G.backoff_ms > BACKOFF_MAX_MS)
                G.backoff_ms = BACKOFF_MAX_MS;
        daemon_log_limited(G.d, &G.accept_log, 10000,
                           "accepting a connection: %s; not accepting for %" PRIu64 " ms "
                           "(%zu connections open)",
                           strerror(e), G.backoff_ms, G.n_conns);
        struct timeval tv = {.tv_sec = (time_t)(G.backoff_ms / 1000),
                             .tv_usec = (suseconds_t)(G.backoff_ms % 1000) * 1000};
        evtimer_add(G.backoff_timer, &tv);
}

static void on_backoff(evutil_socket_t fd, short what, void *arg)
{
        for (size_t i = 0; i < G.n_listeners; i++)
                evconnlistener_enable(G.listeners[i]);
}

void http_guard_listener(struct evconnlistener *lev)
{
        if (G.n_listeners < ARRAY_SIZE(G.listeners))
                G.listeners[G.n_listeners++] = lev;
        evconnlistener_set_error_cb(lev, on_accept_error);
}

int http_guard_setup(struct daemon *d, const struct http_limits *lim, struct al_error *err)
{
        G.d = d;
        G.lim = *lim;
        G.sweep_timer = event_new(d->base, -1, EV_PERSIST, on_sweep, NULL);
        G.backoff_timer = evtimer_new(d->base, on_backoff, NULL);
        if (!G.sweep_timer || !G.backoff_timer)
                return al_error_set(err, ENOMEM, "setting up the API's connections");
        evhttp_set_bevcb(d->http, on_new_connection, NULL);
        return 0;
}

void http_guard_shutdown(void)
{
        /* evhttp_free() has freed the connections: only our references are
         * left. */
        sweep();
        while (G.conns) {
                struct conn *c = G.conns;
                G.conns = c->next;
                conn_free(c);
        }
        G.n_conns = 0;
        if (G.sweep_timer)
                event_free(G.sweep_timer);
        if (G.backoff_timer)
                event_free(G.backoff_timer);
        G.sweep_timer = G.backoff_timer = NULL;
}
