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
#include "util.h"
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

/* The setup child's network step: lo up, and for a gated policy the gate's
 * listeners, bound inside and passed to the parent (which serves them). */
void spawn_netns_setup(struct child_ctx *ctx)
{
        const struct policy *p = ctx->cfg->policy;
        struct al_error err = {0};
        int r;

        r = loopback_up();
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
