/* SPDX-License-Identifier: Apache-2.0 */
#include <dirent.h>
#include <fcntl.h>
#include <glob.h>
#include <inttypes.h>
#include <limits.h>
#include <linux/openat2.h>
#include <string.h>
#include <sys/mount.h>
#include <sys/stat.h>
#include <sys/syscall.h>

#include "mounts.h"
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
        "/var/lib/airlock",
        "~/.local/state/airlock",
        "/run/airlock",
};

static const char *const dev_nodes[] = {"null", "zero", "full", "random", "urandom", "tty"};

/* Where a host path shows up inside the sandbox. */
struct mapping {
        char *host; /* real path */
        char *target;
};

struct builder {
        const struct mounts_config *c;
        struct al_error *err;
        int root; /* the new root's tmpfs, attached over "/" */
        struct mapping *maps;
        size_t n_maps;
        char *const *deny; /* real host paths to mask (the plan's) */
        size_t n_deny;
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

static int sys_openat2(int dirfd, const char *path, int flags, uint64_t resolve)
{
        struct open_how how = {.flags = (uint64_t)flags | O_CLOEXEC, .resolve = resolve};
        if (flags & O_CREAT)
                how.mode = 0644;
        return (int)syscall(SYS_openat2, dirfd, path, &how, sizeof(how));
}

/* Open a path inside the new root; symlinks resolve as they would for the
 * sandbox, never out to the host. */
static int open_in_root(struct builder *b, const char *path, int flags)
{
        while (*path == '/')
                path++;
        if (!*path)
                path = ".";
        return sys_openat2(b->root, path, flags, RESOLVE_IN_ROOT | RESOLVE_NO_MAGICLINKS);
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
                if (fd < 0 && errno == ENOENT) {
                        char *slash = strrchr(buf, '/');
                        *slash = '\0';
                        _cleanup_close_ int parent =
                                open_in_root(b, *buf ? buf : "/", O_PATH | O_DIRECTORY);
                        *slash = '/';
                        if (parent < 0)
                                return -errno;
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
                        return -errno;
                buf[i] = saved;
        }
        return 0;
}

static int attach(struct builder *b, int mnt, const char *target, bool file)
{
        int r = make_target(b, target, file);
        if (r < 0)
                return al_error_set(b->err, r, "creating mount point %s", target);
        _cleanup_close_ int tfd = open_in_root(b, target, O_PATH | O_NOFOLLOW);
        if (tfd < 0)
                return al_error_set(b->err, errno, "opening mount point %s", target);
        if (move_mount(mnt, "", tfd, "", MOVE_MOUNT_F_EMPTY_PATH | MOVE_MOUNT_T_EMPTY_PATH) < 0)
                return al_error_set(b->err, errno, "attaching mount at %s", target);
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
        int mnt = open_tree(fd, "", OPEN_TREE_CLONE | OPEN_TREE_CLOEXEC | AT_EMPTY_PATH |
                                            AT_RECURSIVE);
        if (mnt < 0)
                return -errno;
        if (set_attr(mnt, attrs, true) < 0) {
                int r = -errno;
                close(mnt);
                return r;
        }
        return mnt;
}

static void add_mapping(struct builder *b, const char *host, const char *target)
{
        char real[PATH_MAX];
        if (!real_path(b, host, real))
                return;
        b->maps = xrealloc(b->maps, b->n_maps + 1, sizeof(*b->maps));
        b->maps[b->n_maps].host = xstrdup(real);
        b->maps[b->n_maps].target = xstrdup(target);
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
        if (deny_index < b->internal_lo || deny_index >= b->internal_hi ||
            !b->c->policy->workspace)
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
                        return al_error_set(b->err, EACCES, "mount source %s is under the denied path %s",
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
                return al_error_set(b->err, errno, "mount %s at %s", host, target);
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
                return al_error_set(b->err, mnt, "mount %s at %s", host, target);
        r = attach(b, mnt, target, !S_ISDIR(st.st_mode));
        if (r < 0)
                return r;
        add_mapping(b, host, target);
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
        add_mapping(b, host, target);
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

/* Expand one deny entry ("~/x" for every home, globs in the last part) into
 * real host paths. */
static void add_deny(char ***deny, size_t *n_deny, const char *caller_home, const char *entry)
{
        char **homes = NULL;
        size_t n_homes = 0;
        if (strncmp(entry, "~/", 2) == 0) {
                homes = strv_append(homes, &n_homes, "/root");
                if (caller_home)
                        homes = strv_append(homes, &n_homes, caller_home);
                _cleanup_(closedirp) DIR *d = opendir("/home");
                struct dirent *de;
                while (d && (de = readdir(d)))
                        if (de->d_name[0] != '.') {
                                _cleanup_free_ char *h = xasprintf("/home/%s", de->d_name);
                                homes = strv_append(homes, &n_homes, h);
                        }
        } else
                homes = strv_append(homes, &n_homes, "");

        for (size_t i = 0; i < n_homes; i++) {
                _cleanup_free_ char *pattern =
                        *homes[i] ? xasprintf("%s/%s", homes[i], entry + 2) : xstrdup(entry);
                glob_t g;
                if (glob(pattern, GLOB_NOSORT | GLOB_NOESCAPE, NULL, &g) != 0)
                        continue;
                for (size_t j = 0; j < g.gl_pathc; j++) {
                        char real[PATH_MAX];
                        if (realpath(g.gl_pathv[j], real))
                                *deny = strv_append(*deny, n_deny, real);
                }
                globfree(&g);
        }
        strv_free(homes);
}

/* Cover a denied path wherever it shows up inside: an empty read-only tmpfs
 * over a directory, /dev/null over anything else. */
static int apply_masks(struct builder *b, int devnull)
{
        for (size_t i = 0; i < b->n_deny; i++) {
                struct stat st;
                if (lstat(b->deny[i], &st) < 0)
                        continue;
                for (size_t m = 0; m < b->n_maps; m++) {
                        if (!path_under(b->deny[i], b->maps[m].host))
                                continue;
                        const char *rest = b->deny[i] + strlen(b->maps[m].host);
                        if (STREQ(b->maps[m].host, "/"))
                                rest = b->deny[i];
                        _cleanup_free_ char *target = xasprintf("%s%s", b->maps[m].target, rest);
                        _cleanup_close_ int tfd = open_in_root(b, target, O_PATH | O_NOFOLLOW);
                        if (tfd < 0)
                                continue; /* not visible inside */
                        _cleanup_close_ int mnt = -1;
                        if (S_ISDIR(st.st_mode)) {
                                const char *opts[] = {"size", "4k", "mode", "0755", NULL};
                                mnt = new_fs("tmpfs", opts,
                                             MOUNT_ATTR_RDONLY | MOUNT_ATTR_NOSUID |
                                                     MOUNT_ATTR_NODEV | MOUNT_ATTR_NOEXEC);
                        } else {
                                mnt = open_tree(devnull, "",
                                                OPEN_TREE_CLONE | OPEN_TREE_CLOEXEC | AT_EMPTY_PATH);
                                if (mnt >= 0 && set_attr(mnt,
                                                         MOUNT_ATTR_RDONLY | MOUNT_ATTR_NOSUID |
                                                                 MOUNT_ATTR_NOEXEC,
                                                         false) < 0) {
                                        close(mnt);
                                        mnt = -1;
                                }
                                if (mnt < 0)
                                        mnt = -errno;
                        }
                        if (mnt < 0)
                                return al_error_set(b->err, mnt, "masking %s", target);
                        if (move_mount(mnt, "", tfd, "",
                                       MOVE_MOUNT_F_EMPTY_PATH | MOVE_MOUNT_T_EMPTY_PATH) < 0)
                                return al_error_set(b->err, errno, "masking %s", target);
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

/* .git/hooks and .git/config of a writable workspace are read-only inside:
 * a hook or a config entry (core.fsmonitor, core.hooksPath) written by the
 * agent would run later on the host, outside the sandbox. */
static int protect_git(struct builder *b)
{
        _cleanup_close_ int git = open_in_root(b, WORKSPACE "/.git", O_PATH | O_NOFOLLOW);
        if (git < 0)
                return 0;
        struct stat st;
        if (fstat(git, &st) < 0 || !S_ISDIR(st.st_mode))
                return 0;
        /* .git itself becomes a mount point, so that it cannot be renamed
         * aside and rebuilt with hooks of the agent's choosing. */
        {
                _cleanup_close_ int mnt = open_tree(git, "", OPEN_TREE_CLONE | OPEN_TREE_CLOEXEC |
                                                                     AT_EMPTY_PATH | AT_RECURSIVE);
                if (mnt < 0)
                        return al_error_set(b->err, errno, "protecting %s/.git", WORKSPACE);
                int r = attach(b, mnt, WORKSPACE "/.git", false);
                if (r < 0)
                        return r;
                close(git);
                git = open_in_root(b, WORKSPACE "/.git", O_PATH | O_NOFOLLOW | O_DIRECTORY);
                if (git < 0)
                        return al_error_set(b->err, errno, "protecting %s/.git", WORKSPACE);
        }
        static const char *const parts[] = {"hooks", "config"};
        for (size_t i = 0; i < ARRAY_SIZE(parts); i++) {
                bool dir = (i == 0);
                _cleanup_free_ char *path = xasprintf(WORKSPACE "/.git/%s", parts[i]);
                /* mounts_prepare_workspace() made both exist and refused links. */
                if (fstatat(git, parts[i], &st, AT_SYMLINK_NOFOLLOW) < 0 || S_ISLNK(st.st_mode))
                        return al_error_set(b->err, errno ? errno : ELOOP, "protecting %s", path);
                _cleanup_close_ int mnt =
                        open_tree(git, parts[i], OPEN_TREE_CLONE | OPEN_TREE_CLOEXEC |
                                                         AT_RECURSIVE | AT_SYMLINK_NOFOLLOW);
                if (mnt < 0)
                        return al_error_set(b->err, errno, "protecting %s", path);
                if (set_attr(mnt, MOUNT_ATTR_RDONLY | MOUNT_ATTR_NOSUID | MOUNT_ATTR_NODEV, true) <
                    0)
                        return al_error_set(b->err, errno, "protecting %s", path);
                int r = attach(b, mnt, path, !dir);
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
        } else
                lower = open(p->workspace, O_PATH | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
        if (lower < 0)
                return al_error_set(b->err, errno, "workspace %s", p->workspace);

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
        _cleanup_close_ int mnt = fsmount(fs, FSMOUNT_CLOEXEC, MOUNT_ATTR_NOSUID | MOUNT_ATTR_NODEV);
        if (mnt < 0)
                return al_error_set(b->err, errno, "mounting the workspace copy-on-write");
        r = attach(b, mnt, WORKSPACE, false);
        if (r < 0)
                return r;
        add_mapping(b, p->workspace, WORKSPACE);
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
                if (set_attr(sub, MOUNT_ATTR_RDONLY | MOUNT_ATTR_NOSUID | MOUNT_ATTR_NODEV |
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
                {"ptmx", "pts/ptmx"},        {"fd", "/proc/self/fd"},
                {"stdin", "/proc/self/fd/0"}, {"stdout", "/proc/self/fd/1"},
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

        if (p->workspace && p->workspace_mode == POLICY_WORKSPACE_OVERLAY) {
                r = mount_overlay(&b, ret_upper_fd);
                if (r < 0)
                        goto out;
                if (p->protect_git) {
                        r = protect_git(&b);
                        if (r < 0)
                                goto out;
                }
        } else if (p->workspace) {
                bool ro = (p->workspace_mode == POLICY_WORKSPACE_RO);
                if (c->workspace_fd >= 0)
                        r = bind_prepared(&b, c->workspace_fd, p->workspace, WORKSPACE, ro);
                else
                        r = bind_host(&b, p->workspace, WORKSPACE, ro, false);
                if (r < 0)
                        goto out;
                if (!ro && p->protect_git) {
                        r = protect_git(&b);
                        if (r < 0)
                                goto out;
                }
        }

        for (size_t i = 0; i < p->n_mounts; i++) {
                const struct policy_mount *m = &p->mounts[i];
                if (c->mount_fds && c->mount_fds[i] >= 0)
                        r = bind_prepared(&b, c->mount_fds[i], m->source, m->target, m->readonly);
                else
                        r = bind_host(&b, m->source, m->target, m->readonly, false);
                if (r < 0)
                        goto out;
        }

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
                                return al_error_set(err, ELOOP,
                                                    "workspace .git/%s is a symbolic link; refusing it",
                                                    parts[i]);
                        continue;
                }
                if (errno != ENOENT)
                        return al_error_set(err, errno, "workspace .git/%s", parts[i]);
                /* Create it so that it can be covered read-only: a missing one
                 * could otherwise be created by the agent. */
                int r = i == 0 ? mkdirat(git, parts[i], 0755)
                               : openat(git, parts[i], O_CREAT | O_EXCL | O_WRONLY | O_CLOEXEC, 0644);
                if (r < 0)
                        return al_error_set(err, errno, "creating workspace .git/%s", parts[i]);
                if (i == 1)
                        close(r);
        }
        return 0;
}

int mounts_plan_new(const struct policy *p, const char *caller_home, struct mounts_plan **ret,
                    struct al_error *err)
{
        struct mounts_plan *plan = xcalloc(1, sizeof(*plan));
        for (size_t i = 0; policy_mandatory_deny[i]; i++)
                add_deny(&plan->deny, &plan->n_deny, caller_home, policy_mandatory_deny[i]);
        plan->internal_lo = plan->n_deny;
        for (size_t i = 0; i < ARRAY_SIZE(internal_deny); i++)
                add_deny(&plan->deny, &plan->n_deny, caller_home, internal_deny[i]);
        plan->internal_hi = plan->n_deny;
        for (size_t i = 0; i < p->n_deny_read; i++)
                add_deny(&plan->deny, &plan->n_deny, caller_home, p->deny_read[i]);

        /* What the user named is resolved here, with the caller's view, and a
         * path that cannot be resolved is refused rather than let through
         * unchecked (the sandbox user may not see where it leads). */
        struct mounts_config c = {.policy = p, .plan = plan};
        struct builder b = {.c = &c, .err = err, .deny = plan->deny, .n_deny = plan->n_deny,
                            .internal_lo = plan->internal_lo, .internal_hi = plan->internal_hi};
        char real[PATH_MAX];
        int r = 0;
        if (p->workspace) {
                if (!realpath(p->workspace, real)) {
                        r = al_error_set(err, errno, "workspace %s", p->workspace);
                        goto fail;
                }
                plan->workspace_real = xstrdup(real);
                r = check_not_denied(&b, p->workspace);
                if (r < 0)
                        goto fail;
        }
        plan->mount_reals = xcalloc(p->n_mounts + 1, sizeof(char *));
        for (size_t i = 0; i < p->n_mounts; i++) {
                if (!realpath(p->mounts[i].source, real)) {
                        r = al_error_set(err, errno, "mount %s at %s", p->mounts[i].source,
                                         p->mounts[i].target);
                        goto fail;
                }
                plan->mount_reals[i] = xstrdup(real);
                r = check_not_denied(&b, p->mounts[i].source);
                if (r < 0)
                        goto fail;
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
        free(plan->workspace_real);
        for (size_t i = 0; plan->mount_reals && i < n_mounts; i++)
                free(plan->mount_reals[i]);
        free(plan->mount_reals);
        free(plan);
        return NULL;
}
