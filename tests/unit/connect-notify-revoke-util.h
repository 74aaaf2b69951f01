/* SPDX-License-Identifier: Apache-2.0 */
#pragma once

/* What the revoke tests of the supervisor's connect() handling share
 * (test-connect-notify-pidns.c, test-connect-notify-wait.c): a public
 * upstream address of this process's own network namespace, the gate and
 * the connect() notifier on this process's loop, the records' reasons,
 * and the sandbox's processes in a pid namespace of their own. */
#include <arpa/inet.h>
#include <fcntl.h>
#include <linux/capability.h>
#include <net/if.h>
#include <netinet/in.h>
#include <poll.h>
#include <sched.h>
#include <signal.h>
#include <stdio.h>
#include <sys/ioctl.h>
#include <sys/wait.h>

#include "connect-notify-test-util.h"

#define UPSTREAM "93.184.216.34"
#define PORT     443

/* Each test makes a pid namespace for its children: the leak checker's
 * tracer, made at exit, would land in it (test-connect-handed-attacks.c). */
int __lsan_is_turned_off(void);
int __lsan_is_turned_off(void)
{
        return 1;
}

static struct event_base *base;
static struct policy *pol;
static struct netgate *gate;
static struct sv_connect_notify *cn;
static int upstream = -1;
static pid_t sandbox_pid1 = -1;
static char reasons[8][32];
static size_t n_reasons;

static void recorder(void *ud, const struct netgate_record *r)
{
        (void)ud;
        if (r->reason && n_reasons < ARRAY_SIZE(reasons) && strncmp(r->reason, "revoked", 7) == 0)
                snprintf(reasons[n_reasons++], sizeof(reasons[0]), "%s", r->reason);
}

static void drop_net_admin(void)
{
        struct __user_cap_header_struct h = {.version = _LINUX_CAPABILITY_VERSION_3};
        struct __user_cap_data_struct d[2];
        cr_assert_eq(syscall(SYS_capget, &h, d), 0);
        d[CAP_NET_ADMIN / 32].effective &= ~(1u << (CAP_NET_ADMIN % 32));
        cr_assert_eq(syscall(SYS_capset, &h, d), 0);
}

static void if_set(const char *name, const char *ip)
{
        int s = socket(AF_INET, SOCK_DGRAM | SOCK_CLOEXEC, 0);
        cr_assert_geq(s, 0);
        struct ifreq ifr;
        memset(&ifr, 0, sizeof(ifr));
        snprintf(ifr.ifr_name, sizeof(ifr.ifr_name), "%s", name);
        if (ip) {
                struct sockaddr_in *a = (struct sockaddr_in *)&ifr.ifr_addr;
                a->sin_family = AF_INET;
                inet_pton(AF_INET, ip, &a->sin_addr);
                cr_assert_eq(ioctl(s, SIOCSIFADDR, &ifr), 0, "%s: %s", name, strerror(errno));
        }
        cr_assert_eq(ioctl(s, SIOCGIFFLAGS, &ifr), 0);
        ifr.ifr_flags |= IFF_UP;
        cr_assert_eq(ioctl(s, SIOCSIFFLAGS, &ifr), 0);
        close(s);
}

static void setup(void)
{
        if (unshare(CLONE_NEWNET) < 0)
                cr_skip_test("a network namespace cannot be made here: %s", strerror(errno));
        if_set("lo", NULL);
        if_set("lo:1", UPSTREAM);
        upstream = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
        struct sockaddr_in a = {.sin_family = AF_INET, .sin_port = htons(PORT)};
        inet_pton(AF_INET, UPSTREAM, &a.sin_addr);
        cr_assert_eq(bind(upstream, (struct sockaddr *)&a, sizeof(a)), 0);
        cr_assert_eq(listen(upstream, 8), 0);
        if (unshare(CLONE_NEWPID) < 0)
                cr_skip_test("a pid namespace cannot be made here: %s", strerror(errno));
        drop_net_admin();
        base = event_base_new();
        pol = policy_new();
        pol->net_allow = strv_append(pol->net_allow, &pol->n_net_allow, UPSTREAM ":443");
        /* The upstream is an address of this host's (its own namespace's):
         * the gate refuses those unless allowed so. */
        pol->net_allow_private =
            strv_append(pol->net_allow_private, &pol->n_net_allow_private, UPSTREAM "/32");
        struct al_error err = {0};
        gate = netgate_new(base, pol, "sbx-test", &err);
        cr_assert_not_null(gate, "%s", err.msg);
        netgate_set_recorder(gate, recorder, NULL);
        n_reasons = 0;
}

static void teardown(void)
{
        /* A pid namespace's init ignores what it has no handler for: only
         * SIGKILL from here ends what a failed test left running. */
        if (sandbox_pid1 > 0 && waitpid(sandbox_pid1, NULL, WNOHANG) == 0) {
                kill(sandbox_pid1, SIGKILL);
                waitpid(sandbox_pid1, NULL, 0);
        }
        sandbox_pid1 = -1;
        cn = sv_connect_notify_free(cn);
        gate = netgate_free(gate);
        pol = policy_free(pol);
        if (base)
                event_base_free(base);
        if (upstream >= 0)
                close(upstream);
}

static int connect_upstream(void)
{
        int s = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
        struct sockaddr_in a = {.sin_family = AF_INET, .sin_port = htons(PORT)};
        inet_pton(AF_INET, UPSTREAM, &a.sin_addr);
        if (connect(s, (struct sockaddr *)&a, sizeof(a)) < 0)
                return -errno;
        return s;
}

/* Wait for `go` to close (or 15 s), then exit. */
static _Noreturn void linger(int go)
{
        alarm(15);
        char b;
        while (read(go, &b, 1) < 0 && errno == EINTR) {
        }
        _exit(0);
}
