/* SPDX-License-Identifier: Apache-2.0 */
#pragma once

#include <getopt.h>
#include <stddef.h>

#include "agent/provider.h"
#include "error.h"

/* airlock agent's policy flags: those of `airlock run` that shape the
 * sandbox, and the routes (the model's made for the provider when the
 * policy has none, and marked host-only). */

struct policy;

enum {
        AGENT_POLICY_OPT_FIRST = 1024,
        AGENT_OPT_ALLOW = AGENT_POLICY_OPT_FIRST,
        AGENT_OPT_ALLOW_PRIVATE,
        AGENT_OPT_DENY,
        AGENT_OPT_HOST,
        AGENT_OPT_TOOL,
        AGENT_OPT_TOOLS,
        AGENT_OPT_ENV,
        AGENT_OPT_MEMORY,
        AGENT_OPT_CLASS,
        AGENT_OPT_PIDS,
        AGENT_OPT_CPUS,
        AGENT_OPT_RO,
        AGENT_OPT_RW,
        AGENT_OPT_DENY_READ,
        AGENT_OPT_READ,
};

#define AGENT_POLICY_OPTIONS                                                                       \
        {"allow", required_argument, NULL, AGENT_OPT_ALLOW},                                       \
            {"allow-private", required_argument, NULL, AGENT_OPT_ALLOW_PRIVATE},                   \
            {"deny", required_argument, NULL, AGENT_OPT_DENY},                                     \
            {"host", required_argument, NULL, AGENT_OPT_HOST},                                     \
            {"tool", required_argument, NULL, AGENT_OPT_TOOL},                                     \
            {"tools", required_argument, NULL, AGENT_OPT_TOOLS},                                   \
            {"env", required_argument, NULL, AGENT_OPT_ENV},                                       \
            {"memory", required_argument, NULL, AGENT_OPT_MEMORY},                                 \
            {"class", required_argument, NULL, AGENT_OPT_CLASS},                                   \
            {"pids", required_argument, NULL, AGENT_OPT_PIDS},                                     \
            {"cpus", required_argument, NULL, AGENT_OPT_CPUS},                                     \
            {"ro", required_argument, NULL, AGENT_OPT_RO},                                         \
            {"rw", required_argument, NULL, AGENT_OPT_RW},                                         \
            {"deny-read", required_argument, NULL, AGENT_OPT_DENY_READ},                           \
        {                                                                                          \
                "read", required_argument, NULL, AGENT_OPT_READ                                    \
        }

/* One policy flag (c from AGENT_POLICY_OPTIONS) into p; relative paths are
 * taken from cwd. < 0 with msg (or err) saying what was wrong. */
int agent_policy_flag(struct policy *p, int c, const char *arg, const char *cwd, char *msg,
                      size_t msglen, struct al_error *err);

/* --route NAME=URL and --inject NAME:HEADER=VALUE applied, then the
 * model's route: made for the provider when missing, and host-only. */
int agent_policy_routes(struct policy *p, char *const *routes, size_t n_routes,
                        char *const *injects, size_t n_injects, const char *model_route,
                        enum agent_provider provider, char *msg, size_t msglen);
