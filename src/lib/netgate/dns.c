/* SPDX-License-Identifier: Apache-2.0 */
/* The DNS wire format of the gate's name server and the table of what it
 * answered (dns.h). No I/O here: dns-server.c serves it. */
#include <errno.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "netgate/dns.h"
#include "util.h"

static uint16_t get16(const uint8_t *p)
{
        return (uint16_t)((p[0] << 8) | p[1]);
}

static void put16(uint8_t *p, uint16_t v)
{
        p[0] = (uint8_t)(v >> 8);
        p[1] = (uint8_t)v;
}

#define FLAG_QR     0x8000
#define OPCODE_MASK 0x7800
#define FLAG_TC     0x0200
#define FLAG_RD     0x0100
#define FLAG_RA     0x0080

int netgate_dns_parse(const uint8_t *buf, size_t len, struct netgate_dns_msg *ret)
{
        memset(ret, 0, sizeof(*ret));
        if (!buf || len < NETGATE_DNS_HEADER)
                return -EINVAL;
        ret->id = get16(buf);
        ret->flags = get16(buf + 2);
        if (ret->flags & FLAG_QR)
                return -EINVAL; /* a response: never answered */
        if ((ret->flags & OPCODE_MASK) != 0 || (ret->flags & FLAG_TC))
                return -EBADMSG;
        uint16_t qd = get16(buf + 4), an = get16(buf + 6), ns = get16(buf + 8),
                 ar = get16(buf + 10);
        if (qd != 1 || an != 0 || ns != 0 || ar > 1)
                return -EBADMSG;

        size_t pos = NETGATE_DNS_HEADER, out = 0, wire = 0;
        for (;;) {
                if (pos >= len)
                        return -EBADMSG;
                uint8_t l = buf[pos++];
                wire++;
                if (l == 0)
                        break;
                if (l > NETGATE_LABEL_MAX)
                        return -EBADMSG; /* a compression pointer or a reserved form */
                if (l > len - pos)
                        return -EBADMSG;
                wire += l;
                if (wire > 255)
                        return -EBADMSG;
                if (out > 0)
                        ret->name[out++] = '.';
                if (out + l > NETGATE_HOST_MAX)
                        return -EBADMSG;
                for (size_t i = 0; i < l; i++) {
                        uint8_t c = buf[pos + i];
                        if (c == '.' || c == '\0')
                                return -EBADMSG;
                        ret->name[out++] = (char)c;
                }
                pos += l;
        }
        if (out == 0)
                return -EBADMSG; /* the root */
        ret->name[out] = '\0';
        ret->name_len = out;
        if (len - pos < 4)
                return -EBADMSG;
        ret->qtype = get16(buf + pos);
        ret->qclass = get16(buf + pos + 2);
        ret->question_end = pos + 4;
        return 0;
}

static void answer_header(uint8_t *out, uint16_t id, uint16_t qflags, int rcode, uint16_t qd,
                          uint16_t an)
{
        put16(out, id);
        put16(out + 2,
              (uint16_t)(FLAG_QR | (qflags & (OPCODE_MASK | FLAG_RD)) | FLAG_RA | (rcode & 0xf)));
        put16(out + 4, qd);
        put16(out + 6, an);
        put16(out + 8, 0);
        put16(out + 10, 0);
}

ssize_t netgate_dns_answer(const struct netgate_dns_msg *q, const uint8_t *query, int rcode,
                           const struct netgate_addr *addrs, size_t n, uint32_t ttl, uint8_t *out,
                           size_t size)
{
        if (q->question_end < NETGATE_DNS_HEADER || q->question_end > size)
                return -ENOSPC;
        memcpy(out, query, q->question_end);
        size_t pos = q->question_end;
        uint16_t an = 0;
        int family = q->qtype == NETGATE_DNS_TYPE_A      ? AF_INET
                     : q->qtype == NETGATE_DNS_TYPE_AAAA ? AF_INET6
                                                         : -1;
        for (size_t i = 0; i < n && q->qclass == NETGATE_DNS_CLASS_IN; i++) {
                if (addrs[i].family != family)
                        continue;
                size_t rdlen = family == AF_INET ? 4 : 16;
                if (size - pos < 12 + rdlen)
                        return -ENOSPC;
                put16(out + pos, 0xc000 | NETGATE_DNS_HEADER); /* the question's name */
                put16(out + pos + 2, q->qtype);
                put16(out + pos + 4, NETGATE_DNS_CLASS_IN);
                put16(out + pos + 6, (uint16_t)(ttl >> 16));
                put16(out + pos + 8, (uint16_t)ttl);
                put16(out + pos + 10, (uint16_t)rdlen);
                memcpy(out + pos + 12, addrs[i].bytes, rdlen);
                pos += 12 + rdlen;
                an++;
        }
        answer_header(out, q->id, q->flags, rcode, 1, an);
        return (ssize_t)pos;
}

ssize_t netgate_dns_error(const uint8_t *query, size_t len, int rcode, uint8_t *out, size_t size)
{
        if (!query || len < NETGATE_DNS_HEADER || size < NETGATE_DNS_HEADER)
                return -EINVAL;
        answer_header(out, get16(query), get16(query + 2), rcode, 0, 0);
        return NETGATE_DNS_HEADER;
}

/* ---- the table ---- */

struct netgate_name_entry {
        struct netgate_addr addr;
        uint64_t when_s;
        char name[NETGATE_HOST_MAX + 1];
};

struct netgate_names {
        struct netgate_name_entry e[NETGATE_NAMES_MAX];
        size_t n, next;
};

struct netgate_names *netgate_names_new(void)
{
        return xcalloc(1, sizeof(struct netgate_names));
}

struct netgate_names *netgate_names_free(struct netgate_names *t)
{
        free(t);
        return NULL;
}

void netgate_names_add(struct netgate_names *t, const char *name, const struct netgate_addr *a,
                       uint64_t now_s)
{
        /* The same pair again only refreshes its time. */
        for (size_t i = 0; i < t->n; i++)
                if (netgate_addr_equal(&t->e[i].addr, a) && STREQ(t->e[i].name, name)) {
                        t->e[i].when_s = now_s;
                        return;
                }
        struct netgate_name_entry *e = &t->e[t->next];
        e->addr = *a;
        e->when_s = now_s;
        snprintf(e->name, sizeof(e->name), "%s", name);
        t->next = (t->next + 1) % NETGATE_NAMES_MAX;
        if (t->n < NETGATE_NAMES_MAX)
                t->n++;
}

const char *netgate_names_find(const struct netgate_names *t, const struct netgate_addr *a,
                               uint64_t now_s, bool (*fn)(void *ud, const char *name), void *ud)
{
        /* Newest entry first: the ring backwards from the last one written. */
        for (size_t k = 0; k < t->n; k++) {
                size_t i = (t->next + NETGATE_NAMES_MAX - 1 - k) % NETGATE_NAMES_MAX;
                const struct netgate_name_entry *e = &t->e[i];
                if (!netgate_addr_equal(&e->addr, a) || e->when_s + NETGATE_NAMES_TTL_S < now_s)
                        continue;
                if (fn(ud, e->name))
                        return e->name;
        }
        return NULL;
}
