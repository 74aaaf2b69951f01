/* SPDX-License-Identifier: Apache-2.0 */
#include <errno.h>
#include <inttypes.h>
#include <limits.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <string.h>
#include <strings.h>
#include <sys/socket.h>
#include <unistd.h>

#include <event2/buffer.h>
#include <event2/bufferevent.h>
#include <event2/bufferevent_ssl.h>
#include <event2/dns.h>
#include <event2/event.h>
#include <event2/util.h>
#include <openssl/err.h>
#include <openssl/ssl.h>
#include <openssl/x509v3.h>

#include "netgate/exchange.h"
#include "netgate/netgate.h"
#include "netgate/route.h"
#include "netgate/rules.h"
#include "policy.h"
#include "secrets.h"
#include "util.h"

#define RECORDED_MAX   16
#define RECORDED_VALUE 512
#define PATH_SHOWN     1024

struct netgate_route {
        char *name;
        char *upstream;
        bool tls;
        struct netgate_host host;
        uint16_t port;
        char *authority; /* the Host field: host or [v6], ":port" when not the default */
        char *base;      /* the upstream's path without a trailing "/" */
        struct policy_kv *inject;
        size_t n_inject;
        char **strip;
        size_t n_strip;
        char **record;
        size_t n_record;
        SSL_CTX *ssl;
};

enum rstate {
        R_HEAD,
        R_RESOLVING,
        R_CONNECTING,
        R_HANDSHAKE,
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

        struct netgate_dns_query *dnsq;
        struct netgate_candidates cand;
        int connect_fd;
        struct event *ev_connect;
        char tls_error[256];

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
static void connect_next(struct rconn *c);

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

static char **strv_copy(char *const *v, size_t n)
{
        char **r = xcalloc(n + 1, sizeof(*r));
        for (size_t i = 0; i < n; i++)
                r[i] = xstrdup(v[i] ? v[i] : "");
        return r;
}

/* ---- one route ---- */

static int ssl_error(struct al_error *err, const char *what, const char *route)
{
        char buf[256] = "unknown error";
        unsigned long e = ERR_get_error();
        if (e)
                ERR_error_string_n(e, buf, sizeof(buf));
        ERR_clear_error();
        return al_error_set(err, 0, "route \"%s\": %s: %s", route, what, buf);
}

static int parse_upstream(struct netgate_route *rt, struct al_error *err)
{
        const char *u = rt->upstream, *rest;
        if (strncmp(u, "https://", 8) == 0) {
                rt->tls = true;
                rest = u + 8;
        } else if (strncmp(u, "http://", 7) == 0)
                rest = u + 7;
        else
                return al_error_set(err, 0,
                                    "route \"%s\": upstream \"%s\": not an http:// or "
                                    "https:// URL",
                                    rt->name, u);
        size_t alen = strcspn(rest, "/");
        const char *host = rest, *port = NULL;
        size_t hlen = alen, plen = 0;
        if (alen > 0 && rest[0] == '[') {
                const char *close = memchr(rest, ']', alen);
                if (!close)
                        goto bad;
                host = rest + 1;
                hlen = (size_t)(close - host);
                if (close + 1 < rest + alen) {
                        if (close[1] != ':')
                                goto bad;
                        port = close + 2;
                        plen = (size_t)(rest + alen - port);
                }
        } else {
                const char *colon = memchr(rest, ':', alen);
                if (colon) {
                        hlen = (size_t)(colon - rest);
                        port = colon + 1;
                        plen = alen - hlen - 1;
                }
        }
        if (hlen == 0 || netgate_host_parse(host, hlen, &rt->host) < 0)
                goto bad;
        rt->port = rt->tls ? 443 : 80;
        if (port) {
                char num[8];
                uint64_t v;
                if (plen == 0 || plen >= sizeof(num))
                        goto bad;
                memcpy(num, port, plen);
                num[plen] = '\0';
                if (safe_atou64(num, &v) < 0 || v == 0 || v > 65535)
                        goto bad;
                rt->port = (uint16_t)v;
        }
        bool v6 = rt->host.kind == NETGATE_HOST_IP && rt->host.addr.family == AF_INET6;
        if (rt->port == (rt->tls ? 443 : 80))
                rt->authority = xasprintf("%s%s%s", v6 ? "[" : "", rt->host.name, v6 ? "]" : "");
        else
                rt->authority =
                    xasprintf("%s%s%s:%u", v6 ? "[" : "", rt->host.name, v6 ? "]" : "", rt->port);
        const char *path = rest + alen;
        size_t n = strlen(path);
        while (n > 0 && path[n - 1] == '/')
                n--;
        rt->base = xasprintf("%.*s", (int)n, path);
        return 0;
bad:
        return al_error_set(err, 0, "route \"%s\": upstream \"%s\": bad host or port", rt->name, u);
}

static int setup_tls(struct netgate_route *rt, const char *ca_file, struct al_error *err)
{
        ERR_clear_error();
        rt->ssl = SSL_CTX_new(TLS_client_method());
        if (!rt->ssl)
                return ssl_error(err, "creating the TLS context", rt->name);
        SSL_CTX_set_min_proto_version(rt->ssl, TLS1_2_VERSION);
        SSL_CTX_set_verify(rt->ssl, SSL_VERIFY_PEER, NULL);
        SSL_CTX_set_mode(rt->ssl, SSL_MODE_RELEASE_BUFFERS);
        static const unsigned char alpn[] = "\x08http/1.1";
        SSL_CTX_set_alpn_protos(rt->ssl, alpn, sizeof(alpn) - 1);
        if (ca_file) {
                /* Only this CA: the route trusts what the host configured. */
                if (SSL_CTX_load_verify_locations(rt->ssl, ca_file, NULL) != 1) {
                        char what[PATH_MAX + 32];
                        snprintf(what, sizeof(what), "caFile \"%s\"", ca_file);
                        return ssl_error(err, what, rt->name);
                }
        } else if (SSL_CTX_set_default_verify_paths(rt->ssl) != 1)
                return ssl_error(err, "loading the system CA store", rt->name);
        return 0;
}

int netgate_route_new(const struct policy_route *pr, struct netgate_route **ret,
                      struct al_error *err)
{
        if (!pr || !pr->name || !pr->upstream)
                return al_error_set(err, EINVAL, "route: name and upstream are required");
        struct netgate_route *rt = xcalloc(1, sizeof(*rt));
        rt->name = xstrdup(pr->name);
        rt->upstream = xstrdup(pr->upstream);
        int r = parse_upstream(rt, err);
        if (r >= 0 && rt->tls)
                r = setup_tls(rt, pr->ca_file, err);
        if (r < 0) {
                netgate_route_free(rt);
                return r;
        }
        rt->inject = xcalloc(pr->n_inject + 1, sizeof(*rt->inject));
        for (size_t i = 0; i < pr->n_inject; i++) {
                rt->inject[i].key = xstrdup(pr->inject[i].key ? pr->inject[i].key : "");
                rt->inject[i].value = xstrdup(pr->inject[i].value ? pr->inject[i].value : "");
        }
        rt->n_inject = pr->n_inject;
        rt->strip = strv_copy(pr->strip, pr->n_strip);
        rt->n_strip = pr->n_strip;
        rt->record = strv_copy(pr->record, pr->n_record);
        rt->n_record = pr->n_record;
        *ret = rt;
        return 0;
}

struct netgate_route *netgate_route_free(struct netgate_route *rt)
{
        if (!rt)
                return NULL;
        for (size_t i = 0; i < rt->n_inject; i++) {
                free(rt->inject[i].key);
                free(rt->inject[i].value);
        }
        free(rt->inject);
        strv_free(rt->strip);
        strv_free(rt->record);
        if (rt->ssl)
                SSL_CTX_free(rt->ssl);
        free(rt->name);
        free(rt->upstream);
        free(rt->authority);
        free(rt->base);
        free(rt);
        return NULL;
}

bool netgate_route_strip_match(const char *pattern, const char *name, size_t len)
{
        size_t n = strlen(pattern);
        if (n > 0 && pattern[n - 1] == '*')
                return len >= n - 1 && strncasecmp(pattern, name, n - 1) == 0;
        return netgate_http_name_eq(name, len, pattern);
}

bool netgate_route_field_dropped(const struct netgate_route *rt, const struct netgate_http_head *h,
                                 const char *name, size_t len)
{
        if (netgate_http_field_is_hop(h, name, len) ||
            netgate_http_name_eq(name, len, "authorization") ||
            netgate_http_name_eq(name, len, "x-api-key"))
                return true;
        for (size_t i = 0; i < rt->n_strip; i++)
                if (netgate_route_strip_match(rt->strip[i], name, len))
                        return true;
        /* One value per injected name: an upstream that reads the first of
         * two would otherwise read the client's. */
        for (size_t i = 0; i < rt->n_inject; i++)
                if (netgate_http_name_eq(name, len, rt->inject[i].key))
                        return true;
        return false;
}

static bool value_ok(const char *v)
{
        for (; *v; v++)
                if (((unsigned char)*v < 0x20 && *v != '\t') || *v == 0x7f)
                        return false;
        return true;
}

static void wipe_free(char *s)
{
        if (s) {
                explicit_bzero(s, strlen(s));
                free(s);
        }
}

/* Injected values are wiped from the gate's own buffers once used. */
static void wipe_buffer(struct evbuffer *b)
{
        size_t n = evbuffer_get_length(b);
        unsigned char *p = n ? evbuffer_pullup(b, -1) : NULL;
        if (p)
                explicit_bzero(p, n);
        evbuffer_drain(b, n);
}

int netgate_route_write_head(const struct netgate_route *rt, const struct netgate_http_head *req,
                             const char *rest, size_t rest_len, bool close, const struct secrets *s,
                             const struct secrets_vars *vars, struct evbuffer *out,
                             const char **ret_field)
{
        struct evbuffer *head = evbuffer_new();
        if (!head)
                return -ENOMEM;
        const char *slash = rest_len == 0 || rest[0] == '?' ? "/" : "";
        evbuffer_add_printf(head, "%.*s %s%s%.*s HTTP/1.1\r\nHost: %s\r\n", (int)req->method_len,
                            req->method, rt->base, slash, (int)rest_len, rest, rt->authority);
        /* A route that injects asks for an unencoded answer: the gate scrubs
         * what it injected from the response body, which it cannot do in a
         * compressed one (and refuses one that comes compressed anyway). */
        bool identity = rt->n_inject > 0;
        for (size_t i = 0; i < req->n_fields; i++) {
                const struct netgate_http_field *f = &req->fields[i];
                if (netgate_route_field_dropped(rt, req, f->name, f->name_len))
                        continue;
                if (identity && netgate_http_name_eq(f->name, f->name_len, "accept-encoding"))
                        continue;
                evbuffer_add_printf(head, "%.*s: %.*s\r\n", (int)f->name_len, f->name,
                                    (int)f->value_len, f->value);
        }
        if (req->framing == NETGATE_HTTP_BODY_LENGTH)
                evbuffer_add_printf(head, "Content-Length: %" PRIu64 "\r\n", req->length);
        else if (req->framing == NETGATE_HTTP_BODY_CHUNKED)
                evbuffer_add(head, "Transfer-Encoding: chunked\r\n", 28);
        for (size_t i = 0; i < rt->n_inject; i++) {
                struct al_error e = {0};
                char *v = NULL;
                int r = s ? secrets_expand(s, rt->inject[i].value, vars, &v, &e) : -EINVAL;
                if (r >= 0 && !value_ok(v))
                        r = -EBADMSG;
                if (r < 0) {
                        wipe_free(v);
                        wipe_buffer(head);
                        evbuffer_free(head);
                        *ret_field = rt->inject[i].key;
                        return r;
                }
                evbuffer_add_printf(head, "%s: %s\r\n", rt->inject[i].key, v);
                wipe_free(v);
        }
        if (identity)
                evbuffer_add(head, "Accept-Encoding: identity\r\n", 27);
        if (close)
                evbuffer_add(head, "Connection: close\r\n", 19);
        evbuffer_add(head, "\r\n", 2);
        evbuffer_add_buffer(out, head);
        evbuffer_free(head);
        return 0;
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

static void stop_connecting(struct rconn *c)
{
        if (c->ev_connect) {
                event_free(c->ev_connect);
                c->ev_connect = NULL;
        }
        if (c->connect_fd >= 0) {
                close(c->connect_fd);
                c->connect_fd = -1;
        }
}

static void drop_upstream(struct rconn *c)
{
        stop_connecting(c);
        if (c->up) {
                bufferevent_free(c->up);
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
        /* A query in flight finishes and frees itself. */
        netgate_dns_detach(c->dnsq);
        c->dnsq = NULL;
        drop_upstream(c);
        if (c->client) {
                /* It may be in the gate's rate group, freed before the loop
                 * would finalize this bufferevent. */
                bufferevent_remove_from_rate_limit_group(c->client);
                bufferevent_free(c->client);
        }
        if (c->head_out) {
                wipe_buffer(c->head_out);
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

static int hex_digit(char c)
{
        if (c >= '0' && c <= '9')
                return c - '0';
        if (c >= 'a' && c <= 'f')
                return c - 'a' + 10;
        if (c >= 'A' && c <= 'F')
                return c - 'A' + 10;
        return -1;
}

/* Servers and the frameworks behind them disagree on what a path means:
 * one decodes "%2f" into a separator, one takes "\" for "/", one drops
 * ";params" before resolving "..", one decodes twice. Whatever could make
 * the upstream resolve a segment outside the route's base is refused, in
 * the path only (the query is the upstream's business). */
const char *netgate_route_path_problem(const char *rest, size_t len)
{
        size_t q = 0;
        while (q < len && rest[q] != '?')
                q++;
        for (size_t i = 0; i < q;) {
                size_t j = i;
                while (j < q && rest[j] != '/')
                        j++;
                /* The segment decoded once; a ';' ends what servers resolve. */
                size_t dots = 0, chars = 0;
                bool params = false;
                for (size_t k = i; k < j; k++) {
                        char c = rest[k];
                        if (c == '\\')
                                return "a backslash";
                        if (c == '%') {
                                int hi = k + 2 < j ? hex_digit(rest[k + 1]) : -1;
                                int lo = k + 2 < j ? hex_digit(rest[k + 2]) : -1;
                                if (hi < 0 || lo < 0)
                                        return "a \"%\" not followed by two hex digits";
                                c = (char)(hi << 4 | lo);
                                k += 2;
                                if (c == '/')
                                        return "an encoded \"/\" (%2F)";
                                if (c == '\\')
                                        return "an encoded \"\\\" (%5C)";
                                if (c == '%')
                                        return "a double encoding (%25)";
                                if (c == '\0')
                                        return "an encoded NUL (%00)";
                        }
                        if (params)
                                continue;
                        if (c == ';') {
                                params = true;
                                continue;
                        }
                        chars++;
                        if (c == '.')
                                dots++;
                }
                if (chars == dots && (dots == 1 || dots == 2))
                        return params ? "a \".\" or \"..\" segment with \";\" parameters"
                                      : "a \".\" or \"..\" segment";
                i = j + 1;
        }
        return NULL;
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

static void resolve(struct rconn *c);
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
                wipe_buffer(c->head_out);
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
        resolve(c);
}

static void read_head(struct rconn *c)
{
        int r = netgate_read_head(c->x.reqp, bufferevent_get_input(c->client));
        if (r < 0)
                bad_request(c, r);
        else if (r > 0)
                handle_request(c);
}

/* ---- resolving and connecting ---- */

/* Every answer is checked; one private answer refuses the upstream. */
static void check_and_connect(struct rconn *c)
{
        char line[512], addr[NETGATE_ADDR_STRLEN];
        for (size_t i = 0; i < c->cand.n; i++) {
                const char *range = netgate_address_refused(c->rs->g, &c->cand.addr[i]);
                if (range) {
                        c->addr = c->cand.addr[i];
                        c->have_addr = true;
                        c->rule = range;
                        netgate_addr_format(&c->addr, addr);
                        snprintf(line, sizeof(line),
                                 "airlock: route %s: %s is at %s (%s), not in "
                                 "network.allowPrivate\n",
                                 c->rt->name, c->rt->host.name, addr, range);
                        refuse(c, 403, "Forbidden", "private_address", line);
                        return;
                }
        }
        c->cand.i = 0;
        connect_next(c);
}

static void dns_answer(void *ud, int err, struct evutil_addrinfo *res)
{
        struct rconn *c = ud;
        c->dnsq = NULL;
        netgate_candidates_add_answers(&c->cand, res);
        if (err || c->cand.n == 0) {
                fail_upstream(c, "dns_failed", "the name does not resolve");
                return;
        }
        check_and_connect(c);
}

static void resolve(struct rconn *c)
{
        struct netgate_addr a;
        c->state = R_RESOLVING;
        c->cand.n = c->cand.i = 0;
        bufferevent_enable(c->client, EV_READ);
        if (c->rt->host.kind != NETGATE_HOST_NAME) {
                netgate_candidates_add(&c->cand, &c->rt->host.addr);
                check_and_connect(c);
                return;
        }
        if (netgate_fixed_host(c->rs->g, c->rt->host.name, &a)) {
                netgate_candidates_add(&c->cand, &a);
                check_and_connect(c);
                return;
        }
        struct evdns_base *dns = netgate_resolver(c->rs->g);
        if (!dns) {
                fail_errno(c, "dns_failed", ENOMEM);
                return;
        }
        netgate_dns_resolve(dns, c->rt->host.name, dns_answer, c, &c->dnsq);
}

static void up_read_cb(struct bufferevent *bev, void *ud);
static void up_write_cb(struct bufferevent *bev, void *ud);
static void up_event_cb(struct bufferevent *bev, short what, void *ud);

static int tls_wrap(struct rconn *c, int fd)
{
        const struct netgate_route *rt = c->rt;
        ERR_clear_error();
        SSL *ssl = SSL_new(rt->ssl);
        if (!ssl)
                return -ENOMEM;
        int ok;
        if (rt->host.kind == NETGATE_HOST_NAME) {
                SSL_set_hostflags(ssl, X509_CHECK_FLAG_NO_PARTIAL_WILDCARDS);
                ok = SSL_set_tlsext_host_name(ssl, rt->host.name) == 1 &&
                     SSL_set1_host(ssl, rt->host.name) == 1;
        } else {
                char ip[NETGATE_ADDR_STRLEN];
                netgate_addr_format(&rt->host.addr, ip);
                ok = X509_VERIFY_PARAM_set1_ip_asc(SSL_get0_param(ssl), ip) == 1;
        }
        if (!ok) {
                SSL_free(ssl);
                ERR_clear_error();
                return -ENOMEM;
        }
        c->up = bufferevent_openssl_socket_new(c->rs->base, fd, ssl, BUFFEREVENT_SSL_CONNECTING,
                                               BEV_OPT_CLOSE_ON_FREE | BEV_OPT_DEFER_CALLBACKS);
        if (!c->up) {
                SSL_free(ssl);
                return -ENOMEM;
        }
        /* Many servers close without close_notify; framing, not the TLS
         * close, tells a whole response from a cut one. */
        bufferevent_openssl_set_allow_dirty_shutdown(c->up, 1);
        return 0;
}

static void connected(struct rconn *c, int fd)
{
        struct timeval tv;
        c->x.last_errno = 0;
        c->tls_error[0] = '\0';
        netgate_set_nodelay(fd);
        int r;
        if (c->rt->tls)
                r = tls_wrap(c, fd);
        else {
                c->up = bufferevent_socket_new(c->rs->base, fd,
                                               BEV_OPT_CLOSE_ON_FREE | BEV_OPT_DEFER_CALLBACKS);
                r = c->up ? 0 : -ENOMEM;
        }
        if (r < 0) {
                close(fd);
                fail_errno(c, "upstream_failed", -r);
                return;
        }
        c->up_rt = c->rt;
        c->up_addr = c->addr;
        c->up_reused = false;
        netgate_setup_bufferevent(c->rs->g, c->up);
        bufferevent_setcb(c->up, up_read_cb, up_write_cb, up_event_cb, c);
        if (c->rt->tls) {
                c->state = R_HANDSHAKE;
                bufferevent_set_timeouts(c->up, netgate_secs(&tv, NETGATE_CONNECT_TIMEOUT_S),
                                         netgate_secs(&tv, NETGATE_CONNECT_TIMEOUT_S));
                bufferevent_enable(c->up, EV_READ | EV_WRITE);
                return;
        }
        bufferevent_set_timeouts(c->up, netgate_secs(&tv, NETGATE_IO_TIMEOUT_S),
                                 netgate_secs(&tv, NETGATE_IO_TIMEOUT_S));
        start_exchange(c);
}

static void connect_cb(evutil_socket_t fd, short what, void *ud)
{
        struct rconn *c = ud;
        int err = 0;
        socklen_t len = sizeof(err);
        if (what & EV_TIMEOUT)
                err = ETIMEDOUT;
        else if (getsockopt(fd, SOL_SOCKET, SO_ERROR, &err, &len) < 0)
                err = errno;
        event_free(c->ev_connect);
        c->ev_connect = NULL;
        int cfd = TAKE_FD(c->connect_fd);
        if (err) {
                close(cfd);
                c->x.last_errno = err;
                connect_next(c);
                return;
        }
        connected(c, cfd);
}

static void connect_next(struct rconn *c)
{
        struct timeval tv;
        c->state = R_CONNECTING;
        while (c->cand.i < c->cand.n) {
                c->addr = c->cand.addr[c->cand.i++];
                c->have_addr = true;
                struct sockaddr_storage ss;
                socklen_t len = netgate_addr_to_sockaddr(&c->addr, c->rt->port, &ss);
                _cleanup_close_ int fd =
                    socket(c->addr.family, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, IPPROTO_TCP);
                if (fd < 0) {
                        c->x.last_errno = errno;
                        continue;
                }
                if (connect(fd, (struct sockaddr *)&ss, len) < 0 && errno != EINPROGRESS) {
                        c->x.last_errno = errno;
                        continue;
                }
                /* Even a connection made at once is taken up from the loop:
                 * the caller still holds the connection. */
                c->ev_connect = event_new(c->rs->base, fd, EV_WRITE, connect_cb, c);
                if (!c->ev_connect) {
                        c->x.last_errno = ENOMEM;
                        continue;
                }
                event_add(c->ev_connect, netgate_secs(&tv, NETGATE_CONNECT_TIMEOUT_S));
                c->connect_fd = TAKE_FD(fd);
                return;
        }
        fail_errno(c, "upstream_failed", c->x.last_errno);
}

static void tls_failed(struct rconn *c)
{
        SSL *ssl = bufferevent_openssl_get_ssl(c->up);
        long v = ssl ? SSL_get_verify_result(ssl) : X509_V_OK;
        unsigned long e = bufferevent_get_openssl_error(c->up);
        if (v != X509_V_OK)
                snprintf(c->tls_error, sizeof(c->tls_error), "TLS: certificate not accepted: %s",
                         X509_verify_cert_error_string(v));
        else if (e) {
                char buf[200];
                ERR_error_string_n(e, buf, sizeof(buf));
                snprintf(c->tls_error, sizeof(c->tls_error), "TLS handshake failed: %s", buf);
        } else
                snprintf(c->tls_error, sizeof(c->tls_error), "TLS handshake failed%s%s",
                         c->x.last_errno ? ": " : "",
                         c->x.last_errno ? strerror(c->x.last_errno) : "");
        while (bufferevent_get_openssl_error(c->up))
                ;
        ERR_clear_error();
        fail_upstream(c, "upstream_tls", c->tls_error);
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
                c->cand.n = 0;
                netgate_candidates_add(&c->cand, &c->addr);
                c->cand.i = 0;
                connect_next(c);
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

/* ---- callbacks ---- */

static void up_event_cb(struct bufferevent *bev, short what, void *ud)
{
        struct rconn *c = ud;
        int err = EVUTIL_SOCKET_ERROR();

        if (c->state == R_HANDSHAKE) {
                if (what & BEV_EVENT_CONNECTED) {
                        struct timeval tv;
                        bufferevent_set_timeouts(c->up, netgate_secs(&tv, NETGATE_IO_TIMEOUT_S),
                                                 netgate_secs(&tv, NETGATE_IO_TIMEOUT_S));
                        start_exchange(c);
                        return;
                }
                c->x.last_errno = (what & BEV_EVENT_TIMEOUT) ? ETIMEDOUT : err;
                tls_failed(c);
                return;
        }
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
        case R_HANDSHAKE:
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
        c->connect_fd = -1;
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
