/* SPDX-License-Identifier: Apache-2.0 */
/* The gate's name server for transparent mode: queries on a UDP socket in
 * the sandbox's network namespace, the rules applied to the name, the
 * name resolved by the gate's own resolver, every answer checked against
 * the private ranges, and the addresses answered remembered with the name
 * (netgate_names) so that a connection to one is decided on that name. */
#include <errno.h>
#include <event2/buffer.h>
#include <event2/bufferevent.h>
#include <event2/event.h>
#include <event2/util.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include "netgate/dns.h"
#include "netgate/netgate-internal.h"
#include "netgate/transparent.h"
#include "netgate/upstream.h"
#include "util.h"

#define DNS_PENDING_MAX     64
#define DNS_ANSWER_TTL      60
#define DNS_BURST           32
#define DNS_TCP_MAX         16 /* connections */
#define DNS_TCP_PENDING_MAX 8  /* lookups in flight per connection */
#define DNS_TCP_IDLE_S      10
#define DNS_TCP_OUT_MAX     (64 * 1024)

/* Where an answer goes: a UDP peer, or a TCP connection (queries and
 * answers each after a two-byte length, RFC 1035 4.2.2). */
struct dns_to {
        struct sockaddr_storage peer;
        socklen_t peer_len;
        struct dns_tcp *tcp;
        bool dropped; /* its TCP connection ended */
};

struct dns_tcp {
        struct netgate_dns_server *s;
        struct dns_tcp *next, **pprev;
        struct bufferevent *bev;
        size_t n_pending;
};

struct dns_pending {
        struct netgate_dns_server *s;
        struct dns_pending *next, **pprev;
        struct netgate_dns_query *q;
        struct dns_to to;
        struct netgate_dns_msg msg;
        bool follower; /* waits for another's lookup of the same name */
        uint8_t query[NETGATE_DNS_UDP_MAX];
        size_t query_len;
};

struct netgate_dns_server {
        struct netgate *g;
        int fd;
        struct event *ev;
        struct dns_pending *pending;
        size_t n_pending;
        struct dns_tcp *tcps;
        size_t n_tcps;
};

static void send_answer(struct netgate_dns_server *s, const struct dns_to *to, const uint8_t *buf,
                        ssize_t n)
{
        if (n <= 0 || to->dropped)
                return;
        if (!to->tcp) {
                (void)sendto(s->fd, buf, (size_t)n, MSG_DONTWAIT,
                             (const struct sockaddr *)&to->peer, to->peer_len);
                return;
        }
        uint8_t len[2] = {(uint8_t)(n >> 8), (uint8_t)n};
        struct evbuffer *out = bufferevent_get_output(to->tcp->bev);
        if (evbuffer_get_length(out) > DNS_TCP_OUT_MAX)
                return; /* a client that does not read its answers gets no more */
        (void)evbuffer_add(out, len, 2);
        (void)evbuffer_add(out, buf, (size_t)n);
}

/* Only IPv4 addresses are ever offered: an AAAA question (or any other
 * type) about a name that exists and passed the checks is answered with no
 * records, as a name with none of that type is. */
static void answer(struct netgate_dns_server *s, const struct dns_to *to,
                   const struct netgate_dns_msg *m, const uint8_t *query, int rcode,
                   const struct netgate_addr *addrs, size_t n)
{
        uint8_t out[NETGATE_DNS_UDP_MAX];
        if (m->qtype != NETGATE_DNS_TYPE_A || m->qclass != NETGATE_DNS_CLASS_IN)
                n = 0;
        ssize_t len =
            netgate_dns_answer(m, query, rcode, addrs, n, DNS_ANSWER_TTL, out, sizeof(out));
        if (len == -ENOSPC)
                len = netgate_dns_answer(m, query, NETGATE_DNS_SERVFAIL, NULL, 0, 0, out,
                                         sizeof(out));
        send_answer(s, to, out, len);
}

static void refuse(struct netgate *g, const char *host, const char *reason, const char *rule,
                   const char *address)
{
        struct netgate_record rec = {
            .protocol = "dns",
            .host = host,
            .port = 53,
            .address = address ? address : "",
            .decision = "deny",
            .reason = reason,
            .rule = rule,
            .status = NETGATE_DNS_NXDOMAIN,
        };
        netgate_emit(g, &rec);
}

static void pending_free(struct dns_pending *p)
{
        if (p->pprev) {
                *p->pprev = p->next;
                if (p->next)
                        p->next->pprev = p->pprev;
                p->s->n_pending--;
        }
        if (p->to.tcp)
                p->to.tcp->n_pending--;
        netgate_dns_detach(p->q);
        free(p);
}

/* A looked-up answer to one question: the IPv4 addresses an A question is
 * given are remembered with the name first, whichever question led the
 * lookup (a client may ask AAAA first and A beside it). */
static void answer_looked_up(struct dns_pending *p, int rcode, const struct netgate_addr *addrs,
                             size_t n, uint64_t now)
{
        struct netgate_dns_server *s = p->s;
        if (rcode == NETGATE_DNS_NOERROR && p->msg.qtype == NETGATE_DNS_TYPE_A &&
            p->msg.qclass == NETGATE_DNS_CLASS_IN)
                for (size_t i = 0; i < n; i++)
                        if (addrs[i].family == AF_INET)
                                netgate_names_add(s->g->names, p->msg.name, &addrs[i], now);
        answer(s, &p->to, &p->msg, p->query, rcode, addrs, n);
}

/* The answer to `p`, and to the questions about the same name that waited
 * for its lookup (`follower`: an AAAA asked beside the A, say). */
static void answer_all(struct dns_pending *p, int rcode, const struct netgate_addr *addrs, size_t n)
{
        struct netgate_dns_server *s = p->s;
        uint64_t now = now_monotonic_us() / 1000000;
        answer_looked_up(p, rcode, addrs, n, now);
        for (struct dns_pending *o = s->pending, *next; o; o = next) {
                next = o->next;
                if (o != p && o->follower && STREQ(o->msg.name, p->msg.name)) {
                        answer_looked_up(o, rcode, addrs, n, now);
                        pending_free(o);
                }
        }
        pending_free(p);
}

static void resolved(void *ud, int err, struct evutil_addrinfo *res)
{
        struct dns_pending *p = ud;
        struct netgate_dns_server *s = p->s;
        struct netgate *g = s->g;
        p->q = NULL;
        struct netgate_candidates cs = {0};
        netgate_candidates_add_answers(&cs, res);
        if (err || cs.n == 0) {
                answer_all(p, NETGATE_DNS_NXDOMAIN, NULL, 0);
                return;
        }
        /* One private answer refuses the name: a public and a private answer
         * together is a rebinding attempt. */
        for (size_t i = 0; i < cs.n; i++) {
                const char *range = netgate_address_refused(g, &cs.addr[i]);
                if (range) {
                        char a[NETGATE_ADDR_STRLEN];
                        netgate_addr_format(&cs.addr[i], a);
                        refuse(g, p->msg.name, "private_address", range, a);
                        answer_all(p, NETGATE_DNS_NXDOMAIN, NULL, 0);
                        return;
                }
        }
        answer_all(p, NETGATE_DNS_NOERROR, cs.addr, cs.n);
}

/* A name is answered when the rules allow it on some port: allowed on 443
 * or 80, or refused only for the port (a rule names another one). */
static bool name_allowed(struct netgate *g, const char *name, struct netgate_decision *d)
{
        static const uint16_t ports[] = {443, 80};
        for (size_t i = 0; i < ARRAY_SIZE(ports); i++) {
                netgate_rules_decide(g->rules, name, strlen(name), ports[i], d);
                if (d->allow || (d->reason && STREQ(d->reason, "port_not_allowed")))
                        return true;
        }
        return false;
}

static void serve_one(struct netgate_dns_server *s, const uint8_t *buf, size_t len,
                      const struct dns_to *to)
{
        struct netgate *g = s->g;
        struct netgate_dns_msg m;
        int r = netgate_dns_parse(buf, len, &m);
        if (r == -EINVAL)
                return;
        if (r < 0) {
                uint8_t out[NETGATE_DNS_HEADER];
                send_answer(s, to, out,
                            netgate_dns_error(buf, len, NETGATE_DNS_FORMERR, out, sizeof(out)));
                return;
        }
        struct netgate_host h;
        if (netgate_host_parse(m.name, m.name_len, &h) < 0 || h.kind != NETGATE_HOST_NAME) {
                char esc[NETGATE_HOST_MAX + 1];
                netgate_escape(m.name, m.name_len, esc, sizeof(esc));
                refuse(g, esc, "bad_host", NULL, NULL);
                answer(s, to, &m, buf, NETGATE_DNS_NXDOMAIN, NULL, 0);
                return;
        }
        snprintf(m.name, sizeof(m.name), "%s", h.name);
        /* The sandbox's own names (its host name is "airlock", spawn.c)
         * are its loopback: answered here, never looked up, nothing left. */
        if (STREQ(h.name, "airlock") || STREQ(h.name, "localhost")) {
                struct netgate_addr lo;
                (void)netgate_addr_parse("127.0.0.1", &lo);
                answer(s, to, &m, buf, NETGATE_DNS_NOERROR, &lo, 1);
                return;
        }
        struct netgate_decision d;
        /* A terminated route's host is answered whatever the allow-list
         * says, as a CONNECT to it is served: the route's rules apply. */
        if (!netgate_routes_terminates_name(g->routes, h.name) && !name_allowed(g, h.name, &d)) {
                refuse(g, h.name, d.reason, d.rule ? d.rule->text : NULL, NULL);
                answer(s, to, &m, buf, NETGATE_DNS_NXDOMAIN, NULL, 0);
                return;
        }
        /* Another class has no records here. Every type of IN is resolved
         * as A is, so that an AAAA question about a name that does not
         * exist, or that has a private address, is answered as the A
         * question is (NXDOMAIN), and about one that passes, with no
         * records (answer()). */
        if (m.qclass != NETGATE_DNS_CLASS_IN) {
                answer(s, to, &m, buf, NETGATE_DNS_NOERROR, NULL, 0);
                return;
        }
        struct netgate_addr fixed;
        if (netgate_fixed_host(g, h.name, &fixed)) {
                const char *range = netgate_address_refused(g, &fixed);
                if (range) {
                        char a[NETGATE_ADDR_STRLEN];
                        netgate_addr_format(&fixed, a);
                        refuse(g, h.name, "private_address", range, a);
                        answer(s, to, &m, buf, NETGATE_DNS_NXDOMAIN, NULL, 0);
                        return;
                }
                if (fixed.family == AF_INET && m.qtype == NETGATE_DNS_TYPE_A)
                        netgate_names_add(g->names, h.name, &fixed, now_monotonic_us() / 1000000);
                answer(s, to, &m, buf, NETGATE_DNS_NOERROR, &fixed, 1);
                return;
        }
        struct evdns_base *dns = netgate_resolver(g, true);
        if (!dns || s->n_pending >= DNS_PENDING_MAX ||
            (to->tcp && to->tcp->n_pending >= DNS_TCP_PENDING_MAX)) {
                answer(s, to, &m, buf, NETGATE_DNS_SERVFAIL, NULL, 0);
                return;
        }
        struct dns_pending *p = xcalloc(1, sizeof(*p));
        p->s = s;
        p->to = *to;
        if (to->tcp)
                to->tcp->n_pending++;
        p->msg = m;
        memcpy(p->query, buf, len);
        p->query_len = len;
        /* One lookup per name at a time: a question about a name being
         * looked up (the AAAA a client asks beside the A) waits for it. */
        for (struct dns_pending *o = s->pending; o && !p->follower; o = o->next)
                p->follower = !o->follower && STREQ(o->msg.name, h.name);
        p->next = s->pending;
        if (p->next)
                p->next->pprev = &p->next;
        p->pprev = &s->pending;
        s->pending = p;
        s->n_pending++;
        if (p->follower)
                return;
        struct netgate_dns_query *q = NULL;
        netgate_dns_resolve(dns, h.name, resolved, p, &q);
        /* Answered at once: `resolved` freed p already. */
        if (q)
                p->q = q;
}

static void readable(evutil_socket_t fd, short what, void *ud)
{
        struct netgate_dns_server *s = ud;
        (void)what;
        for (int i = 0; i < DNS_BURST; i++) {
                uint8_t buf[NETGATE_DNS_UDP_MAX];
                struct sockaddr_storage peer;
                socklen_t peer_len = sizeof(peer);
                ssize_t n = recvfrom(fd, buf, sizeof(buf), MSG_DONTWAIT | MSG_TRUNC,
                                     (struct sockaddr *)&peer, &peer_len);
                if (n < 0)
                        return;
                if ((size_t)n > sizeof(buf))
                        continue; /* larger than any plain query */
                struct dns_to to = {.peer = peer, .peer_len = peer_len};
                serve_one(s, buf, (size_t)n, &to);
        }
}

/* ---- DNS over TCP ----
 *
 * A client that falls back to TCP (a truncated answer, `options use-vc`)
 * connects to 127.0.0.1:53; the supervisor hands that connection to the
 * relay listener (transparent.h, verdict `dns`), and it is served here:
 * the same questions, the same answers and records. */

static void tcp_free(struct dns_tcp *t)
{
        struct netgate_dns_server *s = t->s;
        /* Lookups still running answer no one. */
        for (struct dns_pending *p = s->pending; p; p = p->next)
                if (p->to.tcp == t) {
                        p->to.tcp = NULL;
                        p->to.dropped = true;
                }
        *t->pprev = t->next;
        if (t->next)
                t->next->pprev = t->pprev;
        s->n_tcps--;
        netgate_bev_free(t->bev);
        free(t);
}

static void tcp_read(struct bufferevent *bev, void *ud)
{
        struct dns_tcp *t = ud;
        struct evbuffer *in = bufferevent_get_input(bev);
        uint8_t buf[2 + NETGATE_DNS_UDP_MAX];
        while (evbuffer_get_length(in) >= 2) {
                if (evbuffer_copyout(in, buf, 2) != 2)
                        return;
                size_t n = (size_t)buf[0] << 8 | buf[1];
                if (n < NETGATE_DNS_HEADER || n > NETGATE_DNS_UDP_MAX) {
                        tcp_free(t); /* larger than any plain query */
                        return;
                }
                if (evbuffer_get_length(in) < 2 + n)
                        return;
                if (evbuffer_remove(in, buf, 2 + n) != (int)(2 + n)) {
                        tcp_free(t);
                        return;
                }
                struct dns_to to = {.tcp = t};
                serve_one(t->s, buf + 2, n, &to);
        }
}

static void tcp_event(struct bufferevent *bev, short what, void *ud)
{
        (void)bev;
        (void)what; /* EOF, an error or the idle timeout */
        tcp_free(ud);
}

int netgate_dns_tcp_accept(struct netgate *g, int fd)
{
        struct netgate_dns_server *s = g->dns_server;
        if (!s || s->n_tcps >= DNS_TCP_MAX)
                return -ENOSPC;
        struct bufferevent *bev = bufferevent_socket_new(g->base, fd, BEV_OPT_CLOSE_ON_FREE);
        if (!bev)
                return -ENOMEM;
        struct dns_tcp *t = xcalloc(1, sizeof(*t));
        t->s = s;
        t->bev = bev;
        t->next = s->tcps;
        if (t->next)
                t->next->pprev = &t->next;
        t->pprev = &s->tcps;
        s->tcps = t;
        s->n_tcps++;
        struct timeval idle = {DNS_TCP_IDLE_S, 0};
        bufferevent_set_timeouts(bev, &idle, &idle);
        bufferevent_setwatermark(bev, EV_READ, 0, 2 + NETGATE_DNS_UDP_MAX);
        bufferevent_setcb(bev, tcp_read, NULL, tcp_event, t);
        bufferevent_enable(bev, EV_READ | EV_WRITE);
        return 0;
}

int netgate_add_dns(struct netgate *g, int udp_fd, struct al_error *err)
{
        int type = 0;
        socklen_t tl = sizeof(type);
        if (g->dns_server)
                return al_error_set(err, EEXIST, "adding the gate's name server");
        if (getsockopt(udp_fd, SOL_SOCKET, SO_TYPE, &type, &tl) < 0)
                return al_error_set(err, errno, "adding the gate's name server (fd %d)", udp_fd);
        if (type != SOCK_DGRAM)
                return al_error_set(err, EINVAL,
                                    "adding the gate's name server: not a datagram socket");
        int fl = fcntl(udp_fd, F_GETFL);
        if (fl < 0 || fcntl(udp_fd, F_SETFL, fl | O_NONBLOCK) < 0 ||
            fcntl(udp_fd, F_SETFD, FD_CLOEXEC) < 0)
                return al_error_set(err, errno, "adding the gate's name server");
        struct netgate_dns_server *s = xcalloc(1, sizeof(*s));
        s->g = g;
        s->fd = udp_fd;
        s->ev = event_new(g->base, udp_fd, EV_READ | EV_PERSIST, readable, s);
        if (!s->ev || event_add(s->ev, NULL) < 0) {
                if (s->ev)
                        event_free(s->ev);
                free(s);
                return al_error_set(err, ENOMEM, "adding the gate's name server");
        }
        if (!g->names)
                g->names = netgate_names_new();
        g->dns_server = s;
        return 0;
}

void netgate_dns_server_free(struct netgate *g)
{
        struct netgate_dns_server *s = g->dns_server;
        if (!s)
                return;
        while (s->pending)
                pending_free(s->pending);
        while (s->tcps)
                tcp_free(s->tcps);
        event_free(s->ev);
        close(s->fd);
        free(s);
        g->dns_server = NULL;
}
