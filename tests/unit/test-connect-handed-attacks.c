/* SPDX-License-Identifier: Apache-2.0 */
/* Attacks on a revoke's fail-closed path (supervisor/connect-handed.c,
 * connect-scan.c) where the socket cannot be aborted (an ordinary user:
 * no SOCK_DESTROY). A refused direct-path socket sits in an SCM_RIGHTS
 * message queued to a process whose descent from pid 1 cannot be told
 * (deeper than the parents followed), while a decoy that could receive
 * one (a listening Unix socket) can be killed. Killing the decoy alone
 * leaves the socket alive for the deep process to receive after the
 * revoke: the cut is not done, so the sandbox must end (its pid 1).
 * The processes run in a pid namespace of their own, as a sandbox's do
 * (root: skipped otherwise), so that only they are scanned. */
#include <arpa/inet.h>
#include <criterion/criterion.h>
#include <errno.h>
#include <fcntl.h>
#include <linux/capability.h>
#include <netinet/in.h>
#include <poll.h>
#include <sched.h>
#include <signal.h>
#include <stdio.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

#include "supervisor/connect-handed-internal.h"
#include "connect-notify-test-util.h"
#include "util.h"

static size_t cuts;

static bool refuse_revoked(void *ud, const struct netgate_verdict *v)
{
        (void)ud;
        return STREQ(v->host, "revoked.test");
}

static void on_cut(void *ud, const struct netgate_verdict *v, const char *reason)
{
        (void)ud;
        (void)v;
        (void)reason;
        cuts++;
}

/* As an ordinary user: SOCK_DESTROY is refused without CAP_NET_ADMIN. */
static void drop_net_admin(void)
{
        struct __user_cap_header_struct h = {.version = _LINUX_CAPABILITY_VERSION_3};
        struct __user_cap_data_struct d[2];
        cr_assert_eq(syscall(SYS_capget, &h, d), 0);
        d[CAP_NET_ADMIN / 32].effective &= ~(1u << (CAP_NET_ADMIN % 32));
        cr_assert_eq(syscall(SYS_capset, &h, d), 0);
}

/* Each test makes a pid namespace for its children with unshare: the leak
 * checker's tracer, made at exit, would land in it and cannot stop this
 * process's threads from there. Its leaks are checked by
 * test-connect-handed.c and test-connect-handed-reach.c. */
int __lsan_is_turned_off(void);
int __lsan_is_turned_off(void)
{
        return 1;
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

Test(connect_handed_attacks, an_unkillable_receiver_ends_the_sandbox, .timeout = 30)
{
        if (unshare(CLONE_NEWPID) < 0)
                cr_skip_test("a pid namespace cannot be made here: %s", strerror(errno));
        drop_net_admin();
        int listener = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
        struct sockaddr_in a = {.sin_family = AF_INET, .sin_addr.s_addr = htonl(INADDR_LOOPBACK)};
        socklen_t al = sizeof(a);
        cr_assert_eq(bind(listener, (struct sockaddr *)&a, sizeof(a)), 0);
        cr_assert_eq(listen(listener, 4), 0);
        cr_assert_eq(getsockname(listener, (struct sockaddr *)&a, &al), 0);
        int c = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
        cr_assert_eq(connect(c, (struct sockaddr *)&a, al), 0);
        int srv = accept4(listener, NULL, NULL, SOCK_CLOEXEC);
        cr_assert_geq(srv, 0);

        int sp[2], go[2], ready[2];
        cr_assert_eq(socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, sp), 0);
        cr_assert_eq(pipe2(go, O_CLOEXEC), 0);
        cr_assert_eq(pipe2(ready, O_CLOEXEC), 0);
        int lu = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
        struct sockaddr_un un = {.sun_family = AF_UNIX};
        cr_assert_eq(bind(lu, (struct sockaddr *)&un, sizeof(sa_family_t)), 0); /* autobind */
        cr_assert_eq(listen(lu, 1), 0);

        /* pid1 -> decoy (listens) -> b -> deep (holds the receiving end). */
        pid_t pid1 = fork();
        cr_assert_geq(pid1, 0);
        if (pid1 == 0) {
                close(go[1]);
                close(ready[0]);
                close(listener);
                close(srv);
                close(c);
                close(sp[0]);
                if (fork() == 0) { /* the decoy */
                        if (fork() == 0) {
                                close(lu);
                                if (fork() == 0) { /* deep */
                                        close(ready[1]);
                                        linger(go[0]);
                                }
                                close(sp[1]);
                                close(ready[1]);
                                linger(go[0]);
                        }
                        close(sp[1]);
                        close(ready[1]);
                        linger(go[0]);
                }
                close(lu);
                close(sp[1]);
                close(ready[1]);
                linger(go[0]);
        }
        close(go[0]);
        close(ready[1]);
        close(sp[1]);
        close(lu);
        struct cn_handed_set *s = cn_handed_new();
        s->descent_max = 2; /* stands for a chain deeper than 4096 */
        struct netgate_verdict rv = {.allow = true, .port = 80};
        snprintf(rv.host, sizeof(rv.host), "revoked.test");
        cr_assert_eq(cn_handed_add(s, pid1, c, &rv), 0);
        char rb;
        cr_assert_eq(read(ready[0], &rb, 1), 0, "every process set up");
        close(ready[0]);
        cr_assert(cnt_sendmsg_fd(sp[0], c));
        close(c);
        close(sp[0]);

        int r = cn_handed_recheck(s, pid1, refuse_revoked, on_cut, NULL);
        int st = 0;
        pid_t w = 0;
        for (int i = 0; i < 200 && (w = waitpid(pid1, &st, WNOHANG)) == 0; i++)
                usleep(10000);
        bool pid1_killed = w == pid1 && WIFSIGNALED(st) && WTERMSIG(st) == SIGKILL;
        /* pid 1's end empties its namespace: the message goes with it. */
        struct pollfd p = {.fd = srv, .events = POLLIN};
        bool cut = poll(&p, 1, 2000) == 1;
        cr_expect(pid1_killed && cut,
                  "the refused socket lives on in transit to the deep process, yet the "
                  "sandbox was not ended (recheck %d, %zu cut)",
                  r, cuts);
        cr_expect_eq(r, 1);
        cr_expect_eq(cuts, 1);
        close(go[1]);
        if (w == 0) {
                kill(pid1, SIGKILL);
                waitpid(pid1, NULL, 0);
        }
        close(srv);
        close(listener);
        cn_handed_free(s);
}

/* The receivers killed, the refused socket still has a file: the cut is
 * checked in the socket table, and the sandbox ends when it is not done.
 * Here the receiving end is also held outside the sandbox's processes
 * (this test), standing for every place the kill does not reach: a
 * socket passed on while the scans ran, a holder not seen. */
Test(connect_handed_attacks, a_cut_not_done_by_the_kills_ends_the_sandbox, .timeout = 30)
{
        if (unshare(CLONE_NEWPID) < 0)
                cr_skip_test("a pid namespace cannot be made here: %s", strerror(errno));
        drop_net_admin();
        int listener = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
        struct sockaddr_in a = {.sin_family = AF_INET, .sin_addr.s_addr = htonl(INADDR_LOOPBACK)};
        socklen_t al = sizeof(a);
        cr_assert_eq(bind(listener, (struct sockaddr *)&a, sizeof(a)), 0);
        cr_assert_eq(listen(listener, 4), 0);
        cr_assert_eq(getsockname(listener, (struct sockaddr *)&a, &al), 0);
        int c = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
        cr_assert_eq(connect(c, (struct sockaddr *)&a, al), 0);
        int srv = accept4(listener, NULL, NULL, SOCK_CLOEXEC);
        cr_assert_geq(srv, 0);

        int sp[2], go[2], ready[2];
        cr_assert_eq(socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, sp), 0);
        cr_assert_eq(pipe2(go, O_CLOEXEC), 0);
        cr_assert_eq(pipe2(ready, O_CLOEXEC), 0);
        pid_t pid1 = fork();
        cr_assert_geq(pid1, 0);
        if (pid1 == 0) {
                close(go[1]);
                close(ready[0]);
                close(listener);
                close(srv);
                close(c);
                close(sp[0]);
                if (fork() == 0) { /* the receiver: killed */
                        close(ready[1]);
                        linger(go[0]);
                }
                close(sp[1]);
                close(ready[1]);
                linger(go[0]);
        }
        close(go[0]);
        close(ready[1]);
        struct cn_handed_set *s = cn_handed_new();
        struct netgate_verdict rv = {.allow = true, .port = 80};
        snprintf(rv.host, sizeof(rv.host), "revoked.test");
        cr_assert_eq(cn_handed_add(s, pid1, c, &rv), 0);
        char rb;
        cr_assert_eq(read(ready[0], &rb, 1), 0, "every process set up");
        close(ready[0]);
        cr_assert(cnt_sendmsg_fd(sp[0], c));
        close(c);
        close(sp[0]);

        int r = cn_handed_recheck(s, pid1, refuse_revoked, on_cut, NULL);
        int st = 0;
        pid_t w = 0;
        for (int i = 0; i < 200 && (w = waitpid(pid1, &st, WNOHANG)) == 0; i++)
                usleep(10000);
        cr_expect(w == pid1 && WIFSIGNALED(st) && WTERMSIG(st) == SIGKILL,
                  "the refused socket outlived the kills, yet the sandbox was not ended "
                  "(recheck %d, %zu cut)",
                  r, cuts);
        cr_expect_eq(r, 1);
        cr_expect_eq(cuts, 1);
        close(sp[1]);
        close(go[1]);
        if (w == 0) {
                kill(pid1, SIGKILL);
                waitpid(pid1, NULL, 0);
        }
        close(srv);
        close(listener);
        cn_handed_free(s);
}

/* A record's socket closed, and its inode number given again (inodes are
 * 32-bit and wrap) to another socket with the same ports, outside the
 * sandbox: the socket table must not take that one for the record's, or
 * a revoke would abort (root) or kill for a stranger's connection. The
 * record is made to name the stranger's inode and ports, as the reuse
 * would. */
Test(connect_handed_attacks, a_reused_inode_is_not_the_records_socket, .timeout = 30)
{
        if (unshare(CLONE_NEWPID) < 0)
                cr_skip_test("a pid namespace cannot be made here: %s", strerror(errno));
        int listener = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
        struct sockaddr_in a = {.sin_family = AF_INET, .sin_addr.s_addr = htonl(INADDR_LOOPBACK)};
        socklen_t al = sizeof(a);
        cr_assert_eq(bind(listener, (struct sockaddr *)&a, sizeof(a)), 0);
        cr_assert_eq(listen(listener, 4), 0);
        cr_assert_eq(getsockname(listener, (struct sockaddr *)&a, &al), 0);
        int c = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
        cr_assert_eq(connect(c, (struct sockaddr *)&a, al), 0);
        int srv = accept4(listener, NULL, NULL, SOCK_CLOEXEC);
        /* The stranger: a connection of this (host) process. */
        int other = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
        cr_assert_eq(connect(other, (struct sockaddr *)&a, al), 0);
        int other_srv = accept4(listener, NULL, NULL, SOCK_CLOEXEC);
        cr_assert_geq(other_srv, 0);

        int go[2], ready[2];
        cr_assert_eq(pipe2(go, O_CLOEXEC), 0);
        cr_assert_eq(pipe2(ready, O_CLOEXEC), 0);
        pid_t pid1 = fork();
        cr_assert_geq(pid1, 0);
        if (pid1 == 0) {
                close(go[1]);
                close(ready[0]);
                close(other);
                close(other_srv);
                close(c);
                close(srv);
                close(listener);
                close(ready[1]);
                linger(go[0]);
        }
        close(go[0]);
        close(ready[1]);
        char rb;
        cr_assert_eq(read(ready[0], &rb, 1), 0, "pid 1 set up");
        close(ready[0]);
        struct cn_handed_set *s = cn_handed_new();
        struct netgate_verdict rv = {.allow = true, .port = 80};
        snprintf(rv.host, sizeof(rv.host), "revoked.test");
        cr_assert_eq(cn_handed_add(s, pid1, c, &rv), 0);
        close(c); /* the record's socket is closed ... */
        close(srv);
        /* ... and its inode and ports are the stranger's now. */
        struct stat st;
        struct sockaddr_in me, peer;
        socklen_t ml = sizeof(me), pl = sizeof(peer);
        cr_assert_eq(fstat(other, &st), 0);
        cr_assert_eq(getsockname(other, (struct sockaddr *)&me, &ml), 0);
        cr_assert_eq(getpeername(other, (struct sockaddr *)&peer, &pl), 0);
        s->h[0].dev = st.st_dev;
        s->h[0].ino = st.st_ino;
        s->h[0].lport = me.sin_port;
        s->h[0].rport = peer.sin_port;

        int r = cn_handed_recheck(s, pid1, refuse_revoked, on_cut, NULL);
        cr_expect_eq(r, 0, "nothing to cut: the record's socket is closed (got %d)", r);
        cr_expect_eq(cuts, 0);
        cr_expect_eq(cn_handed_count(s), 0, "the record is forgotten");
        /* The stranger's connection works on. */
        cr_expect_eq(send(other, "y", 1, MSG_NOSIGNAL), 1);
        char b = 0;
        struct pollfd p = {.fd = other_srv, .events = POLLIN};
        cr_expect(poll(&p, 1, 2000) == 1 && recv(other_srv, &b, 1, 0) == 1 && b == 'y',
                  "the stranger's connection was cut");
        int w = waitpid(pid1, NULL, WNOHANG);
        cr_expect_eq(w, 0, "the sandbox was ended for a stranger's connection");
        close(go[1]);
        waitpid(pid1, NULL, 0);
        close(other);
        close(other_srv);
        close(listener);
        cn_handed_free(s);
}

/* The other way round: inside the sandbox, a socket that got the inode
 * number of a refused one still open elsewhere (the agent can wrap the
 * 32-bit numbers) must not be taken for it: shutting the decoy down would
 * record the refused socket cut while it lives on. The record is made to
 * name another socket's cookie, as the reuse would look to the scan. */
Test(connect_handed_attacks, a_socket_with_a_reused_inode_is_not_taken_for_the_record,
     .timeout = 30)
{
        if (unshare(CLONE_NEWPID) < 0)
                cr_skip_test("a pid namespace cannot be made here: %s", strerror(errno));
        int listener = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
        struct sockaddr_in a = {.sin_family = AF_INET, .sin_addr.s_addr = htonl(INADDR_LOOPBACK)};
        socklen_t al = sizeof(a);
        cr_assert_eq(bind(listener, (struct sockaddr *)&a, sizeof(a)), 0);
        cr_assert_eq(listen(listener, 4), 0);
        cr_assert_eq(getsockname(listener, (struct sockaddr *)&a, &al), 0);
        int decoy = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
        cr_assert_eq(connect(decoy, (struct sockaddr *)&a, al), 0);
        int decoy_srv = accept4(listener, NULL, NULL, SOCK_CLOEXEC);
        cr_assert_geq(decoy_srv, 0);

        int go[2], ready[2];
        cr_assert_eq(pipe2(go, O_CLOEXEC), 0);
        cr_assert_eq(pipe2(ready, O_CLOEXEC), 0);
        pid_t pid1 = fork();
        cr_assert_geq(pid1, 0);
        if (pid1 == 0) {
                close(go[1]);
                close(ready[0]);
                close(listener);
                close(decoy_srv);
                if (fork() == 0) { /* the agent's process, holding the decoy */
                        close(ready[1]);
                        linger(go[0]);
                }
                close(decoy);
                close(ready[1]);
                linger(go[0]);
        }
        close(go[0]);
        close(ready[1]);
        char rb;
        cr_assert_eq(read(ready[0], &rb, 1), 0, "every process set up");
        close(ready[0]);
        struct cn_handed_set *s = cn_handed_new();
        struct netgate_verdict rv = {.allow = true, .port = 80};
        snprintf(rv.host, sizeof(rv.host), "revoked.test");
        cr_assert_eq(cn_handed_add(s, pid1, decoy, &rv), 0);
        close(decoy);
        if (s->h[0].cookie == 0)
                cr_skip_test("no SO_COOKIE here");
        s->h[0].cookie++; /* the record is another socket with that inode */

        (void)cn_handed_recheck(s, pid1, refuse_revoked, on_cut, NULL);
        /* The decoy was not shut down (its peer reads no end). */
        struct pollfd p = {.fd = decoy_srv, .events = POLLIN};
        cr_expect_eq(poll(&p, 1, 300), 0, "the decoy was taken for the refused socket");
        close(go[1]);
        int st;
        waitpid(pid1, &st, 0);
        close(decoy_srv);
        close(listener);
        cn_handed_free(s);
}
