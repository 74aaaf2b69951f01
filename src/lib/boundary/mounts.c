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
#include "util.h"

#define WORKSPACE "/workspace"

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

/* Host paths that hold Airlock's own state: always hidden. */
static const char *const internal_deny[] = {
    PATHS_STATE_ROOT_SYSTEM,
    "~/" PATHS_STATE_ROOT_HOME,
    PATHS_RUN_ROOT_SYSTEM,
};

static const char *const dev_nodes[] = {"null", "zero", "full", "random", "urandom", "tty"};

/* Where a host path shows up inside the sandbox. */
struct mapping {
        char *host; /* real path */
        char *target;
        bool writable;
};

struct builder {
        const struct mounts_config *c;
        struct al_error *err;
        int root; /* the new root's tmpfs, attached over "/" */
        struct mapping *maps;
        size_t n_maps;
        char *const *deny; /* real host paths to mask (the plan's) */
        size_t n_deny;
        const mode_t *deny_mode;
        const bool *deny_dir;
        char **allowed_at;               /* where each allowRead entry was first shown */
        size_t internal_lo, internal_hi; /* deny[lo..hi) hold Airlock's own state */
};

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
                if (STREQ(host, p->mounts[i].source) && plan->mount_reals[i]) {
                        snprintf(real, PATH_MAX, "%s", plan->mount_reals[i]);
                        return true;
                }
        return realpath(host, real) != NULL;
}

/* Open a path inside the new root; symlinks resolve as they would for the
 * sandbox, never out to the host. Returns the fd or -errno. */
static int open_in_root(struct builder *b, const char *path, int flags)
{
        while (*path == '/')
                path++;
        if (!*path)
                path = ".";
        return fs_openat2(b->root, path, flags | O_CLOEXEC, 0644,
                          RESOLVE_IN_ROOT | RESOLVE_NO_MAGICLINKS);
}

/* mkdir -p inside the new root; the last component is a file when `file`. */
static int make_target(struct builder *b, const char *path, bool file)
{
        char buf[PATH_MAX];
        if (snprintf(buf, sizeof(buf), "%s", path) >= (int)sizeof(buf))
                return -ENAMETOOLONG;
        size_t len = strlen(buf);
        for (size_t i = 1; i <= len; i++) {
                if (buf[i] != '/' && buf[i] != '\0')
                        continue;
                bool last = (buf[i] == '\0');
                char saved = buf[i];
                buf[i] = '\0';
                _cleanup_close_ int fd = open_in_root(b, buf, O_PATH);
                if (fd == -ENOENT) {
                        char *slash = strrchr(buf, '/');
                        *slash = '\0';
                        _cleanup_close_ int parent =
                            open_in_root(b, *buf ? buf : "/", O_PATH | O_DIRECTORY);
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

static int attach(struct builder *b, int mnt, const char *target, bool file)
{
        int r = make_target(b, target, file);
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
        _cleanup_close_ int tfd = open_in_root(b, target, O_PATH | O_NOFOLLOW);
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

static int set_attr(int mnt, uint64_t set, bool recursive)
{
        struct mount_attr attr = {.attr_set = set};
        return mount_setattr(mnt, "", AT_EMPTY_PATH | (recursive ? AT_RECURSIVE : 0), &attr,
                             sizeof(attr));
}

/* Clone the host tree at `fd` (an O_PATH fd) with the given attributes. */
static int clone_tree(int fd, uint64_t attrs)
{
        int mnt =
            open_tree(fd, "", OPEN_TREE_CLONE | OPEN_TREE_CLOEXEC | AT_EMPTY_PATH | AT_RECURSIVE);
        if (mnt < 0)
                return -errno;
        if (set_attr(mnt, attrs, true) < 0) {
                int r = -errno;
                close(mnt);
                return r;
        }
        return mnt;
}

static void add_mapping(struct builder *b, const char *host, const char *target, bool writable)
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

static bool path_under(const char *path, const char *dir)
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
static int check_not_denied(struct builder *b, const char *host)
{
        char real[PATH_MAX];
        if (!real_path(b, host, real))
                return 0; /* what the user named was resolved and checked by the plan */
        for (size_t i = 0; i < b->n_deny; i++)
                if (path_under(real, b->deny[i]) && !is_state_workspace(b, real, i))
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
                     bool optional)
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
        int r = check_not_denied(b, host);
        if (r < 0)
                return r;
        uint64_t attrs = MOUNT_ATTR_NOSUID | MOUNT_ATTR_NODEV | (readonly ? MOUNT_ATTR_RDONLY : 0);
        _cleanup_close_ int mnt = clone_tree(fd, attrs);
        if (mnt < 0)
                return al_error_set(b->err, mnt,
                                    "mount %s at %s (the kernel refused to clone it; a "
                                    "directory on a local filesystem works)",
                                    host, target);
        r = attach(b, mnt, target, !S_ISDIR(st.st_mode));
        if (r < 0)
                return r;
        add_mapping(b, host, target, !readonly);
        return 0;
}

static int bind_prepared(struct builder *b, int mnt, const char *host, const char *target,
                         bool readonly)
{
        int r = check_not_denied(b, host);
        if (r < 0)
                return r;
        uint64_t attrs = MOUNT_ATTR_NOSUID | MOUNT_ATTR_NODEV | (readonly ? MOUNT_ATTR_RDONLY : 0);
        if (set_attr(mnt, attrs, true) < 0)
                return al_error_set(b->err, errno, "mount %s at %s", host, target);
        struct stat st;
        if (fstat(mnt, &st) < 0)
                return al_error_set(b->err, errno, "mount %s at %s", host, target);
        r = attach(b, mnt, target, !S_ISDIR(st.st_mode));
        if (r < 0)
                return r;
        add_mapping(b, host, target, !readonly);
        return 0;
}

static int new_fs(const char *type, const char *const *opts, uint64_t attrs)
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

static int mount_tmpfs(struct builder *b, const char *target, const char *size, const char *mode,
                       uid_t uid, gid_t gid, uint64_t attrs)
{
        char u[16], g[16];
        snprintf(u, sizeof(u), "%u", (unsigned)uid);
        snprintf(g, sizeof(g), "%u", (unsigned)gid);
        const char *opts[] = {"size", size, "mode", mode, "uid", u, "gid", g, NULL};
        _cleanup_close_ int mnt = new_fs("tmpfs", opts, attrs);
        if (mnt < 0)
                return al_error_set(b->err, mnt, "mounting tmpfs at %s", target);
        return attach(b, mnt, target, false);
}

/* The mask for one denied path: an empty tmpfs over a directory (made
 * read-only once allowRead entries are bound into it), /dev/null over
 * anything else. */
static int make_mask(bool dir, int devnull)
{
        if (dir) {
                const char *opts[] = {"size", "4k", "mode", "0755", NULL};
                return new_fs("tmpfs", opts,
                              MOUNT_ATTR_NOSUID | MOUNT_ATTR_NODEV | MOUNT_ATTR_NOEXEC);
        }
        int mnt = open_tree(devnull, "", OPEN_TREE_CLONE | OPEN_TREE_CLOEXEC | AT_EMPTY_PATH);
        if (mnt < 0)
                return -errno;
        if (set_attr(mnt, MOUNT_ATTR_RDONLY | MOUNT_ATTR_NOSUID | MOUNT_ATTR_NOEXEC, false) < 0) {
                int r = -errno;
                close(mnt);
                return r;
        }
        return mnt;
}

/* Show again what filesystem.allowRead names under the denied directory
 * `host`, masked at `target`: a read-only bind of each inside the mask. */
static int bind_allowed(struct builder *b, const char *host, const char *target)
{
        const struct mounts_plan *plan = b->c->plan;
        for (size_t i = 0; plan && i < plan->n_allow_read; i++) {
                const char *a = plan->allow_read[i];
                if (!path_under(a, host) || STREQ(a, host))
                        continue;
                _cleanup_free_ char *t = xasprintf("%s%s", target, a + strlen(host));
                _cleanup_close_ int src = -1;
                if (plan->allow_read_fds[i] >= 0 && !b->allowed_at[i]) {
                        /* The parent's detached clone: attached once, as
                         * is; a later place clones it from there. */
                        src = fcntl(plan->allow_read_fds[i], F_DUPFD_CLOEXEC, 3);
                        if (src < 0)
                                src = -errno;
                } else if (b->allowed_at[i]) {
                        _cleanup_close_ int at =
                            open_in_root(b, b->allowed_at[i], O_PATH | O_NOFOLLOW);
                        src = at < 0 ? at
                                     : open_tree(at, "",
                                                 OPEN_TREE_CLONE | OPEN_TREE_CLOEXEC |
                                                     AT_EMPTY_PATH | AT_RECURSIVE);
                        if (at >= 0 && src < 0)
                                src = -errno;
                } else {
                        _cleanup_close_ int fd = open(a, O_PATH | O_NOFOLLOW | O_CLOEXEC);
                        if (fd >= 0)
                                src = clone_tree(fd, MOUNT_ATTR_RDONLY | MOUNT_ATTR_NOSUID |
                                                         MOUNT_ATTR_NODEV);
                        else
                                src = -errno;
                }
                if (src < 0)
                        return al_error_set(b->err, -src, "showing the allowRead entry %s at %s", a,
                                            t);
                if (set_attr(src, MOUNT_ATTR_RDONLY | MOUNT_ATTR_NOSUID | MOUNT_ATTR_NODEV, true) <
                    0)
                        return al_error_set(b->err, errno, "showing the allowRead entry %s", a);
                struct stat st;
                if (fstat(src, &st) < 0)
                        return al_error_set(b->err, errno, "showing the allowRead entry %s", a);
                int r = attach(b, src, t, !S_ISDIR(st.st_mode));
                if (r < 0)
                        return r;
                if (!b->allowed_at[i])
                        b->allowed_at[i] = xstrdup(t);
        }
        return 0;
}

static bool has_allowed_under(const struct builder *b, const char *host)
{
        const struct mounts_plan *plan = b->c->plan;
        for (size_t i = 0; plan && i < plan->n_allow_read; i++)
                if (path_under(plan->allow_read[i], host) && !STREQ(plan->allow_read[i], host))
                        return true;
        return false;
}

/* Cover a denied path wherever it shows up inside. Whether it exists and
 * what it is were decided by the parent, with the caller's view; here a
 * target the sandbox user cannot reach (or that is not there inside) is
 * skipped, since the agent, with fewer rights still, cannot reach it
 * either. A denied path with nothing there yet is masked only where the
 * sandbox could create it (a writable mount), so that the agent cannot
 * plant it: a mount point is made for it. */
static int apply_masks(struct builder *b, int devnull)
{
        for (size_t i = 0; i < b->n_deny; i++) {
                mode_t mode = b->deny_mode ? b->deny_mode[i] : 0;
                bool missing = (mode == 0);
                bool dir = missing ? (b->deny_dir && b->deny_dir[i]) : S_ISDIR(mode);
                for (size_t m = 0; m < b->n_maps; m++) {
                        if (!path_under(b->deny[i], b->maps[m].host))
                                continue;
                        if (missing && !b->maps[m].writable)
                                continue;
                        const char *rest = b->deny[i] + strlen(b->maps[m].host);
                        if (STREQ(b->maps[m].host, "/"))
                                rest = b->deny[i];
                        _cleanup_free_ char *target = xasprintf("%s%s", b->maps[m].target, rest);
                        if (missing) {
                                int r = make_target(b, target, !dir);
                                if (r == -EACCES || r == -EPERM || r == -EROFS || r == -ENOTDIR)
                                        continue; /* the agent cannot create it either */
                                if (r < 0)
                                        return al_error_set(b->err, r, "masking %s", target);
                                if (dir) {
                                        _cleanup_close_ int dfd = open_in_root(
                                            b, target, O_RDONLY | O_DIRECTORY | O_NOFOLLOW);
                                        if (dfd >= 0)
                                                (void)fchmod(dfd, 0700);
                                }
                        }
                        _cleanup_close_ int tfd = open_in_root(b, target, O_PATH | O_NOFOLLOW);
                        if (tfd < 0) {
                                if (tfd == -ENOENT || tfd == -EACCES || tfd == -ENOTDIR)
                                        continue; /* not reachable inside */
                                return al_error_set(b->err, tfd, "masking %s", target);
                        }
                        _cleanup_close_ int mnt = make_mask(dir, devnull);
                        if (mnt < 0)
                                return al_error_set(b->err, mnt, "masking %s", target);
                        if (move_mount(mnt, "", tfd, "",
                                       MOVE_MOUNT_F_EMPTY_PATH | MOVE_MOUNT_T_EMPTY_PATH) < 0)
                                return al_error_set(b->err, errno, "masking %s", target);
                        if (dir) {
                                if (has_allowed_under(b, b->deny[i])) {
                                        int r = bind_allowed(b, b->deny[i], target);
                                        if (r < 0)
                                                return r;
                                }
                                if (set_attr(mnt,
                                             MOUNT_ATTR_RDONLY | MOUNT_ATTR_NOSUID |
                                                 MOUNT_ATTR_NODEV | MOUNT_ATTR_NOEXEC,
                                             false) < 0)
                                        return al_error_set(b->err, errno, "masking %s", target);
                        }
                }
        }
        return 0;
}

/* Make read-only (or only pin, as a mount point that cannot be renamed
 * aside) each protected host path wherever it shows up writable inside:
 * the write-protect list, filesystem.denyWrite, and git metadata. The
 * parent listed parents before what lies under them. */
/* A protected name that is a symbolic link could be unlinked by the agent
 * (the directory holding it is writable) and replaced by a file of its own.
 * The link itself is covered, so it cannot be removed: by a read-only clone
 * of the regular file it leads to inside the sandbox (never on the host), or
 * else by an empty read-only file. */
static int cover_link(struct builder *b, int tfd, const char *target, int devnull)
{
        _cleanup_close_ int mnt = -1;
        _cleanup_close_ int to = open_in_root(b, target, O_PATH);
        struct stat ts;
        if (to >= 0 && fstat(to, &ts) == 0 && S_ISREG(ts.st_mode)) {
                mnt = open_tree(to, "", OPEN_TREE_CLONE | OPEN_TREE_CLOEXEC | AT_EMPTY_PATH);
                if (mnt >= 0 &&
                    set_attr(mnt, MOUNT_ATTR_RDONLY | MOUNT_ATTR_NOSUID | MOUNT_ATTR_NODEV, false) <
                        0) {
                        close(mnt);
                        mnt = -1;
                }
        }
        if (mnt < 0)
                mnt = make_mask(false, devnull);
        if (mnt < 0)
                return al_error_set(b->err, mnt, "protecting %s", target);
        if (move_mount(mnt, "", tfd, "", MOVE_MOUNT_F_EMPTY_PATH | MOVE_MOUNT_T_EMPTY_PATH) < 0)
                return al_error_set(b->err, errno, "protecting %s", target);
        return 0;
}

static int apply_protect(struct builder *b, int devnull)
{
        const struct mounts_plan *plan = b->c->plan;
        for (size_t i = 0; plan && i < plan->n_protect; i++) {
                const char *host = plan->protect[i];
                for (size_t m = 0; m < b->n_maps; m++) {
                        if (!b->maps[m].writable || !path_under(host, b->maps[m].host))
                                continue;
                        const char *rest = host + strlen(b->maps[m].host);
                        if (STREQ(b->maps[m].host, "/"))
                                rest = host;
                        _cleanup_free_ char *target = xasprintf("%s%s", b->maps[m].target, rest);
                        _cleanup_close_ int tfd = open_in_root(b, target, O_PATH | O_NOFOLLOW);
                        if (tfd < 0) {
                                if (tfd == -ENOENT || tfd == -EACCES || tfd == -ENOTDIR)
                                        continue;
                                return al_error_set(b->err, tfd, "protecting %s", target);
                        }
                        struct stat st;
                        if (fstat(tfd, &st) < 0)
                                return al_error_set(b->err, errno, "protecting %s", target);
                        if (S_ISLNK(st.st_mode)) {
                                int r = cover_link(b, tfd, target, devnull);
                                if (r < 0)
                                        return r;
                                continue;
                        }
                        _cleanup_close_ int mnt = open_tree(tfd, "",
                                                            OPEN_TREE_CLONE | OPEN_TREE_CLOEXEC |
                                                                AT_EMPTY_PATH | AT_RECURSIVE);
                        if (mnt < 0)
                                return al_error_set(b->err, errno, "protecting %s", target);
                        if (!plan->protect_pin[i] &&
                            set_attr(mnt, MOUNT_ATTR_RDONLY | MOUNT_ATTR_NOSUID | MOUNT_ATTR_NODEV,
                                     true) < 0)
                                return al_error_set(b->err, errno, "protecting %s", target);
                        if (move_mount(mnt, "", tfd, "",
                                       MOVE_MOUNT_F_EMPTY_PATH | MOVE_MOUNT_T_EMPTY_PATH) < 0)
                                return al_error_set(b->err, errno, "protecting %s", target);
                }
        }
        return 0;
}

static int build_system(struct builder *b)
{
        const struct policy *p = b->c->policy;
        if (p->read == POLICY_READ_SYSTEM) {
                for (size_t i = 0; i < ARRAY_SIZE(system_dirs); i++) {
                        int r = bind_host(b, system_dirs[i], system_dirs[i], true, true);
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
                        r = make_target(b, "/home", false);
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
                                r = bind_host(b, hp, hp, true, true);
                                if (r < 0)
                                        return r;
                        }
                        continue;
                }
                r = bind_host(b, path, path, true, true);
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
static int mount_overlay(struct builder *b, int *ret_upper_fd)
{
        const struct policy *p = b->c->policy;
        char size[32];
        snprintf(size, sizeof(size), "%" PRIu64, p->limits.disk);
        char u[16], g[16];
        snprintf(u, sizeof(u), "%u", (unsigned)b->c->uid);
        snprintf(g, sizeof(g), "%u", (unsigned)b->c->gid);
        const char *opts[] = {"size", size, "mode", "0700", "uid", u, "gid", g, NULL};
        _cleanup_close_ int layer = new_fs("tmpfs", opts, MOUNT_ATTR_NOSUID | MOUNT_ATTR_NODEV);
        if (layer < 0)
                return al_error_set(b->err, layer, "creating the review layer");
        if (mkdirat(layer, "upper", 0755) < 0 || mkdirat(layer, "work", 0700) < 0)
                return al_error_set(b->err, errno, "creating the review layer");
        _cleanup_close_ int upper = openat(layer, "upper", O_RDONLY | O_DIRECTORY | O_CLOEXEC);
        _cleanup_close_ int work = openat(layer, "work", O_PATH | O_DIRECTORY | O_CLOEXEC);
        if (upper < 0 || work < 0)
                return al_error_set(b->err, errno, "opening the review layer");

        int r = check_not_denied(b, p->workspace);
        if (r < 0)
                return r;
        _cleanup_close_ int lower = -1;
        if (b->c->workspace_fd >= 0) {
                /* overlayfs clones its lower layer, which it may only do for a
                 * mount in this namespace: attach the idmapped tree first and
                 * stack the overlay on top of it. */
                r = attach(b, b->c->workspace_fd, WORKSPACE, false);
                if (r < 0)
                        return r;
                lower = open_in_root(b, WORKSPACE, O_PATH | O_DIRECTORY);
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
        r = attach(b, mnt, WORKSPACE, false);
        if (r < 0)
                return r;
        add_mapping(b, p->workspace, WORKSPACE, true);
        *ret_upper_fd = TAKE_FD(upper);
        return 0;
}

static int build_proc(struct builder *b)
{
        _cleanup_close_ int mnt =
            new_fs("proc", NULL, MOUNT_ATTR_NOSUID | MOUNT_ATTR_NODEV | MOUNT_ATTR_NOEXEC);
        if (mnt < 0)
                return al_error_set(b->err, mnt, "mounting /proc");
        int r = attach(b, mnt, "/proc", false);
        if (r < 0)
                return r;
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
                if (set_attr(sub,
                             MOUNT_ATTR_RDONLY | MOUNT_ATTR_NOSUID | MOUNT_ATTR_NODEV |
                                 MOUNT_ATTR_NOEXEC,
                             true) < 0)
                        return al_error_set(b->err, errno, "protecting /%s", path);
                _cleanup_free_ char *target = xasprintf("/%s", path);
                r = attach(b, sub, target, false);
                if (r < 0)
                        return r;
        }
        return 0;
}

static int build_dev(struct builder *b, const int *nodes, uint64_t shm_size)
{
        const char *opts[] = {"size", "64k", "mode", "0755", NULL};
        int devmnt = new_fs("tmpfs", opts, MOUNT_ATTR_NOSUID | MOUNT_ATTR_NOEXEC);
        if (devmnt < 0)
                return al_error_set(b->err, devmnt, "mounting /dev");
        _cleanup_close_ int dev = devmnt;
        int r = attach(b, dev, "/dev", false);
        if (r < 0)
                return r;
        for (size_t i = 0; i < ARRAY_SIZE(dev_nodes); i++) {
                if (nodes[i] < 0)
                        continue;
                _cleanup_free_ char *target = xasprintf("/dev/%s", dev_nodes[i]);
                r = attach(b, nodes[i], target, true);
                if (r < 0)
                        return r;
        }
        const char *pts_opts[] = {"ptmxmode", "0666", "mode", "0620", NULL};
        _cleanup_close_ int pts = new_fs("devpts", pts_opts, MOUNT_ATTR_NOSUID | MOUNT_ATTR_NOEXEC);
        if (pts < 0)
                return al_error_set(b->err, pts, "mounting /dev/pts");
        r = attach(b, pts, "/dev/pts", false);
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
        r = mount_tmpfs(b, "/dev/shm", size, "1777", b->c->uid, b->c->gid,
                        MOUNT_ATTR_NOSUID | MOUNT_ATTR_NODEV | MOUNT_ATTR_NOEXEC);
        if (r < 0)
                return r;
        /* Nothing new can be created in /dev. */
        if (set_attr(dev, MOUNT_ATTR_RDONLY | MOUNT_ATTR_NOSUID | MOUNT_ATTR_NOEXEC, false) < 0)
                return al_error_set(b->err, errno, "making /dev read-only");
        return 0;
}

/* The sandbox's own /etc/passwd and /etc/group, so that `id`, `whoami` and
 * the like name its user ("agent", or "root" with uid 0) and not whoever
 * has that uid on the host: two files on a small tmpfs, each bound
 * read-only over the host's. */
static int build_passwd(struct builder *b)
{
        const struct mounts_config *c = b->c;
        const char *opts[] = {"size", "64k", "mode", "0755", NULL};
        _cleanup_close_ int fs =
            new_fs("tmpfs", opts, MOUNT_ATTR_NOSUID | MOUNT_ATTR_NODEV | MOUNT_ATTR_NOEXEC);
        if (fs < 0)
                return al_error_set(b->err, fs, "mounting a tmpfs for /etc/passwd");
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

        const char *const files[][2] = {{"passwd", passwd}, {"group", group}};
        for (size_t i = 0; i < ARRAY_SIZE(files); i++) {
                _cleanup_free_ char *target = xasprintf("/etc/%s", files[i][0]);
                _cleanup_close_ int fd =
                    openat(fs, files[i][0], O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0644);
                int r = fd < 0 ? -errno : write_full(fd, files[i][1], strlen(files[i][1]));
                if (r < 0)
                        return al_error_set(b->err, r, "writing the sandbox's %s", target);
                _cleanup_close_ int mnt =
                    open_tree(fs, files[i][0], OPEN_TREE_CLONE | OPEN_TREE_CLOEXEC);
                if (mnt < 0)
                        return al_error_set(b->err, errno, "cloning the sandbox's %s", target);
                if (set_attr(mnt, MOUNT_ATTR_RDONLY, false) < 0)
                        return al_error_set(b->err, errno, "making %s read-only", target);
                r = attach(b, mnt, target, true);
                if (r < 0)
                        return r;
        }
        return 0;
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
                _cleanup_free_ char *path = xasprintf("/dev/%s", dev_nodes[i]);
                nodes[i] = open_tree(AT_FDCWD, path, OPEN_TREE_CLONE | OPEN_TREE_CLOEXEC);
                if (nodes[i] < 0 && i == 0) {
                        r = al_error_set(err, errno, "cloning %s", path);
                        goto out;
                }
        }
        devnull = open("/dev/null", O_PATH | O_CLOEXEC);

        /* The new root: a small tmpfs stacked over "/", built while the host
         * tree is still reachable beneath it through already-open fds and
         * host paths resolved from the old root. */
        {
                const char *opts[] = {"size", "1m", "mode", "0755", NULL};
                b.root = new_fs("tmpfs", opts, MOUNT_ATTR_NOSUID | MOUNT_ATTR_NODEV);
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

        r = build_system(&b);
        if (r < 0)
                goto out;
        r = build_passwd(&b);
        if (r < 0)
                goto out;

        /* /tmp and $HOME come before the workspace and the mounts, so that a
         * mount under them lands on their tmpfs instead of being hidden by
         * it. */
        {
                char size[32];
                snprintf(size, sizeof(size), "%" PRIu64, p->limits.disk);
                r = mount_tmpfs(&b, "/tmp", size, "1777", c->uid, c->gid,
                                MOUNT_ATTR_NOSUID | MOUNT_ATTR_NODEV);
                if (r < 0)
                        goto out;
                r = mount_tmpfs(&b, c->home, size, "0700", c->uid, c->gid,
                                MOUNT_ATTR_NOSUID | MOUNT_ATTR_NODEV);
                if (r < 0)
                        goto out;
                r = build_dev(&b, nodes, p->limits.disk);
                if (r < 0)
                        goto out;
        }

        if (p->workspace && p->workspace_mode == POLICY_WORKSPACE_OVERLAY) {
                r = mount_overlay(&b, ret_upper_fd);
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
                        r = bind_host(&b, p->workspace, WORKSPACE, ro, false);
                if (r < 0)
                        goto out;
        }

        for (size_t i = 0; i < p->n_mounts; i++) {
                const struct policy_mount *m = &p->mounts[i];
                if (c->mount_fds && c->mount_fds[i] >= 0)
                        r = bind_prepared(&b, c->mount_fds[i], m->source, m->target, m->readonly);
                else if (m->readonly && c->plan && c->plan->mount_ro_fds &&
                         c->plan->mount_ro_fds[i] >= 0)
                        r = bind_prepared(&b, c->plan->mount_ro_fds[i], m->source, m->target, true);
                else
                        r = bind_host(&b, m->source, m->target, m->readonly, false);
                if (r < 0)
                        goto out;
        }

        r = apply_protect(&b, devnull);
        if (r < 0)
                goto out;

        r = build_proc(&b);
        if (r < 0)
                goto out;

        r = apply_masks(&b, devnull);
        if (r < 0)
                goto out;

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
        if (set_attr(b.root, MOUNT_ATTR_RDONLY | MOUNT_ATTR_NOSUID | MOUNT_ATTR_NODEV, false) < 0) {
                r = al_error_set(err, errno, "making / read-only");
                goto out;
        }
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

int mounts_prepare_workspace(const struct policy *p, struct al_error *err)
{
        if (!p->workspace || p->workspace_mode == POLICY_WORKSPACE_RO || !p->protect_git)
                return 0;
        _cleanup_close_ int ws = open(p->workspace, O_PATH | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
        if (ws < 0)
                return al_error_set(err, errno, "workspace %s", p->workspace);
        _cleanup_close_ int git = openat(ws, ".git", O_PATH | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
        if (git < 0)
                return 0; /* no repository, or .git is a file or a link */
        static const char *const parts[] = {"hooks", "config"};
        for (size_t i = 0; i < ARRAY_SIZE(parts); i++) {
                struct stat st;
                if (fstatat(git, parts[i], &st, AT_SYMLINK_NOFOLLOW) == 0) {
                        if (S_ISLNK(st.st_mode))
                                return al_error_set(
                                    err, ELOOP, "workspace .git/%s is a symbolic link; refusing it",
                                    parts[i]);
                        continue;
                }
                if (errno != ENOENT)
                        return al_error_set(err, errno, "workspace .git/%s", parts[i]);
                /* Create it so that it can be covered read-only: a missing one
                 * could otherwise be created by the agent. */
                int r = i == 0
                            ? mkdirat(git, parts[i], 0755)
                            : openat(git, parts[i], O_CREAT | O_EXCL | O_WRONLY | O_CLOEXEC, 0644);
                if (r < 0)
                        return al_error_set(err, errno, "creating workspace .git/%s", parts[i]);
                if (i == 1)
                        close(r);
        }
        return 0;
}

/* The parent's side: everything the sandbox must not see or change is
 * resolved here, before the sandbox starts, with the caller's own view of
 * the host. The sandbox user (an unprivileged uid when root starts it) may
 * see less than the caller: an entry it could not resolve must not be
 * skipped on that account, or a 0700 home's .ssh would show through an
 * idmapped workspace (issue 10, item 4). */

static void plan_add_deny(struct mounts_plan *plan, const char *real, mode_t mode, bool dir)
{
        plan->deny = strv_append(plan->deny, &plan->n_deny, real);
        plan->deny_mode = xrealloc(plan->deny_mode, plan->n_deny, sizeof(*plan->deny_mode));
        plan->deny_dir = xrealloc(plan->deny_dir, plan->n_deny, sizeof(*plan->deny_dir));
        plan->deny_mode[plan->n_deny - 1] = mode;
        plan->deny_dir[plan->n_deny - 1] = dir;
}

static void plan_add_protect(struct mounts_plan *plan, const char *real, bool pin)
{
        for (size_t i = 0; i < plan->n_protect; i++)
                if (STREQ(plan->protect[i], real)) {
                        plan->protect_pin[i] = plan->protect_pin[i] && pin;
                        return;
                }
        plan->protect = strv_append(plan->protect, &plan->n_protect, real);
        plan->protect_pin = xrealloc(plan->protect_pin, plan->n_protect, sizeof(bool));
        plan->protect_pin[plan->n_protect - 1] = pin;
}

static int glob_errno;

static int glob_error(const char *path, int e)
{
        (void)path;
        if (e != ENOENT && e != ENOTDIR && !glob_errno)
                glob_errno = e;
        return 0;
}

/* A path with nothing at it yet, in real form: the real path of the nearest
 * ancestor that exists, and the rest as given. */
static int real_missing(const char *path, char real[PATH_MAX])
{
        char buf[PATH_MAX];
        if (snprintf(buf, sizeof(buf), "%s", path) >= (int)sizeof(buf))
                return -ENAMETOOLONG;
        for (;;) {
                char *slash = strrchr(buf, '/');
                if (!slash || slash == buf)
                        break;
                *slash = '\0';
                char anc[PATH_MAX];
                if (realpath(buf, anc)) {
                        const char *rest = path + strlen(buf);
                        if (snprintf(real, PATH_MAX, "%s%s", STREQ(anc, "/") ? "" : anc, rest) >=
                            PATH_MAX)
                                return -ENAMETOOLONG;
                        return 0;
                }
                if (errno != ENOENT && errno != ENOTDIR)
                        return -errno;
        }
        snprintf(real, PATH_MAX, "%s", path);
        return 0;
}

/* Resolve one deny entry. `may_skip_eacces`: a mandatory entry in someone
 * else's home that the caller cannot reach. The sandbox never has more
 * rights than its caller (rootless: the same uid and groups; root: an
 * unprivileged uid without groups, and root itself is refused nothing
 * unless it lacks its privileges too, as on a root-squashed share), so it
 * cannot reach it either. What the user named, and the caller's own home,
 * are never skipped. */
static int resolve_deny(struct mounts_plan *plan, const char *path, bool dir, bool may_skip_eacces,
                        struct al_error *err)
{
        char real[PATH_MAX];
        struct stat st;
        if (strpbrk(path, "*?[")) {
                glob_t g;
                glob_errno = 0;
                int r = glob(path, GLOB_NOSORT | GLOB_NOESCAPE, glob_error, &g);
                if (r != 0 && r != GLOB_NOMATCH) {
                        globfree(&g);
                        return al_error_set(err, glob_errno ? glob_errno : EIO,
                                            "the deny entry %s cannot be resolved with your "
                                            "rights; make its directory readable to you or run "
                                            "as a user who can read it",
                                            path);
                }
                if (glob_errno && !(glob_errno == EACCES && may_skip_eacces)) {
                        int e = glob_errno;
                        globfree(&g);
                        return al_error_set(err, e,
                                            "the deny entry %s cannot be resolved with your "
                                            "rights; make its directory readable to you or run "
                                            "as a user who can read it",
                                            path);
                }
                for (size_t j = 0; r == 0 && j < g.gl_pathc; j++) {
                        if (!realpath(g.gl_pathv[j], real) || lstat(real, &st) < 0) {
                                int e = errno;
                                if (e == ENOENT)
                                        continue;
                                globfree(&g);
                                return al_error_set(err, e,
                                                    "the deny entry %s (%s) cannot be resolved",
                                                    path, g.gl_pathv[j]);
                        }
                        plan_add_deny(plan, real, st.st_mode & S_IFMT, false);
                }
                globfree(&g);
                return 0;
        }
        if (realpath(path, real) && lstat(real, &st) == 0) {
                plan_add_deny(plan, real, st.st_mode & S_IFMT, dir);
                return 0;
        }
        int e = errno;
        if (e == ENOENT || e == ENOTDIR) {
                int r = real_missing(path, real);
                if (r == -EACCES && may_skip_eacces)
                        return 0;
                if (r < 0)
                        return al_error_set(err, -r,
                                            "the deny entry %s cannot be resolved with your "
                                            "rights; make its directory readable to you or "
                                            "remove the entry",
                                            path);
                plan_add_deny(plan, real, 0, dir);
                return 0;
        }
        if (e == EACCES && may_skip_eacces)
                return 0;
        return al_error_set(err, e,
                            "the deny entry %s cannot be resolved with your rights (Airlock "
                            "cannot hide what it cannot see); make its directory readable to you, "
                            "or remove the entry",
                            path);
}

/* Mandatory entries that are files when there is nothing there yet. */
static bool mandatory_is_file(const char *entry)
{
        return strstr(entry, ".netrc") || strstr(entry, "credentials") || entry[0] == '/';
}

/* Every home a "~/" entry applies to: /root, the caller's, everything in
 * /home, and every home in /etc/passwd. */
static char **list_homes(const char *caller_home, size_t *ret_n)
{
        char **homes = NULL;
        size_t n = 0;
        homes = strv_append(homes, &n, "/root");
        if (caller_home && caller_home[0] == '/')
                homes = strv_append(homes, &n, caller_home);
        _cleanup_(closedirp) DIR *d = opendir("/home");
        struct dirent *de;
        while (d && (de = readdir(d)))
                if (de->d_name[0] != '.') {
                        _cleanup_free_ char *h = xasprintf("/home/%s", de->d_name);
                        homes = strv_append(homes, &n, h);
                }
        _cleanup_fclose_ FILE *pw = fopen("/etc/passwd", "re");
        struct passwd *e;
        while (pw && (e = fgetpwent(pw)))
                if (e->pw_dir && e->pw_dir[0] == '/' && !STREQ(e->pw_dir, "/"))
                        homes = strv_append(homes, &n, e->pw_dir);
        /* Duplicates cost a stat each; drop them. */
        size_t k = 0;
        for (size_t i = 0; i < n; i++) {
                bool dup = false;
                for (size_t j = 0; j < k && !dup; j++)
                        dup = STREQ(homes[i], homes[j]);
                if (dup)
                        free(homes[i]);
                else
                        homes[k++] = homes[i];
        }
        homes[k] = NULL;
        *ret_n = k;
        return homes;
}

static int resolve_entry(struct mounts_plan *plan, char *const *homes, size_t n_homes,
                         const char *caller_home, const char *entry, bool user_entry,
                         struct al_error *err)
{
        if (strncmp(entry, "~/", 2) != 0)
                return resolve_deny(plan, entry, !mandatory_is_file(entry) && !user_entry, false,
                                    err);
        for (size_t i = 0; i < n_homes; i++) {
                _cleanup_free_ char *path = xasprintf("%s/%s", homes[i], entry + 2);
                bool own = caller_home && STREQ(homes[i], caller_home);
                int r =
                    resolve_deny(plan, path, !mandatory_is_file(entry), !own && !user_entry, err);
                if (r < 0)
                        return r;
        }
        return 0;
}

/* A writable root's metadata that would make host programs run the agent's
 * code later: shell and editor start-up files, tool configs, and git's
 * config, hooks and pointers in every repository found. */
static const char *const write_protect[] = {
    ".bashrc",    ".zshrc",      ".profile",         ".bash_profile",  ".zprofile",
    ".gitconfig", ".gitmodules", ".ripgreprc",       ".mcp.json",      ".envrc",
    ".vscode",    ".idea",       ".claude/commands", ".claude/agents",
};

/* In a git directory: what makes git run code or read elsewhere. */
static const char *const git_protect[] = {
    "config", "config.worktree", "hooks", "commondir", "gitdir", "info", "objects/info/alternates",
};

#define GIT_SCAN_DEPTH   8
#define GIT_SCAN_ENTRIES 50000
#define GIT_SCAN_MODULES 256

static void protect_if_exists(struct mounts_plan *plan, int dirfd, const char *dir,
                              const char *name)
{
        struct stat st;
        if (fstatat(dirfd, name, &st, AT_SYMLINK_NOFOLLOW) < 0)
                return;
        _cleanup_free_ char *p = xasprintf("%s/%s", dir, name);
        plan_add_protect(plan, p, false);
}

/* A git directory (`.git`, or one under .git/modules or .git/worktrees):
 * pin it, so that it cannot be renamed aside and rebuilt, and make its
 * config, hooks and pointers read-only. hooks is created when missing, so
 * that it can be covered (an empty hooks directory changes nothing). */
static void protect_gitdir(struct mounts_plan *plan, int fd, const char *path, int depth,
                           size_t *budget)
{
        plan_add_protect(plan, path, true);
        struct stat st, gst;
        if (fstatat(fd, "hooks", &st, AT_SYMLINK_NOFOLLOW) < 0 && errno == ENOENT &&
            mkdirat(fd, "hooks", 0755) == 0 && fstat(fd, &gst) == 0 &&
            fchownat(fd, "hooks", gst.st_uid, gst.st_gid, AT_SYMLINK_NOFOLLOW) < 0) {
                /* Root's own, then: still covered read-only below. */
        }
        for (size_t i = 0; i < ARRAY_SIZE(git_protect); i++)
                protect_if_exists(plan, fd, path, git_protect[i]);
        if (depth > 4)
                return;
        static const char *const nests[] = {"modules", "worktrees"};
        for (size_t n = 0; n < ARRAY_SIZE(nests); n++) {
                int sub = openat(fd, nests[n], O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
                if (sub < 0)
                        continue;
                _cleanup_(closedirp) DIR *d = fdopendir(sub);
                if (!d) {
                        close(sub);
                        continue;
                }
                _cleanup_free_ char *subpath = xasprintf("%s/%s", path, nests[n]);
                plan_add_protect(plan, subpath, true);
                struct dirent *de;
                while ((de = readdir(d)) && *budget > 0) {
                        if (de->d_name[0] == '.' &&
                            (!de->d_name[1] || (de->d_name[1] == '.' && !de->d_name[2])))
                                continue;
                        (*budget)--;
                        _cleanup_close_ int g = openat(
                            dirfd(d), de->d_name, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
                        if (g < 0)
                                continue;
                        _cleanup_free_ char *gp = xasprintf("%s/%s", subpath, de->d_name);
                        protect_gitdir(plan, g, gp, depth + 1, budget);
                }
        }
}

/* Walk a writable root for repositories, bounded in depth and entries;
 * symbolic links are never followed. */
static void scan_git(struct mounts_plan *plan, int fd, const char *path, int depth, size_t *entries,
                     size_t *modules)
{
        struct stat st;
        if (fstatat(fd, ".git", &st, AT_SYMLINK_NOFOLLOW) == 0) {
                _cleanup_free_ char *gp = xasprintf("%s/.git", path);
                if (S_ISDIR(st.st_mode)) {
                        _cleanup_close_ int g =
                            openat(fd, ".git", O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
                        if (g >= 0)
                                protect_gitdir(plan, g, gp, 0, modules);
                } else if (S_ISREG(st.st_mode) || S_ISLNK(st.st_mode))
                        /* A worktree's or submodule's "gitdir:" pointer, or
                         * a link to a git directory elsewhere. */
                        plan_add_protect(plan, gp, false);
        }
        /* A bare repository (HEAD, objects/ and refs/ side by side): its
         * config runs code too (core.pager, aliases) when host git is used
         * in it. It is a git directory; nothing below it is a worktree. */
        struct stat h, o, rf;
        if (fstatat(fd, "HEAD", &h, AT_SYMLINK_NOFOLLOW) == 0 && S_ISREG(h.st_mode) &&
            fstatat(fd, "objects", &o, AT_SYMLINK_NOFOLLOW) == 0 && S_ISDIR(o.st_mode) &&
            fstatat(fd, "refs", &rf, AT_SYMLINK_NOFOLLOW) == 0 && S_ISDIR(rf.st_mode)) {
                protect_gitdir(plan, fd, path, 0, modules);
                return;
        }
        if (depth >= GIT_SCAN_DEPTH)
                return;
        int dfd = openat(fd, ".", O_RDONLY | O_DIRECTORY | O_CLOEXEC);
        if (dfd < 0)
                return;
        _cleanup_(closedirp) DIR *d = fdopendir(dfd);
        if (!d) {
                close(dfd);
                return;
        }
        struct dirent *de;
        while ((de = readdir(d)) && *entries > 0) {
                (*entries)--;
                if (de->d_type != DT_DIR && de->d_type != DT_UNKNOWN)
                        continue;
                if (STREQ(de->d_name, ".") || STREQ(de->d_name, "..") || STREQ(de->d_name, ".git"))
                        continue;
                _cleanup_close_ int sub =
                    openat(dirfd(d), de->d_name, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
                if (sub < 0)
                        continue;
                _cleanup_free_ char *sp =
                    xasprintf("%s/%s", STREQ(path, "/") ? "" : path, de->d_name);
                scan_git(plan, sub, sp, depth + 1, entries, modules);
        }
}

static void protect_root(struct mounts_plan *plan, const struct policy *p, const char *real)
{
        _cleanup_close_ int fd = open(real, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
        if (fd < 0)
                return;
        for (size_t i = 0; i < ARRAY_SIZE(write_protect); i++)
                protect_if_exists(plan, fd, STREQ(real, "/") ? "" : real, write_protect[i]);
        if (p->protect_git) {
                size_t entries = GIT_SCAN_ENTRIES, modules = GIT_SCAN_MODULES;
                scan_git(plan, fd, real, 0, &entries, &modules);
        }
}

/* "/", the system directories and whole homes are not workspaces unless the
 * user says so: `cd / && airlock run` would hand the agent the host. */
static const char *broad_reason(const char *real, const char *caller_home)
{
        static const char *const exact[] = {"/", "/var", "/opt", "/home", "/root", "/tmp"};
        static const char *const trees[] = {"/usr",   "/bin",    "/sbin", "/lib",  "/lib32",
                                            "/lib64", "/libx32", "/etc",  "/boot", "/proc",
                                            "/sys",   "/dev",    "/run"};
        for (size_t i = 0; i < ARRAY_SIZE(trees); i++)
                if (path_under(real, trees[i]))
                        return "is a system directory";
        for (size_t i = 0; i < ARRAY_SIZE(exact); i++)
                if (STREQ(real, exact[i]))
                        return STREQ(real, "/home")   ? "holds whole homes"
                               : STREQ(real, "/root") ? "is a whole home directory"
                               : STREQ(real, "/tmp")  ? "is shared by every user"
                                                      : "is a system directory";
        char home[PATH_MAX];
        if (caller_home && realpath(caller_home, home) && path_under(home, real))
                return STREQ(home, real) ? "is a whole home directory" : "holds a whole home";
        /* A home in /etc/passwd, or a directory that holds one. Homes of
         * "/" are no one's. */
        _cleanup_fclose_ FILE *pw = fopen("/etc/passwd", "re");
        struct passwd *e;
        while (pw && (e = fgetpwent(pw)))
                if (e->pw_dir && realpath(e->pw_dir, home) && !STREQ(home, "/") &&
                    path_under(home, real))
                        return STREQ(home, real) ? "is a whole home directory"
                                                 : "holds a whole home";
        return NULL;
}

/* A detached read-only clone of a host tree, made with the caller's view
 * (root: the sandbox user may not be able to reach it, e.g. under /root).
 * -1 when the caller cannot clone trees (rootless: the sandbox then binds
 * the path itself, with the caller's own rights). */
static int clone_for_sandbox(const char *path, bool readonly, struct al_error *err)
{
        if (geteuid() != 0)
                return -1;
        _cleanup_close_ int fd = open(path, O_PATH | O_NOFOLLOW | O_CLOEXEC);
        if (fd < 0)
                return al_error_set(err, errno, "mount %s; give an existing host path", path);
        struct stat st;
        if (fstat(fd, &st) < 0)
                return al_error_set(err, errno, "mount %s", path);
        if (S_ISLNK(st.st_mode))
                return al_error_set(err, 0, "mount %s: is a symbolic link; give its target", path);
        int mnt = clone_tree(fd, MOUNT_ATTR_NOSUID | MOUNT_ATTR_NODEV |
                                     (readonly ? MOUNT_ATTR_RDONLY : 0));
        return mnt < 0 ? -1 : mnt;
}

/* Listening unix sockets with a path, from the host's /proc/net/unix: a
 * read-only bind does not stop connect(), so a host service's socket that
 * shows up inside (with `read: host`, or in a workspace) is masked. */
static void add_sockets(struct mounts_plan *plan)
{
        _cleanup_fclose_ FILE *f = fopen("/proc/net/unix", "re");
        if (!f)
                return;
        char line[PATH_MAX + 128];
        size_t n = 0;
        while (fgets(line, sizeof(line), f) && n < 4096) {
                char *path = strchr(line, '/');
                if (!path || path[-1] != ' ')
                        continue;
                path[strcspn(path, "\n")] = '\0';
                struct stat st;
                char real[PATH_MAX];
                if (!realpath(path, real) || lstat(real, &st) < 0 || !S_ISSOCK(st.st_mode))
                        continue;
                bool dup = false;
                for (size_t i = plan->internal_hi; i < plan->n_deny && !dup; i++)
                        dup = STREQ(plan->deny[i], real);
                if (!dup) {
                        plan_add_deny(plan, real, S_IFSOCK, false);
                        n++;
                }
        }
}

int mounts_plan_new(const struct policy *p, const char *caller_home, struct mounts_plan **ret,
                    struct al_error *err)
{
        struct mounts_plan *plan = xcalloc(1, sizeof(*plan));
        plan->workspace_ro_fd = -1;
        size_t n_homes = 0;
        _cleanup_strv_ char **homes = list_homes(caller_home, &n_homes);
        int r = 0;
        for (size_t i = 0; policy_mandatory_deny[i]; i++) {
                r = resolve_entry(plan, homes, n_homes, caller_home, policy_mandatory_deny[i],
                                  false, err);
                if (r < 0)
                        goto fail;
        }
        plan->internal_lo = plan->n_deny;
        for (size_t i = 0; i < ARRAY_SIZE(internal_deny); i++) {
                r = resolve_entry(plan, homes, n_homes, caller_home, internal_deny[i], false, err);
                if (r < 0)
                        goto fail;
        }
        plan->internal_hi = plan->n_deny;
        for (size_t i = 0; i < p->n_deny_read; i++) {
                r = resolve_entry(plan, homes, n_homes, caller_home, p->deny_read[i], true, err);
                if (r < 0) {
                        al_error_wrap(err, "--deny-read/filesystem.denyRead");
                        goto fail;
                }
        }
        add_sockets(plan);

        /* What the user named is resolved here, with the caller's view, and a
         * path that cannot be resolved is refused rather than let through
         * unchecked (the sandbox user may not see where it leads). */
        struct mounts_config c = {.policy = p, .plan = plan};
        struct builder b = {.c = &c,
                            .err = err,
                            .deny = plan->deny,
                            .n_deny = plan->n_deny,
                            .internal_lo = plan->internal_lo,
                            .internal_hi = plan->internal_hi};
        char real[PATH_MAX];
        if (p->workspace) {
                if (!realpath(p->workspace, real)) {
                        r = al_error_set(err, errno,
                                         "workspace %s; give an existing directory you can read "
                                         "with -w (or workspace.path)",
                                         p->workspace);
                        goto fail;
                }
                const char *why = broad_reason(real, caller_home);
                if (why && !p->allow_broad) {
                        r = al_error_set_message(
                            err, EPERM,
                            "workspace %s %s: the agent would get all of it%s; give a "
                            "project directory with -w DIR, or pass --allow-broad-workspace "
                            "(workspace.allowBroad) if you mean it",
                            real, why, p->workspace_mode == POLICY_WORKSPACE_RO ? "" : " to write");
                        goto fail;
                }
                plan->workspace_real = xstrdup(real);
                r = check_not_denied(&b, p->workspace);
                if (r < 0)
                        goto fail;
                if (p->workspace_mode == POLICY_WORKSPACE_RO) {
                        plan->workspace_ro_fd = clone_for_sandbox(p->workspace, true, err);
                        if (plan->workspace_ro_fd < -1) {
                                r = plan->workspace_ro_fd;
                                goto fail;
                        }
                } else
                        protect_root(plan, p, real);
        }
        plan->mount_reals = xcalloc(p->n_mounts + 1, sizeof(char *));
        plan->mount_ro_fds = xcalloc(p->n_mounts + 1, sizeof(int));
        for (size_t i = 0; i < p->n_mounts; i++)
                plan->mount_ro_fds[i] = -1;
        for (size_t i = 0; i < p->n_mounts; i++) {
                const struct policy_mount *m = &p->mounts[i];
                if (!realpath(m->source, real)) {
                        int e = errno;
                        r = al_error_set(err, e, "mount %s at %s: %s", m->source, m->target,
                                         e == ENOENT   ? "no such path on the host; give an "
                                                         "existing path (relative paths are taken "
                                                         "from the current directory)"
                                         : e == EACCES ? "you cannot reach it; give a path your "
                                                         "user can read"
                                                       : "check the source path");
                        goto fail;
                }
                plan->mount_reals[i] = xstrdup(real);
                r = check_not_denied(&b, m->source);
                if (r < 0)
                        goto fail;
                if (m->readonly) {
                        plan->mount_ro_fds[i] = clone_for_sandbox(m->source, true, err);
                        if (plan->mount_ro_fds[i] < -1) {
                                r = plan->mount_ro_fds[i];
                                plan->mount_ro_fds[i] = -1;
                                goto fail;
                        }
                } else
                        protect_root(plan, p, real);
        }

        for (size_t i = 0; i < p->n_deny_write; i++) {
                if (!realpath(p->deny_write[i], real)) {
                        r = al_error_set(err, errno,
                                         "filesystem.denyWrite entry %s cannot be resolved; give "
                                         "an existing path you can read, or remove it",
                                         p->deny_write[i]);
                        goto fail;
                }
                plan_add_protect(plan, real, false);
        }

        plan->allow_read_fds = xcalloc(p->n_allow_read + 1, sizeof(int));
        for (size_t i = 0; i < p->n_allow_read; i++) {
                plan->allow_read_fds[i] = -1;
                if (!realpath(p->allow_read[i], real)) {
                        r = al_error_set(err, errno,
                                         "filesystem.allowRead entry %s cannot be resolved; give "
                                         "an existing path you can read, or remove it",
                                         p->allow_read[i]);
                        goto fail;
                }
                for (size_t j = 0; j < plan->internal_hi; j++)
                        if (path_under(real, plan->deny[j]) || path_under(plan->deny[j], real)) {
                                r = al_error_set_message(
                                    err, EPERM,
                                    "filesystem.allowRead entry %s overlaps %s on the "
                                    "mandatory deny list, which cannot be re-allowed; remove "
                                    "the entry",
                                    p->allow_read[i], plan->deny[j]);
                                goto fail;
                        }
                plan->allow_read = strv_append(plan->allow_read, &plan->n_allow_read, real);
                plan->allow_read_fds[i] = clone_for_sandbox(p->allow_read[i], true, err);
                if (plan->allow_read_fds[i] < -1) {
                        r = plan->allow_read_fds[i];
                        plan->allow_read_fds[i] = -1;
                        goto fail;
                }
        }
        *ret = plan;
        return 0;
fail:
        mounts_plan_free(plan, p->n_mounts);
        return r;
}

struct mounts_plan *mounts_plan_free(struct mounts_plan *plan, size_t n_mounts)
{
        if (!plan)
                return NULL;
        strv_free(plan->deny);
        free(plan->deny_mode);
        free(plan->deny_dir);
        strv_free(plan->protect);
        free(plan->protect_pin);
        for (size_t i = 0; plan->allow_read_fds && i < plan->n_allow_read; i++)
                if (plan->allow_read_fds[i] >= 0)
                        close(plan->allow_read_fds[i]);
        free(plan->allow_read_fds);
        strv_free(plan->allow_read);
        free(plan->workspace_real);
        if (plan->workspace_ro_fd >= 0)
                close(plan->workspace_ro_fd);
        for (size_t i = 0; plan->mount_reals && i < n_mounts; i++)
                free(plan->mount_reals[i]);
        free(plan->mount_reals);
        for (size_t i = 0; plan->mount_ro_fds && i < n_mounts; i++)
                if (plan->mount_ro_fds[i] >= 0)
                        close(plan->mount_ro_fds[i]);
        free(plan->mount_ro_fds);
        free(plan);
        return NULL;
}
