/* SPDX-License-Identifier: Apache-2.0 */
#include <criterion/criterion.h>
#include <string.h>

#include "netgate/sni.h"

static size_t put(uint8_t *p, uint32_t v, size_t n)
{
        for (size_t i = 0; i < n; i++)
                p[i] = (uint8_t)(v >> (8 * (n - 1 - i)));
        return n;
}

/* A ClientHello with `names` (NULL-terminated) as host names in one
 * server_name extension (or none when names is NULL), and `twice` adding
 * a second server_name extension. */
static size_t hello(uint8_t *out, const char *const *names, bool twice)
{
        uint8_t body[2048];
        size_t b = 0;
        b += put(body + b, 0x0303, 2);
        memset(body + b, 0xab, 32);
        b += 32;
        b += put(body + b, 0, 1); /* session id */
        b += put(body + b, 2, 2); /* cipher suites */
        b += put(body + b, 0x1301, 2);
        b += put(body + b, 1, 1); /* compression */
        b += put(body + b, 0, 1);
        uint8_t ext[1024];
        size_t e = 0;
        /* an unrelated extension first */
        e += put(ext + e, 0x000a, 2);
        e += put(ext + e, 4, 2);
        e += put(ext + e, 2, 2);
        e += put(ext + e, 0x001d, 2);
        for (int k = 0; names && k < (twice ? 2 : 1); k++) {
                uint8_t list[512];
                size_t l = 0;
                for (const char *const *n = names; *n; n++) {
                        l += put(list + l, 0, 1);
                        l += put(list + l, (uint32_t)strlen(*n), 2);
                        memcpy(list + l, *n, strlen(*n));
                        l += strlen(*n);
                }
                e += put(ext + e, 0, 2);
                e += put(ext + e, (uint32_t)(l + 2), 2);
                e += put(ext + e, (uint32_t)l, 2);
                memcpy(ext + e, list, l);
                e += l;
        }
        b += put(body + b, (uint32_t)e, 2);
        memcpy(body + b, ext, e);
        b += e;
        size_t o = 0;
        o += put(out + o, 0x16, 1);
        o += put(out + o, 0x0301, 2);
        o += put(out + o, (uint32_t)(b + 4), 2);
        o += put(out + o, 1, 1);
        o += put(out + o, (uint32_t)b, 3);
        memcpy(out + o, body, b);
        return o + b;
}

Test(netgate_sni, reads_the_server_name)
{
        uint8_t m[4096];
        const char *names[] = {"api.example.com", NULL};
        size_t n = hello(m, names, false);
        char name[NETGATE_HOST_MAX + 1];
        size_t nl;
        cr_assert_eq(netgate_sni_parse(m, n, name, &nl), NETGATE_SNI_NAME);
        cr_expect_str_eq(name, "api.example.com");
        cr_expect_eq(nl, 15);
        for (size_t cut = 0; cut < n; cut++)
                cr_expect_eq(netgate_sni_parse(m, cut, name, &nl), NETGATE_SNI_MORE, "cut %zu",
                             cut);
}

Test(netgate_sni, no_name_and_not_tls)
{
        uint8_t m[4096];
        char name[NETGATE_HOST_MAX + 1];
        size_t nl;
        size_t n = hello(m, NULL, false);
        cr_expect_eq(netgate_sni_parse(m, n, name, &nl), NETGATE_SNI_NONE);
        cr_expect_eq(netgate_sni_parse((const uint8_t *)"SSH-2.0-x\r\n", 11, name, &nl),
                     NETGATE_SNI_NOT_TLS);
        cr_expect_eq(netgate_sni_parse((const uint8_t *)"GET / HTTP/1.1\r\n", 16, name, &nl),
                     NETGATE_SNI_NOT_TLS);
}

Test(netgate_sni, ambiguous_or_broken_hellos_refused)
{
        uint8_t m[4096];
        char name[NETGATE_HOST_MAX + 1];
        size_t nl;
        const char *two[] = {"allowed.test", "fronted.test", NULL};
        size_t n = hello(m, two, false);
        cr_expect_eq(netgate_sni_parse(m, n, name, &nl), NETGATE_SNI_BAD, "two host names");
        const char *one[] = {"allowed.test", NULL};
        n = hello(m, one, true);
        cr_expect_eq(netgate_sni_parse(m, n, name, &nl), NETGATE_SNI_BAD, "two extensions");

        /* The handshake longer than its record: split over records. */
        n = hello(m, one, false);
        m[8] = (uint8_t)(m[8] + 1);
        cr_expect_eq(netgate_sni_parse(m, n, name, &nl), NETGATE_SNI_BAD);
        /* Not a ClientHello. */
        n = hello(m, one, false);
        m[5] = 2;
        cr_expect_eq(netgate_sni_parse(m, n, name, &nl), NETGATE_SNI_BAD);
        /* An extension running past the end. */
        n = hello(m, one, false);
        m[n - 14] = 0x7f;
        cr_expect_eq(netgate_sni_parse(m, n, name, &nl), NETGATE_SNI_BAD);
        /* A record length over 16 KiB. */
        n = hello(m, one, false);
        m[3] = 0x50;
        cr_expect_eq(netgate_sni_parse(m, n, name, &nl), NETGATE_SNI_BAD);
}
