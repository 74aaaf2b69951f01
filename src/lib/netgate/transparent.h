/* SPDX-License-Identifier: Apache-2.0 */
#pragma once

#include <stdbool.h>
#include <stdint.h>
#include <sys/socket.h>

#include "error.h"
#include "netgate/addr.h"
#include "netgate/rules.h"

/* Transparent mode (docs/network.md, docs/internals/netgate.md): the gate
 * answers the sandbox's name lookups on a UDP socket inside its network
 * namespace, and decides the connections the supervisor catches
 * (supervisor/connect-notify.c) on the name each address was answered for.
 * This header is the gate's side; the supervisor owns the interception. */

struct netgate;

/* Serve DNS on `udp_fd`, a bound datagram socket (127.0.0.1:53 inside the
 * sandbox). The gate owns it on success; on failure the caller still does. */
int netgate_add_dns(struct netgate *g, int udp_fd, struct al_error *err);

struct netgate_verdict {
        bool allow;
        const char *reason;               /* deny: not_resolved, not_allowed, denied_by_rule,
                                           * port_not_allowed, private_address, ipv6_not_offered,
                                           * not_stream, relay_required, budget_requests, ... */
        char rule[NETGATE_HOST_MAX + 16]; /* the rule, range or budget; "" when none */
        char host[NETGATE_HOST_MAX + 1];  /* the name the address was answered for,
                                           * else the address */
        char address[NETGATE_ADDR_STRLEN];
        struct netgate_addr addr; /* IPv4 for a mapped IPv6 address */
        uint16_t port;
        bool relay;     /* allowed, through the gate's relay: a byte budget, a
                         * rate or an SNI check applies */
        bool terminate; /* to a route with "terminate" (v->rule names it): the
                         * relay terminates its TLS and serves it through the route */
        bool dns;       /* TCP to the name server's address, 127.0.0.1:53: served
                         * by the gate's name server (netgate_transparent_dns()) */
};

/* Decide a connect() caught from the sandbox: `sa` is the host's one copy
 * of the address the sandbox passed, `stream` whether its socket is a TCP
 * one. Allowed only when the address was answered by the gate for a name
 * the rules allow on that port (or an IP rule lists it), it passes the
 * private-address check and the request budget has room (one request is
 * taken). `relay` says when a byte budget or a rate applies. */
void netgate_transparent_decide(struct netgate *g, const struct sockaddr *sa, socklen_t len,
                                bool stream, struct netgate_verdict *v);

/* The verdict for a TCP connect() to 127.0.0.1:53 (DNS over TCP): relayed
 * to the gate's name server. */
void netgate_transparent_dns(struct netgate_verdict *v);

/* Whether this gate may ever hand the sandbox a socket of the host's (the
 * direct path): false when every connection goes through the relay (a byte
 * budget, a rate, the gvisor tier). Fixed for the gate's life. Where it is
 * false, no descriptor the sandbox holds can be the host's, so a Unix
 * connect can be left to the kernel and keep its real peer credentials. */
bool netgate_transparent_host_sockets(const struct netgate *g);

/* Whether the gate's rules, which may have changed since (a live revoke),
 * still allow what the allowed verdict `v` allowed: its name (or the
 * address an IP rule listed) on its port. A direct-path connection still
 * connecting is handed over only when they do. */
bool netgate_transparent_allowed_now(const struct netgate *g, const struct netgate_verdict *v);

/* Record the verdict as a "transparent" decision: a refusal, or an allowed
 * connection that was made (`reason` NULL) or failed ("upstream_failed"). */
void netgate_transparent_record(struct netgate *g, const struct netgate_verdict *v,
                                const char *reason);

/* ---- the relay path ----
 *
 * The gate's relay listener is a TCP socket on 127.0.0.1 inside the
 * sandbox (spawn sends it with the name server's). For a verdict with
 * `relay`, the supervisor connects the sandbox's own socket to it and says
 * beforehand which local port that connection comes from; the gate then
 * tunnels it to v->address, v->port (through the upstream engine, with the
 * rate and the byte budget) and records it when it ends. A connection to
 * the listener that was not announced is closed. */

/* Takes `fd` on success; on failure the caller still owns it. */
int netgate_add_relay_listener(struct netgate *g, int fd, struct al_error *err);
/* The listener's port, 0 when there is none. */
uint16_t netgate_relay_port(const struct netgate *g);
/* A connection from 127.0.0.1:`src_port` to the relay will come for `v`
 * (copied). -ENOSPC when NETGATE_MAX_CONNECTIONS are announced already. */
int netgate_relay_expect(struct netgate *g, const struct netgate_verdict *v, uint16_t src_port);
