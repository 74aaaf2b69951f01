/* SPDX-License-Identifier: Apache-2.0 */
/* Secrets and plain HTTP (netgate/cleartext.c, sentinel.h): a head that
 * would carry a sentinel's value, in a field or inside a Basic credential,
 * to a listed host off the gate's host is refused unless the sentinel's
 * "cleartext" names that host and port; a route injecting a ${secret:...}
 * into an http:// upstream off the host needs its own "cleartext"; the
 * host's own loopback (an address, or a name network.hosts fixes there,
 * not through a parent proxy) is no wire. */
#include <criterion/criterion.h>
#include <string.h>

#include <event2/event.h>
#include <openssl/evp.h>

#include "netgate/http.h"
#include "netgate/netgate-internal.h"
#include "netgate/netgate.h"
#include "netgate/route.h"
#include "netgate/sentinel.h"
#include "policy.h"
#include "util.h"

static char ph[NETGATE_SENTINEL_LEN + 1];
static char *hosts[] = {"git.example.test", "*.api.example.test"};
static char *at[] = {"git.example.test:8080", "*.api.example.test:80"};
static struct netgate_sentinel one;
static struct netgate_sentinels set;
static struct netgate_http_parser parser;

static void setup(void)
{
        cr_assert_eq(netgate_sentinel_make(ph), 0);
        one = (struct netgate_sentinel){.env = "GH_TOKEN",
                                        .placeholder = ph,
                                        .value = "ghp_REALVALUE",
                                        .value_len = 13,
                                        .hosts = hosts,
                                        .n_hosts = 2};
        set = (struct netgate_sentinels){.v = &one, .n = 1};
}

static const struct netgate_http_head *head_with(const char *field)
{
        _cleanup_free_ char *req =
            xasprintf("GET http://h.test/ HTTP/1.1\r\nHost: h.test\r\n%s\r\n\r\n", field);
        netgate_http_parser_init(&parser, NETGATE_HTTP_REQUEST);
        size_t used = 0;
        cr_assert_eq(netgate_http_parser_feed(&parser, req, strlen(req), &used), 1);
        return &parser.head;
}

TestSuite(cleartext, .init = setup, .timeout = 30);

Test(cleartext, a_placeholder_for_a_listed_host_is_refused)
{
        _cleanup_free_ char *f = xasprintf("Authorization: token %s", ph);
        const struct netgate_http_head *h = head_with(f);
        cr_expect_eq(
            netgate_sentinels_cleartext_refused(&set, "git.example.test", 80, h, NULL, NULL), &one);
        cr_expect_eq(
            netgate_sentinels_cleartext_refused(&set, "x.api.example.test", 80, h, NULL, NULL),
            &one);
        /* Not listed: the placeholder goes out unchanged, worth nothing. */
        cr_expect_null(netgate_sentinels_cleartext_refused(&set, "other.test", 80, h, NULL, NULL));
        /* No placeholder in the head. */
        cr_expect_null(netgate_sentinels_cleartext_refused(&set, "git.example.test", 80,
                                                           head_with("X-Other: 1"), NULL, NULL));
}

Test(cleartext, a_placeholder_in_a_basic_credential_is_refused)
{
        _cleanup_free_ char *plain = xasprintf("x-access-token:%s", ph);
        unsigned char b64[256];
        EVP_EncodeBlock(b64, (const unsigned char *)plain, (int)strlen(plain));
        _cleanup_free_ char *f = xasprintf("Authorization: Basic %s", (char *)b64);
        cr_expect_eq(netgate_sentinels_cleartext_refused(&set, "git.example.test", 80, head_with(f),
                                                         NULL, NULL),
                     &one);
}

Test(cleartext, cleartext_entries_allow_only_their_host_and_port)
{
        _cleanup_free_ char *f = xasprintf("X-Token: %s", ph);
        const struct netgate_http_head *h = head_with(f);
        one.cleartext_at = at;
        one.n_cleartext_at = 2;
        cr_expect_null(
            netgate_sentinels_cleartext_refused(&set, "git.example.test", 8080, h, NULL, NULL));
        cr_expect_eq(
            netgate_sentinels_cleartext_refused(&set, "git.example.test", 80, h, NULL, NULL), &one);
        cr_expect_null(
            netgate_sentinels_cleartext_refused(&set, "a.api.example.test", 80, h, NULL, NULL));
        cr_expect_eq(
            netgate_sentinels_cleartext_refused(&set, "a.api.example.test", 8080, h, NULL, NULL),
            &one);
        cr_expect_eq(
            netgate_sentinels_cleartext_refused(&set, "api.example.test.evil", 80, h, NULL, NULL),
            NULL, "not listed at all");
        one.n_cleartext_at = 0;
        one.cleartext = true;
        cr_expect_null(
            netgate_sentinels_cleartext_refused(&set, "git.example.test", 80, h, NULL, NULL));
}

/* ---- with a gate: what stays on the host, and routes ---- */

static struct netgate *gate_with(const char *parent)
{
        static struct event_base *base;
        struct policy *p = policy_new();
        p->net_hosts = xcalloc(3, sizeof(*p->net_hosts));
        p->net_hosts[0] = (struct policy_kv){xstrdup("local.test"), xstrdup("127.0.0.1")};
        p->net_hosts[1] = (struct policy_kv){xstrdup("lan.test"), xstrdup("10.1.2.3")};
        p->n_net_hosts = 2;
        p->net_allow_private =
            strv_append(p->net_allow_private, &p->n_net_allow_private, "127.0.0.0/8");
        p->net_parent_proxy = parent ? xstrdup(parent) : NULL;
        if (!base)
                base = event_base_new();
        struct al_error err = {0};
        struct netgate *g = netgate_new(base, p, "t", &err);
        cr_assert_not_null(g, "%s", err.msg);
        policy_free(p);
        return g;
}

static struct netgate_host host(const char *s)
{
        struct netgate_host h;
        cr_assert_eq(netgate_host_parse(s, strlen(s), &h), 0);
        return h;
}

Test(cleartext, only_the_hosts_own_loopback_stays_on_the_host)
{
        struct netgate *g = gate_with(NULL);
        struct netgate_host h;
        h = host("127.0.0.1");
        cr_expect(netgate_stays_on_host(g, &h));
        h = host("::1");
        cr_expect(netgate_stays_on_host(g, &h));
        h = host("local.test");
        cr_expect(netgate_stays_on_host(g, &h), "fixed to the loopback by network.hosts");
        h = host("lan.test");
        cr_expect_not(netgate_stays_on_host(g, &h));
        h = host("10.0.0.1");
        cr_expect_not(netgate_stays_on_host(g, &h));
        h = host("resolved.test");
        cr_expect_not(netgate_stays_on_host(g, &h), "a resolved name is not known to stay");
        netgate_free(g);
        /* Through a parent proxy, even the loopback name crosses to it. */
        g = gate_with("http://127.0.0.1:3128");
        h = host("local.test");
        cr_expect_not(netgate_stays_on_host(g, &h));
        netgate_free(g);
}

Test(cleartext, a_route_injecting_a_secret_over_http_needs_cleartext)
{
        struct netgate *g = gate_with(NULL);
        struct policy_kv inject = {"Authorization", "token ${secret:GH_TOKEN}"};
        struct policy_route pr = {
            .name = "api", .upstream = "http://lan.test:8080", .inject = &inject, .n_inject = 1};
        struct netgate_route *rt = NULL;
        struct al_error err = {0};
        cr_assert_eq(netgate_route_new(&pr, &rt, &err), 0, "%s", err.msg);
        const struct netgate_http_head *h = head_with("X-Other: 1");
        char rule[160], line[512];
        struct netgate_host lan = host("lan.test");
        cr_expect(netgate_cleartext_refused(g, rt, &lan, 8080, h, rule, sizeof(rule), line,
                                            sizeof(line)));
        cr_expect_str_eq(rule, "network.routes[api].cleartext");
        cr_expect(strstr(line, "\"cleartext\": true") != NULL, "%s", line);
        /* On the host's own loopback: no wire. */
        struct netgate_host local = host("local.test");
        cr_expect_not(netgate_cleartext_refused(g, rt, &local, 8080, h, rule, sizeof(rule), line,
                                                sizeof(line)));
        netgate_route_free(rt);
        /* A static value is no secret; an explicit cleartext sends it. */
        inject.value = "static";
        cr_assert_eq(netgate_route_new(&pr, &rt, &err), 0);
        cr_expect_not(netgate_cleartext_refused(g, rt, &lan, 8080, h, rule, sizeof(rule), line,
                                                sizeof(line)));
        netgate_route_free(rt);
        inject.value = "token ${secret:GH_TOKEN}";
        pr.cleartext = true;
        cr_assert_eq(netgate_route_new(&pr, &rt, &err), 0);
        cr_expect_not(netgate_cleartext_refused(g, rt, &lan, 8080, h, rule, sizeof(rule), line,
                                                sizeof(line)));
        netgate_route_free(rt);
        netgate_free(g);
}

static bool drop_proxy_auth(const void *ud, const struct netgate_http_head *h, const char *name,
                            size_t len)
{
        return netgate_http_name_eq(name, len, "proxy-authorization");
}

/* A field that is not passed on carries nothing over the wire. */
Test(cleartext, fields_not_passed_on_are_not_looked_at)
{
        _cleanup_free_ char *f = xasprintf("Proxy-Authorization: Bearer %s", ph);
        const struct netgate_http_head *h = head_with(f);
        cr_expect_eq(
            netgate_sentinels_cleartext_refused(&set, "git.example.test", 80, h, NULL, NULL), &one);
        cr_expect_null(netgate_sentinels_cleartext_refused(&set, "git.example.test", 80, h,
                                                           drop_proxy_auth, NULL));
        /* A route drops the client's Authorization (it injects its own). */
        struct netgate *g = gate_with(NULL);
        g->sentinels = set;
        char *lan[] = {"lan.test"};
        one.hosts = lan;
        one.n_hosts = 1;
        struct policy_route pr = {.name = "api", .upstream = "http://lan.test:8080"};
        struct netgate_route *rt = NULL;
        struct al_error err = {0};
        cr_assert_eq(netgate_route_new(&pr, &rt, &err), 0, "%s", err.msg);
        struct netgate_host lanh = host("lan.test");
        char rule[160], line[512];
        _cleanup_free_ char *a = xasprintf("Authorization: token %s", ph);
        cr_expect_not(netgate_cleartext_refused(g, rt, &lanh, 8080, head_with(a), rule,
                                                sizeof(rule), line, sizeof(line)));
        _cleanup_free_ char *x = xasprintf("X-Token: %s", ph);
        cr_expect(netgate_cleartext_refused(g, rt, &lanh, 8080, head_with(x), rule, sizeof(rule),
                                            line, sizeof(line)));
        cr_expect_str_eq(rule, "network.sentinels[GH_TOKEN].cleartext");
        /* Through the proxy, the same field goes out: refused. */
        cr_expect(netgate_cleartext_refused(g, NULL, &lanh, 8080, head_with(a), rule, sizeof(rule),
                                            line, sizeof(line)));
        netgate_route_free(rt);
        g->sentinels = (struct netgate_sentinels){0};
        netgate_free(g);
}
