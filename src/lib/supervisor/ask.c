/* SPDX-License-Identifier: Apache-2.0 */
/* The supervisor core's side of asking the operator: the approvals
 * (approvals.h) wired to the network gate and the tool gateway, their
 * timeouts on the core's loop, and their audit events
 * (docs/internals/approvals.md). */
#include <errno.h>
#include <event2/event.h>
#include <string.h>

#include "approvals.h"
#include "core.h"
#include "netgate/netgate.h"
#include "toolgate/toolgate.h"
#include "util.h"

static void rearm(struct sv_core *c)
{
        if (!c->ev_ask)
                return;
        uint64_t next = approvals_next_deadline(c->approvals);
        if (!next) {
                evtimer_del(c->ev_ask);
                return;
        }
        uint64_t now = now_monotonic_us() / 1000;
        uint64_t wait = next > now ? next - now : 0;
        struct timeval tv = {.tv_sec = (time_t)(wait / 1000),
                             .tv_usec = (suseconds_t)((wait % 1000) * 1000)};
        evtimer_add(c->ev_ask, &tv);
}

static void on_timer(evutil_socket_t fd, short what, void *arg)
{
        struct sv_core *c = arg;
        approvals_expire(c->approvals);
        rearm(c);
}

static int on_record(void *ud, const char *kind, json_t *fields)
{
        struct sv_core *c = ud;
        if (c->on_ask && STREQ(kind, "approval.requested"))
                c->on_ask(c->on_ask_ud, fields);
        return sv_core_record(c, kind, fields);
}

/* An operator's allow meets the rules in force now: a network deny rule
 * granted while the request waited refuses it. A tool ask has nothing to
 * decide again: tools have no deny list, and what made the call askable
 * (tools.onUnlisted, the tool's definition) does not change while the
 * sandbox runs. */
static const char *recheck(void *ud, const struct approval_request *r, char *rule, size_t rule_size)
{
        struct sv_core *c = ud;
        if (r->kind != APPROVAL_NETWORK)
                return NULL;
        if (!c->gate)
                return "ask_shutdown";
        return netgate_ask_recheck(c->gate, r->host, r->port, rule, rule_size);
}

void sv_core_asks_begin(struct sv_core *c)
{
        if (c->approvals)
                return;
        c->approvals = approvals_new(c->id, c->policy->ask_timeout_ms, on_record, c);
        approvals_set_check(c->approvals, recheck, c);
        c->ev_ask = evtimer_new(c->base, on_timer, c);
}

void sv_core_asks_end(struct sv_core *c)
{
        if (c->ev_ask)
                event_free(c->ev_ask);
        c->ev_ask = NULL;
        c->approvals = approvals_free(c->approvals);
}

/* 1 held, 0 allowed now, -1 denied now (*reason). */
static int ask(struct sv_core *c, const struct approval_request *r, approval_done_fn done, void *ud,
               uint64_t *token, const char **reason)
{
        int m = approvals_remembered(c->approvals, r);
        if (m == 1)
                return 0;
        if (m == 0) {
                *reason = "ask_denied";
                return -1;
        }
        if (approvals_ask(c->approvals, r, done, ud, token) < 0) {
                *reason = "ask_pending_limit";
                return -1;
        }
        rearm(c);
        return 1;
}

static enum netgate_ask_answer net_ask(void *ud, const struct netgate_ask *q,
                                       netgate_ask_done_fn done, void *conn, uint64_t *token,
                                       const char **reason)
{
        struct approval_request r = {
            .kind = APPROVAL_NETWORK, .host = q->host, .port = q->port, .protocol = q->protocol};
        int k = ask(ud, &r, done, conn, token, reason);
        return k > 0 ? NETGATE_ASK_HELD : k == 0 ? NETGATE_ASK_ALLOW : NETGATE_ASK_DENY;
}

static enum toolgate_ask_answer tool_ask(void *ud, const char *tool, const char *digest,
                                         void (*done)(void *call, bool allow, const char *reason),
                                         void *call, uint64_t *token, const char **reason)
{
        struct approval_request r = {.kind = APPROVAL_TOOL, .tool = tool, .args_digest = digest};
        int k = ask(ud, &r, done, call, token, reason);
        return k > 0 ? TOOLGATE_ASK_HELD : k == 0 ? TOOLGATE_ASK_ALLOW : TOOLGATE_ASK_DENY;
}

static void cancel(void *ud, uint64_t token)
{
        struct sv_core *c = ud;
        approvals_cancel(c->approvals, token);
        rearm(c);
}

const struct netgate_asker *sv_core_net_asker(struct sv_core *c)
{
        static struct netgate_asker a;
        a = (struct netgate_asker){.ask = net_ask, .cancel = cancel, .ud = c};
        return &a;
}

const struct toolgate_asker *sv_core_tool_asker(struct sv_core *c)
{
        static struct toolgate_asker a;
        a = (struct toolgate_asker){.ask = tool_ask, .cancel = cancel, .ud = c};
        return &a;
}

json_t *sv_core_approvals_list(struct sv_core *c)
{
        return c->approvals ? approvals_list(c->approvals) : json_array();
}

int sv_core_approvals_decide(struct sv_core *c, const char *id, const char *decision,
                             const char *by, json_t **ret)
{
        enum approval_decision d;
        if (approvals_decision_parse(decision, &d) < 0)
                return -EINVAL;
        if (!c->approvals)
                return -ENOENT;
        int r = approvals_decide(c->approvals, id, d, by, ret);
        rearm(c);
        return r;
}
