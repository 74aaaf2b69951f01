/* SPDX-License-Identifier: Apache-2.0 */
#pragma once

#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

#include "netgate/addr.h"
#include "netgate/rules.h"

/* The gate's name server for transparent mode (docs/network.md): the DNS
 * wire format of one query and its answer, pure functions with no I/O,
 * and the table of the addresses the gate answered with, each with the
 * name it was resolved from. Internal to the network gate. */

#define NETGATE_DNS_UDP_MAX 512 /* a query or answer without EDNS */
#define NETGATE_DNS_HEADER  12

#define NETGATE_DNS_TYPE_A    1
#define NETGATE_DNS_TYPE_AAAA 28
#define NETGATE_DNS_CLASS_IN  1

#define NETGATE_DNS_NOERROR  0
#define NETGATE_DNS_FORMERR  1
#define NETGATE_DNS_SERVFAIL 2
#define NETGATE_DNS_NXDOMAIN 3
#define NETGATE_DNS_NOTIMP   4
#define NETGATE_DNS_REFUSED  5

struct netgate_dns_msg {
        uint16_t id;
        uint16_t flags; /* as received */
        uint16_t qtype, qclass;
        /* The question's name, labels joined by '.', as raw bytes (a label
         * holding '.' or NUL is refused); not yet checked against the
         * host-name grammar: netgate_host_parse() does that. */
        char name[NETGATE_HOST_MAX + 2];
        size_t name_len;
        size_t question_end; /* offset just past the question */
};

/* Parse one query (untrusted bytes). 0: a standard query with one question;
 * -EBADMSG: the header is there but the rest is malformed or not a plain
 * query (answer with netgate_dns_error()); -EINVAL: not even a header, or
 * a response (drop it). */
int netgate_dns_parse(const uint8_t *buf, size_t len, struct netgate_dns_msg *ret);

/* The answer to `q` (which came from `query`, the bytes it was parsed from):
 * the header and question echoed, `rcode`, and one record per address of
 * the question's family (A for an A question, AAAA for AAAA; the others are
 * left out), each with `ttl`. Returns its length, or -ENOSPC. */
ssize_t netgate_dns_answer(const struct netgate_dns_msg *q, const uint8_t *query, int rcode,
                           const struct netgate_addr *addrs, size_t n, uint32_t ttl, uint8_t *out,
                           size_t size);

/* An answer with only a header and `rcode`, for a query that could not be
 * parsed (-EBADMSG): id and opcode echoed. Needs 12 bytes; returns 12 or
 * -EINVAL. */
ssize_t netgate_dns_error(const uint8_t *query, size_t len, int rcode, uint8_t *out, size_t size);

/* ---- what the gate answered ---- */

#define NETGATE_NAMES_MAX   1024
#define NETGATE_NAMES_TTL_S 3600

struct netgate_names;

struct netgate_names *netgate_names_new(void);
struct netgate_names *netgate_names_free(struct netgate_names *t);
/* Remember that `name` was answered with `a` at `now_s`; the oldest entry
 * goes when the table is full. */
void netgate_names_add(struct netgate_names *t, const char *name, const struct netgate_addr *a,
                       uint64_t now_s);
/* The names `a` was answered for within NETGATE_NAMES_TTL_S, newest first:
 * calls `fn` for each until it returns true; returns that name, or NULL. */
const char *netgate_names_find(const struct netgate_names *t, const struct netgate_addr *a,
                               uint64_t now_s, bool (*fn)(void *ud, const char *name), void *ud);
