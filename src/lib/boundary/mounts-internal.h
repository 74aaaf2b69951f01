/* SPDX-License-Identifier: Apache-2.0 */
#pragma once

/* Shared between the files of the mounts step (mounts.c, deny.c, protect.c,
 * root.c); not for other modules, which use mounts.h. */

#include <limits.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <sys/types.h>

#include "mounts.h"

#define WORKSPACE "/workspace"

/* "kvm" last: bound only for a microvm run that uses KVM (tier/microvm.h). */
static const char *const dev_nodes[] = {"null", "zero", "full", "random", "urandom", "tty", "kvm"};

/* Where a host path shows up inside the sandbox. */
struct mapping {
        char *host; /* real path */
        char *target;
        bool writable;
};

struct builder {
        const struct mounts_config *c;
        struct al_error *err;
        int root; /* the new root's tmpfs, attached over "/" */
        struct mapping *maps;
        size_t n_maps;
        char *const *deny; /* real host paths to mask (the plan's) */
        size_t n_deny;
        const mode_t *deny_mode;
        const bool *deny_dir;
        char **allowed_at;               /* where each allowRead entry was first shown */
        size_t internal_lo, internal_hi; /* deny[lo..hi) hold Airlock's own state */
};

/* mounts.c */
int mounts_open_in_root(struct builder *b, const char *path, int flags);
int mounts_make_target(struct builder *b, const char *path, bool file);
int mounts_attach(struct builder *b, int mnt, const char *target, bool file);
int mounts_set_attr(int mnt, uint64_t set, bool recursive);
int mounts_clone_tree(int fd, uint64_t attrs);
void mounts_add_mapping(struct builder *b, const char *host, const char *target, bool writable);
bool mounts_path_under(const char *path, const char *dir);
int mounts_check_not_denied(struct builder *b, const char *host);
int mounts_bind_host(struct builder *b, const char *host, const char *target, bool readonly,
                     bool optional);
int mounts_bind_image(struct builder *b, const char *host, const char *target);
int mounts_new_fs(const char *type, const char *const *opts, uint64_t attrs);
int mounts_mount_tmpfs(struct builder *b, const char *target, const char *size, const char *mode,
                       uid_t uid, gid_t gid, uint64_t attrs);

/* deny.c */
int mounts_make_mask(bool dir, int devnull);
int mounts_apply_masks(struct builder *b, int devnull);
void mounts_plan_add_deny(struct mounts_plan *plan, const char *real, mode_t mode, bool dir);
char **mounts_list_homes(const char *caller_home, size_t *ret_n);
char **mounts_passwd_homes(FILE *pw, char **homes, size_t *n);
struct realcache;
/* rc: the plan's realpath cache (realcache.h), or NULL. */
int mounts_resolve_entry(struct mounts_plan *plan, struct realcache *rc, char *const *homes,
                         size_t n_homes, const char *caller_home, const char *entry,
                         bool user_entry, struct al_error *err);

/* protect.c */
int mounts_apply_protect(struct builder *b, int devnull);
void mounts_plan_add_protect(struct mounts_plan *plan, const char *real, bool pin);
void mounts_protect_root(struct mounts_plan *plan, const struct policy *p, const char *real);

/* root.c */
int mounts_build_system(struct builder *b);
int mounts_mount_overlay(struct builder *b, int *ret_upper_fd);
int mounts_build_proc(struct builder *b);
int mounts_build_dev(struct builder *b, const int *nodes, uint64_t shm_size);
int mounts_build_passwd(struct builder *b);
int mounts_build_tool_endpoint(struct builder *b);
