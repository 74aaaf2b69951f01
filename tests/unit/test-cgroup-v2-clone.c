/* SPDX-License-Identifier: Apache-2.0 */
/* cgroup v2: the sandbox enters its leaf at clone (CLONE_INTO_CGROUP, in
 * spawn.c's spawn_clone_into_cgroup), with a cgroup namespace rooted
 * there, and is never moved afterwards. On a real cgroup2 hierarchy (the
 * whole of /sys/fs/cgroup, or a hybrid host's /sys/fs/cgroup/unified) as
 * root: the child is in the leaf from its first instruction and sees it as
 * "/"; the leaf it made is removed. Without a writable cgroup2 hierarchy
 * the real test skips; the flags are checked everywhere. */
#include <criterion/criterion.h>
#include <fcntl.h>
#include <linux/magic.h>
#include <sched.h>
#include <signal.h>
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/statfs.h>
#include <sys/wait.h>
#include <unistd.h>

#include "cgroup.h"
#include "spawn-internal.h"
#include "util.h"

Test(cgroup_v2_clone, only_a_leaf_with_a_descriptor_is_entered_at_clone)
{
        struct clone_args args = {.flags = CLONE_NEWPID};
        cr_expect_not(spawn_clone_into_cgroup(NULL, &args));
        struct cgroup v1 = {.dir_fd = -1};
        cr_expect_not(spawn_clone_into_cgroup(&v1, &args));
        cr_expect_eq(args.flags, CLONE_NEWPID, "flags set without a leaf");
        struct cgroup v2 = {.dir_fd = 7};
        cr_expect(spawn_clone_into_cgroup(&v2, &args));
        cr_expect_eq(args.flags, CLONE_NEWPID | CLONE_INTO_CGROUP | CLONE_NEWCGROUP);
        cr_expect_eq(args.cgroup, 7);
}

/* This process's cgroup2 directory: the mount's path plus the "0::" line
 * of /proc/self/cgroup. */
static char *own_v2_dir(void)
{
        static const char *const mounts[] = {"/sys/fs/cgroup", "/sys/fs/cgroup/unified"};
        const char *mnt = NULL;
        for (size_t i = 0; i < ARRAY_SIZE(mounts) && !mnt; i++) {
                struct statfs s;
                if (statfs(mounts[i], &s) == 0 && s.f_type == CGROUP2_SUPER_MAGIC)
                        mnt = mounts[i];
        }
        _cleanup_free_ char *self = NULL;
        if (!mnt || read_file_at(AT_FDCWD, "/proc/self/cgroup", 1 << 16, &self, NULL) < 0)
                return NULL;
        char *line = strstr(self, "0::");
        if (!line)
                return NULL;
        line += 3;
        line[strcspn(line, "\n")] = '\0';
        return xasprintf("%s%s", mnt, STREQ(line, "/") ? "" : line);
}

Test(cgroup_v2_clone, the_child_starts_in_its_leaf_and_sees_it_as_the_root)
{
        _cleanup_free_ char *parent = own_v2_dir();
        if (!parent || geteuid() != 0 || access(parent, W_OK) < 0)
                cr_skip_test("no writable cgroup2 hierarchy here");
        _cleanup_free_ char *leaf = xasprintf("%s/airlock-test-clone-%d", parent, (int)getpid());
        if (mkdir(leaf, 0755) < 0)
                cr_skip_test("cannot make a cgroup2 leaf in %s: %m", parent);
        struct cgroup cg = {.dir_fd = open(leaf, O_RDONLY | O_DIRECTORY | O_CLOEXEC)};
        cr_assert_geq(cg.dir_fd, 0);
        int pipefd[2];
        cr_assert_eq(pipe2(pipefd, O_CLOEXEC), 0);

        struct clone_args args = {.exit_signal = SIGCHLD};
        cr_assert(spawn_clone_into_cgroup(&cg, &args));
        pid_t pid = spawn_sys_clone3(&args);
        if (pid == 0) {
                /* The child's own view, before it does anything else. */
                char buf[256];
                int fd = open("/proc/self/cgroup", O_RDONLY | O_CLOEXEC);
                ssize_t n = fd >= 0 ? read(fd, buf, sizeof(buf)) : -1;
                if (n <= 0 || write(pipefd[1], buf, (size_t)n) != n)
                        _exit(1);
                _exit(0);
        }
        cr_assert_gt(pid, 0, "clone3 into the cgroup: %m");
        close(pipefd[1]);
        /* From outside: the leaf, while the child is alive or a zombie. */
        _cleanup_free_ char *path = xasprintf("/proc/%d/cgroup", (int)pid);
        _cleanup_free_ char *outside = NULL;
        (void)read_file_at(AT_FDCWD, path, 1 << 16, &outside, NULL);
        char inside[256] = "";
        ssize_t n = read(pipefd[0], inside, sizeof(inside) - 1);
        int st;
        cr_assert_eq(waitpid(pid, &st, 0), pid);
        close(pipefd[0]);
        close(cg.dir_fd);
        cr_expect_eq(rmdir(leaf), 0, "the leaf stays: %m");
        cr_assert(WIFEXITED(st) && WEXITSTATUS(st) == 0);
        cr_assert_gt(n, 0);
        cr_expect(strstr(inside, "0::/\n"), "the child does not see its leaf as /: %s", inside);
        _cleanup_free_ char *want = xasprintf("/airlock-test-clone-%d\n", (int)getpid());
        if (outside)
                cr_expect(strstr(outside, want), "not in the leaf: %s", outside);
}
