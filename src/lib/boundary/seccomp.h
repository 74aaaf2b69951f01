/* SPDX-License-Identifier: Apache-2.0 */
#pragma once

#include "error.h"

/* Install the sandbox's seccomp filter on the calling thread. Must be the
 * last step before execve (it needs PR_SET_NO_NEW_PRIVS already set). The
 * filter is an allow-list modelled on the common container default profile,
 * minus the mount family, namespace creation, ptrace, keyctl, bpf,
 * perf_event_open, userfaultfd and io_uring; clone3 answers ENOSYS so that
 * libcs fall back to clone, whose flags are checked; TIOCSTI and TIOCLINUX are
 * refused on the low 32 bits of the ioctl request; no call may set a setuid
 * or setgid bit or make a device node (openat2, whose mode a filter cannot
 * read, answers ENOSYS); other ABIs are killed. */
int seccomp_install(struct al_error *err);

/* This header shadows libseccomp's <seccomp.h> on the include path
 * (src/lib is an include directory); seccomp.c includes it as <seccomp.h>
 * with AIRLOCK_SECCOMP_IMPL defined to get the library's header too. */
#ifdef AIRLOCK_SECCOMP_IMPL
#include_next <seccomp.h>
#endif
