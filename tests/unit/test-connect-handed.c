/* SPDX-License-Identifier: Apache-2.0 */
/* The direct path's handed sockets (supervisor/connect-handed.c): a
 * refused one is found among the processes of the pid namespace by its
 * inode and shut down, whatever fd number and process hold it; an allowed
 * one is left alone; a closed one is forgotten. This process stands for
 * the sandbox. */
#include <arpa/inet.h>
#include <criterion/criterion.h>
#include <errno.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <poll.h>
#include <signal.h>
#include <stdio.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include "supervisor/connect-handed.h"
#include "util.h"

static int listener = -1;
static size_t cuts;
static char cut_host[NETGATE_HOST_MAX + 1];

static void setup(void)
{
        listener = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
        cr_assert_geq(listener, 0);
        struct sockaddr_in a = {.sin_family = AF_INET, .sin_addr.s_addr = htonl(INADDR_LOOPBACK)};
        cr_assert_eq(bind(listener, (struct sockaddr *)&a, sizeof(a)), 0);
        cr_assert_eq(listen(listener, 16), 0);
        cuts = 0;
        cut_host[0] = '\0';
}

static void teardown(void)
{
        close(listener);
}

/* A connected pair: *client (the handed socket), returns the server end. */
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
        cr_expect_str_eq(reason, "revoked");
        cuts++;
        snprintf(cut_host, sizeof(cut_host), "%s", v->host);
}

/* Whether the peer of `s` shut it: a read finds the end at once. */
static bool ended(int s)
{
        struct pollfd p = {.fd = s, .events = POLLIN};
        if (poll(&p, 1, 2000) != 1)
                return false;
        char c;
        return recv(s, &c, 1, MSG_DONTWAIT) == 0;
}

Test(connect_handed, a_refused_socket_is_shut_wherever_it_is_held, .init = setup, .fini = teardown,
     .timeout = 20)
{
        struct cn_handed_set *s = cn_handed_new();
        int cut_c, keep_c;
        int cut_s = pair(&cut_c), keep_s = pair(&keep_c);
        struct netgate_verdict rv = verdict("revoked.test"), kv = verdict("kept.test");
        cr_assert_eq(cn_handed_add(s, getpid(), cut_c, &rv), 0);
        cr_assert_eq(cn_handed_add(s, getpid(), keep_c, &kv), 0);

        /* Held only by a child, under another fd number. */
        int go[2], ready[2];
        cr_assert_eq(pipe2(go, O_CLOEXEC), 0);
        cr_assert_eq(pipe2(ready, O_CLOEXEC), 0);
        pid_t child = fork();
        cr_assert_geq(child, 0);
        if (child == 0) {
                alarm(10);
                dup2(cut_c, 77);
                close(cut_c);
                close(keep_c);
                close(go[1]);
                close(ready[0]);
                close(ready[1]); /* its copies are closed: the parent goes on */
                char c;
                if (read(go[0], &c, 1) < 0)
                        _exit(1);
                _exit(0);
        }
        close(cut_c);
        close(go[0]);
        close(ready[1]);
        char r;
        cr_assert_eq(read(ready[0], &r, 1), 0);
        close(ready[0]);

        cr_assert_eq(cn_handed_recheck(s, getpid(), refuse_revoked, on_cut, NULL), 1);
        cr_expect_eq(cuts, 1);
        cr_expect_str_eq(cut_host, "revoked.test");
        cr_expect(ended(cut_s), "the revoked socket was shut in the child's hands");
        cr_expect_eq(cn_handed_count(s), 1, "the cut one is forgotten, the kept one stays");
        cr_expect_eq(send(keep_c, "x", 1, MSG_NOSIGNAL), 1);
        char c;
        cr_expect_eq(recv(keep_s, &c, 1, 0), 1, "the allowed one still works");

        /* Closed by the sandbox: forgotten at the next change. */
        close(keep_c);
        cr_assert_eq(cn_handed_recheck(s, getpid(), refuse_revoked, on_cut, NULL), 0);
        cr_expect_eq(cn_handed_count(s), 0);
        cr_expect_eq(cuts, 1);

        close(go[1]);
        waitpid(child, NULL, 0);
        close(cut_s);
        close(keep_s);
        cn_handed_free(s);
}

Test(connect_handed, a_full_set_forgets_the_gone_then_refuses, .init = setup, .fini = teardown,
     .timeout = 30)
{
        struct cn_handed_set *s = cn_handed_new();
        struct netgate_verdict v = verdict("kept.test");
        int c, srv = pair(&c);
        /* Every record names the one open socket: none is gone. */
        for (size_t i = 0; i < CN_HANDED_MAX; i++)
                cr_assert_eq(cn_handed_add(s, getpid(), c, &v), 0);
        cr_expect_eq(cn_handed_add(s, getpid(), c, &v), -ENOSPC,
                     "a socket that cannot be recorded is not handed over");
        close(c);
        int c2, srv2 = pair(&c2);
        cr_expect_eq(cn_handed_add(s, getpid(), c2, &v), 0, "the gone ones made room");
        cr_expect_eq(cn_handed_count(s), 1);
        close(c2);
        close(srv);
        close(srv2);
        cn_handed_free(s);
}
