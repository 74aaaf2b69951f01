/* SPDX-License-Identifier: Apache-2.0 */
/* network.onUnlisted, tools.onUnlisted, ask.timeout, network.denyReasons. */
#include <criterion/criterion.h>
#include <string.h>

#include "policy-internal.h"
#include "policy-test-util.h"
#include "util.h"

static void load_bad(const char *json, const char *needle)
{
        struct policy *p = policy_new();
        struct al_error e = {0};
        int r = policy_load_string(p, json, "policy.json", &e);
        if (r >= 0)
                r = policy_finalize(p, "/base", "/home/u", &e);
        cr_assert_lt(r, 0, "%s must be refused", json);
        cr_assert_not_null(strstr(e.msg, needle), "message \"%s\" names \"%s\"", e.msg, needle);
        policy_free(p);
}

Test(policy_ask, defaults_deny)
{
        struct policy *p = finalize_ok("{}");
        cr_assert(!p->net_ask);
        cr_assert(!p->tools_ask);
        cr_assert_eq(p->ask_timeout_ms, 30000);
        _cleanup_free_ char *j = policy_to_json(p);
        cr_assert_null(strstr(j, "onUnlisted"), "defaults are not written: %s", j);
        policy_free(p);
}

Test(policy_ask, ask_is_read_and_written)
{
        struct policy *p = finalize_ok(
            "{\"network\": {\"onUnlisted\": \"ask\", \"denyReasons\": {\"*.corp.example\": "
            "\"internal hosts are off limits; ask #infra\"}}, \"tools\": {\"onUnlisted\": "
            "\"ask\"}, \"ask\": {\"timeout\": 5}}");
        cr_assert(p->net_ask);
        cr_assert(p->tools_ask);
        cr_assert_eq(p->ask_timeout_ms, 5000);
        cr_assert_str_eq(policy_deny_reason(p, "git.corp.example"),
                         "internal hosts are off limits; ask #infra");
        cr_assert_null(policy_deny_reason(p, "corp.example"), "strict subdomains only");
        cr_assert_null(policy_deny_reason(p, "xcorp.example"));
        _cleanup_free_ char *j = policy_to_json(p);
        struct policy *q = finalize_ok(j);
        cr_assert(q->net_ask && q->tools_ask && q->ask_timeout_ms == 5000);
        cr_assert_eq(q->n_net_deny_reasons, 1);
        struct policy *d = policy_dup(p);
        cr_assert_str_eq(policy_deny_reason(d, "a.corp.example"),
                         "internal hosts are off limits; ask #infra");
        policy_free(d);
        policy_free(q);
        policy_free(p);
}

Test(policy_ask, bad_values_are_named)
{
        load_bad("{\"network\": {\"onUnlisted\": \"allow\"}}", "network.onUnlisted");
        load_bad("{\"tools\": {\"onUnlisted\": true}}", "tools.onUnlisted");
        load_bad("{\"ask\": {\"timeout\": 0}}", "ask.timeout");
        load_bad("{\"ask\": {\"timeout\": 601}}", "ask.timeout");
        load_bad("{\"ask\": {\"timout\": 5}}", "ask.timout");
        load_bad("{\"network\": {\"denyReasons\": {\"http://x\": \"t\"}}}", "network.denyReasons");
        load_bad("{\"network\": {\"denyReasons\": {\"x.example\": \"a\\nb\"}}}",
                 "network.denyReasons.x.example");
        load_bad("{\"network\": {\"denyReasons\": {\"x.example\": \"\"}}}",
                 "network.denyReasons.x.example");
        load_bad("{\"network\": {\"denyReasons\": [\"x\"]}}", "network.denyReasons");
        load_bad("{\"network\": {\"mode\": \"none\", \"onUnlisted\": \"ask\"}}",
                 "network.onUnlisted");
}

Test(policy_ask, ask_turns_the_gate_on)
{
        struct policy *p = finalize_ok("{\"network\": {\"onUnlisted\": \"ask\"}}");
        cr_assert_eq(p->net_mode, POLICY_NET_GATED);
        policy_free(p);
}
