/* SPDX-License-Identifier: Apache-2.0 */
/* Transparent mode's relay path (transparent.h): a caught connection that
 * a byte budget or a rate applies to, or a name's (the SNI check). The
 * supervisor connects the sandbox's own socket to the relay listener; the
 * gate serves what it accepts as a tunnel to the address that was checked,
 * through the upstream engine (which checks it again and connects to it
 * only), with the gate's rate limit and byte budget, recorded when it
 * ends. */
#include <errno.h>
#include <event2/bufferevent.h>
#include <event2/event.h>
#include <event2/listener.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "netgate/exchange.h"
#include "netgate/netgate-internal.h"
#include "netgate/transparent.h"
#include "netgate/sni.h"
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
            .parent = netgate_upstream_parent(&r->u),
            .bytes_up = r->x.bytes_up,
            .bytes_down = r->x.bytes_down,
            .duration_ms = now > r->t0 ? (now - r->t0) / 1000 : 0,
            .ended = true,
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
        /* Decided on a name: the ClientHello must name it too. */
        struct netgate_sni_expect e = {.protocol = "transparent", .port = r->v.port};
        bool named = !STREQ(r->v.host, r->v.address);
        snprintf(e.host, sizeof(e.host), "%s", r->v.host);
        snprintf(e.address, sizeof(e.address), "%s", r->v.address);
        netgate_sni_tunnel_start(&r->t, r->g, &r->x, tunnel_end, r, client, up, NULL, 0,
                                 named ? &e : NULL);
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

/* A connection to a terminated route's host and port: recorded as allowed
 * by the route, then its TLS terminated (mitm.c) and each request inside
 * served through the route (inject, strip, sentinels, scrubbing), as a
 * CONNECT to it is (proxy.c). */
static int terminate_start(struct netgate *g, const struct netgate_verdict *v, int fd)
{
        struct netgate_host h;
        SSL_CTX *ctx = NULL;
        const struct netgate_route *rt =
            g->routes && !g->closed && netgate_host_parse(v->host, strlen(v->host), &h) == 0
                ? netgate_routes_terminating(g->routes, &h, v->port, &ctx)
                : NULL;
        if (!rt)
                return -ENOENT;
        struct bufferevent *down = bufferevent_socket_new(g->base, fd, BEV_OPT_CLOSE_ON_FREE);
        if (!down)
                return -ENOMEM;
        netgate_setup_bufferevent(g, down);
        netgate_set_nodelay(fd);
        struct netgate_record rec = {
            .protocol = "transparent",
            .host = v->host,
            .port = v->port,
            .address = v->address,
            .decision = "allow",
            .rule = v->rule,
        };
        netgate_emit(g, &rec);
        (void)netgate_mitm_start(g, down, ctx, rt);
        return 0;
}

static int relay_start(struct netgate *g, const struct netgate_verdict *v, int fd)
{
        if (v->terminate)
                return terminate_start(g, v, fd);
        if (v->dns)
                return netgate_dns_tcp_accept(g, fd);
        struct netgate_relay *r = xcalloc(1, sizeof(*r));
        r->g = g;
        r->v = *v;
        r->t0 = now_monotonic_us();
        r->x.g = g;
        netgate_tunnel_init(&r->t);
        if (netgate_host_parse(v->address, strlen(v->address), &r->host) < 0 ||
            r->host.kind != NETGATE_HOST_IP) {
                free(r);
                return -EINVAL;
        }
        r->client = bufferevent_socket_new(g->base, fd, BEV_OPT_CLOSE_ON_FREE);
        if (!r->client) {
                free(r);
                return -ENOMEM;
        }
        netgate_setup_bufferevent(g, r->client);
        netgate_set_nodelay(fd);
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

/* ---- what the supervisor announced ---- */

#define EXPECT_TTL_US (30ull * 1000000) /* a loopback connect takes far less */

struct netgate_relay_expect {
        bool used;
        uint16_t port;
        uint64_t when_us;
        struct netgate_verdict v;
};

int netgate_relay_expect(struct netgate *g, const struct netgate_verdict *v, uint16_t src_port)
{
        if (!g->expects)
                return -ENOSPC;
        uint64_t now = now_monotonic_us();
        struct netgate_relay_expect *free_slot = NULL;
        for (size_t i = 0; i < NETGATE_MAX_CONNECTIONS; i++) {
                struct netgate_relay_expect *e = &g->expects[i];
                if (e->used && (now - e->when_us > EXPECT_TTL_US || e->port == src_port))
                        e->used = false; /* stale, or the port's earlier life */
                if (!e->used && !free_slot)
                        free_slot = e;
        }
        if (!free_slot)
                return -ENOSPC;
        *free_slot =
            (struct netgate_relay_expect){.used = true, .port = src_port, .when_us = now, .v = *v};
        return 0;
}

static void relay_accept(struct evconnlistener *l, evutil_socket_t fd, struct sockaddr *sa, int len,
                         void *ud)
{
        struct netgate *g = ud;
        (void)l;
        uint16_t port = 0;
        if (sa && len >= (int)sizeof(struct sockaddr_in) && sa->sa_family == AF_INET &&
            ntohl(((struct sockaddr_in *)sa)->sin_addr.s_addr) == INADDR_LOOPBACK)
                port = ntohs(((struct sockaddr_in *)sa)->sin_port);
        uint64_t now = now_monotonic_us();
        for (size_t i = 0; port && i < NETGATE_MAX_CONNECTIONS; i++) {
                struct netgate_relay_expect *e = &g->expects[i];
                if (!e->used || e->port != port || now - e->when_us > EXPECT_TTL_US)
                        continue;
                e->used = false;
                if (relay_start(g, &e->v, fd) < 0)
                        close(fd);
                return;
        }
        close(fd); /* not announced: the sandbox's own connection to the port */
}

int netgate_add_relay_listener(struct netgate *g, int fd, struct al_error *err)
{
        struct sockaddr_in sa;
        socklen_t len = sizeof(sa);
        if (g->relay_listener)
                return al_error_set(err, EEXIST, "adding the gate's relay listener");
        if (getsockname(fd, (struct sockaddr *)&sa, &len) < 0 || sa.sin_family != AF_INET)
                return al_error_set(err, errno ? errno : EINVAL,
                                    "adding the gate's relay listener");
        int fl = fcntl(fd, F_GETFL);
        if (fl < 0 || fcntl(fd, F_SETFL, fl | O_NONBLOCK) < 0 || fcntl(fd, F_SETFD, FD_CLOEXEC) < 0)
                return al_error_set(err, errno, "adding the gate's relay listener");
        g->relay_listener = evconnlistener_new(
            g->base, relay_accept, g, LEV_OPT_CLOSE_ON_FREE | LEV_OPT_CLOSE_ON_EXEC, 0, fd);
        if (!g->relay_listener)
                return al_error_set(err, ENOMEM, "adding the gate's relay listener");
        g->expects = xcalloc(NETGATE_MAX_CONNECTIONS, sizeof(*g->expects));
        g->relay_port = ntohs(sa.sin_port);
        return 0;
}

uint16_t netgate_relay_port(const struct netgate *g)
{
        return g->relay_port;
}

bool netgate_transparent_allowed_now(const struct netgate *g, const struct netgate_verdict *v)
{
        struct netgate_decision d;
        netgate_rules_decide(g->rules, v->host, strlen(v->host), v->port, &d);
        return d.allow;
}

size_t netgate_relay_recheck(struct netgate *g)
{
        size_t cut = 0;
        for (size_t i = 0; g->expects && i < NETGATE_MAX_CONNECTIONS; i++) {
                struct netgate_relay_expect *e = &g->expects[i];
                /* Announced, not yet accepted: refused when it arrives. */
                if (e->used && !e->v.terminate && !e->v.dns &&
                    !netgate_transparent_allowed_now(g, &e->v))
                        e->used = false;
        }
        struct netgate_relay *next;
        for (struct netgate_relay *r = g->relays; r; r = next) {
                next = r->next;
                if (netgate_transparent_allowed_now(g, &r->v))
                        continue;
                cut++;
                relay_free(r, "revoked");
        }
        return cut;
}

void netgate_transparent_free(struct netgate *g)
{
        netgate_dns_server_free(g);
        if (g->relay_listener)
                evconnlistener_free(g->relay_listener);
        g->relay_listener = NULL;
        while (g->relays)
                relay_free(g->relays, netgate_tunnel_client_done(&g->relays->t) ? NULL : "shutdown");
        free(g->expects);
        g->expects = NULL;
}
