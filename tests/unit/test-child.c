/* SPDX-License-Identifier: Apache-2.0 */
#include <criterion/criterion.h>
#include <fcntl.h>
#include <string.h>
#include <sys/wait.h>

#include "child.h"
#include "util.h"

TestSuite(child, .timeout = 30);

/* Run argv under /bin/sh with the fds given; its stdout, collected. */
static char *run(const char *script, struct child_spawn *s, int *ret_status)
{
        int p[2];
        cr_assert_eq(pipe2(p, O_CLOEXEC), 0);
        char *argv[] = {(char *)"sh", (char *)"-c", (char *)script, NULL};
        s->path = "/bin/sh";
        s->argv = argv;
        s->fds[1] = p[1];
        pid_t pid;
        int r = child_spawn(s, &pid, NULL);
        close(p[1]);
        cr_assert_eq(r, 0, "%s", strerror(-r));
        char *out = xcalloc(4096, 1);
        size_t len = 0;
        ssize_t k;
        while ((k = read(p[0], out + len, 4095 - len)) > 0)
                len += (size_t)k;
        close(p[0]);
        *ret_status = child_wait(pid);
        return out;
}

Test(child, exec_failure_is_an_errno)
{
        char *argv[] = {(char *)"nope", NULL};
        struct child_spawn s = {.path = "/nonexistent/airlock-nope",
                                .argv = argv,
                                .fds = {CHILD_FD_NULL, CHILD_FD_NULL, CHILD_FD_NULL},
                                .n_fds = 3};
        pid_t pid = -1;
        cr_assert_eq(child_spawn(&s, &pid, NULL), -ENOENT);
        s.path = "/etc/passwd";
        cr_assert_eq(child_spawn(&s, &pid, NULL), -EACCES);
        s.path = "/bin/true";
        s.cwd = "/nonexistent/dir";
        cr_assert_eq(child_spawn(&s, &pid, NULL), -ENOENT);
        /* The failed children were reaped. */
        cr_assert_eq(waitpid(-1, NULL, WNOHANG | __WALL), -1);
        cr_assert_eq(errno, ECHILD);
}

Test(child, clean_env_fds_and_cwd)
{
        int leak = open("/dev/null", O_RDONLY); /* not close-on-exec */
        cr_assert_geq(leak, 3);
        int extra = open("/etc/hostname", O_RDONLY | O_CLOEXEC);
        cr_assert_geq(extra, 0);
        char *envp[] = {(char *)"A=1", NULL};
        struct child_spawn s = {.envp = envp,
                                .fds = {CHILD_FD_NULL, -1, CHILD_FD_NULL, CHILD_FD_CLOSED, extra},
                                .n_fds = 5,
                                .cwd = "/"};
        int st;
        _cleanup_free_ char *out =
            run("echo \"$A:${HOME-unset}:$(pwd)\"; ls /proc/self/fd | sort -n | "
                "tr '\\n' ' '; test -r /dev/fd/4 && echo four",
                &s, &st);
        close(leak);
        close(extra);
        cr_assert(WIFEXITED(st) && WEXITSTATUS(st) == 0);
        /* fds 0, 1, 2, 4 and the one ls opens: no 3, no leak. */
        cr_assert_str_eq(out, "1:unset:/\n0 1 2 3 4 four\n", "%s", out);
}

Test(child, sources_below_the_targets_are_not_clobbered)
{
        /* Put stdout's pipe at 4 and something else at 3, then ask for them
         * swapped. */
        int a = open("/etc/hostname", O_RDONLY | O_CLOEXEC);
        int b = open("/etc/passwd", O_RDONLY | O_CLOEXEC);
        cr_assert_geq(a, 0);
        cr_assert_geq(b, 0);
        struct child_spawn s = {.fds = {CHILD_FD_NULL, -1, CHILD_FD_NULL, b, a}, .n_fds = 5};
        int st;
        _cleanup_free_ char *out = run(
            "cmp -s /dev/fd/3 /etc/passwd && cmp -s /dev/fd/4 /etc/hostname && echo ok", &s, &st);
        close(a);
        close(b);
        cr_assert_str_eq(out, "ok\n");
}

Test(child, new_process_group_and_pidfd)
{
        struct child_spawn s = {
            .fds = {CHILD_FD_NULL, -1, CHILD_FD_NULL}, .n_fds = 3, .setpgid = true};
        int st;
        _cleanup_free_ char *out = run("ps -o pgid= -p $$ | tr -d ' '; echo $$", &s, &st);
        char *nl = strchr(out, '\n');
        cr_assert_not_null(nl);
        *nl = '\0';
        nl[strcspn(nl + 1, "\n") + 1] = '\0';
        cr_assert_str_eq(out, nl + 1, "pgid %s pid %s", out, nl + 1);

        char *argv[] = {(char *)"true", NULL};
        struct child_spawn t = {.path = "/bin/true",
                                .argv = argv,
                                .fds = {CHILD_FD_NULL, CHILD_FD_NULL, CHILD_FD_NULL},
                                .n_fds = 3,
                                .want_pidfd = true,
                                .no_exit_signal = true};
        pid_t pid;
        int pidfd = -1;
        cr_assert_eq(child_spawn(&t, &pid, &pidfd), 0);
        cr_assert_geq(pidfd, 0);
        siginfo_t si = {0};
        cr_assert_eq(waitid(P_PIDFD, (id_t)pidfd, &si, WEXITED | __WALL), 0);
        cr_assert_eq(si.si_status, 0);
        close(pidfd);
}
