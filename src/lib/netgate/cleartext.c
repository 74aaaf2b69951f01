/* SPDX-License-Identifier: Apache-2.0 */
/* Secrets go into plain HTTP only where the bytes stay on the host, or
 * where the operator said so (docs/network.md#secrets-and-plain-http).
 * The gate puts a secret's value in a request (a sentinel's placeholder
 * replaced, a route's ${secret:NAME} injected) in TLS it verifies
 * upstream; a plain-HTTP request that would carry one to any other place
 * is refused, `cleartext_secret`, and neither the value nor the
 * placeholder is sent. */
#include <stdint.h>
#include <stdio.h>
#include <string.h>
#include <sys/socket.h>

#include "netgate/http.h"
#include "netgate/netgate-internal.h"
#include "netgate/parent.h"
#include "netgate/route.h"
#include "netgate/sentinel.h"

/* The host's own loopback: 127.0.0.0/8, ::1, or 127.0.0.0/8 IPv4-mapped
 * (the kernel connects to it over IPv4). Not an address that only embeds
 * one (NAT64, 6to4, IPv4-compatible or -translated): that is routed off
 * the host, to a translator or a relay. */
static bool is_loopback(const struct netgate_addr *a)
{
        static const uint8_t mapped[12] = {0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0xff, 0xff};
        static const uint8_t one[16] = {[15] = 1};
        if (a->family == AF_INET)
                return a->bytes[0] == 127;
        if (a->family != AF_INET6)
                return false;
        return memcmp(a->bytes, one, 16) == 0 ||
               (memcmp(a->bytes, mapped, 12) == 0 && a->bytes[12] == 127);
}

bool netgate_stays_on_host(const struct netgate *g, const struct netgate_host *h)
{
        struct netgate_addr a;
        /* Through the parent, the bytes cross the network to it. */
        if (netgate_parent_applies(g->parent, h->name))
                return false;
        if (h->kind != NETGATE_HOST_NAME)
                a = h->addr;
        else if (!netgate_fixed_host(g, h->name, &a))
                return false; /* resolved: whatever the answer is, not known now */
        return is_loopback(&a);
}

bool netgate_route_injects_secret(const struct netgate_route *rt)
{
        for (size_t i = 0; i < rt->n_inject; i++)
                if (rt->inject[i].value && strstr(rt->inject[i].value, "${secret:"))
                        return true;
        return false;
}

/* What the proxy (a route) does not pass on carries nothing. */
static bool hop_dropped(const void *ud, const struct netgate_http_head *h, const char *name,
                        size_t len)
{
        return netgate_http_field_is_hop(h, name, len);
}

static bool route_dropped(const void *ud, const struct netgate_http_head *h, const char *name,
                          size_t len)
{
        return netgate_route_field_dropped(ud, h, name, len);
}

bool netgate_cleartext_refused(const struct netgate *g, const struct netgate_route *rt,
                               const struct netgate_host *h, uint16_t port,
                               const struct netgate_http_head *head, char *rule, size_t rule_size,
                               char *line, size_t line_size)
{
        if (netgate_stays_on_host(g, h))
                return false;
        bool v6 = h->kind == NETGATE_HOST_IP && h->addr.family == AF_INET6;
        if (rt && !rt->cleartext && netgate_route_injects_secret(rt)) {
                snprintf(rule, rule_size, "network.routes[%s].cleartext", rt->name);
                snprintf(line, line_size,
                         "airlock: route %s: its upstream %s is plain http:// and the route "
                         "injects a secret, which would cross the network in the clear; nothing "
                         "was sent. Use an https:// upstream, or set \"cleartext\": true on the "
                         "route to send it so\n",
                         rt->name, rt->upstream);
                return true;
        }
        const struct netgate_sentinel *s = netgate_sentinels_cleartext_refused(
            &g->sentinels, h->name, port, head, rt ? route_dropped : hop_dropped, rt);
        if (!s)
                return false;
        snprintf(rule, rule_size, "network.sentinels[%s].cleartext", s->env ? s->env : "?");
        snprintf(line, line_size,
                 "airlock: the request to %s%s%s:%u is plain HTTP and carries the placeholder of "
                 "%s, whose secret would cross the network in the clear; nothing was sent. Use "
                 "https:// (the gate puts the secret in only where it verifies TLS), or list "
                 "\"%s:%u\" in the sentinel's \"cleartext\"\n",
                 v6 ? "[" : "", h->name, v6 ? "]" : "", port, s->env ? s->env : "a sentinel",
                 h->name, port);
        return true;
}
