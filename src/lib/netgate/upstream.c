/* SPDX-License-Identifier: Apache-2.0 */
#include <errno.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include <event2/bufferevent.h>
#include <event2/dns.h>
#include <event2/event.h>
#include <event2/util.h>

#include "netgate/netgate-internal.h"
#include "netgate/rules.h"
#include "netgate/parent.h"
#include "netgate/tls.h"
#include "netgate/upstream.h"
#include "util.h"

#define DNS_TIMEOUT_S "5"

/* ---- the resolver ---- */

struct evdns_base *netgate_resolver(struct netgate *g, bool resolv_conf)
{
        if (g->dns)
                return g->dns;
        g->dns = evdns_base_new(g->base, EVDNS_BASE_DISABLE_WHEN_INACTIVE);
        if (!g->dns)
                return NULL;
        evdns_base_set_option(g->dns, "timeout:", DNS_TIMEOUT_S);
        evdns_base_set_option(g->dns, "attempts:", "2");
        if (!resolv_conf)
                return g->dns;
        /* Not DNS_OPTION_SEARCH: a search domain would make the gate resolve
         * a different name from the one it checked. */
        evdns_base_resolv_conf_parse(g->dns,
                                     DNS_OPTION_NAMESERVERS | DNS_OPTION_MISC |
                                         DNS_OPTION_HOSTSFILE | DNS_OPTION_NAMESERVERS_NO_DEFAULT,
                                     "/etc/resolv.conf");
        return g->dns;
}

void netgate_candidates_add(struct netgate_candidates *cs, const struct netgate_addr *a)
{
        if (cs->n >= NETGATE_CANDIDATES_MAX)
                return;
        for (size_t i = 0; i < cs->n; i++)
                if (netgate_addr_equal(&cs->addr[i], a))
                        return;
        cs->addr[cs->n++] = *a;
}

void netgate_candidates_add_answers(struct netgate_candidates *cs, struct evutil_addrinfo *res)
{
        for (int pass = 0; pass < 2; pass++)
                for (struct evutil_addrinfo *ai = res; ai; ai = ai->ai_next) {
                        struct netgate_addr a;
                        if (netgate_addr_from_sockaddr(ai->ai_addr, (socklen_t)ai->ai_addrlen, &a) <
                            0)
                                continue;
                        if ((pass == 0) == (a.family == AF_INET))
                                netgate_candidates_add(cs, &a);
                }
        if (res)
                evutil_freeaddrinfo(res);
}

struct netgate_dns_query {
        void (*cb)(void *ud, int err, struct evutil_addrinfo *res);
        void *ud; /* NULL once the connection is gone */
        bool in_call, answered;
        int err;
        struct evutil_addrinfo *res;
};

static void dns_cb(int err, struct evutil_addrinfo *res, void *arg)
{
        struct netgate_dns_query *q = arg;
        if (q->in_call) {
                q->answered = true;
                q->err = err;
                q->res = res;
                return;
        }
        void (*cb)(void *, int, struct evutil_addrinfo *) = q->cb;
        void *ud = q->ud;
        free(q);
        if (!ud) {
                if (res)
                        evutil_freeaddrinfo(res);
                return;
        }
        cb(ud, err, res);
}

void netgate_dns_resolve(struct evdns_base *dns, const char *name,
                         void (*cb)(void *ud, int err, struct evutil_addrinfo *res), void *ud,
                         struct netgate_dns_query **ret_q)
{
        struct evutil_addrinfo hints = {
            .ai_family = AF_UNSPEC,
            .ai_socktype = SOCK_STREAM,
            .ai_protocol = IPPROTO_TCP,
            .ai_flags = EVUTIL_AI_ADDRCONFIG,
        };
        struct netgate_dns_query *q = xcalloc(1, sizeof(*q));
        q->cb = cb;
        q->ud = ud;
        q->in_call = true;
        (void)evdns_getaddrinfo(dns, name, NULL, &hints, dns_cb, q);
        q->in_call = false;
        if (q->answered) {
                int err = q->err;
                struct evutil_addrinfo *res = q->res;
                free(q);
                *ret_q = NULL;
                cb(ud, err, res);
                return;
        }
        *ret_q = q;
}

void netgate_dns_detach(struct netgate_dns_query *q)
{
        if (q)
                q->ud = NULL;
}

/* ---- the engine ---- */

static void connect_next(struct netgate_upstream *u);

void netgate_upstream_init(struct netgate_upstream *u, struct netgate *g,
                           const struct netgate_upstream_ops *ops, void *ud)
{
        *u = (struct netgate_upstream){.g = g, .ops = ops, .ud = ud, .connect_fd = -1};
}

const char *netgate_upstream_parent(const struct netgate_upstream *u)
{
        if (!u->via_parent || !u->g->parent)
                return NULL;
        return u->parent_by_name ? "name" : "address";
}

void netgate_upstream_stop(struct netgate_upstream *u)
{
        /* A query in flight finishes and frees itself. */
        netgate_dns_detach(u->dnsq);
        u->dnsq = NULL;
        if (u->ev_connect) {
                event_free(u->ev_connect);
                u->ev_connect = NULL;
        }
        if (u->connect_fd >= 0) {
                close(u->connect_fd);
                u->connect_fd = -1;
        }
        if (u->handshake) {
                netgate_bev_free(u->handshake);
                u->handshake = NULL;
        }
        netgate_parent_handshake_cancel(u->parent_hs);
        u->parent_hs = NULL;
}

static void fail(struct netgate_upstream *u, const char *reason, int err, const char *detail)
{
        netgate_upstream_stop(u);
        u->ops->failed(u->ud, reason, err, detail);
}

/* Every answer is checked, and one private answer refuses the name. */
static void check_and_connect(struct netgate_upstream *u)
{
        for (size_t i = 0; i < u->cand.n; i++) {
                const char *range = netgate_address_refused(u->g, &u->cand.addr[i]);
                if (range) {
                        u->addr = u->cand.addr[i];
                        u->have_addr = true;
                        u->ops->refused(u->ud, range);
                        return;
                }
        }
        u->cand.i = 0;
        connect_next(u);
}

static void dns_answer(void *ud, int err, struct evutil_addrinfo *res)
{
        struct netgate_upstream *u = ud;
        u->dnsq = NULL;
        netgate_candidates_add_answers(&u->cand, res);
        if (err || u->cand.n == 0) {
                fail(u, "dns_failed", 0, NULL);
                return;
        }
        check_and_connect(u);
}

void netgate_upstream_open(struct netgate_upstream *u, const struct netgate_host *host,
                           uint16_t port, const struct netgate_tls *tls)
{
        struct netgate_addr a;
        netgate_upstream_stop(u);
        u->host = host;
        u->port = port;
        u->tls = tls;
        u->have_addr = false;
        u->last_errno = 0;
        u->cand.n = u->cand.i = 0;
        u->via_parent = netgate_parent_applies(u->g->parent, host->name);
        u->parent_by_name = false;

        /* Numeric spellings are never handed to a resolver. */
        if (host->kind != NETGATE_HOST_NAME) {
                netgate_candidates_add(&u->cand, &host->addr);
                check_and_connect(u);
                return;
        }
        if (netgate_fixed_host(u->g, host->name, &a)) {
                netgate_candidates_add(&u->cand, &a);
                check_and_connect(u);
                return;
        }
        struct evdns_base *dns = netgate_resolver(u->g, true);
        if (!dns) {
                fail(u, "dns_failed", ENOMEM, NULL);
                return;
        }
        netgate_dns_resolve(dns, host->name, dns_answer, u, &u->dnsq);
}

void netgate_upstream_reopen(struct netgate_upstream *u)
{
        netgate_upstream_stop(u);
        u->cand.n = 0;
        netgate_candidates_add(&u->cand, &u->addr);
        u->cand.i = 0;
        connect_next(u);
}

static void deliver(struct netgate_upstream *u, struct bufferevent *bev)
{
        struct timeval tv;
        bufferevent_setcb(bev, NULL, NULL, NULL, NULL);
        bufferevent_set_timeouts(bev, netgate_secs(&tv, NETGATE_IO_TIMEOUT_S),
                                 netgate_secs(&tv, NETGATE_IO_TIMEOUT_S));
        u->last_errno = 0;
        u->ops->connected(u->ud, bev);
}

static void handshake_cb(struct bufferevent *bev, short what, void *ud)
{
        struct netgate_upstream *u = ud;
        if (what & BEV_EVENT_CONNECTED) {
                u->handshake = NULL;
                deliver(u, bev);
                return;
        }
        u->last_errno = (what & BEV_EVENT_TIMEOUT) ? ETIMEDOUT : EVUTIL_SOCKET_ERROR();
        netgate_tls_describe_failure(bev, u->last_errno, u->tls_error, sizeof(u->tls_error));
        fail(u, "upstream_tls", u->last_errno, u->tls_error);
}

/* The socket is connected: the transport goes on top of it. */
static void connected(struct netgate_upstream *u, int fd)
{
        struct timeval tv;
        struct bufferevent *bev;
        netgate_set_nodelay(fd);
        if (u->tls)
                bev = netgate_tls_layer(u->tls, u->g->base, fd, u->host);
        else
                bev = bufferevent_socket_new(u->g->base, fd,
                                             BEV_OPT_CLOSE_ON_FREE | BEV_OPT_DEFER_CALLBACKS);
        if (!bev) {
                close(fd);
                fail(u, "upstream_failed", ENOMEM, NULL);
                return;
        }
        netgate_setup_bufferevent(u->g, bev);
        if (!u->tls) {
                deliver(u, bev);
                return;
        }
        u->handshake = bev;
        bufferevent_setcb(bev, NULL, NULL, handshake_cb, u);
        bufferevent_set_timeouts(bev, netgate_secs(&tv, NETGATE_CONNECT_TIMEOUT_S),
                                 netgate_secs(&tv, NETGATE_CONNECT_TIMEOUT_S));
        bufferevent_enable(bev, EV_READ | EV_WRITE);
}

static void parent_done(void *ud, int err, const char *detail)
{
        struct netgate_upstream *u = ud;
        u->parent_hs = NULL;
        if (err < 0) {
                u->last_errno = -err;
                /* The next checked address, through the parent again. */
                if (u->cand.i < u->cand.n) {
                        close(TAKE_FD(u->connect_fd));
                        connect_next(u);
                        return;
                }
                fail(u, "upstream_failed", -err, detail);
                return;
        }
        connected(u, TAKE_FD(u->connect_fd));
}

static void connect_cb(evutil_socket_t fd, short what, void *ud)
{
        struct netgate_upstream *u = ud;
        int err = 0;
        socklen_t len = sizeof(err);
        if (what & EV_TIMEOUT)
                err = ETIMEDOUT;
        else if (getsockopt(fd, SOL_SOCKET, SO_ERROR, &err, &len) < 0)
                err = errno;
        event_free(u->ev_connect);
        u->ev_connect = NULL;
        if (!err && u->via_parent) {
                /* The parent connects to the address that was checked (the
                 * name only with parentProxySendNames: the parent resolves
                 * it again); the socket stays ours (connect_fd) meanwhile. */
                char a[NETGATE_ADDR_STRLEN];
                netgate_addr_format(&u->addr, a);
                u->parent_by_name = u->g->parent->send_names && u->host->kind == NETGATE_HOST_NAME;
                u->parent_hs = netgate_parent_handshake(u->g->parent, u->g->base, fd,
                                                        u->parent_by_name ? u->host->name : a,
                                                        u->port, parent_done, u);
                if (u->parent_hs)
                        return;
                err = ENOMEM;
        }
        int cfd = TAKE_FD(u->connect_fd);
        if (err) {
                close(cfd);
                u->last_errno = err;
                connect_next(u);
                return;
        }
        connected(u, cfd);
}

static void connect_next(struct netgate_upstream *u)
{
        struct timeval tv;
        while (u->cand.i < u->cand.n) {
                u->addr = u->cand.addr[u->cand.i++];
                u->have_addr = true;
                struct sockaddr_storage ss;
                const struct netgate_addr *to = &u->addr;
                uint16_t port = u->port;
                if (u->via_parent) {
                        /* The parent is the only way there: asked for each
                         * checked address in turn, or once for the name. */
                        to = &u->g->parent->addr;
                        port = u->g->parent->port;
                        if (u->g->parent->send_names && u->host->kind == NETGATE_HOST_NAME)
                                u->cand.i = u->cand.n;
                }
                socklen_t len = netgate_addr_to_sockaddr(to, port, &ss);
                _cleanup_close_ int fd =
                    socket(to->family, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, IPPROTO_TCP);
                if (fd < 0) {
                        u->last_errno = errno;
                        continue;
                }
                if (connect(fd, (struct sockaddr *)&ss, len) < 0 && errno != EINPROGRESS) {
                        u->last_errno = errno;
                        continue;
                }
                /* Even a connection made at once is taken up from the loop:
                 * the caller still holds its connection. */
                u->ev_connect = event_new(u->g->base, fd, EV_WRITE, connect_cb, u);
                if (!u->ev_connect) {
                        u->last_errno = ENOMEM;
                        continue;
                }
                event_add(u->ev_connect, netgate_secs(&tv, NETGATE_CONNECT_TIMEOUT_S));
                u->connect_fd = TAKE_FD(fd);
                return;
        }
        fail(u, "upstream_failed", u->last_errno, NULL);
}
