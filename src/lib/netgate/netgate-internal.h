/* SPDX-License-Identifier: Apache-2.0 */
#pragma once

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "netgate/addr.h"
#include "netgate/netgate.h"
#include "netgate/rules.h"
#include "netgate/sentinel.h"
#include "policy.h"

/* The network gate's internals, shared by its files and by nothing else
 * (docs/internals/netgate.md). The layers, bottom first; each calls only
 * the ones below it:
 *
 *   ledger.c    the gate's state: records, refusal aggregation and the
 *               refusal budget, request and byte budgets, stats, the
 *               connection count that pauses the listeners
 *   upstream.c  the upstream engine: resolve, check every answer, connect
 *               to exactly the checked address; tls.c is its optional layer
 *   exchange.c  one HTTP request/response relay over a connected upstream
 *   tunnel.c    a CONNECT or SOCKS5 tunnel: bufferevent relay or splice()
 *   client.c    the HTTP client: one sandbox connection, its callbacks, its
 *               kept upstream, the retry, the exchange and the close
 *   proxy.c     front-ends: the HTTP proxy, CONNECT and SOCKS5
 *   route.c     front-end: the routes (route-def.c: one route's definition)
 *   fetch.c     the host's own requests through a route, over a socket pair
 *               into route.c
 *   gate.c      the public API (netgate.h): creation, listeners, accept */

struct bufferevent;
struct bufferevent_rate_limit_group;
struct ev_token_bucket_cfg;
struct event;
struct event_base;
struct evconnlistener;
struct evbuffer;
struct evdns_base;
struct netgate_ca;
struct netgate_conn;
struct netgate_mitm;
struct netgate_parent;
struct netgate_route;
typedef struct ssl_ctx_st SSL_CTX;
struct netgate_dns_server;
struct netgate_names;
struct netgate_relay;
struct netgate_relay_expect;
struct netgate_routes;
struct netgate_tls;
struct netgate_rules;
struct secrets;
struct secrets_vars;

#define NETGATE_BUF_HIGH          (256 * 1024) /* per direction, per side */
#define NETGATE_HEAD_TIMEOUT_S    60
#define NETGATE_IDLE_UP_TIMEOUT_S 60
#define NETGATE_LISTENERS_MAX     8
/* Kinds of refusal aggregated at once (more are recorded singly), and how
 * many of a kind are recorded one by one per window before being counted. */
#define NETGATE_REFUSAL_KINDS   64
#define NETGATE_REFUSAL_SINGLES 8

struct timeval;

struct netgate_listener {
        struct netgate *g;
        enum netgate_proto proto;
        struct evconnlistener *l;
};

/* Refusals of one kind within the current window (NETGATE_REFUSAL_WINDOW_MS). */
struct netgate_refusal_kind {
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

struct netgate_host_entry {
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
        struct netgate_host_entry *hosts;
        size_t n_hosts;
        struct policy_budget budget;
        uint64_t requests_used, bytes_used;
        struct ev_token_bucket_cfg *rate_cfg;
        struct bufferevent_rate_limit_group *rate_group;

        struct netgate_listener listeners[NETGATE_LISTENERS_MAX];
        size_t n_listeners;
        bool paused;
        struct event *resume_timer;

        struct netgate_conn *conns; /* the proxy's (proxy.c) */
        size_t n_conns;             /* the proxy's and the routes' */

        void (*recorder)(void *ud, const struct netgate_record *rec);
        void *recorder_ud;
        struct netgate_stats stats;

        /* network.onUnlisted "ask", the asker, network.denyReasons (copied). */
        bool ask;
        bool direct_path; /* network.directPath (transparent.c) */
        bool relay_only;  /* no connection ever takes the direct path (transparent.c) */
        struct netgate_asker asker;
        struct policy_kv *deny_reasons;
        size_t n_deny_reasons;

        struct netgate_routes *routes;
        const struct netgate_ca *ca; /* the sandbox's TLS authority (netgate_set_ca()) */
        struct netgate_mitm *mitms;  /* terminated TLS connections (mitm.c) */
        struct netgate_sentinels sentinels;
        struct netgate_parent *parent; /* network.parentProxy; NULL: direct */
        const struct secrets *secrets; /* the sentinels' values: the answers are scrubbed */
        struct netgate_fetch *fetches; /* the host's requests in flight (fetch.c) */

        /* The refusal budget and the aggregation of refusals. */
        uint64_t refusals_used;
        bool closed; /* the budget is spent: new connections are closed unanswered */
        struct netgate_refusal_kind kinds[NETGATE_REFUSAL_KINDS];
        size_t n_kinds;
        struct event *kinds_timer;
        uint64_t closed_tick_us;
        unsigned closed_in_tick;

        /* Transparent mode (dns-server.c, transparent.c): the name server
         * and the addresses it answered, each with its name. */
        struct netgate_dns_server *dns_server;
        struct netgate_names *names;
        struct netgate_relay *relays; /* transparent-relay.c */
        struct evconnlistener *relay_listener;
        uint16_t relay_port;
        struct netgate_relay_expect *expects; /* NETGATE_MAX_CONNECTIONS */
};

/* ---- dns-server.c ---- */

/* Stop serving DNS, drop the queries in flight. */
void netgate_dns_server_free(struct netgate *g);
/* Serve DNS over TCP on `fd` (a relayed connection to 127.0.0.1:53), taken
 * on success; -ENOSPC with no name server or too many connections. */
int netgate_dns_tcp_accept(struct netgate *g, int fd);

/* ---- transparent-relay.c ---- */

/* The name server and the relays, each relay recorded (netgate_free()). */
void netgate_transparent_free(struct netgate *g);
/* The rules changed: close each relay (and forget each announced one) the
 * new rules refuse, each recorded with reason "revoked"; how many closed. */
size_t netgate_relay_recheck(struct netgate *g);

/* ---- ledger.c ---- */

/* Fill in the sandbox, count the decision and hand it to the recorder;
 * refusals are charged to the refusal budget and aggregated. */
void netgate_emit(struct netgate *g, struct netgate_record *rec);
/* Record what the refusal window counted; `all` forgets every kind. */
void netgate_refusals_flush(struct netgate *g, bool all);
/* The kinds_timer's callback. */
void netgate_refusals_tick(int fd, short what, void *ud);
/* A connection opened (+1) or closed (-1): counts, and pauses or resumes the
 * listeners at NETGATE_MAX_CONNECTIONS. */
void netgate_conn_count(struct netgate *g, int delta);
void netgate_pause_listeners(struct netgate *g);
void netgate_resume_listeners(struct netgate *g);
/* Take one request from the budget: NULL, or the budget that is spent
 * ("budget_requests", "budget_bytes", or "budget_refusals" once the gate
 * is closed). */
const char *netgate_budget_take(struct netgate *g);
/* The policy field that names a spent budget. */
const char *netgate_budget_rule(const char *spent);
/* How many of `want` bytes the byte budget still allows. */
size_t netgate_budget_allows(const struct netgate *g, size_t want);
void netgate_count_bytes(struct netgate *g, bool up, size_t n);
/* Read watermark and the rate limit, for every bufferevent of the gate. */
void netgate_setup_bufferevent(struct netgate *g, struct bufferevent *bev);
/* bufferevent_free, out of the gate's rate group first. */
void netgate_bev_free(struct bufferevent *bev);
/* Around adding bytes to `bev`'s output: hold returns whether it held the
 * write event back (a plain socket with nothing queued and no rate limit);
 * push writes what was added at once and registers the write event only for
 * what is left. Push before any callback that may free `bev`. */
bool netgate_bev_hold(const struct netgate *g, struct bufferevent *bev);
void netgate_bev_push(struct bufferevent *bev, bool held);
/* tv set to `s` seconds, for the timeouts below. */
const struct timeval *netgate_secs(struct timeval *tv, long s);
void netgate_set_nodelay(int fd);
/* The address `network.hosts` gives `name`. */
bool netgate_fixed_host(const struct netgate *g, const char *name, struct netgate_addr *ret);
/* NULL when the gate may connect to `a`, else the private range it hit. */
const char *netgate_address_refused(const struct netgate *g, const struct netgate_addr *a);

/* The network.denyReasons text for a canonical host, or NULL. */
const char *netgate_deny_reason(const struct netgate *g, const char *host);

/* ---- cleartext.c ---- */

struct netgate_route;
struct netgate_http_head;
/* Whether the gate reaches `h` with no byte leaving the host: a loopback
 * address, given so or fixed by network.hosts, not through the parent. */
bool netgate_stays_on_host(const struct netgate *g, const struct netgate_host *h);
/* Whether one of the route's inject values names a ${secret:...}. */
bool netgate_route_injects_secret(const struct netgate_route *rt);
/* A plain-HTTP request head to `h`:`port` (through route `rt`, or NULL
 * for the proxy): true, the rule that refuses it and a line for the
 * client, when it would carry a secret off the host that its entry does
 * not allow in cleartext (the route's inject, a sentinel). */
bool netgate_cleartext_refused(const struct netgate *g, const struct netgate_route *rt,
                               const struct netgate_host *h, uint16_t port,
                               const struct netgate_http_head *head, char *rule, size_t rule_size,
                               char *line, size_t line_size);

/* ---- proxy.c ---- */

/* Serve a connection accepted on an HTTP or SOCKS5 listener; takes `fd`. */
void netgate_proxy_accept(struct netgate *g, enum netgate_proto proto, int fd);
/* Close every proxy connection, recording the allowed ones still open. */
void netgate_proxy_close_all(struct netgate *g);
/* The rules changed: close each allowed connection (tunnel, request in
 * flight) the new rules refuse, recorded with reason "revoked", and drop
 * each idle kept upstream they refuse; how many connections closed. */
size_t netgate_proxy_recheck(struct netgate *g);

/* Whether a refusal for this reason may be asked about (only "not
 * listed": not_allowed, port_not_allowed, ip_literal_not_listed). */
bool netgate_reason_askable(const char *reason);

/* ---- route.c ---- */

int netgate_routes_new(struct netgate *g, struct event_base *base,
                       const struct policy_route *routes, size_t n, const struct secrets *s,
                       const struct secrets_vars *vars, struct netgate_routes **ret,
                       struct al_error *err);
/* Closes every connection, recording the calls still in flight. */
struct netgate_routes *netgate_routes_free(struct netgate_routes *rs);
/* Serve a connection accepted on a routes listener; takes `fd`. `tool`
 * (copied) marks the records of a host tool's requests, else NULL. */
void netgate_routes_accept(struct netgate_routes *rs, int fd, const char *tool);

/* The route that terminates CONNECTs to `host`:`port` (a route with
 * "terminate"), and its TLS server context; NULL when none does. */
const struct netgate_route *netgate_routes_terminating(const struct netgate_routes *rs,
                                                       const struct netgate_host *host,
                                                       uint16_t port, SSL_CTX **ret_ctx);
/* Whether a route with "terminate" has `name` for its host (on any port):
 * transparent mode's name server answers it. */
bool netgate_routes_terminates_name(const struct netgate_routes *rs, const char *name);
/* Serve the plain side of a terminated connection (mitm.c) as calls
 * through `rt`: origin-form requests whose whole target is the path. */
void netgate_routes_accept_terminated(struct netgate_routes *rs, int fd,
                                      const struct netgate_route *rt);

/* ---- mitm.c ---- */

/* Terminate the sandbox's TLS on `down` (taken; the CONNECT's answer
 * already queued on it) with `ctx`, and serve what is inside through `rt`.
 * On failure `down` is freed. */
int netgate_mitm_start(struct netgate *g, struct bufferevent *down, SSL_CTX *ctx,
                       const struct netgate_route *rt);
void netgate_mitm_close_all(struct netgate *g);

/* ---- fetch.c ---- */

/* Cancel every fetch in flight (netgate_free()). */
void netgate_fetch_cancel_all(struct netgate *g);

/* ---- route-def.c ---- */

/* One route, checked and copied from the policy (route.h). */
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
        struct netgate_tls *tls_layer; /* when tls */
        bool terminate;                /* the policy's "terminate" */
        /* Serving a terminated connection: the client talks to the host
         * itself, so its own Authorization and x-api-key pass (unless
         * stripped or injected). */
        bool keep_auth;
        const struct netgate_sentinels *sentinels; /* the gate's */
        bool host_only;                            /* the sandbox's requests are refused */
        bool cleartext; /* an http:// upstream off the host may get its injected secrets */
};

/* Wipe and drain a buffer that held injected values. */
void netgate_route_wipe(struct evbuffer *b);
