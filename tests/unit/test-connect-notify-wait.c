/* SPDX-License-Identifier: Apache-2.0 */
/* A revoke's wait for its kills does not stop the supervisor's loop
 * (supervisor/connect-handed.c, connect-notify.c). As an ordinary user
 * (no CAP_NET_ADMIN: no socket can be aborted), a refused direct-path
 * socket in transit (an SCM_RIGHTS message queued to a Unix socket) is
 * reached only by killing the sandbox's processes that could receive it;
 * whether that took it along is seen in the socket table, up to about
 * 2.5 s. Here the receiving socket has a holder outside the sandbox too
 * (this process), so the socket outlives the kills: the whole wait runs,
 * then the sandbox's pid 1 is killed ("revoked_killed"). Meanwhile the
 * sandbox's next connect() must be answered at once: a wait on the loop
 * would hold every other request (the kill switch, the API, the
 * sandbox's connects) for those 2.5 s. The processes run in a pid
 * namespace of their own, with a public address of this process's own
 * network namespace as the upstream (root: skipped otherwise). */
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
#include <time.h>

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

struct ends {
        int q[2];    /* the socket in transit: sent on q[0], queued at q[1] */
        int rep[2];  /* reports to the supervisor */
        int go[2];   /* closed by the supervisor: the end */
        int next[2]; /* a byte: the connecter's next connect() */
};

/* pid 1 of the sandbox: the filter, the receiver (which the revoke kills),
 * the connecter; then it waits for them. */
static pid_t sandbox(int over, struct ends *e)
{
        pid_t pid1 = fork();
        cr_assert_geq(pid1, 0);
        if (pid1 == 0) {
                close(e->go[1]);
                close(e->next[1]);
                cnt_filter_connect(over);
                if (fork() == 0) { /* the receiver: holds q[1], never reads */
                        close(e->q[0]);
                        linger(e->go[0]);
                }
                if (fork() == 0) { /* the connecter */
                        close(e->q[1]);
                        int s = connect_upstream();
                        cnt_report(e->rep[1], s < 0 ? (errno = -s, -1) : 0);
                        if (s < 0)
                                _exit(1);
                        cnt_send_fd(e->q[0], s);
                        close(s);
                        cnt_report(e->rep[1], 0);
                        char b;
                        if (read(e->next[0], &b, 1) != 1)
                                _exit(2);
                        struct sockaddr_in a = {.sin_family = AF_INET, .sin_port = htons(PORT)};
                        inet_pton(AF_INET, UPSTREAM, &a.sin_addr);
                        cnt_report(e->rep[1], connect(999, (struct sockaddr *)&a, sizeof(a)));
                        linger(e->go[0]);
                }
                close(e->q[0]);
                close(e->q[1]);
                int st;
                while (wait(&st) > 0) {
                }
                _exit(0);
        }
        return pid1;
}

static long ms_since(const struct timespec *t0)
{
        struct timespec t;
        clock_gettime(CLOCK_MONOTONIC, &t);
        return (t.tv_sec - t0->tv_sec) * 1000 + (t.tv_nsec - t0->tv_nsec) / 1000000;
}

Test(connect_notify_wait, the_loop_answers_during_a_revokes_wait_for_its_kills, .init = setup,
     .fini = teardown, .timeout = 40)
{
        struct ends e;
        int sp[2];
        cr_assert_eq(socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, sp), 0);
        cr_assert_eq(socketpair(AF_UNIX, SOCK_DGRAM | SOCK_CLOEXEC, 0, e.q), 0);
        cr_assert_eq(pipe2(e.rep, O_CLOEXEC), 0);
        cr_assert_eq(pipe2(e.go, O_CLOEXEC), 0);
        cr_assert_eq(pipe2(e.next, O_CLOEXEC), 0);
        pid_t pid1 = sandbox(sp[1], &e);
        sandbox_pid1 = pid1;
        close(e.go[0]);
        close(e.next[0]);
        close(e.q[0]); /* q[1] stays here too: the socket outlives the kills */
        int l = cnt_recv_fd(sp[0]);
        cr_assert_geq(l, 0);
        struct al_error err = {0};
        cn = sv_connect_notify_new(base, gate, l, &err);
        cr_assert_not_null(cn, "%s", err.msg);
        sv_connect_notify_set_sandbox(cn, pid1);

        int r = cnt_serve_until_report(base, e.rep[0], 10000);
        cr_assert_eq(r, 0, "the direct connect: %s", r < 0 ? "no answer" : strerror(r));
        r = cnt_serve_until_report(base, e.rep[0], 10000);
        cr_assert_eq(r, 0, "the socket is in transit");

        struct policy_budget budget = {0};
        cr_assert_eq(netgate_set_rules(gate, NULL, 0, NULL, 0, &budget, &err), 0, "%s", err.msg);
        struct timespec t0;
        clock_gettime(CLOCK_MONOTONIC, &t0);
        (void)sv_connect_notify_recheck(cn, pid1);
        long took = ms_since(&t0);
        /* The sandbox's next request, while the wait runs. */
        char b = 'n';
        cr_assert_eq(write(e.next[1], &b, 1), 1);
        r = cnt_serve_until_report(base, e.rep[0], 5000);
        long answered = ms_since(&t0);
        cr_expect_eq(r, EBADF, "the next connect(): %s", r < 0 ? "no answer" : strerror(r));
        cr_expect_lt(answered, 1000,
                     "the next connect() was answered %ld ms after the revoke (the recheck "
                     "took %ld ms)",
                     answered, took);

        /* The wait ends: the socket outlived the kills, the sandbox ends. */
        for (int i = 0; i < 100 && n_reasons == 0; i++) {
                struct timeval tv = {0, 50 * 1000};
                event_base_loopexit(base, &tv);
                event_base_dispatch(base);
        }
        cr_expect_eq(n_reasons, 1, "one cut recorded (%zu)", n_reasons);
        cr_expect_str_eq(reasons[0], "revoked_killed");
        int st;
        cr_expect_eq(waitpid(pid1, &st, 0), pid1);
        cr_expect(WIFSIGNALED(st) && WTERMSIG(st) == SIGKILL, "the sandbox was ended (%d)", st);
        sandbox_pid1 = -1;
        close(e.go[1]);
        close(e.next[1]);
        close(e.q[1]);
}
