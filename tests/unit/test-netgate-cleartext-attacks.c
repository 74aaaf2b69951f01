/* SPDX-License-Identifier: Apache-2.0 */
/* Attacks on the cleartext check (netgate/cleartext.c): an address that
 * only embeds a loopback IPv4 address (NAT64, 6to4, IPv4-compatible or
 * -translated) is routed off the host (to a translator, a relay, the
 * default route), so a secret sent there in plain HTTP would cross the
 * network: it does not "stay on the host". The IPv4-mapped form is the
 * IPv4 loopback itself (the kernel connects over IPv4) and does. */
#include <criterion/criterion.h>
#include <string.h>

#include <event2/event.h>

#include "netgate/netgate-internal.h"
#include "netgate/netgate.h"
#include "netgate/http.h"
#include "netgate/rules.h"
#include "netgate/sentinel.h"
#include "policy.h"
#include "util.h"

static struct netgate *gate(void)
{
        static struct event_base *base;
        struct policy *p = policy_new();
        p->net_hosts = xcalloc(2, sizeof(*p->net_hosts));
        p->net_hosts[0] = (struct policy_kv){xstrdup("nat64.test"), xstrdup("64:ff9b::7f00:1")};
        p->n_net_hosts = 1;
        /* The operator lets the gate reach the host's loopback (and so,
         * through the embedded address, the forms below). */
        p->net_allow_private =
            strv_append(p->net_allow_private, &p->n_net_allow_private, "127.0.0.0/8");
        if (!base)
                base = event_base_new();
        struct al_error err = {0};
        struct netgate *g = netgate_new(base, p, "t", &err);
        cr_assert_not_null(g, "%s", err.msg);
        policy_free(p);
        return g;
}

static bool stays(struct netgate *g, const char *s)
{
        struct netgate_host h;
        cr_assert_eq(netgate_host_parse(s, strlen(s), &h), 0, "%s", s);
        return netgate_stays_on_host(g, &h);
}

Test(cleartext_attacks, an_embedded_loopback_address_leaves_the_host, .timeout = 30)
{
        struct netgate *g = gate();
        cr_expect(stays(g, "127.0.0.1"));
        cr_expect(stays(g, "127.9.8.7"));
        cr_expect(stays(g, "::1"));
        cr_expect(stays(g, "::ffff:127.0.0.1"), "IPv4-mapped: the IPv4 loopback itself");
        cr_expect_not(stays(g, "64:ff9b::7f00:1"), "NAT64: to the translator");
        cr_expect_not(stays(g, "2002:7f00:1::1"), "6to4: to a relay");
        cr_expect_not(stays(g, "::7f00:1"), "IPv4-compatible: routed as IPv6");
        cr_expect_not(stays(g, "::ffff:0:7f00:1"), "IPv4-translated: to a translator");
        cr_expect_not(stays(g, "nat64.test"), "a name network.hosts fixes to NAT64");
        netgate_free(g);
}

/* A value put in is not read again for placeholders: with sentinel A
 * (allowed in cleartext to the host) whose value completes a placeholder
 * of B (not allowed) split around A's, the cleartext check passes (B's
 * placeholder is not in the request) and B's secret must not go out. */
Test(cleartext_attacks, a_value_put_in_does_not_complete_another_placeholder, .timeout = 30)
{
        static char pa[NETGATE_SENTINEL_LEN + 1], pb[NETGATE_SENTINEL_LEN + 1];
        cr_assert_eq(netgate_sentinel_make(pa), 0);
        cr_assert_eq(netgate_sentinel_make(pb), 0);
        static char *hosts[] = {"h.test"};
        char mid[5];
        memcpy(mid, pb + 17, 4); /* A's value: 4 characters of B's placeholder */
        mid[4] = '\0';
        struct netgate_sentinel v[2] = {
            {.env = "A",
             .placeholder = pa,
             .value = mid,
             .value_len = 4,
             .hosts = hosts,
             .n_hosts = 1,
             .cleartext = true},
            {.env = "B",
             .placeholder = pb,
             .value = "SECRET-B",
             .value_len = 8,
             .hosts = hosts,
             .n_hosts = 1},
        };
        struct netgate_sentinels set = {.v = v, .n = 2};
        _cleanup_free_ char *field = xasprintf("%.17s%s%s", pb, pa, pb + 21);
        static struct netgate_http_parser parser;
        _cleanup_free_ char *req =
            xasprintf("GET http://h.test/ HTTP/1.1\r\nHost: h.test\r\nX-Token: %s\r\n\r\n", field);
        netgate_http_parser_init(&parser, NETGATE_HTTP_REQUEST);
        size_t used = 0;
        cr_assert_eq(netgate_http_parser_feed(&parser, req, strlen(req), &used), 1);
        const struct netgate_sentinel *refused =
            netgate_sentinels_cleartext_refused(&set, "h.test", 80, &parser.head, NULL, NULL);
        char *out = NULL;
        size_t out_len = 0;
        int r = netgate_sentinels_apply(&set, "h.test", "X-Token", 7, field, strlen(field), &out,
                                        &out_len);
        bool leaks = r > 0 && memmem(out, out_len, "SECRET-B", 8);
        cr_expect(refused || !leaks, "B's secret goes out in plain HTTP, unchecked: %.*s",
                  (int)out_len, out ? out : "");
        free(out);
}
