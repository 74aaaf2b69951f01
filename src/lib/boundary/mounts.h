/* SPDX-License-Identifier: Apache-2.0 */
#pragma once

#include <stdbool.h>
#include <stdint.h>
#include <sys/types.h>

#include "error.h"
#include "policy.h"
#include "rootdir.h"

/* What the parent resolves before the sandbox starts, with the caller's own
 * view of the host: the deny list as real paths, and the real paths of the
 * workspace and the mount sources, each checked against it. */
struct mounts_plan {
        char **deny;
        size_t n_deny;
        mode_t *deny_mode;               /* what is there (S_IFMT), or 0: nothing yet, masked
                                          * only where the sandbox could create it */
        bool *deny_dir;                  /* for nothing yet: mask as a directory, not a file */
        size_t internal_lo, internal_hi; /* deny[lo..hi) hold Airlock's own state */
        char **protect; /* real host paths made read-only wherever writable inside */
        size_t n_protect;
        bool *protect_pin; /* only made a mount point (cannot be renamed aside) */
        char **allow_read; /* real host paths shown again under a mask */
        size_t n_allow_read;
        int *allow_read_fds; /* detached clones made with the caller's view, or -1 */
        char *workspace_real;
        int workspace_ro_fd; /* read-only workspace: a detached clone, or -1 */
        int workspace_fd;    /* root: the workspace as trusted_open walked it, or -1 */
        char **mount_reals;  /* one per policy mount */
        int *mount_ro_fds;   /* read-only mounts: detached clones, or -1 */
        int tool_bin_fd;     /* airlock-tool: a detached read-only clone, or -1 */
        /* A container's root file system (mounts_plan_rootfs), listed
         * (rootdir.h, ROOTDIR_BUNDLE), or NULL. */
        struct rootdir *rootfs;
};

/* Resolve the plan in the parent, as the caller. Fails (naming the path and
 * what to do) on a deny entry the caller cannot resolve, a broad workspace
 * without workspace.allowBroad, a mount source that cannot be resolved, and
 * an allowRead entry on the mandatory list. Also lists what is made
 * read-only (the write-protect list, denyWrite, git metadata) and makes the
 * read-only trees a root caller's sandbox user could not reach. */
int mounts_plan_new(const struct policy *p, const char *caller_home, struct mounts_plan **ret,
                    struct al_error *err);
struct mounts_plan *mounts_plan_free(struct mounts_plan *plan, size_t n_mounts);
/* Resolve the deny list of p for caller_home ahead, on a thread of this
 * process, while the caller does other work (a cold run's audit log, run
 * record and git snapshot): the next mounts_plan_new() of the same policy
 * joins it and takes its answer when the policy's deny entries and the home
 * are still the ones it copied, else resolves them again. No thread may be
 * alive when a sandbox is cloned (spawn.md): mounts_plan_new() joins it, and
 * mounts_deny_ahead_end() joins and drops it (call it on every way out). */
void mounts_deny_ahead(const struct policy *p, const char *caller_home);
void mounts_deny_ahead_end(void);
/* The broad workspaces mounts_plan_new refuses (/, a system directory,
 * any home in /etc/passwd or a directory holding one), with the same
 * message: for a caller that would otherwise look at the workspace's files
 * first. 0 when it cannot tell (the plan checks again, in full). */
/* As root: refuse (-EPERM, err naming the component and what to do) a
 * workspace with a directory on its path that another user can change
 * (trusted.h); 0 otherwise, and for a path that cannot be walked (the plan
 * says why). */
int mounts_workspace_trusted(const struct policy *p, struct al_error *err);

int mounts_workspace_quick_check(const struct policy *p, const char *caller_home,
                                 struct al_error *err);
/* An O_PATH fd on a mount's source: a repository's (in_workspace) opened
 * beneath the workspace with no link followed on the way, so a directory
 * swapped for a link after the check cannot redirect it; any other opened
 * by path with O_NOFOLLOW. The workspace is ws_fd when the plan pinned it
 * (root: mounts_plan.workspace_fd, never its path again), else the
 * policy's path. -errno on failure. */
int mounts_open_source(const struct policy *p, int ws_fd, const struct policy_mount *m);
/* The tool gateway's client for the endpoint (mounts_config.tool_bin):
 * checked here, as the caller, and cloned read-only when the caller can
 * (root: the sandbox user may not reach the install directory). */
int mounts_plan_tool(struct mounts_plan *plan, const char *bin, struct al_error *err);
/* A container's root file system (spawn_config.rootfs), listed and cloned
 * as the caller: the sandbox user need not reach the directory. */
int mounts_plan_rootfs(struct mounts_plan *plan, const char *rootfs, bool readonly,
                       struct al_error *err);

struct mounts_config {
        const struct mounts_plan *plan;
        const struct policy *policy;
        const char *home; /* $HOME inside the sandbox */
        uid_t uid;        /* owner of $HOME inside */
        gid_t gid;
        const char *caller_home; /* the caller's home on the host, for "~" in deny entries */
        /* Detached mounts prepared by the parent (idmapped for a root caller),
         * or -1 to bind the host path directly: the workspace, and one per
         * policy mount. */
        int workspace_fd;
        const int *mount_fds;
        /* The tool gateway's endpoint: a tmpfs at SPAWN_TOOL_DIR (spawn.h)
         * with this host file bound read-only at SPAWN_TOOL_BIN; NULL: none. */
        const char *tool_bin;
        /* A host file bound read-only over SPAWN_CA_BUNDLE; NULL: none. */
        const char *ca_bundle;
        /* Tier container: the image's root (tier.h), shown read-only
         * instead of the host's system directories; NULL: none. */
        const struct rootdir *image;
        /* A container's root file system (spawn_config.rootfs), or NULL. */
        const char *rootfs;
        bool rootfs_readonly;
        /* Fresh tmpfs directories (a container's tmpfs mounts), each of
         * limits.disk, owned by the sandbox user; NULL-terminated or NULL. */
        char *const *tmpfs_dirs;
        const uint64_t *tmpfs_sizes; /* bytes, one per dir, at most limits.disk */
};

/* In the parent, before the sandbox starts: make the workspace's .git/hooks
 * and .git/config exist (so that they can be covered read-only) and refuse
 * them as symbolic links. */
int mounts_prepare_workspace(const struct policy *p, struct al_error *err);

/* In the child, inside its new user and mount namespaces: build the new root
 * on a tmpfs and pivot into it. Every bind source is opened with
 * O_PATH|O_NOFOLLOW before anything is mounted; every target is resolved
 * inside the new root (RESOLVE_IN_ROOT), so no symlink on either side can
 * redirect a mount. With an overlay workspace, *ret_upper_fd receives the
 * upper layer's directory. */
int mounts_build_root(const struct mounts_config *c, int *ret_upper_fd, struct al_error *err);

/* The sandbox paths the Landlock write allow-list starts from (NULL-terminated,
 * static storage): /tmp, $HOME, /dev/shm, the workspace when writable. */
size_t mounts_writable_paths(const struct mounts_config *c, const char **ret, size_t max);

/* ---- a mount added to a running sandbox (livemount.c) ---- */

struct mounts_live_request {
        const struct policy *policy; /* the sandbox's: its deny lists, its writable paths */
        const char *caller_home;     /* for "~" in deny entries, as at the start */
        const char *home;            /* $HOME inside */
        pid_t pid1;                  /* the sandbox's pid 1, as the host sees it */
        uid_t host_uid;              /* what the sandbox user is on the host */
        gid_t host_gid;
        const char *source, *target;
        bool readonly;
};

struct mounts_live {
        int tree_fd;        /* the detached tree; once attached, the mount's root */
        int *protect_fds;   /* read-only covers for write-protected paths in it */
        char **protect_rel; /* where each goes, below the target */
        size_t n_protect;
};

/* Check and clone, on the host side, with the start's checks: no symbolic
 * link anywhere on the source's path or the target's (inside), the deny
 * list (a source under or holding a denied path is refused), nosuid and
 * nodev, read-only or idmapped as at the start, write-protected paths
 * covered read-only; a read-write mount only where the sandbox's Landlock
 * rules let it write. Only a root supervisor can (EPERM otherwise). err
 * says why and what to do. */
int mounts_live_prepare(const struct mounts_live_request *q, struct mounts_live *ret,
                        struct al_error *err);
/* Move it into the sandbox's mount namespace at `target`. Keeps tree_fd
 * (the mount's root) for mounts_live_detach. */
int mounts_live_attach(int pidfd, struct mounts_live *m, const char *target, struct al_error *err);
/* Detach it (MNT_DETACH) inside, by the mount rather than by its path;
 * clears m. */
int mounts_live_detach(int pidfd, struct mounts_live *m, const char *target, struct al_error *err);
void mounts_live_clear(struct mounts_live *m);

/* The names write protection covers at the top of a writable tree where
 * they exist at start (one level of directory at most: "A" or "A/B"); what
 * the agent makes under them is moved aside at the end (gitguard). */
extern const char *const mounts_write_protect[];
extern const size_t mounts_n_write_protect;
