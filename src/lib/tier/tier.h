/* SPDX-License-Identifier: Apache-2.0 */
#pragma once

#include <stdbool.h>
#include <stddef.h>
#include <sys/types.h>

#include "error.h"
#include "rootdir.h"
#include "policy.h"

/* The isolation tiers (docs/tiers.md, docs/internals/tiers.md): which of
 * them this host and this build can run, and what a spawn needs for the
 * policy's tier. */

/* 0 when tier `t` can run here, else -EOPNOTSUPP with the reason and the
 * fix in why[0..n). */
int tier_available(enum policy_tier t, char *why, size_t n);

/* In the parent, before the sandbox starts: refuse a tier this host cannot
 * run (the reason in err). For the container tier, *ret_image (NULL for the
 * other tiers) is the image's root, listed as the root-from-a-directory
 * engine lists it (rootdir.h, ROOTDIR_IMAGE; rootdir_free() frees it). */
int tier_prepare(const struct policy *p, uid_t uid, const char *caller_home,
                 struct rootdir **ret_image, struct al_error *err);

/* The gvisor tier's command line: runsc running `argv` in `cwd` (NULL: the
 * current directory) inside the sandbox Airlock built. The array is
 * allocated, its strings are argv's or static. */
char **tier_gvisor_argv(char *const *argv, const char *cwd);
