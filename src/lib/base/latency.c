/* SPDX-License-Identifier: Apache-2.0 */
#include <errno.h>
#include <linux/sched.h>
#include <stdint.h>
#include <sys/syscall.h>
#include <unistd.h>

#include "latency.h"

/* struct sched_attr (sched_setattr(2)); not in every C library's headers. */
struct al_sched_attr {
        uint32_t size;
        uint32_t sched_policy;
        uint64_t sched_flags;
        int32_t sched_nice;
        uint32_t sched_priority;
        uint64_t sched_runtime; /* SCHED_NORMAL: the slice, in ns (Linux 6.12) */
        uint64_t sched_deadline;
        uint64_t sched_period;
};

#define AL_SCHED_SLICE_NS 100000 /* the kernel's shortest: 0.1 ms */

int al_sched_prefer_latency(void)
{
        struct al_sched_attr a = {0};
        if (syscall(SYS_sched_getattr, 0, &a, sizeof(a), 0) < 0)
                return -errno;
        /* A policy the host chose (batch, idle, real time) is left alone;
         * so is the nice value. */
        if (a.sched_policy != SCHED_NORMAL)
                return 0;
        a.size = sizeof(a);
        /* Children (the sandbox, helpers) start with the defaults. */
        a.sched_flags = SCHED_FLAG_RESET_ON_FORK;
        a.sched_runtime = AL_SCHED_SLICE_NS;
        return syscall(SYS_sched_setattr, 0, &a, 0) < 0 ? -errno : 0;
}
