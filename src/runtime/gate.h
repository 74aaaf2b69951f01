/* SPDX-License-Identifier: Apache-2.0 */
#pragma once

#include <sys/types.h>

#include "error.h"
#include "policy.h"
#include "runtime-audit.h"
#include "spawn.h"

struct netgate_ca;
struct secrets;

struct rt_gate_config {
        const struct policy *policy;
        const char *sandbox;         /* "oci:<id>" */
        struct secrets *secrets;     /* the node's, for route and tool templates; may be NULL */
        const struct netgate_ca *ca; /* when a route terminates TLS; may be NULL */
        const char *run_id;          /* the tool gateway's: a call must name it */
        struct rt_audit *audit;
        int pod_netns_fd;       /* a pod's network namespace to connect from (podnet.h), or -1 */
        const char *pod_resolv; /* ... and its resolv.conf, or NULL */
        /* The container's state directory: the gates keep the tool calls
         * under way there (opencalls.h), for the keeper to close when it
         * kills them with a call in flight (rt_gate_close_calls). */
        const char *state_dir;
};

/* Serve the network gate (routes included) on the sandbox's listeners and
 * the tool gateway on its tool socket in a child process (gate.c), which
 * closes `close_fds` (the keeper's hold on the sandbox: the gates must not
 * keep it alive) and lets stdio go; *ret_pid is -1 when the policy has
 * neither a gated network nor a tool. The gates take the sandbox's
 * listeners, transparent mode's name server, relay and connect()
 * notifications, and the tool socket (sp's fds are closed here and set to
 * -1): every connect() and tool call of the container is decided by them,
 * as under airlock run. */
int rt_gate_start(const struct rt_gate_config *c, struct spawn_result *sp, const int *close_fds,
                  size_t n_close, pid_t *ret_pid, struct al_error *err);

/* The gates' process (gate_pid) is killed and reaped; then each tool call
 * it started and never ended gets its tool.call line (errorCode
 * "supervisor_died"), so that every tool.started has an end. */
void rt_gate_close_calls(pid_t gate_pid, const char *state_dir, struct rt_audit *audit);
