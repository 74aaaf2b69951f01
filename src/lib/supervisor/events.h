/* SPDX-License-Identifier: Apache-2.0 */
#pragma once

#include <jansson.h>

#include "policy.h"

/* The audit events of one sandbox's life, as the supervisor records them.
 * Each returns a new json_t of the event's fields (the audit log adds seq,
 * ts, sandbox, kind and prev). Kinds:
 *   sandbox.created    policy digest and summary
 *   process.started    argv
 *   net.decision       one per network gate decision; repeated refusals of
 *                      one kind are one line with "count" (netgate.h)
 *   route.call         one per call through a route (protocol "route")
 *   net.budget_exceeded  the refusal budget is spent (protocol "gate")
 *   limit.hit          a limit ended the command: timeout, memory, output
 *   violation          the kernel stopped the command: seccomp
 *   process.ended      exit code, signal, errorCode, usage
 *   sandbox.destroyed  duration */

struct supervisor_result;
struct netgate_record;

json_t *events_sandbox_created(const struct policy *p);
json_t *events_process_started(char *const *argv);
json_t *events_process_ended(const struct supervisor_result *r);
/* A gate record's kind: "route.call" for protocol "route",
 * "net.budget_exceeded" for protocol "gate", else "net.decision";
 * events_net_decision() gives the fields for each. */
const char *events_net_kind(const struct netgate_record *rec);
json_t *events_net_decision(const struct netgate_record *rec);
json_t *events_route_call(const struct netgate_record *rec);
