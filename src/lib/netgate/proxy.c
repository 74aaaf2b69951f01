/* SPDX-License-Identifier: Apache-2.0 */
#include <errno.h>
#include <inttypes.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include <event2/buffer.h>
#include <event2/bufferevent.h>
#include <event2/event.h>
#include <event2/util.h>

#include "netgate/addr.h"
#include "netgate/exchange.h"
#include "netgate/http.h"
#include "netgate/netgate-internal.h"
#include "netgate/rules.h"
#include "netgate/socks5.h"
#include "netgate/tunnel.h"
#include "netgate/upstream.h"
#include "util.h"

/* The proxy's front-ends, above the upstream engine: the HTTP forward proxy
 * (absolute-URI requests, kept upstream connections), CONNECT and SOCKS5
 * CONNECT tunnels. Each request is decided against the rules and the
 * budgets here; the engine resolves, checks and connects; exchange.c
 * relays HTTP and tunnel.c relays tunnels. */

#define SOCKS_TIMEOUT_S 30

enum conn_state {
        C_HTTP_HEAD,
        C_SOCKS_HANDSHAKE,
        C_RESOLVING,
        C_CONNECTING,
        C_HTTP_EXCHANGE,
        C_TUNNEL,
        C_CLOSING,
};

struct netgate_conn {
        struct netgate *g;
        struct netgate_conn *prev, *next;
        enum netgate_proto proto;
        enum conn_state state;
        struct bufferevent *client, *up;

        /* The request being decided or served. */
        const char *protocol;
        char method[NETGATE_HTTP_METHOD_MAX + 1];
        struct netgate_decision d;
        const char *rule;
        uint16_t port;
        struct netgate_addr addr;
        bool have_addr;
        bool in_flight; /* allowed and not yet recorded */
        uint64_t t0;

        struct netgate_upstream u;

        /* HTTP; status, byte counts and client_eof serve every protocol */
        struct netgate_exchange x;
        bool up_idle, up_reused;
        char up_host[NETGATE_HOST_MAX + 1];
        struct netgate_addr up_addr; /* what the kept upstream is connected to */
        uint16_t up_port;

        struct netgate_tunnel t;
        struct netgate_linger linger;

        struct netgate_socks5 *socks;
};

static void conn_free(struct netgate_conn *c, const char *end_reason);
static void http_read_head(struct netgate_conn *c);
static void http_pump(struct netgate_conn *c);
static void socks_read(struct netgate_conn *c);

static const char *host_name(const struct netgate_conn *c)
{
        return c->d.host.name;
}

static void record(struct netgate_conn *c, bool allow, const char *reason, const char *rule)
{
        struct netgate *g = c->g;
        char addr[NETGATE_ADDR_STRLEN] = "";
        if (c->have_addr)
                netgate_addr_format(&c->addr, addr);
        uint64_t now = now_monotonic_us();
        struct netgate_record r = {
            .sandbox = g->sandbox,
            .protocol =
                c->protocol ? c->protocol : (c->proto == NETGATE_PROTO_SOCKS5 ? "socks5" : "http"),
            .method = c->method[0] ? c->method : NULL,
            .host = host_name(c),
            .port = c->port,
            .address = addr,
            .decision = allow ? "allow" : "deny",
            .reason = reason,
            .rule = rule,
            .status = c->x.status,
            .bytes_up = c->x.bytes_up,
            .bytes_down = c->x.bytes_down,
            .duration_ms = c->t0 && now > c->t0 ? (now - c->t0) / 1000 : 0,
        };
        netgate_emit(g, &r);
}

static void finish_in_flight(struct netgate_conn *c, const char *end_reason)
{
        if (!c->in_flight)
                return;
        c->in_flight = false;
        record(c, true, end_reason, c->rule);
}

/* ---- closing ---- */

static void drop_upstream(struct netgate_conn *c)
{
        netgate_upstream_stop(&c->u);
        if (c->up) {
                netgate_bev_free(c->up);
                c->up = NULL;
        }
        c->up_idle = false;
        c->up_reused = false;
        c->up_host[0] = '\0';
}

static void conn_free(struct netgate_conn *c, const char *end_reason)
{
        struct netgate *g = c->g;
        finish_in_flight(c, end_reason);
        if (c->client)
                netgate_bev_free(c->client);
        drop_upstream(c);
        netgate_tunnel_release(&c->t);
        free(c->x.reqp);
        free(c->x.respp);
        free(c->socks);
        if (c->prev)
                c->prev->next = c->next;
        else
                g->conns = c->next;
        if (c->next)
                c->next->prev = c->prev;
        free(c);
        netgate_conn_count(g, -1);
}

/* Answer, then close without resetting (netgate_linger_start()). */
static void close_after_flush(struct netgate_conn *c)
{
        drop_upstream(c);
        c->state = C_CLOSING;
        if (netgate_linger_start(&c->linger, c->client, c->x.client_eof))
                conn_free(c, NULL);
}

/* ---- refusals ---- */

static void socks_answer(struct netgate_conn *c, uint8_t rep)
{
        uint8_t msg[22];
        size_t n = netgate_socks5_reply(rep, NULL, 0, msg);
        c->x.status = rep;
        bufferevent_write(c->client, msg, n);
}

/* A policy refusal: 403 (429 for budgets) or SOCKS5 "not allowed". */
static void deny(struct netgate_conn *c, int status, const char *reason, const char *rule)
{
        char line[NETGATE_HOST_MAX * 2 + 512];
        c->in_flight = false;
        if (c->proto == NETGATE_PROTO_SOCKS5)
                c->x.status = NETGATE_SOCKS5_REP_NOT_ALLOWED;
        else
                c->x.status = status;
        record(c, false, reason, rule);
        if (c->proto == NETGATE_PROTO_SOCKS5)
                socks_answer(c, NETGATE_SOCKS5_REP_NOT_ALLOWED);
        else {
                if (c->have_addr) {
                        char addr[NETGATE_ADDR_STRLEN];
                        netgate_addr_format(&c->addr, addr);
                        snprintf(line, sizeof(line), "airlock: denied %s:%u at %s (%s), rule: %s\n",
                                 host_name(c), c->port, addr, reason, rule ? rule : "none");
                } else
                        snprintf(line, sizeof(line), "airlock: denied %s:%u (%s), rule: %s\n",
                                 host_name(c), c->port, reason, rule ? rule : "none");
                netgate_exchange_answer(&c->x, c->client, status,
                                        status == 429 ? "Too Many Requests" : "Forbidden",
                                        "X-Airlock-Denied", reason, line);
        }
        close_after_flush(c);
}

static uint8_t socks_code_for(int err)
{
        switch (err) {
        case ECONNREFUSED:
                return NETGATE_SOCKS5_REP_REFUSED;
        case ENETUNREACH:
                return NETGATE_SOCKS5_REP_NET_UNREACHABLE;
        case EHOSTUNREACH:
        case ETIMEDOUT:
        case EHOSTDOWN:
                return NETGATE_SOCKS5_REP_HOST_UNREACHABLE;
        default:
                return NETGATE_SOCKS5_REP_FAILURE;
        }
}

/* The policy allowed it, the network did not deliver: 502 or a SOCKS5
 * failure code. */
static void fail_upstream(struct netgate_conn *c, const char *reason, int err)
{
        char line[NETGATE_HOST_MAX + 256];
        c->x.status = c->proto == NETGATE_PROTO_SOCKS5
                          ? (STREQ(reason, "dns_failed") ? NETGATE_SOCKS5_REP_HOST_UNREACHABLE
                                                         : socks_code_for(err))
                          : 502;
        finish_in_flight(c, reason);
        if (c->proto == NETGATE_PROTO_SOCKS5)
                socks_answer(c, (uint8_t)c->x.status);
        else {
                snprintf(line, sizeof(line), "airlock: %s:%u: %s%s%s\n", host_name(c), c->port,
                         reason, err ? ": " : "", err ? strerror(err) : "");
                netgate_exchange_answer(&c->x, c->client, 502, "Bad Gateway", "X-Airlock-Error",
                                        reason, line);
        }
        close_after_flush(c);
}

/* ---- deciding ---- */

static bool check_budget(struct netgate_conn *c)
{
        const char *spent = netgate_budget_take(c->g);
        if (spent) {
                deny(c, 429, spent, netgate_budget_rule(spent));
                return false;
        }
        return true;
}

static void begin_request(struct netgate_conn *c, const char *protocol, const char *method)
{
        c->protocol = protocol;
        snprintf(c->method, sizeof(c->method), "%s", method ? method : "");
        c->t0 = now_monotonic_us();
        c->x.bytes_up = c->x.bytes_down = 0;
        c->x.status = 0;
        c->have_addr = false;
        c->rule = NULL;
        c->in_flight = false;
        memset(&c->d, 0, sizeof(c->d));
}

/* Decide (host, port); on refusal answer and return false. */
static bool decide(struct netgate_conn *c, const char *host, size_t host_len, uint16_t port)
{
        if (c->g->closed) {
                /* Past the refusal budget: no answer, no record. */
                c->g->stats.closed++;
                conn_free(c, NULL);
                return false;
        }
        c->port = port;
        netgate_rules_decide(c->g->rules, host, host_len, port, &c->d);
        c->rule = c->d.rule ? c->d.rule->text : NULL;
        if (!c->d.allow) {
                deny(c, 403, c->d.reason, c->rule);
                return false;
        }
        if (!check_budget(c))
                return false;
        c->in_flight = true;
        return true;
}

/* ---- the upstream ---- */

static void up_read_cb(struct bufferevent *bev, void *ud);
static void up_write_cb(struct bufferevent *bev, void *ud);
static void up_event_cb(struct bufferevent *bev, short what, void *ud);
static void start_exchange(struct netgate_conn *c);
static void tunnel_end(void *ud, const char *reason);

static void resolve(struct netgate_conn *c)
{
        c->state = C_RESOLVING;
        /* Reading on (bytes wait in the bounded input) notices a client
         * that leaves while the gate resolves and connects. */
        bufferevent_enable(c->client, EV_READ);
        netgate_upstream_open(&c->u, &c->d.host, c->port, NULL);
}

static void upstream_refused(void *ud, const char *range)
{
        struct netgate_conn *c = ud;
        c->addr = c->u.addr;
        c->have_addr = true;
        deny(c, 403, "private_address", range);
}

static void upstream_failed(void *ud, const char *reason, int err, const char *detail)
{
        struct netgate_conn *c = ud;
        c->addr = c->u.addr;
        c->have_addr = c->u.have_addr;
        c->x.last_errno = err;
        fail_upstream(c, reason, err);
}

static void start_tunnel(struct netgate_conn *c, const void *reply, size_t n)
{
        struct bufferevent *client = c->client, *up = c->up;
        c->state = C_TUNNEL;
        c->client = c->up = NULL;
        netgate_tunnel_start(&c->t, c->g, &c->x, tunnel_end, c, client, up, reply, n);
}

static void upstream_connected(void *ud, struct bufferevent *up)
{
        struct netgate_conn *c = ud;
        int fd = bufferevent_getfd(up);
        c->addr = c->u.addr;
        c->have_addr = true;
        c->x.last_errno = 0;
        c->up = up;
        bufferevent_setcb(up, up_read_cb, up_write_cb, up_event_cb, c);

        if (c->proto == NETGATE_PROTO_SOCKS5) {
                struct sockaddr_storage ss;
                socklen_t len = sizeof(ss);
                struct netgate_addr bnd = {0};
                uint16_t port = 0;
                if (getsockname(fd, (struct sockaddr *)&ss, &len) == 0 &&
                    netgate_addr_from_sockaddr((struct sockaddr *)&ss, len, &bnd) == 0)
                        port = ntohs(ss.ss_family == AF_INET
                                         ? ((struct sockaddr_in *)&ss)->sin_port
                                         : ((struct sockaddr_in6 *)&ss)->sin6_port);
                uint8_t msg[22];
                size_t n = netgate_socks5_reply(NETGATE_SOCKS5_REP_OK, bnd.family ? &bnd : NULL,
                                                port, msg);
                c->x.status = NETGATE_SOCKS5_REP_OK;
                start_tunnel(c, msg, n);
        } else if (c->x.reqp->head.is_connect) {
                static const char ok[] = "HTTP/1.1 200 Connection established\r\n\r\n";
                c->x.status = 200;
                start_tunnel(c, ok, sizeof(ok) - 1);
        } else {
                snprintf(c->up_host, sizeof(c->up_host), "%s", c->d.host.name);
                c->up_port = c->port;
                c->up_addr = c->addr;
                c->up_reused = false;
                start_exchange(c);
        }
}

static const struct netgate_upstream_ops upstream_ops = {
    .connected = upstream_connected,
    .refused = upstream_refused,
    .failed = upstream_failed,
};

static void tunnel_end(void *ud, const char *reason)
{
        conn_free(ud, reason);
}

static void up_event_cb(struct bufferevent *bev, short what, void *ud)
{
        struct netgate_conn *c = ud;
        int err = EVUTIL_SOCKET_ERROR();

        if (c->state == C_HTTP_HEAD || c->state == C_CLOSING) {
                /* An idle keep-alive upstream went away or timed out. */
                drop_upstream(c);
                return;
        }
        if (c->state == C_HTTP_EXCHANGE) {
                if (what & BEV_EVENT_EOF) {
                        c->x.up_eof = true;
                        http_pump(c);
                        return;
                }
                c->x.up_eof = true;
                c->x.last_errno = (what & BEV_EVENT_TIMEOUT) ? ETIMEDOUT : err;
                http_pump(c);
                return;
        }
}

static void up_read_cb(struct bufferevent *bev, void *ud)
{
        struct netgate_conn *c = ud;
        if (c->state == C_HTTP_EXCHANGE)
                http_pump(c);
        else if (c->state == C_HTTP_HEAD || c->state == C_CLOSING)
                drop_upstream(c); /* bytes from an idle upstream: not a response to anything */
}

static void up_write_cb(struct bufferevent *bev, void *ud)
{
        struct netgate_conn *c = ud;
        if (c->state == C_HTTP_EXCHANGE)
                http_pump(c);
}

/* ---- HTTP ---- */

static void http_bad_request(struct netgate_conn *c, int r)
{
        const char *reason, *phrase;
        int status;
        netgate_http_refusal(r, &status, &phrase, &reason);
        begin_request(c, "http", NULL);
        c->x.status = status;
        record(c, false, reason, NULL);
        char line[256];
        snprintf(line, sizeof(line), "airlock: request refused (%s)%s\n", reason,
                 r == -ENOTSUP ? ": use CONNECT for https, absolute http:// URIs otherwise" : "");
        netgate_exchange_answer(&c->x, c->client, status, phrase, "X-Airlock-Denied", reason, line);
        close_after_flush(c);
}

static void http_request(struct netgate_conn *c)
{
        struct netgate_http_head *h = &c->x.reqp->head;
        char method[NETGATE_HTTP_METHOD_MAX + 1];
        memcpy(method, h->method, h->method_len);
        method[h->method_len] = '\0';
        begin_request(c, h->is_connect ? "connect" : "http", method);
        if (!decide(c, h->host, h->host_len, h->port))
                return;
        c->x.close_after = h->conn_close || c->x.client_eof;

        if (!h->is_connect && c->up && c->up_idle && c->up_port == c->port &&
            STREQ(c->up_host, c->d.host.name)) {
                struct timeval tv;
                c->up_reused = true;
                c->up_idle = false;
                /* The request goes to the address the kept connection
                 * reaches, checked when it was opened: record that. */
                c->addr = c->up_addr;
                c->have_addr = true;
                bufferevent_set_timeouts(c->up, netgate_secs(&tv, NETGATE_IO_TIMEOUT_S),
                                         netgate_secs(&tv, NETGATE_IO_TIMEOUT_S));
                start_exchange(c);
                return;
        }
        drop_upstream(c);
        resolve(c);
}

static void http_read_head(struct netgate_conn *c)
{
        int r = netgate_read_head(c->x.reqp, bufferevent_get_input(c->client));
        if (r < 0)
                http_bad_request(c, r);
        else if (r > 0)
                http_request(c);
}

static void write_request_head(struct netgate_conn *c)
{
        const struct netgate_http_head *h = &c->x.reqp->head;
        struct evbuffer *out = bufferevent_get_output(c->up);
        size_t before = evbuffer_get_length(out);
        const char *slash = (h->path_len == 0 || h->path_needs_slash) ? "/" : "";

        evbuffer_add_printf(out, "%.*s %s%.*s HTTP/1.%d\r\n", (int)h->method_len, h->method, slash,
                            (int)h->path_len, h->path, h->minor);
        bool v6 = c->d.host.kind == NETGATE_HOST_IP && c->d.host.addr.family == AF_INET6;
        evbuffer_add_printf(out, "Host: %s%s%s", v6 ? "[" : "", c->d.host.name, v6 ? "]" : "");
        if (c->port != 80)
                evbuffer_add_printf(out, ":%u", c->port);
        evbuffer_add(out, "\r\n", 2);
        for (size_t i = 0; i < h->n_fields; i++) {
                const struct netgate_http_field *f = &h->fields[i];
                if (netgate_http_field_is_hop(h, f->name, f->name_len))
                        continue;
                evbuffer_add_printf(out, "%.*s: %.*s\r\n", (int)f->name_len, f->name,
                                    (int)f->value_len, f->value);
        }
        if (h->framing == NETGATE_HTTP_BODY_LENGTH)
                evbuffer_add_printf(out, "Content-Length: %" PRIu64 "\r\n", h->length);
        else if (h->framing == NETGATE_HTTP_BODY_CHUNKED)
                evbuffer_add(out, "Transfer-Encoding: chunked\r\n", 28);
        if (c->x.close_after && h->minor == 1)
                evbuffer_add(out, "Connection: close\r\n", 19);
        evbuffer_add(out, "\r\n", 2);
        netgate_exchange_account(&c->x, true, evbuffer_get_length(out) - before);
}

static void start_exchange(struct netgate_conn *c)
{
        c->state = C_HTTP_EXCHANGE;
        write_request_head(c);
        netgate_exchange_start(&c->x, c->client, c->up);
}

static void exchange_done(void *ud)
{
        struct netgate_conn *c = ud;
        struct timeval tv;
        finish_in_flight(c, NULL);
        if (c->up && netgate_exchange_keep_upstream(&c->x, c->up)) {
                c->up_idle = true;
                c->up_reused = false;
        } else
                drop_upstream(c);
        if (c->x.close_after || !c->x.req_done) {
                close_after_flush(c);
                return;
        }
        c->state = C_HTTP_HEAD;
        c->method[0] = '\0';
        netgate_http_parser_init(c->x.reqp, NETGATE_HTTP_REQUEST);
        bufferevent_set_timeouts(c->client, netgate_secs(&tv, NETGATE_HEAD_TIMEOUT_S), NULL);
        bufferevent_enable(c->client, EV_READ);
        http_read_head(c);
}

/* The upstream failed during an exchange. A reused keep-alive connection that
 * the server closed before answering a body-less request is retried once on
 * a fresh connection to the same checked address. */
static void exchange_upstream_failed(void *ud)
{
        struct netgate_conn *c = ud;
        if (netgate_exchange_retryable(&c->x, c->up_reused)) {
                drop_upstream(c);
                c->state = C_CONNECTING;
                c->u.addr = c->addr;
                c->u.port = c->port;
                netgate_upstream_reopen(&c->u);
                return;
        }
        if (!c->x.resp_sent) {
                fail_upstream(c, "upstream_failed", c->x.last_errno);
                return;
        }
        conn_free(c, "upstream_failed");
}

static void exchange_end(void *ud, const char *reason)
{
        conn_free(ud, reason);
}

static const struct netgate_exchange_ops http_ops = {
    .done = exchange_done,
    .upstream_failed = exchange_upstream_failed,
    .end = exchange_end,
};

static void http_pump(struct netgate_conn *c)
{
        netgate_exchange_pump(&c->x, c->client, c->up);
}

/* ---- SOCKS5 ---- */

static void socks_read(struct netgate_conn *c)
{
        struct evbuffer *in = bufferevent_get_input(c->client);
        while (c->state == C_SOCKS_HANDSHAKE) {
                struct evbuffer_iovec v;
                if (evbuffer_peek(in, -1, NULL, &v, 1) < 1 || v.iov_len == 0)
                        return;
                size_t used = 0;
                int r = netgate_socks5_feed(c->socks, v.iov_base, v.iov_len, &used);
                evbuffer_drain(in, used);
                if (r == NETGATE_SOCKS5_MORE)
                        continue;
                if (r == NETGATE_SOCKS5_GREETING) {
                        bufferevent_write(c->client, netgate_socks5_method_reply, 2);
                        continue;
                }
                if (r == NETGATE_SOCKS5_REQUEST) {
                        struct netgate_socks5 *s = c->socks;
                        begin_request(c, "socks5", NULL);
                        if (!decide(c, s->host, s->host_len, s->port))
                                return;
                        resolve(c);
                        return;
                }
                if (r == -EACCES) {
                        bufferevent_write(c->client, netgate_socks5_no_method_reply, 2);
                        close_after_flush(c);
                        return;
                }
                if (c->socks->reply == NETGATE_SOCKS5_REP_NONE) {
                        conn_free(c, NULL);
                        return;
                }
                begin_request(c, "socks5", NULL);
                c->port = c->socks->port;
                netgate_escape(c->socks->host, c->socks->host_len, c->d.host.name,
                               sizeof(c->d.host.name));
                c->x.status = c->socks->reply;
                record(c, false,
                       r == -EOPNOTSUPP     ? "command_not_supported"
                       : r == -EAFNOSUPPORT ? "address_type_not_supported"
                                            : "bad_request",
                       NULL);
                socks_answer(c, c->socks->reply);
                close_after_flush(c);
                return;
        }
}

/* ---- client side ---- */

static void client_read_cb(struct bufferevent *bev, void *ud)
{
        struct netgate_conn *c = ud;
        switch (c->state) {
        case C_HTTP_HEAD:
                http_read_head(c);
                break;
        case C_SOCKS_HANDSHAKE:
                socks_read(c);
                break;
        case C_HTTP_EXCHANGE:
                http_pump(c);
                break;
        case C_CLOSING:
                if (netgate_linger_read(&c->linger, c->client))
                        conn_free(c, NULL);
                break;
        default:
                break;
        }
}

static void client_write_cb(struct bufferevent *bev, void *ud)
{
        struct netgate_conn *c = ud;
        switch (c->state) {
        case C_HTTP_EXCHANGE:
                http_pump(c);
                break;
        case C_CLOSING:
                if (netgate_linger_write(&c->linger, c->client, c->x.client_eof))
                        conn_free(c, NULL);
                break;
        default:
                break;
        }
}

static void client_event_cb(struct bufferevent *bev, short what, void *ud)
{
        struct netgate_conn *c = ud;
        if (!(what & BEV_EVENT_EOF)) {
                conn_free(c, (what & BEV_EVENT_TIMEOUT) ? "timeout" : "client_closed");
                return;
        }
        c->x.client_eof = true;
        switch (c->state) {
        case C_HTTP_EXCHANGE:
                c->x.close_after = true;
                http_pump(c);
                break;
        case C_CLOSING:
                if (netgate_linger_eof(&c->linger, c->client))
                        conn_free(c, NULL);
                break;
        case C_RESOLVING:
        case C_CONNECTING:
                /* A half-closed HTTP client still gets its answer; a tunnel
                 * nobody will use is dropped. */
                if (c->proto == NETGATE_PROTO_HTTP && !c->x.reqp->head.is_connect) {
                        c->x.close_after = true;
                        break;
                }
                conn_free(c, "client_closed");
                break;
        default:
                conn_free(c, "client_closed");
                break;
        }
}

/* ---- accepting ---- */

void netgate_proxy_accept(struct netgate *g, enum netgate_proto proto, int fd)
{
        struct timeval tv;
        struct bufferevent *bev =
            bufferevent_socket_new(g->base, fd, BEV_OPT_CLOSE_ON_FREE | BEV_OPT_DEFER_CALLBACKS);
        if (!bev) {
                close(fd);
                return;
        }
        netgate_set_nodelay(fd);
        struct netgate_conn *c = xcalloc(1, sizeof(*c));
        c->g = g;
        c->proto = proto;
        c->client = bev;
        c->x.g = g;
        c->x.ops = &http_ops;
        c->x.ud = c;
        netgate_upstream_init(&c->u, g, &upstream_ops, c);
        netgate_tunnel_init(&c->t);
        c->next = g->conns;
        if (g->conns)
                g->conns->prev = c;
        g->conns = c;
        netgate_conn_count(g, +1);

        netgate_setup_bufferevent(g, bev);
        bufferevent_setcb(bev, client_read_cb, client_write_cb, client_event_cb, c);
        if (c->proto == NETGATE_PROTO_SOCKS5) {
                c->state = C_SOCKS_HANDSHAKE;
                c->socks = xcalloc(1, sizeof(*c->socks));
                netgate_socks5_init(c->socks);
                bufferevent_set_timeouts(bev, netgate_secs(&tv, SOCKS_TIMEOUT_S), NULL);
        } else {
                c->state = C_HTTP_HEAD;
                c->x.reqp = xcalloc(1, sizeof(*c->x.reqp));
                netgate_http_parser_init(c->x.reqp, NETGATE_HTTP_REQUEST);
                bufferevent_set_timeouts(bev, netgate_secs(&tv, NETGATE_HEAD_TIMEOUT_S), NULL);
        }
        bufferevent_enable(bev, EV_READ | EV_WRITE);
}

void netgate_proxy_close_all(struct netgate *g)
{
        while (g->conns)
                conn_free(g->conns, "shutdown");
}
