/* SPDX-License-Identifier: Apache-2.0 */
#include <arpa/inet.h>
#include <errno.h>
#include <netinet/in.h>
#include <string.h>

#include "netgate/addr.h"
#include "util.h"

static int parse_ipv4_strict(const char *s, uint8_t ret[4])
{
        uint8_t out[4];
        for (int part = 0; part < 4; part++) {
                unsigned v = 0, digits = 0;
                while (*s >= '0' && *s <= '9') {
                        /* "010.0.0.1" is octal to inet_aton() and decimal to
                         * others: refuse the ambiguity. */
                        if (digits == 1 && v == 0)
                                return -EINVAL;
                        v = v * 10 + (unsigned)(*s - '0');
                        if (++digits > 3 || v > 255)
                                return -EINVAL;
                        s++;
                }
                if (digits == 0)
                        return -EINVAL;
                out[part] = (uint8_t)v;
                if (part < 3 && *s++ != '.')
                        return -EINVAL;
        }
        if (*s != '\0')
                return -EINVAL;
        memcpy(ret, out, 4);
        return 0;
}

int netgate_addr_parse(const char *s, struct netgate_addr *ret)
{
        struct netgate_addr a = {0};
        if (!s)
                return -EINVAL;
        if (parse_ipv4_strict(s, a.bytes) == 0) {
                a.family = AF_INET;
                *ret = a;
                return 0;
        }
        size_t len = strnlen(s, NETGATE_ADDR_STRLEN);
        if (len == 0 || len >= NETGATE_ADDR_STRLEN || !strchr(s, ':'))
                return -EINVAL;
        for (size_t i = 0; i < len; i++) {
                char c = s[i];
                if (!((c >= '0' && c <= '9') || (c >= 'a' && c <= 'f') || (c >= 'A' && c <= 'F') ||
                      c == ':' || c == '.'))
                        return -EINVAL;
        }
        /* An embedded IPv4 tail must be strict dotted-quad as well. */
        const char *dot = strchr(s, '.');
        if (dot) {
                const char *tail = strrchr(s, ':') + 1;
                uint8_t tmp[4];
                if (tail > dot || parse_ipv4_strict(tail, tmp) < 0)
                        return -EINVAL;
        }
        if (inet_pton(AF_INET6, s, a.bytes) != 1)
                return -EINVAL;
        a.family = AF_INET6;
        *ret = a;
        return 0;
}

void netgate_addr_format(const struct netgate_addr *a, char buf[static NETGATE_ADDR_STRLEN])
{
        if (!a || (a->family != AF_INET && a->family != AF_INET6) ||
            !inet_ntop(a->family, a->bytes, buf, NETGATE_ADDR_STRLEN))
                buf[0] = '\0';
}

bool netgate_addr_equal(const struct netgate_addr *a, const struct netgate_addr *b)
{
        if (a->family != b->family)
                return false;
        return memcmp(a->bytes, b->bytes, a->family == AF_INET ? 4 : 16) == 0;
}

int netgate_addr_from_sockaddr(const struct sockaddr *sa, socklen_t len, struct netgate_addr *ret)
{
        struct netgate_addr a = {0};
        if (sa->sa_family == AF_INET && len >= (socklen_t)sizeof(struct sockaddr_in)) {
                a.family = AF_INET;
                memcpy(a.bytes, &((const struct sockaddr_in *)sa)->sin_addr, 4);
        } else if (sa->sa_family == AF_INET6 && len >= (socklen_t)sizeof(struct sockaddr_in6)) {
                a.family = AF_INET6;
                memcpy(a.bytes, &((const struct sockaddr_in6 *)sa)->sin6_addr, 16);
        } else
                return -EAFNOSUPPORT;
        *ret = a;
        return 0;
}

socklen_t netgate_addr_to_sockaddr(const struct netgate_addr *a, uint16_t port,
                                   struct sockaddr_storage *ret)
{
        memset(ret, 0, sizeof(*ret));
        if (a->family == AF_INET) {
                struct sockaddr_in *sin = (struct sockaddr_in *)ret;
                sin->sin_family = AF_INET;
                sin->sin_port = htons(port);
                memcpy(&sin->sin_addr, a->bytes, 4);
                return sizeof(*sin);
        }
        struct sockaddr_in6 *sin6 = (struct sockaddr_in6 *)ret;
        sin6->sin6_family = AF_INET6;
        sin6->sin6_port = htons(port);
        memcpy(&sin6->sin6_addr, a->bytes, 16);
        return sizeof(*sin6);
}

static bool prefix_match(const uint8_t *a, const uint8_t *net, unsigned prefix)
{
        unsigned whole = prefix / 8, rest = prefix % 8;
        if (memcmp(a, net, whole) != 0)
                return false;
        if (rest == 0)
                return true;
        uint8_t mask = (uint8_t)(0xff << (8 - rest));
        return (a[whole] & mask) == (net[whole] & mask);
}

int netgate_cidr_parse(const char *s, struct netgate_cidr *ret)
{
        char buf[NETGATE_ADDR_STRLEN + 4];
        struct netgate_cidr c = {0};
        if (!s)
                return -EINVAL;
        size_t len = strnlen(s, sizeof(buf));
        if (len >= sizeof(buf))
                return -EINVAL;
        memcpy(buf, s, len + 1);

        char *slash = strchr(buf, '/');
        if (slash)
                *slash = '\0';
        int r = netgate_addr_parse(buf, &c.addr);
        if (r < 0)
                return r;
        unsigned max = c.addr.family == AF_INET ? 32 : 128;
        c.prefix = max;
        if (slash) {
                const char *p = slash + 1;
                unsigned v = 0, digits = 0;
                for (; *p >= '0' && *p <= '9'; p++) {
                        if (digits == 1 && v == 0)
                                return -EINVAL;
                        v = v * 10 + (unsigned)(*p - '0');
                        if (++digits > 3)
                                return -EINVAL;
                }
                if (digits == 0 || *p != '\0' || v > max)
                        return -EINVAL;
                c.prefix = v;
        }
        struct netgate_addr masked = {.family = c.addr.family};
        unsigned whole = c.prefix / 8, rest = c.prefix % 8;
        memcpy(masked.bytes, c.addr.bytes, whole);
        if (rest)
                masked.bytes[whole] = (uint8_t)(c.addr.bytes[whole] & (0xff << (8 - rest)));
        c.addr = masked;
        *ret = c;
        return 0;
}

bool netgate_cidr_contains(const struct netgate_cidr *c, const struct netgate_addr *a)
{
        if (c->addr.family != a->family)
                return false;
        return prefix_match(a->bytes, c->addr.bytes, c->prefix);
}

struct special_range {
        const char *name;
        int family;
        uint8_t net[16];
        unsigned prefix;
        int embed; /* offset of an embedded IPv4 address, or -1 */
};

/* Order matters: the exact IPv6 entries come before the ::/96 range whose
 * embedded "IPv4 address" they would otherwise be read as. */
static const struct special_range special_ranges[] = {
    {"this-network 0.0.0.0/8", AF_INET, {0}, 8, -1},
    {"private 10.0.0.0/8", AF_INET, {10}, 8, -1},
    {"shared 100.64.0.0/10", AF_INET, {100, 64}, 10, -1},
    {"loopback 127.0.0.0/8", AF_INET, {127}, 8, -1},
    {"link-local 169.254.0.0/16", AF_INET, {169, 254}, 16, -1},
    {"private 172.16.0.0/12", AF_INET, {172, 16}, 12, -1},
    {"ietf 192.0.0.0/24", AF_INET, {192, 0, 0}, 24, -1},
    {"private 192.168.0.0/16", AF_INET, {192, 168}, 16, -1},
    {"benchmarking 198.18.0.0/15", AF_INET, {198, 18}, 15, -1},
    {"multicast 224.0.0.0/4", AF_INET, {224}, 4, -1},
    {"reserved 240.0.0.0/4", AF_INET, {240}, 4, -1}, /* and 255.255.255.255 */

    {"unspecified ::/128", AF_INET6, {0}, 128, -1},
    {"loopback ::1/128", AF_INET6, {[15] = 1}, 128, -1},
    {"ipv4-mapped ::ffff:0:0/96", AF_INET6, {[10] = 0xff, [11] = 0xff}, 96, 12},
    {"ipv4-translated ::ffff:0:0:0/96", AF_INET6, {[8] = 0xff, [9] = 0xff}, 96, 12},
    {"ipv4-compatible ::/96", AF_INET6, {0}, 96, 12},
    {"nat64 64:ff9b::/96", AF_INET6, {0, 0x64, 0xff, 0x9b}, 96, 12},
    {"nat64-local 64:ff9b:1::/48", AF_INET6, {0, 0x64, 0xff, 0x9b, 0, 1}, 48, -1},
    {"discard 100::/64", AF_INET6, {1, 0}, 64, -1},
    {"6to4 2002::/16", AF_INET6, {0x20, 0x02}, 16, 2},
    {"unique-local fc00::/7", AF_INET6, {0xfc}, 7, -1},
    {"link-local fe80::/10", AF_INET6, {0xfe, 0x80}, 10, -1},
    {"site-local fec0::/10", AF_INET6, {0xfe, 0xc0}, 10, -1},
    {"multicast ff00::/8", AF_INET6, {0xff}, 8, -1},
};

static const struct special_range *find_special(const struct netgate_addr *a,
                                                struct netgate_addr *ret_embedded)
{
        for (size_t i = 0; i < ARRAY_SIZE(special_ranges); i++) {
                const struct special_range *s = &special_ranges[i];
                if (s->family != a->family || !prefix_match(a->bytes, s->net, s->prefix))
                        continue;
                if (s->embed < 0)
                        return s;
                struct netgate_addr v4 = {.family = AF_INET};
                memcpy(v4.bytes, a->bytes + s->embed, 4);
                const struct special_range *inner = find_special(&v4, NULL);
                if (!inner)
                        return NULL; /* it embeds a public address */
                if (ret_embedded)
                        *ret_embedded = v4;
                return inner;
        }
        return NULL;
}

const char *netgate_addr_private(const struct netgate_addr *a)
{
        const struct special_range *s = find_special(a, NULL);
        return s ? s->name : NULL;
}

const char *netgate_addr_check(const struct netgate_addr *a, const struct netgate_cidr *allow,
                               size_t n_allow)
{
        struct netgate_addr embedded = {0};
        const struct special_range *s = find_special(a, &embedded);
        if (!s)
                return NULL;
        for (size_t i = 0; i < n_allow; i++) {
                if (netgate_cidr_contains(&allow[i], a))
                        return NULL;
                if (embedded.family == AF_INET && netgate_cidr_contains(&allow[i], &embedded))
                        return NULL;
        }
        return s->name;
}
