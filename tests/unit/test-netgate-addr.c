/* SPDX-License-Identifier: Apache-2.0 */
#include <criterion/criterion.h>
#include <netinet/in.h>
#include <string.h>

#include "netgate/addr.h"

static struct netgate_addr addr(const char *s)
{
        struct netgate_addr a;
        cr_assert_eq(netgate_addr_parse(s, &a), 0, "%s should parse", s);
        return a;
}

static struct netgate_cidr cidr(const char *s)
{
        struct netgate_cidr c;
        cr_assert_eq(netgate_cidr_parse(s, &c), 0, "%s should parse", s);
        return c;
}

Test(netgate_addr, parse_strict)
{
        struct netgate_addr a = addr("192.168.1.20");
        cr_expect_eq(a.family, AF_INET);
        cr_expect_eq(a.bytes[0], 192);
        cr_expect_eq(a.bytes[3], 20);
        cr_expect_eq(addr("0.0.0.0").family, AF_INET);
        cr_expect_eq(addr("255.255.255.255").bytes[2], 255);
        cr_expect_eq(addr("::").family, AF_INET6);
        cr_expect_eq(addr("::ffff:1.2.3.4").bytes[15], 4);

        const char *bad[] = {"",           "1.2.3",           "1.2.3.4.5",
                             "01.2.3.4",   "1.2.3.04",        "256.1.1.1",
                             "1.2.3.4 ",   " 1.2.3.4",        "2130706433",
                             "0x7f.0.0.1", "1.2.3.4/8",       "[::1]",
                             "fe80::1%1",  "::ffff:01.2.3.4", "1:2:3:4:5:6:7:8:9",
                             "::g",        "1.2.3.-4",        "+1.2.3.4",
                             ":::",        "1.2..4"};
        for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
                struct netgate_addr x;
                cr_expect_lt(netgate_addr_parse(bad[i], &x), 0, "\"%s\" should be refused", bad[i]);
        }
        struct netgate_addr x;
        cr_expect_lt(netgate_addr_parse(NULL, &x), 0);
}

Test(netgate_addr, format_and_sockaddr)
{
        char buf[NETGATE_ADDR_STRLEN];
        struct netgate_addr a = addr("2001:DB8::0:1");
        netgate_addr_format(&a, buf);
        cr_expect_str_eq(buf, "2001:db8::1");

        struct sockaddr_storage ss;
        socklen_t len = netgate_addr_to_sockaddr(&a, 8443, &ss);
        cr_expect_eq(len, sizeof(struct sockaddr_in6));
        cr_expect_eq(ntohs(((struct sockaddr_in6 *)&ss)->sin6_port), 8443);
        struct netgate_addr back;
        cr_assert_eq(netgate_addr_from_sockaddr((struct sockaddr *)&ss, len, &back), 0);
        cr_expect(netgate_addr_equal(&a, &back));

        a = addr("10.9.8.7");
        len = netgate_addr_to_sockaddr(&a, 80, &ss);
        cr_expect_eq(len, sizeof(struct sockaddr_in));
        cr_assert_eq(netgate_addr_from_sockaddr((struct sockaddr *)&ss, len, &back), 0);
        netgate_addr_format(&back, buf);
        cr_expect_str_eq(buf, "10.9.8.7");
        cr_expect_lt(netgate_addr_from_sockaddr((struct sockaddr *)&ss, 4, &back), 0);
}

Test(netgate_addr, cidr)
{
        struct netgate_cidr c = cidr("10.0.0.0/8");
        cr_expect(netgate_cidr_contains(&c, &(struct netgate_addr){AF_INET, {10, 255, 1, 2}}));
        cr_expect_not(netgate_cidr_contains(&c, &(struct netgate_addr){AF_INET, {11, 0, 0, 0}}));
        cr_expect_not(netgate_cidr_contains(&c, &(struct netgate_addr){AF_INET6, {10}}));

        c = cidr("100.64.0.0/10");
        struct netgate_addr in = addr("100.127.255.255"), out = addr("100.128.0.0");
        cr_expect(netgate_cidr_contains(&c, &in));
        cr_expect_not(netgate_cidr_contains(&c, &out));

        c = cidr("fd00::/8");
        in = addr("fd12:3456::1");
        out = addr("fe00::1");
        cr_expect(netgate_cidr_contains(&c, &in));
        cr_expect_not(netgate_cidr_contains(&c, &out));

        c = cidr("127.0.0.1");
        cr_expect_eq(c.prefix, 32);
        in = addr("127.0.0.1");
        out = addr("127.0.0.2");
        cr_expect(netgate_cidr_contains(&c, &in));
        cr_expect_not(netgate_cidr_contains(&c, &out));

        c = cidr("0.0.0.0/0");
        cr_expect(netgate_cidr_contains(&c, &out));
        c = cidr("::/0");
        cr_expect(netgate_cidr_contains(&c, &in) == false, "families never mix");

        /* Host bits are cleared, as the policy validator accepts them. */
        c = cidr("10.1.2.3/8");
        char buf[NETGATE_ADDR_STRLEN];
        netgate_addr_format(&c.addr, buf);
        cr_expect_str_eq(buf, "10.0.0.0");
        c = cidr("10.1.2.3/13");
        netgate_addr_format(&c.addr, buf);
        cr_expect_str_eq(buf, "10.0.0.0");
        c = cidr("fe80::1/10");
        netgate_addr_format(&c.addr, buf);
        cr_expect_str_eq(buf, "fe80::");

        const char *bad[] = {"10.0.0.0/33", "10.0.0.0/", "10.0.0.0/-1", "10.0.0.0/08",
                             "::/129",      "10.0.0/8",  "/8",          "10.0.0.0/8/8",
                             "10.0.0.0/8 ", "host/8",    "::/1234"};
        for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
                struct netgate_cidr x;
                cr_expect_lt(netgate_cidr_parse(bad[i], &x), 0, "\"%s\" should be refused", bad[i]);
        }
}

static void private(const char *s)
{
        struct netgate_addr a = addr(s);
        cr_expect_not_null(netgate_addr_private(&a), "%s is private", s);
        cr_expect_not_null(netgate_addr_check(&a, NULL, 0), "%s is refused", s);
}

static void public(const char *s)
{
        struct netgate_addr a = addr(s);
        cr_expect_null(netgate_addr_private(&a), "%s is public (got %s)", s,
                       netgate_addr_private(&a) ? netgate_addr_private(&a) : "");
        cr_expect_null(netgate_addr_check(&a, NULL, 0), "%s is allowed", s);
}

Test(netgate_addr, private_ipv4)
{
        const char *v4[] = {
            "127.0.0.1",       "127.255.255.254", "10.0.0.1",        "10.255.255.255",
            "172.16.0.1",      "172.31.255.255",  "192.168.0.1",     "192.168.255.255",
            "100.64.0.1",      "100.127.255.255", "169.254.169.254", "169.254.0.1",
            "0.0.0.0",         "0.1.2.3",         "224.0.0.1",       "239.255.255.250",
            "255.255.255.255", "240.0.0.1",       "192.0.0.170",     "198.18.0.1"};
        for (size_t i = 0; i < sizeof(v4) / sizeof(v4[0]); i++)
        private(v4[i]);
        const char *pub[] = {"1.1.1.1",         "8.8.8.8",        "172.15.255.255",
                             "172.32.0.0",      "100.63.255.255", "100.128.0.0",
                             "192.167.255.255", "192.169.0.0",    "169.253.255.255",
                             "223.255.255.255", "11.0.0.0",       "126.255.255.255",
                             "128.0.0.0",       "192.0.2.1"};
        for (size_t i = 0; i < sizeof(pub) / sizeof(pub[0]); i++)
        public(pub[i]);
}

Test(netgate_addr, private_ipv6)
{
        const char *v6[] = {"::1",
                            "::",
                            "fc00::1",
                            "fd12:3456:789a::1",
                            "fe80::1",
                            "febf::1",
                            "fec0::1",
                            "ff02::1",
                            "ff05::1:3",
                            "::ffff:127.0.0.1",
                            "::ffff:7f00:1",
                            "::ffff:169.254.169.254",
                            "::ffff:10.1.2.3",
                            "::ffff:192.168.1.1",
                            "::ffff:0.0.0.0",
                            "::ffff:255.255.255.255",
                            "::127.0.0.1",
                            "::169.254.169.254",
                            "::10.0.0.1",
                            "::ffff:0:127.0.0.1",
                            "64:ff9b::127.0.0.1",
                            "64:ff9b::a9fe:a9fe",
                            "64:ff9b::10.0.0.1",
                            "64:ff9b:1::1.1.1.1",
                            "2002:7f00:1::1",
                            "2002:a9fe:a9fe::",
                            "100::1"};
        for (size_t i = 0; i < sizeof(v6) / sizeof(v6[0]); i++)
        private(v6[i]);
        const char *pub[] = {
            "2001:4860:4860::8888", "2606:4700::1111", "::ffff:1.1.1.1", "64:ff9b::8.8.8.8",
            "2002:808:808::",       "fe00::1",         "fbff::1",        "2001:db8::1"};
        for (size_t i = 0; i < sizeof(pub) / sizeof(pub[0]); i++)
        public(pub[i]);
}

Test(netgate_addr, range_names)
{
        struct netgate_addr a = addr("169.254.169.254");
        cr_expect_str_eq(netgate_addr_private(&a), "link-local 169.254.0.0/16");
        a = addr("::ffff:127.0.0.1");
        cr_expect_str_eq(netgate_addr_private(&a), "loopback 127.0.0.0/8");
        a = addr("::1");
        cr_expect_str_eq(netgate_addr_private(&a), "loopback ::1/128");
        a = addr("::");
        cr_expect_str_eq(netgate_addr_private(&a), "unspecified ::/128");
}

Test(netgate_addr, allow_private)
{
        struct netgate_cidr allow[] = {cidr("127.0.0.0/8"), cidr("fd00:1::/32"),
                                       cidr("10.200.0.0/24")};
        struct netgate_addr a = addr("127.0.0.1");
        cr_expect_null(netgate_addr_check(&a, allow, 3));
        a = addr("::ffff:127.0.0.1");
        cr_expect_null(netgate_addr_check(&a, allow, 3), "an IPv4 range covers its mapped form");
        a = addr("64:ff9b::127.0.0.2");
        cr_expect_null(netgate_addr_check(&a, allow, 3));
        a = addr("fd00:1:2::3");
        cr_expect_null(netgate_addr_check(&a, allow, 3));
        a = addr("10.200.0.77");
        cr_expect_null(netgate_addr_check(&a, allow, 3));

        a = addr("10.200.1.1");
        cr_expect_str_eq(netgate_addr_check(&a, allow, 3), "private 10.0.0.0/8");
        a = addr("169.254.169.254");
        cr_expect_not_null(netgate_addr_check(&a, allow, 3));
        a = addr("::ffff:169.254.169.254");
        cr_expect_not_null(netgate_addr_check(&a, allow, 3));
        a = addr("::1");
        cr_expect_not_null(netgate_addr_check(&a, allow, 3), "127/8 does not cover ::1");
        a = addr("fd00:2::1");
        cr_expect_not_null(netgate_addr_check(&a, allow, 3));

        struct netgate_cidr meta[] = {cidr("169.254.169.254/32")};
        a = addr("169.254.169.254");
        cr_expect_null(netgate_addr_check(&a, meta, 1));
        a = addr("169.254.169.253");
        cr_expect_not_null(netgate_addr_check(&a, meta, 1));
}
