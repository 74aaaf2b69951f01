/* SPDX-License-Identifier: Apache-2.0 */
#pragma once

#include <stdbool.h>
#include <sys/types.h>

#include "cgroup.h"
#include "error.h"

/* linux.cgroupsPath followed (docs/kubernetes.md): the container's cgroup
 * is the one the spec names, with runc's meaning: an absolute path is
 * relative to each hierarchy's root, a relative one to the runtime's own
 * cgroup there. The leaf is made here and must not exist yet; missing
 * parents are made (and left, as their owner, the kubelet or containerd,
 * expects). On v1 the leaf is made in every hierarchy the runtime is a
 * member of; the limits go in the memory, pids, cpu, cpuacct, freezer and
 * blkio ones (the boundary library's struct cgroup). */

struct rt_cgpath {
        struct cgroup *cg; /* the limits' leaf: created, limits applied */
        char **leaves;     /* every leaf directory (NULL-terminated), for state.json */
        char **home;       /* the runtime's own cgroup directory in each hierarchy */
        bool v2;
};

/* Resolve `spec_path` on this host (/sys/fs/cgroup, v1 or v2), make the
 * leaf and apply `l`. */
int rt_cgpath_setup(const char *spec_path, const struct cgroup_limits *l, struct rt_cgpath *ret,
                    struct al_error *err);
/* The v2 path on an explicit hierarchy `root` for a caller whose own cgroup
 * is `own` ("/..."); `fake`: control files are plain files (unit tests),
 * and each directory made gets its parent's cgroup.controllers as the
 * kernel would show it. */
int rt_cgpath_setup_v2(const char *root, const char *own, const char *spec_path,
                       const struct cgroup_limits *l, bool fake, struct rt_cgpath *ret,
                       struct al_error *err);
/* Move `pid` into the leaf in every hierarchy. */
int rt_cgpath_enter(const struct rt_cgpath *c, pid_t pid, struct al_error *err);
/* Move the calling process back to where it came from (before the leaf is
 * emptied: emptying kills whatever is in it). */
void rt_cgpath_leave(const struct rt_cgpath *c);
/* Kill what is left in the leaves and remove them; the handle goes. */
void rt_cgpath_free(struct rt_cgpath *c);
/* What delete does with state.json's leaves: kill and remove each leaf
 * (only directories beneath /sys/fs/cgroup/, never a hierarchy's root).
 * `ids` (rt_cgpath_id of each, as made; NULL for leaves the caller holds):
 * a leaf that is no longer the cgroup made then (removed, and the path
 * taken since by another container) is left alone. 0 when all are gone,
 * -EBUSY when one still held processes. */
int rt_cgpath_reclaim(char *const *leaves, char *const *ids, bool v2);
/* Which cgroup `dir` is ("DEV:INO": a cgroup's inode number is its id,
 * never reused while the host runs), or NULL when it is not there. */
char *rt_cgpath_id(const char *dir);
