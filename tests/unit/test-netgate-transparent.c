/* SPDX-License-Identifier: Apache-2.0 */
/* Transparent mode's gate side without a sandbox: the name server answers
 * on a UDP socket, and netgate_transparent_decide() decides addresses on
 * the names it answered. */
#include <arpa/inet.h>
#include <criterion/criterion.h>
#include <event2/event.h>
#include <netinet/in.h>
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
static int client = -1;
static struct sockaddr_in server;

#define MAX_RECS 16
static struct {
        char protocol[16], host[64], reason[32];
} recs[MAX_RECS];
static size_t n_recs;

static void recorder(void *ud, const struct netgate_record *r)
{
        (void)ud;
        if (n_recs >= MAX_RECS)
                return;
        snprintf(recs[n_recs].protocol, sizeof(recs[0].protocol), "%s", r->protocol);
        snprintf(recs[n_recs].host, sizeof(recs[0].host), "%s", r->host ? r->host : "");
        snprintf(recs[n_recs].reason, sizeof(recs[0].reason), "%s", r->reason ? r->reason : "");
        n_recs++;
}

static void host_add(const char *name, const char *ip)
{
        pol->net_hosts = xrealloc(pol->net_hosts, pol->n_net_hosts + 1, sizeof(*pol->net_hosts));
        pol->net_hosts[pol->n_net_hosts].key = xstrdup(name);
        pol->net_hosts[pol->n_net_hosts].value = xstrdup(ip);
        pol->n_net_hosts++;
}

static void start(void)
{
        struct al_error err = {0};
        gate = netgate_new(base, pol, "sbx-test", &err);
        cr_assert_not_null(gate, "%s", err.msg);
        netgate_set_recorder(gate, recorder, NULL);
        int s = socket(AF_INET, SOCK_DGRAM | SOCK_CLOEXEC, 0);
        server =
            (struct sockaddr_in){.sin_family = AF_INET, .sin_addr.s_addr = htonl(INADDR_LOOPBACK)};
        socklen_t l = sizeof(server);
        cr_assert_eq(bind(s, (struct sockaddr *)&server, sizeof(server)), 0);
        cr_assert_eq(getsockname(s, (struct sockaddr *)&server, &l), 0);
        cr_assert_eq(netgate_add_dns(gate, s, &err), 0, "%s", err.msg);
        client = socket(AF_INET, SOCK_DGRAM | SOCK_CLOEXEC | SOCK_NONBLOCK, 0);
}

static void setup(void)
{
        base = event_base_new();
        pol = policy_new();
        pol->net_allow = strv_append(pol->net_allow, &pol->n_net_allow, "api.test:443");
        pol->net_allow = strv_append(pol->net_allow, &pol->n_net_allow, "priv.test");
        pol->net_allow = strv_append(pol->net_allow, &pol->n_net_allow, "1.2.3.4:80");
        host_add("api.test", "93.184.216.34");
        host_add("priv.test", "10.0.0.1");
        n_recs = 0;
}

static void teardown(void)
{
        gate = netgate_free(gate);
        pol = policy_free(pol);
        if (client >= 0)
                close(client);
        client = -1;
        event_base_free(base);
}

/* Ask `name` of `qtype`; the answer's rcode, and its first address in *a. */
static int ask(const char *name, uint16_t qtype, struct in_addr *a, int *n_answers)
{
        uint8_t q[512] = {0xab, 0xcd, 1, 0, 0, 1, 0, 0, 0, 0, 0, 0};
        size_t pos = 12;
        const char *p = name;
        while (*p) {
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
        cr_assert_eq(sendto(client, q, pos, 0, (struct sockaddr *)&server, sizeof(server)),
                     (ssize_t)pos);
        uint8_t r[512];
        ssize_t n = -1;
        for (int i = 0; i < 200 && n < 0; i++) {
                event_base_loop(base, EVLOOP_NONBLOCK);
                n = recv(client, r, sizeof(r), 0);
                if (n < 0)
                        usleep(1000);
        }
        cr_assert_geq(n, (ssize_t)pos, "an answer to %s", name);
        cr_assert_eq(r[0], 0xab);
        *n_answers = r[7];
        if (*n_answers > 0 && a)
                memcpy(a, r + pos + 12, 4);
        return r[3] & 0x0f;
}

static void decide(const char *ip, uint16_t port, bool stream, struct netgate_verdict *v)
{
        struct sockaddr_storage ss = {0};
        socklen_t len;
        if (strchr(ip, ':')) {
                struct sockaddr_in6 *in6 = (struct sockaddr_in6 *)&ss;
                in6->sin6_family = AF_INET6;
                in6->sin6_port = htons(port);
                cr_assert_eq(inet_pton(AF_INET6, ip, &in6->sin6_addr), 1);
                len = sizeof(*in6);
        } else {
                struct sockaddr_in *in = (struct sockaddr_in *)&ss;
                in->sin_family = AF_INET;
                in->sin_port = htons(port);
                cr_assert_eq(inet_pton(AF_INET, ip, &in->sin_addr), 1);
                len = sizeof(*in);
        }
        netgate_transparent_decide(gate, (struct sockaddr *)&ss, len, stream, v);
}

static bool recorded(const char *protocol, const char *host, const char *reason)
{
        for (size_t i = 0; i < n_recs; i++)
                if (STREQ(recs[i].protocol, protocol) && STREQ(recs[i].host, host) &&
                    STREQ(recs[i].reason, reason))
                        return true;
        return false;
}

Test(netgate_transparent, direct_path_only_when_asked, .init = setup, .fini = teardown)
{
        pol->net_direct_path = true;
        start();
        struct in_addr a;
        int n;
        cr_assert_eq(ask("api.test", NETGATE_DNS_TYPE_A, &a, &n), NETGATE_DNS_NOERROR);
        struct netgate_verdict v;
        decide("93.184.216.34", 443, true, &v);
        cr_expect(v.allow, "%s", v.reason);
        cr_expect(!v.relay, "asked for, no budget, no rate: the direct path");
}

Test(netgate_transparent, decides_on_the_name_answered, .init = setup, .fini = teardown)
{
        start();
        struct netgate_verdict v;
        decide("93.184.216.34", 443, true, &v);
        cr_expect(!v.allow);
        cr_expect_str_eq(v.reason, "not_resolved", "nothing answered yet");

        struct in_addr a;
        int n;
        cr_assert_eq(ask("API.test", NETGATE_DNS_TYPE_A, &a, &n), NETGATE_DNS_NOERROR);
        cr_assert_eq(n, 1);
        cr_expect_str_eq(inet_ntoa(a), "93.184.216.34");

        decide("93.184.216.34", 443, true, &v);
        cr_expect(v.allow, "%s", v.reason);
        cr_expect_str_eq(v.host, "api.test");
        cr_expect(v.relay, "the relay unless the policy asks for the direct path");
        decide("::ffff:93.184.216.34", 443, true, &v);
        cr_expect(v.allow, "an IPv4-mapped address is the IPv4 address");
        cr_expect_eq(v.addr.family, AF_INET);
        decide("93.184.216.34", 80, true, &v);
        cr_expect_str_eq(v.reason, "port_not_allowed");
        cr_expect_str_eq(v.host, "api.test");
        decide("93.184.216.34", 443, false, &v);
        cr_expect_str_eq(v.reason, "not_stream");
        decide("2001:db8::1", 443, true, &v);
        cr_expect_str_eq(v.reason, "ipv6_not_offered");
        decide("1.2.3.4", 80, true, &v);
        cr_expect(v.allow, "an IP rule allows an address never answered");

        cr_expect_eq(ask("api.test", NETGATE_DNS_TYPE_AAAA, NULL, &n), NETGATE_DNS_NOERROR);
        cr_expect_eq(n, 0, "no IPv6 address is given out");
        cr_expect_eq(ask("airlock", NETGATE_DNS_TYPE_A, &a, &n), NETGATE_DNS_NOERROR);
        cr_expect_str_eq(inet_ntoa(a), "127.0.0.1");
}

Test(netgate_transparent, name_server_refusals_recorded, .init = setup, .fini = teardown)
{
        start();
        int n;
        cr_expect_eq(ask("other.test", NETGATE_DNS_TYPE_A, NULL, &n), NETGATE_DNS_NXDOMAIN);
        cr_expect(recorded("dns", "other.test", "not_allowed"));
        cr_expect_eq(ask("priv.test", NETGATE_DNS_TYPE_A, NULL, &n), NETGATE_DNS_NXDOMAIN);
        cr_expect(recorded("dns", "priv.test", "private_address"));
        struct netgate_verdict v;
        decide("10.0.0.1", 443, true, &v);
        cr_expect_str_eq(v.reason, "not_resolved", "a refused answer is not remembered");
}

Test(netgate_transparent, byte_budget_takes_the_relay, .init = setup, .fini = teardown)
{
        pol->budget.bytes = 1 << 20;
        pol->budget.requests = 1;
        start();
        struct in_addr a;
        int n;
        cr_assert_eq(ask("api.test", NETGATE_DNS_TYPE_A, &a, &n), NETGATE_DNS_NOERROR);
        struct netgate_verdict v;
        decide("93.184.216.34", 443, true, &v);
        cr_expect(v.allow && v.relay);
        decide("93.184.216.34", 443, true, &v);
        cr_expect(!v.allow);
        cr_expect_str_eq(v.reason, "budget_requests");
}
