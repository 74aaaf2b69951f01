/* SPDX-License-Identifier: Apache-2.0 */
#pragma once

#include <stdbool.h>
#include <stdint.h>
#include <sys/types.h>

#include "error.h"

/* One cgroup per sandbox, created beneath the caller's own cgroup (which must
 * be writable: root, or a delegated subtree for an ordinary user), removed
 * when the sandbox ends. cgroup v2 is the primary backend; v1 (the hybrid
 * layout) is the fallback. Both sit behind struct cgroup_ops. */

struct cgroup_limits {
        uint64_t memory;     /* bytes, 0 = none; swap is always refused */
        uint64_t pids;       /* 0 = none */
        uint64_t cpus_milli; /* 1000 = one cpu, 0 = none */
};

struct cgroup_usage {
        uint64_t cpu_usec;
        uint64_t memory_peak;
        uint64_t pids_current;
        uint64_t oom_kills;
};

struct cgroup;

struct cgroup_ops {
        const char *name;
        int (*create)(struct cgroup *cg, struct al_error *err);
        int (*apply)(struct cgroup *cg, const struct cgroup_limits *l, struct al_error *err);
        int (*attach)(struct cgroup *cg, pid_t pid, struct al_error *err);
        int (*usage)(struct cgroup *cg, struct cgroup_usage *ret);
        int (*kill)(struct cgroup *cg);
        int (*destroy)(struct cgroup *cg);
};

enum { CGROUP_V1_MAX = 4 };

struct cgroup {
        const struct cgroup_ops *ops;
        char *name; /* leaf name, "airlock-<id>" */
        /* v2: one directory; v1: one per controller hierarchy (memory, pids,
         * cpu, cpuacct; co-mounted controllers share one). */
        char *dirs[CGROUP_V1_MAX];
        size_t n_dirs;
        char *parent_v2; /* v2: the directory the leaf is created in */
        int dir_fd;      /* v2: the leaf, for CLONE_INTO_CGROUP; else -1 */
        bool created;
        bool fake; /* unit tests: control files are plain files */
        struct cgroup_limits limits; /* applied by cgroup_realize() */
};

extern const struct cgroup_ops cgroup_v1_ops;
extern const struct cgroup_ops cgroup_v2_ops;

/* Detect the host's layout and find the caller's cgroup; nothing is created
 * yet. */
int cgroup_open(const char *name, const struct cgroup_limits *l, struct cgroup **ret,
                struct al_error *err);
/* Create the leaf and apply the limits given to cgroup_open(), once. On v1
 * the spawner does this after clone, while the child builds its root. */
int cgroup_realize(struct cgroup *cg, struct al_error *err);
/* Both: on failure nothing is left behind. */
int cgroup_setup(const char *name, const struct cgroup_limits *l, struct cgroup **ret,
                 struct al_error *err);

/* The v2 backend on an explicit hierarchy root and parent (unit tests, and
 * cgroup_setup on a unified host). */
int cgroup_v2_new(const char *parent_dir, const char *name, bool fake, struct cgroup **ret);
/* The v1 backend on explicit per-controller parent directories. */
int cgroup_v1_new(char *const *parent_dirs, size_t n, const char *name, bool fake,
                  struct cgroup **ret);

int cgroup_create(struct cgroup *cg, const struct cgroup_limits *l, struct al_error *err);

/* Kill every process left, remove the leaf; safe to call twice. */
struct cgroup *cgroup_free(struct cgroup *cg);

/* What is left of a sandbox whose owner died without cleaning up: kill every
 * process in each leaf of `dirs` (cgroup.kill on v2, else SIGKILL to each
 * member of cgroup.procs until none is left) and remove the leaves. Only
 * directories beneath /sys/fs/cgroup named airlock-<16 hex digits> are
 * touched (-EINVAL otherwise); missing ones are fine. */
int cgroup_reclaim(char *const *dirs, size_t n);

/* What a daemon finds left of a sandbox: every cgroup named `name` (a leaf
 * such as airlock-<id>) anywhere beneath /sys/fs/cgroup, searched within a
 * bound. One pass that never sleeps: each is killed (cgroup.kill, else
 * SIGKILL through a pidfd to each member whose /proc/PID/cgroup still names
 * it) and removed. Returns 0 when none is left, -EBUSY when some still hold
 * processes: call again a moment later. */
int cgroup_reclaim_named(const char *name);

/* "oom_kill N" style key lookup in a flat keyed file's contents. */
int cgroup_parse_keyed(const char *content, const char *key, uint64_t *ret);
