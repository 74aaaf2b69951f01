/* SPDX-License-Identifier: Apache-2.0 */
/* Checking: the syntax of each kind of value, and policy_validate(), which
 * checks a whole policy whoever set its fields (numbers: numbers.c). */
#include <arpa/inet.h>
#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <string.h>

#include "netgate/rules.h"
#include "policy-internal.h"
#include "utf8.h"
#include "volume.h"

/* Syntax checks. Each returns NULL when the value is good, else why not. */

static bool is_alpha(char ch)
{
        return (ch >= 'a' && ch <= 'z') || (ch >= 'A' && ch <= 'Z');
}

static bool is_digit(char ch)
{
        return ch >= '0' && ch <= '9';
}

static bool is_alnum(char ch)
{
        return is_alpha(ch) || is_digit(ch);
}

static bool utf8_valid(const char *s)
{
        return utf8_str_valid(s);
}

static bool is_hostname(const char *s)
{
        size_t len = strlen(s), label = 0;

        if (len > 0 && s[len - 1] == '.')
                len--;
        if (len == 0 || len > 253)
                return false;
        for (size_t i = 0; i < len; i++) {
                if (s[i] == '.') {
                        if (label == 0)
                                return false;
                        label = 0;
                        continue;
                }
                if (!is_alnum(s[i]) && s[i] != '-' && s[i] != '_')
                        return false;
                if (++label > 63)
                        return false;
        }
        return label > 0;
}

static bool is_ip(const char *s, int family)
{
        unsigned char buf[16];
        return inet_pton(family, s, buf) == 1;
}

static bool is_port(const char *s)
{
        uint64_t v;
        if (strlen(s) > 5 || safe_atou64(s, &v) < 0)
                return false;
        return v >= 1 && v <= 65535;
}

/* "name:port" or "*.name:port" (a sentinel's cleartext entry). */
static bool is_host_port(const char *s)
{
        const char *colon = strrchr(s, ':');
        char host[254];
        if (!colon || (size_t)(colon - s) >= sizeof(host) || !is_port(colon + 1))
                return false;
        memcpy(host, s, (size_t)(colon - s));
        host[colon - s] = '\0';
        return is_hostname(strncmp(host, "*.", 2) == 0 ? host + 2 : host);
}

/* RFC 9110 token: the grammar of header names. */
static bool is_token(const char *s)
{
        if (!s || !*s)
                return false;
        for (; *s; s++)
                if (!is_alnum(*s) && !strchr("!#$%&'*+-.^_`|~", *s))
                        return false;
        return true;
}

static bool is_env_name(const char *s)
{
        if (!s || !(is_alpha(*s) || *s == '_'))
                return false;
        for (; *s; s++)
                if (!is_alnum(*s) && *s != '_')
                        return false;
        return true;
}

/* "${secret:NAME}" references stay verbatim for the module that resolves
 * them; here only their syntax is checked. Other "${" text is left alone. */
static bool templates_valid(const char *v)
{
        static const char open[] = "${secret:";
        const char *t = v;

        while ((t = strstr(t, open))) {
                t += sizeof(open) - 1;
                if (!is_alpha(*t) && *t != '_')
                        return false;
                while (is_alnum(*t) || *t == '_')
                        t++;
                if (*t != '}')
                        return false;
        }
        return true;
}

#define WHY_TEMPLATE "must write secret references as ${secret:NAME}, NAME of letters, digits and _"

static const char *check_host_path(const char *s)
{
        if (!s || !*s)
                return "must not be empty";
        if (!utf8_valid(s))
                return "must be valid UTF-8";
        if (s[0] == '~' && s[1] != '\0' && s[1] != '/')
                return "must be absolute, relative, or start with \"~/\" (\"~user\" is not "
                       "supported)";
        return NULL;
}

static const char *check_sandbox_path(const char *s)
{
        if (!s || s[0] != '/')
                return "must be an absolute path";
        if (!utf8_valid(s))
                return "must be valid UTF-8";
        for (const char *c = s; *c;) {
                c += strspn(c, "/");
                size_t len = strcspn(c, "/");
                if (len == 2 && c[0] == '.' && c[1] == '.')
                        return "must not contain \"..\"";
                c += len;
        }
        return NULL;
}

static const char *check_mount_target(const char *s)
{
        const char *why = check_sandbox_path(s);
        if (why)
                return why;
        for (const char *c = s; *c;) {
                c += strspn(c, "/");
                size_t len = strcspn(c, "/");
                if (len == 0 || (len == 1 && c[0] == '.')) {
                        c += len;
                        continue;
                }
                if ((len == 4 && strncmp(c, "proc", 4) == 0) ||
                    (len == 3 && strncmp(c, "dev", 3) == 0))
                        return "must not be /proc, /dev or a path under them";
                return NULL;
        }
        return "must not be \"/\"";
}

/* The gate's own parser decides: a policy that loads is one the gate
 * accepts, with the same host-name grammar. */
static const char *check_net_rule(const char *r)
{
        static const char why[] =
            "must be a host name, \"*.\" and a domain, or an IP address, optionally with \":port\"";
        if (!r || !*r)
                return why;
        if (strstr(r, "://"))
                return "must be a host name or host:port, not a URL";
        /* A port after the host (not inside a bare IPv6 address) must be one. */
        const char *colon = strrchr(r, ':');
        bool bare_v6 = colon && r[0] != '[' && strchr(r, ':') != colon;
        if (colon && !bare_v6 && (r[0] != '[' || colon[-1] == ']') && !is_port(colon + 1))
                return "must have a port from 1 to 65535";
        struct netgate_rule rule;
        if (netgate_rule_parse(r, &rule) < 0)
                return why;
        netgate_rule_done(&rule);
        return NULL;
}

static const char *check_cidr(const char *s)
{
        static const char why[] =
            "must be an IP address or a CIDR range such as \"10.0.0.0/8\" or \"fd00::/8\"";
        char addr[INET6_ADDRSTRLEN + 1];
        const char *slash;
        size_t n;
        uint64_t bits, max;

        if (!s)
                return why;
        slash = strchr(s, '/');
        n = slash ? (size_t)(slash - s) : strlen(s);
        if (n == 0 || n >= sizeof(addr))
                return why;
        memcpy(addr, s, n);
        addr[n] = '\0';
        if (is_ip(addr, AF_INET))
                max = 32;
        else if (is_ip(addr, AF_INET6))
                max = 128;
        else
                return why;
        if (!slash)
                return NULL;
        slash++;
        if (strlen(slash) > 3 || (slash[0] == '0' && slash[1] != '\0') ||
            safe_atou64(slash, &bits) < 0 || bits > max)
                return why;
        return NULL;
}

static const char *check_route_name(const char *s)
{
        size_t n = 0;
        if (!s)
                return "is required";
        for (; s[n]; n++)
                if (!(s[n] >= 'a' && s[n] <= 'z') && !is_digit(s[n]) && s[n] != '_' && s[n] != '-')
                        return "must be 1 to 64 of a-z, 0-9, _ and -";
        if (n == 0 || n > 64)
                return "must be 1 to 64 of a-z, 0-9, _ and -";
        return NULL;
}

static const char *check_upstream(const char *u)
{
        static const char why[] =
            "must be an http:// or https:// URL with a host and no user info, query or fragment";
        const char *rest;

        if (!u)
                return "is required";
        if (strncmp(u, "https://", 8) == 0)
                rest = u + 8;
        else if (strncmp(u, "http://", 7) == 0)
                rest = u + 7;
        else
                return why;
        if (*rest == '\0' || *rest == '/' || *rest == ':')
                return why;
        for (const char *q = u; *q; q++)
                if ((unsigned char)*q <= 0x20 || (unsigned char)*q >= 0x7f || *q == '?' ||
                    *q == '#')
                        return why;
        /* Credentials belong in "inject", where they stay on the host. */
        size_t authority = strcspn(rest, "/");
        if (memchr(rest, '@', authority))
                return why;
        return NULL;
}

/* http://HOST:PORT or socks5://HOST:PORT, an optional trailing "/": no
 * credentials, no path. HOST a name or an IP literal ([v6]). */
static const char *check_parent_proxy(const char *u)
{
        static const char why[] = "must be http://HOST:PORT or socks5://HOST:PORT, with no "
                                  "credentials or path";
        const char *rest;
        if (strncmp(u, "http://", 7) == 0)
                rest = u + 7;
        else if (strncmp(u, "socks5://", 9) == 0)
                rest = u + 9;
        else if (strncmp(u, "socks5h://", 10) == 0)
                rest = u + 10;
        else
                return why;
        char buf[300];
        size_t alen = strcspn(rest, "/");
        if ((rest[alen] == '/' && rest[alen + 1]) || alen == 0 || alen >= sizeof(buf) ||
            memchr(rest, '@', alen))
                return why;
        memcpy(buf, rest, alen);
        buf[alen] = '\0';
        char *colon = strrchr(buf, ':');
        if (!colon || !colon[1] || strlen(colon + 1) > 5)
                return why;
        *colon = '\0';
        unsigned long port = 0;
        for (const char *q = colon + 1; *q; q++) {
                if (*q < '0' || *q > '9')
                        return why;
                port = port * 10 + (unsigned long)(*q - '0');
        }
        if (port < 1 || port > 65535)
                return why;
        if (buf[0] == '[') {
                size_t n = strlen(buf);
                if (n < 3 || buf[n - 1] != ']')
                        return why;
                buf[n - 1] = '\0';
                return is_ip(buf + 1, AF_INET6) ? NULL : why;
        }
        return is_hostname(buf) || is_ip(buf, AF_INET) ? NULL : why;
}

/* https://host[:port], optionally with one trailing "/". */
static bool terminable(const char *u)
{
        if (strncmp(u, "https://", 8) != 0)
                return false;
        const char *slash = strchr(u + 8, '/');
        return !slash || slash[1] == '\0';
}

/* Headers that decide how a message is framed or routed; letting a policy set
 * them would invite request smuggling past the upstream. */
static const char *const framing_headers[] = {
    "connection", "content-length", "host",    "keep-alive",        "proxy-connection",
    "te",         "trailer",        "upgrade", "transfer-encoding",
};

static const char *check_inject_header(const char *h)
{
        if (!is_token(h))
                return "must be an HTTP header name";
        for (size_t i = 0; i < ARRAY_SIZE(framing_headers); i++)
                if (strcasecmp(h, framing_headers[i]) == 0)
                        return "must not be a hop-by-hop or framing header";
        return NULL;
}

static const char *check_header_value(const char *v)
{
        if (!v)
                return "must be a string";
        for (const char *q = v; *q; q++)
                if (((unsigned char)*q < 0x20 && *q != '\t') || *q == 0x7f)
                        return "must not contain control characters";
        if (!utf8_valid(v))
                return "must be valid UTF-8";
        if (!templates_valid(v))
                return WHY_TEMPLATE;
        return NULL;
}

static const char *check_env_value(const char *v)
{
        if (!v)
                return "must be a string";
        if (!utf8_valid(v))
                return "must be valid UTF-8";
        if (!templates_valid(v))
                return WHY_TEMPLATE;
        return NULL;
}

static const char *check_tool_name(const char *s)
{
        static const char why[] = "must be 1 to 128 of letters, digits, and . _ : * -";
        size_t n = 0;
        if (!s)
                return why;
        for (; s[n]; n++)
                if (!is_alnum(s[n]) && !strchr("._:*-", s[n]))
                        return why;
        return n == 0 || n > 128 ? why : NULL;
}

/* Validation of the whole policy, whoever set its fields. */

static int check_strv(struct ctx *c, const char *name, char *const *v, size_t n,
                      const char *(*check)(const char *))
{
        char path[128];
        for (size_t i = 0; i < n; i++) {
                const char *why = check(v[i]);
                if (why) {
                        snprintf(path, sizeof(path), "%s[%zu]", name, i);
                        return policy_fail_value(c, path, why, v[i]);
                }
        }
        return 0;
}

static int validate_network(struct ctx *c, const struct policy *p)
{
        char path[128];
        const char *why;
        int r;

        if ((unsigned)p->net_mode > POLICY_NET_GATED)
                return policy_fail(c, "\"network.mode\" is out of range");
        r = check_strv(c, "network.allow", p->net_allow, p->n_net_allow, check_net_rule);
        if (r < 0)
                return r;
        r = check_strv(c, "network.deny", p->net_deny, p->n_net_deny, check_net_rule);
        if (r < 0)
                return r;
        r = check_strv(c, "network.allowPrivate", p->net_allow_private, p->n_net_allow_private,
                       check_cidr);
        if (r < 0)
                return r;
        for (size_t i = 0; i < p->n_net_hosts; i++) {
                const struct policy_kv *h = &p->net_hosts[i];
                if (!h->key || !is_hostname(h->key))
                        return policy_fail_value(c, "network.hosts", "keys must be host names",
                                                 h->key);
                if (!h->value || !(is_ip(h->value, AF_INET) || is_ip(h->value, AF_INET6))) {
                        snprintf(path, sizeof(path), "network.hosts.%s", SHOWN(h->key));
                        return policy_fail_value(c, path, "must be an IPv4 or IPv6 address",
                                                 h->value);
                }
        }
        for (size_t i = 0; i < p->n_net_deny_reasons; i++) {
                const char *k = p->net_deny_reasons[i].key;
                if ((why = check_net_rule(k)))
                        return policy_fail_value(c, "network.denyReasons",
                                                 "keys must be host patterns as in network.allow",
                                                 k);
        }
        for (size_t i = 0; i < p->n_routes; i++) {
                const struct policy_route *rt = &p->routes[i];

                snprintf(path, sizeof(path), "network.routes[%zu].name", i);
                if ((why = check_route_name(rt->name)))
                        return rt->name ? policy_fail_value(c, path, why, rt->name)
                                        : policy_fail(c, "\"%s\" %s", path, why);
                for (size_t j = 0; j < i; j++)
                        if (STREQ(p->routes[j].name, rt->name))
                                return policy_fail(c,
                                                   "\"%s\" \"%s\" is already used by routes[%zu]",
                                                   path, rt->name, j);

                snprintf(path, sizeof(path), "network.routes[%zu].upstream", i);
                if ((why = check_upstream(rt->upstream)))
                        return rt->upstream ? policy_fail_value(c, path, why, rt->upstream)
                                            : policy_fail(c, "\"%s\" %s", path, why);

                for (size_t j = 0; j < rt->n_inject; j++) {
                        const struct policy_kv *h = &rt->inject[j];
                        if ((why = check_inject_header(h->key))) {
                                snprintf(path, sizeof(path), "network.routes[%zu].inject", i);
                                return policy_fail(c, "\"%s\" keys %s (got \"%s\")", path, why,
                                                   SHOWN(h->key));
                        }
                        if ((why = check_header_value(h->value))) {
                                snprintf(path, sizeof(path), "network.routes[%zu].inject.%s", i,
                                         h->key);
                                return policy_fail_value(c, path, why, h->value);
                        }
                }
                for (size_t j = 0; j < rt->n_strip; j++)
                        if (!is_token(rt->strip[j])) {
                                snprintf(path, sizeof(path), "network.routes[%zu].strip[%zu]", i,
                                         j);
                                return policy_fail_value(
                                    c, path, "must be an HTTP header name, \"*\" allowed",
                                    rt->strip[j]);
                        }
                for (size_t j = 0; j < rt->n_record; j++)
                        if (!is_token(rt->record[j])) {
                                snprintf(path, sizeof(path), "network.routes[%zu].record[%zu]", i,
                                         j);
                                return policy_fail_value(c, path, "must be an HTTP header name",
                                                         rt->record[j]);
                        }
                if (rt->terminate && !terminable(rt->upstream)) {
                        snprintf(path, sizeof(path), "network.routes[%zu].upstream", i);
                        return policy_fail_value(c, path,
                                                 "a route with \"terminate\" must be an https:// "
                                                 "URL with no path: the sandbox's client names "
                                                 "the path",
                                                 rt->upstream);
                }
                for (size_t j = 0; rt->terminate && j < i; j++)
                        if (p->routes[j].terminate && STREQ(p->routes[j].upstream, rt->upstream)) {
                                snprintf(path, sizeof(path), "network.routes[%zu].upstream", i);
                                return policy_fail(c,
                                                   "\"%s\" \"%s\" is already terminated by "
                                                   "routes[%zu]",
                                                   path, rt->upstream, j);
                        }
                if (rt->ca_file && (why = check_host_path(rt->ca_file))) {
                        snprintf(path, sizeof(path), "network.routes[%zu].caFile", i);
                        return policy_fail_value(c, path, why, rt->ca_file);
                }
        }
        for (size_t i = 0; i < p->n_sentinels; i++) {
                const struct policy_sentinel *s = &p->sentinels[i];
                snprintf(path, sizeof(path), "network.sentinels[%zu].env", i);
                if (!s->env || !is_env_name(s->env))
                        return policy_fail_value(c, path, "must be an environment variable name",
                                                 s->env);
                for (size_t j = 0; j < i; j++)
                        if (STREQ(p->sentinels[j].env, s->env))
                                return policy_fail(c,
                                                   "\"%s\" \"%s\" is already used by "
                                                   "sentinels[%zu]",
                                                   path, s->env, j);
                snprintf(path, sizeof(path), "network.sentinels[%zu].secret", i);
                if (!s->secret || !*s->secret || !is_env_name(s->secret))
                        return policy_fail_value(c, path, "must name a secret (--secrets)",
                                                 s->secret);
                snprintf(path, sizeof(path), "network.sentinels[%zu].hosts", i);
                if (s->n_hosts == 0)
                        return policy_fail(c, "\"%s\" must list the hosts the secret may go to",
                                           path);
                for (size_t j = 0; j < s->n_hosts; j++) {
                        const char *h = s->hosts[j] ? s->hosts[j] : "";
                        if (!is_hostname(strncmp(h, "*.", 2) == 0 ? h + 2 : h)) {
                                snprintf(path, sizeof(path), "network.sentinels[%zu].hosts[%zu]", i,
                                         j);
                                return policy_fail_value(c, path,
                                                         "must be a host name or \"*.\" and a "
                                                         "host name",
                                                         h);
                        }
                }
                for (size_t j = 0; j < s->n_cleartext_at; j++) {
                        const char *h = s->cleartext_at[j] ? s->cleartext_at[j] : "";
                        if (!is_host_port(h)) {
                                snprintf(path, sizeof(path),
                                         "network.sentinels[%zu].cleartext[%zu]", i, j);
                                return policy_fail_value(c, path,
                                                         "must be \"HOST:PORT\" (HOST a host "
                                                         "name or \"*.\" and one, PORT 1-65535)",
                                                         h);
                        }
                }
        }
        if (p->net_parent_proxy && (why = check_parent_proxy(p->net_parent_proxy)))
                return policy_fail_value(c, "network.parentProxy", why, p->net_parent_proxy);
        for (size_t i = 0; i < p->n_net_no_proxy; i++) {
                const char *h = p->net_no_proxy[i] ? p->net_no_proxy[i] : "";
                if (!is_hostname(strncmp(h, "*.", 2) == 0 ? h + 2 : h) && !is_ip(h, AF_INET) &&
                    !is_ip(h, AF_INET6)) {
                        snprintf(path, sizeof(path), "network.noProxy[%zu]", i);
                        return policy_fail_value(c, path,
                                                 "must be a host name, \"*.\" and a host name, "
                                                 "or an IP address",
                                                 h);
                }
        }
        if (p->n_net_no_proxy > 0 && !p->net_parent_proxy)
                return policy_fail(c, "\"network.noProxy\" is given without "
                                      "\"network.parentProxy\"");
        if (p->net_parent_send_names && !p->net_parent_proxy)
                return policy_fail(c, "\"network.parentProxySendNames\" is given without "
                                      "\"network.parentProxy\"");
        if (p->net_mode_set && p->net_mode == POLICY_NET_NONE && p->n_sentinels > 0)
                return policy_fail(c,
                                   "\"network.mode\" is \"none\" but \"network.sentinels\" "
                                   "has %zu sentinel(s); remove them or use mode \"gated\"",
                                   p->n_sentinels);
        if (p->net_mode_set && p->net_mode == POLICY_NET_NONE) {
                if (p->n_net_allow > 0)
                        return policy_fail(
                            c,
                            "\"network.mode\" is \"none\" but \"network.allow\" has %zu "
                            "rule(s); remove them or use mode \"gated\"",
                            p->n_net_allow);
                if (p->n_routes > 0)
                        return policy_fail(
                            c,
                            "\"network.mode\" is \"none\" but \"network.routes\" has %zu "
                            "route(s); remove them or use mode \"gated\"",
                            p->n_routes);
                if (p->net_ask)
                        return policy_fail(c, "\"network.mode\" is \"none\" but "
                                              "\"network.onUnlisted\" is \"ask\": without the "
                                              "gate there is nothing to ask about; use mode "
                                              "\"gated\"");
        }
        return 0;
}

int policy_validate(struct ctx *c, const struct policy *p)
{
        char path[128];
        const char *why;
        int r;

        if (!policy_class_find(p->class_name))
                return policy_fail_value(c, "class", "must be one of " CLASS_NAMES, p->class_name);

        if ((unsigned)p->workspace_mode > POLICY_WORKSPACE_OVERLAY)
                return policy_fail(c, "\"workspace.mode\" is out of range");
        if (p->workspace && (why = check_host_path(p->workspace)))
                return policy_fail_value(c, "workspace.path", why, p->workspace);

        if ((unsigned)p->read > POLICY_READ_HOST)
                return policy_fail(c, "\"filesystem.read\" is out of range");
        r = check_strv(c, "filesystem.denyRead", p->deny_read, p->n_deny_read, check_host_path);
        if (r < 0)
                return r;
        r = check_strv(c, "filesystem.allowWrite", p->allow_write, p->n_allow_write,
                       check_sandbox_path);
        if (r < 0)
                return r;
        r = check_strv(c, "filesystem.denyWrite", p->deny_write, p->n_deny_write, check_host_path);
        if (r < 0)
                return r;
        r = check_strv(c, "filesystem.allowRead", p->allow_read, p->n_allow_read, check_host_path);
        if (r < 0)
                return r;
        for (size_t i = 0; i < p->n_mounts; i++) {
                const struct policy_mount *m = &p->mounts[i];
                snprintf(path, sizeof(path), "filesystem.mounts[%zu].source", i);
                if (m->source && m->volume)
                        return policy_fail(c, "\"%s\" and \"volume\" exclude each other", path);
                if (m->volume) {
                        snprintf(path, sizeof(path), "filesystem.mounts[%zu].volume", i);
                        if ((why = volume_name_check(m->volume)))
                                return policy_fail_value(c, path, why, m->volume);
                } else if (!m->source)
                        return policy_fail(c, "\"%s\" is required", path);
                else if ((why = check_host_path(m->source)))
                        return policy_fail_value(c, path, why, m->source);
                snprintf(path, sizeof(path), "filesystem.mounts[%zu].target", i);
                if (!m->target)
                        return policy_fail(c, "\"%s\" is required", path);
                if ((why = check_mount_target(m->target)))
                        return policy_fail_value(c, path, why, m->target);
        }

        r = validate_network(c, p);
        if (r < 0)
                return r;

        for (size_t i = 0; i < policy_n_limit_descs; i++) {
                const struct limit_desc *d = &policy_limit_descs[i];
                uint64_t v = *policy_limit_field((struct policy_limits *)&p->limits, d);
                snprintf(path, sizeof(path), "limits.%s", d->key);
                r = policy_check_range(c, path, d->kind, v, d->min, d->max);
                if (r < 0)
                        return r;
        }
        for (size_t i = 0; i < policy_n_io_descs; i++) {
                const struct limit_desc *d = &policy_io_descs[i];
                uint64_t v = *policy_io_field((struct policy_io *)&p->limits.io, d);
                snprintf(path, sizeof(path), "limits.io.%s", d->key);
                r = policy_check_range(c, path, d->kind, v, d->min, d->max);
                if (r < 0)
                        return r;
        }
        if (p->budget.requests > INT64_MAX || p->budget.bytes > INT64_MAX ||
            p->budget.rate > INT64_MAX || p->budget.refusals > INT64_MAX)
                return policy_fail(c, "\"network.budget\" is too large");

        for (size_t i = 0; i < p->n_env; i++) {
                const struct policy_kv *e = &p->env[i];
                if (!is_env_name(e->key))
                        return policy_fail(
                            c,
                            "\"env\" keys must be names of letters, digits and _, not "
                            "starting with a digit (got \"%s\")",
                            SHOWN(e->key));
                if ((why = check_env_value(e->value))) {
                        snprintf(path, sizeof(path), "env.%s", e->key);
                        return policy_fail_value(c, path, why, e->value);
                }
        }
        r = check_strv(c, "tools.allow", p->tools_allow, p->n_tools_allow, check_tool_name);
        if (r < 0)
                return r;
        if (p->uid > UID_MAX_INSIDE)
                return policy_fail(c, "\"uid\" must be an integer from 0 to %d", UID_MAX_INSIDE);
        if (p->gid > UID_MAX_INSIDE)
                return policy_fail(c, "\"gid\" must be an integer from 0 to %d", UID_MAX_INSIDE);
        if (p->users && (p->users < 2 || p->uid >= p->users || p->gid >= p->users))
                return policy_fail(c,
                                   "\"users\" (%u) must be 0 (one user) or from 2 to 65536 and "
                                   "larger than \"uid\" (%u) and \"gid\" (%u): it maps uids 0 to "
                                   "users-1",
                                   (unsigned)p->users, (unsigned)p->uid, (unsigned)p->gid);
        /* Under runsc a command's identity is gVisor's own, whatever uid
         * started it: the users would be accepted and not kept apart. */
        if (p->users && p->tier == POLICY_TIER_GVISOR)
                return policy_fail(c, "\"users\" cannot go with the gvisor tier (gVisor runs "
                                      "every command as its own user); use the namespace or "
                                      "container tier");
        return 0;
}

/* The same checks for what is granted to a running sandbox (caps.c). */
const char *policy_check_net_rule(const char *rule)
{
        return check_net_rule(rule);
}

const char *policy_check_mount_target(const char *target)
{
        return check_mount_target(target);
}

const char *policy_check_env(const char *name, const char *value)
{
        if (!is_env_name(name))
                return "env names must be letters, digits and _, not starting with a digit";
        return check_env_value(value);
}
