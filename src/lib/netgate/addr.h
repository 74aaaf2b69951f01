/* SPDX-License-Identifier: Apache-2.0 */
#pragma once

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/socket.h>

/* IP addresses and CIDR ranges, and the check that keeps the gate away from
 * loopback, private, link-local and other special-purpose addresses. */

#define NETGATE_ADDR_STRLEN 46 /* INET6_ADDRSTRLEN */

struct netgate_addr {
        int family;        /* AF_INET or AF_INET6 */
        uint8_t bytes[16]; /* network order; IPv4 uses the first 4 */
};

struct netgate_cidr {
        struct netgate_addr addr; /* host bits are zero */
        unsigned prefix;
};

/* Strict text forms only: dotted-quad IPv4 with four decimal parts and no
 * leading zeros, or IPv6 without brackets or zone. Returns -EINVAL otherwise. */
int netgate_addr_parse(const char *s, struct netgate_addr *ret);
void netgate_addr_format(const struct netgate_addr *a, char buf[static NETGATE_ADDR_STRLEN]);
bool netgate_addr_equal(const struct netgate_addr *a, const struct netgate_addr *b);

int netgate_addr_from_sockaddr(const struct sockaddr *sa, socklen_t len, struct netgate_addr *ret);
socklen_t netgate_addr_to_sockaddr(const struct netgate_addr *a, uint16_t port,
                                   struct sockaddr_storage *ret);

/* "a.b.c.d/n", "v6/n", or a bare address (a /32 or /128). Host bits are
 * cleared: "10.0.0.1/8" is 10.0.0.0/8, as the policy validator accepts it. */
int netgate_cidr_parse(const char *s, struct netgate_cidr *ret);
bool netgate_cidr_contains(const struct netgate_cidr *c, const struct netgate_addr *a);

/* The special-purpose range that holds `a`, or the IPv4 address that `a`
 * embeds (IPv4-mapped, IPv4-compatible, NAT64, 6to4), as a short text such as
 * "loopback 127.0.0.0/8"; NULL when `a` is a public address. */
const char *netgate_addr_private(const struct netgate_addr *a);

/* NULL when the gate may connect to `a`: it is public, or one of `allow`
 * covers it (or the IPv4 address it embeds). Otherwise the range it hit. */
const char *netgate_addr_check(const struct netgate_addr *a, const struct netgate_cidr *allow,
                               size_t n_allow);

/* Whether the gate's host itself answers at `a` (the kernel's route for it,
 * in the caller's network namespace, is local, anycast or broadcast; an
 * IPv4-mapped address is its IPv4 address): a short text naming why, as
 * netgate_addr_check() does, or NULL. Fails closed: a route that cannot be
 * read is refused too. Costs one netlink round trip. */
const char *netgate_addr_host_own(const struct netgate_addr *a);
