/* SPDX-License-Identifier: Apache-2.0 */
#pragma once

#include <jansson.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

/* The control protocol between a sandbox's supervisor (`airlock supervise`,
 * control.c) and its clients (airlockd's ctl.c): one connection per request,
 * one JSON object per line each way (docs/internals/control.md). Both ends
 * include this header, so they agree on the framing, the ops and the error
 * codes. */

/* The longest line either end reads. The largest request airlockd sends is
 * bounded by its 1 MiB request body (an exec with its stdin); the largest
 * answer lines are an output event (32 KiB of output, 44 KiB in base64) and
 * a status listing 128 processes, each argv and env at most 128 KiB (spawn.c's
 * EXEC_PAYLOAD_MAX). 8 MiB is above all of them in practice, and it is the
 * larger of the two limits the ends used to have (4 MiB and 8 MiB), so no
 * line either end accepted before is refused now. */
#define CONTROL_LINE_MAX (8u << 20)

/* The ops (the "op" field of a request). */
#define CONTROL_OP_STATUS  "status"
#define CONTROL_OP_EXEC    "exec"
#define CONTROL_OP_ATTACH  "attach"
#define CONTROL_OP_STDIN   "stdin"
#define CONTROL_OP_SIGNAL  "signal"
#define CONTROL_OP_REVIEW  "review"
#define CONTROL_OP_DESTROY "destroy"
#define CONTROL_OP_PORTS   "ports" /* "action": open, close or list (ports.h) */
#define CONTROL_OP_RESIZE  "resize"
#define CONTROL_OP_STOP    "stop" /* the kill switch: freeze, close the gates, kill */
#define CONTROL_OP_CAPS    "caps" /* the live capabilities: read, grant, revoke (caps.h) */
#define CONTROL_OP_ESTOP   "estop" /* the hardware's emergency stop (hwgate.h) */
/* The pending asks (approvals.h); "approve" decides one: "id", "decision",
 * "by". */
#define CONTROL_OP_APPROVALS "approvals"
#define CONTROL_OP_APPROVE   "approve"
#define CONTROL_OP_FETCH   "fetch" /* the host's own request through a route */
/* The longest "by" (who stopped a sandbox) a stop request may carry. */
#define CONTROL_STOP_BY_MAX 128

/* The error codes of {"ok": false, "error": CODE, "message": ...}. */
#define CONTROL_ERR_BAD_REQUEST        "bad_request"
#define CONTROL_ERR_UNKNOWN_PROCESS    "unknown_process"
#define CONTROL_ERR_EXEC_FAILED        "exec_failed"
#define CONTROL_ERR_TOO_MANY_PROCESSES "too_many_processes"
#define CONTROL_ERR_AUDIT_FAILED       "audit_failed"
#define CONTROL_ERR_DESTROYED          "destroyed"
#define CONTROL_ERR_NOT_REVIEWABLE     "not_reviewable"
#define CONTROL_ERR_BUSY               "busy"
#define CONTROL_ERR_INTERNAL           "internal"
#define CONTROL_ERR_UNKNOWN_PORT       "unknown_port"
#define CONTROL_ERR_PORT_UNAVAILABLE   "port_unavailable"
#define CONTROL_ERR_REFUSED            "refused" /* caps: a change the sandbox cannot have */
#define CONTROL_ERR_NO_HARDWARE        "no_hardware"
#define CONTROL_ERR_UNKNOWN_APPROVAL   "unknown_approval"
#define CONTROL_ERR_FETCH_FAILED       "fetch_failed"

/* How long a streaming client may stop reading before its foreground
 * process is abandoned ("stallTimeout"): the default and the most. */
#define CONTROL_STALL_DEFAULT_MS (30 * 1000)
#define CONTROL_STALL_MAX_MS     (3600 * 1000)
/* The most arguments in an exec's argv. */
#define CONTROL_ARGV_MAX 4096

enum control_req {
        CONTROL_REQ_UNKNOWN = 0, /* a JSON object whose "op" is none of these */
        CONTROL_REQ_STATUS,
        CONTROL_REQ_EXEC,
        CONTROL_REQ_ATTACH,
        CONTROL_REQ_STDIN,
        CONTROL_REQ_SIGNAL,
        CONTROL_REQ_REVIEW,
        CONTROL_REQ_DESTROY,
        CONTROL_REQ_PORTS,
        CONTROL_REQ_RESIZE,
        CONTROL_REQ_STOP,
        CONTROL_REQ_CAPS,
        CONTROL_REQ_ESTOP,
        CONTROL_REQ_APPROVALS,
        CONTROL_REQ_APPROVE,
        CONTROL_REQ_FETCH,
};

/* One request line, without its newline. Returns its op (CONTROL_REQ_*,
 * CONTROL_REQ_UNKNOWN for an op that is none of ours) with *req set to the
 * request (the caller json_decref()s it), or -EINVAL, *req NULL, for a line
 * that is not a JSON object with a string "op". Pure: no I/O, no state (the
 * control protocol's fuzz target). */
int control_parse_request(const char *line, size_t len, json_t **req);

/* An exec request, checked. */
struct control_exec {
        char **argv;     /* NULL-terminated */
        char **env;      /* the request's "KEY=VALUE"s; NULL: none */
        const char *cwd; /* borrowed from the request; "/workspace" when not given */
        unsigned char *stdin_data;
        size_t stdin_len;
        double timeout_s;  /* 0: none */
        uint64_t stall_ms; /* at least 1 */
        bool background;
        bool pty;            /* "pty": {"rows", "cols"}: a terminal instead of pipes */
        uint16_t rows, cols; /* 1 to CONTROL_PTY_MAX each */
        long uid;            /* "uid": another user inside (policy "users"); -1: the own */
};

/* A terminal's largest side, in rows or columns. */
#define CONTROL_PTY_MAX 4096
/* {"rows": R, "cols": C} checked into *rows, *cols; -EINVAL otherwise. */
int control_parse_size(json_t *o, uint16_t *rows, uint16_t *cols);

/* Check an exec request's fields and decode them into *x. Returns 0, or
 * -EINVAL with *why the bad_request message. Pure, as above. */
int control_parse_exec(json_t *req, struct control_exec *x, const char **why);
void control_exec_clear(struct control_exec *x);
