/* SPDX-License-Identifier: Apache-2.0 */
#pragma once

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "netgate/addr.h"

/* The upstream engine: the one way the gate reaches a server, for the HTTP
 * proxy, CONNECT, SOCKS5 and the routes alike. Internal to the network gate.
 *
 *   resolve  a numeric spelling is never handed to a resolver; a name in
 *            network.hosts takes its fixed address; any other name goes to
 *            the gate's resolver (/etc/resolv.conf, no search domains)
 *   check    every answer against the private ranges: one private answer
 *            refuses the name (a public and a private answer at once is a
 *            rebinding attempt, not a name to pick a safe answer from)
 *   connect  to exactly the checked addresses, one after another, each
 *            within NETGATE_CONNECT_TIMEOUT_S, from the event loop
 *   layer    optionally TLS on top of the connected socket (tls.h), its
 *            peer verified against the name that was resolved and checked
 *
 * The owner then gets a connected bufferevent with the gate's watermark,
 * rate limit and I/O timeouts; which protocol runs over it is the owner's
 * business. Every outcome is one call of the ops, always the engine's last
 * act (the owner may free itself in it). */

struct bufferevent;
struct event;
struct evdns_base;
struct evutil_addrinfo;
struct netgate;
struct netgate_tls;
struct netgate_parent_hs;

#define NETGATE_CANDIDATES_MAX    16
#define NETGATE_CONNECT_TIMEOUT_S 30
#define NETGATE_IO_TIMEOUT_S      300

/* ---- the resolver ---- */

/* The gate's resolver, set up on first use (from /etc/resolv.conf when
 * `resolv_conf`); NULL when out of memory. */
struct evdns_base *netgate_resolver(struct netgate *g, bool resolv_conf);

struct netgate_candidates {
        struct netgate_addr addr[NETGATE_CANDIDATES_MAX];
        size_t n, i;
};

void netgate_candidates_add(struct netgate_candidates *cs, const struct netgate_addr *a);
/* Add every answer, IPv4 first (it is what the host most likely routes),
 * and free `res`. */
void netgate_candidates_add_answers(struct netgate_candidates *cs, struct evutil_addrinfo *res);

struct netgate_dns_query;

/* Look `name` up; `cb` gets the answer (and owns `res`) from the loop, or
 * before this returns, as its last act, when the resolver answers at once.
 * *ret_q is the query in flight, or NULL when it was answered. */
void netgate_dns_resolve(struct evdns_base *dns, const char *name,
                         void (*cb)(void *ud, int err, struct evutil_addrinfo *res), void *ud,
                         struct netgate_dns_query **ret_q);
/* The connection is gone: the query in flight finishes and frees itself. A
 * canceled one would call back later through its evdns base, which
 * netgate_free() may have freed by then; shutdown fails the rest safely. */
void netgate_dns_detach(struct netgate_dns_query *q);

/* ---- the engine ---- */

struct netgate_upstream_ops {
        /* The transport is up: `up` is the owner's now, with no callbacks
         * set, TCP_NODELAY, the gate's watermark and rate limit, and
         * NETGATE_IO_TIMEOUT_S both ways. */
        void (*connected)(void *ud, struct bufferevent *up);
        /* An answer is private: u->addr is that answer, `range` the range
         * it is in. Nothing was connected. */
        void (*refused)(void *ud, const char *range);
        /* The network did not deliver. `reason` is "dns_failed" (err 0: no
         * answer), "upstream_failed" (err: the last connect's errno, 0 when
         * unknown) or "upstream_tls" (`detail` says what the layer refused). */
        void (*failed)(void *ud, const char *reason, int err, const char *detail);
};

struct netgate_upstream {
        struct netgate *g;
        const struct netgate_upstream_ops *ops;
        void *ud;

        const struct netgate_host *host; /* the owner's; valid while opening */
        uint16_t port;
        const struct netgate_tls *tls; /* NULL: plain TCP */

        struct netgate_addr addr; /* the address refused, tried or connected to */
        bool have_addr;
        int last_errno;

        struct netgate_dns_query *dnsq;
        struct netgate_candidates cand;
        int connect_fd;
        struct event *ev_connect;
        struct bufferevent *handshake; /* the TLS layer, until it is up */
        bool via_parent;               /* through network.parentProxy (parent.h) */
        bool parent_by_name;           /* the parent was handed the name (parentProxySendNames) */
        struct netgate_parent_hs *parent_hs; /* its handshake, in flight */
        char tls_error[256];
};

void netgate_upstream_init(struct netgate_upstream *u, struct netgate *g,
                           const struct netgate_upstream_ops *ops, void *ud);

/* Resolve `host`, check every answer, connect to `port` on the checked
 * addresses in turn, with `tls` layered on top when not NULL. */
void netgate_upstream_open(struct netgate_upstream *u, const struct netgate_host *host,
                           uint16_t port, const struct netgate_tls *tls);

/* Connect again to u->addr only, the address checked and used before (a
 * retry after a kept connection closed under a request). */
void netgate_upstream_reopen(struct netgate_upstream *u);

/* Through the parent proxy: "address" (it was handed the checked
 * address), "name" (network.parentProxySendNames); NULL: direct. */
const char *netgate_upstream_parent(const struct netgate_upstream *u);

/* Stop whatever is in flight; no op is called after it. */
void netgate_upstream_stop(struct netgate_upstream *u);
