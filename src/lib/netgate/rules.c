/* SPDX-License-Identifier: Apache-2.0 */
#include <errno.h>
#include <netinet/in.h>
#include <string.h>

#include "netgate/rules.h"
#include "util.h"

struct netgate_rules {
        struct netgate_rule *allow;
        size_t n_allow;
        struct netgate_rule *deny;
        size_t n_deny;
};

void netgate_escape(const char *raw, size_t len, char *buf, size_t size)
{
        static const char hex[] = "0123456789abcdef";
        size_t o = 0;
        if (size == 0)
                return;
        for (size_t i = 0; i < len; i++) {
                unsigned char c = (unsigned char)raw[i];
                bool plain = c >= 0x20 && c < 0x7f && c != '\\' && c != '"';
                size_t need = plain ? 1 : 4;
                if (o + need + 1 > size)
                        break;
                if (plain) {
                        buf[o++] = (char)c;
                } else {
                        buf[o++] = '\\';
                        buf[o++] = 'x';
                        buf[o++] = hex[c >> 4];
                        buf[o++] = hex[c & 15];
                }
        }
        buf[o] = '\0';
}

static bool is_digit(char c)
{
        return c >= '0' && c <= '9';
}

static bool is_hex(char c)
{
        return is_digit(c) || (c >= 'a' && c <= 'f');
}

/* One part of an IPv4 number as inet_aton() and URL parsers read it:
 * 0x-prefixed hex, 0-prefixed octal, or decimal. */
static int parse_ipv4_part(const char *s, size_t len, uint64_t *ret)
{
        unsigned base = 10;
        if (len >= 2 && s[0] == '0' && s[1] == 'x') {
                base = 16;
                s += 2;
                len -= 2;
        } else if (len >= 2 && s[0] == '0') {
                base = 8;
                s++;
                len--;
        }
        uint64_t v = 0;
        for (size_t i = 0; i < len; i++) {
                unsigned d;
                if (is_digit(s[i]))
                        d = (unsigned)(s[i] - '0');
                else if (base == 16 && is_hex(s[i]))
                        d = (unsigned)(s[i] - 'a' + 10);
                else
                        return -EINVAL;
                if (d >= base)
                        return -EINVAL;
                v = v * base + d;
                if (v > UINT32_MAX)
                        return -ERANGE;
        }
        *ret = v;
        return 0;
}

static int parse_ipv4_number(const char *name, struct netgate_addr *ret)
{
        uint64_t parts[4];
        size_t n = 0;
        const char *p = name;
        for (;;) {
                const char *dot = strchr(p, '.');
                size_t len = dot ? (size_t)(dot - p) : strlen(p);
                if (n == 4)
                        return -EINVAL;
                int r = parse_ipv4_part(p, len, &parts[n++]);
                if (r < 0)
                        return r;
                if (!dot)
                        break;
                p = dot + 1;
        }
        uint64_t v = parts[n - 1];
        for (size_t i = 0; i + 1 < n; i++) {
                if (parts[i] > 255)
                        return -EINVAL;
                v += parts[i] << (8 * (3 - i));
        }
        if (parts[n - 1] >= (1ULL << (8 * (5 - n))) || v > UINT32_MAX)
                return -EINVAL;
        struct netgate_addr a = {.family = AF_INET};
        a.bytes[0] = (uint8_t)(v >> 24);
        a.bytes[1] = (uint8_t)(v >> 16);
        a.bytes[2] = (uint8_t)(v >> 8);
        a.bytes[3] = (uint8_t)v;
        *ret = a;
        return 0;
}

/* A last label that is a number makes the whole name an IPv4 spelling, as URL
 * parsers and inet_aton() see it. */
static bool ends_in_number(const char *name)
{
        const char *last = strrchr(name, '.');
        last = last ? last + 1 : name;
        if (last[0] == '0' && last[1] == 'x') {
                for (const char *c = last + 2; *c; c++)
                        if (!is_hex(*c))
                                return false;
                return true;
        }
        for (const char *c = last; *c; c++)
                if (!is_digit(*c))
                        return false;
        return true;
}

int netgate_host_parse(const char *raw, size_t len, struct netgate_host *ret)
{
        struct netgate_host h = {0};
        if (!raw || len == 0)
                return -EINVAL;

        if (memchr(raw, ':', len)) {
                if (len >= NETGATE_ADDR_STRLEN || memchr(raw, '\0', len))
                        return -EINVAL;
                char buf[NETGATE_ADDR_STRLEN];
                memcpy(buf, raw, len);
                buf[len] = '\0';
                if (netgate_addr_parse(buf, &h.addr) < 0 || h.addr.family != AF_INET6)
                        return -EINVAL;
                h.kind = NETGATE_HOST_IP;
                netgate_addr_format(&h.addr, h.name);
                *ret = h;
                return 0;
        }

        /* One trailing dot names the same host; it must not slip past an
         * exact-match deny rule. */
        if (raw[len - 1] == '.')
                len--;
        if (len == 0 || len > NETGATE_HOST_MAX)
                return -EINVAL;

        size_t label = 0;
        for (size_t i = 0; i < len; i++) {
                char c = raw[i];
                if (c >= 'A' && c <= 'Z')
                        c = (char)(c - 'A' + 'a');
                /* A NUL, a '/', a '@' or any byte outside the grammar is how
                 * "evil.test\0.allowed.test" passes a suffix check in one
                 * component and connects to evil.test in another. */
                if (c == '.') {
                        if (label == 0 || h.name[i - 1] == '-')
                                return -EINVAL;
                        label = 0;
                } else if (is_digit(c) || (c >= 'a' && c <= 'z') || c == '-') {
                        if (c == '-' && label == 0)
                                return -EINVAL;
                        if (++label > NETGATE_LABEL_MAX)
                                return -EINVAL;
                } else
                        return -EINVAL;
                h.name[i] = c;
        }
        if (label == 0 || h.name[len - 1] == '-')
                return -EINVAL;
        h.name[len] = '\0';

        if (ends_in_number(h.name)) {
                if (parse_ipv4_number(h.name, &h.addr) < 0)
                        return -EINVAL;
                struct netgate_addr strict;
                if (netgate_addr_parse(h.name, &strict) == 0)
                        h.kind = NETGATE_HOST_IP;
                else
                        h.kind = NETGATE_HOST_NUMERIC;
        } else
                h.kind = NETGATE_HOST_NAME;
        *ret = h;
        return 0;
}

static int parse_port(const char *s, size_t len, uint16_t *ret)
{
        unsigned v = 0;
        if (len == 0 || len > 5 || s[0] == '0')
                return -EINVAL;
        for (size_t i = 0; i < len; i++) {
                if (!is_digit(s[i]))
                        return -EINVAL;
                v = v * 10 + (unsigned)(s[i] - '0');
        }
        if (v == 0 || v > 65535)
                return -EINVAL;
        *ret = (uint16_t)v;
        return 0;
}

int netgate_rule_parse(const char *text, struct netgate_rule *ret)
{
        struct netgate_rule rule = {0};
        if (!text)
                return -EINVAL;
        size_t len = strnlen(text, NETGATE_HOST_MAX + 16);
        if (len == 0 || len > NETGATE_HOST_MAX + 8)
                return -EINVAL;

        const char *host = text, *port = NULL;
        size_t host_len = len, port_len = 0;
        if (len >= 2 && text[0] == '*' && text[1] == '.') {
                rule.wildcard = true;
                host += 2;
                host_len -= 2;
        }
        if (host_len > 0 && host[0] == '[') {
                const char *close = memchr(host, ']', host_len);
                if (!close || rule.wildcard)
                        return -EINVAL;
                const char *after = close + 1;
                size_t rest = host_len - (size_t)(after - host);
                if (rest > 0) {
                        if (after[0] != ':')
                                return -EINVAL;
                        port = after + 1;
                        port_len = rest - 1;
                }
                host++;
                host_len = (size_t)(close - host);
                if (!memchr(host, ':', host_len))
                        return -EINVAL; /* only IPv6 goes in brackets */
        } else {
                const char *colon = memchr(host, ':', host_len);
                if (colon && !memchr(colon + 1, ':', host_len - (size_t)(colon + 1 - host))) {
                        port = colon + 1;
                        port_len = host_len - (size_t)(port - host);
                        host_len = (size_t)(colon - host);
                }
        }
        if (port && parse_port(port, port_len, &rule.port) < 0)
                return -EINVAL;
        if (netgate_host_parse(host, host_len, &rule.host) < 0)
                return -EINVAL;
        if (rule.wildcard && rule.host.kind != NETGATE_HOST_NAME)
                return -EINVAL;
        rule.text = xstrdup(text);
        *ret = rule;
        return 0;
}

void netgate_rule_done(struct netgate_rule *r)
{
        if (r) {
                free(r->text);
                r->text = NULL;
        }
}

static int parse_list(char *const *list, size_t n, const char *what, struct netgate_rule **ret,
                      struct al_error *err)
{
        struct netgate_rule *rules = xcalloc(n, sizeof(*rules));
        for (size_t i = 0; i < n; i++) {
                if (netgate_rule_parse(list[i], &rules[i]) < 0) {
                        char esc[128];
                        netgate_escape(list[i] ? list[i] : "", list[i] ? strlen(list[i]) : 0, esc,
                                       sizeof(esc));
                        for (size_t j = 0; j < i; j++)
                                netgate_rule_done(&rules[j]);
                        free(rules);
                        return al_error_set(err, 0,
                                            "%s[%zu] \"%s\": not a host name, \"*.domain\", "
                                            "\"host:port\" or IP literal",
                                            what, i, esc);
                }
        }
        *ret = rules;
        return 0;
}

int netgate_rules_new(char *const *allow, size_t n_allow, char *const *deny, size_t n_deny,
                      struct netgate_rules **ret, struct al_error *err)
{
        struct netgate_rules *r = xcalloc(1, sizeof(*r));
        int k = parse_list(allow, n_allow, "network.allow", &r->allow, err);
        if (k < 0) {
                free(r);
                return k;
        }
        r->n_allow = n_allow;
        k = parse_list(deny, n_deny, "network.deny", &r->deny, err);
        if (k < 0) {
                netgate_rules_free(r);
                return k;
        }
        r->n_deny = n_deny;
        *ret = r;
        return 0;
}

struct netgate_rules *netgate_rules_free(struct netgate_rules *r)
{
        if (!r)
                return NULL;
        for (size_t i = 0; i < r->n_allow; i++)
                netgate_rule_done(&r->allow[i]);
        for (size_t i = 0; i < r->n_deny; i++)
                netgate_rule_done(&r->deny[i]);
        free(r->allow);
        free(r->deny);
        free(r);
        return NULL;
}

static bool rule_host_match(const struct netgate_rule *rule, const struct netgate_host *h)
{
        if (rule->wildcard) {
                if (h->kind != NETGATE_HOST_NAME)
                        return false;
                size_t hl = strlen(h->name), sl = strlen(rule->host.name);
                /* Strict subdomains: "allowed.test.evil.test" ends in neither
                 * ".allowed.test" nor does "xallowed.test" end in it. */
                return hl > sl + 1 && h->name[hl - sl - 1] == '.' &&
                       memcmp(h->name + hl - sl, rule->host.name, sl) == 0;
        }
        if (rule->host.kind != h->kind)
                return false;
        if (h->kind == NETGATE_HOST_IP)
                return netgate_addr_equal(&rule->host.addr, &h->addr);
        return STREQ(rule->host.name, h->name);
}

static bool rule_port_match(const struct netgate_rule *rule, uint16_t port, bool deny)
{
        if (rule->port != 0)
                return rule->port == port;
        return deny || port == 80 || port == 443;
}

void netgate_rules_decide(const struct netgate_rules *r, const char *raw_host, size_t len,
                          uint16_t port, struct netgate_decision *ret)
{
        struct netgate_decision d = {0};
        if (netgate_host_parse(raw_host, len, &d.host) < 0) {
                d.host.kind = NETGATE_HOST_NAME;
                netgate_escape(raw_host ? raw_host : "", raw_host ? len : 0, d.host.name,
                               sizeof(d.host.name));
                d.reason = "bad_host";
                *ret = d;
                return;
        }
        for (size_t i = 0; r && i < r->n_deny; i++) {
                if (rule_host_match(&r->deny[i], &d.host) &&
                    rule_port_match(&r->deny[i], port, true)) {
                        d.reason = "denied_by_rule";
                        d.rule = &r->deny[i];
                        *ret = d;
                        return;
                }
        }
        const struct netgate_rule *host_only = NULL;
        for (size_t i = 0; r && i < r->n_allow; i++) {
                if (!rule_host_match(&r->allow[i], &d.host))
                        continue;
                if (rule_port_match(&r->allow[i], port, false)) {
                        d.allow = true;
                        d.rule = &r->allow[i];
                        *ret = d;
                        return;
                }
                if (!host_only)
                        host_only = &r->allow[i];
        }
        if (host_only) {
                d.reason = "port_not_allowed";
                d.rule = host_only;
        } else if (d.host.kind != NETGATE_HOST_NAME)
                d.reason = "ip_literal_not_listed";
        else
                d.reason = "not_allowed";
        *ret = d;
}
