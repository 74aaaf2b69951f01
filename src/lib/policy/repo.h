/* SPDX-License-Identifier: Apache-2.0 */
#pragma once

#include <jansson.h>
#include <stdbool.h>

#include "error.h"
#include "policy.h"

/* Repository config: the workspace's .airlock/isolation.json (docs/tiers.md).
 * A repository can only ask. minimumTier is always enforced; limits only
 * tighten; env never overrides the operator's; image is taken when the run
 * is in the container tier without one. allowedDomains and mounts (read-only,
 * inside the workspace) widen the sandbox's reach, so they apply only when
 * the policy trusts repository config (trustRepoConfig, or the user's
 * --trust-repo-config). */

struct repo_config {
        bool has_minimum, has_recommended;
        enum policy_tier minimum, recommended;
        char *image;
        char **domains;
        size_t n_domains;
        struct policy_mount *mounts; /* source relative to the workspace */
        size_t n_mounts;
        struct policy_kv *env;
        size_t n_env;
        json_t *limits; /* as given; validated by the policy parser when applied */
};

/* Read and validate `workspace`/.airlock/isolation.json, without following
 * symbolic links, at most 64 KiB. *ret is NULL when there is none. */
int repo_config_load(const char *workspace, struct repo_config **ret, struct al_error *err);
/* repo_config_load in two steps: the file's bytes (*ret_text NULL when
 * there is none), then their validation; so that a caller can read a
 * path that may not answer in a child with a time limit. */
int repo_config_read(const char *workspace, char **ret_text, size_t *ret_len, struct al_error *err);
int repo_config_parse(const char *text, size_t len, struct repo_config **ret, struct al_error *err);
struct repo_config *repo_config_free(struct repo_config *rc);

/* -EPERM (the message names the tier) when the policy's tier is below
 * minimumTier. */
int repo_config_check_tier(const struct repo_config *rc, const struct policy *p,
                           struct al_error *err);

/* Check the tier, apply what the policy lets the repository add to the
 * finalized policy `p`, and finalize it again. *ret_applied says what was
 * applied, and under "notTrusted" what was asked and not applied (for the
 * audit and the user). */
int repo_config_apply(const struct repo_config *rc, struct policy *p, const char *base_dir,
                      const char *home, json_t **ret_applied, struct al_error *err);

/* The daemon's create (and any caller without a terminal): load
 * `workspace`/.airlock/isolation.json and apply it to `p` as above, its
 * record in p->repo_applied. -EPERM when the tier is below minimumTier. */
int repo_config_apply_workspace(struct policy *p, const char *workspace, const char *home,
                                struct al_error *err);
/* The same with a configuration already loaded (rc NULL: nothing). */
int repo_config_apply_loaded(struct policy *p, const char *workspace, const char *home,
                             const struct repo_config *rc, struct al_error *err);
