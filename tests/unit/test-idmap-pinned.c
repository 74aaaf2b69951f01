/* SPDX-License-Identifier: Apache-2.0 */
/* As root the workspace is mounted from the descriptor the plan walked
 * and pinned (trusted_open), never from its path again. When that
 * descriptor cannot be cloned into a mount, spawn_prepare_idmapped_fd
 * must fail, not answer "nothing prepared": the mount step then bound the
 * workspace by its path, the very path the walk was there to pin. A
 * descriptor of another mount namespace (open_tree refuses it) stands in
 * for any failure to clone. */
#include <criterion/criterion.h>
#include <fcntl.h>
#include <sched.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/wait.h>
#include <unistd.h>

#include "spawn-internal.h"
#include "util.h"

Test(idmap_pinned, a_pinned_tree_that_cannot_be_cloned_fails, .timeout = 20)
{
        if (geteuid() != 0)
                cr_skip_test("needs root (the workspace is pinned only as root)");
        pid_t pid = fork();
        cr_assert_geq(pid, 0);
        if (pid == 0) {
                /* The fd is of the host's namespace; this process leaves it. */
                int fd = open("/tmp", O_PATH | O_DIRECTORY | O_CLOEXEC);
                if (fd < 0 || unshare(CLONE_NEWNS) < 0)
                        _exit(3);
                int mnt = -1;
                struct al_error err = {0};
                int r = spawn_prepare_idmapped_fd(fd, "/tmp", 0, 0, &mnt, NULL, &err);
                if (r >= 0 && mnt < 0)
                        _exit(1); /* "prepared", with nothing: the path would be used */
                _exit(r < 0 ? 0 : 2);
        }
        int st;
        cr_assert_eq(waitpid(pid, &st, 0), pid);
        cr_assert(WIFEXITED(st));
        cr_assert_neq(WEXITSTATUS(st), 3, "setup failed");
        cr_assert_eq(WEXITSTATUS(st), 0,
                     "spawn_prepare_idmapped_fd answered success without a mount (exit %d)",
                     WEXITSTATUS(st));
}
