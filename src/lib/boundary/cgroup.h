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

enum { CGROUP_IO_DEVS_MAX = 16 };

/* Block I/O throttling on the devices in `devs` (whole disks); 0 = none. */
struct cgroup_io {
        uint64_t read_bps, write_bps;
        uint64_t read_iops, write_iops;
        dev_t devs[CGROUP_IO_DEVS_MAX];
        size_t n_devs;
};

struct cgroup_limits {
        uint64_t memory;     /* bytes, 0 = none; swap is always refused */
        uint64_t pids;       /* 0 = none */
        uint64_t cpus_milli; /* 1000 = one cpu, 0 = none */
        struct cgroup_io io;
};

struct cgroup_usage {
        uint64_t cpu_usec;
        uint64_t memory_peak;
        uint64_t pids_current;
        uint64_t oom_kills;
        uint64_t io_read_bytes; /* block I/O charged to the sandbox */
        uint64_t io_write_bytes;
        bool io_measured; /* blkio/io.stat was there to read */
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
        /* Freeze (true) or thaw every process of the leaf: v2 cgroup.freeze,
         * v1 the freezer hierarchy's freezer.state. A freeze waits, within
         * CGROUP_FREEZE_WAIT_MS, until the kernel says every member is
         * frozen (-ETIMEDOUT otherwise); -EOPNOTSUPP without a freezer. */
        int (*freeze)(struct cgroup *cg, bool frozen);
};

enum { CGROUP_V1_MAX = 6, CGROUP_FREEZE_WAIT_MS = 2000 };

/* The v1 controllers Airlock uses, in the order of struct cgroup.ctrls'
 * bits. */
#define CGROUP_V1_CTRLS                                                                            \
        {                                                                                          \
                "memory", "pids", "cpu", "cpuacct", "freezer", "blkio"                             \
        }

struct cgroup {
        const struct cgroup_ops *ops;
        char *name; /* leaf name, "airlock-<id>" */
        /* v2: one directory; v1: one per controller hierarchy (memory, pids,
         * cpu, cpuacct, freezer when mounted and writable, and blkio when
         * mounted; co-mounted controllers share one). */
        char *dirs[CGROUP_V1_MAX];
        size_t n_dirs;
        /* v1 from cgroup_open(): the controllers each of dirs holds, bits
         * of CGROUP_V1_CTRLS' order, so that a control file is written
         * where its name says without looking for it; 0: not known (a
         * tree given to cgroup_v1_new), the file is looked for. */
        unsigned ctrls[CGROUP_V1_MAX];
        char *parent_v2; /* v2: the directory the leaf is created in */
        int dir_fd;      /* v2: the leaf, for CLONE_INTO_CGROUP; else -1 */
        bool created;
        bool fake;                   /* unit tests: control files are plain files */
        struct cgroup_limits limits; /* applied by cgroup_realize() */

        /* The owner's flock on each leaf, held while it lives (cgroup-sweep.c). */
        int locks[CGROUP_V1_MAX];
        size_t n_locks;
        /* cgroup_sweep_later(): sweep beside the leaves once, off the
         * start's path. */
        bool sweep_pending;
};

extern const struct cgroup_ops cgroup_v1_ops;
extern const struct cgroup_ops cgroup_v2_ops;

/* cgroup v1 without favordynmods: start the RCU grace period that the
 * sandbox's move into its cgroup would wait for, in a helper process that
 * moves itself into the cgroup it is already in (cgroup-warm.c). Call it
 * early, once, before anything is cloned; on cgroup v2, or where the
 * caller may not write its own cgroup, it does nothing. cgroup_warm_done()
 * reaps the helper. */
void cgroup_warm(void);
void cgroup_warm_done(void);
/* The v1 `tasks` file of the caller's memory (else pids) cgroup under
 * `root`, from /proc/self/cgroup's text; -ENOENT when neither is there. */
int cgroup_warm_path(const char *self_cgroup, const char *root, char *buf, size_t size);

/* Detect the host's layout and find the caller's cgroup; nothing is created
 * yet. */
int cgroup_open(const char *name, const struct cgroup_limits *l, struct cgroup **ret,
                struct al_error *err);
/* Keep `cg` (from cgroup_open, nothing created) for the next cgroup_open()
 * of the same name in this process, which takes it instead of reading
 * the layout again (a run's record names the leaves, then its supervisor
 * opens them); NULL drops what was kept. */
void cgroup_keep(struct cgroup *cg);
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

/* The kill switch's first step (cgroup->ops->freeze, bounded). */
int cgroup_freeze(struct cgroup *cg, bool frozen);

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

/* The kill switch without a supervisor: ask every cgroup named `name`
 * beneath /sys/fs/cgroup (v2, or v1's freezer hierarchy) to freeze, without
 * waiting. Returns how many were asked. */
int cgroup_freeze_named(const char *name);

/* Leaves whose owner died (cgroup-sweep.c). The owner holds a shared flock
 * on each of its leaves while it lives (taken by cgroup_create, dropped by
 * cgroup_free). A sweep removes each empty airlock-<16 hex> leaf older than
 * min_age_s that nobody holds, in the children of `parent` (cgroup_sweep_dir),
 * beside each of `leaves` (cgroup_sweep_beside: the caller's own parent in
 * each hierarchy, for the leaves cgroup_open would make), or
 * anywhere beneath /sys/fs/cgroup within a bound (cgroup_sweep_all). It
 * kills nothing: a leaf that holds processes stays. Each returns how many
 * leaves it removed. */
enum { CGROUP_SWEEP_MIN_AGE_S = 10 };
int cgroup_lock_leaves(struct cgroup *cg);
void cgroup_unlock_leaves(struct cgroup *cg);
int cgroup_sweep_dir(const char *parent, unsigned min_age_s);
int cgroup_sweep_beside(char *const *leaves, size_t n, unsigned min_age_s);
int cgroup_sweep_all(unsigned min_age_s);
/* cgroup_sweep_beside(cg's leaves) later, once: cgroup_sweep_now() runs it
 * where the spawner waits for the sandbox to build its root, or
 * cgroup_free() when no sandbox was started. Each returns how many leaves
 * the sweep removed (0 when none was pending). */
void cgroup_sweep_later(struct cgroup *cg);
int cgroup_sweep_now(struct cgroup *cg);

/* "oom_kill N" style key lookup in a flat keyed file's contents. */
int cgroup_parse_keyed(const char *content, const char *key, uint64_t *ret);

/* Block I/O (cgroup-io.c). Whether any of limits.io is set. */
bool cgroup_io_limited(const struct cgroup_limits *l);
/* The whole disks backing `paths` (the workspace and mount sources) into
 * l->io.devs. Fails, naming the path, when none is a block device (tmpfs,
 * overlay): I/O there cannot be throttled, and Airlock does not pretend. */
int cgroup_io_devices(char *const *paths, size_t n, struct cgroup_limits *l, struct al_error *err);
/* The io.max line for l->io.devs[i]: "MAJ:MIN rbps=N wbps=max ...". */
int cgroup_io_max_line(const struct cgroup_limits *l, size_t i, char *buf, size_t size);
/* Bytes read and written, summed over devices, from v2 io.stat and v1
 * blkio.throttle.io_service_bytes contents. */
int cgroup_parse_io_stat(const char *content, uint64_t *read, uint64_t *written);
int cgroup_parse_blkio_bytes(const char *content, uint64_t *read, uint64_t *written);

struct policy;
/* The cgroup limits a policy asks for, with the devices limits.io applies to
 * (those backing the workspace and the mounts). */
int cgroup_limits_from_policy(const struct policy *p, struct cgroup_limits *l,
                              struct al_error *err);
