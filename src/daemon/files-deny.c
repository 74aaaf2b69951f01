/* SPDX-License-Identifier: Apache-2.0 */
/* The sandbox's deny list, applied to the files API (files-deny.h). */
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <linux/openat2.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "files-deny.h"
#include "fs.h"
#include "mounts.h"
#include "policy.h"
#include "util.h"

#define UP_MAX 4096 /* directories walked up, at most */

struct ident {
        dev_t dev;
        ino_t ino;
};

/* A deny entry's path and what it was when the set was made (present:
 * ident; absent), for files_deny_fresh. */
struct entry {
        char *path;
        bool present;
        struct ident id;
        bool has_parent; /* the directory holding path then, and its last name */
        struct ident parent;
        const char *base;
};

struct files_deny {
        struct entry *entries;
        size_t n_entries;
        struct ident *deny;
        int *deny_fd; /* O_PATH, for the walk up from each entry */
        size_t n_deny;
        struct ident *allow;
        size_t n_allow;
};

static bool has(const struct ident *v, size_t n, const struct stat *st)
{
        for (size_t i = 0; i < n; i++)
                if (v[i].dev == st->st_dev && v[i].ino == st->st_ino)
                        return true;
        return false;
}

bool files_deny_has(const struct files_deny *fd, const struct stat *st)
{
        return fd && has(fd->deny, fd->n_deny, st);
}

static void add_deny(struct files_deny *fd, const char *path)
{
        int f = open(path, O_PATH | O_NOFOLLOW | O_CLOEXEC);
        struct stat st;
        bool present = f >= 0 && fstat(f, &st) == 0;
        fd->entries = xrealloc(fd->entries, fd->n_entries + 1, sizeof(*fd->entries));
        struct entry *e = &fd->entries[fd->n_entries++];
        *e = (struct entry){.path = xstrdup(path),
                            .present = present,
                            .id = present ? (struct ident){st.st_dev, st.st_ino}
                                          : (struct ident){0, 0}};
        /* Its name in its directory, for what reports names there (a
         * watch's events), even once it is gone or not yet made. */
        const char *slash = strrchr(e->path, '/');
        struct stat pst;
        if (slash && slash[1]) {
                _cleanup_free_ char *dir =
                    xasprintf("%.*s", slash == e->path ? 1 : (int)(slash - e->path), e->path);
                if (stat(dir, &pst) == 0) {
                        e->has_parent = true;
                        e->parent = (struct ident){pst.st_dev, pst.st_ino};
                        e->base = slash + 1;
                }
        }
        if (!present) {
                if (f >= 0)
                        close(f);
                return; /* nothing there now: nothing to hide (until files_deny_fresh) */
        }
        fd->deny = xrealloc(fd->deny, fd->n_deny + 1, sizeof(*fd->deny));
        fd->deny_fd = xrealloc(fd->deny_fd, fd->n_deny + 1, sizeof(*fd->deny_fd));
        fd->deny[fd->n_deny] = (struct ident){st.st_dev, st.st_ino};
        fd->deny_fd[fd->n_deny++] = f;
}

int files_deny_new(const struct policy *p, const char *home, const char *secrets_path,
                   struct files_deny **ret, struct al_error *err)
{
        struct mounts_plan *plan = NULL;
        int r = mounts_plan_new(p, home, &plan, err);
        if (r < 0)
                return r;
        struct files_deny *fd = xcalloc(1, sizeof(*fd));
        /* Entries with nothing there yet are held too (absent), so that a
         * kept set is made again once one appears. */
        for (size_t i = 0; i < plan->n_deny; i++)
                add_deny(fd, plan->deny[i]);
        if (secrets_path)
                add_deny(fd, secrets_path);
        for (size_t i = 0; i < plan->n_allow_read; i++) {
                struct stat st;
                if (stat(plan->allow_read[i], &st) < 0)
                        continue;
                fd->allow = xrealloc(fd->allow, fd->n_allow + 1, sizeof(*fd->allow));
                fd->allow[fd->n_allow++] = (struct ident){st.st_dev, st.st_ino};
        }
        mounts_plan_free(plan, p->n_mounts);
        *ret = fd;
        return 0;
}

bool files_deny_named(const struct files_deny *fd, int dirfd, const struct stat *dir,
                      const char *name)
{
        if (!fd)
                return false;
        for (size_t i = 0; i < fd->n_entries; i++) {
                const struct entry *e = &fd->entries[i];
                if (e->has_parent && e->parent.dev == dir->st_dev && e->parent.ino == dir->st_ino &&
                    STREQ(e->base, name))
                        return true;
        }
        struct stat st;
        return dirfd >= 0 && fstatat(dirfd, name, &st, AT_SYMLINK_NOFOLLOW) == 0 &&
               has(fd->deny, fd->n_deny, &st);
}

bool files_deny_fresh(const struct files_deny *fd)
{
        for (size_t i = 0; fd && i < fd->n_entries; i++) {
                const struct entry *e = &fd->entries[i];
                struct stat st; /* as add_deny's O_PATH | O_NOFOLLOW open sees it */
                bool present = fstatat(AT_FDCWD, e->path, &st, AT_SYMLINK_NOFOLLOW) == 0;
                if (present != e->present ||
                    (present && (st.st_dev != e->id.dev || st.st_ino != e->id.ino)))
                        return false;
        }
        return true;
}

struct files_deny *files_deny_free(struct files_deny *fd)
{
        if (!fd)
                return NULL;
        for (size_t i = 0; i < fd->n_deny; i++)
                close(fd->deny_fd[i]);
        for (size_t i = 0; i < fd->n_entries; i++)
                free(fd->entries[i].path);
        free(fd->entries);
        free(fd->deny);
        free(fd->deny_fd);
        free(fd->allow);
        free(fd);
        return NULL;
}

/* The directory holding the non-directory `f` now: named by the kernel's
 * path of f, then checked to hold f (a rename meanwhile is -EAGAIN). */
static int parent_of_file(int f, const struct stat *st)
{
        char proc[64], path[PATH_MAX];
        snprintf(proc, sizeof(proc), "/proc/self/fd/%d", f);
        ssize_t n = readlink(proc, path, sizeof(path) - 1);
        if (n <= 0)
                return -EAGAIN;
        path[n] = '\0';
        char *slash = strrchr(path, '/');
        if (path[0] != '/' || !slash)
                return -EAGAIN; /* "(deleted)", or not a path */
        const char *name = slash + 1;
        char dir[PATH_MAX];
        snprintf(dir, sizeof(dir), "%.*s", slash == path ? 1 : (int)(slash - path), path);
        int d = open(dir, O_PATH | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
        if (d < 0)
                return -EAGAIN;
        struct stat cst;
        if (fstatat(d, name, &cst, AT_SYMLINK_NOFOLLOW) < 0 || cst.st_dev != st->st_dev ||
            cst.st_ino != st->st_ino) {
                close(d);
                return -EAGAIN;
        }
        return d;
}

/* Walk up from `start` (owned here) to the root of the file system: 1 when
 * `stop` (when not NULL) is met first, else 0; with `deny`, -EACCES when a
 * denied entry is met before an allowed one or `stop`. */
static int walk_up(const struct files_deny *fd, int start, const struct stat *stop, bool deny)
{
        int cur = start;
        int r = 0;
        for (int i = 0; i < UP_MAX; i++) {
                struct stat st;
                if (fstat(cur, &st) < 0) {
                        r = -errno;
                        break;
                }
                if (stop && st.st_dev == stop->st_dev && st.st_ino == stop->st_ino) {
                        r = 1;
                        break;
                }
                if (deny && has(fd->allow, fd->n_allow, &st))
                        break;
                if (deny && has(fd->deny, fd->n_deny, &st)) {
                        r = -EACCES;
                        break;
                }
                int up;
                if (S_ISDIR(st.st_mode)) {
                        up = openat(cur, "..", O_PATH | O_DIRECTORY | O_CLOEXEC);
                        if (up < 0)
                                up = -errno;
                } else
                        up = parent_of_file(cur, &st);
                if (up < 0) {
                        r = up;
                        break;
                }
                struct stat ust;
                if (fstat(up, &ust) == 0 && ust.st_dev == st.st_dev && ust.st_ino == st.st_ino) {
                        close(up); /* the root of the file system */
                        break;
                }
                close(cur);
                cur = up;
        }
        close(cur);
        return r;
}

int files_deny_check_fd(const struct files_deny *fd, int root, int opened, const char *rel,
                        struct al_error *err)
{
        if (!fd)
                return 0;
        struct stat rst;
        int f = fcntl(opened, F_DUPFD_CLOEXEC, 3);
        if (f < 0 || fstat(root, &rst) < 0) {
                if (f >= 0)
                        close(f);
                return al_error_set(err, errno, "%s", rel);
        }
        int r = walk_up(fd, f, &rst, true);
        if (r == -EACCES)
                return al_error_set_message(err, EACCES,
                                            "%s: hidden from the sandbox by its deny list, and "
                                            "from the files API as well",
                                            rel);
        return r < 0 ? al_error_set(err, -r, "%s: checking it against the deny list", rel) : 0;
}

int files_deny_check(const struct files_deny *fd, int root, const char *rel, bool tree,
                     struct al_error *err)
{
        if (!fd)
                return 0;
        /* The object itself, or where it would be made: the nearest
         * directory above it that exists. */
        _cleanup_free_ char *p = xstrdup(rel);
        int f = -1;
        for (;;) {
                f = fs_openat2(root, p, O_PATH | O_CLOEXEC, 0,
                               RESOLVE_BENEATH | RESOLVE_NO_MAGICLINKS);
                if (f >= 0 || (f != -ENOENT && f != -ENOTDIR) || STREQ(p, "."))
                        break;
                char *slash = strrchr(p, '/');
                if (slash)
                        *slash = '\0';
                else {
                        free(p);
                        p = xstrdup(".");
                }
        }
        if (f < 0)
                return 0; /* the operation itself reports why it cannot reach it */
        struct stat rst, tst;
        if (fstat(root, &rst) < 0 || fstat(f, &tst) < 0) {
                close(f);
                return al_error_set(err, errno, "%s", rel);
        }
        int tdup = tree && S_ISDIR(tst.st_mode) ? fcntl(f, F_DUPFD_CLOEXEC, 3) : -1;
        int r = walk_up(fd, f, &rst, true);
        if (r == -EACCES) {
                if (tdup >= 0)
                        close(tdup);
                return al_error_set_message(err, EACCES,
                                            "%s: hidden from the sandbox by its deny list, and "
                                            "from the files API as well",
                                            rel);
        }
        if (r < 0) {
                if (tdup >= 0)
                        close(tdup);
                return al_error_set(err, -r, "%s: checking it against the deny list", rel);
        }
        if (tdup < 0)
                return 0;
        close(tdup);
        /* Does a denied entry lie beneath the directory? Walk up from each. */
        for (size_t i = 0; i < fd->n_deny; i++) {
                int e = fcntl(fd->deny_fd[i], F_DUPFD_CLOEXEC, 3);
                if (e < 0)
                        return al_error_set(err, errno, "%s", rel);
                struct stat est;
                if (fstat(e, &est) == 0 && est.st_dev == tst.st_dev && est.st_ino == tst.st_ino) {
                        close(e);
                        continue; /* the directory itself: checked above */
                }
                r = walk_up(fd, e, &tst, false);
                if (r == 1)
                        return al_error_set_message(
                            err, EACCES,
                            "%s: holds a path the sandbox's deny list hides; name a path beside "
                            "it",
                            rel);
        }
        return 0;
}
