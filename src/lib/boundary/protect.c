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
#include <unistd.h>

#include "fs.h"
#include "gitguard.h"
#include "mounts.h"
#include "paths.h"
#include "trusted.h"
#include "util.h"
#include "mounts-internal.h"

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
        _cleanup_close_ int to = mounts_open_in_root(b, target, O_PATH);
        struct stat ts;
        if (to >= 0 && fstat(to, &ts) == 0 && S_ISREG(ts.st_mode)) {
                mnt = open_tree(to, "", OPEN_TREE_CLONE | OPEN_TREE_CLOEXEC | AT_EMPTY_PATH);
                if (mnt >= 0 &&
                    mounts_set_attr(mnt, MOUNT_ATTR_RDONLY | MOUNT_ATTR_NOSUID | MOUNT_ATTR_NODEV,
                                    false) < 0) {
                        close(mnt);
                        mnt = -1;
                }
        }
        if (mnt < 0)
                mnt = mounts_make_mask(false, devnull);
        if (mnt < 0)
                return al_error_set(b->err, mnt, "protecting %s", target);
        if (move_mount(mnt, "", tfd, "", MOVE_MOUNT_F_EMPTY_PATH | MOVE_MOUNT_T_EMPTY_PATH) < 0)
                return al_error_set(b->err, errno, "protecting %s", target);
        return 0;
}

int mounts_apply_protect(struct builder *b, int devnull)
{
        const struct mounts_plan *plan = b->c->plan;
        for (size_t i = 0; plan && i < plan->n_protect; i++) {
                const char *host = plan->protect[i];
                for (size_t m = 0; m < b->n_maps; m++) {
                        if (!b->maps[m].writable || !mounts_path_under(host, b->maps[m].host))
                                continue;
                        const char *rest = host + strlen(b->maps[m].host);
                        if (STREQ(b->maps[m].host, "/"))
                                rest = host;
                        _cleanup_free_ char *target = xasprintf("%s%s", b->maps[m].target, rest);
                        _cleanup_close_ int tfd =
                            mounts_open_in_root(b, target, O_PATH | O_NOFOLLOW);
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
                            mounts_set_attr(
                                mnt, MOUNT_ATTR_RDONLY | MOUNT_ATTR_NOSUID | MOUNT_ATTR_NODEV,
                                true) < 0)
                                return al_error_set(b->err, errno, "protecting %s", target);
                        if (move_mount(mnt, "", tfd, "",
                                       MOVE_MOUNT_F_EMPTY_PATH | MOVE_MOUNT_T_EMPTY_PATH) < 0)
                                return al_error_set(b->err, errno, "protecting %s", target);
                }
        }
        return 0;
}

int mounts_prepare_workspace(const struct policy *p, struct al_error *err)
{
        if (!p->workspace || p->workspace_mode == POLICY_WORKSPACE_RO || !p->protect_git)
                return 0;
        /* As root, on a path nobody else can swap (trusted.h), as the plan
         * mounts it: this runs before the plan's walk. */
        _cleanup_close_ int ws = -1;
        if (geteuid() == 0) {
                char real[PATH_MAX];
                ws = trusted_open(p->workspace, trusted_caller(), false, real, "workspace", err);
                if (ws < 0)
                        return ws;
        } else {
                ws = open(p->workspace, O_PATH | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
                if (ws < 0)
                        return al_error_set(err, errno, "workspace %s", p->workspace);
        }
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

void mounts_plan_add_protect(struct mounts_plan *plan, const char *real, bool pin)
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

/* A writable root's metadata that would make host programs run the agent's
 * code later: shell and editor start-up files, tool configs (an agent's
 * settings hold hooks: commands it runs on each of its tool calls), and
 * git's config, hooks and pointers in every repository found. */
const char *const mounts_write_protect[] = {
    ".bashrc",        ".zshrc",
    ".profile",       ".bash_profile",
    ".zprofile",      ".gitconfig",
    ".gitmodules",    ".ripgreprc",
    ".mcp.json",      ".envrc",
    ".vscode",        ".idea",
    ".claude/hooks",  ".claude/commands",
    ".claude/agents", ".claude/settings.json",
    ".husky",         ".pre-commit-config.yaml",
};
const size_t mounts_n_write_protect = ARRAY_SIZE(mounts_write_protect);

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
        mounts_plan_add_protect(plan, p, false);
}

/* A git directory (`.git`, or one under .git/modules or .git/worktrees):
 * pin it, so that it cannot be renamed aside and rebuilt, and make its
 * config, hooks and pointers read-only. hooks is created when missing, so
 * that it can be covered (an empty hooks directory changes nothing). */
static void protect_gitdir(struct mounts_plan *plan, int fd, const char *path, int depth,
                           size_t *budget)
{
        mounts_plan_add_protect(plan, path, true);
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
                mounts_plan_add_protect(plan, subpath, true);
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
/* What a repository's config makes host git run or read from the tree
 * (its hooksPath directory, programs, included files): read-only too. */
static void protect_config_targets(struct mounts_plan *plan, const char *root, const char *gitdir,
                                   const char *worktree)
{
        size_t n = 0;
        _cleanup_strv_ char **t = gitguard_config_targets(root, gitdir, worktree, &n);
        struct stat st;
        for (size_t i = 0; i < n; i++)
                if (lstat(t[i], &st) == 0)
                        mounts_plan_add_protect(plan, t[i], false);
}

static void scan_git(struct mounts_plan *plan, const char *root, int fd, const char *path,
                     int depth, size_t *entries, size_t *modules)
{
        struct stat st;
        if (fstatat(fd, ".git", &st, AT_SYMLINK_NOFOLLOW) == 0) {
                _cleanup_free_ char *gp = xasprintf("%s/.git", path);
                if (S_ISDIR(st.st_mode)) {
                        _cleanup_close_ int g =
                            openat(fd, ".git", O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
                        if (g >= 0)
                                protect_gitdir(plan, g, gp, 0, modules);
                        protect_config_targets(plan, root, gp, path);
                } else if (S_ISREG(st.st_mode) || S_ISLNK(st.st_mode))
                        /* A worktree's or submodule's "gitdir:" pointer, or
                         * a link to a git directory elsewhere. */
                        mounts_plan_add_protect(plan, gp, false);
        }
        /* A bare repository (HEAD, objects/ and refs/ side by side): its
         * config runs code too (core.pager, aliases) when host git is used
         * in it. It is a git directory; nothing below it is a worktree. */
        struct stat h, o, rf;
        if (fstatat(fd, "HEAD", &h, AT_SYMLINK_NOFOLLOW) == 0 && S_ISREG(h.st_mode) &&
            fstatat(fd, "objects", &o, AT_SYMLINK_NOFOLLOW) == 0 && S_ISDIR(o.st_mode) &&
            fstatat(fd, "refs", &rf, AT_SYMLINK_NOFOLLOW) == 0 && S_ISDIR(rf.st_mode)) {
                protect_gitdir(plan, fd, path, 0, modules);
                protect_config_targets(plan, root, path, path);
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
                scan_git(plan, root, sub, sp, depth + 1, entries, modules);
        }
}

void mounts_protect_root(struct mounts_plan *plan, const struct policy *p, const char *real)
{
        _cleanup_close_ int fd = open(real, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
        if (fd < 0)
                return;
        for (size_t i = 0; i < mounts_n_write_protect; i++)
                protect_if_exists(plan, fd, STREQ(real, "/") ? "" : real, mounts_write_protect[i]);
        if (p->protect_git) {
                size_t entries = GIT_SCAN_ENTRIES, modules = GIT_SCAN_MODULES;
                scan_git(plan, real, fd, real, 0, &entries, &modules);
                /* The repository the tree lies in, when it is not its top. */
                _cleanup_free_ char *wt = NULL;
                _cleanup_free_ char *outer = gitguard_enclosing_gitdir(real, &wt);
                if (outer)
                        protect_config_targets(plan, real, outer, wt);
        }
}
