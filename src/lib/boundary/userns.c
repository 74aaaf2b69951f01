/* SPDX-License-Identifier: Apache-2.0 */
/* The user namespace: its uid/gid maps, the reason an unprivileged one is
 * refused, and for a root caller the idmapped mounts of the writable trees. */
#include <errno.h>
#include <fcntl.h>
#include <grp.h>
#include <linux/openat2.h>
#include <linux/sched.h>
#include <net/if.h>
#include <netinet/in.h>
#include <sched.h>
#include <signal.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/mount.h>
#include <poll.h>
#include <sys/prctl.h>
#include <sys/resource.h>
#include <sys/signalfd.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/wait.h>

#include "cgroup.h"
#include "confine.h"
#include "fs.h"
#include "idle.h"
#include "mounts.h"
#include "spawn.h"
#include "util.h"
#include "vmchild.h"
#include "spawn-internal.h"

const char *spawn_userns_disabled_reason(void)
{
        _cleanup_free_ char *s = NULL;
        if (read_file_at(AT_FDCWD, "/proc/sys/user/max_user_namespaces", 64, &s, NULL) >= 0 &&
            strncmp(s, "0\n", 2) == 0)
                return "user namespaces are disabled (sysctl user.max_user_namespaces = 0)";
        free(s);
        s = NULL;
        if (geteuid() != 0 &&
            read_file_at(AT_FDCWD, "/proc/sys/kernel/unprivileged_userns_clone", 64, &s, NULL) >=
                0 &&
            strncmp(s, "0\n", 2) == 0)
                return "unprivileged user namespaces are disabled (sysctl "
                       "kernel.unprivileged_userns_clone = 0)";
        free(s);
        s = NULL;
        if (geteuid() != 0 &&
            read_file_at(AT_FDCWD, "/proc/sys/kernel/apparmor_restrict_unprivileged_userns", 64, &s,
                         NULL) >= 0 &&
            strncmp(s, "1\n", 2) == 0)
                return "AppArmor restricts unprivileged user namespaces (sysctl "
                       "kernel.apparmor_restrict_unprivileged_userns = 1)";
        return NULL;
}

/* True when the only supplementary group is the caller's own gid: nothing
 * more would go into the sandbox (a root inside a user namespace that denies
 * setgroups is in this case). */
bool spawn_only_own_group(void)
{
        gid_t groups[64];
        int n = getgroups(ARRAY_SIZE(groups), groups);
        if (n < 0)
                return false;
        for (int i = 0; i < n; i++)
                if (groups[i] != getegid())
                        return false;
        return true;
}

static int write_proc(pid_t pid, const char *file, const char *content)
{
        char path[64];
        snprintf(path, sizeof(path), "/proc/%d/%s", (int)pid, file);
        return write_file_at(AT_FDCWD, path, content);
}

int spawn_write_maps(pid_t pid, uid_t uid_in, uid_t uid_out, gid_t gid_in, gid_t gid_out,
                     bool deny_setgroups)
{
        char buf[64];
        snprintf(buf, sizeof(buf), "%u %u 1\n", (unsigned)uid_in, (unsigned)uid_out);
        int r = write_proc(pid, "uid_map", buf);
        if (r < 0)
                return r;
        if (deny_setgroups) {
                r = write_proc(pid, "setgroups", "deny");
                if (r < 0 && r != -ENOENT)
                        return r;
        }
        snprintf(buf, sizeof(buf), "%u %u 1\n", (unsigned)gid_in, (unsigned)gid_out);
        return write_proc(pid, "gid_map", buf);
}

pid_t spawn_sys_clone3(struct clone_args *args)
{
        return (pid_t)syscall(SYS_clone3, args, sizeof(*args));
}

pid_t spawn_idmap_helper = -1;
/* Its stack when it shares our memory (vmchild.h): freed once reaped. */
static void *idmap_helper_stack;

void spawn_reap_idmap_helper(void)
{
        if (spawn_idmap_helper <= 0)
                return;
        while (waitpid(spawn_idmap_helper, NULL, 0) < 0 && errno == EINTR)
                ;
        spawn_idmap_helper = -1;
        free(idmap_helper_stack);
        idmap_helper_stack = NULL;
}

/* A user namespace that maps the host owner of a tree to the sandbox's host
 * uid, for an idmapped mount: files owned by the caller's workspace owner
 * look like the sandbox user's own, and what the sandbox creates lands on
 * disk as that owner. Only root can make idmapped mounts. */
struct idmap_child {
        int rfd, wfd;
};

/* The user namespace's holder, sharing our memory (vmchild.h): it lives
 * until we close the pipe, after its maps are written and the namespace
 * opened. */
static int idmap_child_main(void *arg)
{
        const struct idmap_child *c = arg;
        char ch;
        (void)vmchild_syscall(SYS_close, c->wfd, 0, 0);
        while (vmchild_syscall(SYS_read, c->rfd, (long)&ch, 1) == -EINTR)
                ;
        return 0;
}

static int idmap_userns(uid_t owner_uid, gid_t owner_gid, uid_t to_uid, gid_t to_gid)
{
        int pipefd[2];
        if (pipe2(pipefd, O_CLOEXEC) < 0)
                return -errno;
        /* Without a copy of the supervisor's memory (vmchild.h). What it
         * reads is set before it starts and never changed: the pipe's ends
         * (its own copies; it closes the write end). One helper pending at
         * a time: an earlier one has long read its EOF. */
        spawn_reap_idmap_helper();
        static struct idmap_child ic;
        ic = (struct idmap_child){.rfd = pipefd[0], .wfd = pipefd[1]};
        enum { STACK = 16384 };
        void *stack = vmchild_supported() ? xcalloc(1, STACK) : NULL;
        pid_t pid =
            stack ? vmchild_start(idmap_child_main, &ic, stack, STACK, CLONE_NEWUSER) : -ENOSYS;
        if (pid < 0) { /* no raw system calls here, or the kernel refused: a fork */
                free(stack);
                stack = NULL;
                struct clone_args args = {.flags = CLONE_NEWUSER, .exit_signal = SIGCHLD};
                pid = spawn_sys_clone3(&args);
                if (pid < 0)
                        pid = -errno;
        }
        if (pid < 0) {
                close(pipefd[0]);
                close(pipefd[1]);
                return pid;
        }
        if (pid == 0) {
                char c;
                close(pipefd[1]);
                while (read(pipefd[0], &c, 1) < 0 && errno == EINTR)
                        ;
                _exit(0);
        }
        close(pipefd[0]);
        int r = spawn_write_maps(pid, owner_uid, to_uid, owner_gid, to_gid, false);
        int fd = -1;
        if (r >= 0) {
                char path[64];
                snprintf(path, sizeof(path), "/proc/%d/ns/user", (int)pid);
                fd = open(path, O_RDONLY | O_CLOEXEC);
                if (fd < 0)
                        r = -errno;
        }
        close(pipefd[1]);
        /* It exits as soon as it reads EOF; reap it without waiting when
         * it already has, else later (spawn_reap_idmap_helper(), with its
         * stack: never freed while it may still run on it). */
        if (waitpid(pid, NULL, WNOHANG) == 0) {
                spawn_idmap_helper = pid;
                idmap_helper_stack = stack;
        } else
                free(stack);
        return r < 0 ? r : fd;
}

/* For a root caller: the tree at `path` as a detached mount idmapped to the
 * sandbox's host uid, or -1 when a plain bind will do.
 *
 * The agent's files land as the tree's owner: bob's project stays bob's,
 * and a root-owned tree gets root-owned files. That is the least privilege
 * that keeps the tree usable: mapped onto any other uid, the agent could not
 * change the files it was given, and what it made would belong to an
 * account that other processes (other sandboxes run as the same unprivileged
 * uid) could alter later. Ownership carries no privilege out with it: the
 * seccomp filter refuses every set-id mode and device node, and no
 * capability survives inside, so no file capability can be set either
 * (tests/escape/test_setuid.py). */
int spawn_prepare_idmapped(const char *path, uid_t host_uid, gid_t host_gid, int *ret_fd,
                           bool *ret_idmapped, struct al_error *err)
{
        *ret_fd = -1;
        if (ret_idmapped)
                *ret_idmapped = false;
        /* No symbolic link anywhere on the path: the caller gives the path
         * the plan resolved and checked, and a parent swapped for a link
         * since would otherwise mount another tree (a denied one). */
        _cleanup_close_ int fd = fs_openat2(AT_FDCWD, path, O_PATH | O_CLOEXEC, 0,
                                            RESOLVE_NO_SYMLINKS | RESOLVE_NO_MAGICLINKS);
        if (fd == -ELOOP)
                return al_error_set_message(err, ELOOP,
                                            "mount %s: a symbolic link is on its path (it changed "
                                            "since it was checked); give a path nothing else is "
                                            "changing",
                                            path);
        if (fd < 0)
                return al_error_set(err, -fd, "mount %s", path);
        return spawn_prepare_idmapped_fd(fd, path, host_uid, host_gid, ret_fd, ret_idmapped, err);
}

/* A plain clone of the tree, for a bind that is not idmapped: still from
 * the fd, never by the path again; -1 (a bind by path) only when the kernel
 * cannot clone it. */
static int plain_clone(int fd)
{
        int mnt =
            open_tree(fd, "", OPEN_TREE_CLONE | OPEN_TREE_CLOEXEC | AT_EMPTY_PATH | AT_RECURSIVE);
        return mnt < 0 ? -1 : mnt;
}

/* Whether this process is in the initial user namespace (its uid map the
 * whole range, unshifted): only there is uid 0 the host's root. */
static bool in_initial_userns(void)
{
        _cleanup_free_ char *map = NULL;
        if (read_file_at(AT_FDCWD, "/proc/self/uid_map", 256, &map, NULL) < 0)
                return true; /* cannot tell: held to root's rule */
        unsigned a, b, n;
        int used = 0;
        return sscanf(map, " %u %u %u%n", &a, &b, &n, &used) == 3 && a == 0 && b == 0 &&
               n == 4294967295u && map[used + strspn(map + used, " \n")] == '\0';
}

/* A plain clone of the pinned tree fd into *ret_fd, or -errno: there is
 * no path to fall back on. Only the root of another user namespace (which
 * acts with its owner's rights, and may not clone a tree of a mount
 * namespace it does not own) gets *ret_fd -1 and 0, to bind the path. */
static int pinned_clone(int fd, const char *path, int *ret_fd, struct al_error *err)
{
        *ret_fd = plain_clone(fd);
        if (*ret_fd >= 0)
                return 0;
        int e = errno;
        if (!in_initial_userns())
                return 0;
        return al_error_set(err, e,
                            "mount %s: cloning the directory Airlock checked (it is not "
                            "mounted by its path again)",
                            path);
}

int spawn_prepare_idmapped_fd(int fd, const char *path, uid_t host_uid, gid_t host_gid, int *ret_fd,
                              bool *ret_idmapped, struct al_error *err)
{
        *ret_fd = -1;
        if (ret_idmapped)
                *ret_idmapped = false;
        struct stat st;
        if (fstat(fd, &st) < 0)
                return al_error_set(err, errno, "mount %s", path);
        if (S_ISLNK(st.st_mode))
                return al_error_set(err, ELOOP, "mount %s: is a symbolic link; give its target",
                                    path);
        if (st.st_uid == host_uid)
                return pinned_clone(fd, path, ret_fd, err);
        _cleanup_close_ int userns = idmap_userns(st.st_uid, st.st_gid, host_uid, host_gid);
        if (userns < 0) /* Not idmapped: the sandbox then sees the tree as not its own. */
                return pinned_clone(fd, path, ret_fd, err);
        int mnt = plain_clone(fd);
        if (mnt < 0)
                return pinned_clone(fd, path, ret_fd, err);
        struct mount_attr attr = {.attr_set = MOUNT_ATTR_IDMAP, .userns_fd = (uint64_t)userns};
        if (mount_setattr(mnt, "", AT_EMPTY_PATH | AT_RECURSIVE, &attr, sizeof(attr)) == 0) {
                if (ret_idmapped)
                        *ret_idmapped = true;
        } else if (mount_setattr(mnt, "", AT_EMPTY_PATH, &attr, sizeof(attr)) < 0) {
                close(mnt); /* the filesystem cannot be idmapped */
                return pinned_clone(fd, path, ret_fd, err);
        }
        /* Only the top idmapped: its submounts keep any id's files. */
        *ret_fd = mnt;
        return 0;
}
