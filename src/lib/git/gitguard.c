/* SPDX-License-Identifier: Apache-2.0 */
#include <ctype.h>
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <linux/openat2.h>
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <unistd.h>

#include "audit.h"
#include "fs.h"
#include "gitguard-internal.h"
#include "gitguard.h"
#include "gitops.h"
#include "policy.h"
#include "util.h"

#define POINTER_MAX 4096

/* ---- the walk ---- */

int gitguard_read_small(int dfd, const char *name, size_t max, char **ret, size_t *ret_len)
{
        struct stat st;
        if (fstatat(dfd, name, &st, AT_SYMLINK_NOFOLLOW) < 0)
                return -errno;
        if (!S_ISREG(st.st_mode))
                return -EPERM;
        _cleanup_close_ int fd =
            openat(dfd, name, O_RDONLY | O_NOFOLLOW | O_NONBLOCK | O_NOCTTY | O_CLOEXEC);
        if (fd < 0)
                return -errno;
        return gitguard_read_small_fd(fd, max, ret, ret_len);
}

int gitguard_read_small_fd(int fd, size_t max, char **ret, size_t *ret_len)
{
        struct stat st;
        if (fstat(fd, &st) < 0)
                return -errno;
        if (!S_ISREG(st.st_mode))
                return -EPERM;
        if ((uint64_t)st.st_size > max)
                return -EFBIG;
        /* Sized for what the file holds (it may grow meanwhile, up to
         * max + 1 to tell it was too large): a config is a few hundred
         * bytes, not the megabyte allowed. */
        size_t cap = (size_t)st.st_size + 1 < max + 1 ? (size_t)st.st_size + 1 : max + 1;
        _cleanup_free_ char *buf = xcalloc(cap + 1, 1);
        size_t len = 0;
        for (;;) {
                if (len == cap && cap < max + 1) {
                        size_t more = cap * 2 < max + 1 ? cap * 2 : max + 1;
                        buf = xrealloc(buf, more + 1, 1);
                        cap = more;
                }
                ssize_t n = read(fd, buf + len, cap - len);
                if (n < 0 && errno == EINTR)
                        continue;
                if (n < 0)
                        return -errno;
                if (n == 0)
                        break;
                len += (size_t)n;
                if (len > max)
                        return -EFBIG;
        }
        buf[len] = '\0';
        *ret = TAKE_PTR(buf);
        *ret_len = len;
        return 0;
}

char *gitguard_join(const char *rel, const char *name)
{
        return *rel ? xasprintf("%s/%s", rel, name) : xstrdup(name);
}

bool gitguard_quarantined(const char *name)
{
        /* NAME.airlock-quarantine[.N or .HEX]: only a name that ends so.
         * One that merely holds the suffix (evil.airlock-quarantine.md)
         * is still read by what reads NAME's directory. */
        const char *last = NULL;
        for (const char *p = name; (p = strstr(p, GITGUARD_SUFFIX)); p++)
                last = p;
        if (!last)
                return false;
        const char *end = last + strlen(GITGUARD_SUFFIX);
        if (!*end)
                return true;
        return end[0] == '.' && end[1] && strspn(end + 1, "0123456789abcdef") == strlen(end + 1);
}

/* Once per directory: a repository reached twice (a pointer and the walk)
 * is scanned once. */
static bool first_visit(struct guard_run *g, int fd)
{
        struct stat st;
        if (fstat(fd, &st) < 0)
                return false;
        for (size_t i = 0; i < g->n_visited; i++)
                if (g->visited[i].dev == st.st_dev && g->visited[i].ino == st.st_ino)
                        return false;
        if (g->n_visited < VISITED_MAX) {
                g->visited[g->n_visited].dev = st.st_dev;
                g->visited[g->n_visited].ino = st.st_ino;
                g->n_visited++;
        }
        return true;
}

/* Whether what st describes was changed by the run: any write, chmod or
 * new name moves a ctime past the start, and nobody without privilege can
 * set one back. While the start is noted, everything counts. */
bool gitguard_ctime_in_run(const struct guard_run *g, const struct stat *st)
{
        if (!g->started)
                return true;
        if (st->st_ctim.tv_sec != g->started->tv_sec)
                return st->st_ctim.tv_sec > g->started->tv_sec;
        return st->st_ctim.tv_nsec >= g->started->tv_nsec;
}

int gitguard_open_dir(int dfd, const char *name)
{
        return openat(dfd, name, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
}

DIR *gitguard_dir_of(int fd)
{
        int dup = fcntl(fd, F_DUPFD_CLOEXEC, 3);
        if (dup < 0)
                return NULL;
        DIR *d = fdopendir(dup);
        if (!d)
                close(dup);
        return d;
}

bool gitguard_count_entry(struct guard_run *g, const char *rel)
{
        if (g->stopped)
                return false;
        if (++g->entries <= GITGUARD_ENTRIES_MAX)
                return true;
        g->stopped = true;
        char reason[160];
        snprintf(reason, sizeof(reason),
                 "the scan stopped after %d entries; git metadata past this point was not checked",
                 GITGUARD_ENTRIES_MAX);
        gitguard_report(g, rel, reason, NULL, 0);
        return false;
}

const char *gitguard_next_entry(struct guard_run *g, DIR *d, const char *rel)
{
        struct dirent *de;
        while ((de = readdir(d))) {
                const char *n = de->d_name;
                if (STREQ(n, ".") || STREQ(n, "..") || gitguard_quarantined(n) ||
                    !gitguard_count_entry(g, rel))
                        continue;
                return n;
        }
        return NULL;
}

/* A directory the caller cannot read was either like that before the run
 * (the sandbox has no more rights than its caller, so nothing in it is the
 * agent's) or changed by the run. Only the second is worth a report. */
static bool changed_in_run(const struct guard_run *g, int fd, const char *name)
{
        struct stat st;
        if (!g->started || fstatat(fd, name, &st, AT_SYMLINK_NOFOLLOW) < 0)
                return true;
        return gitguard_ctime_in_run(g, &st);
}

/* A file git reads whole (HEAD, a ref, info/exclude) that the run made
 * sparse or too large: at every command git would read all of it into
 * memory. Moved to the top of the git directory, as a FIFO is. The host's
 * own, untouched by the run, stays whatever its size. */
static void check_size(struct guard_run *g, int fd, const char *name, const char *rel, int gfd,
                       const char *grel)
{
        const char *inner = rel + (*grel ? strlen(grel) + 1 : 0);
        if (gitguard_size_skips(inner))
                return;
        struct stat st;
        if (fstatat(fd, name, &st, AT_SYMLINK_NOFOLLOW) < 0 || !gitguard_ctime_in_run(g, &st))
                return;
        char why[192];
        const char *reason = gitguard_size_reason(&st, inner, why, sizeof(why));
        if (reason)
                gitguard_quarantine_into(g, fd, name, rel, gfd, grel, reason);
}

/* The same for what git reads whole in the working tree (.gitignore at
 * any depth, .mailmap, ...): moved aside where it is. */
static void check_worktree_size(struct guard_run *g, int fd, const char *name, const char *rel)
{
        struct stat st;
        if (fstatat(fd, name, &st, AT_SYMLINK_NOFOLLOW) < 0 || !gitguard_ctime_in_run(g, &st))
                return;
        char why[192];
        const char *reason = gitguard_worktree_size_reason(&st, why, sizeof(why));
        if (!reason)
                return;
        _cleanup_free_ char *r = gitguard_join(rel, name);
        gitguard_quarantine(g, fd, name, r, reason);
}

static void scan_gitdir(struct guard_run *g, int fd, const char *rel, const char *wt, bool worktree,
                        int depth);

/* hooks/: every hook but the samples git ships. */
static void scan_hooks(struct guard_run *g, int gfd, const char *rel)
{
        _cleanup_free_ char *hrel = gitguard_join(rel, "hooks");
        struct stat st;
        if (fstatat(gfd, "hooks", &st, AT_SYMLINK_NOFOLLOW) < 0)
                return;
        if (S_ISLNK(st.st_mode)) {
                gitguard_quarantine(g, gfd, "hooks", hrel,
                                    "a hooks directory that is a symbolic link");
                return;
        }
        if (!S_ISDIR(st.st_mode))
                return;
        _cleanup_close_ int hfd = gitguard_open_dir(gfd, "hooks");
        if (hfd >= 0)
                gitguard_scan_hook_entries(g, hfd, hrel, "a hook (host git would run it)");
}

/* modules/ holds one git directory per submodule, at the submodule's name,
 * which may have slashes in it: descend until a directory has a HEAD. */
static void scan_modules(struct guard_run *g, int fd, const char *rel, int depth)
{
        if (depth > GITGUARD_DEPTH_MAX)
                return;
        DIR *d = gitguard_dir_of(fd);
        if (!d)
                return;
        const char *n;
        while ((n = gitguard_next_entry(g, d, rel))) {
                _cleanup_free_ char *r = gitguard_join(rel, n);
                _cleanup_close_ int sfd = gitguard_open_dir(fd, n);
                if (sfd < 0)
                        continue;
                struct stat st;
                if (fstatat(sfd, "HEAD", &st, AT_SYMLINK_NOFOLLOW) == 0)
                        scan_gitdir(g, sfd, r, NULL, false, depth + 1);
                else
                        scan_modules(g, sfd, r, depth + 1);
        }
        closedir(d);
}

static void scan_commondir(struct guard_run *g, int gfd, const char *rel, bool worktree)
{
        struct stat st;
        if (fstatat(gfd, "commondir", &st, AT_SYMLINK_NOFOLLOW) < 0)
                return;
        _cleanup_free_ char *r = gitguard_join(rel, "commondir");
        if (worktree && S_ISREG(st.st_mode)) {
                /* A linked worktree's own: its repository, two levels up. */
                _cleanup_free_ char *text = NULL;
                size_t len;
                if (gitguard_read_small(gfd, "commondir", POINTER_MAX, &text, &len) == 0) {
                        text[strcspn(text, "\r\n")] = '\0';
                        if (STREQ(text, "../..") || STREQ(text, "../../"))
                                return;
                }
        }
        gitguard_quarantine(g, gfd, "commondir", r,
                            "a commondir file (git would read config and hooks from elsewhere)");
}

/* A FIFO, socket or device anywhere git reads in a git directory (the
 * index, HEAD, a ref, an object): git opens it and blocks for good, and
 * with it every shell prompt that runs `git status`. A symbolic link there
 * is followed out of the tree (a ref linked to /dev/zero hangs `git
 * branch`). Below the top, git reads every name (`git branch` opens each
 * loose ref, whatever it is called), so what is found there is moved to
 * the top of the git directory (gfd, grel), where git reads only its own
 * names, and a name with the quarantine suffix is no reason to pass over
 * it. Submodules' and worktrees' directories are git directories of their
 * own. */
static void scan_special(struct guard_run *g, int fd, const char *rel, int depth, int gfd,
                         const char *grel)
{
        bool top = fd == gfd;
        if (depth > GITGUARD_DEPTH_MAX)
                return;
        DIR *d = gitguard_dir_of(fd);
        if (!d)
                return;
        struct dirent *de;
        while ((de = readdir(d))) {
                const char *n = de->d_name;
                if (STREQ(n, ".") || STREQ(n, "..") || !gitguard_count_entry(g, rel))
                        continue;
                /* config and config.worktree: gitguard_check_config's, whatever
                 * they are. */
                if (top &&
                    (gitguard_quarantined(n) || STREQ(n, "config") || STREQ(n, "config.worktree")))
                        continue;
                unsigned char type = de->d_type;
                if (type == DT_UNKNOWN) {
                        struct stat st;
                        if (fstatat(fd, n, &st, AT_SYMLINK_NOFOLLOW) < 0)
                                continue;
                        type = S_ISDIR(st.st_mode)   ? DT_DIR
                               : S_ISLNK(st.st_mode) ? DT_LNK
                               : S_ISREG(st.st_mode) ? DT_REG
                                                     : DT_FIFO;
                }
                _cleanup_free_ char *r = gitguard_join(rel, n);
                if (type != DT_DIR && type != DT_REG) {
                        const char *why = type == DT_LNK
                                              ? "a symbolic link in a git directory (host git "
                                                "would follow it out of the tree)"
                                              : "a FIFO, socket or device in a git directory "
                                                "(host git would block on it)";
                        gitguard_quarantine_into(g, fd, n, r, gfd, grel, why);
                        continue;
                }
                if (type == DT_REG) {
                        check_size(g, fd, n, r, gfd, grel);
                        continue;
                }
                /* Submodules' and worktrees' git directories: their own. */
                if (top && (STREQ(n, "modules") || STREQ(n, "worktrees")))
                        continue;
                _cleanup_close_ int sfd = gitguard_open_dir(fd, n);
                if (sfd >= 0)
                        scan_special(g, sfd, r, depth + 1, gfd, grel);
        }
        closedir(d);
}

/* A git directory at rel; wt: its working tree's directory (where a
 * relative core.hooksPath starts), NULL when not known. */
static void scan_gitdir(struct guard_run *g, int fd, const char *rel, const char *wt, bool worktree,
                        int depth)
{
        if (depth > GITGUARD_DEPTH_MAX || !first_visit(g, fd))
                return;
        /* Reached with no pointer (a submodule's or a linked worktree's,
         * from modules/ or worktrees/): its working tree, where a relative
         * hooksPath or program starts, is found as git finds it. */
        const char *pointed = worktree ? NULL : wt;
        _cleanup_free_ char *own_wt = wt ? NULL : gitguard_gitdir_worktree(g, fd, rel, worktree);
        if (!wt)
                wt = own_wt;
        /* Reached by a pointer: a core.worktree in its config is its working
         * tree all the same, where relative hooks and programs start. Both
         * are checked: the config may be the agent's, moved aside below. */
        _cleanup_free_ char *cfg_wt = pointed ? gitguard_gitdir_worktree(g, fd, rel, false) : NULL;
        const char *wts[2] = {wt, NULL};
        if (cfg_wt && !STREQ(cfg_wt, rel) && !STREQ(cfg_wt, pointed))
                wts[1] = cfg_wt;
        scan_special(g, fd, rel, depth, fd, rel);
        _cleanup_free_ char *cr = gitguard_join(rel, "config");
        _cleanup_free_ char *cwr = gitguard_join(rel, "config.worktree");
        for (size_t i = 0; i < ARRAY_SIZE(wts) && (i == 0 || wts[i]); i++) {
                gitguard_check_config(g, fd, "config", cr, wts[i]);
                gitguard_check_config(g, fd, "config.worktree", cwr, wts[i]);
        }
        scan_commondir(g, fd, rel, worktree);
        scan_hooks(g, fd, rel);
        for (size_t i = 0; i < ARRAY_SIZE(wts) && (i == 0 || wts[i]); i++) {
                gitguard_scan_hooks_path(g, rel, wts[i], worktree);
                gitguard_check_global_programs(g, wts[i]);
        }
        /* objects/info/alternates: git reads objects from the directories
         * it names, anywhere on the host. */
        _cleanup_close_ int ofd = gitguard_open_dir(fd, "objects");
        _cleanup_close_ int ifd = ofd >= 0 ? gitguard_open_dir(ofd, "info") : -1;
        struct stat ast;
        if (ifd >= 0 && fstatat(ifd, "alternates", &ast, AT_SYMLINK_NOFOLLOW) == 0) {
                _cleanup_free_ char *ar = gitguard_join(rel, "objects/info/alternates");
                gitguard_quarantine(g, ifd, "alternates", ar,
                                    "an alternates file (git would read objects from elsewhere)");
        }

        _cleanup_close_ int mfd = gitguard_open_dir(fd, "modules");
        if (mfd >= 0) {
                _cleanup_free_ char *mr = gitguard_join(rel, "modules");
                scan_modules(g, mfd, mr, depth + 1);
        }
        _cleanup_close_ int wfd = gitguard_open_dir(fd, "worktrees");
        if (wfd >= 0) {
                DIR *d = gitguard_dir_of(wfd);
                struct dirent *de;
                while (d && (de = readdir(d))) {
                        const char *n = de->d_name;
                        if (STREQ(n, ".") || STREQ(n, "..") || !gitguard_count_entry(g, rel))
                                continue;
                        _cleanup_close_ int sfd = gitguard_open_dir(wfd, n);
                        _cleanup_free_ char *wr = gitguard_join(rel, "worktrees");
                        _cleanup_free_ char *r = gitguard_join(wr, n);
                        if (sfd >= 0)
                                scan_gitdir(g, sfd, r, NULL, true, depth + 1);
                }
                if (d)
                        closedir(d);
        }
}

/* The host's own pointer, kept, by an absolute path (a linked worktree's,
 * `git init --separate-git-dir`'s): when it names a git directory of the
 * tree, that directory is scanned with this working tree, where its
 * relative hooksPath and programs start. A linked worktree's (in a
 * worktrees/ directory, with a commondir) reads its repository's config. */
static void scan_kept_pointer(struct guard_run *g, const char *t, const char *rel, int depth)
{
        _cleanup_free_ char *target = NULL;
        if (gitguard_tree_where(g, t, rel, &target) != GITGUARD_IN)
                return;
        _cleanup_close_ int tfd = fs_openat2(
            g->root_fd, target, O_RDONLY | O_DIRECTORY | O_CLOEXEC, 0,
            RESOLVE_BENEATH | RESOLVE_NO_SYMLINKS | RESOLVE_NO_MAGICLINKS | RESOLVE_NO_XDEV);
        if (tfd < 0)
                return;
        const char *slash = strrchr(target, '/');
        size_t dl = slash ? (size_t)(slash - target) : 0;
        bool in_worktrees = dl >= 9 && memcmp(target + dl - 9, "worktrees", 9) == 0 &&
                            (dl == 9 || target[dl - 10] == '/');
        struct stat st;
        bool linked = in_worktrees && fstatat(tfd, "commondir", &st, AT_SYMLINK_NOFOLLOW) == 0;
        scan_gitdir(g, tfd, target, rel, linked, depth + 1);
}

/* A .git entry (named so whatever its case: a case-folding directory
 * gives it to git as .git): a repository, or a pointer to one. rel is the
 * directory holding it ("" for the root). */
static void scan_dotgit(struct guard_run *g, int dfd, const char *name, const char *rel, int depth)
{
        struct stat st;
        if (fstatat(dfd, name, &st, AT_SYMLINK_NOFOLLOW) < 0)
                return;
        _cleanup_free_ char *grel = gitguard_join(rel, name);
        const struct root_start *rs = g->root;
        bool at_root = !*rel;
        bool same_as_start = at_root && rs->had_git && st.st_dev == rs->dev &&
                             st.st_ino == rs->ino && (st.st_mode & S_IFMT) == rs->mode;

        if (S_ISLNK(st.st_mode)) {
                gitguard_quarantine(g, dfd, name, grel,
                                    "a .git that is a symbolic link (git follows it)");
                return;
        }
        if (S_ISDIR(st.st_mode)) {
                if (at_root && !same_as_start) {
                        /* Where the workspace had no repository (it may sit in a
                         * host repository's tree), the host's git must not find
                         * the agent's. */
                        _cleanup_free_ char *to = xasprintf("%s%s", name, GITGUARD_SUFFIX);
                        gitguard_quarantine(
                            g, dfd, name, grel,
                            rs->had_git ? "a .git the sandbox replaced"
                                        : "a .git the sandbox created where there was none");
                        _cleanup_close_ int qfd = gitguard_open_dir(dfd, to);
                        if (qfd >= 0)
                                scan_gitdir(g, qfd, to, NULL, false, depth + 1);
                        return;
                }
                _cleanup_close_ int gfd = gitguard_open_dir(dfd, name);
                if (gfd >= 0)
                        scan_gitdir(g, gfd, grel, rel, false, depth + 1);
                return;
        }
        if (!S_ISREG(st.st_mode)) {
                gitguard_quarantine(g, dfd, name, grel, "a .git that is not a file or a directory");
                return;
        }
        _cleanup_free_ char *text = NULL;
        size_t len = 0;
        if (gitguard_read_small(dfd, name, POINTER_MAX, &text, &len) < 0 ||
            strncmp(text, "gitdir:", 7) != 0 || memchr(text, '\0', len)) {
                gitguard_quarantine(g, dfd, name, grel, "a .git file git may read as a pointer");
                return;
        }
        if (same_as_start && rs->pointer && STREQ(text, rs->pointer)) {
                /* The host's own, as it was: the tree is a linked worktree
                 * (or a submodule) of a repository outside it, whose config
                 * may name hooks, programs and includes in it. */
                char *t = text + 7;
                t += strspn(t, " \t");
                t[strcspn(t, "\r\n")] = '\0';
                _cleanup_free_ char *abs = gitguard_absolute(t, rs->path);
                _cleanup_free_ char *in = NULL;
                if (abs && gitguard_tree_where(g, abs, NULL, &in) == GITGUARD_OUT)
                        gitguard_check_outside_repo(g, abs, rs->path);
                return;
        }
        if (at_root) {
                gitguard_quarantine(
                    g, dfd, name, grel,
                    rs->had_git ? "a .git pointer the sandbox rewrote"
                                : "a .git pointer the sandbox created where there was none");
                return;
        }
        char *t = text + 7;
        while (*t == ' ' || *t == '\t')
                t++;
        t[strcspn(t, "\r\n")] = '\0';
        _cleanup_free_ char *target = gitguard_pointer_target(rel, t);
        /* The pointer as written, walked by the kernel (target is its text
         * with the ".." taken out): a link before a ".." is refused, not
         * read past ("a/link/../g" is where the link leads, not a/g). */
        _cleanup_free_ char *written = target ? gitguard_join(rel, t) : NULL;
        _cleanup_close_ int tfd =
            target ? fs_openat2(g->root_fd, written, O_RDONLY | O_DIRECTORY | O_CLOEXEC, 0,
                                RESOLVE_BENEATH | RESOLVE_NO_SYMLINKS | RESOLVE_NO_MAGICLINKS |
                                    RESOLVE_NO_XDEV)
                   : -1;
        if (tfd < 0) {
                gitguard_quarantine(
                    g, dfd, name, grel,
                    "a .git pointer to a directory outside the workspace or through a "
                    "symbolic link");
                if (fstatat(dfd, name, &st, AT_SYMLINK_NOFOLLOW) == 0)
                        scan_kept_pointer(g, t, rel, depth);
                return;
        }
        scan_gitdir(g, tfd, target, rel, false, depth + 1);
}

/* Which mount a directory is on: the walk stays on the tree's own mount
 * and does not cross into another. Not by device number: a btrfs
 * subvolume, which the agent may make without any privilege, has a device
 * number of its own and is no mount. The device number only where the
 * kernel gives no mount id. */
static uint64_t mount_key(int fd)
{
        struct statx stx;
        if (statx(fd, "", AT_EMPTY_PATH | AT_SYMLINK_NOFOLLOW, STATX_MNT_ID, &stx) == 0 &&
            (stx.stx_mask & STATX_MNT_ID))
                return stx.stx_mnt_id;
        struct stat st;
        return fstat(fd, &st) == 0 ? (uint64_t)st.st_dev | (1ULL << 63) : 0;
}

static void walk(struct guard_run *g, int fd, const char *rel, uint64_t mnt, int depth)
{
        if (depth > GITGUARD_DEPTH_MAX) {
                /* Git finds a repository at any depth: say where the scan
                 * stopped rather than pass it over (once a run, so that
                 * many deep trees cannot flood the log). */
                if (!g->too_deep)
                        gitguard_report(
                            g, rel,
                            "a directory deeper than the scan goes: git metadata in it and "
                            "in any other this deep was not checked",
                            NULL, 0);
                g->too_deep = true;
                return;
        }
        DIR *d = gitguard_dir_of(fd);
        if (!d)
                return;
        /* Every name the guard keys on is matched whatever its case: on a
         * case-folding directory git opens .GIT as .git and direnv .ENVRC
         * as .envrc; elsewhere such a name is refused all the same. */
        bool head = false, objects = false, refs = false;
        _cleanup_strv_ char **dotgits = NULL, **protect = NULL, **whole = NULL;
        size_t n_dotgits = 0, n_protect = 0, n_whole = 0;
        struct dirent *de;
        while ((de = readdir(d))) {
                const char *n = de->d_name;
                if (STREQ(n, ".") || STREQ(n, ".."))
                        continue;
                if (!gitguard_count_entry(g, rel))
                        break;
                if (strcasecmp(n, ".git") == 0) {
                        dotgits = strv_append(dotgits, &n_dotgits, n);
                        /* .git is scanned as git's; another case of it is
                         * walked as well (on a directory that does not
                         * fold case, it is an ordinary one too). */
                        if (STREQ(n, ".git"))
                                continue;
                }
                if (gitguard_protect_match(n))
                        protect = strv_append(protect, &n_protect, n);
                if (gitguard_worktree_read_match(n))
                        whole = strv_append(whole, &n_whole, n);
                if (strcasecmp(n, "HEAD") == 0)
                        head = true;
                /* git tests objects and refs with access(X_OK), which a
                 * symbolic link to a directory, or an executable file,
                 * passes as well: any entry of those names counts. */
                if (strcasecmp(n, "objects") == 0)
                        objects = true;
                if (strcasecmp(n, "refs") == 0)
                        refs = true;
                unsigned char type = de->d_type;
                if (type == DT_UNKNOWN) {
                        struct stat st;
                        if (fstatat(fd, n, &st, AT_SYMLINK_NOFOLLOW) < 0)
                                continue;
                        type = S_ISDIR(st.st_mode) ? DT_DIR : DT_REG;
                }
                if (type != DT_DIR)
                        continue;
                _cleanup_free_ char *r = gitguard_join(rel, n);
                _cleanup_close_ int sfd = gitguard_open_dir(fd, n);
                if (sfd < 0) {
                        if (errno == EACCES && changed_in_run(g, fd, n))
                                gitguard_report(
                                    g, r,
                                    "a directory the scan cannot read: git metadata in it "
                                    "was not checked",
                                    NULL, 0);
                        continue;
                }
                if (mount_key(sfd) != mnt)
                        continue;
                walk(g, sfd, r, mnt, depth + 1);
        }
        closedir(d);
        for (size_t i = 0; i < n_protect; i++)
                gitguard_protect_entry(g, fd, protect[i], rel);
        if (!g->git)
                return;
        for (size_t i = 0; i < n_whole; i++)
                check_worktree_size(g, fd, whole[i], rel);
        for (size_t i = 0; i < n_dotgits; i++)
                scan_dotgit(g, fd, dotgits[i], rel, depth);
        /* A directory git takes for a bare repository when run in it. */
        if (head && (objects || refs))
                scan_gitdir(g, fd, rel, rel, false, depth);
}

/* ---- begin, finish ---- */

static void add_root(struct gitguard *g, const char *path)
{
        if (!path || g->n_roots == ROOTS_MAX)
                return;
        struct root_start *r = &g->roots[g->n_roots++];
        /* Its own path, the host's links resolved (before the sandbox
         * runs): a root given through a link is scanned (it is opened
         * without following one at the end), and the paths a config names
         * are compared with it. */
        char *real = realpath(path, NULL);
        r->path = real ? real : xstrdup(path);
        _cleanup_close_ int fd = open(path, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
        struct stat st;
        if (fd < 0 || fstatat(fd, ".git", &st, AT_SYMLINK_NOFOLLOW) < 0)
                return;
        r->had_git = true;
        r->dev = st.st_dev;
        r->ino = st.st_ino;
        r->mode = st.st_mode & S_IFMT;
        size_t len;
        if (S_ISREG(st.st_mode))
                (void)gitguard_read_small(fd, ".git", POINTER_MAX, &r->pointer, &len);
}

static void record_root(const struct gitguard *gg, struct root_start *rs)
{
        _cleanup_close_ int fd = open(rs->path, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
        struct stat st;
        if (fd < 0 || fstat(fd, &st) < 0)
                return;
        struct guard_run *run = xcalloc(1, sizeof(*run));
        *run = (struct guard_run){.record = true,
                                  .git = gg->git,
                                  .start = rs,
                                  .root = rs,
                                  .roots = gg->roots,
                                  .n_roots = gg->n_roots,
                                  .root_fd = fd};
        walk(run, fd, "", mount_key(fd), 0);
        if (gg->git) {
                gitguard_check_enclosing(run);
                gitguard_check_global(run);
        }
        strv_free(run->global_hooks);
        strv_free(run->global_progs);
        free(run);
        gitguard_known_sort(rs);
        gitguard_pdirs_sort(rs);
}

/* The start, on the clock file systems stamp ctimes with: the coarse one
 * (a fine-grained stamp is never earlier). A finer clock runs up to a
 * tick ahead of it, so that what the run (or an accept right after) wrote
 * in its first tick would look older than the start. */
static void started_now(struct gitguard *g)
{
        clock_gettime(CLOCK_REALTIME_COARSE, &g->started);
}

struct gitguard *gitguard_begin(const struct policy *p)
{
        if (!p)
                return NULL;
        struct gitguard *g = xcalloc(1, sizeof(*g));
        g->git = p->protect_git;
        started_now(g);
        if (p->workspace && p->workspace_mode == POLICY_WORKSPACE_RW)
                add_root(g, p->workspace);
        for (size_t i = 0; i < p->n_mounts; i++)
                if (!p->mounts[i].readonly && p->mounts[i].source)
                        add_root(g, p->mounts[i].source);
        if (g->n_roots == 0) {
                free(g);
                return NULL;
        }
        for (size_t i = 0; i < g->n_roots; i++)
                record_root(g, &g->roots[i]);
        return g;
}

struct gitguard *gitguard_add_root(struct gitguard *g, const struct policy *p, const char *path)
{
        if (!p || !path)
                return g;
        if (!g) {
                g = xcalloc(1, sizeof(*g));
                g->git = p->protect_git;
                started_now(g);
        }
        _cleanup_free_ char *real = realpath(path, NULL);
        for (size_t i = 0; i < g->n_roots; i++)
                if (STREQ(g->roots[i].path, real ? real : path))
                        return g; /* noted at its first mount */
        size_t n = g->n_roots;
        add_root(g, path);
        if (g->n_roots > n)
                record_root(g, &g->roots[n]);
        return g;
}

static int finish(struct gitguard *g, struct audit *a, struct guard_audit *lazy, const char *id,
                  gitguard_warn_fn warn, void *userdata)
{
        if (!g)
                return 0;
        int findings = 0;
        for (size_t i = 0; i < g->n_roots; i++) {
                struct root_start *rs = &g->roots[i];
                _cleanup_close_ int fd =
                    open(rs->path, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
                struct stat st;
                if (fd >= 0 && fstat(fd, &st) == 0) {
                        struct guard_run *run = xcalloc(1, sizeof(*run));
                        *run = (struct guard_run){.git = g->git,
                                                  .audit = a,
                                                  .lazy = lazy,
                                                  .id = id,
                                                  .warn = warn,
                                                  .userdata = userdata,
                                                  .root = rs,
                                                  .roots = g->roots,
                                                  .n_roots = g->n_roots,
                                                  .started = &g->started,
                                                  .root_fd = fd};
                        walk(run, fd, "", mount_key(fd), 0);
                        if (g->git) {
                                gitguard_check_enclosing(run);
                                gitguard_check_global(run);
                        }
                        findings += run->findings;
                        strv_free(run->global_hooks);
                        strv_free(run->global_progs);
                        free(run);
                }
        }
        gitguard_discard(g);
        return findings;
}

void gitguard_discard(struct gitguard *g)
{
        if (!g)
                return;
        for (size_t i = 0; i < g->n_roots; i++)
                gitguard_root_free(&g->roots[i]);
        free(g);
}

int gitguard_finish(struct gitguard *g, struct audit *a, const char *id, gitguard_warn_fn warn,
                    void *userdata)
{
        return finish(g, a, NULL, id, warn, userdata);
}

int gitguard_finish_logged(struct gitguard *g, const char *audit_path,
                           const struct audit_options *opt, const char *id, gitguard_warn_fn warn,
                           void *userdata)
{
        struct guard_audit lazy = {.path = audit_path, .opt = opt, .tried = !audit_path};
        int n = finish(g, NULL, &lazy, id, warn, userdata);
        audit_close(lazy.a);
        return n;
}
