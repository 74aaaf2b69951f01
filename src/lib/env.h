/* SPDX-License-Identifier: Apache-2.0 */
#pragma once

#include <stdbool.h>

#include "error.h"
#include "policy.h"

/* The sandbox's environment, built from nothing: PATH, HOME, USER, TERM,
 * LANG, the proxy variables of a gated sandbox, then the policy's env. The
 * host's environment never leaks in. A value that names a secret is refused:
 * secrets stay on the host (a route injects them). */
int env_build(const struct policy *p, const char *home, const char *user, const char *term,
              char ***ret, struct al_error *err);

/* The HOME and user name inside for a uid. */
const char *env_home_for_uid(unsigned uid);
const char *env_user_for_uid(unsigned uid);

/* A sandbox with the tool gateway's endpoint: AIRLOCK_TOOL_SOCKET, its run
 * id in AIRLOCK_RUN_ID (set over whatever the policy's env said), and the
 * client's directory appended to PATH. */
void env_add_tool(char ***envp, const char *run_id);

/* A sandbox whose TLS the gate terminates for some hosts: the CA bundle at
 * `bundle` (the host's bundle and the sandbox's CA) named in every variable
 * a common client reads its trust store from. */
void env_add_ca(char ***envp, const char *bundle);

/* Set KEY=VALUE in *envp, over an entry of that name. */
void env_set(char ***envp, const char *key, const char *value);
