/* SPDX-License-Identifier: Apache-2.0 */
/* An operator's "allow" takes effect only once it is on the audit log: a
 * decision whose approval.decided line cannot be written (the audit disk
 * full) lets nothing through, remembers nothing, and is reported to the
 * decider as failed. Before, the held connection or tool call went ahead
 * with no line naming who allowed it. */
#include <criterion/criterion.h>
#include <errno.h>
#include <string.h>

#include "supervisor/approvals.h"
#include "util.h"

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

static bool disk_full;

static int rec(void *ud, const char *kind, json_t *fields)
{
        json_decref(fields);
        return disk_full && STREQ(kind, "approval.decided") ? -ENOSPC : 0;
}

static const struct approval_request net = {
    .kind = APPROVAL_NETWORK, .host = "example.com", .port = 443, .protocol = "connect"};

static void decide_unrecorded(enum approval_decision d)
{
        disk_full = false;
        struct approvals *a = approvals_new(SB, 30000, rec, NULL);
        struct outcome o = {0}, o2 = {0};
        uint64_t n, n2;
        char id[64];
        cr_assert_eq(approvals_ask(a, &net, done, &o, &n), 0);
        cr_assert_eq(approvals_ask(a, &net, done, &o2, &n2), 0);
        snprintf(id, sizeof(id), SB "-%llu", (unsigned long long)n);
        disk_full = true;
        json_t *ret = NULL;
        int r = approvals_decide(a, id, d, "grant:ops", &ret);
        cr_assert_eq(o.calls, 1, "the ask was not ended");
        cr_assert_not(o.allow, "an allow with no audit line let the request through");
        cr_assert_str_eq(o.reason, "audit_failed");
        cr_assert_lt(r, 0, "the decider was told the unrecorded decision took effect");
        cr_assert_null(ret);
        cr_assert_eq(approvals_remembered(a, &net), -ENOENT, "an unrecorded decision remembered");
        cr_assert_not(o2.calls && o2.allow, "another ask was allowed by an unrecorded decision");
        disk_full = false;
        approvals_free(a);
}

Test(approvals_audit, allow_once_unrecorded_lets_nothing_through)
{
        decide_unrecorded(APPROVAL_ALLOW_ONCE);
}

Test(approvals_audit, allow_sandbox_unrecorded_lets_nothing_through)
{
        decide_unrecorded(APPROVAL_ALLOW_SANDBOX);
}
