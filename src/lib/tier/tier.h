/* SPDX-License-Identifier: Apache-2.0 */
#pragma once

#include <stdbool.h>
#include <stddef.h>
#include <sys/types.h>

#include "error.h"
#include "policy.h"

/* The isolation tiers (docs/tiers.md, docs/internals/tiers.md): which of
 * them this host and this build can run, and what a spawn needs for the
 * policy's tier. */

/* 0 when tier `t` can run here, else -EOPNOTSUPP with the reason and the
 * fix in why[0..n). */
int tier_available(enum policy_tier t, char *why, size_t n);

/* The container tier's root, listed by the parent: each top-level entry of
 * the image but those the sandbox gets fresh (proc, dev, sys, tmp, run,
 * home, root, workspace). For a root caller each is a detached read-only,
 * nosuid, nodev clone (`mnt`), since the sandbox user cannot search
 * Airlock's state directory; otherwise `mnt` is -1 and the child binds
 * path/name itself. A symbolic link is recreated from `link`. */
struct tier_entry {
        char *name;
        char *link; /* the link's target, or NULL */
        int mnt;
};

struct tier_image {
        char *path; /* the image's root file system */
        struct tier_entry *entries;
        size_t n_entries;
        /* etc/resolv.conf is a regular file there, so that a gated
         * sandbox's resolver can be mounted over it (seen by the parent:
         * the sandbox's own user may not reach the image cache). */
        bool resolv_file;
};

/* In the parent, before the sandbox starts: refuse a tier this host cannot
 * run (the reason in err). For the container tier, *ret_image (NULL for the
 * other tiers) is the image's root, as above. */
int tier_prepare(const struct policy *p, uid_t uid, const char *caller_home,
                 struct tier_image **ret_image, struct al_error *err);
struct tier_image *tier_image_free(struct tier_image *t);

/* The gvisor tier's command line: runsc running `argv` in `cwd` (NULL: the
 * current directory) inside the sandbox Airlock built. The array is
 * allocated, its strings are argv's or static. */
char **tier_gvisor_argv(char *const *argv, const char *cwd);
