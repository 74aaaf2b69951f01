/* SPDX-License-Identifier: Apache-2.0 */
#pragma once

/* Shared by the tool gateway's files: the server (toolgate.c), the protocol
 * (proto.c), the records (record.c), the built-ins (builtin.c) and the
 * runners (runner-cmd.c, runner-http.c). Nothing outside src/lib/toolgate
 * includes it. */
#include <event2/util.h>
#include <jansson.h>
#include <stdbool.h>
#include <stdint.h>

#include "toolgate.h"

struct event;
struct policy_tool;
struct redactor;
struct tg_conn;
struct tg_hwcall;

#define TOOLGATE_DEPTH_MAX            32  /* nesting of one request */
#define TOOLGATE_CALL_ID_MAX          128 /* bytes of a callId */
#define TOOLGATE_TOOL_NAME_MAX        128
#define TOOLGATE_SANDBOX_RATE_PER_MIN 600 /* every tool together, one sandbox */
#define TOOLGATE_REFUSAL_WINDOW_MS    1000
#define TOOLGATE_REFUSAL_SINGLES      8   /* recorded one by one per kind and window */
#define TOOLGATE_REFUSAL_KINDS        64  /* kinds tracked; more share one */
#define TOOLGATE_MESSAGE_MAX          256 /* bytes of a safeMessage */
/* What a tool.call record keeps of the arguments (their JSON, non-ASCII
 * escaped) and of the clamps; past it, their size and count. */
#define TOOLGATE_RECORD_ARGS_MAX    (64u << 10) /* a call that ran */
#define TOOLGATE_RECORD_REFUSED_MAX (4u << 10)  /* a refusal */
#define TOOLGATE_RECORD_CLAMPS_MAX  32
/* Bytes the gateway holds for one sandbox: the requests of calls waiting or
 * running, and answers not yet read. Past it, new calls are rate_limited. */
#define TOOLGATE_HELD_MAX (64u << 20)
/* Unread answers before a connection stops being read: a share of the
 * sandbox's bound, so that all its connections together (an "op": "list"
 * or a refusal is answered without a call) stay near TOOLGATE_HELD_MAX. */
#define TOOLGATE_OUT_HIGH (TOOLGATE_HELD_MAX / TOOLGATE_CONNECTIONS_MAX)

/* proto.c: one request line, parsed. Everything in it is hostile. */
struct toolgate_request {
        json_t *doc;         /* owns what the pointers below point into */
        const char *run_id;  /* NULL: absent or not a string */
        const char *call_id; /* NULL: absent or not a short printable string */
        bool list;           /* "op": "list" */
        const char *tool;    /* NULL for op list */
        json_t *args;        /* borrowed from doc; NULL: none given */
};

/* 0, or -EINVAL with *ret_why (a static string) and whatever fields could
 * be read (call_id, run_id) filled for the answer. */
int toolgate_proto_parse(const char *line, size_t len, struct toolgate_request *ret,
                         const char **ret_why);
void toolgate_request_clear(struct toolgate_request *req);
/* A response line ending in '\n'; malloc'd. value is borrowed. */
char *toolgate_proto_ok(const char *call_id, const json_t *value, size_t *ret_len);
char *toolgate_proto_error(const char *call_id, const char *code, const char *message,
                           size_t *ret_len);
/* Printable, quote-free, at most size-1 bytes: for a name echoed in a
 * message or a record. */
const char *toolgate_escape(const char *s, char *buf, size_t size);

struct tg_bucket {
        double tokens;
        double per_ms; /* refill */
        double cap;
        uint64_t last_ms;
};

/* One per policy tool: its rate bucket, what runs and what waits. */
struct tg_tool {
        const struct policy_tool *def;
        struct tg_bucket bucket;
        unsigned running;
        struct tg_call *queue_head, *queue_tail;
};

struct tg_refusal_kind {
        char tool[TOOLGATE_TOOL_NAME_MAX + 1];
        const char *error_code; /* static */
        const char *rule;       /* static */
        unsigned singles;
        uint64_t count;
        bool seen;
};

struct toolgate {
        struct event_base *base;
        uint64_t last_seq; /* the last call's toolgate_record.seq */
        const struct policy *policy;
        bool (*allowed)(void *ud, const char *name); /* NULL: tools.allow */
        void *allowed_ud;
        char *sandbox, *run_id, *account;
        struct secrets *secrets; /* the config's, else own_secrets */
        struct secrets *own_secrets;
        struct netgate *netgate;
        void (*recorder)(void *ud, const struct toolgate_record *rec);
        int (*ahead)(void *ud, const struct toolgate_record *rec); /* NULL: none */
        void *ud;

        struct event *listeners[8];
        int listen_fds[8];
        size_t n_listeners;
        struct tg_conn *conns;
        unsigned n_conns;

        struct tg_tool *tools;
        size_t n_tools;
        struct tg_bucket sandbox_bucket;
        struct tg_call *running; /* started calls, linked by next_running */
        size_t requests_held;    /* request bytes of calls waiting or running */

        struct hwgate *hw;
        struct tg_hwcall *hwcalls; /* hw.* calls waiting for the hardware gate */

        struct tg_refusal_kind kinds[TOOLGATE_REFUSAL_KINDS + 1]; /* the last: all others */
        size_t n_kinds;
        struct event *kinds_timer;
        bool freeing;

        struct toolgate_asker asker; /* ask is NULL when there is none */
        struct tg_call *asking;      /* calls held for the operator */
};

struct tg_call {
        struct toolgate *t;
        struct tg_conn *conn; /* NULL once the connection is gone */
        struct tg_tool *tool;
        char *call_id;
        json_t *args; /* checked, clamped */
        json_t *clamps;
        char digest[65];
        uint64_t start_us;
        size_t held; /* its request's bytes, in t->requests_held */
        struct tg_call *next_queued;
        struct tg_call *next_running, **prev_running;
        bool started;
        bool asked; /* decided by the operator, not tools.allow */
        /* Held for the operator: in t->asking. */
        struct tg_call *next_asking, **prev_asking;
        uint64_t ask_token;
        uint64_t seq; /* toolgate_record.seq, 0 until its record ahead */

        /* The runner's state, and how to stop it at toolgate_free (kill
         * and reap; no answer follows). */
        void *runner;
        void (*cancel)(struct tg_call *c);
        /* Its tool was revoked while it ran: end it now, refused
         * (policy_denied) with msg; the call may finish later (a command's
         * tree is killed, then reaped by the loop). NULL: it cannot be. */
        void (*revoke)(struct tg_call *c, const char *msg);
        bool revoking;
};

/* The call ended: answer (when its connection is still open), record, and
 * start what waits. value is stolen; error_code NULL on success. Frees c. */
void toolgate_call_finish(struct tg_call *c, json_t *value, const char *error_code,
                          const char *rule, const char *safe_message, int exit_status,
                          uint64_t output_bytes);
/* The secrets' redactor (NULL: none known). */
struct redactor *toolgate_redactor(const struct toolgate *t);
/* A copy of v with every string, keys included, redacted. The byte
 * redactor does not see a secret a JSON encoder spelt with escapes it does
 * not know ("\u00e4" for a non-ASCII character), and the parser decodes
 * them: a tool's parsed output passes through this too. */
json_t *toolgate_redact_json(const struct redactor *r, const json_t *v);
/* A redacted copy of s, truncated to TOOLGATE_MESSAGE_MAX; malloc'd. */
char *toolgate_scrub_message(const struct toolgate *t, const char *s);

/* builtin.c */
void toolgate_builtin_start(struct tg_call *c);
/* runner-cmd.c */
void toolgate_cmd_start(struct tg_call *c);
/* runner-http.c: an HTTP tool's request through the network gate's route. */
void toolgate_http_start(struct tg_call *c);

/* record.c: the call's tool.started record, before its tool acts on the
 * host (config `ahead`); below 0: not written, the tool must not run. */
int toolgate_record_ahead(struct tg_call *c);
/* record.c: one record (args redacted and digested) to the recorder. */
void toolgate_record(struct toolgate *t, struct toolgate_record *rec, const json_t *args);
/* sha256 hex of the canonical args. */
void toolgate_args_digest(const json_t *args, char out[65]);
/* Whether a refusal was counted into its kind's aggregate (true) rather
 * than to be recorded on its own (false). */
bool toolgate_refusal_counted(struct toolgate *t, const char *tool, const char *code,
                              const char *rule);
/* Record the counted refusals (all: and forget every kind). */
void toolgate_refusals_flush(struct toolgate *t, bool all);
/* The refusal window's timer. */
void toolgate_refusals_tick(evutil_socket_t fd, short what, void *ud);
