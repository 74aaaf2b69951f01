/* SPDX-License-Identifier: Apache-2.0 */
#pragma once

#include "error.h"
#include "policy.h"

/* What a container's routes and tool gateway take from the node
 * (docs/kubernetes.md): host configuration, never the pod's. */

#define RUNTIME_TOOLS_DEFAULT   "/etc/airlock/tools.json"
#define RUNTIME_SECRETS_DEFAULT "/etc/airlock/secrets.env"

struct secrets;

/* Refuse what a container cannot have (the hardware gate, sentinels), and
 * add the node's tool definitions (AIRLOCK_RUNTIME_TOOLS, else
 * RUNTIME_TOOLS_DEFAULT when it exists) when tools.allow names a tool.
 * Before policy_finalize. */
int rt_node_policy(struct policy *p, struct al_error *err);
/* The node's secrets for route and tool templates (AIRLOCK_RUNTIME_SECRETS,
 * else RUNTIME_SECRETS_DEFAULT when it exists, else none): loaded when the
 * policy has routes or tools; *ret NULL otherwise. */
int rt_node_secrets(const struct policy *p, struct secrets **ret, struct al_error *err);
/* airlock-tool, the client bound into the container: beside the runtime
 * (installed), or in the build tree's src/cli. NULL when neither is. */
char *rt_node_tool_bin(void);
