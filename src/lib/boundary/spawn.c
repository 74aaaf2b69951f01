/* SPDX-License-Identifier: Apache-2.0 */
#include <errno.h>
#include <fcntl.h>
#include <grp.h>
#include <linux/sched.h>
#include <net/if.h>
#include <netinet/in.h>
#include <sched.h>
#include <signal.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/mount.h>
#include <poll.h>
#include <sys/prctl.h>
#include <sys/resource.h>
#include <sys/signalfd.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/wait.h>

#include "cgroup.h"
#include "confine.h"
#include "idle.h"
#include "mounts.h"
#include "spawn.h"
#include "tier.h"
#include "trace.h"
#include "util.h"
#include "vmchild.h"
#include "volume.h"
#include "spawn-internal.h"

const uint16_t spawn_listen_ports[SPAWN_LISTEN_MAX] = {3128, 1080, 8080};

/* The setup child, in its new namespaces (user, mount, pid, net, ipc, uts):
 * each step reports a failure to the parent over the sync socket and exits
 * 125 (spawn_child_fail); the parent's half is spawn_sandbox() below. */

/* Wait for the parent's go (the uid/gid maps are written), then become the
 * sandbox user now: files and mount points made during setup must belong to
 * an id mapped in the namespace. The map has no uid 0 (or the caller is not
 * it), so the capabilities of the namespace's creator survive the change
 * until dropped explicitly. */
static void child_become_user(struct child_ctx *ctx)
{
        struct al_error err = {0};
        struct sync_msg m;
        int r;

        al_trace_mark("child.start");
        if (!spawn_watch_owner(ctx->sync))
                _exit(125);

        r = spawn_sync_recv(ctx->sync, &m, NULL, 0, NULL);
        if (r < 0 || m.type != SYNC_GO)
                _exit(125);
        al_trace_mark("child.go");

        if (setresgid(ctx->gid, ctx->gid, ctx->gid) < 0 ||
            setresuid(ctx->uid, ctx->uid, ctx->uid) < 0) {
                al_error_set(&err, errno, "switching to uid %u", (unsigned)ctx->uid);
                spawn_child_fail(ctx->sync, SPAWN_FAILED_SETUP, &err, 125);
        }
        /* setresuid() cleared the parent-death signal. */
        if (!spawn_watch_owner(ctx->sync))
                _exit(125);
        al_trace_mark("child.user");
}

/* The new root (mounts.c); an overlay workspace's upper directory goes to
 * the parent for review. */
static void child_build_root(struct child_ctx *ctx)
{
        const struct spawn_config *cfg = ctx->cfg;
        const struct policy *p = cfg->policy;
        struct al_error err = {0};
        int r;

        struct mounts_config mc = {
            .plan = ctx->plan,
            .policy = p,
            .home = cfg->home,
            .uid = ctx->uid,
            .gid = ctx->gid,
            .caller_home = cfg->caller_home,
            .workspace_fd = ctx->workspace_fd,
            .mount_fds = ctx->mount_fds,
            .tool_bin = cfg->tool_bin,
            .ca_bundle = cfg->ca_bundle,
            .image = ctx->image,
            .rootfs = cfg->rootfs,
            .rootfs_readonly = cfg->rootfs_readonly,
            .tmpfs_dirs = cfg->tmpfs_dirs,
            .tmpfs_sizes = cfg->tmpfs_sizes,
        };
        int upper = -1;
        r = mounts_build_root(&mc, &upper, &err);
        if (r < 0)
                spawn_child_fail(ctx->sync, SPAWN_FAILED_SETUP, &err, 125);
        if (upper >= 0) {
                r = spawn_send_fds(ctx->sync, SYNC_UPPER, &upper, 1);
                close(upper);
                if (r < 0)
                        _exit(125);
        }
}

static void child_set_hostname(struct child_ctx *ctx)
{
        struct al_error err = {0};
        const char *name = ctx->cfg->hostname ? ctx->cfg->hostname : "airlock";
        if (sethostname(name, strlen(name)) < 0) {
                al_error_set(&err, errno, "setting the host name");
                spawn_child_fail(ctx->sync, SPAWN_FAILED_SETUP, &err, 125);
        }
        al_trace_mark("child.hostname");
}

/* On v1 the parent moves this process into the cgroup while the root is
 * being built (the move waits for an RCU grace period, so it runs in
 * parallel); wait for it, then root the cgroup namespace there, so the
 * sandbox sees its own cgroup as "/". */
static void child_join_cgroup(struct child_ctx *ctx)
{
        const struct spawn_config *cfg = ctx->cfg;
        struct al_error err = {0};
        struct sync_msg m;
        int r;

        if (!ctx->cgroup_in_clone) {
                if (cfg->cgroup) {
                        r = spawn_sync_recv(ctx->sync, &m, NULL, 0, NULL);
                        if (r < 0 || m.type != SYNC_CGROUP)
                                _exit(125);
                        al_trace_mark("child.cgroup_wait");
                }
                if (unshare(CLONE_NEWCGROUP) < 0) {
                        al_error_set(&err, errno, "creating the cgroup namespace");
                        spawn_child_fail(ctx->sync, SPAWN_FAILED_SETUP, &err, 125);
                }
                al_trace_mark("child.cgroupns");
        }
}

static _Noreturn void child_main(struct child_ctx *ctx)
{
        if (ctx->netns_deferred)
                spawn_netns_start(ctx); /* netns.c: made beside the root */
        child_become_user(ctx);         /* waits for the maps, then setresuid */
        if (!ctx->cfg->share_net && !ctx->netns_deferred) {
                spawn_netns_setup(ctx); /* netns.c: lo up, the gate's listeners */
                al_trace_mark("child.net");
        }
        child_build_root(ctx); /* mounts.c: the new root, pivot_root */
        if (ctx->netns_deferred) {
                spawn_netns_join(ctx);  /* before any socket is made */
                spawn_netns_setup(ctx); /* lo up, the gate's listeners */
                al_trace_mark("child.net");
        }
        toolsock_setup(ctx); /* toolsock.c: the tool gateway's socket */
        if (!ctx->cfg->share_uts)
                child_set_hostname(ctx); /* uts */
        child_join_cgroup(ctx);          /* v1: waits for the parent's attach */
        if (ctx->cfg->argv)
                spawn_init_main(ctx); /* init.c: pid 1 runs the command */
        spawn_init_serve(ctx);        /* init.c: pid 1 of an idle sandbox */
}

static void kill_and_reap(pid_t pid)
{
        if (pid <= 0)
                return;
        kill(pid, SIGKILL);
        while (waitpid(pid, NULL, 0) < 0 && errno == EINTR)
                ;
}

/* The parent's half, run by spawn_sandbox() in this order. */

static int check_workspace(const struct policy *p, struct al_error *err)
{
        if (p->workspace) {
                struct stat st;
                if (stat(p->workspace, &st) < 0)
                        return al_error_set(err, errno, "workspace %s", p->workspace);
                if (!S_ISDIR(st.st_mode))
                        return al_error_set(err, ENOTDIR, "workspace %s", p->workspace);
        }
        return mounts_prepare_workspace(p, err);
}

/* The locks of the volumes this process attached: kept open for the life
 * of the process, the sandbox's supervisor, so that a killed supervisor's
 * locks go with it (volume.h). */
static int volume_locks[64];
static size_t n_volume_locks;

/* Lock and mount each named volume, into *mount_fds (allocated when NULL,
 * every entry -1 before any can fail). */
static int prepare_volumes(const struct policy *p, int **mount_fds, struct al_error *err)
{
        size_t n = 0;
        for (size_t i = 0; i < p->n_mounts; i++)
                n += p->mounts[i].volume != NULL;
        if (n == 0)
                return 0;
        if (n_volume_locks + n > ARRAY_SIZE(volume_locks))
                return al_error_set_message(err, E2BIG, "too many volumes (at most %zu)",
                                            ARRAY_SIZE(volume_locks));
        if (!*mount_fds) {
                *mount_fds = xcalloc(p->n_mounts + 1, sizeof(int));
                for (size_t i = 0; i < p->n_mounts; i++)
                        (*mount_fds)[i] = -1;
        }
        for (size_t i = 0; i < p->n_mounts; i++) {
                if (!p->mounts[i].volume)
                        continue;
                int lock = -1;
                int r = volume_attach(p->mounts[i].volume, p->mounts[i].readonly, &lock,
                                      &(*mount_fds)[i], err);
                if (r < 0) {
                        al_error_wrap(err, "volume %s at %s", p->mounts[i].volume,
                                      p->mounts[i].target);
                        return r;
                }
                volume_locks[n_volume_locks++] = lock;
        }
        return 0;
}

static void release_volumes(size_t mark)
{
        volume_forget_all(); /* before the locks: never saved after another attached */
        while (n_volume_locks > mark)
                close(volume_locks[--n_volume_locks]);
}

/* For a root caller: no supplementary groups, and the writable trees as
 * idmapped mounts (userns.c). *mount_fds is set before any can fail, so
 * that the caller closes what was opened. */
static int prepare_root_caller(struct child_ctx *ctx, uid_t host_uid, gid_t host_gid,
                               int **ret_mount_fds, struct al_error *err)
{
        const struct policy *p = ctx->cfg->policy;
        int *mount_fds;
        int r;

        /* The sandbox keeps its creator's supplementary groups for good
         * (setgroups is denied inside): root's must not go with it. */
        if (setgroups(0, NULL) < 0 && !spawn_only_own_group()) {
                r = al_error_set(err, errno, "dropping supplementary groups");
                return r;
        }
        if (p->workspace && p->workspace_mode != POLICY_WORKSPACE_RO) {
                /* The path the plan resolved and checked (no link on it). */
                const char *ws = ctx->plan && ctx->plan->workspace_real ? ctx->plan->workspace_real
                                                                        : p->workspace;
                bool idmapped = false;
                /* The directory the plan walked and checked, by its fd. */
                if (ctx->plan && ctx->plan->workspace_fd >= 0)
                        r = spawn_prepare_idmapped_fd(ctx->plan->workspace_fd, ws, host_uid,
                                                      host_gid, &ctx->workspace_fd, &idmapped, err);
                else
                        r = spawn_prepare_idmapped(ws, host_uid, host_gid, &ctx->workspace_fd,
                                                   &idmapped, err);
                if (r < 0)
                        return r;
                ctx->plain_writable |= !idmapped;
        }
        mount_fds = xcalloc(p->n_mounts + 1, sizeof(int));
        *ret_mount_fds = mount_fds;
        /* All -1 before any is made: a failure part way closes only what
         * was opened, never fd 0. */
        for (size_t i = 0; i < p->n_mounts; i++)
                mount_fds[i] = -1;
        for (size_t i = 0; i < p->n_mounts; i++) {
                if (p->mounts[i].readonly || p->mounts[i].volume)
                        continue;
                const char *src = ctx->plan && ctx->plan->mount_reals && ctx->plan->mount_reals[i]
                                      ? ctx->plan->mount_reals[i]
                                      : p->mounts[i].source;
                bool idmapped = false;
                r = spawn_prepare_idmapped(src, host_uid, host_gid, &mount_fds[i], &idmapped, err);
                if (r < 0)
                        return r;
                ctx->plain_writable |= !idmapped;
        }
        ctx->mount_fds = mount_fds;
        return 0;
}

bool spawn_clone_into_cgroup(const struct cgroup *cg, struct clone_args *args)
{
        if (!cg || cg->dir_fd < 0)
                return false;
        args->flags |= CLONE_INTO_CGROUP | CLONE_NEWCGROUP;
        args->cgroup = (uint64_t)cg->dir_fd;
        return true;
}

/* clone3 into the new namespaces (and, on v2, straight into the cgroup).
 * Returns the child's pid in the parent, 0 in the child, or -errno. */
static pid_t clone_sandbox(struct child_ctx *ctx, int *pidfd, struct al_error *err)
{
        const struct spawn_config *cfg = ctx->cfg;
        int r;

        struct clone_args args = {
            .flags = CLONE_NEWUSER | CLONE_NEWNS | CLONE_NEWPID | CLONE_NEWNET | CLONE_NEWIPC |
                     CLONE_NEWUTS | CLONE_PIDFD,
            .exit_signal = SIGCHLD,
        };
        args.pidfd = (uint64_t)(uintptr_t)pidfd;
        /* The child's helper makes the network namespace (netns.c). */
        if (cfg->share_net || ctx->netns_deferred)
                args.flags &= ~(uint64_t)CLONE_NEWNET;
        if (cfg->share_ipc)
                args.flags &= ~(uint64_t)CLONE_NEWIPC;
        if (cfg->share_uts)
                args.flags &= ~(uint64_t)CLONE_NEWUTS;
        /* v2 places the child at clone: the cgroup must exist first. */
        if (cfg->cgroup && cfg->cgroup->ops == &cgroup_v2_ops) {
                r = cgroup_realize(cfg->cgroup, err);
                if (r < 0)
                        return r;
                al_trace_mark("cgroup.create");
        }
        ctx->cgroup_in_clone = spawn_clone_into_cgroup(cfg->cgroup, &args);

        pid_t pid = spawn_sys_clone3(&args);
        if (pid < 0) {
                r = -errno;
                const char *why = spawn_userns_disabled_reason();
                if (r == -ENOSYS)
                        r = al_error_set(err, ENOSYS,
                                         "this kernel lacks clone3 (Linux 5.3 or later is needed)");
                else if (why && (r == -EPERM || r == -ENOSPC || r == -EACCES || r == -EINVAL))
                        r = al_error_set(err, 0, "cannot create the sandbox: %s", why);
                else
                        r = al_error_set(err, r, "creating the sandbox's namespaces");
                return r;
        }
        return pid;
}

/* The child's uid/gid maps, its go, and on v1 its cgroup. */
static int release_child(const struct child_ctx *ctx, pid_t pid, uid_t host_uid, gid_t host_gid,
                         int sync, struct al_error *err)
{
        const struct spawn_config *cfg = ctx->cfg;
        const struct policy *p = cfg->policy;
        int r;

        if (ctx->ids.users) /* several users inside (idrange.c) */
                r = idrange_write_maps(&ctx->ids, pid, p->uid, host_uid, p->gid, host_gid, err);
        else
                r = spawn_write_maps(pid, p->uid, host_uid, p->gid, host_gid, true);
        al_trace_mark("userns.map");
        if (r < 0 && ctx->ids.users)
                return r;
        if (r < 0) {
                const char *why = spawn_userns_disabled_reason();
                if (why)
                        r = al_error_set(err, 0, "cannot create the sandbox: %s", why);
                else
                        r = al_error_set(err, r, "writing the sandbox's uid/gid maps");
                return r;
        }
        r = spawn_sync_send(sync, SYNC_GO, 0, 0, NULL);
        if (r < 0) {
                r = al_error_set(err, r, "starting the sandbox");
                return r;
        }
        if (cfg->cgroup && !ctx->cgroup_in_clone) {
                r = cgroup_realize(cfg->cgroup, err);
                if (r < 0)
                        return r;
                al_trace_mark("cgroup.create");
                r = cfg->cgroup->ops->attach(cfg->cgroup, pid, err);
                if (r < 0)
                        return r;
                al_trace_mark("cgroup.attach");
                /* A child that already failed has closed its end; its
                 * report is read below. */
                (void)spawn_sync_send(sync, SYNC_CGROUP, 0, 0, NULL);
        }
        /* While the sandbox builds its root: leaves of dead owners. */
        if (cfg->cgroup && cgroup_sweep_now(cfg->cgroup) >= 0)
                al_trace_mark("cgroup.sweep");
        return 0;
}

/* Read the child's reports until pid 1 says the command passed execve (or,
 * idle, that it serves): the gate's listeners, the review layer, or the
 * step that failed. */
static int wait_started(int sync, struct spawn_result *ret, struct al_error *err)
{
        int r;

        for (;;) {
                struct sync_msg m;
                int fds[SPAWN_LISTEN_MAX];
                size_t nfds = 0;
                r = spawn_sync_recv(sync, &m, fds, SPAWN_LISTEN_MAX, &nfds);
                if (r < 0) {
                        r = al_error_set(err, r, "sandbox setup ended unexpectedly");
                        return r;
                }
                if (m.type == SYNC_LISTENERS) {
                        for (size_t i = 0; i < nfds; i++)
                                ret->listen_fds[i] = fds[i];
                        continue;
                }
                if (m.type == SYNC_NOTIFY) {
                        int *slot[] = {&ret->dns_fd, &ret->relay_fd, &ret->notify_fd};
                        for (size_t i = 0; i < nfds; i++) {
                                if (i < ARRAY_SIZE(slot) && *slot[i] < 0)
                                        *slot[i] = fds[i];
                                else
                                        close(fds[i]);
                        }
                        continue;
                }
                if (m.type == SYNC_NETNS) {
                        for (size_t i = 0; i < nfds; i++) {
                                if (ret->netns_fd < 0)
                                        ret->netns_fd = fds[i];
                                else
                                        close(fds[i]);
                        }
                        continue;
                }
                if (m.type == SYNC_TOOL) {
                        for (size_t i = 0; i < nfds; i++) {
                                if (ret->tool_fd < 0)
                                        ret->tool_fd = fds[i];
                                else
                                        close(fds[i]);
                        }
                        continue;
                }
                if (m.type == SYNC_UPPER) {
                        for (size_t i = 0; i < nfds; i++) {
                                if (ret->upper_fd < 0)
                                        ret->upper_fd = fds[i];
                                else
                                        close(fds[i]);
                        }
                        continue;
                }
                if (m.type == SYNC_PTY) {
                        for (size_t i = 0; i < nfds; i++) {
                                if (ret->pty_fd < 0)
                                        ret->pty_fd = fds[i];
                                else
                                        close(fds[i]);
                        }
                        continue;
                }
                if (m.type == SYNC_STARTED) {
                        al_trace_mark("spawn.started");
                        break;
                }
                if (m.type == SYNC_ERROR) {
                        if (err) {
                                err->code = m.code;
                                snprintf(err->msg, sizeof(err->msg), "%s", m.text);
                        }
                        ret->failure = (enum spawn_failure)m.value;
                        r = m.code ? -m.code : -EINVAL;
                        if (m.value == SPAWN_FAILED_SETUP &&
                            (m.code == EPERM || m.code == EACCES)) {
                                const char *why = spawn_userns_disabled_reason();
                                if (why)
                                        al_error_wrap(err, "%s", why);
                        }
                        return r;
                }
                r = al_error_set(err, EBADMSG, "sandbox setup sent an unexpected message");
                return r;
        }
        return 0;
}

/* Work is put beside other work only where a second CPU can run it: on one
 * CPU the helper's start and end would be all it changes. */
static bool more_than_one_cpu(void)
{
        cpu_set_t set;
        return sched_getaffinity(0, sizeof(set), &set) == 0 && CPU_COUNT(&set) > 1;
}

int spawn_sandbox(const struct spawn_config *cfg, struct spawn_result *ret, struct al_error *err)
{
        const struct policy *p = cfg->policy;
        struct child_ctx ctx = {.cfg = cfg,
                                .uid = p->uid,
                                .gid = p->gid,
                                .workspace_fd = -1,
                                .ids = IDRANGE_INIT,
                                .netns_deferred =
                                    !cfg->share_net && vmchild_supported() && more_than_one_cpu(),
                                .netns_helper = -1};
        struct mounts_plan *plan = NULL;
        _cleanup_free_ int *mount_fds = NULL;
        size_t locks_mark = n_volume_locks;
        int sp[2] = {-1, -1};
        int r;

        /* Fail closed: the gate lives in a namespace of the sandbox's own. */
        if (cfg->share_net && p->net_mode == POLICY_NET_GATED)
                return al_error_set_message(err, EINVAL,
                                            "a gated network needs a network namespace of the "
                                            "sandbox's own");
        ret->pid = -1;
        ret->cloned = false;
        ret->sync_fd = -1;
        ret->pidfd = -1;
        ret->upper_fd = -1;
        ret->netns_fd = -1;
        ret->pty_fd = -1;
        ret->tool_fd = -1;
        ret->dns_fd = -1;
        ret->relay_fd = -1;
        ret->notify_fd = -1;
        ret->failure = SPAWN_FAILED_SETUP;
        for (int i = 0; i < SPAWN_LISTEN_MAX; i++)
                ret->listen_fds[i] = -1;

        bool root = (geteuid() == 0);
        uid_t host_uid = root ? SPAWN_ROOT_HOST_UID : geteuid();
        gid_t host_gid = root ? SPAWN_ROOT_HOST_GID : getegid();
        ret->host_uid = host_uid;

        al_trace_mark("spawn.begin");
        r = check_workspace(p, err); /* it exists; an overlay's layers */
        if (r < 0)
                return r;
        al_trace_mark("spawn.workspace");
        /* The tier: one this host cannot run is refused here; the
         * container tier's image is opened as the caller. */
        r = tier_prepare(p, geteuid(), cfg->caller_home, &ctx.image, err);
        if (r < 0)
                return r;
        al_trace_mark("spawn.tier");
        r = mounts_plan_new(p, cfg->caller_home, &plan, err); /* mounts.c */
        if (r < 0)
                return r;
        al_trace_mark("spawn.plan");
        ctx.plan = plan;
        if (cfg->tool_bin) {
                r = mounts_plan_tool(plan, cfg->tool_bin, err); /* mounts.c */
                if (r < 0)
                        goto fail;
        }
        if (cfg->rootfs) {
                r = mounts_plan_rootfs(plan, cfg->rootfs, cfg->rootfs_readonly, err); /* plan.c */
                if (r < 0)
                        goto fail;
        }
        if (root) {
                r = prepare_root_caller(&ctx, host_uid, host_gid, &mount_fds, err);
                if (r < 0)
                        goto fail;
                al_trace_mark("spawn.idmapped");
        }
        locks_mark = n_volume_locks;
        r = prepare_volumes(p, &mount_fds, err);
        if (r < 0)
                goto fail;
        ctx.mount_fds = mount_fds;
        /* "users": idrange.c. A writable container root is a host tree
         * as it is, like a read-write tree that could not be idmapped. */
        r = idrange_acquire(p, ctx.plain_writable || (cfg->rootfs && !cfg->rootfs_readonly),
                            &ctx.ids, err);
        if (r < 0)
                goto fail;
        if (socketpair(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC, 0, sp) < 0) {
                r = al_error_set(err, errno, "socketpair");
                goto fail;
        }
        ctx.sync = sp[1];
        int pidfd = -1;
        pid_t pid = clone_sandbox(&ctx, &pidfd, err);
        if (pid < 0) {
                r = pid;
                goto fail;
        }
        if (pid == 0) {
                close(sp[0]);
                child_main(&ctx); /* does not return */
        }
        al_trace_mark("spawn.clone");
        close(sp[1]);
        sp[1] = -1;
        ret->pid = pid;
        ret->pidfd = pidfd;
        ret->cloned = true;
        /* Taken now, while pid 1 still has our credentials and is
         * dumpable; it is soon neither. Without it only port forwards fail.
         * A namespace the child's helper makes comes with SYNC_NETNS: pid
         * 1 is still in ours now. */
        if (!ctx.netns_deferred) {
                char nspath[64];
                snprintf(nspath, sizeof(nspath), "/proc/%d/ns/net", (int)pid);
                ret->netns_fd = open(nspath, O_RDONLY | O_CLOEXEC);
        }
        r = release_child(&ctx, pid, host_uid, host_gid, sp[0], err);
        if (r < 0)
                goto fail;
        r = wait_started(sp[0], ret, err);
        if (r < 0)
                goto fail;

        ret->sync_fd = sp[0];
        ret->failure = SPAWN_OK;
        idrange_keep(&ctx.ids);
        spawn_reap_idmap_helper();
        mounts_plan_free(plan, p->n_mounts);
        if (ctx.workspace_fd >= 0)
                close(ctx.workspace_fd);
        ctx.image = rootdir_free(ctx.image);
        for (size_t i = 0; mount_fds && i < p->n_mounts; i++)
                if (mount_fds[i] >= 0)
                        close(mount_fds[i]);
        return 0;

fail:
        release_volumes(locks_mark);
        if (ret->pid > 0)
                kill_and_reap(ret->pid);
        idrange_release(&ctx.ids); /* its ids are free once its processes are gone */
        ret->pid = -1;
        if (ret->pidfd >= 0)
                close(ret->pidfd);
        ret->pidfd = -1;
        for (int i = 0; i < SPAWN_LISTEN_MAX; i++)
                if (ret->listen_fds[i] >= 0) {
                        close(ret->listen_fds[i]);
                        ret->listen_fds[i] = -1;
                }
        if (ret->upper_fd >= 0)
                close(ret->upper_fd);
        ret->upper_fd = -1;
        if (ret->netns_fd >= 0)
                close(ret->netns_fd);
        ret->netns_fd = -1;
        if (ret->pty_fd >= 0)
                close(ret->pty_fd);
        ret->pty_fd = -1;
        if (ret->dns_fd >= 0)
                close(ret->dns_fd);
        ret->dns_fd = -1;
        if (ret->relay_fd >= 0)
                close(ret->relay_fd);
        ret->relay_fd = -1;
        if (ret->notify_fd >= 0)
                close(ret->notify_fd);
        ret->notify_fd = -1;
        if (ret->tool_fd >= 0)
                close(ret->tool_fd);
        ret->tool_fd = -1;
        if (sp[0] >= 0)
                close(sp[0]);
        if (sp[1] >= 0)
                close(sp[1]);
        if (ctx.workspace_fd >= 0)
                close(ctx.workspace_fd);
        ctx.image = rootdir_free(ctx.image);
        for (size_t i = 0; mount_fds && i < p->n_mounts; i++)
                if (mount_fds[i] >= 0)
                        close(mount_fds[i]);
        mounts_plan_free(plan, p->n_mounts);
        return r;
}
