/* SPDX-License-Identifier: Apache-2.0 */
#include <dirent.h>
#include <fcntl.h>
#include <glob.h>
#include <inttypes.h>
#include <limits.h>
#include <linux/openat2.h>
#include <stdio.h>
#include <string.h>
#include <sys/mount.h>
#include <sys/stat.h>
#include <sys/syscall.h>

#include "fs.h"
#include "mounts.h"
#include "paths.h"
#include "realcache.h"
#include "util.h"
#include "mounts-internal.h"

/* The mask for one denied path: an empty tmpfs over a directory (made
 * read-only once allowRead entries are bound into it), /dev/null over
 * anything else. */
int mounts_make_mask(bool dir, int devnull)
{
        if (dir) {
                const char *opts[] = {"size", "4k", "mode", "0755", NULL};
                return mounts_new_fs("tmpfs", opts,
                                     MOUNT_ATTR_NOSUID | MOUNT_ATTR_NODEV | MOUNT_ATTR_NOEXEC);
        }
        int mnt = open_tree(devnull, "", OPEN_TREE_CLONE | OPEN_TREE_CLOEXEC | AT_EMPTY_PATH);
        if (mnt < 0)
                return -errno;
        if (mounts_set_attr(mnt, MOUNT_ATTR_RDONLY | MOUNT_ATTR_NOSUID | MOUNT_ATTR_NOEXEC, false) <
            0) {
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
                if (!mounts_path_under(a, host) || STREQ(a, host))
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
                            mounts_open_in_root(b, b->allowed_at[i], O_PATH | O_NOFOLLOW);
                        src = at < 0 ? at
                                     : open_tree(at, "",
                                                 OPEN_TREE_CLONE | OPEN_TREE_CLOEXEC |
                                                     AT_EMPTY_PATH | AT_RECURSIVE);
                        if (at >= 0 && src < 0)
                                src = -errno;
                } else {
                        _cleanup_close_ int fd = open(a, O_PATH | O_NOFOLLOW | O_CLOEXEC);
                        if (fd >= 0)
                                src = mounts_clone_tree(fd, MOUNT_ATTR_RDONLY | MOUNT_ATTR_NOSUID |
                                                                MOUNT_ATTR_NODEV);
                        else
                                src = -errno;
                }
                if (src < 0)
                        return al_error_set(b->err, -src, "showing the allowRead entry %s at %s", a,
                                            t);
                if (mounts_set_attr(src, MOUNT_ATTR_RDONLY | MOUNT_ATTR_NOSUID | MOUNT_ATTR_NODEV,
                                    true) < 0)
                        return al_error_set(b->err, errno, "showing the allowRead entry %s", a);
                struct stat st;
                if (fstat(src, &st) < 0)
                        return al_error_set(b->err, errno, "showing the allowRead entry %s", a);
                int r = mounts_attach(b, src, t, !S_ISDIR(st.st_mode));
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
                if (mounts_path_under(plan->allow_read[i], host) &&
                    !STREQ(plan->allow_read[i], host))
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
int mounts_apply_masks(struct builder *b, int devnull)
{
        for (size_t i = 0; i < b->n_deny; i++) {
                mode_t mode = b->deny_mode ? b->deny_mode[i] : 0;
                bool missing = (mode == 0);
                bool dir = missing ? (b->deny_dir && b->deny_dir[i]) : S_ISDIR(mode);
                for (size_t m = 0; m < b->n_maps; m++) {
                        if (!mounts_path_under(b->deny[i], b->maps[m].host))
                                continue;
                        if (missing && !b->maps[m].writable)
                                continue;
                        const char *rest = b->deny[i] + strlen(b->maps[m].host);
                        if (STREQ(b->maps[m].host, "/"))
                                rest = b->deny[i];
                        _cleanup_free_ char *target = xasprintf("%s%s", b->maps[m].target, rest);
                        if (missing) {
                                int r = mounts_make_target(b, target, !dir);
                                if (r == -EACCES || r == -EPERM || r == -EROFS || r == -ENOTDIR)
                                        continue; /* the agent cannot create it either */
                                if (r < 0)
                                        return al_error_set(b->err, r, "masking %s", target);
                                if (dir) {
                                        _cleanup_close_ int dfd = mounts_open_in_root(
                                            b, target, O_RDONLY | O_DIRECTORY | O_NOFOLLOW);
                                        if (dfd >= 0)
                                                (void)fchmod(dfd, 0700);
                                }
                        }
                        _cleanup_close_ int tfd =
                            mounts_open_in_root(b, target, O_PATH | O_NOFOLLOW);
                        if (tfd < 0) {
                                if (tfd == -ENOENT || tfd == -EACCES || tfd == -ENOTDIR)
                                        continue; /* not reachable inside */
                                return al_error_set(b->err, tfd, "masking %s", target);
                        }
                        _cleanup_close_ int mnt = mounts_make_mask(dir, devnull);
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
                                if (mounts_set_attr(mnt,
                                                    MOUNT_ATTR_RDONLY | MOUNT_ATTR_NOSUID |
                                                        MOUNT_ATTR_NODEV | MOUNT_ATTR_NOEXEC,
                                                    false) < 0)
                                        return al_error_set(b->err, errno, "masking %s", target);
                        }
                }
        }
        return 0;
}

/* The parent's side: everything the sandbox must not see or change is
 * resolved here, before the sandbox starts, with the caller's own view of
 * the host. The sandbox user (an unprivileged uid when root starts it) may
 * see less than the caller: an entry it could not resolve must not be
 * skipped on that account, or a 0700 home's .ssh would show through an
 * idmapped workspace (issue 10, item 4). */

void mounts_plan_add_deny(struct mounts_plan *plan, const char *real, mode_t mode, bool dir)
{
        plan->deny = strv_append(plan->deny, &plan->n_deny, real);
        plan->deny_mode = xrealloc(plan->deny_mode, plan->n_deny, sizeof(*plan->deny_mode));
        plan->deny_dir = xrealloc(plan->deny_dir, plan->n_deny, sizeof(*plan->deny_dir));
        plan->deny_mode[plan->n_deny - 1] = mode;
        plan->deny_dir[plan->n_deny - 1] = dir;
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
static int real_missing(struct realcache *rc, const char *path, char real[PATH_MAX])
{
        char buf[PATH_MAX];
        size_t plen = strlen(path);
        if (plen >= sizeof(buf))
                return -ENAMETOOLONG;
        memcpy(buf, path, plen + 1);
        for (;;) {
                char *slash = strrchr(buf, '/');
                if (!slash || slash == buf)
                        break;
                *slash = '\0';
                char anc[PATH_MAX];
                int rr = realcache_resolve(rc, buf, anc);
                if (rr == 0) {
                        const char *rest = path + (slash - buf);
                        size_t alen = STREQ(anc, "/") ? 0 : strlen(anc), rlen = strlen(rest);
                        if (alen + rlen >= PATH_MAX)
                                return -ENAMETOOLONG;
                        memcpy(real, anc, alen);
                        memcpy(real + alen, rest, rlen + 1);
                        return 0;
                }
                if (rr != -ENOENT && rr != -ENOTDIR)
                        return rr;
        }
        memcpy(real, path, plen + 1);
        return 0;
}

/* Resolve one deny entry. `may_skip_eacces`: a mandatory entry in someone
 * else's home that the caller cannot reach. The sandbox never has more
 * rights than its caller (rootless: the same uid and groups; root: an
 * unprivileged uid without groups, and root itself is refused nothing
 * unless it lacks its privileges too, as on a root-squashed share), so it
 * cannot reach it either. What the user named, and the caller's own home,
 * are never skipped. */
static int resolve_deny(struct mounts_plan *plan, struct realcache *rc, const char *path, bool dir,
                        bool may_skip_eacces, struct al_error *err)
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
                        int rr = realcache_resolve_stat(rc, g.gl_pathv[j], real, &st);
                        if (rr < 0) {
                                int e = -rr;
                                if (e == ENOENT)
                                        continue;
                                globfree(&g);
                                return al_error_set(err, e,
                                                    "the deny entry %s (%s) cannot be resolved",
                                                    path, g.gl_pathv[j]);
                        }
                        mounts_plan_add_deny(plan, real, st.st_mode & S_IFMT, false);
                }
                globfree(&g);
                return 0;
        }
        int rr = realcache_resolve_stat(rc, path, real, &st);
        if (rr == 0) {
                mounts_plan_add_deny(plan, real, st.st_mode & S_IFMT, dir);
                return 0;
        }
        int e = -rr;
        if (e == ENOENT || e == ENOTDIR) {
                int r = real_missing(rc, path, real);
                if (r == -EACCES && may_skip_eacces)
                        return 0;
                if (r < 0)
                        return al_error_set(err, -r,
                                            "the deny entry %s cannot be resolved with your "
                                            "rights; make its directory readable to you or "
                                            "remove the entry",
                                            path);
                mounts_plan_add_deny(plan, real, 0, dir);
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

/* The home (sixth field) of every line of a passwd file that has one, an
 * absolute path other than "/". Read a line at a time: the C library's
 * reader seeks twice per entry. A line it would refuse (a uid that is no
 * number) still counts: a home too many is only one more mask. */
char **mounts_passwd_homes(FILE *pw, char **homes, size_t *n)
{
        _cleanup_free_ char *line = NULL;
        size_t cap = 0;
        ssize_t len;
        while ((len = getline(&line, &cap, pw)) >= 0) {
                if (len > 0 && line[len - 1] == '\n')
                        line[--len] = '\0';
                char *f = line;
                for (int i = 0; i < 5 && f; i++) {
                        f = strchr(f, ':');
                        if (f)
                                f++;
                }
                if (!f || f[0] != '/')
                        continue;
                size_t dl = strcspn(f, ":");
                if (dl == 1)
                        continue;
                f[dl] = '\0';
                homes = strv_append(homes, n, f);
        }
        return homes;
}

/* Every home a "~/" entry applies to: /root, the caller's, everything in
 * /home, and every home in /etc/passwd. */
char **mounts_list_homes(const char *caller_home, size_t *ret_n)
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
        if (pw)
                homes = mounts_passwd_homes(pw, homes, &n);
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

int mounts_resolve_entry(struct mounts_plan *plan, struct realcache *rc, char *const *homes,
                         size_t n_homes, const char *caller_home, const char *entry,
                         bool user_entry, struct al_error *err)
{
        if (strncmp(entry, "~/", 2) != 0)
                return resolve_deny(plan, rc, entry, !mandatory_is_file(entry) && !user_entry,
                                    false, err);
        const char *rest = entry + 1; /* "/NAME" */
        size_t rlen = strlen(rest);
        bool dir = !mandatory_is_file(entry);
        for (size_t i = 0; i < n_homes; i++) {
                /* HOME/NAME, on the stack but when too long (snprintf and
                 * malloc cost more than the lookup, 160 times a start). */
                char buf[PATH_MAX];
                _cleanup_free_ char *longer = NULL;
                size_t hlen = strlen(homes[i]);
                const char *path = buf;
                if (hlen + rlen < sizeof(buf)) {
                        memcpy(buf, homes[i], hlen);
                        memcpy(buf + hlen, rest, rlen + 1);
                } else
                        path = longer = xasprintf("%s%s", homes[i], rest);
                bool own = caller_home && STREQ(homes[i], caller_home);
                int r = resolve_deny(plan, rc, path, dir, !own && !user_entry, err);
                if (r < 0)
                        return r;
        }
        return 0;
}
