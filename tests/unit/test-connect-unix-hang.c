/* SPDX-License-Identifier: Apache-2.0 */
/* A Unix connect() to a path whose lookup hangs (supervisor/connect-unix.c,
 * connect-notify.c). With host sockets in the sandbox (transparent mode),
 * the supervisor resolves a Unix socket path as the caller would and
 * connects for it. A path that crosses a mount whose server stopped
 * answering (FUSE, NFS) makes openat2(2) wait; on the supervisor's loop
 * that held every gate, the deadman and the emergency stop. Here
 * syscall() is wrapped (-Wl,--wrap=syscall): openat2 of the marked path
 * says it is hanging, then waits 3 s, wherever it is called. Another
 * process of the sandbox connects meanwhile, and must be answered before
 * the hung one; the hung one still connects once its lookup returns. */
#include <arpa/inet.h>
#include <fcntl.h>
#include <grp.h>
#include <netinet/in.h>
#include <poll.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <sys/wait.h>

#include "connect-notify-test-util.h"
#include "supervisor/connect-take.h"

static char dir[64], sock_path[96];
static int hang_w = -1; /* told when the lookup starts to hang */

CNT_SYSCALL_WRAP(n, a)
{
        if (n == SYS_openat2 && dir[0] && strstr((const char *)a[1], dir)) {
                char c = 'h';
                (void)!write(hang_w, &c, 1);
                sleep(3); /* the mount's server does not answer */
        }
}

static struct event_base *base;
static struct policy *pol;
static struct netgate *gate;
static struct sv_connect_notify *cn;
static int listener = -1;

static void setup(void)
{
        if (geteuid() != 0)
                cr_skip_test("acting for another user's connect needs root");
        base = event_base_new();
        pol = policy_new();
        struct al_error err = {0};
        gate = netgate_new(base, pol, "sbx-test", &err);
        cr_assert_not_null(gate, "%s", err.msg);
        snprintf(dir, sizeof(dir), "/tmp/cn-hang-%d", (int)getpid());
        cr_assert_eq(mkdir(dir, 0755), 0);
        snprintf(sock_path, sizeof(sock_path), "%s/sock", dir);
        listener = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
        struct sockaddr_un su = {.sun_family = AF_UNIX};
        snprintf(su.sun_path, sizeof(su.sun_path), "%s", sock_path);
        cr_assert_eq(bind(listener, (struct sockaddr *)&su, sizeof(su)), 0);
        cr_assert_eq(chmod(sock_path, 0777), 0);
        cr_assert_eq(listen(listener, 8), 0);
}

static void teardown(void)
{
        cn = sv_connect_notify_free(cn);
        gate = netgate_free(gate);
        pol = policy_free(pol);
        if (base)
                event_base_free(base);
        if (listener >= 0)
                close(listener);
        unlink(sock_path);
        rmdir(dir);
}

static bool readable(int fd)
{
        struct pollfd p = {.fd = fd, .events = POLLIN};
        return poll(&p, 1, 0) == 1;
}

Test(connect_unix_hang, a_hung_lookup_does_not_hold_the_loop, .init = setup, .fini = teardown,
     .timeout = 40)
{
        int sp[2], rep_hung[2], rep_other[2], hang[2];
        cr_assert_eq(socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, sp), 0);
        cr_assert_eq(pipe2(rep_hung, O_CLOEXEC), 0);
        cr_assert_eq(pipe2(rep_other, O_CLOEXEC), 0);
        cr_assert_eq(pipe2(hang, O_CLOEXEC), 0);
        hang_w = hang[1];
        pid_t pid = fork();
        cr_assert_geq(pid, 0);
        if (pid == 0) {
                alarm(20);
                /* An ordinary user in the sandbox: the host acts as it. */
                gid_t g = 65534;
                if (setgroups(1, &g) < 0 || setresgid(g, g, g) < 0 || setresuid(g, g, g) < 0)
                        _exit(95);
                cnt_filter_connect(sp[1]);
                pid_t other = fork();
                if (other == 0) {
                        /* Once the first one's lookup hangs. */
                        char c;
                        if (read(hang[0], &c, 1) != 1)
                                _exit(96);
                        int s = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
                        struct sockaddr_in a = {.sin_family = AF_INET, .sin_port = htons(1)};
                        inet_pton(AF_INET, "127.0.0.1", &a.sin_addr);
                        cnt_report(rep_other[1], connect(s, (struct sockaddr *)&a, sizeof(a)));
                        _exit(0);
                }
                int s = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
                struct sockaddr_un su = {.sun_family = AF_UNIX};
                snprintf(su.sun_path, sizeof(su.sun_path), "%s", sock_path);
                cnt_report(rep_hung[1], connect(s, (struct sockaddr *)&su, sizeof(su)));
                int st;
                _exit(waitpid(other, &st, 0) == other && WIFEXITED(st) ? WEXITSTATUS(st) : 97);
        }
        int l = cnt_recv_fd(sp[0]);
        cr_assert_geq(l, 0);
        struct al_error err = {0};
        cn = sv_connect_notify_new(base, gate, l, &err);
        cr_assert_not_null(cn, "%s", err.msg);
        sv_connect_notify_set_sandbox(cn, pid);

        int e = cnt_serve_until_report(base, rep_other[0], 15000);
        cr_expect_eq(e, ECONNREFUSED, "the other connect(): %s",
                     e < 0 ? "no answer" : strerror(e));
        cr_expect(!readable(rep_hung[0]),
                  "the other connect() was answered only after the hung lookup's: the loop "
                  "waited for it");
        e = cnt_serve_until_report(base, rep_hung[0], 15000);
        cr_expect_eq(e, 0, "the hung lookup's connect(): %s", e < 0 ? "no answer" : strerror(e));
        int c = accept4(listener, NULL, NULL, SOCK_CLOEXEC | SOCK_NONBLOCK);
        cr_expect_geq(c, 0, "no connection reached the listener");
        if (c >= 0)
                close(c);
        int st;
        cr_expect_eq(waitpid(pid, &st, 0), pid);
        cr_expect(WIFEXITED(st) && WEXITSTATUS(st) == 0, "child status %d", st);
        /* The helper is reaped once it has ended. */
        for (int i = 0; i < 100 && cn_closers_live() > 0; i++)
                usleep(20 * 1000);
        cr_expect_eq(cn_closers_live(), 0);
}
