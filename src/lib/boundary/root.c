/* SPDX-License-Identifier: Apache-2.0 */
#include <dirent.h>
#include <fcntl.h>
#include <glob.h>
#include <inttypes.h>
#include <limits.h>
#include <linux/openat2.h>
#include <pwd.h>
#include <stdio.h>
#include <string.h>
#include <sys/mount.h>
#include <sys/stat.h>
#include <sys/syscall.h>

#include "fs.h"
#include "mounts.h"
#include "paths.h"
#include "spawn.h"
#include "tier.h"
#include "util.h"
#include "mounts-internal.h"

static const char *const system_dirs[] = {
    "/usr", "/bin", "/sbin", "/lib", "/lib32", "/lib64", "/libx32", "/etc", "/opt",
};

/* Top-level host entries never shown in `read: host` mode: they get fresh
 * instances (proc, dev, tmp), expose the host (sys), or hold the host's
 * service sockets (run): a read-only bind does not stop connect() on a unix
 * socket, so /run/docker.sock or the system bus would be reachable. /root is
 * the administrator's home. */
static const char *const host_skip[] = {
    "proc", "dev", "sys", "tmp", "run", "root", "workspace", "lost+found",
};

/* A root given as a directory (rootdir.h): each listed top-level entry
 * bound in place (its clone when the parent made one, else by path), links
 * recreated as links, and /etc made when there is none. An image is
 * Airlock's own and read-only; a bundle's root is a host path, checked
 * against the deny list and mapped like any other. */
static int build_dir_root(struct builder *b, const struct rootdir *rd)
{
        bool image = rd->kind == ROOTDIR_IMAGE;
        bool has_etc = false;
        for (size_t i = 0; i < rd->n_entries; i++) {
                const struct rootdir_entry *e = &rd->entries[i];
                _cleanup_free_ char *host = xasprintf("%s/%s", rd->path, e->name);
                _cleanup_free_ char *target = xasprintf("/%s", e->name);
                int r;
                if (e->link) {
                        if (symlinkat(e->link, b->root, e->name) < 0 && errno != EEXIST)
                                return al_error_set(b->err, errno, "creating link %s", target);
                        continue;
                }
                has_etc = has_etc || STREQ(e->name, "etc");
                if (e->mnt < 0) {
                        r = image ? mounts_bind_image(b, host, target)
                                  : mounts_bind_host(b, host, target, rd->readonly, true);
                } else {
                        struct stat st;
                        r = image ? 0 : mounts_check_not_denied(b, host);
                        if (r >= 0 && fstat(e->mnt, &st) < 0)
                                r = al_error_set(b->err, errno, "root entry %s", target);
                        if (r >= 0)
                                r = mounts_attach(b, e->mnt, target, !S_ISDIR(st.st_mode));
                        if (r >= 0 && !image)
                                mounts_add_mapping(b, host, target, !rd->readonly);
                }
                if (r < 0)
                        return r;
        }
        if (!has_etc) {
                int r = mounts_make_target(b, "/etc", false);
                if (r < 0)
                        return al_error_set(b->err, r, "creating /etc");
        }
        return 0;
}

int mounts_build_system(struct builder *b)
{
        const struct policy *p = b->c->policy;
        if (b->c->image)
                return build_dir_root(b, b->c->image);
        if (b->c->rootfs)
                return b->c->plan && b->c->plan->rootfs ? build_dir_root(b, b->c->plan->rootfs) : 0;
        if (p->read == POLICY_READ_SYSTEM) {
                for (size_t i = 0; i < ARRAY_SIZE(system_dirs); i++) {
                        int r = mounts_bind_host(b, system_dirs[i], system_dirs[i], true, true);
                        if (r < 0)
                                return r;
                }
                return 0;
        }

        _cleanup_(closedirp) DIR *d = opendir("/");
        if (!d)
                return al_error_set(b->err, errno, "reading /");
        struct dirent *de;
        while ((de = readdir(d))) {
                if (de->d_name[0] == '.')
                        continue;
                bool skip = false;
                for (size_t i = 0; i < ARRAY_SIZE(host_skip); i++)
                        skip = skip || STREQ(de->d_name, host_skip[i]);
                if (skip)
                        continue;
                _cleanup_free_ char *path = xasprintf("/%s", de->d_name);
                int r;
                if (STREQ(de->d_name, "home")) {
                        /* Homes one by one, so that the sandbox's own $HOME
                         * can be created beside them. */
                        r = mounts_make_target(b, "/home", false);
                        if (r < 0)
                                return al_error_set(b->err, r, "creating /home");
                        _cleanup_(closedirp) DIR *h = opendir("/home");
                        struct dirent *he;
                        while (h && (he = readdir(h))) {
                                if (he->d_name[0] == '.')
                                        continue;
                                _cleanup_free_ char *hp = xasprintf("/home/%s", he->d_name);
                                if (b->c->home && STREQ(hp, b->c->home))
                                        continue;
                                r = mounts_bind_host(b, hp, hp, true, true);
                                if (r < 0)
                                        return r;
                        }
                        continue;
                }
                r = mounts_bind_host(b, path, path, true, true);
                if (r < 0)
                        return r;
        }
        return 0;
}

/* The workspace copy-on-write: the host directory is the lower layer, the
 * agent's changes go to an upper layer on a tmpfs of limits.disk, so the host
 * is untouched until the user accepts. The tmpfs is never attached anywhere;
 * overlayfs reaches its directories through /proc/self/fd, and the caller
 * gets an fd of the upper directory to hand to the supervisor, which keeps
 * the layer alive past the sandbox and captures it. */
int mounts_mount_overlay(struct builder *b, int *ret_upper_fd)
{
        const struct policy *p = b->c->policy;
        char size[32];
        snprintf(size, sizeof(size), "%" PRIu64, p->limits.disk);
        char u[16], g[16];
        snprintf(u, sizeof(u), "%u", (unsigned)b->c->uid);
        snprintf(g, sizeof(g), "%u", (unsigned)b->c->gid);
        const char *opts[] = {"size", size, "mode", "0700", "uid", u, "gid", g, NULL};
        _cleanup_close_ int layer =
            mounts_new_fs("tmpfs", opts, MOUNT_ATTR_NOSUID | MOUNT_ATTR_NODEV);
        if (layer < 0)
                return al_error_set(b->err, layer, "creating the review layer");
        if (mkdirat(layer, "upper", 0755) < 0 || mkdirat(layer, "work", 0700) < 0)
                return al_error_set(b->err, errno, "creating the review layer");
        _cleanup_close_ int upper = openat(layer, "upper", O_RDONLY | O_DIRECTORY | O_CLOEXEC);
        _cleanup_close_ int work = openat(layer, "work", O_PATH | O_DIRECTORY | O_CLOEXEC);
        if (upper < 0 || work < 0)
                return al_error_set(b->err, errno, "opening the review layer");

        int r = mounts_check_not_denied(b, p->workspace);
        if (r < 0)
                return r;
        _cleanup_close_ int lower = -1;
        if (b->c->workspace_fd >= 0) {
                /* overlayfs clones its lower layer, which it may only do for a
                 * mount in this namespace: attach the idmapped tree first and
                 * stack the overlay on top of it. */
                r = mounts_attach(b, b->c->workspace_fd, WORKSPACE, false);
                if (r < 0)
                        return r;
                lower = mounts_open_in_root(b, WORKSPACE, O_PATH | O_DIRECTORY);
        } else {
                lower = open(p->workspace, O_PATH | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
                if (lower < 0)
                        lower = -errno;
        }
        if (lower < 0)
                return al_error_set(b->err, lower, "workspace %s", p->workspace);

        char lp[64], up[64], wp[64];
        snprintf(lp, sizeof(lp), "/proc/self/fd/%d", lower);
        snprintf(up, sizeof(up), "/proc/self/fd/%d", upper);
        snprintf(wp, sizeof(wp), "/proc/self/fd/%d", work);
        _cleanup_close_ int fs = fsopen("overlay", FSOPEN_CLOEXEC);
        if (fs < 0)
                return al_error_set(b->err, errno, "overlayfs");
        if (fsconfig(fs, FSCONFIG_SET_STRING, "lowerdir", lp, 0) < 0 ||
            fsconfig(fs, FSCONFIG_SET_STRING, "upperdir", up, 0) < 0 ||
            fsconfig(fs, FSCONFIG_SET_STRING, "workdir", wp, 0) < 0 ||
            fsconfig(fs, FSCONFIG_SET_FLAG, "userxattr", NULL, 0) < 0 ||
            fsconfig(fs, FSCONFIG_CMD_CREATE, NULL, NULL, 0) < 0)
                return al_error_set(b->err, errno, "mounting the workspace copy-on-write");
        _cleanup_close_ int mnt =
            fsmount(fs, FSMOUNT_CLOEXEC, MOUNT_ATTR_NOSUID | MOUNT_ATTR_NODEV);
        if (mnt < 0)
                return al_error_set(b->err, errno, "mounting the workspace copy-on-write");
        r = mounts_attach(b, mnt, WORKSPACE, false);
        if (r < 0)
                return r;
        mounts_add_mapping(b, p->workspace, WORKSPACE, true);
        *ret_upper_fd = TAKE_FD(upper);
        return 0;
}

int mounts_build_proc(struct builder *b)
{
        _cleanup_close_ int mnt =
            mounts_new_fs("proc", NULL, MOUNT_ATTR_NOSUID | MOUNT_ATTR_NODEV | MOUNT_ATTR_NOEXEC);
        if (mnt < 0)
                return al_error_set(b->err, mnt, "mounting /proc");
        int r = mounts_attach(b, mnt, "/proc", false);
        if (r < 0)
                return r;
        /* The gvisor tier: runsc mounts a proc of its own namespaces, which
         * the kernel allows only where this one is fully visible (no mount
         * over any part of it). Only runsc sees this /proc: the agent's is
         * gVisor's own. */
        if (b->c->policy->tier == POLICY_TIER_GVISOR)
                return 0;
        static const char *const ro[] = {"sys", "sysrq-trigger", "irq", "bus", "fs"};
        for (size_t i = 0; i < ARRAY_SIZE(ro); i++) {
                _cleanup_free_ char *path = xasprintf("proc/%s", ro[i]);
                _cleanup_close_ int sub = open_tree(b->root, path,
                                                    OPEN_TREE_CLONE | OPEN_TREE_CLOEXEC |
                                                        AT_RECURSIVE | AT_SYMLINK_NOFOLLOW);
                if (sub < 0) {
                        if (errno == ENOENT)
                                continue;
                        return al_error_set(b->err, errno, "protecting /%s", path);
                }
                if (mounts_set_attr(sub,
                                    MOUNT_ATTR_RDONLY | MOUNT_ATTR_NOSUID | MOUNT_ATTR_NODEV |
                                        MOUNT_ATTR_NOEXEC,
                                    true) < 0)
                        return al_error_set(b->err, errno, "protecting /%s", path);
                _cleanup_free_ char *target = xasprintf("/%s", path);
                r = mounts_attach(b, sub, target, false);
                if (r < 0)
                        return r;
        }
        return 0;
}

int mounts_build_dev(struct builder *b, const int *nodes, uint64_t shm_size)
{
        const char *opts[] = {"size", "64k", "mode", "0755", NULL};
        int devmnt = mounts_new_fs("tmpfs", opts, MOUNT_ATTR_NOSUID | MOUNT_ATTR_NOEXEC);
        if (devmnt < 0)
                return al_error_set(b->err, devmnt, "mounting /dev");
        _cleanup_close_ int dev = devmnt;
        int r = mounts_attach(b, dev, "/dev", false);
        if (r < 0)
                return r;
        for (size_t i = 0; i < ARRAY_SIZE(dev_nodes); i++) {
                if (nodes[i] < 0)
                        continue;
                _cleanup_free_ char *target = xasprintf("/dev/%s", dev_nodes[i]);
                r = mounts_attach(b, nodes[i], target, true);
                if (r < 0)
                        return r;
        }
        const char *pts_opts[] = {"ptmxmode", "0666", "mode", "0620", NULL};
        _cleanup_close_ int pts =
            mounts_new_fs("devpts", pts_opts, MOUNT_ATTR_NOSUID | MOUNT_ATTR_NOEXEC);
        if (pts < 0)
                return al_error_set(b->err, pts, "mounting /dev/pts");
        r = mounts_attach(b, pts, "/dev/pts", false);
        if (r < 0)
                return r;
        static const char *const links[][2] = {
            {"ptmx", "pts/ptmx"},          {"fd", "/proc/self/fd"},
            {"stdin", "/proc/self/fd/0"},  {"stdout", "/proc/self/fd/1"},
            {"stderr", "/proc/self/fd/2"},
        };
        for (size_t i = 0; i < ARRAY_SIZE(links); i++)
                if (symlinkat(links[i][1], dev, links[i][0]) < 0)
                        return al_error_set(b->err, errno, "creating /dev/%s", links[i][0]);
        char size[32];
        snprintf(size, sizeof(size), "%" PRIu64, shm_size);
        r = mounts_mount_tmpfs(b, "/dev/shm", size, "1777", b->c->uid, b->c->gid,
                               MOUNT_ATTR_NOSUID | MOUNT_ATTR_NODEV | MOUNT_ATTR_NOEXEC);
        if (r < 0)
                return r;
        /* Nothing new can be created in /dev. */
        if (mounts_set_attr(dev, MOUNT_ATTR_RDONLY | MOUNT_ATTR_NOSUID | MOUNT_ATTR_NOEXEC, false) <
            0)
                return al_error_set(b->err, errno, "making /dev read-only");
        return 0;
}

/* The sandbox's own /etc/passwd and /etc/group, so that `id`, `whoami` and
 * the like name its user ("agent", or "root" with uid 0) and not whoever
 * has that uid on the host: each written in the new root's own tmpfs under
 * a name of its own, bound read-only over the host's, and unlinked, so the
 * bind is the only way to it. No file system of their own: a mount that
 * is never attached costs an RCU grace period when its last fd closes. */
int mounts_build_passwd(struct builder *b)
{
        const struct mounts_config *c = b->c;
        /* A container's image brings its own users. */
        if (c->rootfs)
                return 0;
        char passwd[PATH_MAX + 256], group[128];
        int n = snprintf(passwd, sizeof(passwd), "root:x:0:0:root:%s:/bin/sh\n",
                         c->uid == 0 ? c->home : "/root");
        if (c->uid != 0)
                n += snprintf(passwd + n, sizeof(passwd) - (size_t)n,
                              "agent:x:%u:%u:agent:%s:/bin/sh\n", (unsigned)c->uid,
                              (unsigned)c->gid, c->home);
        snprintf(passwd + n, sizeof(passwd) - (size_t)n,
                 "nobody:x:65534:65534:nobody:/nonexistent:/usr/sbin/nologin\n");
        n = snprintf(group, sizeof(group), "root:x:0:\n");
        if (c->gid != 0)
                n += snprintf(group + n, sizeof(group) - (size_t)n, "agent:x:%u:\n",
                              (unsigned)c->gid);
        snprintf(group + n, sizeof(group) - (size_t)n, "nogroup:x:65534:\n");

        /* Gated: names are resolved by the gate's name server inside
         * (transparent mode, connect-notify.c). Only over a regular file
         * (the host's, or the image's for the container tier, where import
         * made an empty one if it had none): where it is a link, lookups
         * follow it and find no route. */
        struct stat rst;
        bool resolv = c->policy && c->policy->net_mode == POLICY_NET_GATED &&
                      (c->image ? c->image->resolv_file
                                : lstat("/etc/resolv.conf", &rst) == 0 && S_ISREG(rst.st_mode));
        const char *const files[][2] = {
            {"passwd", passwd},
            {"group", group},
            {"resolv.conf", "nameserver 127.0.0.1\noptions timeout:5 attempts:2\n"}};
        for (size_t i = 0; i < ARRAY_SIZE(files) - (resolv ? 0 : 1); i++) {
                _cleanup_free_ char *target = xasprintf("/etc/%s", files[i][0]);
                /* The root's top level holds only mount points and links
                 * made here: no name of the host's can be in the way. */
                _cleanup_free_ char *name = xasprintf(".airlock-%s", files[i][0]);
                _cleanup_close_ int fd = openat(
                    b->root, name, O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0644);
                int r = fd < 0 ? -errno : write_full(fd, files[i][1], strlen(files[i][1]));
                if (r >= 0) {
                        _cleanup_close_ int mnt =
                            open_tree(b->root, name, OPEN_TREE_CLONE | OPEN_TREE_CLOEXEC);
                        if (mnt < 0)
                                r = al_error_set(b->err, errno, "cloning the sandbox's %s", target);
                        else if (mounts_set_attr(mnt,
                                                 MOUNT_ATTR_RDONLY | MOUNT_ATTR_NOSUID |
                                                     MOUNT_ATTR_NODEV | MOUNT_ATTR_NOEXEC,
                                                 false) < 0)
                                r = al_error_set(b->err, errno, "making %s read-only", target);
                        else
                                r = mounts_attach(b, mnt, target, true);
                } else {
                        r = al_error_set(b->err, r, "writing the sandbox's %s", target);
                }
                /* Attached (a mount of an unlinked file cannot be), the
                 * name goes: the bind is the only way to the file. */
                if (fd >= 0 && unlinkat(b->root, name, 0) < 0 && r >= 0)
                        r = al_error_set(b->err, errno, "writing the sandbox's %s", target);
                if (r < 0)
                        return r;
        }
        return 0;
}

/* The tool gateway's endpoint (spawn.h): a small tmpfs at /run/airlock,
 * owned by the sandbox user so that the setup child can bind the socket in
 * it once the root is pivoted (toolsock.c, which then makes it read-only),
 * and the client bound read-only at /run/airlock/bin/airlock-tool. The
 * client comes from the parent's read-only clone when it made one (a root
 * caller), else it is bound here with the caller's own rights. */
int mounts_build_tool_endpoint(struct builder *b)
{
        const struct mounts_config *c = b->c;
        int r = mounts_mount_tmpfs(b, SPAWN_TOOL_DIR, "64k", "0755", c->uid, c->gid,
                                   MOUNT_ATTR_NOSUID | MOUNT_ATTR_NODEV | MOUNT_ATTR_NOEXEC);
        if (r < 0)
                return r;
        uint64_t attrs = MOUNT_ATTR_RDONLY | MOUNT_ATTR_NOSUID | MOUNT_ATTR_NODEV;
        int fd = c->plan ? c->plan->tool_bin_fd : -1;
        _cleanup_close_ int mnt = -1;
        if (fd >= 0) {
                if (mounts_set_attr(fd, attrs, true) < 0)
                        return al_error_set(b->err, errno, "binding %s", SPAWN_TOOL_BIN);
                r = mounts_attach(b, fd, SPAWN_TOOL_BIN, true);
        } else {
                _cleanup_close_ int src = open(c->tool_bin, O_PATH | O_NOFOLLOW | O_CLOEXEC);
                if (src < 0)
                        return al_error_set(b->err, errno, "binding %s at %s", c->tool_bin,
                                            SPAWN_TOOL_BIN);
                mnt = mounts_clone_tree(src, attrs);
                if (mnt < 0)
                        return al_error_set(b->err, mnt, "binding %s at %s", c->tool_bin,
                                            SPAWN_TOOL_BIN);
                r = mounts_attach(b, mnt, SPAWN_TOOL_BIN, true);
        }
        return r;
}
