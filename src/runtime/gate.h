/* SPDX-License-Identifier: Apache-2.0 */
#pragma once

#include <sys/types.h>

#include "error.h"
#include "policy.h"
#include "runtime-audit.h"
#include "spawn.h"

/* Serve the network gate on the sandbox's listeners in a child process
 * (gate.c), which closes `close_fds` (the keeper's hold on the sandbox:
 * the gate must not keep it alive) and lets stdio go; *ret_pid is -1 when the policy has no gated
 * network. The gate takes the sandbox's listeners and, for transparent
 * mode, its name server, relay and connect() notifications (sp's fds are
 * closed here and set to -1): every connect() of the container is decided
 * by it, as under airlock run. */
int rt_gate_start(const struct policy *p, const char *sandbox, struct spawn_result *sp,
                  struct rt_audit *ra, const int *close_fds, size_t n_close, pid_t *ret_pid,
                  struct al_error *err);
