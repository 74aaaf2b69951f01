/* SPDX-License-Identifier: Apache-2.0 */
#include <criterion/criterion.h>
#include <errno.h>
#include <string.h>
#include <sys/socket.h>

#include "netgate/socks5.h"

static struct netgate_socks5 s;

static int feed(const void *data, size_t len, size_t *used)
{
        return netgate_socks5_feed(&s, data, len, used);
}

Test(netgate_socks5, greeting_and_domain_request_at_once)
{
        static const uint8_t msg[] = {5,   2,   2,   0, /* greeting: user/pass, none */
                                      5,   1,   0,   3,   11,  'e',  'x',  'a', 'm', 'p', 'l',
                                      'e', '.', 'c', 'o', 'm', 0x01, 0xbb, 'T', 'L', 'S'};
        size_t used;
        netgate_socks5_init(&s);
        cr_assert_eq(feed(msg, sizeof(msg), &used), NETGATE_SOCKS5_GREETING);
        cr_expect_eq(used, 4);
        size_t used2;
        cr_assert_eq(feed(msg + used, sizeof(msg) - used, &used2), NETGATE_SOCKS5_REQUEST);
        cr_expect_eq(used + used2, sizeof(msg) - 3, "early data stays for the tunnel");
        cr_expect_eq(s.cmd, NETGATE_SOCKS5_CMD_CONNECT);
        cr_expect_eq(s.atyp, NETGATE_SOCKS5_ATYP_DOMAIN);
        cr_expect_eq(s.host_len, 11);
        cr_expect_str_eq(s.host, "example.com");
        cr_expect_eq(s.port, 443);
}

Test(netgate_socks5, byte_by_byte)
{
        static const uint8_t msg[] = {5, 1, 0, 5, 1, 0, 1, 10, 0, 0, 5, 0, 80};
        netgate_socks5_init(&s);
        int r = 0, greetings = 0;
        for (size_t i = 0; i < sizeof(msg); i++) {
                size_t used;
                r = feed(msg + i, 1, &used);
                cr_assert_eq(used, 1, "byte %zu", i);
                if (r == NETGATE_SOCKS5_GREETING)
                        greetings++;
                else if (i + 1 < sizeof(msg))
                        cr_assert_eq(r, NETGATE_SOCKS5_MORE, "byte %zu", i);
        }
        cr_expect_eq(greetings, 1);
        cr_expect_eq(r, NETGATE_SOCKS5_REQUEST);
        cr_expect_eq(s.atyp, NETGATE_SOCKS5_ATYP_IPV4);
        cr_expect_str_eq(s.host, "10.0.0.5");
        cr_expect_eq(s.port, 80);
}

Test(netgate_socks5, ipv6)
{
        uint8_t msg[3 + 4 + 16 + 2] = {5, 1, 0, 5, 1, 0, 4};
        msg[7 + 15] = 1; /* ::1 */
        msg[23] = 0x1f;
        msg[24] = 0x90;
        size_t used;
        netgate_socks5_init(&s);
        cr_assert_eq(feed(msg, 3, &used), NETGATE_SOCKS5_GREETING);
        cr_assert_eq(feed(msg + 3, sizeof(msg) - 3, &used), NETGATE_SOCKS5_REQUEST);
        cr_expect_str_eq(s.host, "::1");
        cr_expect_eq(s.port, 8080);
}

Test(netgate_socks5, nul_in_domain_is_kept_for_the_rules)
{
        static const uint8_t msg[] = {5,   1,   0,   5,   1,   0,   3,   23,  'e', 'v', 'i',
                                      'l', '.', 't', 'e', 's', 't', 0,   '.', 'a', 'l', 'l',
                                      'o', 'w', 'e', 'd', '.', 't', 'e', 's', 't', 0,   80};
        size_t used;
        netgate_socks5_init(&s);
        cr_assert_eq(feed(msg, 3, &used), NETGATE_SOCKS5_GREETING);
        cr_assert_eq(feed(msg + 3, sizeof(msg) - 3, &used), NETGATE_SOCKS5_REQUEST);
        cr_expect_eq(s.host_len, 23, "the length says 23, strlen would say 9");
        cr_expect_eq(memcmp(s.host, "evil.test\0.allowed.test", 23), 0);
}

Test(netgate_socks5, no_acceptable_method)
{
        static const uint8_t msg[] = {5, 2, 1, 2};
        size_t used;
        netgate_socks5_init(&s);
        cr_expect_eq(feed(msg, sizeof(msg), &used), -EACCES);
        static const uint8_t none[] = {5, 0};
        netgate_socks5_init(&s);
        cr_expect_eq(feed(none, sizeof(none), &used), -EACCES);
        cr_expect_eq(netgate_socks5_no_method_reply[1], 0xff);
}

Test(netgate_socks5, wrong_version)
{
        static const uint8_t socks4[] = {4, 1, 0, 80, 127, 0, 0, 1, 0};
        size_t used;
        netgate_socks5_init(&s);
        cr_expect_eq(feed(socks4, sizeof(socks4), &used), -EPROTO);
        cr_expect_leq(used, 2, "refused before reading a whole message");
        cr_expect_eq(s.reply, NETGATE_SOCKS5_REP_NONE);
        cr_expect_eq(feed(socks4, sizeof(socks4), &used), -EPROTO, "errors stick");

        static const uint8_t http[] = "GET / HTTP/1.1\r\n";
        netgate_socks5_init(&s);
        cr_expect_eq(feed(http, sizeof(http) - 1, &used), -EPROTO);

        static const uint8_t req4[] = {5, 1, 0, 4, 1, 0, 1};
        netgate_socks5_init(&s);
        cr_assert_eq(feed(req4, 3, &used), NETGATE_SOCKS5_GREETING);
        cr_expect_eq(feed(req4 + 3, 4, &used), -EPROTO);
}

static int request(uint8_t cmd, uint8_t rsv, uint8_t atyp)
{
        uint8_t msg[] = {5, 1, 0, 5, cmd, rsv, atyp, 127, 0, 0, 1, 0, 80,
                         0, 0, 0, 0, 0,   0,   0,    0,   0, 0, 0, 0, 0};
        size_t used;
        netgate_socks5_init(&s);
        cr_assert_eq(feed(msg, 3, &used), NETGATE_SOCKS5_GREETING);
        return feed(msg + 3, sizeof(msg) - 3, &used);
}

Test(netgate_socks5, refused_commands)
{
        cr_expect_eq(request(NETGATE_SOCKS5_CMD_BIND, 0, 1), -EOPNOTSUPP);
        cr_expect_eq(s.reply, NETGATE_SOCKS5_REP_CMD_UNSUPPORTED);
        cr_expect_str_eq(s.host, "127.0.0.1", "the target is known for the record");
        cr_expect_eq(request(NETGATE_SOCKS5_CMD_UDP, 0, 1), -EOPNOTSUPP);
        cr_expect_eq(s.reply, 0x07);
        cr_expect_eq(request(9, 0, 1), -EOPNOTSUPP);
        cr_expect_eq(s.reply, 0x07);
        cr_expect_eq(request(1, 0, 2), -EAFNOSUPPORT);
        cr_expect_eq(s.reply, NETGATE_SOCKS5_REP_ATYP_UNSUPPORTED);
        cr_expect_eq(request(1, 0, 0xff), -EAFNOSUPPORT);
        cr_expect_eq(s.reply, 0x08);
        cr_expect_eq(request(1, 7, 1), -EPROTO);
        cr_expect_eq(s.reply, NETGATE_SOCKS5_REP_FAILURE);
}

Test(netgate_socks5, reply)
{
        uint8_t out[22];
        size_t n = netgate_socks5_reply(0x02, NULL, 0, out);
        static const uint8_t denied[] = {5, 2, 0, 1, 0, 0, 0, 0, 0, 0};
        cr_expect_eq(n, sizeof(denied));
        cr_expect_arr_eq(out, denied, sizeof(denied));

        struct netgate_addr a = {.family = AF_INET, .bytes = {10, 1, 2, 3}};
        n = netgate_socks5_reply(0, &a, 0x1234, out);
        static const uint8_t ok[] = {5, 0, 0, 1, 10, 1, 2, 3, 0x12, 0x34};
        cr_expect_arr_eq(out, ok, sizeof(ok));

        struct netgate_addr b = {.family = AF_INET6, .bytes = {[15] = 1}};
        n = netgate_socks5_reply(0, &b, 80, out);
        cr_expect_eq(n, 22);
        cr_expect_eq(out[3], 4);
        cr_expect_eq(out[19], 1);
        cr_expect_eq(out[21], 80);
}
