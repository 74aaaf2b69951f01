/* SPDX-License-Identifier: Apache-2.0 */
/* An operator's allow meets the rules in force when it is given
 * (approvals_set_check): what they refuse now ends the ask denied, is
 * recorded and answered as refused, and is not remembered. */
#include <criterion/criterion.h>
#include <errno.h>
#include <stdio.h>
#include <string.h>

#include "supervisor/approvals.h"

#define SB "0123456789abcdef"

struct outcome {
        int calls;
        bool allow;
        const char *reason;
};

static void done(void *ud, bool allow, const char *reason)
{
        struct outcome *o = ud;
        o->calls++;
        o->allow = allow;
        o->reason = reason;
}

static json_t *records;
static int rec(void *ud, const char *kind, json_t *fields)
{
        json_object_set_new(fields, "kind", json_string(kind));
        json_array_append_new(records, fields);
        return 0;
}

/* The "rules": a host named here is denied by a rule now. */
static const char *denied_host;
static int checks;
static const char *check(void *ud, const struct approval_request *r, char *rule, size_t size)
{
        checks++;
        if (r->kind == APPROVAL_NETWORK && denied_host && strcmp(r->host, denied_host) == 0) {
                snprintf(rule, size, "%s", denied_host);
                return "denied_by_rule";
        }
        return NULL;
}

static struct approvals *mk(void)
{
        records = records ? records : json_array();
        json_array_clear(records);
        denied_host = NULL;
        checks = 0;
        struct approvals *a = approvals_new(SB, 30000, rec, NULL);
        approvals_set_check(a, check, NULL);
        return a;
}

static const struct approval_request net = {
    .kind = APPROVAL_NETWORK, .host = "example.com", .port = 443, .protocol = "connect"};

static void idstr(uint64_t n, char *buf)
{
        snprintf(buf, APPROVALS_ID_MAX, SB "-%llu", (unsigned long long)n);
}

static const json_t *last_decided(void)
{
        const json_t *d = NULL;
        size_t i;
        json_t *v;
        json_array_foreach(records, i, v) if (strcmp(json_string_value(json_object_get(v, "kind")),
                                                     "approval.decided") == 0) d = v;
        return d;
}

Test(approvals_recheck, allow_once_refused_by_a_rule_added_while_held)
{
        struct approvals *a = mk();
        struct outcome o = {0};
        uint64_t n;
        char id[APPROVALS_ID_MAX];
        cr_assert_eq(approvals_ask(a, &net, done, &o, &n), 0);
        idstr(n, id);
        denied_host = "example.com"; /* a deny rule granted while it waited */
        json_t *ret = NULL;
        cr_assert_eq(approvals_decide(a, id, APPROVAL_ALLOW_ONCE, "ops", &ret), 0);
        cr_assert_eq(o.calls, 1);
        cr_assert(!o.allow, "an allow the rules now refuse must not let the request through");
        cr_assert_str_eq(o.reason, "denied_by_rule");
        const json_t *refused = json_object_get(ret, "refused");
        cr_assert_str_eq(json_string_value(json_object_get(refused, "reason")), "denied_by_rule");
        cr_assert_str_eq(json_string_value(json_object_get(refused, "rule")), "example.com");
        cr_assert_str_eq(json_string_value(json_object_get(ret, "decision")), "allow-once");
        const json_t *d = last_decided();
        cr_assert(d);
        cr_assert_str_eq(json_string_value(json_object_get(d, "reason")), "denied_by_rule");
        cr_assert_str_eq(json_string_value(json_object_get(json_object_get(d, "refused"), "rule")),
                         "example.com");
        json_decref(ret);
        approvals_free(a);
}

Test(approvals_recheck, refused_allow_sandbox_is_not_remembered)
{
        struct approvals *a = mk();
        struct outcome o1 = {0}, o2 = {0};
        uint64_t n1, n2;
        char id[APPROVALS_ID_MAX];
        cr_assert_eq(approvals_ask(a, &net, done, &o1, &n1), 0);
        cr_assert_eq(approvals_ask(a, &net, done, &o2, &n2), 0);
        denied_host = "example.com";
        idstr(n1, id);
        cr_assert_eq(approvals_decide(a, id, APPROVAL_ALLOW_SANDBOX, "ops", NULL), 0);
        cr_assert(o1.calls == 1 && !o1.allow);
        cr_assert_eq(approvals_remembered(a, &net), -ENOENT);
        /* The other ask waits on: nothing remembered decided it. */
        cr_assert_eq(o2.calls, 0);
        cr_assert_eq(approvals_pending(a), 1);
        approvals_free(a);
}

Test(approvals_recheck, denials_and_allowed_requests_are_unchanged)
{
        struct approvals *a = mk();
        struct outcome o1 = {0}, o2 = {0};
        uint64_t n1, n2;
        char id[APPROVALS_ID_MAX];
        cr_assert_eq(approvals_ask(a, &net, done, &o1, &n1), 0);
        cr_assert_eq(approvals_ask(a, &net, done, &o2, &n2), 0);
        idstr(n1, id);
        cr_assert_eq(approvals_decide(a, id, APPROVAL_DENY, "ops", NULL), 0);
        cr_assert_eq(checks, 0, "a denial needs no check");
        cr_assert(o1.calls == 1 && !o1.allow && strcmp(o1.reason, "ask_denied") == 0);
        idstr(n2, id);
        json_t *ret = NULL;
        cr_assert_eq(approvals_decide(a, id, APPROVAL_ALLOW_SANDBOX, "ops", &ret), 0);
        cr_assert_eq(checks, 1);
        cr_assert(o2.calls == 1 && o2.allow);
        cr_assert_null(json_object_get(ret, "refused"));
        cr_assert_eq(approvals_remembered(a, &net), 1);
        json_decref(ret);
        approvals_free(a);
}
