/* SPDX-License-Identifier: Apache-2.0 */
#pragma once

/* What the files of a sandbox's start share (spawn.c, userns.c, netns.c,
 * init.c, sync.c); nothing outside src/lib/boundary includes this. The order
 * of the steps is in spawn_sandbox() and child_main() (spawn.c) and in
 * docs/internals/spawn.md. */

#include <linux/sched.h>
#include <stdbool.h>
#include <stdint.h>
#include <sys/types.h>

#include "error.h"
#include "idrange.h"
#include "mounts.h"
#include "spawn.h"

enum sync_type {
        SYNC_GO = 1,    /* parent -> child: maps written */
        SYNC_CGROUP,    /* parent -> child: cgroup joined (v1) */
        SYNC_LISTENERS, /* child -> parent: gate listener fds attached */
        SYNC_UPPER,     /* child -> parent: the review layer's upper directory */
        SYNC_STARTED,   /* pid 1 -> parent: the command passed execve */
        SYNC_ERROR,     /* child or pid 1 -> parent: a step failed */
        SYNC_EXIT,      /* pid 1 -> parent: the command's wait status */
        SYNC_EXEC,      /* parent -> pid 1: start a process (idle sandboxes) */
        SYNC_KILL,      /* parent -> pid 1: signal a process's group */
        SYNC_PTY,       /* pid 1 -> parent: the command's terminal master */
        SYNC_TOOL,      /* child -> parent: the tool gateway's listening socket */
        SYNC_NOTIFY,    /* child -> parent: transparent mode: the name server's UDP
                         * socket, the relay's listener, then the connect()
                         * notification listener (none: the kernel refused it) */
        SYNC_NETNS,     /* child -> parent: the sandbox's network namespace, once
                         * the child has joined it (netns.c) */
};

struct sync_msg {
        uint32_t type;
        int32_t code;      /* errno */
        int32_t value;     /* enum spawn_failure, or a wait status, or a signal */
        int32_t id;        /* the process, in an idle sandbox */
        uint64_t usage[3]; /* SYNC_EXIT: user ms, system ms, max RSS KiB */
        uint32_t as_user;  /* SYNC_EXEC: 1 + the inside uid to run as; 0: the sandbox's own */
        char text[AL_ERROR_MAX];
};

/* An exec request's payload after the header: u32 argc, u32 envc, then
 * NUL-terminated cwd, argv and env strings. */
#define EXEC_PAYLOAD_MAX (128 * 1024)

struct child_ctx {
        const struct spawn_config *cfg;
        int sync;
        uid_t uid;
        gid_t gid;
        bool cgroup_in_clone;
        int workspace_fd;
        struct rootdir *image; /* tier container: the image's root (tier.h), else NULL */
        const int *mount_fds;
        const struct mounts_plan *plan;
        struct idrange ids; /* policy "users": the other users' host ids */
        /* A root caller's read-write host tree is not (wholly) idmapped:
         * another inside user could leave files of its host id there. */
        bool plain_writable;
        /* The network namespace is made by a helper of the child's beside
         * the root's construction, not by clone3 (netns.c): its pid, and
         * its answer, the namespace's fd or -errno, written by it. */
        bool netns_deferred;
        pid_t netns_helper;
        volatile long netns_result;
        volatile long netns_lo; /* lo brought up by the helper: 0 or -errno */
};

/* sync.c */
int spawn_sync_send(int fd, uint32_t type, int code, int value, const char *text);
int spawn_sync_recv(int fd, struct sync_msg *m, int *fds, size_t max_fds, size_t *ret_nfds);
struct msghdr;
/* The descriptors a received message carries, appended at fds[*nfds] up
 * to max_fds; any beyond are closed. */
void spawn_sync_take_fds(struct msghdr *mh, int *fds, size_t max_fds, size_t *nfds);
int spawn_send_fds(int sock, uint32_t type, const int *fds, size_t n);
int spawn_send_msg(int fd, const struct sync_msg *m);
int spawn_send_msg_fd(int fd, const struct sync_msg *m, int pass_fd);
bool spawn_watch_owner(int sync);
_Noreturn void spawn_child_fail(int sync, enum spawn_failure kind, const struct al_error *e,
                                int exit_code);

/* spawn.c. cgroup v2: a leaf made (cgroup_realize) is entered at clone,
 * with a cgroup namespace rooted in it: no move afterwards, so no wait for
 * the RCU grace period a move takes. Sets args' flags and cgroup; false
 * when cg has no leaf descriptor (v1: the spawner moves the child). */
bool spawn_clone_into_cgroup(const struct cgroup *cg, struct clone_args *args);

/* userns.c */
extern pid_t spawn_idmap_helper;
/* Reap the idmapped mount's namespace holder, if one is pending, and free
 * its stack. */
void spawn_reap_idmap_helper(void);
bool spawn_only_own_group(void);
int spawn_write_maps(pid_t pid, uid_t uid_in, uid_t uid_out, gid_t gid_in, gid_t gid_out,
                     bool deny_setgroups);
pid_t spawn_sys_clone3(struct clone_args *args);
/* *ret_idmapped (may be NULL): true when the whole tree (its submounts
 * too) is idmapped, so no other inside id can own a file made in it. */
int spawn_prepare_idmapped(const char *path, uid_t host_uid, gid_t host_gid, int *ret_fd,
                           bool *ret_idmapped, struct al_error *err);
/* The same for the tree `fd` (O_PATH) holds, already opened and checked by
 * the caller: nothing is looked up by path again (`path` only names it in
 * messages), and a tree that cannot be cloned fails (-errno), as the mount
 * would otherwise be made from the path. */
int spawn_prepare_idmapped_fd(int fd, const char *path, uid_t host_uid, gid_t host_gid, int *ret_fd,
                              bool *ret_idmapped, struct al_error *err);

/* netns.c */
void spawn_netns_setup(struct child_ctx *ctx);
/* With ctx->netns_deferred: start the helper that makes the sandbox's
 * network namespace (the child's first step), and join what it made
 * (after the root is built, before spawn_netns_setup), telling the parent
 * (SYNC_NETNS). */
void spawn_netns_start(struct child_ctx *ctx);
void spawn_netns_join(struct child_ctx *ctx);
/* connect-notify.c: gated: the name server's socket and the connect()
 * notification filter on pid 1, both sent to the parent (SYNC_NOTIFY). */
void spawn_transparent_setup(struct child_ctx *ctx);

/* pty.c: a fresh pty pair in the sandbox's devpts, sized rows x cols. */
int spawn_pty_open(uint16_t rows, uint16_t cols, int *ret_master, int *ret_slave);

/* An exec request's terminal travels in sync_msg.value: 1 << 31 | rows << 15 | cols,
 * or 0 for none. */
#define SYNC_TTY_ON (1U << 31)

/* toolsock.c */
void toolsock_setup(struct child_ctx *ctx);

/* init.c */
_Noreturn void spawn_init_main(struct child_ctx *ctx);
_Noreturn void spawn_init_serve(struct child_ctx *ctx);
