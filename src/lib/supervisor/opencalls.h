/* SPDX-License-Identifier: Apache-2.0 */
#pragma once

#include <jansson.h>
#include <stdint.h>

/* The host tool calls a supervisor has started and not ended
 * (opencalls.c). Each call's tool.started line is on the audit log before
 * its tool runs, and its tool.call line after it ends; a supervisor killed
 * in between writes no end. So airlock supervise keeps the calls under way
 * in a file of its run directory, rewritten (whole, by rename) at each
 * start and end, and whoever sees the supervisor die (airlockd, now or
 * when it starts again) closes each call left there with a tool.call line
 * of its own: every started call has an end. */

#define OPEN_CALLS_FILE      "tool-calls.json"
#define OPEN_CALLS_FILE_MAX  (1u << 20)
#define OPEN_CALLS_MAX       1024
#define OPEN_CALLS_DIED_CODE "supervisor_died"

struct open_calls;

/* The calls of the run directory dir (which must exist). NULL on failure
 * (errno set). */
struct open_calls *open_calls_new(const char *dir);
/* The same for a directory made (0700) only when the first call starts,
 * so that a run without tool calls writes nothing. */
struct open_calls *open_calls_new_lazy(const char *dir);
/* Remove dir and what open_calls left in it; 0 when it is gone (or was
 * never made). */
int open_calls_remove(const char *dir);
struct open_calls *open_calls_free(struct open_calls *oc);

/* A call starts: kept, and the file rewritten, before its tool.started
 * line is written. seq is the gateway's number for the call
 * (toolgate_record.seq, never 0): the callId is the sandbox's, may be
 * shared by calls under way or sent again on a refused request, so it
 * never names which call ended. -errno when the file could not be written
 * (the call is then not kept, and must not run). */
int open_calls_start(struct open_calls *oc, uint64_t seq, const char *call_id, const char *tool,
                     const char *args_digest, const char *rule, uint64_t now_ms);
/* A call is about to end: marked as ending in the file before its
 * tool.call line is written, so that a sweep after a kill between the two
 * looks for that line (by its callSeq) before it writes another. */
void open_calls_ending(struct open_calls *oc, uint64_t seq);
/* A call ended (its tool.call line is written): the call of that seq is
 * dropped; seq 0 (a request that never started) drops nothing. */
void open_calls_end(struct open_calls *oc, uint64_t seq);

/* What a dead supervisor left in dir: the fields of one closing tool.call
 * line per call (errorCode "supervisor_died", durationMs up to now,
 * closedBy `by`), in an array; an empty array when it left none. A call
 * marked as ending whose own tool.call line (sandbox's, of its callSeq) is
 * in the tail of the log at audit_path is left out: one end, never two.
 * -errno when the file is there but cannot be read, or is not what the
 * supervisor writes. */
int open_calls_closing(const char *dir, const char *audit_path, const char *sandbox,
                       uint64_t now_ms, const char *by, json_t **ret);
