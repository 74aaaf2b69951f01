/* SPDX-License-Identifier: Apache-2.0 */
/* A refused direct-path socket (supervisor/connect-handed.c) that no
 * process's fd table shows is still cut: one inside an SCM_RIGHTS message
 * in transit, and every one when /proc cannot be read at all. As root the
 * socket itself is aborted; otherwise the processes that could receive it
 * (here the child standing for the sandbox) are killed. */
#include <arpa/inet.h>
#include <criterion/criterion.h>
#include <errno.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <poll.h>
#include <signal.h>
#include <stdio.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include "supervisor/connect-handed.h"
#include "connect-notify-test-util.h"
#include "util.h"

static int listener = -1;
static size_t cuts;

static void setup(void)
{
        listener = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
        cr_assert_geq(listener, 0);
        struct sockaddr_in a = {.sin_family = AF_INET, .sin_addr.s_addr = htonl(INADDR_LOOPBACK)};
        cr_assert_eq(bind(listener, (struct sockaddr *)&a, sizeof(a)), 0);
        cr_assert_eq(listen(listener, 16), 0);
        cuts = 0;
}

static void teardown(void)
{
        close(listener);
}

static int pair(int *client)
{
        struct sockaddr_in a;
        socklen_t l = sizeof(a);
        cr_assert_eq(getsockname(listener, (struct sockaddr *)&a, &l), 0);
        *client = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
        cr_assert_eq(connect(*client, (struct sockaddr *)&a, l), 0);
        int s = accept4(listener, NULL, NULL, SOCK_CLOEXEC);
        cr_assert_geq(s, 0);
        return s;
}

static struct netgate_verdict verdict(const char *host)
{
        struct netgate_verdict v = {.allow = true, .port = 80};
        snprintf(v.host, sizeof(v.host), "%s", host);
        return v;
}

static bool refuse_revoked(void *ud, const struct netgate_verdict *v)
{
        (void)ud;
        return STREQ(v->host, "revoked.test");
}

static void on_cut(void *ud, const struct netgate_verdict *v, const char *reason)
{
        (void)ud;
        (void)v;
        cr_expect(STREQ(reason, "revoked") || STREQ(reason, "revoked_killed"), "%s", reason);
        cuts++;
}

/* Whether the peer of `s` is gone: an end of file or a reset, within 2 s. */
static bool ended(int s)
{
        struct pollfd p = {.fd = s, .events = POLLIN};
        if (poll(&p, 1, 2000) != 1)
                return false;
        char c;
        return recv(s, &c, 1, MSG_DONTWAIT) <= 0;
}

Test(connect_handed_reach, a_refused_socket_in_transit_is_cut, .init = setup, .fini = teardown,
     .timeout = 20)
{
        struct cn_handed_set *s = cn_handed_new();
        int c, srv = pair(&c);
        struct netgate_verdict rv = verdict("revoked.test");
        cr_assert_eq(cn_handed_add(s, getpid(), c, &rv), 0);

        /* A child holds the receiving end of a socket pair and has not
         * received yet: the handed socket is only inside the message. */
        int sp[2], go[2], ready[2];
        cr_assert_eq(socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, sp), 0);
        cr_assert_eq(pipe2(go, O_CLOEXEC), 0);
        cr_assert_eq(pipe2(ready, O_CLOEXEC), 0);
        pid_t child = fork();
        cr_assert_geq(child, 0);
        if (child == 0) {
                alarm(10);
                close(sp[0]);
                close(go[1]);
                close(c);
                close(ready[0]);
                close(ready[1]); /* its copies are closed: the parent goes on */
                char b;
                if (read(go[0], &b, 1) < 0)
                        _exit(1);
                _exit(0);
        }
        close(sp[1]);
        close(go[0]);
        close(ready[1]);
        char rb;
        cr_assert_eq(read(ready[0], &rb, 1), 0);
        close(ready[0]);
        cr_assert(cnt_sendmsg_fd(sp[0], c));
        close(c);
        close(sp[0]);

        int r = cn_handed_recheck(s, getpid(), refuse_revoked, on_cut, NULL);
        cr_expect_eq(r, 1, "the socket in transit is cut (got %d)", r);
        cr_expect_eq(cuts, 1);
        cr_expect(ended(srv), "the socket in transit was cut");
        cr_expect_eq(cn_handed_count(s), 0);

        close(go[1]);
        waitpid(child, NULL, 0);
        close(srv);
        cn_handed_free(s);
}

Test(connect_handed_reach, proc_unreadable_fails_closed, .init = setup, .fini = teardown,
     .timeout = 20)
{
        struct cn_handed_set *s = cn_handed_new();
        int c, srv = pair(&c);
        struct netgate_verdict rv = verdict("revoked.test");
        cr_assert_eq(cn_handed_add(s, getpid(), c, &rv), 0);

        /* The child stands for the sandbox (its pid 1): the one holder. */
        int go[2];
        cr_assert_eq(pipe2(go, O_CLOEXEC), 0);
        pid_t child = fork();
        cr_assert_geq(child, 0);
        if (child == 0) {
                alarm(10);
                close(go[1]);
                char b;
                if (read(go[0], &b, 1) < 0)
                        _exit(1);
                _exit(0);
        }
        close(c);
        close(go[0]);

        /* No fd can be opened: /proc cannot be read at all. */
        struct rlimit old, lim;
        cr_assert_eq(getrlimit(RLIMIT_NOFILE, &old), 0);
        int probe = open("/dev/null", O_RDONLY | O_CLOEXEC);
        cr_assert_geq(probe, 0);
        close(probe);
        lim = old;
        lim.rlim_cur = (rlim_t)probe;
        cr_assert_eq(setrlimit(RLIMIT_NOFILE, &lim), 0);
        int r = cn_handed_recheck(s, child, refuse_revoked, on_cut, NULL);
        cr_assert_eq(setrlimit(RLIMIT_NOFILE, &old), 0);

        cr_expect_eq(r, 1, "cut all the same (got %d)", r);
        cr_expect_eq(cuts, 1);
        cr_expect(ended(srv), "the refused socket was cut");

        close(go[1]);
        waitpid(child, NULL, 0);
        close(srv);
        cn_handed_free(s);
}

/* A change that refuses nothing must not forget a socket only because it
 * was in transit then: received later, it is cut at the next revoke. */
Test(connect_handed_reach, a_socket_in_transit_at_a_change_is_remembered, .init = setup,
     .fini = teardown, .timeout = 20)
{
        struct cn_handed_set *s = cn_handed_new();
        int c, srv = pair(&c);
        struct netgate_verdict rv = verdict("revoked.test");
        cr_assert_eq(cn_handed_add(s, getpid(), c, &rv), 0);

        int sp[2], go[2], ready[2];
        cr_assert_eq(socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, sp), 0);
        cr_assert_eq(pipe2(go, O_CLOEXEC), 0);
        cr_assert_eq(pipe2(ready, O_CLOEXEC), 0);
        pid_t child = fork();
        cr_assert_geq(child, 0);
        if (child == 0) {
                alarm(10);
                close(sp[0]);
                close(go[1]);
                close(c);
                close(ready[0]);
                char b;
                if (write(ready[1], "r", 1) != 1 || read(go[0], &b, 1) != 1)
                        _exit(1);
                int got = cnt_recv_fd(sp[1]); /* held from now on */
                if (got < 0 || write(ready[1], "g", 1) != 1)
                        _exit(2);
                if (read(go[0], &b, 1) < 0)
                        _exit(3);
                _exit(0);
        }
        close(sp[1]);
        close(go[0]);
        close(ready[1]);
        char b;
        cr_assert_eq(read(ready[0], &b, 1), 1);
        cr_assert(cnt_sendmsg_fd(sp[0], c));
        close(c);

        /* Nothing refused: the one in transit is kept. */
        cr_assert_eq(cn_handed_recheck(s, getpid(), NULL, on_cut, NULL), 0);
        cr_expect_eq(cn_handed_count(s), 1, "a socket in transit is not taken for closed");

        cr_assert_eq(write(go[1], "g", 1), 1);
        cr_assert_eq(read(ready[0], &b, 1), 1);
        cr_expect_eq(cn_handed_recheck(s, getpid(), refuse_revoked, on_cut, NULL), 1);
        cr_expect_eq(cuts, 1);
        cr_expect(ended(srv), "received after the change, cut at the revoke");

        close(go[1]);
        close(ready[0]);
        close(sp[0]);
        waitpid(child, NULL, 0);
        close(srv);
        cn_handed_free(s);
}
