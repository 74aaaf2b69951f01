/* SPDX-License-Identifier: Apache-2.0 */
/* The upstream engine (src/lib/netgate/upstream.h) on its own: it refuses a
 * private answer without connecting, connects to exactly the address it
 * checked, reconnects to that address only, reports a failed connect or a
 * failed TLS layer, and calls nothing once stopped. */
#include <criterion/criterion.h>
#include <errno.h>
#include <signal.h>
#include <string.h>
#include <unistd.h>

#include <event2/bufferevent.h>
#include <event2/event.h>

#include "netgate-test-util.h"
#include "netgate/netgate-internal.h"
#include "netgate/netgate.h"
#include "netgate/rules.h"
#include "netgate/tls.h"
#include "netgate/upstream.h"
#include "policy.h"
#include "util.h"

static struct event_base *base;
static struct policy *pol;
static struct netgate *gate;

static struct {
        int connected, refused, failed;
        char range[64], reason[32];
        int err;
        struct bufferevent *up;
} seen;

static void on_connected(void *ud, struct bufferevent *up)
{
        seen.connected++;
        seen.up = up;
}

static void on_refused(void *ud, const char *range)
{
        seen.refused++;
        ngt_copy(seen.range, sizeof(seen.range), range);
}

static void on_failed(void *ud, const char *reason, int err, const char *detail)
{
        seen.failed++;
        seen.err = err;
        ngt_copy(seen.reason, sizeof(seen.reason), reason);
}

static const struct netgate_upstream_ops ops = {
    .connected = on_connected,
    .refused = on_refused,
    .failed = on_failed,
};

static void setup(void)
{
        /* The daemon and the supervisor ignore it too. */
        signal(SIGPIPE, SIG_IGN);
        memset(&seen, 0, sizeof(seen));
        base = event_base_new();
        pol = policy_new();
        pol->net_hosts = xcalloc(1, sizeof(*pol->net_hosts));
        pol->net_hosts[0].key = xstrdup("svc.test");
        pol->net_hosts[0].value = xstrdup("127.0.0.1");
        pol->n_net_hosts = 1;
}

static void start(bool allow_loopback)
{
        if (allow_loopback)
                pol->net_allow_private =
                    strv_append(pol->net_allow_private, &pol->n_net_allow_private, "127.0.0.0/8");
        struct al_error err = {0};
        gate = netgate_new(base, pol, "t", &err);
        cr_assert_not_null(gate, "%s", err.msg);
}

static void teardown(void)
{
        if (seen.up)
                bufferevent_free(seen.up);
        gate = netgate_free(gate);
        pol = policy_free(pol);
        event_base_free(base);
}

/* Run the loop until an outcome, at most 5 s. */
static void wait_outcome(void)
{
        uint64_t t0 = now_monotonic_us();
        while (seen.connected + seen.refused + seen.failed == 0 &&
               now_monotonic_us() - t0 < 5000000)
                event_base_loop(base, EVLOOP_ONCE | EVLOOP_NONBLOCK);
}

static void host_of(const char *s, struct netgate_host *h)
{
        cr_assert_eq(netgate_host_parse(s, strlen(s), h), 0);
}

static uint16_t peer_port(struct bufferevent *bev, char *addr, size_t n)
{
        struct sockaddr_in sin;
        socklen_t len = sizeof(sin);
        cr_assert_eq(getpeername(bufferevent_getfd(bev), (struct sockaddr *)&sin, &len), 0);
        inet_ntop(AF_INET, &sin.sin_addr, addr, (socklen_t)n);
        return ntohs(sin.sin_port);
}

TestSuite(netgate_upstream, .init = setup, .fini = teardown, .timeout = 30);

Test(netgate_upstream, private_literal_is_refused_without_connecting)
{
        start(false);
        int lfd = ngt_loopback_socket(SOCK_STREAM);
        struct netgate_upstream u;
        struct netgate_host h;
        host_of("127.0.0.1", &h);
        netgate_upstream_init(&u, gate, &ops, NULL);
        netgate_upstream_open(&u, &h, ngt_local_port(lfd), NULL);
        wait_outcome();
        cr_assert_eq(seen.refused, 1);
        cr_assert_eq(seen.connected + seen.failed, 0);
        cr_assert_str_eq(seen.range, "loopback 127.0.0.0/8");
        cr_assert(u.have_addr);
        /* Nothing reached the listener. */
        cr_assert_lt(accept(lfd, NULL, NULL), 0);
        cr_assert_eq(errno, EAGAIN);
        netgate_upstream_stop(&u);
        close(lfd);
}

Test(netgate_upstream, fixed_host_is_checked_too)
{
        start(false);
        struct netgate_upstream u;
        struct netgate_host h;
        host_of("svc.test", &h);
        netgate_upstream_init(&u, gate, &ops, NULL);
        netgate_upstream_open(&u, &h, 9, NULL);
        wait_outcome();
        cr_assert_eq(seen.refused, 1);
        cr_assert_str_eq(seen.range, "loopback 127.0.0.0/8");
        netgate_upstream_stop(&u);
}

Test(netgate_upstream, connects_to_the_checked_address)
{
        start(true);
        int lfd = ngt_loopback_socket(SOCK_STREAM);
        uint16_t port = ngt_local_port(lfd);
        struct netgate_upstream u;
        struct netgate_host h;
        host_of("svc.test", &h);
        netgate_upstream_init(&u, gate, &ops, NULL);
        netgate_upstream_open(&u, &h, port, NULL);
        /* Even an instant connect is taken up from the loop. */
        cr_assert_eq(seen.connected, 0);
        wait_outcome();
        cr_assert_eq(seen.connected, 1, "refused %d failed %d %s", seen.refused, seen.failed,
                     seen.reason);
        char addr[64];
        cr_assert_eq(peer_port(seen.up, addr, sizeof(addr)), port);
        cr_assert_str_eq(addr, "127.0.0.1");
        char fmt[NETGATE_ADDR_STRLEN];
        netgate_addr_format(&u.addr, fmt);
        cr_assert_str_eq(fmt, "127.0.0.1");

        /* Again: to that address only. */
        bufferevent_free(seen.up);
        memset(&seen, 0, sizeof(seen));
        netgate_upstream_reopen(&u);
        wait_outcome();
        cr_assert_eq(seen.connected, 1);
        cr_assert_eq(peer_port(seen.up, addr, sizeof(addr)), port);
        netgate_upstream_stop(&u);
        close(lfd);
}

Test(netgate_upstream, refused_connect_fails_with_its_errno)
{
        start(true);
        int cfd = ngt_loopback_socket(SOCK_STREAM);
        uint16_t port = ngt_local_port(cfd);
        close(cfd);
        struct netgate_upstream u;
        struct netgate_host h;
        host_of("127.0.0.1", &h);
        netgate_upstream_init(&u, gate, &ops, NULL);
        netgate_upstream_open(&u, &h, port, NULL);
        wait_outcome();
        cr_assert_eq(seen.failed, 1);
        cr_assert_str_eq(seen.reason, "upstream_failed");
        cr_assert_eq(seen.err, ECONNREFUSED);
        cr_assert(u.have_addr);
        netgate_upstream_stop(&u);
}

Test(netgate_upstream, tls_layer_failure_is_upstream_tls)
{
        start(true);
        struct netgate_tls *tls = NULL;
        struct al_error err = {0};
        cr_assert_eq(netgate_tls_new(NULL, "t", &tls, &err), 0, "%s", err.msg);
        /* A server that closes at once: no handshake. */
        int lfd = ngt_loopback_socket(SOCK_STREAM);
        struct netgate_upstream u;
        struct netgate_host h;
        host_of("127.0.0.1", &h);
        netgate_upstream_init(&u, gate, &ops, NULL);
        netgate_upstream_open(&u, &h, ngt_local_port(lfd), tls);
        uint64_t t0 = now_monotonic_us();
        int afd = -1;
        while (afd < 0 && now_monotonic_us() - t0 < 5000000) {
                event_base_loop(base, EVLOOP_ONCE | EVLOOP_NONBLOCK);
                afd = accept(lfd, NULL, NULL);
        }
        cr_assert_geq(afd, 0);
        close(afd);
        wait_outcome();
        cr_assert_eq(seen.failed, 1);
        cr_assert_eq(seen.connected, 0);
        cr_assert_str_eq(seen.reason, "upstream_tls");
        netgate_upstream_stop(&u);
        netgate_tls_free(tls);
        close(lfd);
}

Test(netgate_upstream, stopped_engine_calls_nothing)
{
        start(true);
        int lfd = ngt_loopback_socket(SOCK_STREAM);
        struct netgate_upstream u;
        struct netgate_host h;
        host_of("127.0.0.1", &h);
        netgate_upstream_init(&u, gate, &ops, NULL);
        netgate_upstream_open(&u, &h, ngt_local_port(lfd), NULL);
        netgate_upstream_stop(&u);
        for (int i = 0; i < 20; i++)
                event_base_loop(base, EVLOOP_NONBLOCK);
        cr_assert_eq(seen.connected + seen.refused + seen.failed, 0);
        close(lfd);
}
