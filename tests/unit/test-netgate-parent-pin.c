/* SPDX-License-Identifier: Apache-2.0 */
/* The parent proxy is handed what the gate checked (netgate/parent.h): the
 * address the gate resolved and checked, in the HTTP parent's CONNECT line
 * and in the SOCKS5 parent's request, never the name, which the parent
 * would resolve again (a rebinding name would reach whatever its second
 * answer says). network.parentProxySendNames hands the name, and says so. */
#include <criterion/criterion.h>
#include <errno.h>
#include <poll.h>
#include <signal.h>
#include <string.h>
#include <unistd.h>

#include <event2/bufferevent.h>
#include <event2/event.h>

#include "netgate-test-util.h"
#include "netgate/netgate-internal.h"
#include "netgate/netgate.h"
#include "netgate/upstream.h"
#include "policy.h"
#include "util.h"

static struct event_base *base;
static struct policy *pol;
static struct netgate *gate;
static int parent_fd = -1;

static struct {
        int connected, refused, failed;
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
}

static void on_failed(void *ud, const char *reason, int err, const char *detail)
{
        seen.failed++;
}

static const struct netgate_upstream_ops ops = {
    .connected = on_connected,
    .refused = on_refused,
    .failed = on_failed,
};

static void setup(void)
{
        signal(SIGPIPE, SIG_IGN);
        memset(&seen, 0, sizeof(seen));
        base = event_base_new();
        pol = policy_new();
        /* The gate's own answer for the name: what it checks. */
        pol->net_hosts = xcalloc(1, sizeof(*pol->net_hosts));
        pol->net_hosts[0].key = xstrdup("rebind.test");
        pol->net_hosts[0].value = xstrdup("127.0.0.1");
        pol->n_net_hosts = 1;
        pol->net_allow_private =
            strv_append(pol->net_allow_private, &pol->n_net_allow_private, "127.0.0.1/32");
        parent_fd = ngt_loopback_socket(SOCK_STREAM);
}

static void start(const char *scheme, bool send_names)
{
        char url[64];
        snprintf(url, sizeof(url), "%s://127.0.0.1:%u", scheme, ngt_local_port(parent_fd));
        pol->net_parent_proxy = xstrdup(url);
        pol->net_parent_send_names = send_names;
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
        close(parent_fd);
}

/* Run the gate's loop until `fd` has `want` bytes (or a head's end when
 * want is 0) or 5 s pass; what was read, NUL-terminated. */
static size_t read_from_gate(int fd, char *buf, size_t size, size_t want)
{
        size_t got = 0;
        uint64_t t0 = now_monotonic_us();
        while (now_monotonic_us() - t0 < 5000000) {
                event_base_loop(base, EVLOOP_ONCE | EVLOOP_NONBLOCK);
                ssize_t n = recv(fd, buf + got, size - 1 - got, MSG_DONTWAIT);
                if (n > 0)
                        got += (size_t)n;
                buf[got] = '\0';
                if (want ? got >= want : strstr(buf, "\r\n\r\n") != NULL)
                        break;
                usleep(1000);
        }
        return got;
}

static int accept_from_gate(void)
{
        uint64_t t0 = now_monotonic_us();
        while (now_monotonic_us() - t0 < 5000000) {
                event_base_loop(base, EVLOOP_ONCE | EVLOOP_NONBLOCK);
                int fd = accept4(parent_fd, NULL, NULL, SOCK_CLOEXEC);
                if (fd >= 0)
                        return fd;
                usleep(1000);
        }
        cr_assert_fail("the gate never connected to the parent");
        return -1;
}

static void wait_outcome(void)
{
        uint64_t t0 = now_monotonic_us();
        while (seen.connected + seen.refused + seen.failed == 0 &&
               now_monotonic_us() - t0 < 5000000)
                event_base_loop(base, EVLOOP_ONCE | EVLOOP_NONBLOCK);
}

/* The owner's, valid while the upstream opens. */
static struct netgate_host h;

static void open_rebind(struct netgate_upstream *u)
{
        cr_assert_eq(netgate_host_parse("rebind.test", 11, &h), 0);
        netgate_upstream_init(u, gate, &ops, NULL);
        netgate_upstream_open(u, &h, 8443, NULL);
}

TestSuite(netgate_parent_pin, .init = setup, .fini = teardown, .timeout = 30);

Test(netgate_parent_pin, http_parent_is_asked_for_the_checked_address)
{
        start("http", false);
        struct netgate_upstream u;
        open_rebind(&u);
        int pfd = accept_from_gate();
        char head[1024];
        read_from_gate(pfd, head, sizeof(head), 0);
        cr_expect(strncmp(head, "CONNECT 127.0.0.1:8443 HTTP/1.1\r\n", 33) == 0,
                  "the parent was asked: %s", head);
        cr_expect(strstr(head, "rebind.test") == NULL, "the name reached the parent: %s", head);
        cr_assert_eq(send(pfd, "HTTP/1.1 200 OK\r\n\r\n", 19, MSG_NOSIGNAL), 19);
        wait_outcome();
        cr_expect_eq(seen.connected, 1);
        cr_expect_str_eq(netgate_upstream_parent(&u), "address");
        netgate_upstream_stop(&u);
        close(pfd);
}

Test(netgate_parent_pin, socks5_parent_is_asked_for_the_checked_address)
{
        start("socks5", false);
        struct netgate_upstream u;
        open_rebind(&u);
        int pfd = accept_from_gate();
        char buf[512];
        cr_assert_eq(read_from_gate(pfd, buf, sizeof(buf), 3), 3);
        cr_assert_eq(send(pfd, "\x05\x00", 2, MSG_NOSIGNAL), 2);
        /* VER CMD RSV ATYP=1 (IPv4) 127.0.0.1 PORT */
        size_t n = read_from_gate(pfd, buf, sizeof(buf), 10);
        static const unsigned char want[] = {5, 1, 0, 1, 127, 0, 0, 1, 8443 >> 8, 8443 & 0xff};
        cr_expect_eq(n, sizeof(want), "the request has %zu bytes (ATYP %u)", n,
                     n > 3 ? (unsigned char)buf[3] : 0);
        cr_expect(memcmp(buf, want, sizeof(want)) == 0, "not a CONNECT to 127.0.0.1:8443");
        cr_assert_eq(send(pfd, "\x05\x00\x00\x01\x7f\x00\x00\x01\x00\x00", 10, MSG_NOSIGNAL), 10);
        wait_outcome();
        cr_expect_eq(seen.connected, 1);
        netgate_upstream_stop(&u);
        close(pfd);
}

Test(netgate_parent_pin, send_names_hands_the_name_and_says_so)
{
        start("http", true);
        struct netgate_upstream u;
        open_rebind(&u);
        int pfd = accept_from_gate();
        char head[1024];
        read_from_gate(pfd, head, sizeof(head), 0);
        cr_expect(strncmp(head, "CONNECT rebind.test:8443 HTTP/1.1\r\n", 35) == 0,
                  "the parent was asked: %s", head);
        cr_assert_eq(send(pfd, "HTTP/1.1 200 OK\r\n\r\n", 19, MSG_NOSIGNAL), 19);
        wait_outcome();
        cr_expect_eq(seen.connected, 1);
        cr_expect_str_eq(netgate_upstream_parent(&u), "name");
        netgate_upstream_stop(&u);
        close(pfd);
}

/* The gate's own answer is still checked first: a private answer is
 * refused before the parent hears of it. */
Test(netgate_parent_pin, a_private_answer_never_reaches_the_parent)
{
        free(pol->net_hosts[0].value);
        pol->net_hosts[0].value = xstrdup("10.1.2.3");
        start("http", false);
        struct netgate_upstream u;
        open_rebind(&u);
        wait_outcome();
        cr_expect_eq(seen.refused, 1);
        cr_expect_lt(accept(parent_fd, NULL, NULL), 0, "the parent was reached");
        netgate_upstream_stop(&u);
}

/* ---- a name with two checked answers ---- */

static int dns_fd = -1;

/* The gate's resolver asks: two.test is 127.0.0.1 and 127.0.0.2 (A), no
 * AAAA. Answers every query waiting. */
static void serve_dns(void)
{
        uint8_t q[512], r[600];
        struct sockaddr_in from;
        socklen_t fl = sizeof(from);
        ssize_t n;
        while ((n = recvfrom(dns_fd, q, sizeof(q), MSG_DONTWAIT, (struct sockaddr *)&from, &fl)) >=
               17) {
                size_t off = 12;
                while (off < (size_t)n && q[off])
                        off += (size_t)q[off] + 1;
                off++;
                if (off + 4 > (size_t)n)
                        continue;
                int qtype = q[off] << 8 | q[off + 1];
                off += 4;
                memcpy(r, q, off);
                r[2] = (uint8_t)(0x84 | (q[2] & 0x01));
                r[3] = 0x80;
                memset(r + 6, 0, 6);
                size_t len = off;
                if (qtype == 1) {
                        static const uint8_t rr[] = {0xc0, 0x0c, 0, 1,  0, 1,    0,    0, 0, 60, 0,
                                                     4,    127,  0, 0,  1, 0xc0, 0x0c, 0, 1, 0,  1,
                                                     0,    0,    0, 60, 0, 4,    127,  0, 0, 2};
                        r[7] = 2;
                        memcpy(r + len, rr, sizeof(rr));
                        len += sizeof(rr);
                }
                (void)sendto(dns_fd, r, len, 0, (struct sockaddr *)&from, fl);
                fl = sizeof(from);
        }
}

static int accept_serving_dns(void)
{
        uint64_t t0 = now_monotonic_us();
        while (now_monotonic_us() - t0 < 5000000) {
                event_base_loop(base, EVLOOP_ONCE | EVLOOP_NONBLOCK);
                serve_dns();
                int fd = accept4(parent_fd, NULL, NULL, SOCK_CLOEXEC);
                if (fd >= 0)
                        return fd;
                usleep(1000);
        }
        cr_assert_fail("the gate never connected to the parent");
        return -1;
}

/* The parent cannot reach the first checked address: the next one is
 * asked for, through the parent again, never the name. */
Test(netgate_parent_pin, each_checked_address_is_tried_through_the_parent)
{
        free(pol->net_allow_private[0]);
        pol->net_allow_private[0] = xstrdup("127.0.0.0/8");
        start("http", false);
        dns_fd = ngt_loopback_socket(SOCK_DGRAM);
        char ns[32];
        snprintf(ns, sizeof(ns), "127.0.0.1:%u", ngt_local_port(dns_fd));
        struct al_error err = {0};
        cr_assert_eq(netgate_set_nameserver(gate, ns, &err), 0, "%s", err.msg);
        struct netgate_upstream u;
        cr_assert_eq(netgate_host_parse("two.test", 8, &h), 0);
        netgate_upstream_init(&u, gate, &ops, NULL);
        netgate_upstream_open(&u, &h, 8443, NULL);
        char head[1024];
        int pfd = accept_serving_dns();
        read_from_gate(pfd, head, sizeof(head), 0);
        cr_expect(strncmp(head, "CONNECT 127.0.0.1:8443 ", 23) == 0, "first: %s", head);
        cr_assert_eq(send(pfd, "HTTP/1.1 502 Bad Gateway\r\n\r\n", 28, MSG_NOSIGNAL), 28);
        close(pfd);
        pfd = accept_from_gate();
        read_from_gate(pfd, head, sizeof(head), 0);
        cr_expect(strncmp(head, "CONNECT 127.0.0.2:8443 ", 23) == 0, "second: %s", head);
        cr_assert_eq(send(pfd, "HTTP/1.1 200 OK\r\n\r\n", 19, MSG_NOSIGNAL), 19);
        wait_outcome();
        cr_expect_eq(seen.connected, 1);
        cr_expect_eq(seen.failed, 0);
        netgate_upstream_stop(&u);
        close(pfd);
        close(dns_fd);
}
