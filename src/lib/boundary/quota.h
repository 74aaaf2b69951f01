/* SPDX-License-Identifier: Apache-2.0 */
#pragma once

#include <stdbool.h>
#include <stdint.h>

#include "error.h"

/* The workspace quota (limits.workspaceDisk): a read-write workspace on a
 * file system with project quotas (ext4 mounted with prjquota, XFS with
 * prjquota) gets a project id of its own on its whole tree, inherited by
 * what the sandbox creates, and a block limit of what the tree held plus the
 * allowance. Where the file system has none, quota_apply() refuses, naming
 * the file system: the limit is never silently absent. Needs CAP_SYS_ADMIN. */

struct quota;

/* With a state_root, the project id is leased there first
 * (<state_root>/quota/<id>, locked while this process lives), so that one
 * left behind by a killed supervisor is reclaimed by quota_sweep(). */
int quota_apply(const char *workspace, uint64_t allowance, const char *sandbox_id,
                const char *state_root, struct quota **ret, struct al_error *err);
/* Whether quota_apply() could limit this workspace: 0, or -errno with the
 * message the run would refuse with (the file system and the fix). */
int quota_check(const char *workspace, struct al_error *err);
/* Bytes the tree grew by, as the quota counts them now, and whether the
 * limit was reached (within one block). */
int quota_usage(struct quota *q, uint64_t *added, bool *at_limit);
/* Clear the project id from the tree and the limit from the id; NULL. */
struct quota *quota_release(struct quota *q);

/* Reclaim every project id leased under state_root whose owner is gone:
 * the id comes off the workspace tree (if its root still carries it) and
 * its limit is cleared; the lease goes. Returns how many, or -errno with
 * `err` naming the first failure (the others are still tried). Called by
 * orphans_sweep(). */
int quota_sweep(const char *state_root, struct al_error *err);

/* The name of a file system type from statfs (ext4, xfs, tmpfs, ...). */
const char *quota_fs_name(long f_type);
