/* SPDX-License-Identifier: Apache-2.0 */
#include <errno.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include <event2/buffer.h>
#include <event2/bufferevent.h>
#include <event2/event.h>

#include "netgate/http.h"
#include "netgate/netgate-internal.h"
#include "netgate/netgate.h"
#include "util.h"

/* The host's own requests through a route (netgate.h): the request goes
 * over a socket pair into the routes' front-end, so it is served by the
 * same code as a sandbox's request, and this side reads the answer with
 * the gate's own parser, within a size cap and a timeout. */

struct netgate_fetch {
        struct netgate *g;
        struct netgate_fetch *prev, *next;
        netgate_fetch_cb cb;
        void *ud;
        struct bufferevent *bev; /* our end of the pair */
        struct event *timer;
        uint64_t max;

        struct netgate_http_parser *p;
        struct netgate_http_body body;
        bool head_done;
        struct evbuffer *resp;
};

static bool is_token(const char *s, size_t max)
{
        size_t n = s ? strlen(s) : 0;
        return n <= max && netgate_http_is_token(s, n);
}

/* Printable ASCII without space; none of `refused`. */
static bool is_plain(const char *s, const char *refused)
{
        for (; *s; s++)
                if (*s <= 0x20 || *s >= 0x7f || strchr(refused, *s))
                        return false;
        return true;
}

static int check_request(const struct netgate_fetch_request *req, struct al_error *err)
{
        if (!req->route || !req->route[0] || strlen(req->route) > 128 ||
            !is_plain(req->route, "/?#%\\"))
                return al_error_set(err, -EINVAL, "fetch: not a route name");
        if (!is_token(req->method, NETGATE_HTTP_METHOD_MAX))
                return al_error_set(err, -EINVAL, "fetch through route %s: not an HTTP method",
                                    req->route);
        const char *path = req->path ? req->path : "";
        if ((path[0] && path[0] != '/' && path[0] != '?') ||
            strlen(path) > NETGATE_HTTP_LINE_MAX / 2 || !is_plain(path, "#"))
                return al_error_set(err, -EINVAL,
                                    "fetch through route %s: the path is not \"\", \"/...\" or "
                                    "\"?...\" in printable ASCII without spaces",
                                    req->route);
        for (size_t i = 0; i < req->n_headers; i++) {
                const struct netgate_header *h = &req->headers[i];
                if (!is_token(h->name, 256))
                        return al_error_set(err, -EINVAL,
                                            "fetch through route %s: header %zu: not a field name",
                                            req->route, i);
                if (!h->value || strlen(h->value) > NETGATE_HTTP_LINE_MAX / 2 ||
                    !netgate_http_value_ok(h->value))
                        return al_error_set(err, -EINVAL,
                                            "fetch through route %s: header %s: the value holds "
                                            "control characters or is too long",
                                            req->route, h->name);
        }
        if (req->body_len > NETGATE_FETCH_BODY_MAX)
                return al_error_set(err, -EMSGSIZE,
                                    "fetch through route %s: the body is over %u bytes", req->route,
                                    NETGATE_FETCH_BODY_MAX);
        if (req->timeout_ms == 0)
                return al_error_set(err, -EINVAL, "fetch through route %s: no timeout", req->route);
        return 0;
}

/* ---- the end ---- */

static void fetch_free(struct netgate_fetch *f)
{
        if (f->prev)
                f->prev->next = f->next;
        else if (f->g->fetches == f)
                f->g->fetches = f->next;
        if (f->next)
                f->next->prev = f->prev;
        if (f->bev)
                bufferevent_free(f->bev);
        if (f->timer)
                event_free(f->timer);
        if (f->resp) {
                size_t n = evbuffer_get_length(f->resp);
                if (n)
                        explicit_bzero(evbuffer_pullup(f->resp, -1), n);
                evbuffer_free(f->resp);
        }
        free(f->p);
        free(f);
}

void netgate_fetch_cancel(struct netgate_fetch *f)
{
        if (f)
                fetch_free(f);
}

void netgate_fetch_cancel_all(struct netgate *g)
{
        while (g->fetches)
                fetch_free(g->fetches);
}

static void fail(struct netgate_fetch *f, int err)
{
        netgate_fetch_cb cb = f->cb;
        void *ud = f->ud;
        fetch_free(f);
        cb(ud, err, NULL);
}

static char *dup_n(const char *s, size_t n)
{
        char *r = xcalloc(n + 1, 1);
        memcpy(r, s, n);
        return r;
}

static void complete(struct netgate_fetch *f)
{
        const struct netgate_http_head *h = &f->p->head;
        struct netgate_header *fields = xcalloc(h->n_fields + 1, sizeof(*fields));
        struct netgate_fetch_response r = {.status = h->status, .headers = fields};
        for (size_t i = 0; i < h->n_fields; i++) {
                const struct netgate_http_field *hf = &h->fields[i];
                fields[i].name = dup_n(hf->name, hf->name_len);
                fields[i].value = dup_n(hf->value, hf->value_len);
                if (!r.gate_reason &&
                    (netgate_http_name_eq(hf->name, hf->name_len, "x-airlock-denied") ||
                     netgate_http_name_eq(hf->name, hf->name_len, "x-airlock-error")))
                        r.gate_reason = fields[i].value;
        }
        r.n_headers = h->n_fields;
        evbuffer_add(f->resp, "", 1);
        r.body_len = evbuffer_get_length(f->resp) - 1;
        r.body = (const char *)evbuffer_pullup(f->resp, -1);

        netgate_fetch_cb cb = f->cb;
        void *ud = f->ud;
        struct evbuffer *resp = TAKE_PTR(f->resp);
        struct netgate_http_parser *p = TAKE_PTR(f->p);
        fetch_free(f);
        cb(ud, 0, &r);

        for (size_t i = 0; i < r.n_headers; i++) {
                free((char *)fields[i].name);
                free((char *)fields[i].value);
        }
        free(fields);
        explicit_bzero(evbuffer_pullup(resp, -1), evbuffer_get_length(resp));
        evbuffer_free(resp);
        free(p);
}

/* ---- reading the answer ---- */

/* 1: the answer is complete; 0: more is needed; <0: failed. */
static int read_answer(struct netgate_fetch *f, struct evbuffer *in)
{
        for (;;) {
                struct evbuffer_iovec v;
                if (evbuffer_peek(in, -1, NULL, &v, 1) < 1)
                        v.iov_len = 0;
                if (!f->head_done) {
                        if (v.iov_len == 0)
                                return 0;
                        size_t used = 0;
                        int r = netgate_http_parser_feed(f->p, v.iov_base, v.iov_len, &used);
                        evbuffer_drain(in, used);
                        if (r < 0)
                                return -EBADMSG;
                        if (r == 0)
                                continue;
                        if (f->p->head.status < 200) {
                                netgate_http_parser_init(f->p, NETGATE_HTTP_RESPONSE);
                                continue;
                        }
                        f->head_done = true;
                        netgate_http_body_init(&f->body, f->p->head.framing, f->p->head.length);
                        if (f->p->head.framing == NETGATE_HTTP_BODY_NONE)
                                return 1;
                        continue;
                }
                size_t used = 0, off = 0, run = 0;
                int r = netgate_http_body_feed(&f->body, v.iov_base, v.iov_len, v.iov_len, &used,
                                               &off, &run);
                if (r < 0)
                        return -EBADMSG;
                if (run) {
                        if (evbuffer_get_length(f->resp) + run > f->max)
                                return -EFBIG;
                        evbuffer_add(f->resp, (const char *)v.iov_base + off, run);
                }
                evbuffer_drain(in, used);
                if (r == 1)
                        return 1;
                if (used == 0)
                        return 0;
        }
}

static void read_cb(struct bufferevent *bev, void *ud)
{
        struct netgate_fetch *f = ud;
        int r = read_answer(f, bufferevent_get_input(bev));
        if (r < 0)
                fail(f, r);
        else if (r > 0)
                complete(f);
}

static void event_cb(struct bufferevent *bev, short what, void *ud)
{
        struct netgate_fetch *f = ud;
        if ((what & BEV_EVENT_EOF) && f->head_done && f->body.framing == NETGATE_HTTP_BODY_CLOSE &&
            evbuffer_get_length(bufferevent_get_input(bev)) == 0) {
                complete(f);
                return;
        }
        fail(f, -ECONNRESET);
}

static void timer_cb(evutil_socket_t fd, short what, void *ud)
{
        fail(ud, -ETIMEDOUT);
}

/* ---- starting ---- */

static void write_request(struct evbuffer *out, const struct netgate_fetch_request *req)
{
        evbuffer_add_printf(out, "%s /%s%s HTTP/1.1\r\nHost: airlock\r\n", req->method, req->route,
                            req->path ? req->path : "");
        for (size_t i = 0; i < req->n_headers; i++)
                evbuffer_add_printf(out, "%s: %s\r\n", req->headers[i].name, req->headers[i].value);
        if (req->body)
                evbuffer_add_printf(out, "Content-Length: %zu\r\n", req->body_len);
        evbuffer_add(out, "Connection: close\r\n\r\n", 21);
        if (req->body)
                evbuffer_add(out, req->body, req->body_len);
}

int netgate_route_fetch(struct netgate *g, const struct netgate_fetch_request *req,
                        netgate_fetch_cb cb, void *ud, struct netgate_fetch **ret,
                        struct al_error *err)
{
        int sv[2];
        struct timeval tv;
        if (!g->routes)
                return al_error_set(err, -ENOENT, "fetch through route %s: the gate has no routes",
                                    req->route ? req->route : "?");
        int r = check_request(req, err);
        if (r < 0)
                return r;
        if (socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC | SOCK_NONBLOCK, 0, sv) < 0)
                return al_error_set(err, -errno, "fetch through route %s: socketpair", req->route);
        struct netgate_fetch *f = xcalloc(1, sizeof(*f));
        f->g = g;
        f->cb = cb;
        f->ud = ud;
        f->max = req->response_max;
        f->bev =
            bufferevent_socket_new(g->base, sv[1], BEV_OPT_CLOSE_ON_FREE | BEV_OPT_DEFER_CALLBACKS);
        f->timer = evtimer_new(g->base, timer_cb, f);
        f->resp = evbuffer_new();
        if (!f->bev || !f->timer || !f->resp) {
                if (!f->bev)
                        close(sv[1]);
                close(sv[0]);
                fetch_free(f);
                return al_error_set(err, -ENOMEM, "fetch through route %s", req->route);
        }
        f->p = xcalloc(1, sizeof(*f->p));
        netgate_http_parser_init(f->p, NETGATE_HTTP_RESPONSE);
        f->p->head_request = STREQ(req->method, "HEAD");
        f->next = g->fetches;
        if (g->fetches)
                g->fetches->prev = f;
        g->fetches = f;

        write_request(bufferevent_get_output(f->bev), req);
        bufferevent_setcb(f->bev, read_cb, NULL, event_cb, f);
        bufferevent_enable(f->bev, EV_READ | EV_WRITE);
        tv.tv_sec = req->timeout_ms / 1000;
        tv.tv_usec = (req->timeout_ms % 1000) * 1000;
        evtimer_add(f->timer, &tv);
        /* Served as a sandbox's request is, from here on. */
        netgate_routes_accept(g->routes, sv[0], req->tool);
        *ret = f;
        return 0;
}
