/* SPDX-License-Identifier: Apache-2.0 */
/* A file passed to connect() (supervisor/connect-notify.c, connect-take.c).
 * The supervisor takes the caller's descriptor (pidfd_getfd) to connect
 * on it; the number is the agent's to choose. A file on a mount whose
 * server hangs (FUSE, NFS) blocks close(2) in its flush, so a copy of one
 * closed on the supervisor's loop would stop the sandbox's supervisor
 * (timeouts, the kill switch, the end of the audit log). Here close() is
 * wrapped (-Wl,--wrap=close): closing the marker file on this process's
 * own thread waits as such a flush would, and is counted. The number may
 * also be pointed at the file after the supervisor checked it
 * (pidfd_getfd is wrapped: the child swaps it in at that moment); the
 * closer that then closes the copy hangs too (its close waits 3 s), and
 * the loop must answer the next connect() meanwhile. */
#include <arpa/inet.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <pthread.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>

#include "connect-notify-test-util.h"
#include "supervisor/connect-take.h"

static pid_t self;
static dev_t marker_dev;
static ino_t marker_ino;
static volatile int marker_closed_here;
static int swap_go = -1, swap_done = -1; /* the pipes to the child's swapping thread */

static bool is_marker(int fd)
{
        struct stat st;
        return marker_ino && fstat(fd, &st) == 0 && st.st_ino == marker_ino &&
               st.st_dev == marker_dev;
}

int __real_close(int fd);
int __wrap_close(int fd);
int __wrap_close(int fd)
{
        if (getpid() == self && is_marker(fd)) {
                marker_closed_here++;
                usleep(1500 * 1000); /* a flush that hangs (it would not end) */
        }
        return __real_close(fd);
}

CNT_SYSCALL_WRAP(n, a)
{
        if (n == SYS_pidfd_getfd && getpid() == self && swap_go >= 0) {
                /* Between the supervisor's check and its take. */
                char c = 's';
                if (write(swap_go, &c, 1) == 1 && read(swap_done, &c, 1) == 1) {
                }
                swap_go = -1;
        }
        if (n == SYS_close && getpid() != self && is_marker((int)a[0]))
                sleep(3); /* the closer's flush hangs too */
}

static struct event_base *base;
static struct policy *pol;
static struct netgate *gate;
static struct sv_connect_notify *cn;
static char marker_path[64];
static int marker = -1;

static void setup(void)
{
        self = getpid();
        base = event_base_new();
        pol = policy_new();
        struct al_error err = {0};
        gate = netgate_new(base, pol, "sbx-test", &err);
        cr_assert_not_null(gate, "%s", err.msg);
        snprintf(marker_path, sizeof(marker_path), "/tmp/cn-files-%d", (int)self);
        marker = open(marker_path, O_RDWR | O_CREAT | O_TRUNC | O_CLOEXEC, 0600);
        cr_assert_geq(marker, 0);
        struct stat st;
        cr_assert_eq(fstat(marker, &st), 0);
        marker_dev = st.st_dev;
        marker_ino = st.st_ino;
        marker_closed_here = 0;
}

static void teardown(void)
{
        cn = sv_connect_notify_free(cn);
        gate = netgate_free(gate);
        pol = policy_free(pol);
        event_base_free(base);
        marker_ino = 0;
        unlink(marker_path);
}

static struct sockaddr_in addr(const char *ip, uint16_t port)
{
        struct sockaddr_in a = {.sin_family = AF_INET, .sin_port = htons(port)};
        inet_pton(AF_INET, ip, &a.sin_addr);
        return a;
}

/* The child: the filter, then connect() on the marker file to `ip`. */
static pid_t child_connect_file(int over, int report, const char *ip)
{
        pid_t pid = fork();
        cr_assert_geq(pid, 0);
        if (pid == 0) {
                alarm(15);
                cnt_filter_connect(over);
                struct sockaddr_in a = addr(ip, 443);
                cnt_report(report, connect(marker, (struct sockaddr *)&a, sizeof(a)));
                _exit(0);
        }
        return pid;
}

static void serve(int over, pid_t pid1)
{
        int l = cnt_recv_fd(over);
        cr_assert_geq(l, 0);
        struct al_error err = {0};
        cn = sv_connect_notify_new(base, gate, l, &err);
        cr_assert_not_null(cn, "%s", err.msg);
        sv_connect_notify_set_sandbox(cn, pid1);
}

static void a_file_gets_enotsock(const char *ip)
{
        int sp[2], rep[2];
        cr_assert_eq(socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, sp), 0);
        cr_assert_eq(pipe2(rep, O_CLOEXEC), 0);
        pid_t pid = child_connect_file(sp[1], rep[1], ip);
        serve(sp[0], pid);
        int e = cnt_serve_until_report(base, rep[0], 10000);
        cr_expect_eq(e, ENOTSOCK, "connect() on a file: %s", e < 0 ? "no answer" : strerror(e));
        cr_expect_eq(marker_closed_here, 0,
                     "the supervisor closed a copy of the sandbox's file on its loop (%d)",
                     marker_closed_here);
        int st;
        cr_expect_eq(waitpid(pid, &st, 0), pid);
        cr_expect(WIFEXITED(st) && WEXITSTATUS(st) == 0);
}

Test(connect_notify_files, a_file_to_a_public_address_is_never_taken, .init = setup,
     .fini = teardown, .timeout = 30)
{
        a_file_gets_enotsock("93.184.216.34");
}

Test(connect_notify_files, a_file_to_a_local_address_is_never_taken, .init = setup,
     .fini = teardown, .timeout = 30)
{
        a_file_gets_enotsock("127.0.0.1");
}

/* Whether this process still holds a descriptor of the marker (but the
 * one of its own). */
static bool marker_held(void)
{
        for (int fd = 3; fd < 1024; fd++)
                if (fd != marker && is_marker(fd))
                        return true;
        return false;
}

static long elapsed_ms(const struct timespec *t0)
{
        struct timespec t;
        clock_gettime(CLOCK_MONOTONIC, &t);
        return (t.tv_sec - t0->tv_sec) * 1000 + (t.tv_nsec - t0->tv_nsec) / 1000000;
}

struct swapper {
        int go, done, fd;
};

static void *swap_main(void *ud)
{
        struct swapper *s = ud;
        char c;
        if (read(s->go, &c, 1) == 1 && dup2(marker, s->fd) == s->fd)
                (void)!write(s->done, &c, 1);
        return NULL;
}

Test(connect_notify_files, a_file_swapped_in_after_the_check_is_closed_elsewhere, .init = setup,
     .fini = teardown, .timeout = 40)
{
        int sp[2], rep[2], go[2], done[2];
        cr_assert_eq(socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, sp), 0);
        cr_assert_eq(pipe2(rep, O_CLOEXEC), 0);
        cr_assert_eq(pipe2(go, O_CLOEXEC), 0);
        cr_assert_eq(pipe2(done, O_CLOEXEC), 0);
        pid_t pid = fork();
        cr_assert_geq(pid, 0);
        if (pid == 0) {
                alarm(20);
                cnt_filter_connect(sp[1]);
                int s = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
                struct swapper sw = {.go = go[0], .done = done[1], .fd = s};
                pthread_t t;
                if (pthread_create(&t, NULL, swap_main, &sw) != 0)
                        _exit(94);
                /* A socket when the supervisor looks, the file when it takes. */
                struct sockaddr_in a = addr("93.184.216.34", 443);
                cnt_report(rep[1], connect(s, (struct sockaddr *)&a, sizeof(a)));
                pthread_join(t, NULL);
                /* The next one is answered while the closer hangs. */
                a = addr("127.0.0.1", 443);
                cnt_report(rep[1], connect(marker, (struct sockaddr *)&a, sizeof(a)));
                _exit(0);
        }
        swap_go = go[1];
        swap_done = done[0];
        serve(sp[0], pid);
        int e = cnt_serve_until_report(base, rep[0], 10000);
        cr_expect_eq(e, ENOTSOCK, "the swapped-in file: %s", e < 0 ? "no answer" : strerror(e));
        cr_expect_eq(swap_go, -1, "the file was swapped in at the take");
        cr_expect_eq(marker_closed_here, 0,
                     "the supervisor closed the copy of the file on its loop (%d)",
                     marker_closed_here);
        struct timespec t0;
        clock_gettime(CLOCK_MONOTONIC, &t0);
        e = cnt_serve_until_report(base, rep[0], 10000);
        long ms = elapsed_ms(&t0);
        cr_expect_eq(e, ENOTSOCK);
        cr_expect_lt(ms, 1000, "the next connect() waited %ld ms behind a hung close", ms);
        cr_expect_eq(cn_closers_live(), 1, "a closer holds the hung close");
        /* The closer's close ends: the copy is gone from this process. */
        for (int i = 0; i < 100 && (cn_closers_live() > 0 || marker_held()); i++)
                usleep(50 * 1000);
        cr_expect_eq(cn_closers_live(), 0);
        cr_expect(!marker_held(), "the copy of the file was closed");
        int st;
        cr_expect_eq(waitpid(pid, &st, 0), pid);
        cr_expect(WIFEXITED(st) && WEXITSTATUS(st) == 0, "child status %d", st);
}
