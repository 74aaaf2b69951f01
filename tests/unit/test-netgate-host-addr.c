/* SPDX-License-Identifier: Apache-2.0 */
/* netgate_addr_host_own(): the gate's own host is refused at every address
 * the kernel delivers locally, not only in the private ranges. */
#include <criterion/criterion.h>
#include <ifaddrs.h>
#include <netinet/in.h>
#include <string.h>

#include "netgate/addr.h"

static struct netgate_addr addr(const char *s)
{
        struct netgate_addr a;
        cr_assert_eq(netgate_addr_parse(s, &a), 0, "%s should parse", s);
        return a;
}

Test(netgate_host_addr, loopback_is_the_host)
{
        struct netgate_addr lo = addr("127.0.0.1"), lo9 = addr("127.0.0.9");
        cr_expect_not_null(netgate_addr_host_own(&lo));
        cr_expect_not_null(netgate_addr_host_own(&lo9));
        struct netgate_addr mapped = addr("::ffff:127.0.0.1");
        cr_expect_not_null(netgate_addr_host_own(&mapped));
}

/* Every address of every interface up, whatever its range: a public one
 * is no further from the host than its loopback. */
Test(netgate_host_addr, each_interface_address_is_the_host)
{
        struct ifaddrs *ifs = NULL;
        cr_assert_eq(getifaddrs(&ifs), 0);
        size_t checked = 0;
        for (struct ifaddrs *i = ifs; i; i = i->ifa_next) {
                if (!i->ifa_addr || i->ifa_addr->sa_family != AF_INET)
                        continue;
                struct netgate_addr a;
                cr_assert_eq(
                    netgate_addr_from_sockaddr(i->ifa_addr, sizeof(struct sockaddr_in), &a), 0);
                char text[NETGATE_ADDR_STRLEN];
                netgate_addr_format(&a, text);
                cr_expect_not_null(netgate_addr_host_own(&a), "%s (%s) is this host's", text,
                                   i->ifa_name);
                /* The same address spelt as an IPv4-mapped IPv6 one. */
                struct netgate_addr m = {.family = AF_INET6};
                m.bytes[10] = m.bytes[11] = 0xff;
                memcpy(m.bytes + 12, a.bytes, 4);
                cr_expect_not_null(netgate_addr_host_own(&m), "::ffff:%s is this host's", text);
                checked++;
        }
        freeifaddrs(ifs);
        cr_expect_gt(checked, 0);
}

/* An address no interface holds is not the host: 198.51.100.77 unless this
 * host has an address in 198.51.100.0/24. */
Test(netgate_host_addr, another_address_is_not)
{
        struct ifaddrs *ifs = NULL;
        cr_assert_eq(getifaddrs(&ifs), 0);
        for (struct ifaddrs *i = ifs; i; i = i->ifa_next)
                if (i->ifa_addr && i->ifa_addr->sa_family == AF_INET) {
                        const uint8_t *b =
                            (const uint8_t *)&((struct sockaddr_in *)i->ifa_addr)->sin_addr;
                        if (b[0] == 198 && b[1] == 51 && b[2] == 100) {
                                freeifaddrs(ifs);
                                cr_skip_test("this host holds an address in 198.51.100.0/24");
                        }
                }
        freeifaddrs(ifs);
        struct netgate_addr a = addr("198.51.100.77"), v6 = addr("2001:db8::77");
        cr_expect_null(netgate_addr_host_own(&a));
        cr_expect_null(netgate_addr_host_own(&v6));
}
