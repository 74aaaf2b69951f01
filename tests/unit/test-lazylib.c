/* SPDX-License-Identifier: Apache-2.0 */
/* The loader of airlock's lazily loaded libraries (src/cli/lazylib.c) loads
 * only while the process sees the file system it started on: once it has
 * another root or mount namespace (as a process that entered a sandbox's
 * root has), a dlopen would load the sandbox's own copy of the library,
 * code the agent wrote. */
#include <criterion/criterion.h>
#include <sched.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include "lazylib.h"

#define LIBC "libc.so.6"

/* Runs fn in a child; its exit status: 0 when lazylib_open refused and
 * said so, 1 when it loaded, 2 when it failed otherwise, 3 when the
 * change of view could not be made. */
static int in_child(int (*change)(void))
{
        pid_t p = fork();
        cr_assert_geq(p, 0);
        if (p == 0) {
                if (change() < 0)
                        _exit(3);
                char msg[512] = "";
                void *h = lazylib_open(LIBC, msg, sizeof(msg));
                if (h)
                        _exit(1);
                _exit(strstr(msg, "refused") && strstr(msg, LIBC) ? 0 : 2);
        }
        int st;
        cr_assert_eq(waitpid(p, &st, 0), p);
        cr_assert(WIFEXITED(st));
        return WEXITSTATUS(st);
}

Test(lazylib, loads_on_the_file_system_it_started_on)
{
        char msg[512] = "";
        void *h = lazylib_open(LIBC, msg, sizeof(msg));
        cr_assert_not_null(h, "%s", msg);
        dlclose(h);
}

static int new_mount_ns(void)
{
        return unshare(CLONE_NEWNS);
}

Test(lazylib, refuses_in_another_mount_namespace)
{
        if (geteuid() != 0)
                cr_skip_test("a new mount namespace needs root here");
        cr_assert_eq(in_child(new_mount_ns), 0, "loaded, or failed without refusing");
}

static char root_dir[] = "/tmp/lazylib-root-XXXXXX";

static int new_root(void)
{
        return chroot(root_dir) < 0 ? -1 : chdir("/");
}

Test(lazylib, refuses_under_another_root)
{
        if (geteuid() != 0)
                cr_skip_test("chroot needs root");
        cr_assert_not_null(mkdtemp(root_dir));
        int r = in_child(new_root);
        rmdir(root_dir);
        cr_assert_eq(r, 0, "loaded, or failed without refusing (%d)", r);
}
