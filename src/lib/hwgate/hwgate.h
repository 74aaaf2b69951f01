/* SPDX-License-Identifier: Apache-2.0 */
#pragma once

#include <jansson.h>
#include <stdbool.h>

#include "error.h"

struct policy;

/* The hardware gate (docs/hardware.md, docs/internals/hwgate.md): the one
 * way a sandbox reaches a device. It runs on the supervisor's loop, owns
 * the connection to the host-side driver (a command it starts, or a unix
 * socket it connects to; the sandbox never sees either) and answers the
 * sandbox's hw.* calls, which the tool gateway hands it:
 *
 *   hw.ls                       the devices, with what the policy allows
 *   hw.set   {name, value}      move an actuator: allow-list, rate, clamp
 *                               to ±maxSpeed, ramp at maxAcceleration
 *   hw.read  {name}             read a sensor: deny-list, rate
 *   hw.stop                     stop every actuator; never rate-limited
 *
 * and the host's emergency stop (hwgate_estop: `airlock estop`, POST
 * /v1/sandboxes/{id}/estop, the kill switch), which also refuses every
 * later motion of the sandbox. Every command is one hw.command record. */

struct event_base;
struct hwgate;

struct hwgate_config {
        const char *policy_text; /* the policy's hardware_json */
        /* Where the agent writes on the host (the workspace, read-write
         * mounts): a driver command or its files there are refused. */
        const struct policy *policy;
        /* One hw.command (or hw.driver) record; fields are taken over.
         * Below 0: it is not on the audit log, and an allowed set it
         * records is then not sent to the device (audit_failed). */
        int (*recorder)(void *ud, const char *kind, json_t *fields);
        void *ud;
};

/* Start or connect the driver. NULL with err set when it cannot be
 * reached: a sandbox with a hardware section does not start without it. */
struct hwgate *hwgate_new(struct event_base *base, const struct hwgate_config *cfg,
                          struct al_error *err);

/* The answer to one call: value (taken over) on success, else error_code
 * (policy_denied, bad_args, rate_limited, timeout, tool_failed, internal)
 * and a message for the sandbox. Called once, maybe before hwgate_call
 * returns. */
typedef void (*hwgate_done_fn)(void *ud, json_t *value, const char *error_code,
                               const char *message);

/* Whether a tool name is one of the gate's (hw.ls, hw.set, hw.read,
 * hw.stop). */
bool hwgate_is_tool(const char *tool);
/* One call from the sandbox. args may be NULL. */
void hwgate_call(struct hwgate *g, const char *tool, const json_t *args, hwgate_done_fn done,
                 void *ud);
/* Forget the calls made with this ud (their caller is gone): done is not
 * called for them any more. */
void hwgate_forget(struct hwgate *g, void *ud);
/* The host's emergency stop: every actuator stopped now (what waits for
 * the driver is dropped first), and motion refused from then on. `by`
 * names who asked. 0, or -errno when the driver could not be told (the
 * driver's own connection loss then stops it: the gate closes it). */
int hwgate_estop(struct hwgate *g, const char *by);
/* Stop every actuator, tell the driver and close it (a started driver is
 * given a moment to exit, then killed). NULL-safe. */
void hwgate_free(struct hwgate *g);

/* The gate's tools as the tool gateway lists them: [{"name",
 * "description", "inputSchema"}]. */
json_t *hwgate_tools(void);
