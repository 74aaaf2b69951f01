/* SPDX-License-Identifier: Apache-2.0 */
#include <criterion/criterion.h>
#include <errno.h>
#include <stdio.h>
#include <string.h>
#include <sys/socket.h>

#include "netgate/dns.h"

/* A query for `name` (dotted) of `qtype`, with id 0x1234 and RD set. */
static size_t make_query(const char *name, uint16_t qtype, uint8_t *out)
{
        static const uint8_t head[] = {0x12, 0x34, 0x01, 0x00, 0, 1, 0, 0, 0, 0, 0, 0};
        memcpy(out, head, sizeof(head));
        size_t pos = sizeof(head);
        const char *p = name;
        while (*p) {
                const char *dot = strchr(p, '.');
                size_t l = dot ? (size_t)(dot - p) : strlen(p);
                out[pos++] = (uint8_t)l;
                memcpy(out + pos, p, l);
                pos += l;
                p += l;
                if (*p == '.')
                        p++;
        }
        out[pos++] = 0;
        out[pos++] = (uint8_t)(qtype >> 8);
        out[pos++] = (uint8_t)qtype;
        out[pos++] = 0;
        out[pos++] = 1;
        return pos;
}

Test(netgate_dns, parses_a_plain_query)
{
        uint8_t q[512];
        size_t n = make_query("api.example.com", NETGATE_DNS_TYPE_A, q);
        struct netgate_dns_msg m;
        cr_assert_eq(netgate_dns_parse(q, n, &m), 0);
        cr_expect_eq(m.id, 0x1234);
        cr_expect_eq(m.qtype, NETGATE_DNS_TYPE_A);
        cr_expect_eq(m.qclass, NETGATE_DNS_CLASS_IN);
        cr_expect_str_eq(m.name, "api.example.com");
        cr_expect_eq(m.name_len, 15);
        cr_expect_eq(m.question_end, n);
}

Test(netgate_dns, refuses_malformed_queries)
{
        uint8_t q[512];
        struct netgate_dns_msg m;
        size_t n = make_query("example.com", NETGATE_DNS_TYPE_A, q);

        cr_expect_eq(netgate_dns_parse(q, 11, &m), -EINVAL, "shorter than a header");
        for (size_t cut = 12; cut < n; cut++)
                cr_expect_eq(netgate_dns_parse(q, cut, &m), -EBADMSG, "cut at %zu", cut);

        uint8_t r[512];
        memcpy(r, q, n);
        r[2] |= 0x80; /* a response */
        cr_expect_eq(netgate_dns_parse(r, n, &m), -EINVAL);
        memcpy(r, q, n);
        r[5] = 2; /* two questions */
        cr_expect_eq(netgate_dns_parse(r, n, &m), -EBADMSG);
        memcpy(r, q, n);
        r[7] = 1; /* an answer in a query */
        cr_expect_eq(netgate_dns_parse(r, n, &m), -EBADMSG);
        memcpy(r, q, n);
        r[2] |= 0x08; /* opcode IQUERY */
        cr_expect_eq(netgate_dns_parse(r, n, &m), -EBADMSG);
        memcpy(r, q, n);
        r[12] = 0xc0; /* a compression pointer in the question */
        cr_expect_eq(netgate_dns_parse(r, n, &m), -EBADMSG);
        memcpy(r, q, n);
        r[14] = '.'; /* a dot inside a label would change the name */
        cr_expect_eq(netgate_dns_parse(r, n, &m), -EBADMSG);
        memcpy(r, q, n);
        r[14] = '\0';
        cr_expect_eq(netgate_dns_parse(r, n, &m), -EBADMSG);

        /* The root, and a name longer than 255 bytes on the wire. */
        static const uint8_t root[] = {0, 1, 1, 0, 0, 1, 0, 0, 0, 0, 0, 0, 0, 0, 1, 0, 1};
        cr_expect_eq(netgate_dns_parse(root, sizeof(root), &m), -EBADMSG);
        char longname[400];
        size_t at = 0;
        for (int i = 0; i < 5; i++)
                at +=
                    (size_t)snprintf(longname + at, sizeof(longname) - at, "%s.",
                                     "aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa");
        snprintf(longname + at, sizeof(longname) - at, "com");
        n = make_query(longname, NETGATE_DNS_TYPE_A, q);
        cr_expect_eq(netgate_dns_parse(q, n, &m), -EBADMSG);
}

Test(netgate_dns, answers_with_the_question_family_only)
{
        uint8_t q[512], out[512];
        size_t n = make_query("example.com", NETGATE_DNS_TYPE_A, q);
        struct netgate_dns_msg m;
        cr_assert_eq(netgate_dns_parse(q, n, &m), 0);
        struct netgate_addr a[3];
        cr_assert_eq(netgate_addr_parse("93.184.216.34", &a[0]), 0);
        cr_assert_eq(netgate_addr_parse("2001:db8::1", &a[1]), 0);
        cr_assert_eq(netgate_addr_parse("93.184.216.35", &a[2]), 0);
        ssize_t len = netgate_dns_answer(&m, q, NETGATE_DNS_NOERROR, a, 3, 60, out, sizeof(out));
        cr_assert_eq(len, (ssize_t)(n + 2 * 16));
        cr_expect_eq(out[0], 0x12);
        cr_expect_eq(out[1], 0x34);
        cr_expect(out[2] & 0x80, "QR set");
        cr_expect(out[2] & 0x01, "RD echoed");
        cr_expect_eq(out[3] & 0x0f, NETGATE_DNS_NOERROR);
        cr_expect_eq(out[7], 2, "two A records");
        cr_expect_eq(out[11], 0, "no additional records");
        cr_expect_eq(memcmp(out + 12, q + 12, n - 12), 0, "question echoed");
        const uint8_t *rr = out + n;
        cr_expect_eq(rr[0], 0xc0);
        cr_expect_eq(rr[1], 12);
        cr_expect_eq(rr[3], NETGATE_DNS_TYPE_A);
        cr_expect_eq(rr[9], 60, "ttl");
        cr_expect_eq(rr[11], 4);
        cr_expect_eq(memcmp(rr + 12, a[0].bytes, 4), 0);
        cr_expect_eq(memcmp(rr + 16 + 12, a[2].bytes, 4), 0);

        /* No room: refused, nothing overrun. */
        cr_expect_eq(netgate_dns_answer(&m, q, 0, a, 3, 60, out, n + 10), -ENOSPC);

        /* NXDOMAIN with nothing. */
        len = netgate_dns_answer(&m, q, NETGATE_DNS_NXDOMAIN, NULL, 0, 0, out, sizeof(out));
        cr_expect_eq(len, (ssize_t)n);
        cr_expect_eq(out[3] & 0x0f, NETGATE_DNS_NXDOMAIN);
        cr_expect_eq(out[7], 0);

        /* FORMERR for a query that could not be parsed. */
        len = netgate_dns_error(q, n, NETGATE_DNS_FORMERR, out, sizeof(out));
        cr_expect_eq(len, 12);
        cr_expect_eq(out[3] & 0x0f, NETGATE_DNS_FORMERR);
        cr_expect_eq(out[5], 0);
        cr_expect_eq(netgate_dns_error(q, 5, NETGATE_DNS_FORMERR, out, sizeof(out)), -EINVAL);
}

static bool accept_name(void *ud, const char *name)
{
        return ud && strcmp(ud, name) == 0;
}

Test(netgate_dns, names_table_newest_first_and_bounded)
{
        struct netgate_names *t = netgate_names_new();
        struct netgate_addr a, b;
        cr_assert_eq(netgate_addr_parse("93.184.216.34", &a), 0);
        cr_assert_eq(netgate_addr_parse("93.184.216.35", &b), 0);
        netgate_names_add(t, "one.test", &a, 100);
        netgate_names_add(t, "two.test", &a, 101);
        cr_expect_str_eq(netgate_names_find(t, &a, 102, accept_name, "one.test"), "one.test");
        cr_expect_str_eq(netgate_names_find(t, &a, 102, accept_name, "two.test"), "two.test");
        cr_expect_null(netgate_names_find(t, &b, 102, accept_name, "one.test"));
        cr_expect_null(
            netgate_names_find(t, &a, 100 + NETGATE_NAMES_TTL_S + 1, accept_name, "one.test"),
            "expired");
        /* A full table forgets the oldest. */
        for (int i = 0; i < NETGATE_NAMES_MAX; i++) {
                char n[32];
                snprintf(n, sizeof(n), "n%d.test", i);
                netgate_names_add(t, n, &b, 200);
        }
        cr_expect_null(netgate_names_find(t, &a, 200, accept_name, "one.test"));
        cr_expect_str_eq(netgate_names_find(t, &b, 200, accept_name, "n5.test"), "n5.test");
        netgate_names_free(t);
}
