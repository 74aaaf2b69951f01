/* SPDX-License-Identifier: Apache-2.0 */
#pragma once

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "error.h"
#include "netgate/addr.h"

/* The parent proxy (network.parentProxy): the gate's upstream connections
 * go through an HTTP proxy (a CONNECT tunnel) or a SOCKS5 proxy (a CONNECT)
 * that the operator names, except to the hosts of its no-proxy list. The
 * gate still decides, resolves and checks every name itself, and hands the
 * parent the address it checked (and the port), never the name: a parent
 * resolving the name again could reach another answer (DNS rebinding).
 * With network.parentProxySendNames (`send_names`) the parent is handed
 * the name instead, for parents that filter by name; the address check
 * then holds for the gate's own answer only, and each record that crossed
 * so says "parent": "name". The parent's own address passes the
 * private-address check at the gate's creation (network.allowPrivate
 * lifts it). Internal to the network gate. */

struct event_base;

enum netgate_parent_kind {
        NETGATE_PARENT_HTTP,
        NETGATE_PARENT_SOCKS5,
};

struct netgate_parent {
        enum netgate_parent_kind kind;
        char host[256]; /* as given */
        struct netgate_addr addr;
        uint16_t port;
        char **no_proxy; /* "name", "*.name" or an IP literal */
        size_t n_no_proxy;
        bool send_names; /* network.parentProxySendNames */
};

/* "http://HOST:PORT" or "socks5://HOST:PORT" (an optional trailing "/"),
 * HOST an IP literal (IPv6 in brackets) or a name resolved now. Errors say
 * what is wrong with it. */
int netgate_parent_new(const char *url, char *const *no_proxy, size_t n_no_proxy,
                       struct netgate_parent **ret, struct al_error *err);
struct netgate_parent *netgate_parent_free(struct netgate_parent *p);

/* Whether a connection to `host` (canonical name or IP text) goes through
 * the parent. */
bool netgate_parent_applies(const struct netgate_parent *p, const char *host);

/* The handshake over `fd` (connected to the parent, non-blocking): `cb`
 * gets 0 once the parent has connected to `host`:`port` (nothing of the
 * upstream's has been read), or -errno and what the parent said. `host`
 * is an IP literal (sent as an address) or, with send_names, a name. */
struct netgate_parent_hs;
typedef void (*netgate_parent_cb)(void *ud, int err, const char *detail);
struct netgate_parent_hs *netgate_parent_handshake(const struct netgate_parent *p,
                                                   struct event_base *base, int fd,
                                                   const char *host, uint16_t port,
                                                   netgate_parent_cb cb, void *ud);
/* Stop a handshake in flight (it does not close fd); NULL is fine. */
void netgate_parent_handshake_cancel(struct netgate_parent_hs *hs);
