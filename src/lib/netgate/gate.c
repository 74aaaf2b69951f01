/* SPDX-License-Identifier: Apache-2.0 */
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include <event2/buffer.h>
#include <event2/bufferevent.h>
#include <event2/dns.h>
#include <event2/event.h>
#include <event2/listener.h>
#include <event2/util.h>

#include "netgate/addr.h"
#include "netgate/exchange.h"
#include "netgate/http.h"
#include "netgate/netgate.h"
#include "netgate/route.h"
#include "netgate/rules.h"
#include "netgate/socks5.h"
#include "policy.h"
#include "util.h"

#define LISTENERS_MAX    8
#define SPLICE_PIPE_SIZE (256 * 1024)
#define SPLICE_ROUNDS    16 /* reads per callback before yielding to the loop */
#define SOCKS_TIMEOUT_S  30
#define DNS_TIMEOUT_S    "5"
#define RATE_TICK_MS     100
#define REFUSAL_KINDS    64  /* kinds of refusal aggregated at once; more are recorded singly */
#define REFUSAL_SINGLES  8   /* refusals of a kind recorded one by one per window, then counted */
#define CLOSED_TICK_MS   100 /* past the refusal budget: at most CLOSED_PER_TICK */
#define CLOSED_PER_TICK  50  /* connections closed per tick, then the listeners pause */

enum conn_state {
        C_HTTP_HEAD,
        C_SOCKS_HANDSHAKE,
        C_RESOLVING,
        C_CONNECTING,
        C_HTTP_EXCHANGE,
        C_TUNNEL,
        C_SPLICE,
        C_CLOSING,
};

struct conn;

struct splice_dir {
        struct conn *c;
        bool up; /* client to upstream */
        int src, dst;
        int pipe_r, pipe_w;
        size_t in_pipe;
        struct evbuffer *pre; /* bytes read before the switch, written first */
        bool eof, done;
        struct event *ev_rd, *ev_wr;
};

struct conn {
        struct netgate *g;
        struct conn *prev, *next;
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

        struct netgate_dns_query *dnsq;
        struct netgate_candidates cand;

        /* HTTP; status, byte counts and client_eof serve every protocol */
        struct netgate_exchange x;
        bool up_idle, up_reused;
        char up_host[NETGATE_HOST_MAX + 1];
        struct netgate_addr up_addr; /* what the kept upstream is connected to */
        uint16_t up_port;

        /* tunnels */
        bool shut_up, shut_client;
        struct splice_dir dir[2];
        int client_fd, up_fd; /* owned in C_SPLICE */
        struct netgate_linger linger;

        struct netgate_socks5 *socks;
};

struct listener {
        struct netgate *g;
        enum netgate_proto proto;
        struct evconnlistener *l;
};

/* Refusals of one kind within the current window (NETGATE_REFUSAL_WINDOW_MS). */
struct refusal_kind {
        const char *protocol; /* a literal */
        char host[NETGATE_HOST_MAX + 1];
        uint16_t port;
        char *reason, *rule, *route, *upstream;
        char address[NETGATE_ADDR_STRLEN];
        int status;
        unsigned singles; /* recorded one by one in this window */
        uint64_t count;   /* counted since this kind's last record */
        bool seen;        /* refused in this window */
};

struct host_entry {
        char name[NETGATE_HOST_MAX + 1];
        struct netgate_addr addr;
};

struct netgate {
        struct event_base *base;
        struct evdns_base *dns;
        char *sandbox;
        struct netgate_rules *rules;
        struct netgate_cidr *allow_private;
        size_t n_allow_private;
        struct host_entry *hosts;
        size_t n_hosts;
        struct policy_budget budget;
        uint64_t requests_used, bytes_used;
        struct ev_token_bucket_cfg *rate_cfg;
        struct bufferevent_rate_limit_group *rate_group;

        struct listener listeners[LISTENERS_MAX];
        size_t n_listeners;
        bool paused;
        struct event *resume_timer;

        struct conn *conns;
        size_t n_conns;

        void (*recorder)(void *ud, const struct netgate_record *rec);
        void *recorder_ud;
        struct netgate_stats stats;

        struct netgate_routes *routes;

        /* The refusal budget and the aggregation of refusals. */
        uint64_t refusals_used;
        bool closed; /* the budget is spent: new connections are closed unanswered */
        struct refusal_kind kinds[REFUSAL_KINDS];
        size_t n_kinds;
        struct event *kinds_timer;
        uint64_t closed_tick_us;
        unsigned closed_in_tick;
};

static void conn_free(struct conn *c, const char *end_reason);
static void http_read_head(struct conn *c);
static void http_pump(struct conn *c);
static void tunnel_pump(struct conn *c);
static void socks_read(struct conn *c);
static void connect_next(struct conn *c);
static void splice_run(struct splice_dir *d);

static const char *host_name(const struct conn *c)
{
        return c->d.host.name;
}

/* ---- records and budgets ---- */

static bool str_eq(const char *a, const char *b)
{
        return a == b || (a && b && STREQ(a, b));
}

static char *str_dup(const char *s)
{
        return s ? xstrdup(s) : NULL;
}

static void kind_free(struct refusal_kind *k)
{
        free(k->reason);
        free(k->rule);
        free(k->route);
        free(k->upstream);
}

static bool kind_matches(const struct refusal_kind *k, const struct netgate_record *r)
{
        return STREQ(k->protocol, r->protocol) && STREQ(k->host, r->host ? r->host : "") &&
               k->port == r->port && str_eq(k->reason, r->reason) && str_eq(k->rule, r->rule) &&
               str_eq(k->route, r->route) && k->status == r->status;
}

static void kind_emit(struct netgate *g, const struct refusal_kind *k)
{
        struct netgate_record r = {
            .sandbox = g->sandbox,
            .protocol = k->protocol,
            .host = k->host[0] ? k->host : NULL,
            .port = k->port,
            .address = k->address,
            .decision = "deny",
            .reason = k->reason,
            .rule = k->rule,
            .status = k->status,
            .route = k->route,
            .upstream = k->upstream,
            .count = k->count,
        };
        if (g->recorder)
                g->recorder(g->recorder_ud, &r);
}

/* Record what the window counted; forget kinds that were quiet in it. */
static void kinds_flush(struct netgate *g, bool all)
{
        size_t kept = 0;
        for (size_t i = 0; i < g->n_kinds; i++) {
                struct refusal_kind *k = &g->kinds[i];
                bool busy = k->seen;
                if (k->count > 0)
                        kind_emit(g, k);
                k->count = 0;
                k->singles = 0;
                k->seen = false;
                if (busy && !all) {
                        if (kept != i)
                                g->kinds[kept] = *k;
                        kept++;
                } else
                        kind_free(k);
        }
        g->n_kinds = kept;
}

static void kinds_arm(struct netgate *g)
{
        struct timeval tv = {.tv_sec = NETGATE_REFUSAL_WINDOW_MS / 1000,
                             .tv_usec = (NETGATE_REFUSAL_WINDOW_MS % 1000) * 1000};
        if (g->n_kinds > 0 && g->kinds_timer && !evtimer_pending(g->kinds_timer, NULL))
                evtimer_add(g->kinds_timer, &tv);
}

static void kinds_cb(evutil_socket_t fd, short what, void *ud)
{
        struct netgate *g = ud;
        kinds_flush(g, false);
        kinds_arm(g);
}

/* The refusal budget is spent: what was counted is recorded, then one
 * record says so, and from now on new connections are closed unanswered
 * and unrecorded (accept_cb), at a bounded rate. */
static void close_gate(struct netgate *g)
{
        kinds_flush(g, true);
        if (g->kinds_timer)
                evtimer_del(g->kinds_timer);
        g->closed = true;
        struct netgate_record r = {
            .sandbox = g->sandbox,
            .protocol = "gate",
            .host = NULL,
            .address = "",
            .decision = "deny",
            .reason = "budget_refusals",
            .rule = "network.budget.refusals",
            .count = g->refusals_used,
        };
        if (g->recorder)
                g->recorder(g->recorder_ud, &r);
}

/* Every refusal is charged to the refusal budget; repeated ones are counted
 * rather than written one line each (NETGATE_REFUSAL_WINDOW_MS). */
static void emit_refusal(struct netgate *g, struct netgate_record *r)
{
        if (g->closed)
                return;
        g->refusals_used++;
        bool last = g->budget.refusals && g->refusals_used >= g->budget.refusals;
        bool known = false;
        for (size_t i = 0; i < g->n_kinds && !last; i++) {
                struct refusal_kind *k = &g->kinds[i];
                if (!kind_matches(k, r))
                        continue;
                known = k->seen = true;
                if (k->singles >= REFUSAL_SINGLES) {
                        k->count++;
                        return;
                }
                k->singles++;
                break;
        }
        if (!known && !last && g->n_kinds < REFUSAL_KINDS) {
                struct refusal_kind *k = &g->kinds[g->n_kinds++];
                *k = (struct refusal_kind){
                    .protocol = r->protocol,
                    .port = r->port,
                    .reason = str_dup(r->reason),
                    .rule = str_dup(r->rule),
                    .route = str_dup(r->route),
                    .upstream = str_dup(r->upstream),
                    .status = r->status,
                    .singles = 1,
                    .seen = true,
                };
                snprintf(k->host, sizeof(k->host), "%s", r->host ? r->host : "");
                snprintf(k->address, sizeof(k->address), "%s", r->address ? r->address : "");
                kinds_arm(g);
        }
        if (g->recorder)
                g->recorder(g->recorder_ud, r);
        if (last)
                close_gate(g);
}

static void record(struct conn *c, bool allow, const char *reason, const char *rule)
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
        g->stats.requests++;
        if (allow)
                g->stats.allowed++;
        else
                g->stats.denied++;
        if (!allow)
                emit_refusal(g, &r);
        else if (g->recorder)
                g->recorder(g->recorder_ud, &r);
}

static void finish_in_flight(struct conn *c, const char *end_reason)
{
        if (!c->in_flight)
                return;
        c->in_flight = false;
        record(c, true, end_reason, c->rule);
}

static size_t budget_room(const struct netgate *g, size_t want)
{
        if (g->budget.bytes == 0)
                return want;
        if (g->bytes_used >= g->budget.bytes)
                return 0;
        uint64_t left = g->budget.bytes - g->bytes_used;
        return left < want ? (size_t)left : want;
}

static bool budget_bytes_exhausted(const struct netgate *g)
{
        return g->budget.bytes != 0 && g->bytes_used >= g->budget.bytes;
}

/* ---- closing ---- */

/* A freed bufferevent is finalized later, from the loop; leave the rate
 * group now, so that the group can be freed before the loop runs again. */
static void bev_free(struct bufferevent *bev)
{
        if (bev)
                bufferevent_remove_from_rate_limit_group(bev);
        bufferevent_free(bev);
}

static void drop_upstream(struct conn *c)
{
        if (c->up) {
                bev_free(c->up);
                c->up = NULL;
        }
        c->up_idle = false;
        c->up_reused = false;
        c->up_host[0] = '\0';
}

static void splice_dir_done(struct splice_dir *d)
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
        d->pre = NULL;
        d->pipe_r = d->pipe_w = -1;
}

static void resume_listeners(struct netgate *g)
{
        if (!g->paused || g->n_conns >= NETGATE_MAX_CONNECTIONS)
                return;
        g->paused = false;
        for (size_t i = 0; i < g->n_listeners; i++)
                evconnlistener_enable(g->listeners[i].l);
}

static void pause_listeners(struct netgate *g)
{
        if (g->paused)
                return;
        g->paused = true;
        for (size_t i = 0; i < g->n_listeners; i++)
                evconnlistener_disable(g->listeners[i].l);
}

static void conn_free(struct conn *c, const char *end_reason)
{
        struct netgate *g = c->g;
        finish_in_flight(c, end_reason);
        /* A query in flight finishes and frees itself. */
        netgate_dns_detach(c->dnsq);
        c->dnsq = NULL;
        if (c->client)
                bev_free(c->client);
        drop_upstream(c);
        for (int i = 0; i < 2; i++)
                splice_dir_done(&c->dir[i]);
        if (c->client_fd >= 0)
                close(c->client_fd);
        if (c->up_fd >= 0)
                close(c->up_fd);
        free(c->x.reqp);
        free(c->x.respp);
        free(c->socks);
        if (c->prev)
                c->prev->next = c->next;
        else
                g->conns = c->next;
        if (c->next)
                c->next->prev = c->prev;
        g->n_conns--;
        g->stats.active = g->n_conns;
        free(c);
        resume_listeners(g);
}

/* Answer, then close without resetting (netgate_linger_start()). */
static void close_after_flush(struct conn *c)
{
        drop_upstream(c);
        c->state = C_CLOSING;
        if (netgate_linger_start(&c->linger, c->client, c->x.client_eof))
                conn_free(c, NULL);
}

/* ---- refusals ---- */

static void socks_answer(struct conn *c, uint8_t rep)
{
        uint8_t msg[22];
        size_t n = netgate_socks5_reply(rep, NULL, 0, msg);
        c->x.status = rep;
        bufferevent_write(c->client, msg, n);
}

/* A policy refusal: 403 (429 for budgets) or SOCKS5 "not allowed". */
static void deny(struct conn *c, int status, const char *reason, const char *rule)
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
static void fail_upstream(struct conn *c, const char *reason, int err)
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

static bool check_budget(struct conn *c)
{
        struct netgate *g = c->g;
        if (g->budget.requests && g->requests_used >= g->budget.requests) {
                deny(c, 429, "budget_requests", "network.budget.requests");
                return false;
        }
        if (budget_bytes_exhausted(g)) {
                deny(c, 429, "budget_bytes", "network.budget.bytes");
                return false;
        }
        g->requests_used++;
        return true;
}

static void begin_request(struct conn *c, const char *protocol, const char *method)
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
static bool decide(struct conn *c, const char *host, size_t host_len, uint16_t port)
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

/* Every answer is checked, and one private answer refuses the name: a name
 * that resolves to a public and a private address at once is a rebinding
 * attempt, not a name to pick a safe answer from. */
static void check_and_connect(struct conn *c)
{
        for (size_t i = 0; i < c->cand.n; i++) {
                const char *range = netgate_addr_check(&c->cand.addr[i], c->g->allow_private,
                                                       c->g->n_allow_private);
                if (range) {
                        c->addr = c->cand.addr[i];
                        c->have_addr = true;
                        deny(c, 403, "private_address", range);
                        return;
                }
        }
        c->cand.i = 0;
        connect_next(c);
}

static void dns_answer(void *ud, int err, struct evutil_addrinfo *res)
{
        struct conn *c = ud;
        c->dnsq = NULL;
        netgate_candidates_add_answers(&c->cand, res);
        if (err || c->cand.n == 0) {
                fail_upstream(c, "dns_failed", 0);
                return;
        }
        check_and_connect(c);
}

static int ensure_dns(struct netgate *g)
{
        if (g->dns)
                return 0;
        g->dns = evdns_base_new(g->base, EVDNS_BASE_DISABLE_WHEN_INACTIVE);
        if (!g->dns)
                return -ENOMEM;
        evdns_base_set_option(g->dns, "timeout:", DNS_TIMEOUT_S);
        evdns_base_set_option(g->dns, "attempts:", "2");
        return 0;
}

static int load_resolv_conf(struct netgate *g)
{
        int r = ensure_dns(g);
        if (r < 0)
                return r;
        /* Not DNS_OPTION_SEARCH: a search domain would make the gate resolve
         * a different name from the one it checked. */
        evdns_base_resolv_conf_parse(g->dns,
                                     DNS_OPTION_NAMESERVERS | DNS_OPTION_MISC |
                                         DNS_OPTION_HOSTSFILE | DNS_OPTION_NAMESERVERS_NO_DEFAULT,
                                     "/etc/resolv.conf");
        return 0;
}

static void resolve(struct conn *c)
{
        struct netgate *g = c->g;
        c->state = C_RESOLVING;
        c->cand.n = c->cand.i = 0;
        /* Reading on (bytes wait in the bounded input) notices a client
         * that leaves while the gate resolves and connects. */
        bufferevent_enable(c->client, EV_READ);

        /* Numeric spellings are never handed to a resolver. */
        if (c->d.host.kind != NETGATE_HOST_NAME) {
                netgate_candidates_add(&c->cand, &c->d.host.addr);
                check_and_connect(c);
                return;
        }
        for (size_t i = 0; i < g->n_hosts; i++)
                if (STREQ(g->hosts[i].name, c->d.host.name)) {
                        netgate_candidates_add(&c->cand, &g->hosts[i].addr);
                        check_and_connect(c);
                        return;
                }
        if (!g->dns && load_resolv_conf(g) < 0) {
                fail_upstream(c, "dns_failed", ENOMEM);
                return;
        }
        netgate_dns_resolve(g->dns, c->d.host.name, dns_answer, c, &c->dnsq);
}

/* ---- connecting ---- */

static void up_read_cb(struct bufferevent *bev, void *ud);
static void up_write_cb(struct bufferevent *bev, void *ud);
static void up_event_cb(struct bufferevent *bev, short what, void *ud);

static void setup_bev(struct netgate *g, struct bufferevent *bev)
{
        bufferevent_setwatermark(bev, EV_READ, 0, NETGATE_BUF_HIGH);
        if (g->rate_group)
                bufferevent_add_to_rate_limit_group(bev, g->rate_group);
}

static void connect_next(struct conn *c)
{
        struct netgate *g = c->g;
        struct timeval tv;
        while (c->cand.i < c->cand.n) {
                c->addr = c->cand.addr[c->cand.i++];
                c->have_addr = true;
                struct sockaddr_storage ss;
                socklen_t len = netgate_addr_to_sockaddr(&c->addr, c->port, &ss);
                int fd =
                    socket(c->addr.family, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, IPPROTO_TCP);
                if (fd < 0) {
                        c->x.last_errno = errno;
                        continue;
                }
                struct bufferevent *bev = bufferevent_socket_new(
                    g->base, fd, BEV_OPT_CLOSE_ON_FREE | BEV_OPT_DEFER_CALLBACKS);
                if (!bev) {
                        close(fd);
                        c->x.last_errno = ENOMEM;
                        continue;
                }
                bufferevent_setcb(bev, up_read_cb, up_write_cb, up_event_cb, c);
                bufferevent_set_timeouts(bev, NULL, netgate_secs(&tv, NETGATE_CONNECT_TIMEOUT_S));
                if (bufferevent_socket_connect(bev, (struct sockaddr *)&ss, (int)len) < 0) {
                        c->x.last_errno = errno ? errno : ECONNREFUSED;
                        bev_free(bev);
                        continue;
                }
                c->up = bev;
                c->state = C_CONNECTING;
                return;
        }
        fail_upstream(c, "upstream_failed", c->x.last_errno);
}

static void start_exchange(struct conn *c);
static void start_tunnel(struct conn *c, const void *reply, size_t n);

static void on_connected(struct conn *c)
{
        struct timeval tv;
        int fd = bufferevent_getfd(c->up);
        c->x.last_errno = 0;
        netgate_set_nodelay(fd);
        setup_bev(c->g, c->up);
        bufferevent_set_timeouts(c->up, netgate_secs(&tv, NETGATE_IO_TIMEOUT_S),
                                 netgate_secs(&tv, NETGATE_IO_TIMEOUT_S));

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

static void up_event_cb(struct bufferevent *bev, short what, void *ud)
{
        struct conn *c = ud;
        int err = EVUTIL_SOCKET_ERROR();

        if (c->state == C_CONNECTING) {
                if (what & BEV_EVENT_CONNECTED) {
                        on_connected(c);
                        return;
                }
                c->x.last_errno =
                    (what & BEV_EVENT_TIMEOUT) ? ETIMEDOUT : (err ? err : ECONNREFUSED);
                bev_free(c->up);
                c->up = NULL;
                connect_next(c);
                return;
        }
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
        if (c->state == C_TUNNEL) {
                if (what & BEV_EVENT_EOF) {
                        c->x.up_eof = true;
                        tunnel_pump(c);
                        return;
                }
                conn_free(c, (what & BEV_EVENT_TIMEOUT) ? "timeout" : NULL);
                return;
        }
}

static void up_read_cb(struct bufferevent *bev, void *ud)
{
        struct conn *c = ud;
        if (c->state == C_HTTP_EXCHANGE)
                http_pump(c);
        else if (c->state == C_TUNNEL)
                tunnel_pump(c);
        else if (c->state == C_HTTP_HEAD || c->state == C_CLOSING)
                drop_upstream(c); /* bytes from an idle upstream: not a response to anything */
}

static void up_write_cb(struct bufferevent *bev, void *ud)
{
        struct conn *c = ud;
        if (c->state == C_HTTP_EXCHANGE)
                http_pump(c);
        else if (c->state == C_TUNNEL)
                tunnel_pump(c);
}

/* ---- HTTP ---- */

static void http_bad_request(struct conn *c, int r)
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

static void http_request(struct conn *c)
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

static void http_read_head(struct conn *c)
{
        int r = netgate_read_head(c->x.reqp, bufferevent_get_input(c->client));
        if (r < 0)
                http_bad_request(c, r);
        else if (r > 0)
                http_request(c);
}

static void write_request_head(struct conn *c)
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

static void start_exchange(struct conn *c)
{
        c->state = C_HTTP_EXCHANGE;
        write_request_head(c);
        netgate_exchange_start(&c->x, c->client, c->up);
}

static void exchange_done(void *ud)
{
        struct conn *c = ud;
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
        struct conn *c = ud;
        if (netgate_exchange_retryable(&c->x, c->up_reused)) {
                drop_upstream(c);
                c->cand.n = 0;
                netgate_candidates_add(&c->cand, &c->addr);
                c->cand.i = 0;
                c->state = C_CONNECTING;
                connect_next(c);
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

static void http_pump(struct conn *c)
{
        netgate_exchange_pump(&c->x, c->client, c->up);
}

/* ---- tunnels ---- */

static int relay(struct conn *c, struct evbuffer *src, struct evbuffer *dst, bool up)
{
        size_t dlen = evbuffer_get_length(dst), slen = evbuffer_get_length(src);
        size_t room = dlen < NETGATE_BUF_HIGH ? NETGATE_BUF_HIGH - dlen : 0;
        size_t n = budget_room(c->g, slen < room ? slen : room);
        if (n > 0) {
                evbuffer_remove_buffer(src, dst, n);
                netgate_exchange_account(&c->x, up, n);
        }
        if (n == 0 && slen > 0 && room > 0)
                return -EDQUOT;
        return 0;
}

static void tunnel_pump(struct conn *c)
{
        struct evbuffer *cin = bufferevent_get_input(c->client);
        struct evbuffer *cout = bufferevent_get_output(c->client);
        struct evbuffer *uin = bufferevent_get_input(c->up);
        struct evbuffer *uout = bufferevent_get_output(c->up);

        if (relay(c, cin, uout, true) < 0 || relay(c, uin, cout, false) < 0) {
                conn_free(c, "budget_bytes");
                return;
        }
        if (c->x.client_eof && !c->shut_up && evbuffer_get_length(cin) == 0 &&
            evbuffer_get_length(uout) == 0) {
                shutdown(bufferevent_getfd(c->up), SHUT_WR);
                c->shut_up = true;
        }
        if (c->x.up_eof && !c->shut_client && evbuffer_get_length(uin) == 0 &&
            evbuffer_get_length(cout) == 0) {
                shutdown(bufferevent_getfd(c->client), SHUT_WR);
                c->shut_client = true;
        }
        if (c->shut_up && c->shut_client) {
                conn_free(c, NULL);
                return;
        }
        if (!c->x.client_eof && evbuffer_get_length(uout) < NETGATE_BUF_HIGH)
                bufferevent_enable(c->client, EV_READ);
        else
                bufferevent_disable(c->client, EV_READ);
        if (!c->x.up_eof && evbuffer_get_length(cout) < NETGATE_BUF_HIGH)
                bufferevent_enable(c->up, EV_READ);
        else
                bufferevent_disable(c->up, EV_READ);
}

static void splice_done_check(struct conn *c)
{
        if (c->dir[0].done && c->dir[1].done)
                conn_free(c, NULL);
}

static void splice_cb(evutil_socket_t fd, short what, void *ud)
{
        splice_run(ud);
}

static void splice_run(struct splice_dir *d)
{
        struct conn *c = d->c;
        for (int rounds = 0;;) {
                if (evbuffer_get_length(d->pre) > 0) {
                        int n = evbuffer_write(d->pre, d->dst);
                        if (n >= 0)
                                continue;
                        if (errno == EINTR)
                                continue;
                        if (errno == EAGAIN || errno == EWOULDBLOCK) {
                                event_add(d->ev_wr, NULL);
                                return;
                        }
                        conn_free(c, NULL);
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
                                event_add(d->ev_wr, NULL);
                                return;
                        }
                        conn_free(c, NULL);
                        return;
                }
                if (d->eof) {
                        shutdown(d->dst, SHUT_WR);
                        d->done = true;
                        splice_done_check(c);
                        return;
                }
                if (rounds++ >= SPLICE_ROUNDS) {
                        event_add(d->ev_rd, NULL);
                        return;
                }
                size_t want = budget_room(c->g, SPLICE_PIPE_SIZE);
                if (want == 0) {
                        conn_free(c, "budget_bytes");
                        return;
                }
                ssize_t n =
                    splice(d->src, NULL, d->pipe_w, NULL, want, SPLICE_F_MOVE | SPLICE_F_NONBLOCK);
                if (n > 0) {
                        d->in_pipe += (size_t)n;
                        netgate_exchange_account(&c->x, d->up, (size_t)n);
                        continue;
                }
                if (n == 0) {
                        d->eof = true;
                        continue;
                }
                if (errno == EINTR)
                        continue;
                if (errno == EAGAIN || errno == EWOULDBLOCK) {
                        event_add(d->ev_rd, NULL);
                        return;
                }
                conn_free(c, NULL);
                return;
        }
}

/* Hand both sockets to a splice() relay: bytes go socket to pipe to socket
 * inside the kernel. Returns <0 (and changes nothing) when pipes are short. */
static int start_splice(struct conn *c, const void *reply, size_t n)
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
        int cfd = fcntl(bufferevent_getfd(c->client), F_DUPFD_CLOEXEC, 3);
        int ufd = cfd < 0 ? -1 : fcntl(bufferevent_getfd(c->up), F_DUPFD_CLOEXEC, 3);
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
        c->client_fd = cfd;
        c->up_fd = ufd;
        for (int i = 0; i < 2; i++) {
                struct splice_dir *d = &c->dir[i];
                d->c = c;
                d->up = i == 0;
                d->src = d->up ? cfd : ufd;
                d->dst = d->up ? ufd : cfd;
                d->pipe_r = pipes[i][0];
                d->pipe_w = pipes[i][1];
                d->pre = evbuffer_new();
                d->ev_rd = event_new(c->g->base, d->src, EV_READ, splice_cb, d);
                d->ev_wr = event_new(c->g->base, d->dst, EV_WRITE, splice_cb, d);
        }
        /* What the bufferevents already read goes first, in order: the
         * client's early bytes (a TLS ClientHello sent with CONNECT), and the
         * reply followed by any upstream greeting. */
        struct evbuffer *cin = bufferevent_get_input(c->client);
        struct evbuffer *uin = bufferevent_get_input(c->up);
        netgate_exchange_account(&c->x, true, evbuffer_get_length(cin));
        netgate_exchange_account(&c->x, false, evbuffer_get_length(uin));
        evbuffer_add_buffer(c->dir[0].pre, cin);
        evbuffer_add(c->dir[1].pre, reply, n);
        evbuffer_add_buffer(c->dir[1].pre, uin);
        bev_free(c->client);
        bev_free(c->up);
        c->client = c->up = NULL;
        c->state = C_SPLICE;
        /* Both directions start from the loop, not from here: the caller
         * still holds the connection. */
        event_active(c->dir[0].ev_rd, EV_READ, 1);
        event_active(c->dir[1].ev_rd, EV_READ, 1);
        return 0;
}

static void start_tunnel(struct conn *c, const void *reply, size_t n)
{
        c->state = C_TUNNEL;
        c->shut_up = c->shut_client = false;
        c->x.client_eof = c->x.up_eof = false;
        if (!c->g->rate_group && start_splice(c, reply, n) == 0)
                return;
        bufferevent_set_timeouts(c->client, NULL, NULL);
        bufferevent_set_timeouts(c->up, NULL, NULL);
        bufferevent_write(c->client, reply, n);
        bufferevent_enable(c->up, EV_READ | EV_WRITE);
        tunnel_pump(c);
}

/* ---- SOCKS5 ---- */

static void socks_read(struct conn *c)
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
        struct conn *c = ud;
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
        case C_TUNNEL:
                tunnel_pump(c);
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
        struct conn *c = ud;
        switch (c->state) {
        case C_HTTP_EXCHANGE:
                http_pump(c);
                break;
        case C_TUNNEL:
                tunnel_pump(c);
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
        struct conn *c = ud;
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
        case C_TUNNEL:
                tunnel_pump(c);
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

static void accept_cb(struct evconnlistener *l, evutil_socket_t fd, struct sockaddr *sa, int len,
                      void *ud)
{
        struct listener *lst = ud;
        struct netgate *g = lst->g;
        struct timeval tv;
        if (g->n_conns >= NETGATE_MAX_CONNECTIONS) {
                close(fd);
                pause_listeners(g);
                return;
        }
        if (g->closed) {
                /* Past the refusal budget a connection costs the host one
                 * accept and one close, and at most CLOSED_PER_TICK of them
                 * per tick: the listeners pause for the rest of it. */
                uint64_t now = now_monotonic_us();
                close(fd);
                g->stats.closed++;
                if (now - g->closed_tick_us >= CLOSED_TICK_MS * 1000) {
                        g->closed_tick_us = now;
                        g->closed_in_tick = 0;
                }
                if (++g->closed_in_tick >= CLOSED_PER_TICK) {
                        uint64_t left = g->closed_tick_us + CLOSED_TICK_MS * 1000 - now;
                        struct timeval wait = {.tv_sec = 0, .tv_usec = (suseconds_t)left};
                        pause_listeners(g);
                        evtimer_add(g->resume_timer, &wait);
                }
                return;
        }
        if (lst->proto == NETGATE_PROTO_ROUTES) {
                netgate_routes_accept(g->routes, fd);
                return;
        }
        struct bufferevent *bev =
            bufferevent_socket_new(g->base, fd, BEV_OPT_CLOSE_ON_FREE | BEV_OPT_DEFER_CALLBACKS);
        if (!bev) {
                close(fd);
                return;
        }
        netgate_set_nodelay(fd);
        struct conn *c = xcalloc(1, sizeof(*c));
        c->g = g;
        c->proto = lst->proto;
        c->client = bev;
        c->x.g = g;
        c->x.ops = &http_ops;
        c->x.ud = c;
        c->client_fd = c->up_fd = -1;
        for (int i = 0; i < 2; i++)
                c->dir[i].pipe_r = c->dir[i].pipe_w = -1;
        c->next = g->conns;
        if (g->conns)
                g->conns->prev = c;
        g->conns = c;
        g->n_conns++;
        g->stats.connections++;
        g->stats.active = g->n_conns;
        if (g->n_conns >= NETGATE_MAX_CONNECTIONS)
                pause_listeners(g);

        setup_bev(g, bev);
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

static void resume_cb(evutil_socket_t fd, short what, void *ud)
{
        resume_listeners(ud);
}

static void accept_error_cb(struct evconnlistener *l, void *ud)
{
        struct listener *lst = ud;
        struct netgate *g = lst->g;
        int err = EVUTIL_SOCKET_ERROR();
        /* Out of descriptors or memory: the listener would report the same
         * pending connection in a busy loop. Back off for a second. */
        if (err == EMFILE || err == ENFILE || err == ENOBUFS || err == ENOMEM) {
                struct timeval tv;
                pause_listeners(g);
                evtimer_add(g->resume_timer, netgate_secs(&tv, 1));
        }
}

/* ---- public ---- */

struct netgate *netgate_new(struct event_base *base, const struct policy *p, const char *sandbox_id,
                            struct al_error *err)
{
        if (!base || !p) {
                al_error_set(err, EINVAL, "creating the network gate");
                return NULL;
        }
        struct netgate *g = xcalloc(1, sizeof(*g));
        g->base = base;
        g->sandbox = xstrdup(sandbox_id ? sandbox_id : "");
        if (netgate_rules_new(p->net_allow, p->n_net_allow, p->net_deny, p->n_net_deny, &g->rules,
                              err) < 0)
                return netgate_free(g);

        g->allow_private = xcalloc(p->n_net_allow_private, sizeof(*g->allow_private));
        for (size_t i = 0; i < p->n_net_allow_private; i++) {
                if (netgate_cidr_parse(p->net_allow_private[i], &g->allow_private[i]) < 0) {
                        char esc[128];
                        const char *s = p->net_allow_private[i] ? p->net_allow_private[i] : "";
                        netgate_escape(s, strlen(s), esc, sizeof(esc));
                        al_error_set(err, 0,
                                     "network.allowPrivate[%zu] \"%s\": not an address or CIDR "
                                     "range",
                                     i, esc);
                        return netgate_free(g);
                }
        }
        g->n_allow_private = p->n_net_allow_private;

        g->hosts = xcalloc(p->n_net_hosts, sizeof(*g->hosts));
        for (size_t i = 0; i < p->n_net_hosts; i++) {
                const struct policy_kv *kv = &p->net_hosts[i];
                struct netgate_host h;
                char esc[128];
                const char *k = kv->key ? kv->key : "";
                netgate_escape(k, strlen(k), esc, sizeof(esc));
                if (netgate_host_parse(k, strlen(k), &h) < 0 || h.kind != NETGATE_HOST_NAME) {
                        al_error_set(err, 0, "network.hosts \"%s\": not a host name", esc);
                        return netgate_free(g);
                }
                if (netgate_addr_parse(kv->value, &g->hosts[i].addr) < 0) {
                        al_error_set(err, 0, "network.hosts \"%s\": not an IP address", esc);
                        return netgate_free(g);
                }
                memcpy(g->hosts[i].name, h.name, sizeof(h.name));
        }
        g->n_hosts = p->n_net_hosts;

        g->budget = p->budget;
        if (g->budget.rate > 0) {
                uint64_t per_tick = g->budget.rate / (1000 / RATE_TICK_MS);
                if (per_tick == 0)
                        per_tick = 1;
                if (per_tick > EV_RATE_LIMIT_MAX)
                        per_tick = EV_RATE_LIMIT_MAX;
                struct timeval tick = {0, RATE_TICK_MS * 1000};
                g->rate_cfg = ev_token_bucket_cfg_new((size_t)per_tick, (size_t)per_tick,
                                                      (size_t)per_tick, (size_t)per_tick, &tick);
                if (g->rate_cfg)
                        g->rate_group = bufferevent_rate_limit_group_new(base, g->rate_cfg);
                if (!g->rate_group) {
                        al_error_set(err, ENOMEM, "network.budget.rate");
                        return netgate_free(g);
                }
        }
        g->resume_timer = evtimer_new(base, resume_cb, g);
        g->kinds_timer = evtimer_new(base, kinds_cb, g);
        if (!g->resume_timer || !g->kinds_timer) {
                al_error_set(err, ENOMEM, "creating the network gate");
                return netgate_free(g);
        }
        return g;
}

int netgate_add_listener(struct netgate *g, enum netgate_proto proto, int listen_fd,
                         struct al_error *err)
{
        int accepting = 0;
        socklen_t len = sizeof(accepting);
        if (g->n_listeners >= LISTENERS_MAX)
                return al_error_set(err, ENOSPC, "adding a gate listener");
        if (proto != NETGATE_PROTO_HTTP && proto != NETGATE_PROTO_SOCKS5 &&
            !(proto == NETGATE_PROTO_ROUTES && g->routes))
                return al_error_set(err, EINVAL, "adding a gate listener");
        if (getsockopt(listen_fd, SOL_SOCKET, SO_ACCEPTCONN, &accepting, &len) < 0)
                return al_error_set(err, errno, "adding gate listener fd %d", listen_fd);
        if (!accepting)
                return al_error_set(err, EINVAL, "adding gate listener fd %d: not listening",
                                    listen_fd);
        int fl = fcntl(listen_fd, F_GETFL);
        if (fl < 0 || fcntl(listen_fd, F_SETFL, fl | O_NONBLOCK) < 0 ||
            fcntl(listen_fd, F_SETFD, FD_CLOEXEC) < 0)
                return al_error_set(err, errno, "adding gate listener fd %d", listen_fd);

        struct listener *lst = &g->listeners[g->n_listeners];
        lst->g = g;
        lst->proto = proto;
        lst->l = evconnlistener_new(g->base, accept_cb, lst,
                                    LEV_OPT_CLOSE_ON_FREE | LEV_OPT_CLOSE_ON_EXEC, 0, listen_fd);
        if (!lst->l)
                return al_error_set(err, ENOMEM, "adding gate listener fd %d", listen_fd);
        evconnlistener_set_error_cb(lst->l, accept_error_cb);
        if (g->paused)
                evconnlistener_disable(lst->l);
        g->n_listeners++;
        return 0;
}

void netgate_set_recorder(struct netgate *g, void (*fn)(void *ud, const struct netgate_record *rec),
                          void *ud)
{
        g->recorder = fn;
        g->recorder_ud = ud;
}

int netgate_set_routes(struct netgate *g, const struct policy_route *routes, size_t n,
                       const struct secrets *s, const struct secrets_vars *vars,
                       struct al_error *err)
{
        struct netgate_routes *rs = NULL;
        int r = netgate_routes_new(g, g->base, routes, n, s, vars, &rs, err);
        if (r < 0)
                return r;
        netgate_routes_free(g->routes);
        g->routes = rs;
        return 0;
}

int netgate_set_nameserver(struct netgate *g, const char *server, struct al_error *err)
{
        int r = ensure_dns(g);
        if (r < 0)
                return al_error_set(err, -r, "setting the gate's name server");
        evdns_base_clear_nameservers_and_suspend(g->dns);
        r = evdns_base_nameserver_ip_add(g->dns, server);
        evdns_base_resume(g->dns);
        if (r != 0)
                return al_error_set(err, 0, "name server \"%s\": not an IP address[:port]",
                                    server ? server : "");
        return 0;
}

void netgate_get_stats(const struct netgate *g, struct netgate_stats *ret)
{
        *ret = g->stats;
        ret->active = g->n_conns;
}

struct netgate *netgate_free(struct netgate *g)
{
        if (!g)
                return NULL;
        while (g->conns)
                conn_free(g->conns, "shutdown");
        g->routes = netgate_routes_free(g->routes);
        /* What was counted and not yet recorded. */
        kinds_flush(g, true);
        if (g->kinds_timer)
                event_free(g->kinds_timer);
        for (size_t i = 0; i < g->n_listeners; i++)
                evconnlistener_free(g->listeners[i].l);
        if (g->resume_timer)
                event_free(g->resume_timer);
        if (g->dns)
                evdns_base_free(g->dns, 1);
        if (g->rate_group)
                bufferevent_rate_limit_group_free(g->rate_group);
        if (g->rate_cfg)
                ev_token_bucket_cfg_free(g->rate_cfg);
        netgate_rules_free(g->rules);
        free(g->allow_private);
        free(g->hosts);
        free(g->sandbox);
        free(g);
        return NULL;
}

/* ---- for the routes engine ---- */

struct evdns_base *netgate_resolver(struct netgate *g)
{
        if (!g->dns && load_resolv_conf(g) < 0)
                return NULL;
        return g->dns;
}

bool netgate_fixed_host(const struct netgate *g, const char *name, struct netgate_addr *ret)
{
        for (size_t i = 0; i < g->n_hosts; i++)
                if (STREQ(g->hosts[i].name, name)) {
                        *ret = g->hosts[i].addr;
                        return true;
                }
        return false;
}

const char *netgate_address_refused(const struct netgate *g, const struct netgate_addr *a)
{
        return netgate_addr_check(a, g->allow_private, g->n_allow_private);
}

void netgate_emit(struct netgate *g, struct netgate_record *rec)
{
        rec->sandbox = g->sandbox;
        g->stats.requests++;
        if (STREQ(rec->decision, "allow"))
                g->stats.allowed++;
        else {
                g->stats.denied++;
                emit_refusal(g, rec);
                return;
        }
        if (g->recorder)
                g->recorder(g->recorder_ud, rec);
}

void netgate_conn_count(struct netgate *g, int delta)
{
        if (delta > 0) {
                g->n_conns++;
                g->stats.connections++;
                if (g->n_conns >= NETGATE_MAX_CONNECTIONS)
                        pause_listeners(g);
        } else {
                g->n_conns--;
                resume_listeners(g);
        }
        g->stats.active = g->n_conns;
}

const char *netgate_budget_take(struct netgate *g)
{
        if (g->closed)
                return "budget_refusals";
        if (g->budget.requests && g->requests_used >= g->budget.requests)
                return "budget_requests";
        if (budget_bytes_exhausted(g))
                return "budget_bytes";
        g->requests_used++;
        return NULL;
}

size_t netgate_budget_allows(const struct netgate *g, size_t want)
{
        return budget_room(g, want);
}

void netgate_count_bytes(struct netgate *g, bool up, size_t n)
{
        g->bytes_used += n;
        if (up)
                g->stats.bytes_up += n;
        else
                g->stats.bytes_down += n;
}

void netgate_setup_bufferevent(struct netgate *g, struct bufferevent *bev)
{
        setup_bev(g, bev);
}
