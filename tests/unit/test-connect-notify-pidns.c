/* SPDX-License-Identifier: Apache-2.0 */
/* A revoke reaches the direct path's sockets wherever the sandbox holds
 * them, whichever process connected first (supervisor/connect-notify.c,
 * connect-handed.c, connect-scan.c). The processes run in a pid
 * namespace of their own with this process's network namespace, holding
 * a public address of its own (root: skipped otherwise); this process
 * serves their connect() as the supervisor does, as an ordinary user would
 * (no CAP_NET_ADMIN: a socket cannot be aborted in the socket table, so
 * only the scan of the sandbox's processes can cut it).
 *  - The first connect() comes from a process in a pid namespace nested in
 *    the sandbox's (the agent chooses which process connects first); the
 *    socket is then held by a process outside it. The scan must cover the
 *    sandbox from its pid 1, not from that first caller.
 *  - A socket held only by a process of a nested pid namespace is cut too.
 * Either way the cut is the socket shut down ("revoked"), not the sandbox
 * ended ("revoked_killed": its pid 1 killed). */
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

#include "connect-notify-revoke-util.h"

/* In a child: fork a process into a new pid namespace (nested in this
 * one) that runs fn(ud) and exits with its value; wait for it. */
static int in_nested(int (*fn)(void *), void *ud)
{
        if (unshare(CLONE_NEWPID) < 0)
                return 95;
        pid_t p = fork();
        if (p < 0)
                return 96;
        if (p == 0)
                _exit(fn(ud));
        int st;
        if (waitpid(p, &st, 0) != p || !WIFEXITED(st))
                return 97;
        return WEXITSTATUS(st);
}

struct ends {
        int pass[2]; /* the socket passed from connecter to holder */
        int rep[2];  /* reports to the supervisor */
        int go[2];   /* closed by the supervisor: the end */
};

/* Connect, report, hand the socket over `pass`, and close it. */
static int connect_and_pass(void *ud)
{
        struct ends *e = ud;
        int s = connect_upstream();
        cnt_report(e->rep[1], s < 0 ? (errno = -s, -1) : 0);
        if (s < 0)
                return 1;
        cnt_send_fd(e->pass[0], s);
        close(s);
        return 0;
}

/* Receive the socket over `pass`, report, hold it until the end. */
static int receive_and_hold(void *ud)
{
        struct ends *e = ud;
        int s = cnt_recv_fd(e->pass[1]);
        cnt_report(e->rep[1], s < 0 ? -1 : 0);
        linger(e->go[0]);
}

/* pid 1 of the sandbox: the filter, then the connecter and the holder
 * (each in a nested pid namespace or not), then it waits for them. */
static pid_t sandbox(int over, struct ends *e, bool nested_connecter, bool nested_holder)
{
        pid_t pid1 = fork();
        cr_assert_geq(pid1, 0);
        if (pid1 == 0) {
                close(e->go[1]);
                cnt_filter_connect(over);
                pid_t h = fork();
                if (h == 0)
                        _exit(nested_holder ? in_nested(receive_and_hold, e) : receive_and_hold(e));
                pid_t c = fork();
                if (c == 0)
                        _exit(nested_connecter ? in_nested(connect_and_pass, e)
                                               : connect_and_pass(e));
                int st, bad = 0;
                while (wait(&st) > 0)
                        bad |= !WIFEXITED(st) || WEXITSTATUS(st) != 0;
                _exit(bad);
        }
        return pid1;
}

/* Whether the peer shut the connection (a read finds its end). */
static bool ended(int s)
{
        struct pollfd p = {.fd = s, .events = POLLIN};
        if (poll(&p, 1, 3000) != 1)
                return false;
        char c;
        return recv(s, &c, 1, MSG_DONTWAIT) == 0;
}

static void revoke_cuts_the_socket(bool nested_connecter, bool nested_holder)
{
        struct ends e;
        int sp[2];
        cr_assert_eq(socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, sp), 0);
        cr_assert_eq(socketpair(AF_UNIX, SOCK_DGRAM | SOCK_CLOEXEC, 0, e.pass), 0);
        cr_assert_eq(pipe2(e.rep, O_CLOEXEC), 0);
        cr_assert_eq(pipe2(e.go, O_CLOEXEC), 0);
        pid_t pid1 = sandbox(sp[1], &e, nested_connecter, nested_holder);
        sandbox_pid1 = pid1;
        close(e.go[0]);
        int l = cnt_recv_fd(sp[0]);
        cr_assert_geq(l, 0);
        struct al_error err = {0};
        cn = sv_connect_notify_new(base, gate, l, &err);
        cr_assert_not_null(cn, "%s", err.msg);
        sv_connect_notify_set_sandbox(cn, pid1);

        int r = cnt_serve_until_report(base, e.rep[0], 10000);
        cr_assert_eq(r, 0, "the direct connect: %s", r < 0 ? "no answer" : strerror(r));
        r = cnt_serve_until_report(base, e.rep[0], 10000);
        cr_assert_eq(r, 0, "the holder got the socket");
        int srv = accept4(upstream, NULL, NULL, SOCK_CLOEXEC);
        cr_assert_geq(srv, 0);

        /* The rule is revoked live. */
        struct policy_budget budget = {0};
        cr_assert_eq(netgate_set_rules(gate, NULL, 0, NULL, 0, &budget, &err), 0, "%s", err.msg);
        int cut = sv_connect_notify_recheck(cn, pid1);
        cr_expect_eq(n_reasons, 1, "one cut recorded (%zu)", n_reasons);
        cr_expect_str_eq(reasons[0], "revoked",
                         "the socket is shut where it is held, not the sandbox ended");
        cr_expect_eq(cut, 1);
        cr_expect(ended(srv), "the revoked socket was shut");
        cr_expect_eq(kill(pid1, 0), 0, "the sandbox's pid 1 lives on");

        close(e.go[1]);
        int st;
        cr_expect_eq(waitpid(pid1, &st, 0), pid1);
        cr_expect(WIFEXITED(st) && WEXITSTATUS(st) == 0, "the sandbox ended well (%d)", st);
        sandbox_pid1 = -1;
        close(srv);
}

Test(connect_notify_pidns, a_first_connect_from_a_nested_pid_namespace_narrows_no_revoke,
     .init = setup, .fini = teardown, .timeout = 40)
{
        revoke_cuts_the_socket(true, false);
}

Test(connect_notify_pidns, a_socket_held_in_a_nested_pid_namespace_is_cut, .init = setup,
     .fini = teardown, .timeout = 40)
{
        revoke_cuts_the_socket(false, true);
}
