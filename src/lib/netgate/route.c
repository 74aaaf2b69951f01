/* SPDX-License-Identifier: Apache-2.0 */
#include <errno.h>
#include <string.h>
#include <unistd.h>

#include <event2/buffer.h>
#include <event2/bufferevent.h>
#include <event2/bufferevent_ssl.h>
#include <event2/event.h>
#include <event2/util.h>

#include "netgate/exchange.h"
#include "netgate/netgate-internal.h"
#include "netgate/route.h"
#include "netgate/upstream.h"
#include "policy.h"
#include "secrets.h"
#include "util.h"

/* The routes' front-end, above the upstream engine and the exchange: reads
 * an origin-form request, finds its route, checks the path and the
 * budget, builds the upstream head (route-def.c), has the engine reach the
 * route's upstream (TLS when https) and relays the exchange. */

#define RECORDED_MAX   16
#define RECORDED_VALUE 512
#define PATH_SHOWN     1024

enum rstate {
        R_HEAD,
        R_RESOLVING,
        R_CONNECTING,
        R_EXCHANGE,
        R_CLOSING,
};

struct rconn;

struct rconn {
        struct netgate_routes *rs;
        struct rconn *prev, *next;
        enum rstate state;
        struct bufferevent *client, *up;

        /* The call being served. */
        const struct netgate_route *rt;
        char method[NETGATE_HTTP_METHOD_MAX + 1];
        char name[80];         /* the route name as asked for, escaped */
        char path[PATH_SHOWN]; /* below the route, escaped */
        const char *rule;
        bool in_flight;
        uint64_t t0;
        struct netgate_addr addr;
        bool have_addr;
        struct netgate_header recorded[RECORDED_MAX];
        char recorded_value[RECORDED_MAX][RECORDED_VALUE];
        size_t n_recorded;

        struct netgate_upstream u;

        struct evbuffer *head_out; /* the upstream request head, built before connecting */
        struct netgate_exchange x;

        /* The upstream connection, kept between calls to the same route. */
        const struct netgate_route *up_rt;
        struct netgate_addr up_addr;
        bool up_idle, up_reused;

        struct netgate_linger linger;
};

struct netgate_routes {
        struct netgate *g;
        struct event_base *base;
        struct netgate_route **routes;
        size_t n_routes;
        const struct secrets *secrets;
        struct secrets *own_secrets;
        char *run_id, *run_attempt, *sandbox_id, *account;
        struct secrets_vars vars;
        struct rconn *conns;
};

static void conn_free(struct rconn *c, const char *end_reason);
static void read_head(struct rconn *c);
static void pump(struct rconn *c);

/* Bytes from the sandbox or the upstream as printable ASCII for a record:
 * others as \xNN, truncated to fit. */
static void show(const char *raw, size_t len, char *buf, size_t size)
{
        static const char hex[] = "0123456789abcdef";
        size_t o = 0;
        for (size_t i = 0; i < len; i++) {
                unsigned char ch = (unsigned char)raw[i];
                bool plain = ch >= 0x20 && ch < 0x7f;
                if (o + (plain ? 1 : 4) + 1 > size)
                        break;
                if (plain)
                        buf[o++] = (char)ch;
                else {
                        buf[o++] = '\\';
                        buf[o++] = 'x';
                        buf[o++] = hex[ch >> 4];
                        buf[o++] = hex[ch & 15];
                }
        }
        buf[o] = '\0';
}

static char *strdup_or_null(const char *s)
{
        return s ? xstrdup(s) : NULL;
}

/* ---- records ---- */

static void emit(struct rconn *c, bool allow, const char *reason)
{
        char addr[NETGATE_ADDR_STRLEN] = "";
        if (c->have_addr)
                netgate_addr_format(&c->addr, addr);
        uint64_t now = now_monotonic_us();
        struct netgate_record r = {
            .protocol = "route",
            .method = c->method[0] ? c->method : NULL,
            .host = c->rt ? c->rt->host.name : NULL,
            .port = c->rt ? c->rt->port : 0,
            .address = addr,
            .decision = allow ? "allow" : "deny",
            .reason = reason,
            .rule = c->rule,
            .status = c->x.status,
            .bytes_up = c->x.bytes_up,
            .bytes_down = c->x.bytes_down,
            .duration_ms = c->t0 && now > c->t0 ? (now - c->t0) / 1000 : 0,
            .route = c->name[0] ? c->name : NULL,
            .path = c->path[0] ? c->path : NULL,
            .upstream = c->rt ? c->rt->upstream : NULL,
            .recorded = c->recorded,
            .n_recorded = c->n_recorded,
        };
        netgate_emit(c->rs->g, &r);
}

static void finish_in_flight(struct rconn *c, const char *end_reason)
{
        if (!c->in_flight)
                return;
        c->in_flight = false;
        emit(c, true, end_reason);
}

/* ---- closing ---- */

static void drop_upstream(struct rconn *c)
{
        netgate_upstream_stop(&c->u);
        if (c->up) {
                netgate_bev_free(c->up);
                c->up = NULL;
        }
        c->up_rt = NULL;
        c->up_idle = false;
        c->up_reused = false;
}

static void conn_free(struct rconn *c, const char *end_reason)
{
        struct netgate_routes *rs = c->rs;
        finish_in_flight(c, end_reason);
        drop_upstream(c);
        if (c->client) {
                /* It may be in the gate's rate group, freed before the loop
                 * would finalize this bufferevent. */
                bufferevent_remove_from_rate_limit_group(c->client);
                netgate_bev_free(c->client);
        }
        if (c->head_out) {
                netgate_route_wipe(c->head_out);
                evbuffer_free(c->head_out);
        }
        netgate_exchange_release(&c->x);
        free(c->x.reqp);
        free(c->x.respp);
        if (c->prev)
                c->prev->next = c->next;
        else
                rs->conns = c->next;
        if (c->next)
                c->next->prev = c->prev;
        explicit_bzero(c, sizeof(*c));
        free(c);
        netgate_conn_count(rs->g, -1);
}

/* Answer, then close without resetting (netgate_linger_start()). */
static void close_after_flush(struct rconn *c)
{
        drop_upstream(c);
        c->state = R_CLOSING;
        if (netgate_linger_start(&c->linger, c->client, c->x.client_eof))
                conn_free(c, NULL);
}

/* ---- answers the gate writes ---- */

/* `line` never holds a header value: nothing injected reaches the sandbox. */
static void answer(struct rconn *c, int status, const char *phrase, const char *header,
                   const char *reason, const char *line)
{
        netgate_exchange_answer(&c->x, c->client, status, phrase, header, reason, line);
}

static void refuse(struct rconn *c, int status, const char *phrase, const char *reason,
                   const char *line)
{
        c->in_flight = false;
        c->x.status = status;
        emit(c, false, reason);
        answer(c, status, phrase, "X-Airlock-Denied", reason, line);
        close_after_flush(c);
}

static void fail_upstream(struct rconn *c, const char *reason, const char *detail)
{
        char line[512];
        c->x.status = 502;
        finish_in_flight(c, reason);
        snprintf(line, sizeof(line), "airlock: route %s: %s: %s\n", c->rt->name, c->rt->upstream,
                 detail);
        answer(c, 502, "Bad Gateway", "X-Airlock-Error", reason, line);
        close_after_flush(c);
}

static void fail_errno(struct rconn *c, const char *reason, int err)
{
        fail_upstream(c, reason, err ? strerror(err) : reason);
}

/* ---- the request ---- */

static void begin(struct rconn *c)
{
        c->t0 = now_monotonic_us();
        c->x.bytes_up = c->x.bytes_down = 0;
        c->x.status = 0;
        c->have_addr = false;
        c->rule = NULL;
        c->in_flight = false;
        c->n_recorded = 0;
        c->rt = NULL;
        c->method[0] = c->name[0] = c->path[0] = '\0';
}

static void bad_request(struct rconn *c, int r)
{
        const char *reason, *phrase;
        int status;
        netgate_http_refusal(r, &status, &phrase, &reason);
        begin(c);
        char line[256];
        snprintf(line, sizeof(line), "airlock: request refused (%s)%s\n", reason,
                 status == 400 ? ": routes take origin-form requests, "
                                 "http://127.0.0.1:8080/ROUTE/PATH"
                               : "");
        refuse(c, status, phrase, reason, line);
}

static const struct netgate_route *find_route(const struct netgate_routes *rs, const char *name,
                                              size_t len)
{
        for (size_t i = 0; i < rs->n_routes; i++)
                if (strlen(rs->routes[i]->name) == len &&
                    memcmp(rs->routes[i]->name, name, len) == 0)
                        return rs->routes[i];
        return NULL;
}

static void start_exchange(struct rconn *c);

static void handle_request(struct rconn *c)
{
        struct netgate_routes *rs = c->rs;
        const struct netgate_http_head *h = &c->x.reqp->head;
        char line[512];

        begin(c);
        memcpy(c->method, h->method, h->method_len);
        c->method[h->method_len] = '\0';
        /* The target is "/<route>" followed by "", "/..." or "?...". */
        const char *name = h->path + 1, *end = h->path + h->path_len;
        const char *rest = name;
        while (rest < end && *rest != '/' && *rest != '?')
                rest++;
        size_t rest_len = (size_t)(end - rest);
        netgate_escape(name, (size_t)(rest - name), c->name, sizeof(c->name));
        if (rest_len == 0)
                snprintf(c->path, sizeof(c->path), "/");
        else
                show(rest, rest_len, c->path, sizeof(c->path));

        c->rt = find_route(rs, name, (size_t)(rest - name));
        if (!c->rt) {
                snprintf(line, sizeof(line), "airlock: no route \"%s\"\n", c->name);
                refuse(c, 404, "Not Found", "unknown_route", line);
                return;
        }
        const char *problem = netgate_route_path_problem(rest, rest_len);
        if (problem) {
                snprintf(line, sizeof(line),
                         "airlock: route %s: the path holds %s; \".\" and \"..\" segments, "
                         "encoded separators, backslashes and double encoding are refused so "
                         "that the upstream cannot resolve the path outside the route\n",
                         c->rt->name, problem);
                refuse(c, 400, "Bad Request", "bad_path", line);
                return;
        }
        const char *spent = netgate_budget_take(rs->g);
        if (spent) {
                c->rule = STREQ(spent, "budget_requests")   ? "network.budget.requests"
                          : STREQ(spent, "budget_refusals") ? "network.budget.refusals"
                                                            : "network.budget.bytes";
                snprintf(line, sizeof(line), "airlock: route %s: %s\n", c->rt->name, spent);
                refuse(c, 429, "Too Many Requests", spent, line);
                return;
        }
        c->x.close_after = h->conn_close || c->x.client_eof;
        /* Values the route injects are scrubbed from the answer's body, as
         * from its head: an upstream that echoes its request (a debug or
         * error page) must not hand them to the sandbox. */
        c->x.scrub = secrets_redactor(rs->secrets);
        c->x.refuse_encoded = c->rt->n_inject > 0;

        if (!c->head_out)
                c->head_out = evbuffer_new();
        else
                netgate_route_wipe(c->head_out);
        const char *field = NULL;
        int r = c->head_out ? netgate_route_write_head(c->rt, h, rest, rest_len, c->x.close_after,
                                                       rs->secrets, &rs->vars, c->head_out, &field)
                            : -ENOMEM;
        if (r < 0) {
                bool bad = r == -EBADMSG;
                snprintf(line, sizeof(line),
                         bad ? "airlock: route %s: header %s: the value holds control characters\n"
                             : "airlock: route %s: header %s: the value could not be expanded\n",
                         c->rt->name, field ? field : "?");
                c->in_flight = false;
                c->x.status = bad ? 400 : 500;
                emit(c, false, bad ? "bad_inject_value" : "inject_failed");
                answer(c, c->x.status, bad ? "Bad Request" : "Internal Server Error",
                       "X-Airlock-Error", bad ? "bad_inject_value" : "inject_failed", line);
                close_after_flush(c);
                return;
        }
        c->in_flight = true;

        if (c->up && c->up_idle && c->up_rt == c->rt) {
                struct timeval tv;
                c->addr = c->up_addr;
                c->have_addr = true;
                c->up_reused = true;
                c->up_idle = false;
                bufferevent_set_timeouts(c->up, netgate_secs(&tv, NETGATE_IO_TIMEOUT_S),
                                         netgate_secs(&tv, NETGATE_IO_TIMEOUT_S));
                start_exchange(c);
                return;
        }
        drop_upstream(c);
        c->state = R_RESOLVING;
        bufferevent_enable(c->client, EV_READ);
        netgate_upstream_open(&c->u, &c->rt->host, c->rt->port, c->rt->tls_layer);
}

static void read_head(struct rconn *c)
{
        int r = netgate_read_head(c->x.reqp, bufferevent_get_input(c->client));
        if (r < 0)
                bad_request(c, r);
        else if (r > 0)
                handle_request(c);
}

/* ---- the exchange ---- */

/* The upstream's answer passes as it is, except that a known secret value in
 * its head is masked: an upstream echoing the injected key in a field must
 * not hand it to the sandbox. */
static char *mask(void *ud, const char *value, size_t len, size_t *ret_len)
{
        struct rconn *c = ud;
        const struct redactor *red = secrets_redactor(c->rs->secrets);
        char *v = NULL;
        if (red && redactor_audit_hook((void *)red, value, len, &v, ret_len) >= 0)
                return v;
        return NULL;
}

/* Keep the fields the route's "record" names for the call's record. */
static void record_field(void *ud, const struct netgate_http_field *f, const char *val, size_t len)
{
        struct rconn *c = ud;
        for (size_t k = 0; k < c->rt->n_record && c->n_recorded < RECORDED_MAX; k++) {
                const char *want = c->rt->record[k];
                bool dup = false;
                if (!netgate_http_name_eq(f->name, f->name_len, want))
                        continue;
                for (size_t j = 0; j < c->n_recorded; j++)
                        dup = dup || STREQ(c->recorded[j].name, want);
                if (dup)
                        continue;
                show(val, len, c->recorded_value[c->n_recorded], RECORDED_VALUE);
                c->recorded[c->n_recorded].name = want;
                c->recorded[c->n_recorded].value = c->recorded_value[c->n_recorded];
                c->n_recorded++;
        }
}

static void start_exchange(struct rconn *c)
{
        struct evbuffer *uout = bufferevent_get_output(c->up);
        c->state = R_EXCHANGE;
        /* A copy: a retry on a fresh connection sends the head again. */
        size_t n = evbuffer_get_length(c->head_out);
        evbuffer_add(uout, evbuffer_pullup(c->head_out, -1), n);
        netgate_exchange_account(&c->x, true, n);
        netgate_exchange_start(&c->x, c->client, c->up);
}

static void exchange_done(void *ud)
{
        struct rconn *c = ud;
        struct timeval tv;
        const struct netgate_http_head *req = &c->x.reqp->head;
        finish_in_flight(c, NULL);
        if (c->up && netgate_exchange_keep_upstream(&c->x, c->up)) {
                c->up_idle = true;
                c->up_reused = false;
        } else
                drop_upstream(c);
        if (c->x.close_after || !c->x.req_done || req->minor == 0) {
                close_after_flush(c);
                return;
        }
        c->state = R_HEAD;
        netgate_http_parser_init(c->x.reqp, NETGATE_HTTP_REQUEST);
        c->x.reqp->origin_form = true;
        bufferevent_set_timeouts(c->client, netgate_secs(&tv, NETGATE_HEAD_TIMEOUT_S), NULL);
        bufferevent_enable(c->client, EV_READ);
        read_head(c);
}

/* A reused keep-alive upstream that closed before answering a body-less
 * request is retried once on a fresh connection to the same address. */
static void exchange_upstream_failed(void *ud)
{
        struct rconn *c = ud;
        if (netgate_exchange_retryable(&c->x, c->up_reused)) {
                drop_upstream(c);
                c->state = R_CONNECTING;
                c->u.addr = c->addr;
                c->u.host = &c->rt->host;
                c->u.port = c->rt->port;
                c->u.tls = c->rt->tls_layer;
                netgate_upstream_reopen(&c->u);
                return;
        }
        if (!c->x.resp_sent) {
                fail_errno(c, "upstream_failed", c->x.last_errno ? c->x.last_errno : ECONNRESET);
                return;
        }
        conn_free(c, "upstream_failed");
}

static void exchange_end(void *ud, const char *reason)
{
        conn_free(ud, reason);
}

static void exchange_refused(void *ud, const char *reason, const char *detail)
{
        fail_upstream(ud, reason, detail);
}

static const struct netgate_exchange_ops route_ops = {
    .mask = mask,
    .field = record_field,
    .done = exchange_done,
    .upstream_failed = exchange_upstream_failed,
    .end = exchange_end,
    .refused = exchange_refused,
};

static void pump(struct rconn *c)
{
        netgate_exchange_pump(&c->x, c->client, c->up);
}

/* ---- the upstream ---- */

static void up_read_cb(struct bufferevent *bev, void *ud);
static void up_write_cb(struct bufferevent *bev, void *ud);
static void up_event_cb(struct bufferevent *bev, short what, void *ud);

static void upstream_connected(void *ud, struct bufferevent *up)
{
        struct rconn *c = ud;
        c->addr = c->u.addr;
        c->have_addr = true;
        c->x.last_errno = 0;
        c->up = up;
        c->up_rt = c->rt;
        c->up_addr = c->addr;
        c->up_reused = false;
        bufferevent_setcb(up, up_read_cb, up_write_cb, up_event_cb, c);
        start_exchange(c);
}

/* Every answer is checked; one private answer refuses the upstream. */
static void upstream_refused(void *ud, const char *range)
{
        struct rconn *c = ud;
        char line[1024], addr[NETGATE_ADDR_STRLEN];
        c->addr = c->u.addr;
        c->have_addr = true;
        c->rule = range;
        netgate_addr_format(&c->addr, addr);
        snprintf(line, sizeof(line),
                 "airlock: route %s: %s is at %s (%s), not in "
                 "network.allowPrivate: allow it with --allow-private %s "
                 "(or \"allowPrivate\": [\"%s\"] in the policy)\n",
                 c->rt->name, c->rt->host.name, addr, range, addr, addr);
        refuse(c, 403, "Forbidden", "private_address", line);
}

static void upstream_failed(void *ud, const char *reason, int err, const char *detail)
{
        struct rconn *c = ud;
        c->addr = c->u.addr;
        c->have_addr = c->u.have_addr;
        c->x.last_errno = err;
        if (detail)
                fail_upstream(c, reason, detail);
        else if (STREQ(reason, "dns_failed") && !err)
                fail_upstream(c, reason, "the name does not resolve");
        else
                fail_errno(c, reason, err);
}

static const struct netgate_upstream_ops upstream_ops = {
    .connected = upstream_connected,
    .refused = upstream_refused,
    .failed = upstream_failed,
};

/* ---- callbacks ---- */

static void up_event_cb(struct bufferevent *bev, short what, void *ud)
{
        struct rconn *c = ud;
        int err = EVUTIL_SOCKET_ERROR();

        if (c->state == R_HEAD || c->state == R_CLOSING) {
                drop_upstream(c);
                return;
        }
        if (c->state == R_EXCHANGE) {
                c->x.up_eof = true;
                if (!(what & BEV_EVENT_EOF)) {
                        c->x.last_errno =
                            (what & BEV_EVENT_TIMEOUT) ? ETIMEDOUT : (err ? err : EIO);
                        while (bufferevent_get_openssl_error(c->up))
                                ;
                }
                pump(c);
        }
}

static void up_read_cb(struct bufferevent *bev, void *ud)
{
        struct rconn *c = ud;
        if (c->state == R_EXCHANGE)
                pump(c);
        else if (c->state == R_HEAD || c->state == R_CLOSING)
                drop_upstream(c);
}

static void up_write_cb(struct bufferevent *bev, void *ud)
{
        struct rconn *c = ud;
        if (c->state == R_EXCHANGE)
                pump(c);
}

static void client_read_cb(struct bufferevent *bev, void *ud)
{
        struct rconn *c = ud;
        switch (c->state) {
        case R_HEAD:
                read_head(c);
                break;
        case R_EXCHANGE:
                pump(c);
                break;
        case R_CLOSING:
                if (netgate_linger_read(&c->linger, c->client))
                        conn_free(c, NULL);
                break;
        default:
                break;
        }
}

static void client_write_cb(struct bufferevent *bev, void *ud)
{
        struct rconn *c = ud;
        if (c->state == R_EXCHANGE)
                pump(c);
        else if (c->state == R_CLOSING)
                if (netgate_linger_write(&c->linger, c->client, c->x.client_eof))
                        conn_free(c, NULL);
}

static void client_event_cb(struct bufferevent *bev, short what, void *ud)
{
        struct rconn *c = ud;
        if (!(what & BEV_EVENT_EOF)) {
                conn_free(c, (what & BEV_EVENT_TIMEOUT) ? "timeout" : "client_closed");
                return;
        }
        c->x.client_eof = true;
        switch (c->state) {
        case R_EXCHANGE:
                c->x.close_after = true;
                pump(c);
                break;
        case R_CLOSING:
                if (netgate_linger_eof(&c->linger, c->client))
                        conn_free(c, NULL);
                break;
        case R_RESOLVING:
        case R_CONNECTING:
                /* A half-closed client still gets its answer. */
                c->x.close_after = true;
                break;
        default:
                conn_free(c, "client_closed");
                break;
        }
}

/* ---- the engine ---- */

void netgate_routes_accept(struct netgate_routes *rs, int fd)
{
        struct timeval tv;
        struct bufferevent *bev =
            bufferevent_socket_new(rs->base, fd, BEV_OPT_CLOSE_ON_FREE | BEV_OPT_DEFER_CALLBACKS);
        if (!bev) {
                close(fd);
                return;
        }
        netgate_set_nodelay(fd);
        struct rconn *c = xcalloc(1, sizeof(*c));
        c->rs = rs;
        c->x.g = rs->g;
        c->x.ops = &route_ops;
        c->x.ud = c;
        c->client = bev;
        netgate_upstream_init(&c->u, rs->g, &upstream_ops, c);
        c->state = R_HEAD;
        c->x.reqp = xcalloc(1, sizeof(*c->x.reqp));
        netgate_http_parser_init(c->x.reqp, NETGATE_HTTP_REQUEST);
        c->x.reqp->origin_form = true;
        c->next = rs->conns;
        if (rs->conns)
                rs->conns->prev = c;
        rs->conns = c;
        netgate_conn_count(rs->g, +1);

        netgate_setup_bufferevent(rs->g, bev);
        bufferevent_setcb(bev, client_read_cb, client_write_cb, client_event_cb, c);
        bufferevent_set_timeouts(bev, netgate_secs(&tv, NETGATE_HEAD_TIMEOUT_S), NULL);
        bufferevent_enable(bev, EV_READ | EV_WRITE);
}

int netgate_routes_new(struct netgate *g, struct event_base *base,
                       const struct policy_route *routes, size_t n, const struct secrets *s,
                       const struct secrets_vars *vars, struct netgate_routes **ret,
                       struct al_error *err)
{
        struct netgate_routes *rs = xcalloc(1, sizeof(*rs));
        rs->g = g;
        rs->base = base;
        rs->routes = xcalloc(n + 1, sizeof(*rs->routes));
        for (size_t i = 0; i < n; i++) {
                int r = netgate_route_new(&routes[i], &rs->routes[i], err);
                if (r < 0) {
                        netgate_routes_free(rs);
                        return r;
                }
                rs->n_routes++;
        }
        if (!s)
                s = rs->own_secrets = secrets_new();
        rs->secrets = s;
        if (vars) {
                rs->run_id = strdup_or_null(vars->run_id);
                rs->run_attempt = strdup_or_null(vars->run_attempt);
                rs->sandbox_id = strdup_or_null(vars->sandbox_id);
                rs->account = strdup_or_null(vars->account);
        }
        rs->vars = (struct secrets_vars){
            .run_id = rs->run_id,
            .run_attempt = rs->run_attempt,
            .sandbox_id = rs->sandbox_id,
            .account = rs->account,
        };
        *ret = rs;
        return 0;
}

struct netgate_routes *netgate_routes_free(struct netgate_routes *rs)
{
        if (!rs)
                return NULL;
        while (rs->conns)
                conn_free(rs->conns, "shutdown");
        for (size_t i = 0; i < rs->n_routes; i++)
                netgate_route_free(rs->routes[i]);
        free(rs->routes);
        secrets_free(rs->own_secrets);
        free(rs->run_id);
        free(rs->run_attempt);
        free(rs->sandbox_id);
        free(rs->account);
        free(rs);
        return NULL;
}
