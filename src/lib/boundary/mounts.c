/* SPDX-License-Identifier: Apache-2.0 */
/* The sandbox's root, built from explicit mounts on a fresh tmpfs: the
 * builder's primitives (paths opened within the new root, targets made,
 * detached mounts attached, host paths bound after the deny check) and
 * mounts_build_root(), which follows the plan (plan.c) step by step. */
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
#include "spawn.h"
#include "trace.h"
#include "microvm.h"
#include "paths.h"
#include "util.h"
#include "volume.h"
#include "mounts-internal.h"

/* A host path's real form: the plan's for what the user named (resolved by
 * the caller, who may see more than the sandbox user does), realpath() for
 * the rest. */
static bool real_path(const struct builder *b, const char *host, char real[PATH_MAX])
{
        const struct mounts_plan *plan = b->c->plan;
        const struct policy *p = b->c->policy;
        if (plan && p->workspace && plan->workspace_real && STREQ(host, p->workspace)) {
                snprintf(real, PATH_MAX, "%s", plan->workspace_real);
                return true;
        }
        for (size_t i = 0; plan && plan->mount_reals && i < p->n_mounts; i++)
                if (p->mounts[i].source && STREQ(host, p->mounts[i].source) &&
                    plan->mount_reals[i]) {
                        snprintf(real, PATH_MAX, "%s", plan->mount_reals[i]);
                        return true;
                }
        return realpath(host, real) != NULL;
}

/* Open a path inside the new root; symlinks resolve as they would for the
 * sandbox, never out to the host. Returns the fd or -errno. */
int mounts_open_in_root(struct builder *b, const char *path, int flags)
{
        while (*path == '/')
                path++;
        if (!*path)
                path = ".";
        return fs_openat2(b->root, path, flags | O_CLOEXEC, 0644,
                          RESOLVE_IN_ROOT | RESOLVE_NO_MAGICLINKS);
}

/* mkdir -p inside the new root; the last component is a file when `file`.
 * `ret_fd`: where the parent was there already, an O_PATH fd of the target
 * opened beneath it (no link followed), else -1. */
static int make_target(struct builder *b, const char *path, bool file, int *ret_fd)
{
        char buf[PATH_MAX];
        if (ret_fd)
                *ret_fd = -1;
        if (snprintf(buf, sizeof(buf), "%s", path) >= (int)sizeof(buf))
                return -ENAMETOOLONG;
        /* Most targets' parent is there already (in a tmpfs of ours or a
         * host directory): one open of it and the last component made,
         * instead of an open per component. Otherwise each component in
         * turn, below. */
        char *tail = strrchr(buf, '/');
        if (tail && tail[1]) {
                *tail = '\0';
                _cleanup_close_ int parent =
                    mounts_open_in_root(b, *buf ? buf : "/", O_PATH | O_DIRECTORY);
                *tail = '/';
                if (parent >= 0) {
                        if (file) {
                                int f = openat(parent, tail + 1,
                                               O_CREAT | O_EXCL | O_WRONLY | O_CLOEXEC | O_NOFOLLOW,
                                               0644);
                                if (f < 0 && errno != EEXIST)
                                        return -errno;
                                if (f >= 0)
                                        close(f);
                        } else if (mkdirat(parent, tail + 1, 0755) < 0 && errno != EEXIST)
                                return -errno;
                        if (ret_fd) {
                                int t =
                                    fs_openat2(parent, tail + 1, O_PATH | O_NOFOLLOW | O_CLOEXEC, 0,
                                               RESOLVE_BENEATH | RESOLVE_NO_MAGICLINKS);
                                *ret_fd = t < 0 ? -1 : t;
                        }
                        return 0;
                }
        }
        size_t len = strlen(buf);
        for (size_t i = 1; i <= len; i++) {
                if (buf[i] != '/' && buf[i] != '\0')
                        continue;
                bool last = (buf[i] == '\0');
                char saved = buf[i];
                buf[i] = '\0';
                _cleanup_close_ int fd = mounts_open_in_root(b, buf, O_PATH);
                if (fd == -ENOENT) {
                        char *slash = strrchr(buf, '/');
                        *slash = '\0';
                        _cleanup_close_ int parent =
                            mounts_open_in_root(b, *buf ? buf : "/", O_PATH | O_DIRECTORY);
                        *slash = '/';
                        if (parent < 0)
                                return parent;
                        if (last && file) {
                                int f = openat(parent, slash + 1,
                                               O_CREAT | O_EXCL | O_WRONLY | O_CLOEXEC | O_NOFOLLOW,
                                               0644);
                                if (f < 0 && errno != EEXIST)
                                        return -errno;
                                if (f >= 0)
                                        close(f);
                        } else if (mkdirat(parent, slash + 1, 0755) < 0 && errno != EEXIST)
                                return -errno;
                } else if (fd < 0)
                        return fd;
                buf[i] = saved;
        }
        return 0;
}

int mounts_make_target(struct builder *b, const char *path, bool file)
{
        return make_target(b, path, file, NULL);
}

int mounts_attach(struct builder *b, int mnt, const char *target, bool file)
{
        _cleanup_close_ int tfd = -1;
        int r = make_target(b, target, file, &tfd);
        if (r == -EROFS)
                return al_error_set(b->err, r,
                                    "creating mount point %s (it lies in a read-only host "
                                    "directory of the sandbox's root); choose a target under "
                                    "/workspace, /tmp or $HOME, or a new top-level directory "
                                    "such as /data",
                                    target);
        if (r == -ENOTDIR || r == -EEXIST)
                return al_error_set(b->err, r,
                                    "creating mount point %s (a file is in the way); choose "
                                    "another target",
                                    target);
        if (r < 0)
                return al_error_set(b->err, r, "creating mount point %s; choose another target",
                                    target);
        if (tfd < 0)
                tfd = mounts_open_in_root(b, target, O_PATH | O_NOFOLLOW);
        if (tfd < 0)
                return al_error_set(b->err, tfd, "opening mount point %s; choose another target",
                                    target);
        if (move_mount(mnt, "", tfd, "", MOVE_MOUNT_F_EMPTY_PATH | MOVE_MOUNT_T_EMPTY_PATH) < 0)
                return al_error_set(b->err, errno,
                                    "attaching mount at %s (a directory and a file cannot "
                                    "cover each other); choose another target",
                                    target);
        return 0;
}

int mounts_set_attr(int mnt, uint64_t set, bool recursive)
{
        struct mount_attr attr = {.attr_set = set};
        return mount_setattr(mnt, "", AT_EMPTY_PATH | (recursive ? AT_RECURSIVE : 0), &attr,
                             sizeof(attr));
}

/* Clone the host tree at `fd` (an O_PATH fd) with the given attributes. */
int mounts_clone_tree(int fd, uint64_t attrs)
{
        int mnt =
            open_tree(fd, "", OPEN_TREE_CLONE | OPEN_TREE_CLOEXEC | AT_EMPTY_PATH | AT_RECURSIVE);
        if (mnt < 0)
                return -errno;
        if (mounts_set_attr(mnt, attrs, true) < 0) {
                int r = -errno;
                close(mnt);
                return r;
        }
        return mnt;
}

void mounts_add_mapping(struct builder *b, const char *host, const char *target, bool writable)
{
        char real[PATH_MAX];
        if (!real_path(b, host, real))
                return;
        b->maps = xrealloc(b->maps, b->n_maps + 1, sizeof(*b->maps));
        b->maps[b->n_maps].host = xstrdup(real);
        b->maps[b->n_maps].target = xstrdup(target);
        b->maps[b->n_maps].writable = writable;
        b->n_maps++;
}

bool mounts_path_under(const char *path, const char *dir)
{
        size_t n = strlen(dir);
        if (STREQ(dir, "/"))
                return true;
        return strncmp(path, dir, n) == 0 && (path[n] == '\0' || path[n] == '/');
}

/* A clone made by `airlock run --repo` is the workspace and lives in
 * Airlock's state at <state>/sandboxes/<16 hex>/repo; binding exactly that
 * directory shows nothing else of the state. */
static bool is_state_workspace(const struct builder *b, const char *real, size_t deny_index)
{
        if (deny_index < b->internal_lo || deny_index >= b->internal_hi || !b->c->policy->workspace)
                return false;
        const char *state = b->deny[deny_index];
        size_t n = strlen(state);
        if (strncmp(real, state, n) != 0 || strncmp(real + n, "/sandboxes/", 11) != 0)
                return false;
        const char *id = real + n + 11;
        if (strspn(id, "0123456789abcdef") != 16 || !STREQ(id + 16, "/repo"))
                return false;
        char ws[PATH_MAX];
        return real_path(b, b->c->policy->workspace, ws) && STREQ(ws, real);
}

/* Refuse a bind whose source lies inside a denied path: deny wins. */
int mounts_check_not_denied(struct builder *b, const char *host)
{
        char real[PATH_MAX];
        if (!real_path(b, host, real))
                return 0; /* what the user named was resolved and checked by the plan */
        for (size_t i = 0; i < b->n_deny; i++)
                if (mounts_path_under(real, b->deny[i]) && !is_state_workspace(b, real, i))
                        return al_error_set(b->err, EACCES,
                                            "mount source %s is under the denied path %s; "
                                            "mount something else, or remove the deny entry "
                                            "if it is yours",
                                            host, b->deny[i]);
        return 0;
}

/* Bind a host path at `target`. For the system directories (`optional`), a
 * symlink is recreated inside; for anything the user named it is refused:
 * a link swapped in must not redirect a mount. */
static int bind_host(struct builder *b, const char *host, const char *target, bool readonly,
                     bool optional, bool check_deny)
{
        _cleanup_close_ int fd = open(host, O_PATH | O_NOFOLLOW | O_CLOEXEC);
        if (fd < 0) {
                if (optional && errno == ENOENT)
                        return 0;
                if (errno == EACCES)
                        return al_error_set(b->err, errno,
                                            "mount %s at %s: the sandbox user cannot reach it; "
                                            "give a path under a directory others can search, "
                                            "or run as its owner",
                                            host, target);
                return al_error_set(b->err, errno, "mount %s at %s; give an existing host path",
                                    host, target);
        }
        struct stat st;
        if (fstat(fd, &st) < 0)
                return al_error_set(b->err, errno, "mount %s at %s", host, target);
        if (S_ISLNK(st.st_mode) && !optional)
                return al_error_set(b->err, 0, "mount %s: is a symbolic link; give its target",
                                    host);
        if (S_ISLNK(st.st_mode)) {
                char link[PATH_MAX];
                ssize_t n = readlinkat(fd, "", link, sizeof(link) - 1);
                if (n < 0)
                        return al_error_set(b->err, errno, "reading link %s", host);
                link[n] = '\0';
                const char *t = target;
                while (*t == '/')
                        t++;
                if (symlinkat(link, b->root, t) < 0 && errno != EEXIST)
                        return al_error_set(b->err, errno, "creating link %s", target);
                return 0;
        }
        int r = check_deny ? mounts_check_not_denied(b, host) : 0;
        if (r < 0)
                return r;
        uint64_t attrs = MOUNT_ATTR_NOSUID | MOUNT_ATTR_NODEV | (readonly ? MOUNT_ATTR_RDONLY : 0);
        _cleanup_close_ int mnt = mounts_clone_tree(fd, attrs);
        if (mnt < 0)
                return al_error_set(b->err, mnt,
                                    "mount %s at %s (the kernel refused to clone it; a "
                                    "directory on a local filesystem works)",
                                    host, target);
        r = mounts_attach(b, mnt, target, !S_ISDIR(st.st_mode));
        if (r < 0)
                return r;
        mounts_add_mapping(b, host, target, !readonly);
        return 0;
}

int mounts_bind_host(struct builder *b, const char *host, const char *target, bool readonly,
                     bool optional)
{
        return bind_host(b, host, target, readonly, optional, true);
}

/* An image's entry lies in Airlock's own state directory, which the
 * internal deny list hides from every sandbox: it is shown read-only at
 * the image's own paths, never the state directory itself. */
int mounts_bind_image(struct builder *b, const char *host, const char *target)
{
        return bind_host(b, host, target, true, false, false);
}

static int bind_prepared(struct builder *b, int mnt, const char *host, const char *target,
                         bool readonly)
{
        int r = mounts_check_not_denied(b, host);
        if (r < 0)
                return r;
        uint64_t attrs = MOUNT_ATTR_NOSUID | MOUNT_ATTR_NODEV | (readonly ? MOUNT_ATTR_RDONLY : 0);
        if (mounts_set_attr(mnt, attrs, true) < 0)
                return al_error_set(b->err, errno, "mount %s at %s", host, target);
        struct stat st;
        if (fstat(mnt, &st) < 0)
                return al_error_set(b->err, errno, "mount %s at %s", host, target);
        r = mounts_attach(b, mnt, target, !S_ISDIR(st.st_mode));
        if (r < 0)
                return r;
        mounts_add_mapping(b, host, target, !readonly);
        return 0;
}

/* A repository's mount (policy_mount.in_workspace) without a clone made by
 * the parent: opened here beneath the workspace, no link followed, and
 * bound from that fd, never by its path. */
static int bind_in_workspace(struct builder *b, const struct policy_mount *m)
{
        _cleanup_close_ int fd =
            mounts_open_source(b->c->policy, b->c->plan ? b->c->plan->workspace_fd : -1, m);
        if (fd < 0)
                return al_error_set(b->err, fd,
                                    "mount %s at %s: .airlock/isolation.json's source must be "
                                    "reached inside the workspace without symbolic links",
                                    m->in_workspace, m->target);
        _cleanup_close_ int mnt =
            mounts_clone_tree(fd, MOUNT_ATTR_NOSUID | MOUNT_ATTR_NODEV | MOUNT_ATTR_RDONLY);
        if (mnt < 0)
                return al_error_set(b->err, mnt, "mount %s at %s", m->source, m->target);
        return bind_prepared(b, mnt, m->source, m->target, true);
}

/* `target` with "." and empty components dropped, into buf. */
static void normalize(const char *target, char buf[PATH_MAX])
{
        size_t o = 0;
        for (const char *c = target; *c;) {
                c += strspn(c, "/");
                size_t len = strcspn(c, "/");
                if (len == 0)
                        break;
                if (!(len == 1 && c[0] == '.') && o + len + 2 < PATH_MAX) {
                        buf[o++] = '/';
                        memcpy(buf + o, c, len);
                        o += len;
                }
                c += len;
        }
        if (o == 0)
                buf[o++] = '/';
        buf[o] = '\0';
}

/* A mount over a directory that holds $HOME or /tmp would hide their tmpfs
 * (made before the mounts): the sandbox would find its $HOME missing, or
 * the host's directory there. Refused; a mount at $HOME itself, or beneath
 * it, lands on the tmpfs and works. */
static int check_not_hiding(struct builder *b, const char *target)
{
        char t[PATH_MAX];
        normalize(target, t);
        const char *const kept[] = {b->c->home, "/tmp"};
        for (size_t i = 0; i < ARRAY_SIZE(kept); i++)
                if (kept[i] && !STREQ(t, kept[i]) && mounts_path_under(kept[i], t))
                        return al_error_set_message(
                            b->err, EINVAL,
                            "mount at %s would hide %s%s; mount at %s itself or beneath it, or "
                            "use --home NAME for a home that persists",
                            target, kept[i], i == 0 ? " (the sandbox's $HOME)" : "", kept[i]);
        return 0;
}

/* A named volume's file system (volume.h), mounted by the parent: not a
 * host path, so no deny entry can be under it; the target obeys the same
 * rules as any mount's. */
static int bind_volume(struct builder *b, int mnt, const char *name, const char *target,
                       bool readonly)
{
        if (mnt < 0)
                return al_error_set_message(b->err, EINVAL, "volume %s at %s: not attached", name,
                                            target);
        /* A caller that is not root: its volume's files in a tmpfs. */
        _cleanup_close_ int tmpfs = -1;
        int r = volume_child_mount(mnt, b->c->policy->uid, b->c->policy->gid, &tmpfs, b->err);
        if (r < 0) {
                al_error_wrap(b->err, "volume %s at %s", name, target);
                return r;
        }
        if (r > 0)
                mnt = tmpfs;
        uint64_t attrs = MOUNT_ATTR_NOSUID | MOUNT_ATTR_NODEV | (readonly ? MOUNT_ATTR_RDONLY : 0);
        if (mounts_set_attr(mnt, attrs, true) < 0)
                return al_error_set(b->err, errno, "volume %s at %s", name, target);
        return mounts_attach(b, mnt, target, false);
}

int mounts_new_fs(const char *type, const char *const *opts, uint64_t attrs)
{
        _cleanup_close_ int fs = fsopen(type, FSOPEN_CLOEXEC);
        if (fs < 0)
                return -errno;
        for (size_t i = 0; opts && opts[i]; i += 2)
                if (fsconfig(fs, FSCONFIG_SET_STRING, opts[i], opts[i + 1], 0) < 0)
                        return -errno;
        if (fsconfig(fs, FSCONFIG_CMD_CREATE, NULL, NULL, 0) < 0)
                return -errno;
        int mnt = fsmount(fs, FSMOUNT_CLOEXEC, (unsigned)attrs);
        return mnt < 0 ? -errno : mnt;
}

int mounts_mount_tmpfs(struct builder *b, const char *target, const char *size, const char *mode,
                       uid_t uid, gid_t gid, uint64_t attrs)
{
        char u[16], g[16];
        snprintf(u, sizeof(u), "%u", (unsigned)uid);
        snprintf(g, sizeof(g), "%u", (unsigned)gid);
        const char *opts[] = {"size", size, "mode", mode, "uid", u, "gid", g, NULL};
        _cleanup_close_ int mnt = mounts_new_fs("tmpfs", opts, attrs);
        if (mnt < 0)
                return al_error_set(b->err, mnt, "mounting tmpfs at %s", target);
        return mounts_attach(b, mnt, target, false);
}

int mounts_build_root(const struct mounts_config *c, int *ret_upper_fd, struct al_error *err)
{
        const struct policy *p = c->policy;
        struct builder b = {.c = c, .err = err, .root = -1};
        int nodes[ARRAY_SIZE(dev_nodes)];
        int r = 0;
        _cleanup_close_ int devnull = -1;

        for (size_t i = 0; i < ARRAY_SIZE(nodes); i++)
                nodes[i] = -1;

        /* Nothing done here may propagate back to the host. */
        if (mount(NULL, "/", NULL, MS_SLAVE | MS_REC, NULL) < 0)
                return al_error_set(err, errno, "making / a slave mount");
        al_trace_mark("mount.slave");

        if (c->plan) {
                b.deny = c->plan->deny;
                b.n_deny = c->plan->n_deny;
                b.internal_lo = c->plan->internal_lo;
                b.internal_hi = c->plan->internal_hi;
                b.deny_mode = c->plan->deny_mode;
                b.deny_dir = c->plan->deny_dir;
                b.allowed_at = xcalloc(c->plan->n_allow_read + 1, sizeof(char *));
        }

        /* Device nodes are bound from the host: a user namespace cannot mknod. */
        for (size_t i = 0; i < ARRAY_SIZE(dev_nodes); i++) {
                if (STREQ(dev_nodes[i], "kvm") &&
                    !(p->tier == POLICY_TIER_MICROVM && tier_microvm_wants_kvm()))
                        continue;
                _cleanup_free_ char *path = xasprintf("/dev/%s", dev_nodes[i]);
                nodes[i] = open_tree(AT_FDCWD, path, OPEN_TREE_CLONE | OPEN_TREE_CLOEXEC);
                if (nodes[i] < 0 && i == 0) {
                        r = al_error_set(err, errno, "cloning %s", path);
                        goto out;
                }
        }
        devnull = open("/dev/null", O_PATH | O_CLOEXEC);
        al_trace_mark("mount.devnodes");

        /* The new root: a small tmpfs stacked over "/", built while the host
         * tree is still reachable beneath it through already-open fds and
         * host paths resolved from the old root. */
        {
                const char *opts[] = {"size", "1m", "mode", "0755", NULL};
                b.root = mounts_new_fs("tmpfs", opts, MOUNT_ATTR_NOSUID | MOUNT_ATTR_NODEV);
                if (b.root < 0) {
                        r = al_error_set(err, b.root, "mounting the new root");
                        goto out;
                }
        }
        /* Stacked over "/", the new root does not change what "/" means to
         * this process (its root stays the old root's dentry), so host paths
         * still resolve in the host view while targets resolve in b.root. */
        if (move_mount(b.root, "", AT_FDCWD, "/", MOVE_MOUNT_F_EMPTY_PATH) < 0) {
                r = al_error_set(err, errno, "attaching the new root");
                goto out;
        }
        al_trace_mark("mount.newroot");

        r = mounts_build_system(&b);
        if (r < 0)
                goto out;
        al_trace_mark("mount.system");
        r = mounts_build_passwd(&b);
        if (r < 0)
                goto out;
        al_trace_mark("mount.passwd");

        /* /tmp and $HOME come before the workspace and the mounts, so that a
         * mount under them lands on their tmpfs instead of being hidden by
         * it. */
        {
                char size[32];
                snprintf(size, sizeof(size), "%" PRIu64, p->limits.disk);
                r = mounts_mount_tmpfs(&b, "/tmp", size, "1777", c->uid, c->gid,
                                       MOUNT_ATTR_NOSUID | MOUNT_ATTR_NODEV);
                if (r < 0)
                        goto out;
                r = mounts_mount_tmpfs(&b, c->home, size, "0700", c->uid, c->gid,
                                       MOUNT_ATTR_NOSUID | MOUNT_ATTR_NODEV);
                if (r < 0)
                        goto out;
                r = mounts_build_dev(&b, nodes, p->limits.disk);
                if (r < 0)
                        goto out;
                for (size_t i = 0; c->tmpfs_dirs && c->tmpfs_dirs[i]; i++) {
                        char tsize[32];
                        uint64_t n = c->tmpfs_sizes ? c->tmpfs_sizes[i] : p->limits.disk;
                        snprintf(tsize, sizeof(tsize), "%" PRIu64,
                                 n && n < p->limits.disk ? n : p->limits.disk);
                        r = check_not_hiding(&b, c->tmpfs_dirs[i]);
                        if (r >= 0)
                                r = mounts_mount_tmpfs(&b, c->tmpfs_dirs[i], tsize, "0755", c->uid,
                                                       c->gid,
                                                       MOUNT_ATTR_NOSUID | MOUNT_ATTR_NODEV);
                        if (r < 0)
                                goto out;
                }
        }
        al_trace_mark("mount.tmpfs");

        if (p->workspace && p->workspace_mode == POLICY_WORKSPACE_OVERLAY) {
                r = mounts_mount_overlay(&b, ret_upper_fd);
                if (r < 0)
                        goto out;
        } else if (p->workspace) {
                bool ro = (p->workspace_mode == POLICY_WORKSPACE_RO);
                if (c->workspace_fd >= 0)
                        r = bind_prepared(&b, c->workspace_fd, p->workspace, WORKSPACE, ro);
                else if (ro && c->plan && c->plan->workspace_ro_fd >= 0)
                        r = bind_prepared(&b, c->plan->workspace_ro_fd, p->workspace, WORKSPACE,
                                          ro);
                else
                        r = mounts_bind_host(&b, p->workspace, WORKSPACE, ro, false);
                if (r < 0)
                        goto out;
        }

        al_trace_mark("mount.workspace");
        for (size_t i = 0; i < p->n_mounts; i++) {
                const struct policy_mount *m = &p->mounts[i];
                r = check_not_hiding(&b, m->target);
                if (r < 0)
                        goto out;
                if (m->volume)
                        r = bind_volume(&b, c->mount_fds ? c->mount_fds[i] : -1, m->volume,
                                        m->target, m->readonly);
                else if (c->mount_fds && c->mount_fds[i] >= 0)
                        r = bind_prepared(&b, c->mount_fds[i], m->source, m->target, m->readonly);
                else if (m->readonly && c->plan && c->plan->mount_ro_fds &&
                         c->plan->mount_ro_fds[i] >= 0)
                        r = bind_prepared(&b, c->plan->mount_ro_fds[i], m->source, m->target, true);
                else if (m->in_workspace)
                        r = bind_in_workspace(&b, m);
                else
                        r = mounts_bind_host(&b, m->source, m->target, m->readonly, false);
                if (r < 0)
                        goto out;
        }

        /* After the policy's mounts: nothing they bring can cover it. */
        if (c->tool_bin) {
                r = mounts_build_tool_endpoint(&b);
                if (r < 0)
                        goto out;
        }

        /* Also after the policy's mounts: the bundle the gate's terminated
         * hosts are trusted through is the host's, not the agent's. */
        if (c->ca_bundle) {
                r = mounts_bind_host(&b, c->ca_bundle, SPAWN_CA_BUNDLE, true, false);
                if (r < 0)
                        goto out;
        }

        al_trace_mark("mount.policy");
        r = mounts_apply_protect(&b, devnull);
        if (r < 0)
                goto out;
        al_trace_mark("mount.protect");

        r = mounts_build_proc(&b);
        if (r < 0)
                goto out;
        al_trace_mark("mount.proc");

        r = mounts_apply_masks(&b, devnull);
        if (r < 0)
                goto out;
        al_trace_mark("mount.masks");

        /* pivot_root(".", ".") puts the old root on top of the new one;
         * detaching it reveals the new one. */
        if (fchdir(b.root) < 0 || syscall(SYS_pivot_root, ".", ".") < 0) {
                r = al_error_set(err, errno, "pivot_root");
                goto out;
        }
        if (umount2(".", MNT_DETACH) < 0 || chdir("/") < 0) {
                r = al_error_set(err, errno, "detaching the old root");
                goto out;
        }
        if (mounts_set_attr(b.root, MOUNT_ATTR_RDONLY | MOUNT_ATTR_NOSUID | MOUNT_ATTR_NODEV,
                            false) < 0) {
                r = al_error_set(err, errno, "making / read-only");
                goto out;
        }
        al_trace_mark("mount.pivot");
        r = 0;
out:
        for (size_t i = 0; i < ARRAY_SIZE(nodes); i++)
                if (nodes[i] >= 0)
                        close(nodes[i]);
        if (b.root >= 0)
                close(b.root);
        for (size_t i = 0; i < b.n_maps; i++) {
                free(b.maps[i].host);
                free(b.maps[i].target);
        }
        free(b.maps);
        for (size_t i = 0; c->plan && b.allowed_at && i < c->plan->n_allow_read; i++)
                free(b.allowed_at[i]);
        free(b.allowed_at);
        return r;
}

size_t mounts_writable_paths(const struct mounts_config *c, const char **ret, size_t max)
{
        size_t n = 0;
        const struct policy *p = c->policy;
        if (n < max)
                ret[n++] = "/tmp";
        if (n < max)
                ret[n++] = c->home;
        if (n < max)
                ret[n++] = "/dev/shm";
        if (p->workspace && p->workspace_mode != POLICY_WORKSPACE_RO && n < max)
                ret[n++] = WORKSPACE;
        for (size_t i = 0; i < p->n_mounts && n < max; i++)
                if (!p->mounts[i].readonly)
                        ret[n++] = p->mounts[i].target;
        for (size_t i = 0; i < p->n_allow_write && n < max; i++)
                ret[n++] = p->allow_write[i];
        return n;
}
