/* SPDX-License-Identifier: Apache-2.0 */
#pragma once

#include <jansson.h>
#include <stddef.h>
#include <stdint.h>

#include "policy.h"

/* The audit events of one sandbox's life, as the supervisor records them.
 * Each returns a new json_t of the event's fields (the audit log adds seq,
 * ts, sandbox, kind and prev). `airlock run` and `airlock supervise` build
 * every event here, so each kind has one schema (docs/audit.md). Kinds:
 *   sandbox.created    policy digest and summary
 *   process.started    argv
 *   net.decision       one per network gate decision; repeated refusals of
 *                      one kind are one line with "count" (netgate.h)
 *   route.call         one per call through a route (protocol "route")
 *   net.budget_exceeded  the refusal budget is spent (protocol "gate")
 *   limit.hit          a limit ended the command: timeout, memory, output
 *   violation          the kernel stopped the command: seccomp
 *   process.ended      exit code, signal, errorCode, usage
 *   review.kept        an overlay workspace's changes were kept (review.failed: not)
 *   sandbox.destroyed  duration
 *   port.opened, port.connect, port.refused, port.closed  port forwards (ports.h) */

struct netgate_record;

/* How one process ended: the fields of process.ended, limit.hit and
 * violation. */
struct events_end {
        int pid; /* its number in the sandbox: 1 for airlock run's command */
        int exit_code;
        int signal;             /* 0: none */
        const char *error_code; /* NULL, "timeout", "oom_killed", "output_limit", ... */
        const char *message;    /* why, for a limit; NULL: none */
        uint64_t duration_ms;
        uint64_t cpu_ms;                                 /* the sandbox's cgroup, so far */
        uint64_t memory_peak;                            /* the sandbox's cgroup, so far */
        uint64_t cpu_user_ms, cpu_system_ms, max_rss_kb; /* the process's own */
        uint64_t output_bytes;
        /* null in the event when not measured (no blkio controller, no
         * workspace quota) */
        bool io_measured, workspace_measured;
        uint64_t io_read_bytes, io_write_bytes; /* block I/O, the sandbox's cgroup */
        uint64_t net_sent_bytes, net_received_bytes; /* through the network gate */
        uint64_t workspace_added_bytes;              /* a quota-limited workspace's growth */
        bool disk_measured;
        uint64_t disk_peak_bytes; /* the workspace's largest growth, sampled */
};

json_t *events_sandbox_created(const struct policy *p);
/* argv is taken over (a JSON array of strings). */
json_t *events_process_started(int pid, json_t *argv);
/* A command line as a JSON array, each argument cut at 4096 bytes. */
json_t *events_argv(char *const *argv);
json_t *events_process_ended(const struct events_end *e);
/* The limit a process's error code names ("timeout", "memory", "output", "disk"),
 * or NULL when it names none. */
const char *events_limit_name(const char *error_code);
/* The message of a limit that ended a process, into buf: `value` is the
 * timeout in ms or the output limit in bytes. */
void events_limit_message(const char *error_code, uint64_t value, char *buf, size_t size);
/* limit.hit when a limit ended the process, else NULL. */
json_t *events_limit_hit(const struct events_end *e);
/* violation when the kernel stopped the process (seccomp), else NULL. */
json_t *events_violation(const struct events_end *e);
json_t *events_sandbox_destroyed(uint64_t duration_ms);
/* An overlay workspace's changes, kept in dir for review (review.h). */
struct review_summary;
json_t *events_review_counts(const struct review_summary *sum);
json_t *events_review_kept(const char *dir, const struct review_summary *sum);
/* They could not be kept: r is the -errno of the capture. */
json_t *events_review_failed(const char *dir, int r, const char *message);
/* A gate record's kind: "route.call" for protocol "route",
 * "net.budget_exceeded" for protocol "gate", else "net.decision";
 * events_net_decision() gives the fields for each. */
const char *events_net_kind(const struct netgate_record *rec);
json_t *events_net_decision(const struct netgate_record *rec);
json_t *events_route_call(const struct netgate_record *rec);

/* A port forward (ports.h): its port inside, the host port and address. */
struct events_port {
        unsigned port, host_port;
        const char *bind;
};
json_t *events_port_opened(const struct events_port *p);
/* One connection: result "closed", "refused" (nothing listened inside) or
 * "error"; message may be NULL. */
json_t *events_port_connect(const struct events_port *p, const char *peer, uint64_t to_sandbox,
                            uint64_t from_sandbox, uint64_t duration_ms, const char *result,
                            const char *message);
/* The first connection closed for the forward's bound (limit). */
json_t *events_port_refused(const struct events_port *p, unsigned limit);
json_t *events_port_closed(const struct events_port *p, const char *reason, uint64_t accepted,
                           uint64_t refused);
