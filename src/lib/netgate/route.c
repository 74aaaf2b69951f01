/* SPDX-License-Identifier: Apache-2.0 */
#include <errno.h>
#include <string.h>
#include <unistd.h>

#include <event2/buffer.h>
#include <event2/bufferevent.h>
#include <event2/event.h>
#include <event2/util.h>

#include <openssl/ssl.h>

#include "netgate/ca.h"
#include "netgate/client.h"
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

struct rconn {
        struct netgate_routes *rs;
        struct rconn *prev, *next;
        struct netgate_client cl; /* the connection, its upstream and its exchange */

        /* The call being served. */
        const struct netgate_route *rt;
        char method[NETGATE_HTTP_METHOD_MAX + 1];
        char name[80];         /* the route name as asked for, escaped */
        char path[PATH_SHOWN]; /* below the route, escaped */
        const char *rule;
        char rule_buf[160]; /* a rule named by the request (cleartext_secret) */
        bool in_flight;
        uint64_t t0;
        struct netgate_header recorded[RECORDED_MAX];
        char recorded_value[RECORDED_MAX][RECORDED_VALUE];
        size_t n_recorded;

        struct evbuffer *head_out; /* the upstream request head, built before connecting */
        char *tool;                /* a host tool's request (fetch.c) */
        /* A terminated connection (mitm.c): every request goes through this
         * route, and its whole target is the path. */
        const struct netgate_route *fixed;
};

struct netgate_routes {
        struct netgate *g;
        struct event_base *base;
        struct netgate_route **routes;
        size_t n_routes;
        /* The routes with "terminate", as served behind the terminator
         * (keep_auth), and the TLS server context of each. */
        struct netgate_route **terms;
        SSL_CTX **term_ctx;
        size_t n_terms;
        const struct secrets *secrets;
        struct secrets *own_secrets;
        char *run_id, *run_attempt, *sandbox_id, *account;
        struct secrets_vars vars;
        struct rconn *conns;
};

static void conn_free(struct rconn *c, const char *end_reason);

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

static void emit_as(struct rconn *c, bool allow, const char *reason, bool ended)
{
        char addr[NETGATE_ADDR_STRLEN] = "";
        if (c->cl.have_addr)
                netgate_addr_format(&c->cl.addr, addr);
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
            .parent = allow && c->cl.have_addr ? netgate_upstream_parent(&c->cl.u) : NULL,
            .status = c->cl.x.status,
            .bytes_up = c->cl.x.bytes_up,
            .bytes_down = c->cl.x.bytes_down,
            .duration_ms = c->t0 && now > c->t0 ? (now - c->t0) / 1000 : 0,
            .route = c->name[0] ? c->name : NULL,
            .path = c->path[0] ? c->path : NULL,
            .upstream = c->rt ? c->rt->upstream : NULL,
            .recorded = c->recorded,
            .n_recorded = c->n_recorded,
            .tool = c->tool,
            .ended = ended,
        };
        netgate_emit(c->rs->g, &r);
}

/* A decision, recorded before it is acted on. */
static void emit(struct rconn *c, bool allow, const char *reason)
{
        emit_as(c, allow, reason, false);
}

static void finish_in_flight(struct rconn *c, const char *end_reason)
{
        if (!c->in_flight)
                return;
        c->in_flight = false;
        emit_as(c, true, end_reason, true);
}

/* ---- closing ---- */

static void conn_free(struct rconn *c, const char *end_reason)
{
        struct netgate_routes *rs = c->rs;
        finish_in_flight(c, end_reason);
        netgate_client_release(&c->cl);
        if (c->head_out) {
                netgate_route_wipe(c->head_out);
                evbuffer_free(c->head_out);
        }
        free(c->tool);
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

/* ---- answers the gate writes ---- */

/* `line` never holds a header value: nothing injected reaches the sandbox. */
static void refuse(struct rconn *c, int status, const char *phrase, const char *reason,
                   const char *line)
{
        c->in_flight = false;
        c->cl.x.status = status;
        emit(c, false, reason);
        netgate_client_answer(&c->cl, status, phrase, "X-Airlock-Denied", reason, line);
}

static void fail_upstream(struct rconn *c, const char *reason, const char *detail)
{
        char line[512];
        c->cl.x.status = 502;
        finish_in_flight(c, reason);
        snprintf(line, sizeof(line), "airlock: route %s: %s: %s\n", c->rt->name, c->rt->upstream,
                 detail);
        netgate_client_answer(&c->cl, 502, "Bad Gateway", "X-Airlock-Error", reason, line);
}

/* ---- the request ---- */

static void begin(struct rconn *c)
{
        c->t0 = now_monotonic_us();
        netgate_client_begin(&c->cl);
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

static void handle_request(struct rconn *c)
{
        struct netgate_routes *rs = c->rs;
        const struct netgate_http_head *h = &c->cl.x.reqp->head;
        char line[512];

        begin(c);
        memcpy(c->method, h->method, h->method_len);
        c->method[h->method_len] = '\0';
        /* The target is "/<route>" followed by "", "/..." or "?...", or
         * behind the terminator the path itself. */
        const char *name = h->path + 1, *end = h->path + h->path_len;
        const char *rest = c->fixed ? h->path : name;
        while (!c->fixed && rest < end && *rest != '/' && *rest != '?')
                rest++;
        size_t rest_len = (size_t)(end - rest);
        if (c->fixed)
                snprintf(c->name, sizeof(c->name), "%s", c->fixed->name);
        else
                netgate_escape(name, (size_t)(rest - name), c->name, sizeof(c->name));
        if (rest_len == 0)
                snprintf(c->path, sizeof(c->path), "/");
        else
                show(rest, rest_len, c->path, sizeof(c->path));

        c->rt = c->fixed ? c->fixed : find_route(rs, name, (size_t)(rest - name));
        if (!c->rt) {
                snprintf(line, sizeof(line), "airlock: no route \"%s\"\n", c->name);
                refuse(c, 404, "Not Found", "unknown_route", line);
                return;
        }
        if (c->rt->host_only && !c->tool) {
                /* The host's own route (airlock agent's model): a sandbox's
                 * request through it would carry the host's key. */
                snprintf(line, sizeof(line),
                         "airlock: route \"%s\" is the host's own; the sandbox may not use it\n",
                         c->name);
                refuse(c, 403, "Forbidden", "host_only", line);
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
        /* Secrets go into plain HTTP only on the host, or where the
         * route's (the sentinel's) "cleartext" says (cleartext.c). */
        if (!c->rt->tls &&
            netgate_cleartext_refused(rs->g, c->rt, &c->rt->host, c->rt->port, h, c->rule_buf,
                                      sizeof(c->rule_buf), line, sizeof(line))) {
                c->rule = c->rule_buf;
                refuse(c, 403, "Forbidden", "cleartext_secret", line);
                return;
        }
        c->cl.x.close_after = h->conn_close || c->cl.x.client_eof;
        /* Values the route injects are scrubbed from the answer's body, as
         * from its head: an upstream that echoes its request (a debug or
         * error page) must not hand them to the sandbox. */
        c->cl.x.scrub = secrets_redactor(rs->secrets);
        c->cl.x.refuse_encoded = netgate_route_carries_secrets(c->rt);

        if (!c->head_out)
                c->head_out = evbuffer_new();
        else
                netgate_route_wipe(c->head_out);
        const char *field = NULL;
        int r = c->head_out
                    ? netgate_route_write_head(c->rt, h, rest, rest_len, c->cl.x.close_after,
                                               rs->secrets, &rs->vars, c->head_out, &field)
                    : -ENOMEM;
        if (r < 0) {
                bool bad = r == -EBADMSG;
                snprintf(line, sizeof(line),
                         bad ? "airlock: route %s: header %s: the value holds control characters\n"
                             : "airlock: route %s: header %s: the value could not be expanded\n",
                         c->rt->name, field ? field : "?");
                c->in_flight = false;
                c->cl.x.status = bad ? 400 : 500;
                emit(c, false, bad ? "bad_inject_value" : "inject_failed");
                netgate_client_answer(
                    &c->cl, c->cl.x.status, bad ? "Bad Request" : "Internal Server Error",
                    "X-Airlock-Error", bad ? "bad_inject_value" : "inject_failed", line);
                return;
        }
        c->in_flight = true;
        netgate_client_send(&c->cl, &c->rt->host, c->rt->port, c->rt->tls_layer, c->rt);
}

static void read_head(struct rconn *c)
{
        int r = netgate_read_head(c->cl.x.reqp, bufferevent_get_input(c->cl.down));
        if (r < 0)
                bad_request(c, r);
        else if (r > 0)
                handle_request(c);
}

/* ---- the response ---- */

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

static void encoded_refused(void *ud, const char *reason, const char *detail)
{
        fail_upstream(ud, reason, detail);
}

static const struct netgate_exchange_filter route_filter = {
    .mask = mask,
    .field = record_field,
    .refused = encoded_refused,
};

/* ---- the HTTP client's ops ---- */

static void client_read(void *ud)
{
        read_head(ud);
}

/* A copy: a retry on a fresh connection sends the head again. */
static void client_write_head(void *ud, struct evbuffer *out)
{
        struct rconn *c = ud;
        evbuffer_add(out, evbuffer_pullup(c->head_out, -1), evbuffer_get_length(c->head_out));
}

/* Every answer is checked; one private answer refuses the upstream. */
static void client_refused(void *ud, const char *range)
{
        struct rconn *c = ud;
        char line[1024], addr[NETGATE_ADDR_STRLEN];
        c->rule = range;
        netgate_addr_format(&c->cl.addr, addr);
        snprintf(line, sizeof(line),
                 "airlock: route %s: %s is at %s (%s), not in "
                 "network.allowPrivate: allow it with --allow-private %s "
                 "(or \"allowPrivate\": [\"%s\"] in the policy)\n",
                 c->rt->name, c->rt->host.name, addr, range, addr, addr);
        refuse(c, 403, "Forbidden", "private_address", line);
}

static void client_failed(void *ud, const char *reason, int err, const char *detail)
{
        struct rconn *c = ud;
        if (detail)
                fail_upstream(c, reason, detail);
        else if (STREQ(reason, "dns_failed") && !err)
                fail_upstream(c, reason, "the name does not resolve");
        else
                fail_upstream(c, reason, err ? strerror(err) : reason);
}

static void client_done(void *ud)
{
        finish_in_flight(ud, NULL);
}

static void client_end(void *ud, const char *reason)
{
        conn_free(ud, reason);
}

static const struct netgate_client_ops client_ops = {
    .read = client_read,
    .write_head = client_write_head,
    .refused = client_refused,
    .failed = client_failed,
    .done = client_done,
    .end = client_end,
};

/* ---- the engine ---- */

static struct rconn *accept_conn(struct netgate_routes *rs, int fd, const char *tool)
{
        struct rconn *c = xcalloc(1, sizeof(*c));
        if (netgate_client_accept(&c->cl, rs->g, fd, &client_ops, &route_filter, c,
                                  NETGATE_HEAD_TIMEOUT_S) < 0) {
                free(c);
                return NULL;
        }
        c->rs = rs;
        c->tool = tool ? xstrdup(tool) : NULL;
        c->cl.origin_form = true;
        c->cl.x.reqp = xcalloc(1, sizeof(*c->cl.x.reqp));
        netgate_http_parser_init(c->cl.x.reqp, NETGATE_HTTP_REQUEST);
        c->cl.x.reqp->origin_form = true;
        c->next = rs->conns;
        if (rs->conns)
                rs->conns->prev = c;
        rs->conns = c;
        netgate_conn_count(rs->g, +1);
        return c;
}

void netgate_routes_accept(struct netgate_routes *rs, int fd, const char *tool)
{
        accept_conn(rs, fd, tool);
}

void netgate_routes_accept_terminated(struct netgate_routes *rs, int fd,
                                      const struct netgate_route *rt)
{
        struct rconn *c = accept_conn(rs, fd, NULL);
        if (c)
                c->fixed = rt;
}

const struct netgate_route *netgate_routes_terminating(const struct netgate_routes *rs,
                                                       const struct netgate_host *host,
                                                       uint16_t port, SSL_CTX **ret_ctx)
{
        for (size_t i = 0; rs && i < rs->n_terms; i++)
                if (rs->terms[i]->port == port && STREQ(rs->terms[i]->host.name, host->name)) {
                        *ret_ctx = rs->term_ctx[i];
                        return rs->terms[i];
                }
        return NULL;
}

bool netgate_routes_terminates_name(const struct netgate_routes *rs, const char *name)
{
        for (size_t i = 0; rs && i < rs->n_terms; i++)
                if (STREQ(rs->terms[i]->host.name, name))
                        return true;
        return false;
}

/* The twin of a route with "terminate" that serves the terminated
 * connections, and the leaf the sandbox is shown for its host. */
static int add_terminated(struct netgate_routes *rs, const struct policy_route *pr,
                          struct al_error *err)
{
        if (!rs->g->ca)
                return al_error_set(err, EINVAL,
                                    "route \"%s\": \"terminate\" needs the sandbox's TLS "
                                    "authority, and this gate has none",
                                    pr->name);
        struct netgate_route *rt = NULL;
        int r = netgate_route_new(pr, &rt, err);
        if (r < 0)
                return r;
        rt->keep_auth = true;
        rt->sentinels = &rs->g->sentinels;
        SSL_CTX *ctx = NULL;
        r = netgate_ca_server_ctx(rs->g->ca, rt->host.name, &ctx, err);
        if (r < 0) {
                netgate_route_free(rt);
                return al_error_wrap(err, "route \"%s\"", pr->name);
        }
        rs->terms[rs->n_terms] = rt;
        rs->term_ctx[rs->n_terms] = ctx;
        rs->n_terms++;
        return 0;
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
        rs->terms = xcalloc(n + 1, sizeof(*rs->terms));
        rs->term_ctx = xcalloc(n + 1, sizeof(*rs->term_ctx));
        for (size_t i = 0; i < n; i++) {
                int r = netgate_route_new(&routes[i], &rs->routes[i], err);
                if (r >= 0) {
                        rs->routes[i]->sentinels = &g->sentinels;
                        rs->n_routes++;
                        if (routes[i].terminate)
                                r = add_terminated(rs, &routes[i], err);
                }
                if (r < 0) {
                        netgate_routes_free(rs);
                        return r;
                }
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
        for (size_t i = 0; i < rs->n_terms; i++) {
                netgate_route_free(rs->terms[i]);
                SSL_CTX_free(rs->term_ctx[i]);
        }
        free(rs->terms);
        free(rs->term_ctx);
        secrets_free(rs->own_secrets);
        free(rs->run_id);
        free(rs->run_attempt);
        free(rs->sandbox_id);
        free(rs->account);
        free(rs);
        return NULL;
}
