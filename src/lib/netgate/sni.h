/* SPDX-License-Identifier: Apache-2.0 */
#pragma once

#include <stddef.h>
#include <stdint.h>

#include "netgate/rules.h"

/* The server name of a TLS ClientHello, for the SNI check of tunnels
 * (docs/network.md). Internal to the network gate. */

#define NETGATE_SNI_PEEK_MAX (5 + 16384) /* one TLS record */

enum netgate_sni_result {
        NETGATE_SNI_MORE = -1,   /* not enough bytes yet */
        NETGATE_SNI_NOT_TLS = 0, /* the first byte is not a TLS handshake record */
        NETGATE_SNI_NONE = 1,    /* a ClientHello without a server name */
        NETGATE_SNI_NAME = 2,    /* a ClientHello naming one server: *name */
        NETGATE_SNI_BAD = 3,     /* a handshake record that cannot be read as one
                                  * ClientHello in one record with at most one
                                  * host name: refused */
};

/* Look at the first bytes a client sent (untrusted). The name is copied as
 * raw bytes (NUL-terminated, at most NETGATE_HOST_MAX); check it with
 * netgate_host_parse(). */
enum netgate_sni_result netgate_sni_parse(const uint8_t *buf, size_t len,
                                          char name[static NETGATE_HOST_MAX + 1], size_t *name_len);

struct bufferevent;
struct netgate;
struct netgate_exchange;
struct netgate_tunnel;

/* What a guarded tunnel is checked against and recorded as. */
struct netgate_sni_expect {
        const char *protocol;            /* "connect", "socks5", "transparent" */
        char host[NETGATE_HOST_MAX + 1]; /* the allowed name */
        uint16_t port;
        char address[NETGATE_ADDR_STRLEN];
};

/* netgate_tunnel_start(), after the client's first bytes were looked at:
 * `reply` goes to the client at once; a ClientHello whose server name is
 * not `e->host` (or that cannot be read) ends the tunnel before any byte
 * reaches the upstream, with a "deny" record (reason sni_mismatch or
 * sni_unreadable, rule naming both names) and end(ud, reason). Not TLS, or
 * TLS without a name, or an upstream that speaks first: relayed as it is.
 * `e` NULL: no check (an IP address was allowed). */
void netgate_sni_tunnel_start(struct netgate_tunnel *t, struct netgate *g,
                              struct netgate_exchange *x, void (*end)(void *ud, const char *reason),
                              void *ud, struct bufferevent *client, struct bufferevent *up,
                              const void *reply, size_t n, const struct netgate_sni_expect *e);
