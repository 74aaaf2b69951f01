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

#include "connect-notify-revoke-util.h"

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
