/* SPDX-License-Identifier: Apache-2.0 */
#pragma once

#include <jansson.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

/* One sandbox's approvals (docs/internals/approvals.md): the asks its gates
 * hold for the operator (network.onUnlisted / tools.onUnlisted "ask"), and
 * the decisions remembered for the sandbox (allow-sandbox, deny-sandbox).
 * Pure state: no I/O and no event loop; the owner drives the clock and the
 * timeouts (approvals_expire) and records what it is handed. */

#define APPROVALS_PENDING_MAX    16  /* asks waiting, per sandbox */
#define APPROVALS_REMEMBERED_MAX 256 /* remembered decisions, per sandbox */
#define APPROVALS_ID_MAX         48  /* "<sandbox>-<n>" and its NUL */

enum approval_kind {
        APPROVAL_NETWORK,
        APPROVAL_TOOL,
};

enum approval_decision {
        APPROVAL_ALLOW_ONCE,
        APPROVAL_ALLOW_SANDBOX,
        APPROVAL_DENY,
        APPROVAL_DENY_SANDBOX,
        APPROVAL_TIMEOUT, /* not an operator's: the ask expired */
};

/* What is asked; strings are copied. */
struct approval_request {
        enum approval_kind kind;
        const char *host; /* network: canonical host, port, "http"|"connect"|"socks5" */
        uint16_t port;
        const char *protocol;
        const char *tool; /* tool: its name and the sha256 hex of its canonical args */
        const char *args_digest;
};

/* How an ask ended, once: `allow`, and the refusal's reason when not
 * ("ask_denied", "ask_timeout", "ask_shutdown"). */
typedef void (*approval_done_fn)(void *ud, bool allow, const char *reason);

/* The audit events, the fields taken over by the callee:
 * "approval.requested" {"id", "request": the approval as listed, without
 * "sandbox"}; "approval.decided" {"id", "decision", "by", "request",
 * "reason" when denied}. */
/* Below 0: the line is not on the log; a decision that is not recorded
 * takes no effect (the ask ends denied, "audit_failed"). */
typedef int (*approvals_record_fn)(void *ud, const char *kind, json_t *fields);

/* The request decided again on the rules in force now, when an operator
 * allows it: NULL when the allow may stand, else the reason the rules
 * refuse it now, their rule's text copied to `rule` (may be empty). */
typedef const char *(*approvals_check_fn)(void *ud, const struct approval_request *req, char *rule,
                                          size_t rule_size);

struct approvals;

/* timeout_ms: how long an ask waits. `record` may be NULL. */
struct approvals *approvals_new(const char *sandbox, uint64_t timeout_ms,
                                approvals_record_fn record, void *ud);
/* Every ask still held ends denied ("ask_shutdown", by "shutdown"). */
struct approvals *approvals_free(struct approvals *a);

/* For tests: the clocks in ms (monotonic for the timeouts, realtime for
 * "created" and "expires"). NULL: the system's. */
void approvals_set_clock(struct approvals *a, uint64_t (*monotonic_ms)(void),
                         uint64_t (*realtime_ms)(void));

/* Re-decide each allowed ask through `check` before it takes effect
 * (approvals_decide). NULL: none. */
void approvals_set_check(struct approvals *a, approvals_check_fn check, void *ud);

/* A decision remembered for this sandbox: 1 allow, 0 deny, -ENOENT none.
 * Network: the same host and port; tool: the same tool. */
int approvals_remembered(const struct approvals *a, const struct approval_request *req);

/* Hold an ask: recorded (approval.requested), listed, decided by
 * approvals_decide() or approvals_expire(); `done` is called then, and
 * only then. -EBUSY when APPROVALS_PENDING_MAX are already waiting (nothing
 * held, nothing recorded: the caller refuses with "ask_pending_limit").
 * *ret_id is the id, for approvals_cancel(). */
int approvals_ask(struct approvals *a, const struct approval_request *req, approval_done_fn done,
                  void *ud, uint64_t *ret_id);

/* The requester left (its connection closed): forget the ask, no callback;
 * recorded as decided by "canceled". Unknown ids are ignored. */
void approvals_cancel(struct approvals *a, uint64_t id);

/* Decide the ask with this full id ("<sandbox>-<n>"), `by` who (recorded).
 * Calls its `done`. Remembers allow-sandbox and deny-sandbox (the oldest
 * remembered is forgotten past APPROVALS_REMEMBERED_MAX). *ret (may be
 * NULL) gets the approval as listed, with "decision" and "decidedBy".
 * -ENOENT: no such ask pending; -EINVAL: TIMEOUT is not a decision; -EIO:
 * the decision could not be recorded, so the ask ended denied
 * ("audit_failed") and nothing was remembered. Every other ask the new
 * memory covers is decided with it. An allow the check (approvals_set_check)
 * refuses ends the ask denied with the check's reason, recorded and
 * returned with "refused": {"reason", "rule"}, and remembers nothing. */
int approvals_decide(struct approvals *a, const char *id, enum approval_decision d, const char *by,
                     json_t **ret);

/* Deny every ask past its deadline (by "timeout"); how many. */
unsigned approvals_expire(struct approvals *a);
/* The earliest deadline (monotonic ms), 0 when nothing waits. */
uint64_t approvals_next_deadline(const struct approvals *a);
unsigned approvals_pending(const struct approvals *a);

/* [approval…], oldest first (docs/api.md, "Approvals"). */
json_t *approvals_list(const struct approvals *a);

/* "allow-once", "allow-sandbox", "deny", "deny-sandbox" <-> the enum;
 * -EINVAL for anything else (TIMEOUT is not parsed). */
int approvals_decision_parse(const char *s, enum approval_decision *ret);
const char *approvals_decision_name(enum approval_decision d);
