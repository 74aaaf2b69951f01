/* SPDX-License-Identifier: Apache-2.0 */
/* Transparent mode's relay path (transparent.h): a caught connection that
 * a byte budget or a rate applies to. The sandbox holds one end of a
 * socket pair in place of its socket; the gate serves the other end as a
 * tunnel to the address that was checked, through the upstream engine
 * (which checks it again and connects to it only), with the gate's rate
 * limit and byte budget, recorded when it ends. */
#include <errno.h>
#include <event2/bufferevent.h>
#include <event2/event.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "netgate/exchange.h"
#include "netgate/netgate-internal.h"
#include "netgate/transparent.h"
#include "netgate/tunnel.h"
#include "netgate/upstream.h"
#include "util.h"

struct netgate_relay {
        struct netgate *g;
        struct netgate_relay *next, **pprev;
        struct netgate_verdict v;
        struct netgate_host host; /* the checked address, as the engine takes it */
        struct netgate_upstream u;
        struct netgate_exchange x; /* the byte counts */
        struct netgate_tunnel t;
        struct bufferevent *client;
        uint64_t t0;
};

static void relay_free(struct netgate_relay *r, const char *reason)
{
        struct netgate *g = r->g;
        uint64_t now = now_monotonic_us();
        struct netgate_record rec = {
            .protocol = "transparent",
            .host = r->v.host,
            .port = r->v.port,
            .address = r->v.address,
            .decision = "allow",
            .reason = reason,
            .bytes_up = r->x.bytes_up,
            .bytes_down = r->x.bytes_down,
            .duration_ms = now > r->t0 ? (now - r->t0) / 1000 : 0,
        };
        netgate_emit(g, &rec);
        netgate_upstream_stop(&r->u);
        netgate_tunnel_release(&r->t);
        if (r->client)
                netgate_bev_free(r->client);
        *r->pprev = r->next;
        if (r->next)
                r->next->pprev = r->pprev;
        netgate_conn_count(g, -1);
        free(r);
}

static void tunnel_end(void *ud, const char *reason)
{
        relay_free(ud, reason);
}

static void up_connected(void *ud, struct bufferevent *up)
{
        struct netgate_relay *r = ud;
        struct bufferevent *client = r->client;
        r->client = NULL; /* the tunnel's now */
        netgate_tunnel_start(&r->t, r->g, &r->x, tunnel_end, r, client, up, NULL, 0);
}

static void up_refused(void *ud, const char *range)
{
        (void)range;
        relay_free(ud, "private_address");
}

static void up_failed(void *ud, const char *reason, int err, const char *detail)
{
        (void)err;
        (void)detail;
        relay_free(ud, reason);
}

static const struct netgate_upstream_ops relay_ops = {
    .connected = up_connected,
    .refused = up_refused,
    .failed = up_failed,
};

int netgate_transparent_relay(struct netgate *g, const struct netgate_verdict *v, int fd)
{
        struct netgate_relay *r = xcalloc(1, sizeof(*r));
        r->g = g;
        r->v = *v;
        r->t0 = now_monotonic_us();
        r->x.g = g;
        netgate_tunnel_init(&r->t);
        if (netgate_host_parse(v->address, strlen(v->address), &r->host) < 0 ||
            r->host.kind != NETGATE_HOST_IP) {
                free(r);
                close(fd);
                return -EINVAL;
        }
        r->client = bufferevent_socket_new(g->base, fd, BEV_OPT_CLOSE_ON_FREE);
        if (!r->client) {
                free(r);
                close(fd);
                return -ENOMEM;
        }
        netgate_setup_bufferevent(g, r->client);
        r->next = g->relays;
        if (r->next)
                r->next->pprev = &r->next;
        r->pprev = &g->relays;
        g->relays = r;
        netgate_conn_count(g, +1);
        netgate_upstream_init(&r->u, g, &relay_ops, r);
        netgate_upstream_open(&r->u, &r->host, v->port, NULL);
        return 0;
}

void netgate_transparent_free(struct netgate *g)
{
        netgate_dns_server_free(g);
        while (g->relays)
                relay_free(g->relays, "shutdown");
}
