/* SPDX-License-Identifier: Apache-2.0 */
/* Transparent mode's name server asks its resolver once per name: a second
 * question about a name being looked up waits for that lookup. A client
 * that asks AAAA first and A beside it (Go's resolver sends both at once,
 * in either order) must get an A answer the gate remembers, so that a
 * connection to the address it was given is decided on the name. */
#include <arpa/inet.h>
#include <criterion/criterion.h>
#include <event2/event.h>
#include <netinet/in.h>
#include <poll.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include "netgate/dns.h"
#include "netgate/netgate.h"
#include "netgate/transparent.h"
#include "policy.h"
#include "util.h"

static struct event_base *base;
static struct policy *pol;
static struct netgate *gate;
static int client = -1, upstream_dns = -1;
static struct sockaddr_in server;

static int udp_loopback(struct sockaddr_in *ret)
{
        int s = socket(AF_INET, SOCK_DGRAM | SOCK_CLOEXEC | SOCK_NONBLOCK, 0);
        cr_assert_geq(s, 0);
        struct sockaddr_in a = {.sin_family = AF_INET, .sin_addr.s_addr = htonl(INADDR_LOOPBACK)};
        socklen_t l = sizeof(a);
        cr_assert_eq(bind(s, (struct sockaddr *)&a, sizeof(a)), 0);
        cr_assert_eq(getsockname(s, (struct sockaddr *)&a, &l), 0);
        if (ret)
                *ret = a;
        return s;
}

static void setup(void)
{
        struct al_error err = {0};
        base = event_base_new();
        pol = policy_new();
        pol->net_allow = strv_append(pol->net_allow, &pol->n_net_allow, "api.test:443");
        gate = netgate_new(base, pol, "sbx-test", &err);
        cr_assert_not_null(gate, "%s", err.msg);
        struct sockaddr_in up;
        upstream_dns = udp_loopback(&up);
        char ns[32];
        snprintf(ns, sizeof(ns), "127.0.0.1:%u", ntohs(up.sin_port));
        cr_assert_eq(netgate_set_nameserver(gate, ns, &err), 0, "%s", err.msg);
        int s = udp_loopback(&server);
        cr_assert_eq(netgate_add_dns(gate, s, &err), 0, "%s", err.msg);
        client = udp_loopback(NULL);
}

static void teardown(void)
{
        gate = netgate_free(gate);
        pol = policy_free(pol);
        close(client);
        close(upstream_dns);
        event_base_free(base);
}

static size_t query(uint8_t *q, uint16_t id, const char *name, uint16_t qtype)
{
        q[0] = (uint8_t)(id >> 8);
        q[1] = (uint8_t)id;
        memcpy(q + 2, (uint8_t[]){1, 0, 0, 1, 0, 0, 0, 0, 0, 0}, 10);
        size_t pos = 12;
        for (const char *p = name; *p;) {
                const char *dot = strchr(p, '.');
                size_t l = dot ? (size_t)(dot - p) : strlen(p);
                q[pos++] = (uint8_t)l;
                memcpy(q + pos, p, l);
                pos += l;
                p += l + (dot ? 1 : 0);
        }
        q[pos++] = 0;
        q[pos++] = (uint8_t)(qtype >> 8);
        q[pos++] = (uint8_t)qtype;
        q[pos++] = 0;
        q[pos++] = 1;
        return pos;
}

/* The gate's resolver asked us: api.test is 93.184.216.35, IPv4 only. */
static void serve_upstream(void)
{
        uint8_t q[512], r[600];
        struct sockaddr_in from;
        socklen_t fl = sizeof(from);
        ssize_t n = recvfrom(upstream_dns, q, sizeof(q), 0, (struct sockaddr *)&from, &fl);
        if (n < 17)
                return;
        size_t off = 12;
        while (off < (size_t)n && q[off])
                off += (size_t)q[off] + 1;
        off++;
        if (off + 4 > (size_t)n)
                return;
        int qtype = q[off] << 8 | q[off + 1];
        off += 4;
        memcpy(r, q, off);
        r[2] = (uint8_t)(0x84 | (q[2] & 0x01));
        r[3] = 0x80;
        memset(r + 6, 0, 6);
        size_t len = off;
        if (qtype == NETGATE_DNS_TYPE_A) {
                static const uint8_t rr[] = {0xc0, 0x0c, 0, 1, 0,  1,   0,   0,
                                             0,    60,   0, 4, 93, 184, 216, 35};
                r[7] = 1;
                memcpy(r + len, rr, sizeof(rr));
                len += sizeof(rr);
        }
        (void)sendto(upstream_dns, r, len, 0, (struct sockaddr *)&from, fl);
}

Test(netgate_dns_follower, a_beside_aaaa_is_remembered, .init = setup, .fini = teardown)
{
        uint8_t q[2][512];
        size_t ql[2] = {query(q[0], 0x1111, "api.test", NETGATE_DNS_TYPE_AAAA),
                        query(q[1], 0x2222, "api.test", NETGATE_DNS_TYPE_A)};
        /* Both sent before the gate reads either: the AAAA leads the lookup. */
        for (int i = 0; i < 2; i++)
                cr_assert_eq(
                    sendto(client, q[i], ql[i], 0, (struct sockaddr *)&server, sizeof(server)),
                    (ssize_t)ql[i]);
        int answers = 0, a_answers = -1;
        for (int i = 0; i < 2000 && answers < 2; i++) {
                event_base_loop(base, EVLOOP_NONBLOCK);
                serve_upstream();
                uint8_t r[512];
                ssize_t n = recv(client, r, sizeof(r), 0);
                if (n >= 12) {
                        answers++;
                        if (r[0] == 0x22)
                                a_answers = r[7];
                } else
                        poll(NULL, 0, 1);
        }
        cr_assert_eq(answers, 2, "both questions answered");
        cr_assert_eq(a_answers, 1, "the A question got the address");
        struct sockaddr_in to = {.sin_family = AF_INET, .sin_port = htons(443)};
        inet_pton(AF_INET, "93.184.216.35", &to.sin_addr);
        struct netgate_verdict v;
        netgate_transparent_decide(gate, (struct sockaddr *)&to, sizeof(to), true, &v);
        cr_expect(v.allow, "the address given out for api.test is decided on it, not %s",
                  v.reason ? v.reason : "");
        cr_expect_str_eq(v.host, "api.test");
}
