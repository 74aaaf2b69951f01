/* SPDX-License-Identifier: Apache-2.0 */
/* vmchild.h: a helper process that shares the caller's memory, started
 * without a copy of it: what it writes the caller sees; a failing system
 * call in it leaves the caller's errno alone; it runs with every signal
 * blocked while the caller's mask is given back; it is a process of its
 * own (its own pid, reaped with waitpid). */
#include <criterion/criterion.h>
#include <errno.h>
#include <sched.h>
#include <signal.h>
#include <string.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

#include "vmchild.h"

static _Alignas(16) char stack[16384];
static volatile long seen_pid;
static volatile long bad_write;
static volatile int blocked_ok;

static int child(void *arg)
{
        seen_pid = vmchild_syscall(SYS_getpid, 0, 0, 0);
        bad_write = vmchild_syscall(SYS_write, -1, (long)"x", 1); /* fails: EBADF */
        /* Blocked, SIGTERM stays pending and the helper lives on to
         * return; not blocked, it dies of it. */
        blocked_ok = vmchild_syscall(SYS_kill, seen_pid, SIGTERM, 0) == 0;
        return *(int *)arg;
}

Test(vmchild, shares_memory_keeps_errno_blocks_signals)
{
        if (!vmchild_supported())
                cr_skip_test("no raw system calls on this architecture");
        sigset_t before;
        sigemptyset(&before);
        sigaddset(&before, SIGUSR2);
        cr_assert_eq(sigprocmask(SIG_SETMASK, &before, NULL), 0);
        int status_arg = 7;
        errno = 1234;
        pid_t pid = vmchild_start(child, &status_arg, stack, sizeof(stack), 0);
        cr_assert_gt(pid, 0, "vmchild_start: %s", strerror(-pid));
        int st;
        cr_assert_eq(waitpid(pid, &st, 0), pid);
        cr_expect(WIFEXITED(st) && WEXITSTATUS(st) == 7,
                  "its return is its exit status (a SIGTERM death: signals were not blocked)");
        cr_expect_eq(seen_pid, pid, "it is a process of its own, and wrote to our memory");
        cr_expect_neq(seen_pid, getpid());
        cr_expect_eq(bad_write, -EBADF, "the raw call reports -errno");
        cr_expect_eq(errno, 1234, "the helper's failure wrote our errno");
        cr_expect(blocked_ok, "the helper ran with signals unblocked");
        sigset_t after;
        cr_assert_eq(sigprocmask(SIG_SETMASK, NULL, &after), 0);
        cr_expect(sigismember(&after, SIGUSR2) && !sigismember(&after, SIGTERM),
                  "the caller's mask was not given back");
}
