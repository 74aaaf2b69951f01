/* SPDX-License-Identifier: Apache-2.0 */
#pragma once

#include <stdbool.h>
#include <stddef.h>
#include <sys/types.h>

/* A helper process that shares the caller's memory (CLONE_VM; a process of
 * its own, not a thread the C library knows of): nothing of the caller's
 * address space is copied to start it, nor torn down when it ends. A fork
 * of the supervisor cost 0.15-0.25 ms of its time per helper (the
 * cgroup.warm helper, the idmapped mount's user namespace), most of it
 * copying and then freeing page tables.
 *
 * The rules for `fn`, which runs on `stack` in the caller's memory: only
 * raw system calls through vmchild_syscall() (the C library's wrappers
 * write errno, which is the caller's: the helper has no thread storage of
 * its own), no allocation, no lock, nothing written but its own stack and
 * what the caller set aside for it; `stack` stays allocated until the
 * helper is reaped. It starts with every signal blocked (a handler would
 * run the caller's code on the caller's data) and keeps them so.
 *
 * vmchild_supported() is false where vmchild_syscall() has no raw form
 * (then callers fork as before). */
bool vmchild_supported(void);
pid_t vmchild_start(int (*fn)(void *), void *arg, void *stack, size_t stack_size,
                    unsigned long clone_flags);
/* A system call without errno: the result, or -errno. */
long vmchild_syscall(long nr, long a, long b, long c);
