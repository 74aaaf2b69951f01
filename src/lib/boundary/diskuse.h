/* SPDX-License-Identifier: Apache-2.0 */
#pragma once

#include <stdbool.h>
#include <stdint.h>

/* The peak disk use of a sandbox's workspace (usage.diskPeakBytes): what it
 * grew by at most, sampled while the sandbox runs, from the cheapest source
 * that counts it:
 *  - review mode: the used bytes of the copy-on-write layer's own tmpfs
 *    (made empty for the sandbox, so counted from zero);
 *  - a workspace with a project quota: the project's usage (quota.h);
 *  - any other read-write workspace: the tree's allocated bytes, walked on
 *    the host, never following a link or leaving its file system, at most
 *    DISKUSE_TREE_ENTRIES entries a walk, and walked again no sooner than a
 *    second later nor than 20 times what the last walk took (at most ~5% of
 *    one CPU). A tree over the cap, or whose first walk (before the sandbox
 *    starts) takes over DISKUSE_BASE_BUDGET_US, is not measured (null).
 *    The walks after the base run in a helper process (diskuse.c): a
 *    periodic sample never waits for one.
 * A file that lives shorter than one sample interval can be missed: it is a
 * peak of samples, not an enforced limit (limits.workspaceDisk is that). */

enum { DISKUSE_TREE_ENTRIES = 10000 };
/* The base walk of a tree happens before the sandbox starts, and the last
 * one as it ends: each at most this long (µs), so that neither costs a run
 * more. A base that runs out leaves the tree unmeasured; a last walk that
 * runs out keeps the peak sampled before it. */
enum { DISKUSE_BASE_BUDGET_US = 5000 };

struct disk_meter;
struct quota;

/* The three sources; the base is taken now, before the sandbox runs (for
 * a tree: within DISKUSE_BASE_BUDGET_US). fd is borrowed and must outlive
 * the meter. */
struct disk_meter *disk_meter_fs(int fd);
struct disk_meter *disk_meter_quota(struct quota *q);
struct disk_meter *disk_meter_tree(const char *path);

/* Sample now if the source's interval has passed (force: regardless). For a
 * tree, a periodic sample takes the helper's answer if it is there and asks
 * for the next walk when one is due, without waiting; a forced one (the
 * last) waits a bounded time and keeps what it had if no answer comes. */
void disk_meter_sample(struct disk_meter *m, uint64_t now_us, bool force);
/* The largest growth sampled and the last one; false when not measured. */
bool disk_meter_result(const struct disk_meter *m, uint64_t *ret_peak, uint64_t *ret_last);
struct disk_meter *disk_meter_free(struct disk_meter *m);

/* The allocated bytes of the tree at dfd (its own file system only); -E2BIG
 * past max_entries. Exposed for the tests. */
int diskuse_tree_bytes(int dfd, uint64_t max_entries, uint64_t *ret_bytes);
