/* SPDX-License-Identifier: Apache-2.0 */
#include <errno.h>
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
#include "netgate/client.h"
#include "netgate/exchange.h"
#include "netgate/http.h"
#include "netgate/netgate-internal.h"
#include "netgate/rules.h"
#include "netgate/socks5.h"
#include "netgate/sni.h"
#include "netgate/tunnel.h"
#include "netgate/upstream.h"
#include "secrets.h"
#include "util.h"

/* The proxy's front-ends, above the upstream engine: the HTTP forward proxy
 * (absolute-URI requests, kept upstream connections), CONNECT and SOCKS5
 * CONNECT tunnels. Each request is decided against the rules and the
 * budgets here; the engine resolves, checks and connects; exchange.c
 * relays HTTP and tunnel.c relays tunnels. */

#define SOCKS_TIMEOUT_S 30

struct netgate_conn {
        struct netgate *g;
        struct netgate_conn *prev, *next;
        enum netgate_proto proto;
        struct netgate_client cl; /* the connection, its upstream and its exchange */

        /* The request being decided or served. */
        const char *protocol;
        char method[NETGATE_HTTP_METHOD_MAX + 1];
        struct netgate_decision d;
        const char *rule;
        /* The deciding rule's text, copied: the rules can be replaced while
         * the connection is open (netgate_set_rules). */
        char rule_text[NETGATE_HOST_MAX + 32];
        uint16_t port;
        bool in_flight; /* allowed and not yet recorded */
        uint64_t t0;

        struct netgate_tunnel t;
        struct netgate_socks5 *socks;

        /* Held for the operator (network.onUnlisted "ask"). */
        bool asking;
        uint64_t ask_token;
};

static void conn_free(struct netgate_conn *c, const char *end_reason);
static void http_read_head(struct netgate_conn *c);
static void socks_read(struct netgate_conn *c);

static const char *host_name(const struct netgate_conn *c)
{
        return c->d.host.name;
}

static void record_as(struct netgate_conn *c, bool allow, const char *reason, const char *rule,
                      bool ended)
{
        struct netgate *g = c->g;
        char addr[NETGATE_ADDR_STRLEN] = "";
        if (c->cl.have_addr)
                netgate_addr_format(&c->cl.addr, addr);
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
            .parent = allow && c->cl.have_addr ? netgate_upstream_parent(&c->cl.u) : NULL,
            .status = c->cl.x.status,
            .bytes_up = c->cl.x.bytes_up,
            .bytes_down = c->cl.x.bytes_down,
            .duration_ms = c->t0 && now > c->t0 ? (now - c->t0) / 1000 : 0,
            .ended = ended,
        };
        netgate_emit(g, &r);
}

/* A decision, recorded before it is acted on. */
static void record(struct netgate_conn *c, bool allow, const char *reason, const char *rule)
{
        record_as(c, allow, reason, rule, false);
}

/* An allowed request or tunnel that has ended. */
static void record_ended(struct netgate_conn *c, const char *end_reason)
{
        record_as(c, true, end_reason, c->rule, true);
}

static void finish_in_flight(struct netgate_conn *c, const char *end_reason)
{
        if (!c->in_flight)
                return;
        c->in_flight = false;
        record_ended(c, end_reason);
}

/* ---- closing ---- */

static void conn_free(struct netgate_conn *c, const char *end_reason)
{
        struct netgate *g = c->g;
        if (c->asking && g->asker.cancel)
                g->asker.cancel(g->asker.ud, c->ask_token);
        c->asking = false;
        finish_in_flight(c, end_reason);
        netgate_client_release(&c->cl);
        netgate_tunnel_release(&c->t);
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

/* ---- refusals ---- */

static void socks_answer(struct netgate_conn *c, uint8_t rep)
{
        uint8_t msg[22];
        size_t n = netgate_socks5_reply(rep, NULL, 0, msg);
        c->cl.x.status = rep;
        bufferevent_write(c->cl.down, msg, n);
}

/* Why a refusal happened and what to ask for, for the agent (docs/network.md,
 * "Refusals"): the policy field to ask the operator about, and its value. */
static void explain(const struct netgate_conn *c, const char *reason, const char *rule,
                    const char **ret_why, const char **ret_field, char *value, size_t size)
{
        const char *h = host_name(c);
        bool v6 = c->d.host.kind == NETGATE_HOST_IP && c->d.host.addr.family == AF_INET6;
        *ret_field = NULL;
        value[0] = '\0';
        if (STREQ(reason, "not_allowed") || STREQ(reason, "port_not_allowed") ||
            STREQ(reason, "ip_literal_not_listed")) {
                *ret_why = STREQ(reason, "port_not_allowed")
                               ? "network.allow names this host, not this port"
                               : "no network.allow rule names this host";
                *ret_field = "network.allow";
                snprintf(value, size, "%s%s%s:%u", v6 ? "[" : "", h, v6 ? "]" : "", c->port);
        } else if (STREQ(reason, "denied_by_rule")) {
                *ret_why = "a network.deny rule names this host; deny rules beat allow rules";
        } else if (STREQ(reason, "private_address")) {
                *ret_why = "the host resolves to a private, loopback or link-local address";
                *ret_field = "network.allowPrivate";
                snprintf(value, size, "%s", rule ? rule : "");
                /* The host's own address: the address itself is what to list. */
                if (rule && strncmp(rule, "host-address", 12) == 0 && c->cl.have_addr) {
                        char a[NETGATE_ADDR_STRLEN];
                        netgate_addr_format(&c->cl.addr, a);
                        *ret_why = "the host resolves to an address of the gate's own host";
                        snprintf(value, size, "%s", a);
                }
        } else if (STREQ(reason, "budget_requests") || STREQ(reason, "budget_bytes") ||
                   STREQ(reason, "budget_refusals")) {
                *ret_why = "the sandbox's network budget is spent";
                *ret_field = rule;
        } else if (STREQ(reason, "cleartext_secret")) {
                *ret_why = "the request is plain HTTP and carries a sentinel's placeholder for "
                           "this host: its secret would cross the network in the clear, so "
                           "nothing was sent (use https://; the gate puts secrets only into TLS "
                           "it verifies)";
                *ret_field = rule;
                snprintf(value, size, "%s%s%s:%u", v6 ? "[" : "", h, v6 ? "]" : "", c->port);
        } else if (STREQ(reason, "ask_denied")) {
                *ret_why = "the operator denied this request";
        } else if (STREQ(reason, "ask_timeout")) {
                *ret_why = "the operator did not answer in time; retrying asks again";
        } else if (STREQ(reason, "ask_pending_limit")) {
                *ret_why = "too many requests of this sandbox wait for the operator; retry later";
        } else if (STREQ(reason, "ask_shutdown")) {
                *ret_why = "the sandbox is ending";
        } else
                *ret_why = "the host name is malformed";
}

/* A policy refusal: 403 (429 for budgets) or SOCKS5 "not allowed". The
 * HTTP answer says why, what to ask for and the policy's denyReasons text
 * for the host; SOCKS5 has only its code, the record has the reason. */
static void deny(struct netgate_conn *c, int status, const char *reason, const char *rule)
{
        char line[NETGATE_HOST_MAX * 4 + 1024], extra[NETGATE_HOST_MAX * 2 + 512];
        char value[NETGATE_HOST_MAX + 64], at[NETGATE_ADDR_STRLEN + 8] = "";
        const char *why, *field;
        c->in_flight = false;
        if (c->proto == NETGATE_PROTO_SOCKS5)
                c->cl.x.status = NETGATE_SOCKS5_REP_NOT_ALLOWED;
        else
                c->cl.x.status = status;
        record(c, false, reason, rule);
        if (c->proto == NETGATE_PROTO_SOCKS5) {
                socks_answer(c, NETGATE_SOCKS5_REP_NOT_ALLOWED);
                netgate_client_close(&c->cl);
                return;
        }
        if (c->cl.have_addr) {
                char addr[NETGATE_ADDR_STRLEN];
                netgate_addr_format(&c->cl.addr, addr);
                snprintf(at, sizeof(at), " at %s", addr);
        }
        explain(c, reason, rule, &why, &field, value, sizeof(value));
        const char *note = netgate_deny_reason(c->g, host_name(c));
        int n = snprintf(line, sizeof(line), "airlock: denied %s:%u%s (%s), rule: %s\nwhy: %s\n",
                         host_name(c), c->port, at, reason, rule ? rule : "none", why);
        int m = snprintf(extra, sizeof(extra), "X-Airlock-Rule: %s\r\n", rule ? rule : "none");
        if (field && n > 0 && (size_t)n < sizeof(line)) {
                n += snprintf(line + n, sizeof(line) - (size_t)n,
                              "ask for: %s%s%s (ask the operator to add it%s)\n", field,
                              value[0] ? " " : "", value,
                              c->g->ask && STREQ(field, "network.allow")
                                  ? ", or to approve it when asked"
                                  : "");
                if (m > 0 && (size_t)m < sizeof(extra))
                        m += snprintf(extra + m, sizeof(extra) - (size_t)m,
                                      "X-Airlock-Ask: %s%s%s\r\n", field, value[0] ? " " : "",
                                      value);
        }
        if (note && n > 0 && (size_t)n < sizeof(line)) {
                snprintf(line + n, sizeof(line) - (size_t)n, "note: %s\n", note);
                if (m > 0 && (size_t)m < sizeof(extra))
                        snprintf(extra + m, sizeof(extra) - (size_t)m, "X-Airlock-Reason: %s\r\n",
                                 note);
        }
        netgate_client_answer_ex(&c->cl, status, status == 429 ? "Too Many Requests" : "Forbidden",
                                 "X-Airlock-Denied", reason, extra, line);
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
        c->cl.x.status = c->proto == NETGATE_PROTO_SOCKS5
                             ? (STREQ(reason, "dns_failed") ? NETGATE_SOCKS5_REP_HOST_UNREACHABLE
                                                            : socks_code_for(err))
                             : 502;
        finish_in_flight(c, reason);
        if (c->proto == NETGATE_PROTO_SOCKS5) {
                socks_answer(c, (uint8_t)c->cl.x.status);
                netgate_client_close(&c->cl);
                return;
        }
        snprintf(line, sizeof(line), "airlock: %s:%u: %s%s%s\n", host_name(c), c->port, reason,
                 err ? ": " : "", err ? strerror(err) : "");
        netgate_client_answer(&c->cl, 502, "Bad Gateway", "X-Airlock-Error", reason, line);
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
        netgate_client_begin(&c->cl);
        c->rule = NULL;
        c->in_flight = false;
        memset(&c->d, 0, sizeof(c->d));
}

static void proceed(struct netgate_conn *c);

/* The operator's answer to a held request. */
static void ask_done(void *ud, bool allow, const char *reason)
{
        struct netgate_conn *c = ud;
        if (!c->asking)
                return;
        c->asking = false;
        /* A refusal is the operator's (ask_denied, ask_timeout), whatever
         * else would have refused it. */
        if (!allow) {
                deny(c, 403, reason, "network.onUnlisted");
                return;
        }
        /* An approval is decided again on the rules in force now: a deny
         * rule granted while it waited refuses it (an approval lifts only
         * "not listed"). */
        const char *refused =
            netgate_ask_recheck(c->g, host_name(c), c->port, c->rule_text, sizeof(c->rule_text));
        if (refused) {
                deny(c, 403, refused, c->rule_text[0] ? c->rule_text : "network.deny");
                return;
        }
        c->rule = "ask";
        if (!check_budget(c))
                return;
        c->in_flight = true;
        proceed(c);
}

/* Decide (host, port); on refusal answer and return false. A request held
 * for the operator returns false too: ask_done() goes on with it. */
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
        c->rule = NULL;
        if (c->d.rule) {
                snprintf(c->rule_text, sizeof(c->rule_text), "%s", c->d.rule->text);
                c->rule = c->rule_text;
        }
        c->d.rule = NULL;
        if (!c->d.allow && c->g->ask && c->g->asker.ask && netgate_reason_askable(c->d.reason)) {
                struct netgate_ask q = {
                    .host = host_name(c),
                    .port = port,
                    .protocol = c->protocol,
                };
                const char *why = "ask_denied";
                uint64_t token = 0;
                switch (c->g->asker.ask(c->g->asker.ud, &q, ask_done, c, &token, &why)) {
                case NETGATE_ASK_ALLOW:
                        c->rule = "ask";
                        break;
                case NETGATE_ASK_HELD: {
                        /* Unread and without the head timeout: the ask has
                         * its own, and a close still ends it (conn_free). */
                        c->asking = true;
                        c->ask_token = token;
                        bufferevent_set_timeouts(c->cl.down, NULL, NULL);
                        return false;
                }
                case NETGATE_ASK_DENY:
                default:
                        deny(c, 403, why, "network.onUnlisted");
                        return false;
                }
        } else if (!c->d.allow) {
                deny(c, 403, c->d.reason, c->rule);
                return false;
        }
        if (!check_budget(c))
                return false;
        c->in_flight = true;
        return true;
}

/* ---- the HTTP client's ops ---- */

static void client_refused(void *ud, const char *range)
{
        deny(ud, 403, "private_address", range);
}

static void client_failed(void *ud, const char *reason, int err, const char *detail)
{
        fail_upstream(ud, reason, err);
}

static void tunnel_end(void *ud, const char *reason)
{
        conn_free(ud, reason);
}

/* The SNI check (sni.h) for a tunnel to a name; none for an address. */
static const struct netgate_sni_expect *sni_expect(struct netgate_conn *c,
                                                   struct netgate_sni_expect *e)
{
        if (c->d.host.kind != NETGATE_HOST_NAME)
                return NULL;
        *e = (struct netgate_sni_expect){
            .protocol = c->proto == NETGATE_PROTO_SOCKS5 ? "socks5" : "connect",
            .port = c->port,
        };
        snprintf(e->host, sizeof(e->host), "%s", c->d.host.name);
        if (c->cl.have_addr)
                netgate_addr_format(&c->cl.addr, e->address);
        return e;
}

static void client_tunnel(void *ud, struct bufferevent *down, struct bufferevent *up)
{
        struct netgate_conn *c = ud;
        struct netgate_sni_expect e;
        if (c->proto == NETGATE_PROTO_SOCKS5) {
                struct sockaddr_storage ss;
                socklen_t len = sizeof(ss);
                struct netgate_addr bnd = {0};
                uint16_t port = 0;
                if (getsockname(bufferevent_getfd(up), (struct sockaddr *)&ss, &len) == 0 &&
                    netgate_addr_from_sockaddr((struct sockaddr *)&ss, len, &bnd) == 0)
                        port = ntohs(ss.ss_family == AF_INET
                                         ? ((struct sockaddr_in *)&ss)->sin_port
                                         : ((struct sockaddr_in6 *)&ss)->sin6_port);
                uint8_t msg[22];
                size_t n = netgate_socks5_reply(NETGATE_SOCKS5_REP_OK, bnd.family ? &bnd : NULL,
                                                port, msg);
                c->cl.x.status = NETGATE_SOCKS5_REP_OK;
                netgate_sni_tunnel_start(&c->t, c->g, &c->cl.x, tunnel_end, c, down, up, msg, n,
                                         sni_expect(c, &e));
                return;
        }
        static const char ok[] = "HTTP/1.1 200 Connection established\r\n\r\n";
        c->cl.x.status = 200;
        netgate_sni_tunnel_start(&c->t, c->g, &c->cl.x, tunnel_end, c, down, up, ok, sizeof(ok) - 1,
                                 sni_expect(c, &e));
}

/* The absolute-URI request as an origin-form request to the upstream. */
static void client_write_head(void *ud, struct evbuffer *out)
{
        struct netgate_conn *c = ud;
        const struct netgate_http_head *h = &c->cl.x.reqp->head;
        const char *slash = (h->path_len == 0 || h->path_needs_slash) ? "/" : "";

        evbuffer_add_printf(out, "%.*s %s%.*s HTTP/1.%d\r\n", (int)h->method_len, h->method, slash,
                            (int)h->path_len, h->path, h->minor);
        bool v6 = c->d.host.kind == NETGATE_HOST_IP && c->d.host.addr.family == AF_INET6;
        evbuffer_add_printf(out, "Host: %s%s%s", v6 ? "[" : "", c->d.host.name, v6 ? "]" : "");
        if (c->port != 80)
                evbuffer_add_printf(out, ":%u", c->port);
        evbuffer_add(out, "\r\n", 2);
        bool sentinel_host = c->cl.x.scrub != NULL;
        for (size_t i = 0; i < h->n_fields; i++) {
                const struct netgate_http_field *f = &h->fields[i];
                if (netgate_http_field_is_hop(h, f->name, f->name_len))
                        continue;
                if (sentinel_host && netgate_http_name_eq(f->name, f->name_len, "accept-encoding"))
                        continue;
                char *sv = NULL;
                size_t sv_len = 0;
                if (sentinel_host &&
                    netgate_sentinels_apply(&c->g->sentinels, c->d.host.name, f->name, f->name_len,
                                            f->value, f->value_len, &sv, &sv_len) > 0) {
                        evbuffer_add_printf(out, "%.*s: ", (int)f->name_len, f->name);
                        evbuffer_add(out, sv, sv_len);
                        evbuffer_add(out, "\r\n", 2);
                        explicit_bzero(sv, sv_len);
                        free(sv);
                        continue;
                }
                evbuffer_add_printf(out, "%.*s: %.*s\r\n", (int)f->name_len, f->name,
                                    (int)f->value_len, f->value);
        }
        /* The answer of a host a sentinel goes to is scrubbed of the
         * secrets' values, which the gate can do only in a plain body. */
        if (sentinel_host)
                evbuffer_add(out, "Accept-Encoding: identity\r\n", 27);
        netgate_exchange_put_framing(out, h);
        if (c->cl.x.close_after && h->minor == 1)
                evbuffer_add(out, "Connection: close\r\n", 19);
        evbuffer_add(out, "\r\n", 2);
}

static void client_done(void *ud)
{
        struct netgate_conn *c = ud;
        finish_in_flight(c, NULL);
        c->method[0] = '\0';
}

static void client_end(void *ud, const char *reason)
{
        conn_free(ud, reason);
}

static void client_read(void *ud)
{
        struct netgate_conn *c = ud;
        if (c->asking)
                return; /* bytes wait in the bounded input */
        if (c->proto == NETGATE_PROTO_SOCKS5)
                socks_read(c);
        else
                http_read_head(c);
}

/* ---- answers of the hosts a sentinel goes to ---- */

static char *mask(void *ud, const char *value, size_t len, size_t *ret_len)
{
        struct netgate_conn *c = ud;
        const struct redactor *red = c->cl.x.scrub;
        char *v = NULL;
        if (red && redactor_audit_hook((void *)red, value, len, &v, ret_len) >= 0)
                return v;
        return NULL;
}

static void encoded_refused(void *ud, const char *reason, const char *detail)
{
        fail_upstream(ud, reason, 0);
}

static const struct netgate_exchange_filter proxy_filter = {
    .mask = mask,
    .refused = encoded_refused,
};

static const struct netgate_client_ops client_ops = {
    .read = client_read,
    .write_head = client_write_head,
    .refused = client_refused,
    .failed = client_failed,
    .done = client_done,
    .end = client_end,
    .tunnel = client_tunnel,
};

/* ---- HTTP ---- */

static void http_bad_request(struct netgate_conn *c, int r)
{
        const char *reason, *phrase;
        int status;
        netgate_http_refusal(r, &status, &phrase, &reason);
        begin_request(c, "http", NULL);
        c->cl.x.status = status;
        record(c, false, reason, NULL);
        char line[256];
        snprintf(line, sizeof(line), "airlock: request refused (%s)%s\n", reason,
                 r == -ENOTSUP ? ": use CONNECT for https, absolute http:// URIs otherwise" : "");
        netgate_client_answer(&c->cl, status, phrase, "X-Airlock-Denied", reason, line);
}

/* A CONNECT (HTTP or SOCKS5) to the host and port of a route with
 * "terminate" is not tunnelled: it is recorded as allowed by the route
 * (the allow-list does not apply to a route's upstream), answered, and its
 * TLS terminated (mitm.c); each request inside is then a call through the
 * route. */
static bool terminate(struct netgate_conn *c, const char *raw, size_t raw_len, uint16_t port)
{
        SSL_CTX *ctx = NULL;
        struct netgate_host host;
        if (!c->g->routes || c->g->closed || netgate_host_parse(raw, raw_len, &host) < 0)
                return false;
        const struct netgate_route *rt =
            netgate_routes_terminating(c->g->routes, &host, port, &ctx);
        if (!rt)
                return false;
        char rule[160];
        snprintf(rule, sizeof(rule), "network.routes[%s].terminate", rt->name);
        c->port = port;
        c->d.host = host;
        static const char ok[] = "HTTP/1.1 200 Connection established\r\n\r\n";
        uint8_t msg[22];
        size_t n = sizeof(ok) - 1;
        const void *reply = ok;
        if (c->proto == NETGATE_PROTO_SOCKS5) {
                n = netgate_socks5_reply(NETGATE_SOCKS5_REP_OK, NULL, 0, msg);
                reply = msg;
        }
        c->cl.x.status = c->proto == NETGATE_PROTO_SOCKS5 ? NETGATE_SOCKS5_REP_OK : 200;
        record(c, true, NULL, rule);
        struct netgate *g = c->g;
        struct bufferevent *down = TAKE_PTR(c->cl.down);
        bufferevent_write(down, reply, n);
        conn_free(c, NULL);
        netgate_mitm_start(g, down, ctx, rt);
        return true;
}

static void http_request(struct netgate_conn *c)
{
        struct netgate_http_head *h = &c->cl.x.reqp->head;
        char method[NETGATE_HTTP_METHOD_MAX + 1];
        memcpy(method, h->method, h->method_len);
        method[h->method_len] = '\0';
        begin_request(c, h->is_connect ? "connect" : "http", method);
        if (h->is_connect && terminate(c, h->host, h->host_len, h->port))
                return;
        if (!decide(c, h->host, h->host_len, h->port))
                return;
        proceed(c);
}

/* The request is allowed: on to the upstream. */
static void proceed(struct netgate_conn *c)
{
        if (c->proto == NETGATE_PROTO_SOCKS5) {
                netgate_client_tunnel(&c->cl, &c->d.host, c->port);
                return;
        }
        struct netgate_http_head *h = &c->cl.x.reqp->head;
        c->cl.x.close_after = h->conn_close || c->cl.x.client_eof;
        /* A sentinel's value goes into plain HTTP only on the host, or
         * where its "cleartext" says (cleartext.c). */
        char rule[160], line[512];
        if (!h->is_connect && netgate_cleartext_refused(c->g, NULL, &c->d.host, c->port, h, rule,
                                                        sizeof(rule), line, sizeof(line))) {
                deny(c, 403, "cleartext_secret", rule);
                return;
        }
        /* Plain HTTP to a host a sentinel may go to: the sentinel is
         * replaced in the head (client_write_head), and the answer masked
         * and scrubbed as a route's is. */
        bool listed = false;
        for (size_t i = 0; !h->is_connect && i < c->g->sentinels.n; i++)
                listed =
                    listed || netgate_sentinel_host_listed(&c->g->sentinels.v[i], c->d.host.name);
        c->cl.x.scrub = listed ? secrets_redactor(c->g->secrets) : NULL;
        c->cl.x.refuse_encoded = listed;
        if (h->is_connect)
                netgate_client_tunnel(&c->cl, &c->d.host, c->port);
        else
                netgate_client_send(&c->cl, &c->d.host, c->port, NULL, NULL);
}

static void http_read_head(struct netgate_conn *c)
{
        int r = netgate_read_head(c->cl.x.reqp, bufferevent_get_input(c->cl.down));
        if (r < 0)
                http_bad_request(c, r);
        else if (r > 0)
                http_request(c);
}

/* ---- SOCKS5 ---- */

static void socks_read(struct netgate_conn *c)
{
        struct evbuffer *in = bufferevent_get_input(c->cl.down);
        while (c->cl.state == NETGATE_CLIENT_HEAD) {
                struct evbuffer_iovec v;
                if (evbuffer_peek(in, -1, NULL, &v, 1) < 1 || v.iov_len == 0)
                        return;
                size_t used = 0;
                int r = netgate_socks5_feed(c->socks, v.iov_base, v.iov_len, &used);
                evbuffer_drain(in, used);
                if (r == NETGATE_SOCKS5_MORE)
                        continue;
                if (r == NETGATE_SOCKS5_GREETING) {
                        bufferevent_write(c->cl.down, netgate_socks5_method_reply, 2);
                        continue;
                }
                if (r == NETGATE_SOCKS5_REQUEST) {
                        struct netgate_socks5 *s = c->socks;
                        begin_request(c, "socks5", NULL);
                        if (terminate(c, s->host, s->host_len, s->port))
                                return;
                        if (!decide(c, s->host, s->host_len, s->port))
                                return;
                        proceed(c);
                        return;
                }
                if (r == -EACCES) {
                        bufferevent_write(c->cl.down, netgate_socks5_no_method_reply, 2);
                        netgate_client_close(&c->cl);
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
                c->cl.x.status = c->socks->reply;
                record(c, false,
                       r == -EOPNOTSUPP     ? "command_not_supported"
                       : r == -EAFNOSUPPORT ? "address_type_not_supported"
                                            : "bad_request",
                       NULL);
                socks_answer(c, c->socks->reply);
                netgate_client_close(&c->cl);
                return;
        }
}

/* ---- accepting ---- */

void netgate_proxy_accept(struct netgate *g, enum netgate_proto proto, int fd)
{
        struct netgate_conn *c = xcalloc(1, sizeof(*c));
        bool socks = proto == NETGATE_PROTO_SOCKS5;
        if (netgate_client_accept(&c->cl, g, fd, &client_ops, socks ? NULL : &proxy_filter, c,
                                  socks ? SOCKS_TIMEOUT_S : NETGATE_HEAD_TIMEOUT_S) < 0) {
                free(c);
                return;
        }
        c->g = g;
        c->proto = proto;
        netgate_tunnel_init(&c->t);
        if (socks) {
                c->socks = xcalloc(1, sizeof(*c->socks));
                netgate_socks5_init(c->socks);
        } else {
                c->cl.x.reqp = xcalloc(1, sizeof(*c->cl.x.reqp));
                netgate_http_parser_init(c->cl.x.reqp, NETGATE_HTTP_REQUEST);
        }
        c->next = g->conns;
        if (g->conns)
                g->conns->prev = c;
        g->conns = c;
        netgate_conn_count(g, +1);
}

/* The rules changed (netgate_set_rules): every connection whose upstream
 * was allowed by a rule is decided again on the host and port it reaches.
 * One the new rules refuse is closed now, its record ended with reason
 * "revoked" (a tunnel, a request in flight, one being connected); an idle
 * kept upstream to a refused origin is dropped (the next request is decided
 * again anyway). A connection an operator approved (rule "ask") is cut
 * only when a deny rule names it now (no allow rule decided it); one held
 * for the operator is left to the operator's answer. */
size_t netgate_proxy_recheck(struct netgate *g)
{
        size_t cut = 0;
        struct netgate_conn *next;
        for (struct netgate_conn *c = g->conns; c; c = next) {
                next = c->next;
                if (c->asking)
                        continue;
                bool asked = c->in_flight && c->rule && c->rule != c->rule_text;
                bool live = c->in_flight && c->rule && !asked;
                bool idle_up = !c->in_flight && c->cl.up && c->cl.up_idle && c->cl.up_host[0];
                if (!live && !asked && !idle_up)
                        continue;
                struct netgate_decision d;
                if (live || asked)
                        netgate_rules_decide(g->rules, c->d.host.name, strlen(c->d.host.name),
                                             c->port, &d);
                else
                        netgate_rules_decide(g->rules, c->cl.up_host, strlen(c->cl.up_host),
                                             c->cl.up_port, &d);
                /* What an operator approved stands unless a deny rule
                 * names it now: deny beats every allow. */
                if (d.allow || (asked && !STREQ(d.reason, "denied_by_rule")))
                        continue;
                if (idle_up) {
                        netgate_client_drop_idle(&c->cl);
                        continue;
                }
                cut++;
                conn_free(c, "revoked");
        }
        return cut;
}

void netgate_proxy_close_all(struct netgate *g)
{
        while (g->conns)
                conn_free(g->conns, netgate_tunnel_client_done(&g->conns->t) ? NULL : "shutdown");
}
