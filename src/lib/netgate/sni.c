/* SPDX-License-Identifier: Apache-2.0 */
/* The SNI check of tunnels (sni.h): the ClientHello's server name must be
 * the name the rules allowed, before any byte of it reaches the upstream. */
#include <errno.h>
#include <event2/buffer.h>
#include <event2/bufferevent.h>
#include <event2/event.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>

#include "netgate/exchange.h"
#include "netgate/netgate-internal.h"
#include "netgate/sni.h"
#include "netgate/tunnel.h"
#include "util.h"

#define SNI_TIMEOUT_S 30

static uint32_t get(const uint8_t *p, size_t n)
{
        uint32_t v = 0;
        for (size_t i = 0; i < n; i++)
                v = (v << 8) | p[i];
        return v;
}

static enum netgate_sni_result parse_hello(const uint8_t *buf, size_t len,
                                           char name[static NETGATE_HOST_MAX + 1], size_t *name_len)
{
        name[0] = '\0';
        *name_len = 0;
        if (len == 0)
                return NETGATE_SNI_MORE;
        if (buf[0] != 0x16)
                return NETGATE_SNI_NOT_TLS;
        if (len < 5)
                return NETGATE_SNI_MORE;
        if (buf[1] != 3)
                return NETGATE_SNI_BAD;
        size_t rec = get(buf + 3, 2);
        if (rec < 4 || rec > 16384)
                return NETGATE_SNI_BAD;
        if (len < 5 + rec)
                return NETGATE_SNI_MORE;
        const uint8_t *p = buf + 5;
        /* One ClientHello, whole in this record: a name split over records
         * is refused rather than guessed at. */
        if (p[0] != 1)
                return NETGATE_SNI_BAD;
        size_t hs = get(p + 1, 3);
        if (hs + 4 != rec)
                return NETGATE_SNI_BAD;
        const uint8_t *end = p + 4 + hs;
        p += 4;
        if (end - p < 2 + 32 + 1)
                return NETGATE_SNI_BAD;
        p += 2 + 32; /* version, random */
        size_t l = p[0];
        p += 1;
        if ((size_t)(end - p) < l + 2)
                return NETGATE_SNI_BAD;
        p += l; /* session id */
        l = get(p, 2);
        p += 2;
        if ((size_t)(end - p) < l + 1)
                return NETGATE_SNI_BAD;
        p += l; /* cipher suites */
        l = p[0];
        p += 1;
        if ((size_t)(end - p) < l)
                return NETGATE_SNI_BAD;
        p += l; /* compression */
        if (p == end)
                return NETGATE_SNI_NONE; /* no extensions */
        if (end - p < 2)
                return NETGATE_SNI_BAD;
        l = get(p, 2);
        p += 2;
        if ((size_t)(end - p) != l)
                return NETGATE_SNI_BAD;
        bool seen = false;
        while (p < end) {
                if (end - p < 4)
                        return NETGATE_SNI_BAD;
                uint32_t type = get(p, 2);
                size_t el = get(p + 2, 2);
                p += 4;
                if ((size_t)(end - p) < el)
                        return NETGATE_SNI_BAD;
                if (type == 0) {
                        if (seen)
                                return NETGATE_SNI_BAD; /* two server_name extensions */
                        seen = true;
                        const uint8_t *q = p, *qe = p + el;
                        if (qe - q < 2 || get(q, 2) != el - 2)
                                return NETGATE_SNI_BAD;
                        q += 2;
                        bool host = false;
                        while (q < qe) {
                                if (qe - q < 3)
                                        return NETGATE_SNI_BAD;
                                uint8_t nt = q[0];
                                size_t nl = get(q + 1, 2);
                                q += 3;
                                if ((size_t)(qe - q) < nl)
                                        return NETGATE_SNI_BAD;
                                if (nt == 0) {
                                        if (host || nl == 0 || nl > NETGATE_HOST_MAX)
                                                return NETGATE_SNI_BAD;
                                        host = true;
                                        memcpy(name, q, nl);
                                        name[nl] = '\0';
                                        *name_len = nl;
                                }
                                q += nl;
                        }
                }
                p += el;
        }
        return *name_len ? NETGATE_SNI_NAME : NETGATE_SNI_NONE;
}

enum netgate_sni_result netgate_sni_parse(const uint8_t *buf, size_t len,
                                          char name[static NETGATE_HOST_MAX + 1], size_t *name_len)
{
        enum netgate_sni_result r = parse_hello(buf, len, name, name_len);
        if (r != NETGATE_SNI_NAME) {
                name[0] = '\0'; /* a name read before the hello was refused is no answer */
                *name_len = 0;
        }
        return r;
}

/* ---- the guard ---- */

struct netgate_sni_guard {
        struct netgate_tunnel *t;
        struct netgate_sni_expect e;
};

static void guard_free(struct netgate_tunnel *t)
{
        free(t->guard);
        t->guard = NULL;
}

static void proceed(struct netgate_tunnel *t);

static void drained(struct bufferevent *bev, void *ud)
{
        (void)bev;
        proceed(ud);
}

/* The check passed: the tunnel takes both sides as they are, once the
 * reply has left (a socket bufferevent's output cannot be taken back). */
static void proceed(struct netgate_tunnel *t)
{
        if (evbuffer_get_length(bufferevent_get_output(t->client)) > 0) {
                bufferevent_setcb(t->client, NULL, drained, NULL, t);
                bufferevent_disable(t->client, EV_READ);
                bufferevent_disable(t->up, EV_READ);
                return;
        }
        guard_free(t);
        bufferevent_setcb(t->client, NULL, NULL, NULL, NULL);
        bufferevent_setcb(t->up, NULL, NULL, NULL, NULL);
        netgate_tunnel_start(t, t->g, t->x, t->end, t->ud, t->client, t->up, NULL, 0);
}

static void refuse(struct netgate_tunnel *t, const char *reason, const char *sni)
{
        struct netgate_sni_guard *gd = t->guard;
        char rule[2 * NETGATE_HOST_MAX + 32];
        snprintf(rule, sizeof(rule), "sni %s, allowed %s", sni, gd->e.host);
        struct netgate_record rec = {
            .protocol = gd->e.protocol,
            .host = gd->e.host,
            .port = gd->e.port,
            .address = gd->e.address,
            .decision = "deny",
            .reason = reason,
            .rule = rule,
        };
        netgate_emit(t->g, &rec);
        guard_free(t);
        t->end(t->ud, reason);
}

static void client_read(struct bufferevent *bev, void *ud)
{
        struct netgate_tunnel *t = ud;
        struct netgate_sni_guard *gd = t->guard;
        struct evbuffer *in = bufferevent_get_input(bev);
        size_t len = evbuffer_get_length(in);
        size_t look = len < NETGATE_SNI_PEEK_MAX ? len : NETGATE_SNI_PEEK_MAX;
        const uint8_t *p = evbuffer_pullup(in, (ev_ssize_t)look);
        char name[NETGATE_HOST_MAX + 1];
        size_t nl = 0;
        enum netgate_sni_result r = netgate_sni_parse(p, look, name, &nl);
        if (r == NETGATE_SNI_MORE && look < NETGATE_SNI_PEEK_MAX)
                return;
        if (r == NETGATE_SNI_NOT_TLS || r == NETGATE_SNI_NONE) {
                proceed(t);
                return;
        }
        if (r != NETGATE_SNI_NAME) {
                refuse(t, "sni_unreadable", "?");
                return;
        }
        struct netgate_host h;
        if (netgate_host_parse(name, nl, &h) == 0 && h.kind == NETGATE_HOST_NAME &&
            STREQ(h.name, gd->e.host)) {
                proceed(t);
                return;
        }
        char esc[NETGATE_HOST_MAX + 1];
        netgate_escape(name, nl, esc, sizeof(esc));
        refuse(t, "sni_mismatch", esc);
}

/* The upstream spoke first: not a TLS client's connection. */
static void up_read(struct bufferevent *bev, void *ud)
{
        (void)bev;
        proceed(ud);
}

static void guard_event(struct bufferevent *bev, short what, void *ud)
{
        struct netgate_tunnel *t = ud;
        if (bev == t->client && (what & BEV_EVENT_EOF) &&
            evbuffer_get_length(bufferevent_get_input(bev)) > 0) {
                /* The client ended after its first bytes: look at them. */
                proceed(t);
                return;
        }
        guard_free(t);
        t->end(t->ud, (what & BEV_EVENT_TIMEOUT) ? "timeout" : "client_closed");
}

void netgate_sni_tunnel_start(struct netgate_tunnel *t, struct netgate *g,
                              struct netgate_exchange *x, void (*end)(void *ud, const char *reason),
                              void *ud, struct bufferevent *client, struct bufferevent *up,
                              const void *reply, size_t n, const struct netgate_sni_expect *e)
{
        if (!e) {
                netgate_tunnel_start(t, g, x, end, ud, client, up, reply, n);
                return;
        }
        t->g = g;
        t->x = x;
        t->end = end;
        t->ud = ud;
        t->client = client;
        t->up = up;
        struct netgate_sni_guard *gd = xcalloc(1, sizeof(*gd));
        gd->t = t;
        gd->e = *e;
        t->guard = gd;
        bufferevent_setcb(client, client_read, NULL, guard_event, t);
        bufferevent_setcb(up, up_read, NULL, guard_event, t);
        struct timeval tv = {SNI_TIMEOUT_S, 0};
        bufferevent_set_timeouts(client, &tv, NULL);
        /* The reply straight to the socket when it takes it (it is short),
         * so that the tunnel starts without waiting for it to drain. */
        ssize_t w = 0;
        if (n > 0 && evbuffer_get_length(bufferevent_get_output(client)) == 0)
                w = send(bufferevent_getfd(client), reply, n, MSG_NOSIGNAL | MSG_DONTWAIT);
        if (w < 0)
                w = 0;
        if ((size_t)w < n)
                bufferevent_write(client, (const uint8_t *)reply + w, n - (size_t)w);
        bufferevent_enable(client, EV_READ | EV_WRITE);
        bufferevent_enable(up, EV_READ);
        if (evbuffer_get_length(bufferevent_get_input(client)) > 0)
                client_read(client, t); /* early bytes sent with the request */
        else if (evbuffer_get_length(bufferevent_get_input(up)) > 0)
                proceed(t); /* the upstream greeted first */
}
