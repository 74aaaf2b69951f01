/* SPDX-License-Identifier: Apache-2.0 */
/* The approvals model: asks held, decided, remembered, expired, bounded. */
#include <criterion/criterion.h>
#include <errno.h>
#include <string.h>

#include "supervisor/approvals.h"

#define SB "0123456789abcdef"

static uint64_t fake_now;
static uint64_t fake_mono(void)
{
        return fake_now;
}
static uint64_t fake_real(void)
{
        return 1795000000000ull + fake_now;
}

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

static struct approvals *mk(void)
{
        fake_now = 1000;
        if (!records)
                records = json_array();
        json_array_clear(records);
        struct approvals *a = approvals_new(SB, 30000, rec, NULL);
        approvals_set_clock(a, fake_mono, fake_real);
        return a;
}

static const struct approval_request net = {
    .kind = APPROVAL_NETWORK, .host = "example.com", .port = 443, .protocol = "connect"};
static const struct approval_request tool = {
    .kind = APPROVAL_TOOL, .tool = "deploy", .args_digest = "ab"};

static void idstr(uint64_t n, char *buf)
{
        snprintf(buf, 64, SB "-%llu", (unsigned long long)n);
}

Test(approvals, allow_once_is_not_remembered)
{
        struct approvals *a = mk();
        struct outcome o = {0};
        uint64_t n;
        char id[64];
        cr_assert_eq(approvals_ask(a, &net, done, &o, &n), 0);
        cr_assert_eq(approvals_pending(a), 1);
        json_t *l = approvals_list(a);
        cr_assert_eq(json_array_size(l), 1);
        json_t *e = json_array_get(l, 0);
        idstr(n, id);
        cr_assert_str_eq(json_string_value(json_object_get(e, "id")), id);
        cr_assert_str_eq(json_string_value(json_object_get(e, "sandbox")), SB);
        cr_assert_str_eq(json_string_value(json_object_get(e, "kind")), "network");
        cr_assert_str_eq(json_string_value(json_object_get(e, "host")), "example.com");
        cr_assert_eq(json_integer_value(json_object_get(e, "port")), 443);
        cr_assert_str_eq(json_string_value(json_object_get(e, "protocol")), "connect");
        cr_assert_not_null(json_object_get(e, "created"));
        cr_assert_not_null(json_object_get(e, "expires"));
        json_decref(l);
        cr_assert_eq(o.calls, 0, "held until decided");
        cr_assert_eq(approvals_decide(a, id, APPROVAL_ALLOW_ONCE, "cli:root", NULL), 0);
        cr_assert_eq(o.calls, 1);
        cr_assert(o.allow);
        cr_assert_eq(approvals_pending(a), 0);
        cr_assert_eq(approvals_remembered(a, &net), -ENOENT);
        cr_assert_eq(approvals_decide(a, id, APPROVAL_ALLOW_ONCE, "cli:root", NULL), -ENOENT,
                     "decided once only");
        cr_assert_eq(json_array_size(records), 2);
        cr_assert_str_eq(json_string_value(json_object_get(json_array_get(records, 0), "kind")),
                         "approval.requested");
        json_t *d = json_array_get(records, 1);
        cr_assert_str_eq(json_string_value(json_object_get(d, "kind")), "approval.decided");
        cr_assert_str_eq(json_string_value(json_object_get(d, "by")), "cli:root");
        cr_assert_str_eq(json_string_value(json_object_get(d, "decision")), "allow-once");
        approvals_free(a);
}

Test(approvals, sandbox_decisions_are_remembered_and_cover_waiting_asks)
{
        struct approvals *a = mk();
        struct outcome o1 = {0}, o2 = {0}, o3 = {0};
        uint64_t n1, n2, n3;
        char id[64];
        struct approval_request other = net;
        other.port = 8443;
        cr_assert_eq(approvals_ask(a, &net, done, &o1, &n1), 0);
        cr_assert_eq(approvals_ask(a, &net, done, &o2, &n2), 0);
        cr_assert_eq(approvals_ask(a, &other, done, &o3, &n3), 0);
        idstr(n1, id);
        cr_assert_eq(approvals_decide(a, id, APPROVAL_ALLOW_SANDBOX, "grant:ci", NULL), 0);
        cr_assert(o1.calls == 1 && o1.allow);
        cr_assert(o2.calls == 1 && o2.allow, "the same host and port no longer waits");
        cr_assert_eq(o3.calls, 0, "another port still does");
        cr_assert_eq(approvals_remembered(a, &net), 1);
        cr_assert_eq(approvals_remembered(a, &other), -ENOENT);
        idstr(n3, id);
        cr_assert_eq(approvals_decide(a, id, APPROVAL_DENY_SANDBOX, "grant:ci", NULL), 0);
        cr_assert(o3.calls == 1 && !o3.allow);
        cr_assert_str_eq(o3.reason, "ask_denied");
        cr_assert_eq(approvals_remembered(a, &other), 0);
        /* Tools are remembered by name. */
        struct outcome t = {0};
        uint64_t nt;
        cr_assert_eq(approvals_ask(a, &tool, done, &t, &nt), 0);
        idstr(nt, id);
        cr_assert_eq(approvals_decide(a, id, APPROVAL_DENY_SANDBOX, "terminal", NULL), 0);
        struct approval_request tool2 = tool;
        tool2.args_digest = "cd";
        cr_assert_eq(approvals_remembered(a, &tool2), 0);
        approvals_free(a);
}

Test(approvals, timeout_denies)
{
        struct approvals *a = mk();
        struct outcome o = {0};
        uint64_t n;
        cr_assert_eq(approvals_ask(a, &tool, done, &o, &n), 0);
        cr_assert_eq(approvals_next_deadline(a), 31000);
        fake_now = 30999;
        cr_assert_eq(approvals_expire(a), 0);
        cr_assert_eq(o.calls, 0);
        fake_now = 31000;
        cr_assert_eq(approvals_expire(a), 1);
        cr_assert(o.calls == 1 && !o.allow);
        cr_assert_str_eq(o.reason, "ask_timeout");
        cr_assert_eq(approvals_next_deadline(a), 0);
        json_t *d = json_array_get(records, 1);
        cr_assert_str_eq(json_string_value(json_object_get(d, "by")), "timeout");
        approvals_free(a);
}

Test(approvals, pending_is_bounded)
{
        struct approvals *a = mk();
        struct outcome o[APPROVALS_PENDING_MAX + 1] = {0};
        uint64_t n;
        for (int i = 0; i < APPROVALS_PENDING_MAX; i++)
                cr_assert_eq(approvals_ask(a, &net, done, &o[i], &n), 0);
        cr_assert_eq(approvals_ask(a, &net, done, &o[APPROVALS_PENDING_MAX], &n), -EBUSY);
        cr_assert_eq(approvals_pending(a), APPROVALS_PENDING_MAX);
        cr_assert_eq(json_array_size(records), APPROVALS_PENDING_MAX, "a refused ask is not held");
        approvals_free(a);
        for (int i = 0; i < APPROVALS_PENDING_MAX; i++)
                cr_assert(o[i].calls == 1 && !o[i].allow, "the end denies what waits");
        cr_assert_eq(o[APPROVALS_PENDING_MAX].calls, 0);
}

Test(approvals, cancel_and_bad_ids)
{
        struct approvals *a = mk();
        struct outcome o = {0};
        uint64_t n;
        char id[64];
        cr_assert_eq(approvals_ask(a, &net, done, &o, &n), 0);
        cr_assert_eq(approvals_decide(a, "ffffffffffffffff-1", APPROVAL_DENY, "x", NULL), -ENOENT);
        cr_assert_eq(approvals_decide(a, SB "-", APPROVAL_DENY, "x", NULL), -ENOENT);
        cr_assert_eq(approvals_decide(a, SB "-1x", APPROVAL_DENY, "x", NULL), -ENOENT);
        cr_assert_eq(approvals_decide(a, NULL, APPROVAL_DENY, "x", NULL), -ENOENT);
        idstr(n, id);
        cr_assert_eq(approvals_decide(a, id, APPROVAL_TIMEOUT, "x", NULL), -EINVAL);
        approvals_cancel(a, n);
        cr_assert_eq(o.calls, 0, "a canceled ask is not called back");
        cr_assert_eq(approvals_pending(a), 0);
        enum approval_decision d;
        cr_assert_eq(approvals_decision_parse("allow-sandbox", &d), 0);
        cr_assert_eq(d, APPROVAL_ALLOW_SANDBOX);
        cr_assert_eq(approvals_decision_parse("timeout", &d), -EINVAL);
        cr_assert_eq(approvals_decision_parse("allow", &d), -EINVAL);
        approvals_free(a);
}

Test(approvals, memory_is_bounded)
{
        struct approvals *a = mk();
        struct approval_request r = net;
        char host[64], id[64];
        for (int i = 0; i < APPROVALS_REMEMBERED_MAX + 4; i++) {
                struct outcome o = {0};
                uint64_t n;
                snprintf(host, sizeof(host), "h%d.example", i);
                r.host = host;
                cr_assert_eq(approvals_ask(a, &r, done, &o, &n), 0);
                idstr(n, id);
                cr_assert_eq(approvals_decide(a, id, APPROVAL_ALLOW_SANDBOX, "x", NULL), 0);
        }
        r.host = "h0.example";
        cr_assert_eq(approvals_remembered(a, &r), -ENOENT, "the oldest is forgotten");
        snprintf(host, sizeof(host), "h%d.example", APPROVALS_REMEMBERED_MAX + 3);
        r.host = host;
        cr_assert_eq(approvals_remembered(a, &r), 1);
        approvals_free(a);
}
