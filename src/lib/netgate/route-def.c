/* SPDX-License-Identifier: Apache-2.0 */
#include <errno.h>
#include <string.h>
#include <strings.h>

#include <event2/buffer.h>

#include "netgate/exchange.h"
#include "netgate/netgate-internal.h"
#include "netgate/route.h"
#include "netgate/tls.h"
#include "policy.h"
#include "secrets.h"
#include "util.h"

/* One route's definition (route.h): its upstream URL checked and split,
 * its TLS layer, the fields it strips and injects, the path check, and the
 * upstream request head. route.c serves the routes. */

static char **strv_copy(char *const *v, size_t n)
{
        char **r = xcalloc(n + 1, sizeof(*r));
        for (size_t i = 0; i < n; i++)
                r[i] = xstrdup(v[i] ? v[i] : "");
        return r;
}

/* ---- one route ---- */

static int parse_upstream(struct netgate_route *rt, struct al_error *err)
{
        const char *u = rt->upstream, *rest;
        if (strncmp(u, "https://", 8) == 0) {
                rt->tls = true;
                rest = u + 8;
        } else if (strncmp(u, "http://", 7) == 0)
                rest = u + 7;
        else
                return al_error_set(err, 0,
                                    "route \"%s\": upstream \"%s\": not an http:// or "
                                    "https:// URL",
                                    rt->name, u);
        size_t alen = strcspn(rest, "/");
        const char *host = rest, *port = NULL;
        size_t hlen = alen, plen = 0;
        if (alen > 0 && rest[0] == '[') {
                const char *close = memchr(rest, ']', alen);
                if (!close)
                        goto bad;
                host = rest + 1;
                hlen = (size_t)(close - host);
                if (close + 1 < rest + alen) {
                        if (close[1] != ':')
                                goto bad;
                        port = close + 2;
                        plen = (size_t)(rest + alen - port);
                }
        } else {
                const char *colon = memchr(rest, ':', alen);
                if (colon) {
                        hlen = (size_t)(colon - rest);
                        port = colon + 1;
                        plen = alen - hlen - 1;
                }
        }
        if (hlen == 0 || netgate_host_parse(host, hlen, &rt->host) < 0)
                goto bad;
        rt->port = rt->tls ? 443 : 80;
        if (port) {
                char num[8];
                uint64_t v;
                if (plen == 0 || plen >= sizeof(num))
                        goto bad;
                memcpy(num, port, plen);
                num[plen] = '\0';
                if (safe_atou64(num, &v) < 0 || v == 0 || v > 65535)
                        goto bad;
                rt->port = (uint16_t)v;
        }
        bool v6 = rt->host.kind == NETGATE_HOST_IP && rt->host.addr.family == AF_INET6;
        if (rt->port == (rt->tls ? 443 : 80))
                rt->authority = xasprintf("%s%s%s", v6 ? "[" : "", rt->host.name, v6 ? "]" : "");
        else
                rt->authority =
                    xasprintf("%s%s%s:%u", v6 ? "[" : "", rt->host.name, v6 ? "]" : "", rt->port);
        const char *path = rest + alen;
        size_t n = strlen(path);
        while (n > 0 && path[n - 1] == '/')
                n--;
        rt->base = xasprintf("%.*s", (int)n, path);
        return 0;
bad:
        return al_error_set(err, 0, "route \"%s\": upstream \"%s\": bad host or port", rt->name, u);
}

int netgate_route_new(const struct policy_route *pr, struct netgate_route **ret,
                      struct al_error *err)
{
        if (!pr || !pr->name || !pr->upstream)
                return al_error_set(err, EINVAL, "route: name and upstream are required");
        struct netgate_route *rt = xcalloc(1, sizeof(*rt));
        rt->name = xstrdup(pr->name);
        rt->upstream = xstrdup(pr->upstream);
        int r = parse_upstream(rt, err);
        if (r >= 0 && rt->tls)
                r = netgate_tls_new(pr->ca_file, rt->name, &rt->tls_layer, err);
        if (r < 0) {
                netgate_route_free(rt);
                return r;
        }
        rt->inject = xcalloc(pr->n_inject + 1, sizeof(*rt->inject));
        for (size_t i = 0; i < pr->n_inject; i++) {
                rt->inject[i].key = xstrdup(pr->inject[i].key ? pr->inject[i].key : "");
                rt->inject[i].value = xstrdup(pr->inject[i].value ? pr->inject[i].value : "");
        }
        rt->n_inject = pr->n_inject;
        rt->strip = strv_copy(pr->strip, pr->n_strip);
        rt->n_strip = pr->n_strip;
        rt->record = strv_copy(pr->record, pr->n_record);
        rt->n_record = pr->n_record;
        rt->terminate = pr->terminate;
        rt->host_only = pr->host_only;
        rt->cleartext = pr->cleartext;
        *ret = rt;
        return 0;
}

struct netgate_route *netgate_route_free(struct netgate_route *rt)
{
        if (!rt)
                return NULL;
        for (size_t i = 0; i < rt->n_inject; i++) {
                free(rt->inject[i].key);
                free(rt->inject[i].value);
        }
        free(rt->inject);
        strv_free(rt->strip);
        strv_free(rt->record);
        netgate_tls_free(rt->tls_layer);
        free(rt->name);
        free(rt->upstream);
        free(rt->authority);
        free(rt->base);
        free(rt);
        return NULL;
}

bool netgate_route_strip_match(const char *pattern, const char *name, size_t len)
{
        size_t n = strlen(pattern);
        if (n > 0 && pattern[n - 1] == '*')
                return len >= n - 1 && strncasecmp(pattern, name, n - 1) == 0;
        return netgate_http_name_eq(name, len, pattern);
}

bool netgate_route_field_dropped(const struct netgate_route *rt, const struct netgate_http_head *h,
                                 const char *name, size_t len)
{
        if (netgate_http_field_is_hop(h, name, len))
                return true;
        if (!rt->keep_auth && (netgate_http_name_eq(name, len, "authorization") ||
                               netgate_http_name_eq(name, len, "x-api-key")))
                return true;
        for (size_t i = 0; i < rt->n_strip; i++)
                if (netgate_route_strip_match(rt->strip[i], name, len))
                        return true;
        /* One value per injected name: an upstream that reads the first of
         * two would otherwise read the client's. */
        for (size_t i = 0; i < rt->n_inject; i++)
                if (netgate_http_name_eq(name, len, rt->inject[i].key))
                        return true;
        return false;
}

static void wipe_free(char *s)
{
        if (s) {
                explicit_bzero(s, strlen(s));
                free(s);
        }
}

/* Injected values are wiped from the gate's own buffers once used. */
void netgate_route_wipe(struct evbuffer *b)
{
        size_t n = evbuffer_get_length(b);
        unsigned char *p = n ? evbuffer_pullup(b, -1) : NULL;
        if (p)
                explicit_bzero(p, n);
        evbuffer_drain(b, n);
}

bool netgate_route_carries_secrets(const struct netgate_route *rt)
{
        if (rt->n_inject > 0)
                return true;
        for (size_t i = 0; rt->sentinels && i < rt->sentinels->n; i++)
                if (netgate_sentinel_host_listed(&rt->sentinels->v[i], rt->host.name))
                        return true;
        return false;
}

int netgate_route_write_head(const struct netgate_route *rt, const struct netgate_http_head *req,
                             const char *rest, size_t rest_len, bool close, const struct secrets *s,
                             const struct secrets_vars *vars, struct evbuffer *out,
                             const char **ret_field)
{
        struct evbuffer *head = evbuffer_new();
        if (!head)
                return -ENOMEM;
        const char *slash = rest_len == 0 || rest[0] == '?' ? "/" : "";
        evbuffer_add_printf(head, "%.*s %s%s%.*s HTTP/1.1\r\nHost: %s\r\n", (int)req->method_len,
                            req->method, rt->base, slash, (int)rest_len, rest, rt->authority);
        /* A route that injects, or whose host a sentinel goes to, asks for
         * an unencoded answer: the gate scrubs the secrets from the
         * response body, which it cannot do in a compressed one (and
         * refuses one that comes compressed anyway). */
        bool identity = netgate_route_carries_secrets(rt);
        for (size_t i = 0; i < req->n_fields; i++) {
                const struct netgate_http_field *f = &req->fields[i];
                if (netgate_route_field_dropped(rt, req, f->name, f->name_len))
                        continue;
                if (identity && netgate_http_name_eq(f->name, f->name_len, "accept-encoding"))
                        continue;
                char *sv = NULL;
                size_t sv_len = 0;
                if (netgate_sentinels_apply(rt->sentinels, rt->host.name, f->name, f->name_len,
                                            f->value, f->value_len, &sv, &sv_len) > 0) {
                        evbuffer_add_printf(head, "%.*s: ", (int)f->name_len, f->name);
                        evbuffer_add(head, sv, sv_len);
                        evbuffer_add(head, "\r\n", 2);
                        explicit_bzero(sv, sv_len);
                        free(sv);
                        continue;
                }
                evbuffer_add_printf(head, "%.*s: %.*s\r\n", (int)f->name_len, f->name,
                                    (int)f->value_len, f->value);
        }
        netgate_exchange_put_framing(head, req);
        for (size_t i = 0; i < rt->n_inject; i++) {
                struct al_error e = {0};
                char *v = NULL;
                int r = s ? secrets_expand(s, rt->inject[i].value, vars, &v, &e) : -EINVAL;
                if (r >= 0 && !netgate_http_value_ok(v))
                        r = -EBADMSG;
                if (r < 0) {
                        wipe_free(v);
                        netgate_route_wipe(head);
                        evbuffer_free(head);
                        *ret_field = rt->inject[i].key;
                        return r;
                }
                evbuffer_add_printf(head, "%s: %s\r\n", rt->inject[i].key, v);
                wipe_free(v);
        }
        if (identity)
                evbuffer_add(head, "Accept-Encoding: identity\r\n", 27);
        if (close)
                evbuffer_add(head, "Connection: close\r\n", 19);
        evbuffer_add(head, "\r\n", 2);
        evbuffer_add_buffer(out, head);
        evbuffer_free(head);
        return 0;
}

static int hex_digit(char c)
{
        if (c >= '0' && c <= '9')
                return c - '0';
        if (c >= 'a' && c <= 'f')
                return c - 'a' + 10;
        if (c >= 'A' && c <= 'F')
                return c - 'A' + 10;
        return -1;
}

/* Servers and the frameworks behind them disagree on what a path means:
 * one decodes "%2f" into a separator, one takes "\" for "/", one drops
 * ";params" before resolving "..", one decodes twice. Whatever could make
 * the upstream resolve a segment outside the route's base is refused, in
 * the path only (the query is the upstream's business). */
const char *netgate_route_path_problem(const char *rest, size_t len)
{
        size_t q = 0;
        while (q < len && rest[q] != '?')
                q++;
        for (size_t i = 0; i < q;) {
                size_t j = i;
                while (j < q && rest[j] != '/')
                        j++;
                /* The segment decoded once; a ';' ends what servers resolve. */
                size_t dots = 0, chars = 0;
                bool params = false;
                for (size_t k = i; k < j; k++) {
                        char c = rest[k];
                        if (c == '\\')
                                return "a backslash";
                        if (c == '%') {
                                int hi = k + 2 < j ? hex_digit(rest[k + 1]) : -1;
                                int lo = k + 2 < j ? hex_digit(rest[k + 2]) : -1;
                                if (hi < 0 || lo < 0)
                                        return "a \"%\" not followed by two hex digits";
                                c = (char)(hi << 4 | lo);
                                k += 2;
                                if (c == '/')
                                        return "an encoded \"/\" (%2F)";
                                if (c == '\\')
                                        return "an encoded \"\\\" (%5C)";
                                if (c == '%')
                                        return "a double encoding (%25)";
                                if (c == '\0')
                                        return "an encoded NUL (%00)";
                        }
                        if (params)
                                continue;
                        if (c == ';') {
                                params = true;
                                continue;
                        }
                        chars++;
                        if (c == '.')
                                dots++;
                }
                if (chars == dots && (dots == 1 || dots == 2))
                        return params ? "a \".\" or \"..\" segment with \";\" parameters"
                                      : "a \".\" or \"..\" segment";
                i = j + 1;
        }
        return NULL;
}
