/* SPDX-License-Identifier: Apache-2.0 */
#pragma once

#include <jansson.h>
#include <stdbool.h>
#include <stdint.h>

#include "error.h"

/* The tool gateway: the one place a sandbox asks the host to act. It serves
 * JSON lines on a unix socket the sandbox's pid 1 bound inside (the way the
 * network gate's listeners are made) and answers each call after checking,
 * in order: the run id, the policy's tools.allow, the tool's argument
 * schema (clamping numbers as the tool says), the per-tool and per-sandbox
 * rate limits and the concurrency caps. It then runs the tool (a built-in,
 * a host command from an argv template with a clean environment, or an
 * HTTP request through one of the network gate's routes) with a timeout
 * that kills its whole process tree and a cap on its output, scrubs every
 * secret value from what goes back, and records one tool.call for every
 * call, allowed or refused. Protocol: docs/tools.md.
 *
 * Request:  {"runId": s, "callId": s, "tool": s, "args": {...}}
 *           {"runId": s, "callId": s, "op": "list"}  (the allowed tools)
 * Response: {"callId": s, "ok": true, "value": any}
 *           {"callId": s, "ok": false, "errorCode": s, "safeMessage": s}
 * errorCode: policy_denied, bad_args, rate_limited, timeout, tool_failed,
 * run_mismatch, internal. */

struct event_base;
struct netgate;
struct policy;
struct secrets;
struct toolgate;

#define TOOLGATE_LINE_MAX        (1u << 20) /* one request line */
#define TOOLGATE_PENDING_MAX     64         /* calls waiting or running, per connection */
#define TOOLGATE_CONNECTIONS_MAX 64         /* open connections, per sandbox */

/* One per call, allowed or refused; strings valid during the call only. */
struct toolgate_record {
        const char *sandbox;
        const char *call_id;     /* escaped when it was not a short string */
        const char *tool;        /* escaped raw bytes when refused as unknown */
        const json_t *args;      /* secrets redacted; NULL when unparseable */
        const char *args_digest; /* sha256 hex of the canonical args */
        const char *decision;    /* "allow" or "deny" */
        const char *rule;        /* what decided: "tools.allow", "schema", "rate", ... */
        const char *error_code;  /* NULL when the call succeeded */
        const json_t *clamps;    /* [{"arg", "from", "to"}], NULL when none */
        uint64_t duration_ms;
        uint64_t output_bytes;
        int exit_status; /* COMMAND: the wait status, -1 otherwise */
        /* Refusals are aggregated: the first 8 of a kind (tool, errorCode,
         * rule) in a window of 1 s are recorded one by one with count 0, the
         * rest counted and recorded as one record with count = how many it
         * stands for when the window ends. */
        uint64_t count;
        /* The call's number in this gateway (from 1), given when its
         * tool.started record is asked for; 0 for a record of a request
         * that never started. What names a call under way: callId is the
         * sandbox's and need not be unique. */
        uint64_t seq;
};

/* The audit event's fields for a record (kind "tool.call"). */
json_t *toolgate_record_json(const struct toolgate_record *rec);
/* The fields of the record written before the tool starts (kind
 * "tool.started"): the call, its arguments and the rule; no outcome. */
json_t *toolgate_started_json(const struct toolgate_record *rec);

/* Asking the operator (tools.onUnlisted "ask"): a call of a tool the host
 * defines but tools.allow does not name is held (its schema checked first)
 * and the asker decides it. */
enum toolgate_ask_answer {
        TOOLGATE_ASK_ALLOW, /* decided already (remembered) */
        TOOLGATE_ASK_DENY,  /* decided already, or refused: *ret_reason */
        TOOLGATE_ASK_HELD,  /* `done` follows, unless canceled first */
};

struct toolgate_asker {
        enum toolgate_ask_answer (*ask)(void *ud, const char *tool, const char *args_digest,
                                        void (*done)(void *call, bool allow, const char *reason),
                                        void *call, uint64_t *ret_token, const char **ret_reason);
        /* The call went away while held: `done` must not be called. */
        void (*cancel)(void *ud, uint64_t token);
        void *ud;
};

struct toolgate_config {
        const struct policy *policy; /* outlives the gateway */
        const char *sandbox;         /* the sandbox's id */
        const char *run_id;          /* host-generated; a request with another is run_mismatch */
        struct secrets *secrets;     /* ${secret:...} in tool env and routes; may be NULL */
        const char *account;
        struct netgate *netgate; /* for HTTP tools; may be NULL (they then fail: internal) */
        void (*recorder)(void *ud, const struct toolgate_record *rec);
        /* Called with ud just before an allowed call's tool starts, with
         * the call's record as far as it is known (kind "tool.started"):
         * below 0, the record is not on the audit log and the tool is not
         * run (the call ends audit_failed). NULL: nothing is recorded
         * ahead. */
        int (*ahead)(void *ud, const struct toolgate_record *rec);
        void *ud;
        /* Whether the sandbox may call a tool now (the supervisor's live
         * capabilities, caps.h); NULL: the policy's tools.allow. */
        bool (*allowed)(void *ud, const char *name);
        void *allowed_ud;
        /* The hardware gate (hwgate.h): its hw.* calls go to it, past
         * tools.allow and the tool buckets (it has its own rate, and a stop
         * is never limited). NULL: none; outlives the gateway. */
        struct hwgate *hw;
        const struct toolgate_asker *asker; /* NULL: unlisted tools are refused */
};

/* NULL with err set on failure. The gateway runs on `base`. */
struct toolgate *toolgate_new(struct event_base *base, const struct toolgate_config *cfg,
                              struct al_error *err);
/* Serve a listening unix socket (taken over, closed by toolgate_free). */
int toolgate_add_listener(struct toolgate *t, int fd, struct al_error *err);
/* The live capabilities changed (config `allowed`): calls of a tool no
 * longer allowed that run now are stopped and refused (policy_denied);
 * those that wait were to be checked when they start anyway. */
void toolgate_recheck(struct toolgate *t);
/* Stop: close connections, kill every running tool's process tree, reap it.
 * The recorder is still called from here (the killed calls, with rule
 * "shutdown", and the refusals counted in the last window): keep the audit
 * log open until this returns. */
void toolgate_free(struct toolgate *t);

/* The allowed tools as the sandbox sees them (`airlock-tool ls`, MCP
 * tools/list, GET /v1/sandboxes/{id}/tools): [{"name", "description",
 * "inputSchema"}]. */
json_t *toolgate_list(const struct policy *p);
/* The same, with `allowed` deciding instead of tools.allow (NULL: it). */
json_t *toolgate_list_with(const struct policy *p, bool (*allowed)(void *ud, const char *name),
                           void *ud);

/* Whether a sandbox with this policy gets a gateway endpoint at all: when
 * its tools.allow names a tool, or it has a hardware section. */
int toolgate_wanted(const struct policy *p);
