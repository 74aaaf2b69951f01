/* SPDX-License-Identifier: Apache-2.0 */
#pragma once

#include <event2/buffer.h>
#include <jansson.h>

/* Each live sandbox's health: the allowed and denied decisions of its gates
 * (network: net.decision and route.call; tools: tool.call), counted from
 * the audit log itself (the same lines as GET /v1/events), and a state that
 * turns "unhealthy" with a reason while the policy's "health" thresholds
 * are passed: the denial rate over the window, or the peak memory against
 * limits.memory. A change of state is itself an audit line
 * (sandbox.health). */

struct daemon;

/* Follow the log from its start (so counts survive a daemon restart);
 * after the sandboxes are re-attached. */
void sandbox_health_start(struct daemon *d);
void sandbox_health_stop(void);
/* {"state", "reason"?, "gates": {GATE: {"allowed", "denied"}}}; NULL for a
 * sandbox that is not live. */
json_t *sandbox_health_json(const char *id);
/* airlock_sandbox_gate_decisions_total{sandbox,gate,result} and
 * airlock_sandbox_unhealthy{sandbox}, in Prometheus text. */
void sandbox_health_metrics(struct evbuffer *out);
/* [{"id", "reason"}] of the unhealthy sandboxes. */
json_t *sandbox_health_unhealthy(void);
