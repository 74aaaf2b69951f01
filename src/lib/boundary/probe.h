/* SPDX-License-Identifier: Apache-2.0 */
#pragma once

#include <stdbool.h>
#include <stddef.h>

/* What `airlock doctor` asks of the host: one check per thing an isolation
 * tier needs, each with what was found and, when it fails, the fix. The
 * checks run the real kernel interfaces (a child unshares the namespaces a
 * sandbox gets and mounts in them; the cgroup layout is found as a run finds
 * it), so their verdict is the run's. Nothing here prints. */

enum { PROBE_TEXT_MAX = 512 };

struct probe_check {
        const char *name; /* "userns", "cgroup", ... (static) */
        bool ok;
        char detail[PROBE_TEXT_MAX]; /* what was found */
        char fix[PROBE_TEXT_MAX];    /* what to do; "" when ok or nothing to do */
};

/* The namespace tier's needs. */
void probe_userns(struct probe_check *c);
void probe_cgroup(struct probe_check *c);
void probe_landlock(struct probe_check *c);
void probe_seccomp(struct probe_check *c);

/* Facts for the tiers not built yet. */
void probe_runsc(struct probe_check *c);
void probe_kvm(struct probe_check *c);

/* A workspace: whether limits.workspaceDisk (project quotas) and limits.io
 * (a block device to throttle) can be had on it. */
void probe_workspace_quota(const char *path, struct probe_check *c);
void probe_workspace_io(const char *path, struct probe_check *c);

/* Host settings that cost start time, not availability (a failed one
 * slows every start, nothing more): whether a move into a cgroup waits for
 * an RCU grace period (cgroup v1 without favordynmods). */
void probe_start_cost(struct probe_check *c);
/* The same from /proc/mounts' text. */
void probe_start_cost_of(const char *mounts, struct probe_check *c);

/* The cgroup mounts in /proc/mounts' text, how many carry the
 * favordynmods option, and where the first cgroup v2 one is mounted. */
struct probe_dynmods {
        size_t v1, v1_favor;
        size_t v2, v2_favor;
        char v2_at[256]; /* "" when there is none */
};
int probe_cgroup_dynmods(const char *mounts, struct probe_dynmods *ret);
