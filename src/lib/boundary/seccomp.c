/* SPDX-License-Identifier: Apache-2.0 */
#include <errno.h>
#include <linux/seccomp.h>
#include <sys/prctl.h>
#include <sys/syscall.h>
#include <unistd.h>

#include "seccomp-bpf.h"
#include "seccomp.h"
#include "util.h"

int seccomp_install(struct al_error *err)
{
        /* The filter must not be the thing that turns no_new_privs on: a
         * caller that forgot it would otherwise get it silently here, after
         * steps that rely on it (Landlock) have already run. */
        int r = prctl(PR_GET_NO_NEW_PRIVS, 0, 0, 0, 0);
        if (r < 0)
                return al_error_set(err, errno, "seccomp: reading no_new_privs");
        if (r != 1)
                return al_error_set(err, EPERM, "seccomp: no_new_privs is not set");

        struct sock_fprog prog = {
                .len = (unsigned short)ARRAY_SIZE(seccomp_bpf),
                .filter = (struct sock_filter *)seccomp_bpf,
        };
        if (syscall(SYS_seccomp, SECCOMP_SET_MODE_FILTER, 0, &prog) < 0)
                return al_error_set(err, errno, "seccomp: loading filter");
        return 0;
}
