/* SPDX-License-Identifier: Apache-2.0 */
/* pid 1 empties the bounding set up to the highest capability the kernel
 * knows. confine_last_cap() finds it with PR_CAP_AMBIENT_IS_SET (the kernel
 * answers 0..cap_last_cap and refuses anything above with EINVAL) instead
 * of opening /proc/sys/kernel/cap_last_cap at every start: the answer must
 * be the one /proc gives, and /proc must not be opened when prctl answers.
 * openat is interposed to count the opens. */
#include <criterion/criterion.h>
#include <fcntl.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/syscall.h>
#include <unistd.h>

#include "confine.h"

static int proc_opens;

int openat(int dirfd, const char *path, int flags, ...)
{
        mode_t mode = 0;
        if (flags & (O_CREAT | O_TMPFILE)) {
                va_list ap;
                va_start(ap, flags);
                mode = (mode_t)va_arg(ap, int);
                va_end(ap);
        }
        if (strstr(path, "cap_last_cap"))
                proc_opens++;
        return (int)syscall(SYS_openat, dirfd, path, flags, mode);
}

Test(confine_lastcap, the_kernels_answer_without_proc)
{
        int fd = (int)syscall(SYS_openat, AT_FDCWD, "/proc/sys/kernel/cap_last_cap", O_RDONLY);
        cr_assert(fd >= 0);
        char buf[32] = {0};
        cr_assert(read(fd, buf, sizeof(buf) - 1) > 0);
        close(fd);
        int want = atoi(buf);
        cr_assert(want > 30 && want < 64, "cap_last_cap %d", want);
        cr_assert_eq(confine_last_cap(), want);
        cr_assert_eq(proc_opens, 0, "/proc/sys/kernel/cap_last_cap was opened");
        /* Found once per process: asked again, the same. */
        cr_assert_eq(confine_last_cap(), want);
}
