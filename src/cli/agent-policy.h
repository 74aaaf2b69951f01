/* SPDX-License-Identifier: Apache-2.0 */
#pragma once

#include <stddef.h>

#include "agent/provider.h"
#include "error.h"

/* airlock agent's routes: the model's made for the provider when the
 * policy has none, and marked host-only. Its other policy flags are run's
 * (policyflags.h). */

struct policy;

/* --route NAME=URL and --inject NAME:HEADER=VALUE applied, then the
 * model's route: made for the provider when missing, and host-only. */
int agent_policy_routes(struct policy *p, char *const *routes, size_t n_routes,
                        char *const *injects, size_t n_injects, const char *model_route,
                        enum agent_provider provider, char *msg, size_t msglen);
