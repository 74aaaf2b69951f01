/* SPDX-License-Identifier: Apache-2.0 */
/* The policy keys that let a secret into plain HTTP (a sentinel's and a
 * route's "cleartext") and hand the parent proxy names
 * (network.parentProxySendNames): loaded, checked with a message naming
 * the key, and written back. */
#include <criterion/criterion.h>
#include <errno.h>
#include <string.h>

#include "policy.h"
#include "policy/policy-internal.h"
#include "util.h"

static struct policy *load(const char *json, int want, char *msg, size_t size)
{
        struct policy *p = policy_new();
        struct al_error e = {0};
        int r = policy_load_string(p, json, "policy.json", &e);
        cr_assert_eq(r, want, "loading %s: got %d (%s)", json, r, e.msg);
        size_t n = strnlen(e.msg, sizeof(e.msg));
        n = n < size - 1 ? n : size - 1;
        memcpy(msg, e.msg, n);
        msg[n] = '\0';
        return p;
}

#define SENTINEL(extra)                                                                            \
        "{\"network\": {\"sentinels\": [{\"env\": \"GH\", \"secret\": \"GH\", \"hosts\": "         \
        "[\"git.test\"]" extra "}]}}"

Test(policy_cleartext, sentinel_cleartext_forms)
{
        char msg[512];
        struct policy *p = load(SENTINEL(", \"cleartext\": true"), 0, msg, sizeof(msg));
        cr_expect(p->sentinels[0].cleartext);
        _cleanup_free_ char *j = policy_to_json(p);
        cr_expect(strstr(j, "\"cleartext\":true") != NULL, "%s", j);
        policy_free(p);

        p = load(SENTINEL(", \"cleartext\": [\"git.test:8080\", \"*.git.test:80\"]"), 0, msg,
                 sizeof(msg));
        cr_expect_not(p->sentinels[0].cleartext);
        cr_assert_eq(p->sentinels[0].n_cleartext_at, 2);
        cr_expect_str_eq(p->sentinels[0].cleartext_at[1], "*.git.test:80");
        struct policy *d = policy_dup(p);
        cr_expect_str_eq(d->sentinels[0].cleartext_at[0], "git.test:8080");
        policy_free(d);
        _cleanup_free_ char *k = policy_to_json(p);
        cr_expect(strstr(k, "git.test:8080") != NULL, "%s", k);
        policy_free(p);

        p = load(SENTINEL(""), 0, msg, sizeof(msg));
        cr_expect_not(p->sentinels[0].cleartext);
        cr_expect_eq(p->sentinels[0].n_cleartext_at, 0);
        policy_free(p);
}

Test(policy_cleartext, bad_sentinel_cleartext_is_refused)
{
        char msg[512];
        policy_free(load(SENTINEL(", \"cleartext\": [\"git.test\"]"), -EINVAL, msg, sizeof(msg)));
        cr_expect(strstr(msg, "network.sentinels[0].cleartext[0]") && strstr(msg, "HOST:PORT"),
                  "%s", msg);
        policy_free(load(SENTINEL(", \"cleartext\": [\"git.test:0\"]"), -EINVAL, msg, sizeof(msg)));
        policy_free(load(SENTINEL(", \"cleartext\": \"yes\""), -EINVAL, msg, sizeof(msg)));
        cr_expect(strstr(msg, "cleartext") != NULL, "%s", msg);
}

Test(policy_cleartext, route_cleartext)
{
        char msg[512];
        struct policy *p = load("{\"network\": {\"routes\": [{\"name\": \"m\", \"upstream\": "
                                "\"http://m.test\", \"cleartext\": true}]}}",
                                0, msg, sizeof(msg));
        cr_expect(p->routes[0].cleartext);
        _cleanup_free_ char *j = policy_to_json(p);
        cr_expect(strstr(j, "\"cleartext\":true") != NULL, "%s", j);
        policy_free(p);
        policy_free(load("{\"network\": {\"routes\": [{\"name\": \"m\", \"upstream\": "
                         "\"http://m.test\", \"cleartext\": 1}]}}",
                         -EINVAL, msg, sizeof(msg)));
}

Test(policy_cleartext, parent_send_names)
{
        char msg[512];
        struct policy *p = load("{\"network\": {\"allow\": [\"a.test\"], \"parentProxy\": "
                                "\"http://127.0.0.1:3128\", \"parentProxySendNames\": true}}",
                                0, msg, sizeof(msg));
        cr_expect(p->net_parent_send_names);
        _cleanup_free_ char *j = policy_to_json(p);
        cr_expect(strstr(j, "\"parentProxySendNames\":true") != NULL, "%s", j);
        policy_free(p);
        policy_free(load("{\"network\": {\"allow\": [\"a.test\"], \"parentProxySendNames\": true}}",
                         -EINVAL, msg, sizeof(msg)));
        cr_expect(strstr(msg, "parentProxySendNames") && strstr(msg, "parentProxy\""), "%s", msg);
}
