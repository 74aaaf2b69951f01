/* SPDX-License-Identifier: Apache-2.0 */
/* The network namespace from inside: loopback up, and the listeners the
 * gate serves on 127.0.0.1 (their fds go to the parent, spawn.c). */
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
#include "trace.h"
#include "util.h"
#include "vmchild.h"
#include "spawn-internal.h"

static int loopback_up(void)
{
        _cleanup_close_ int s = socket(AF_INET, SOCK_DGRAM | SOCK_CLOEXEC, 0);
        if (s < 0)
                return -errno;
        struct ifreq ifr;
        memset(&ifr, 0, sizeof(ifr));
        snprintf(ifr.ifr_name, sizeof(ifr.ifr_name), "lo");
        if (ioctl(s, SIOCGIFFLAGS, &ifr) < 0)
                return -errno;
        ifr.ifr_flags |= IFF_UP | IFF_RUNNING;
        if (ioctl(s, SIOCSIFFLAGS, &ifr) < 0)
                return -errno;
        return 0;
}

static int make_listener(uint16_t port)
{
        int s = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC | SOCK_NONBLOCK, 0);
        if (s < 0)
                return -errno;
        int one = 1;
        setsockopt(s, SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one));
        struct sockaddr_in sa = {.sin_family = AF_INET,
                                 .sin_port = htons(port),
                                 .sin_addr.s_addr = htonl(INADDR_LOOPBACK)};
        if (bind(s, (struct sockaddr *)&sa, sizeof(sa)) < 0 || listen(s, 256) < 0) {
                int r = -errno;
                close(s);
                return r;
        }
        return s;
}

/* lo up with raw system calls (the helper's form of loopback_up()). */
static long helper_loopback_up(void)
{
        long s = vmchild_syscall(SYS_socket, AF_INET, SOCK_DGRAM | SOCK_CLOEXEC, 0);
        if (s < 0)
                return s;
        struct ifreq ifr;
        memset(&ifr, 0, sizeof(ifr));
        memcpy(ifr.ifr_name, "lo", 3);
        long r = vmchild_syscall(SYS_ioctl, s, SIOCGIFFLAGS, (long)&ifr);
        if (r >= 0) {
                ifr.ifr_flags |= IFF_UP | IFF_RUNNING;
                r = vmchild_syscall(SYS_ioctl, s, SIOCSIFFLAGS, (long)&ifr);
        }
        vmchild_syscall(SYS_close, s, 0, 0);
        return r < 0 ? r : 0;
}

/* Creating a network namespace is the costliest part of clone3 (about
 * 0.6 ms of CPU: the loopback device, the protocols' per-namespace state),
 * and nothing of the root's construction needs it. So the setup child
 * starts a helper first thing that makes it with unshare(CLONE_NEWNET) in
 * the sandbox's user namespace (the same owner clone3 would have given it)
 * while the child builds the root, and joins it afterwards with setns():
 * on a host with a CPU to spare the two run side by side. Until it joins,
 * the child runs only Airlock's code and opens no socket: every socket of
 * the sandbox (lo, the gate's listeners, the tool gateway's) is made after
 * the join. The helper shares the child's memory and descriptors
 * (vmchild.h: raw system calls only); its answer is the namespace's fd,
 * opened through /proc/thread-self (the host's /proc before pivot_root,
 * the sandbox's own after it: either names the helper itself). A failure
 * at any point fails the start. */
static int netns_helper_main(void *arg)
{
        struct child_ctx *ctx = arg;
        long r = vmchild_syscall(SYS_unshare, CLONE_NEWNET, 0, 0);
        /* lo too (about 90 us: the device's start, IPv6's address): a
         * socket made here belongs to the new namespace and is closed
         * before the helper ends. */
        if (r >= 0)
                ctx->netns_lo = helper_loopback_up();
        if (r >= 0)
                r = vmchild_syscall(SYS_openat, AT_FDCWD, (long)"/proc/thread-self/ns/net",
                                    O_RDONLY | O_CLOEXEC);
        ctx->netns_result = r;
        return 0;
}

/* Its stack: pid 1's memory, in use only until the helper is reaped. */
static char netns_helper_stack[16384] __attribute__((aligned(16)));

void spawn_netns_start(struct child_ctx *ctx)
{
        struct al_error err = {0};
        ctx->netns_result = -EINPROGRESS;
        ctx->netns_lo = -EINPROGRESS;
        pid_t pid = vmchild_start(netns_helper_main, ctx, netns_helper_stack,
                                  sizeof(netns_helper_stack), CLONE_FILES);
        if (pid < 0) {
                al_error_set(&err, (int)-pid, "creating the sandbox's network namespace");
                spawn_child_fail(ctx->sync, SPAWN_FAILED_SETUP, &err, 125);
        }
        ctx->netns_helper = pid;
}

void spawn_netns_join(struct child_ctx *ctx)
{
        struct al_error err = {0};
        int st = 0;
        while (waitpid(ctx->netns_helper, &st, __WALL) < 0)
                if (errno != EINTR) {
                        al_error_set(&err, errno, "creating the sandbox's network namespace");
                        spawn_child_fail(ctx->sync, SPAWN_FAILED_SETUP, &err, 125);
                }
        ctx->netns_helper = -1;
        long r = ctx->netns_result;
        if (!WIFEXITED(st) || r == -EINPROGRESS)
                r = -ECHILD;
        if (r == -ENOSPC)
                al_error_set_message(&err, ENOSPC,
                                     "creating the sandbox's network namespace: the host's "
                                     "limit is reached (sysctl user.max_net_namespaces); "
                                     "raise it or end other sandboxes");
        else if (r < 0)
                al_error_set(&err, (int)-r, "creating the sandbox's network namespace");
        if (r < 0)
                spawn_child_fail(ctx->sync, SPAWN_FAILED_SETUP, &err, 125);
        int fd = (int)r;
        if (setns(fd, CLONE_NEWNET) < 0) {
                al_error_set(&err, errno, "joining the sandbox's network namespace");
                spawn_child_fail(ctx->sync, SPAWN_FAILED_SETUP, &err, 125);
        }
        /* The parent's handle on it (port forwards): this namespace, never
         * the one the child started in. */
        r = spawn_send_fds(ctx->sync, SYNC_NETNS, &fd, 1);
        close(fd);
        if (r < 0)
                _exit(125);
        al_trace_mark("child.netns");
}

/* The setup child's network step: lo up, and for a gated policy the gate's
 * listeners, bound inside and passed to the parent (which serves them). */
void spawn_netns_setup(struct child_ctx *ctx)
{
        const struct policy *p = ctx->cfg->policy;
        struct al_error err = {0};
        int r;

        /* A namespace the helper made has lo up already (or says why not). */
        r = ctx->netns_deferred ? (int)ctx->netns_lo : loopback_up();
        if (r < 0) {
                al_error_set(&err, r, "bringing up lo");
                spawn_child_fail(ctx->sync, SPAWN_FAILED_SETUP, &err, 125);
        }

        if (p->net_mode == POLICY_NET_GATED) {
                int fds[SPAWN_LISTEN_MAX];
                for (int i = 0; i < SPAWN_LISTEN_MAX; i++) {
                        fds[i] = make_listener(spawn_listen_ports[i]);
                        if (fds[i] < 0) {
                                al_error_set(&err, fds[i], "listening on 127.0.0.1:%u",
                                             spawn_listen_ports[i]);
                                spawn_child_fail(ctx->sync, SPAWN_FAILED_SETUP, &err, 125);
                        }
                }
                r = spawn_send_fds(ctx->sync, SYNC_LISTENERS, fds, SPAWN_LISTEN_MAX);
                for (int i = 0; i < SPAWN_LISTEN_MAX; i++)
                        close(fds[i]);
                if (r < 0)
                        _exit(125);
                spawn_transparent_setup(ctx); /* connect-notify.c */
        }
}
