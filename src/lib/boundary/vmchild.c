/* SPDX-License-Identifier: Apache-2.0 */
/* Helper processes that share the caller's memory (vmchild.h). */
#include "vmchild.h"

#include <errno.h>
#include <sched.h>
#include <signal.h>
#include <stdint.h>

bool vmchild_supported(void)
{
#if defined(__x86_64__) || defined(__aarch64__)
        return true;
#else
        return false;
#endif
}

long vmchild_syscall(long nr, long a, long b, long c)
{
#if defined(__x86_64__)
        long ret;
        __asm__ volatile("syscall"
                         : "=a"(ret)
                         : "a"(nr), "D"(a), "S"(b), "d"(c)
                         : "rcx", "r11", "memory");
        return ret;
#elif defined(__aarch64__)
        register long x8 __asm__("x8") = nr;
        register long x0 __asm__("x0") = a;
        register long x1 __asm__("x1") = b;
        register long x2 __asm__("x2") = c;
        __asm__ volatile("svc 0" : "+r"(x0) : "r"(x8), "r"(x1), "r"(x2) : "memory");
        return x0;
#else
        (void)nr, (void)a, (void)b, (void)c;
        return -ENOSYS;
#endif
}

pid_t vmchild_start(int (*fn)(void *), void *arg, void *stack, size_t stack_size,
                    unsigned long clone_flags)
{
        if (!vmchild_supported())
                return -ENOSYS;
        sigset_t all, old;
        sigfillset(&all);
        if (sigprocmask(SIG_SETMASK, &all, &old) < 0)
                return -errno;
        /* The stack grows down from its end, 16-byte aligned. */
        uintptr_t top = ((uintptr_t)stack + stack_size) & ~(uintptr_t)15;
        pid_t pid = clone(fn, (void *)top, (int)(CLONE_VM | SIGCHLD | clone_flags), arg);
        int e = errno;
        (void)sigprocmask(SIG_SETMASK, &old, NULL);
        return pid < 0 ? -e : pid;
}
