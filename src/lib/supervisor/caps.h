/* SPDX-License-Identifier: Apache-2.0 */
#pragma once

#include <jansson.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "policy.h"

/* A running sandbox's effective capabilities (docs/internals/caps.md): the
 * network rules (allow, deny, the request, byte and refusal budgets), the
 * tools it may call, the host paths mounted into it at run time, and the
 * environment of later commands. They start from the policy; grants and
 * revokes change them while it runs. This file is the pure model: parsing
 * and checking a change, applying it to a copy, the effective set as JSON.
 * caps-live.c makes a change real in a running sandbox (the network gate,
 * the tool gateway, mounts, the audit log). */

#define CAPS_ENTRIES_MAX   64 /* grant + revoke entries in one change */
#define CAPS_MOUNTS_MAX    16 /* mounts added at run time, at once */
#define CAPS_RULES_MAX     1024
#define CAPS_ENV_MAX       256
#define CAPS_ENV_VALUE_MAX (32 * 1024)

enum caps_kind {
        CAPS_NET_ALLOW,
        CAPS_NET_DENY,
        CAPS_NET_BUDGET,
        CAPS_TOOL,
        CAPS_MOUNT,
        CAPS_ENV,
};

struct caps_entry {
        enum caps_kind kind;
        bool grant;
        char *a; /* the rule, the tool's name, the mount's target, the env name */
        char *b; /* the mount's source, the env value (grants) */
        bool readonly;
        bool has_requests, has_bytes, has_refusals;
        uint64_t requests, bytes, refusals;
        json_t *json; /* the entry as given, for the audit event */
};

struct caps_change {
        struct caps_entry *e;
        size_t n;
};

struct caps_mount {
        char *source; /* the host path as given (absolute, no symlink on it) */
        char *target; /* inside the sandbox */
        bool readonly;
};

struct caps {
        const struct policy *policy; /* outlives the caps */
        char **allow, **deny;
        size_t n_allow, n_deny;
        struct policy_budget budget;
        char **tools_on, **tools_off; /* granted, revoked by name */
        size_t n_tools_on, n_tools_off;
        char **env; /* "K=V" set for later commands */
        size_t n_env;
        char **env_off; /* names removed from later commands' environment */
        size_t n_env_off;
        struct caps_mount *mounts;
        size_t n_mounts;
        /* One command only (airlock run): there is no later command for
         * env to reach, so env entries are refused. */
        bool one_command;
};

/* The policy's capabilities. */
struct caps *caps_new(const struct policy *p);
struct caps *caps_free(struct caps *c);
struct caps *caps_dup(const struct caps *c);

/* Check a change's "grant" and "revoke" arrays (either may be NULL) entry by
 * entry, the way the policy's loader checks its fields. Pure. 0, or
 * -EINVAL with `why` naming the entry ("grant[2].network.allow: ...").
 * Nothing is kept on failure. */
int caps_parse_change(const json_t *grant, const json_t *revoke, struct caps_change *ret, char *why,
                      size_t why_size);
void caps_change_clear(struct caps_change *ch);

/* Apply a checked change to `c` (the caller applies it to a copy and keeps
 * the copy only on success: nothing is half-applied). -EINVAL/-EPERM with
 * `why` for an entry the sandbox cannot have (a tool no one defined, a
 * network rule for a sandbox without a network gate, a revoke of something
 * it does not have, a mount target in use). Pure. */
int caps_apply(struct caps *c, const struct caps_change *ch, char *why, size_t why_size);

/* Whether a tool may be called now. */
bool caps_tool_allowed(const struct caps *c, const char *name);
/* The environment of a later command: `base` (the sandbox's clean one)
 * with the removed names dropped and the granted ones set. */
char **caps_env(const struct caps *c, char *const *base);
/* {"network": {"allow", "deny", "budget"}, "tools": [...], "mounts":
 * [...], "env": {...}}. */
json_t *caps_json(const struct caps *c);
/* What an entry is, for an audit event: {"network": ...} as given. */
const char *caps_kind_name(enum caps_kind k);
