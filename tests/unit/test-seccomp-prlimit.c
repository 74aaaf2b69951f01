/* SPDX-License-Identifier: Apache-2.0 */
/* prlimit64 under the sandbox's filter: a process sets and reads its own
 * limits, and reads another's, but cannot set another process's limits.
 * Inside, every process of the sandbox user may otherwise lower pid 1's,
 * which every later command (of any user inside) inherits. */
#include <criterion/criterion.h>
#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/resource.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

#include "seccomp.h"

static pid_t target;

/* 0 or the errno, as the child's exit status. */
static int filtered(int (*fn)(void))
{
        pid_t pid = fork();
        cr_assert_geq(pid, 0);
        if (pid == 0) {
                struct al_error err = {0};
                if (prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) < 0 || seccomp_install(&err) < 0)
                        _exit(250);
                _exit(fn());
        }
        int st = 0;
        cr_assert_eq(waitpid(pid, &st, 0), pid);
        cr_assert(WIFEXITED(st) && WEXITSTATUS(st) != 250, "the filter did not install");
        return WEXITSTATUS(st);
}

static int res(long r)
{
        return r < 0 ? errno : 0;
}

static int set_own(void)
{
        struct rlimit r = {.rlim_cur = 1 << 20, .rlim_max = 1 << 20};
        return res(syscall(SYS_prlimit64, 0, RLIMIT_FSIZE, &r, NULL));
}

static int set_own_by_pid(void)
{
        struct rlimit r = {.rlim_cur = 1 << 20, .rlim_max = 1 << 20};
        return res(setrlimit(RLIMIT_FSIZE, &r));
}

static int read_other(void)
{
        struct rlimit r;
        return res(syscall(SYS_prlimit64, target, RLIMIT_FSIZE, NULL, &r));
}

static int set_other(void)
{
        struct rlimit r = {.rlim_cur = 4096, .rlim_max = 4096};
        return res(syscall(SYS_prlimit64, target, RLIMIT_FSIZE, &r, NULL));
}

Test(seccomp_prlimit, another_process_limits_are_not_set)
{
        /* A process of the same user: without the filter, setting its
         * limits would succeed. */
        target = fork();
        cr_assert_geq(target, 0);
        if (target == 0) {
                pause();
                _exit(0);
        }
        cr_assert_eq(filtered(set_own), 0, "setting its own limits");
        cr_assert_eq(filtered(set_own_by_pid), 0, "setrlimit");
        cr_assert_eq(filtered(read_other), 0, "reading another's limits");
        int e = filtered(set_other);
        struct rlimit now;
        cr_assert_eq(prlimit(target, RLIMIT_FSIZE, NULL, &now), 0);
        kill(target, SIGKILL);
        waitpid(target, NULL, 0);
        cr_assert_eq(e, EPERM, "setting another process's limits: %s", strerror(e));
        cr_assert_neq(now.rlim_cur, 4096, "the other process's limit was lowered");
}
