/* SPDX-License-Identifier: Apache-2.0 */
#pragma once

#include <jansson.h>
#include <stddef.h>

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
