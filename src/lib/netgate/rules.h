/* SPDX-License-Identifier: Apache-2.0 */
#pragma once

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "error.h"
#include "netgate/addr.h"

/* Host names as the gate sees them, the allow/deny rules, and the decision
 * for one (host, port). Matching is on the canonical form only. */

#define NETGATE_HOST_MAX  253
#define NETGATE_LABEL_MAX 63

enum netgate_host_kind {
        NETGATE_HOST_NAME,    /* a DNS name: resolved by the gate */
        NETGATE_HOST_IP,      /* dotted-quad IPv4 or IPv6 text */
        NETGATE_HOST_NUMERIC, /* another spelling of an IPv4 address: 2130706433,
                               * 0177.0.0.1, 0x7f.1; never resolved as a name */
};

struct netgate_host {
        enum netgate_host_kind kind;
        char name[NETGATE_HOST_MAX + 1]; /* canonical text; IPv6 compressed, no brackets */
        struct netgate_addr addr;        /* IP and NUMERIC: the address it denotes */
};

/* Canonicalize raw host bytes as received from the sandbox (they may hold
 * anything, NUL included): lowercase, one trailing dot removed, then the
 * host-name grammar ([a-z0-9-] labels of 1..63 bytes, no leading or trailing
 * hyphen, at most 253 bytes), or an IP literal. -EINVAL when refused. */
int netgate_host_parse(const char *raw, size_t len, struct netgate_host *ret);

struct netgate_rule {
        char *text;               /* as written in the policy */
        bool wildcard;            /* "*.domain": strict subdomains of host.name */
        struct netgate_host host; /* for a wildcard, the domain after "*." */
        uint16_t port;            /* 0: 80 and 443 in allow rules, any port in deny rules */
};

/* "host", "*.domain", "host:port", "*.domain:port", "1.2.3.4[:port]",
 * "v6", "[v6]", "[v6]:port". Caller frees with netgate_rule_done(). */
int netgate_rule_parse(const char *text, struct netgate_rule *ret);
void netgate_rule_done(struct netgate_rule *r);

struct netgate_rules;

int netgate_rules_new(char *const *allow, size_t n_allow, char *const *deny, size_t n_deny,
                      struct netgate_rules **ret, struct al_error *err);
struct netgate_rules *netgate_rules_free(struct netgate_rules *r);

struct netgate_decision {
        bool allow;
        const char *reason;              /* NULL when allowed */
        const struct netgate_rule *rule; /* the rule that decided; NULL when none did */
        struct netgate_host host;        /* canonical; kind NAME with the raw bytes
                                          * escaped when refused as bad_host */
};

/* Deny rules first (deny beats allow), then allow rules. Reasons:
 * bad_host, denied_by_rule, not_allowed, ip_literal_not_listed,
 * port_not_allowed. */
void netgate_rules_decide(const struct netgate_rules *r, const char *raw_host, size_t len,
                          uint16_t port, struct netgate_decision *ret);

/* Printable copy of untrusted bytes for messages: non-printable bytes as \xNN,
 * truncated to fit. */
void netgate_escape(const char *raw, size_t len, char *buf, size_t size);
