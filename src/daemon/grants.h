/* SPDX-License-Identifier: Apache-2.0 */
#pragma once

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "error.h"
#include "util.h"

/* A grant: what one bearer token may do through the daemon's API. The token
 * is shown once when the grant is made; only its SHA-256 is stored. */

#define GRANT_TOKEN_PREFIX "alk_"
#define GRANT_TOKEN_LEN    (4 + 64) /* prefix and 32 random bytes in hex */
#define GRANT_TOKEN_MAX    256      /* longest Authorization token looked at */
#define GRANT_HASH_HEX     64
#define GRANT_NAME_MAX     64
#define GRANT_CLASSES_MAX  8
#define GRANT_SECRETS_MAX  32
#define GRANT_TOOLS_MAX    64
#define GRANT_TOOL_NAME_MAX 64

struct grant {
        char *name;
        char token_hash[GRANT_HASH_HEX + 1];
        bool allow_sandbox;        /* create and destroy sandboxes, set their TTL */
        bool allow_exec;           /* run commands, write and delete files */
        bool allow_host_workspace; /* name host paths: a workspace, mounts, read=host */
        bool allow_git;            /* clone repositories with the daemon's git credentials, push */
        bool allow_capabilities;   /* read and change a running sandbox's capabilities */
        bool allow_runs;           /* start agent runs (POST /v1/runs, docs/agent.md) */
        uint64_t max_sandboxes;    /* live sandboxes this grant made; 0 = no own maximum */
        char **classes;            /* allowed classes, NULL-terminated; NULL = any */
        size_t n_classes;
        char **secrets; /* daemon secrets its policies may inject, NULL-terminated; NULL = none */
        size_t n_secrets;
        char **tools; /* host tools its sandboxes may be given (tools.allow), NULL-terminated;
                       * NULL = none */
        size_t n_tools;
        uint64_t created_ms;
        uint64_t revoked_ms; /* 0 = in force */
};

struct grant *grant_free(struct grant *g);
static inline void grant_freep(struct grant **g)
{
        grant_free(*g);
}
#define _cleanup_grant_ _cleanup_(grant_freep)

/* A new random token, GRANT_TOKEN_LEN characters and a NUL. */
int grant_token_new(char ret[static GRANT_TOKEN_LEN + 1]);
/* SHA-256 of the token as lowercase hex. */
void grant_token_hash(const char *token, size_t len, char ret[static GRANT_HASH_HEX + 1]);
/* The token of an "Authorization: Bearer TOKEN" header value: -EINVAL when the
 * scheme is not Bearer or the token is empty, too long or not printable. */
int grant_bearer_token(const char *header, const char **ret, size_t *ret_len);

/* 1 to GRANT_NAME_MAX of [A-Za-z0-9._-], not starting with '.' or '-'. */
bool grant_name_valid(const char *name);
/* "small,medium": known class names, no repeats, at most GRANT_CLASSES_MAX. */
int grant_parse_classes(const char *csv, char ***ret, size_t *ret_n, struct al_error *err);
bool grant_allows_class(const struct grant *g, const char *class_name);
/* The comma-joined classes, or "" for any; caller frees. */
char *grant_classes_string(const struct grant *g);

/* The daemon's own git credentials: no grant names them and no policy
 * injects them; only the daemon's clones and pushes (allowGit) use them. */
bool grant_secret_reserved(const char *name);
/* Add NAME to the grant's secrets: a valid secret name (letters, digits and
 * _, not starting with a digit), not reserved, not given twice, at most
 * GRANT_SECRETS_MAX. */
int grant_add_secret(char ***v, size_t *n, const char *name, struct al_error *err);
/* "A,B": as stored; "" for none. grant_parse_secrets() reads it back. */
char *grant_secrets_string(const struct grant *g);
int grant_parse_secrets(const char *csv, char ***ret, size_t *ret_n, struct al_error *err);
bool grant_allows_secret(const struct grant *g, const char *name);

/* Add NAME to the grant's tools: a tool name (1 to 64 of A-Z a-z 0-9 . _ -,
 * not starting with '.' or '-'), not given twice, at most GRANT_TOOLS_MAX. */
int grant_add_tool(char ***v, size_t *n, const char *name, struct al_error *err);
/* "A,B": as stored; "" for none. grant_parse_tools() reads it back. */
char *grant_tools_string(const struct grant *g);
int grant_parse_tools(const char *csv, char ***ret, size_t *ret_n, struct al_error *err);
bool grant_allows_tool(const struct grant *g, const char *name);

/* What a policy given through the API may name under a grant: only the
 * tools the grant names in tools.allow; only the
 * daemon secrets the grant names (never the git credentials) in route
 * templates, and host paths (a route's caFile, filesystem.denyRead,
 * mounts, a workspace, filesystem.read "host") only with
 * allowHostWorkspace. Call it on the policy as given, before it is
 * finalized, so that nothing on the host is looked at first. */
struct policy;
struct grant_policy_refusal {
        const char *limit; /* "secrets", "tools" or "allowHostWorkspace" */
        char message[512];
};
/* 0, or -EPERM with *ret saying what the grant lacks. */
int grant_check_policy(const struct grant *g, const struct policy *p,
                       struct grant_policy_refusal *ret);

/* The grant's classes, on a policy already finalized (its class's limits
 * filled in): the class must be one of them, and limits.memory,
 * limits.cpus and limits.timeout no more than the largest of them allows
 * (timeout 0, none, is refused). 0, or -EPERM with *ret naming the limit
 * ("classes", "limits.memory", "limits.cpus", "limits.timeout"). */
int grant_check_limits(const struct grant *g, const struct policy *p,
                       struct grant_policy_refusal *ret);
