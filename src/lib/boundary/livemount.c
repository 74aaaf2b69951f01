/* SPDX-License-Identifier: Apache-2.0 */
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <linux/openat2.h>
#include <sched.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mount.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include "fs.h"
#include "idrange.h"
#include "mounts.h"
#include "spawn.h"
#include "util.h"
#include "mounts-internal.h"
#include "spawn-internal.h"

/* A host path mounted into a running sandbox, and taken out again
 * (mounts.h, docs/internals/caps.md). The checks are the start's own: the
 * plan (plan.c) resolves the deny list and the source and refuses a source
 * under a denied path; the tree is cloned on the host side with nosuid and
 * nodev (and idmapped like a start mount for a read-write one), always from
 * the one file descriptor the checks looked at, never by its path again;
 * then a child joins the sandbox's mount namespace and moves it in. */

/* The child's own fd directory in the host's /proc, opened before it joins
 * the sandbox's mount namespace (whose /proc does not know it). */
static int child_fd_dir = -1;

/* Detach the mount whose root `fd` holds, by the mount itself, never by a
 * path: the sandbox may have moved a directory above it and put a link in
 * its place, and a path would then name another mount (a mask, say). */
static int umount_fd(int fd)
{
        char name[32];
        snprintf(name, sizeof(name), "%d", fd);
        if (fchdir(child_fd_dir) < 0)
                return -errno;
        return umount2(name, MNT_DETACH) < 0 ? -errno : 0;
}

void mounts_live_clear(struct mounts_live *m)
{
        if (m->tree_fd >= 0)
                close(m->tree_fd);
        for (size_t i = 0; i < m->n_protect; i++) {
                if (m->protect_fds[i] >= 0)
                        close(m->protect_fds[i]);
                free(m->protect_rel[i]);
        }
        free(m->protect_fds);
        free(m->protect_rel);
        *m = (struct mounts_live){.tree_fd = -1};
}

/* The target as the sandbox sees it, from the host: no symbolic link on
 * the way, an existing directory (or file, for a file source). */
static int check_target(pid_t pid1, const char *target, bool dir, struct al_error *err)
{
        char root[64];
        snprintf(root, sizeof(root), "/proc/%d/root", (int)pid1);
        _cleanup_close_ int rfd = open(root, O_PATH | O_DIRECTORY | O_CLOEXEC);
        if (rfd < 0)
                return al_error_set(err, errno, "mount at %s: reaching the sandbox's root", target);
        _cleanup_close_ int t =
            fs_openat2(rfd, target, O_PATH | O_CLOEXEC, 0,
                       RESOLVE_IN_ROOT | RESOLVE_NO_SYMLINKS | RESOLVE_NO_MAGICLINKS);
        if (t == -ELOOP)
                return al_error_set_message(err, ELOOP,
                                            "mount at %s: a symbolic link is on the target's "
                                            "path inside the sandbox; choose a target without one",
                                            target);
        if (t == -ENOENT)
                return al_error_set_message(err, ENOENT,
                                            "mount at %s: no such %s in the sandbox; create it "
                                            "there first (mkdir -p %s)",
                                            target, dir ? "directory" : "file", target);
        if (t < 0)
                return al_error_set(err, t, "mount at %s", target);
        struct stat st;
        if (fstat(t, &st) < 0)
                return al_error_set(err, errno, "mount at %s", target);
        if (dir != !!S_ISDIR(st.st_mode))
                return al_error_set_message(err, EINVAL,
                                            "mount at %s: the source is a %s and the target is "
                                            "not; a directory and a file cannot cover each other",
                                            target, dir ? "directory" : "file");
        return 0;
}

int mounts_live_prepare(const struct mounts_live_request *q, struct mounts_live *ret,
                        struct al_error *err)
{
        *ret = (struct mounts_live){.tree_fd = -1};
        if (geteuid() != 0)
                return al_error_set_message(
                    err, EPERM,
                    "mount %s at %s: mounts are added at run time only by a supervisor running "
                    "as root; this sandbox's (uid %u) has its mounts fixed when it starts",
                    q->source, q->target, (unsigned)geteuid());
        /* No symbolic link anywhere on the source's path: a link swapped in
         * must not redirect the mount (the start refuses one as the last
         * component; here the whole path is checked). */
        _cleanup_close_ int src = fs_openat2(AT_FDCWD, q->source, O_PATH | O_CLOEXEC, 0,
                                             RESOLVE_NO_SYMLINKS | RESOLVE_NO_MAGICLINKS);
        if (src == -ELOOP)
                return al_error_set_message(err, ELOOP,
                                            "mount %s: a symbolic link is on its path; give the "
                                            "real path",
                                            q->source);
        if (src < 0)
                return al_error_set(err, src, "mount %s at %s; give an existing host path",
                                    q->source, q->target);
        struct stat st;
        if (fstat(src, &st) < 0)
                return al_error_set(err, errno, "mount %s", q->source);
        bool dir = S_ISDIR(st.st_mode);
        if (!dir && !S_ISREG(st.st_mode))
                return al_error_set_message(
                    err, EINVAL, "mount %s: neither a directory nor a regular file", q->source);

        /* The start's plan, for this one mount: the deny list resolved
         * with the caller's view, the source resolved and checked against
         * it, the write-protected paths under a writable source. */
        struct policy one = *q->policy;
        struct policy_mount m = {
            .source = (char *)q->source, .target = (char *)q->target, .readonly = q->readonly};
        one.workspace = NULL;
        one.mounts = &m;
        one.n_mounts = 1;
        one.n_allow_read = 0;
        struct mounts_plan *plan = NULL;
        int r = mounts_plan_new(&one, q->caller_home, &plan, err);
        if (r < 0)
                return r;
        const char *real = plan->mount_reals[0];
        /* The plan resolved the path again: it must name what was opened
         * above, without links, or a swap in between would have the deny
         * list checked against one tree and another mounted. */
        char proc[64], opened[PATH_MAX];
        snprintf(proc, sizeof(proc), "/proc/self/fd/%d", src);
        ssize_t n_opened = readlink(proc, opened, sizeof(opened) - 1);
        if (n_opened < 0 || (opened[n_opened] = '\0', !STREQ(opened, real))) {
                r = al_error_set_message(err, EAGAIN,
                                         "mount %s: its path changed while it was checked; "
                                         "give a path nothing else is changing",
                                         q->source);
                goto out;
        }
        for (size_t i = 0; i < plan->n_deny; i++)
                if (mounts_path_under(plan->deny[i], real) &&
                    (plan->deny_mode[i] || !q->readonly)) {
                        r = al_error_set_message(err, EACCES,
                                                 "mount source %s holds the denied path %s; "
                                                 "mount a directory that does not",
                                                 q->source, plan->deny[i]);
                        goto out;
                }

        /* Landlock was fixed when the sandbox started: its processes may
         * write only beneath the paths it listed then. A writable mount
         * elsewhere would be read-only in all but name. */
        if (!q->readonly) {
                const char *w[64];
                struct mounts_config mc = {.policy = q->policy, .home = q->home};
                size_t n = mounts_writable_paths(&mc, w, ARRAY_SIZE(w));
                bool reach = false;
                char list[512] = "";
                size_t o = 0;
                for (size_t i = 0; i < n; i++) {
                        reach = reach || mounts_path_under(q->target, w[i]);
                        int k = snprintf(list + o, sizeof(list) - o, "%s%s", i ? ", " : "", w[i]);
                        if (k > 0 && (size_t)k < sizeof(list) - o)
                                o += (size_t)k;
                }
                if (!reach) {
                        r = al_error_set_message(
                            err, EPERM,
                            "mount %s at %s read-write: the sandbox's Landlock rules, fixed "
                            "when it started, let its processes write only beneath %s; mount it "
                            "read-only, or at a target beneath one of those",
                            q->source, q->target, list);
                        goto out;
                }
        }
        r = check_target(q->pid1, q->target, dir, err);
        if (r < 0)
                goto out;

        const uint64_t attrs = MOUNT_ATTR_NOSUID | MOUNT_ATTR_NODEV;
        if (q->readonly) {
                /* From the fd checked above, never the path again. */
                r = mounts_clone_tree(src, attrs | MOUNT_ATTR_RDONLY);
        } else {
                /* Another inside user ("users") could leave files of its
                 * host id in this tree: the sandbox's range is never to be
                 * handed out again (idrange.c), recorded before it can. */
                r = idrange_retire_kept();
                if (r < 0) {
                        al_error_set(err, r,
                                     "mount %s at %s: recording the sandbox's id range "
                                     "as retired",
                                     q->source, q->target);
                        goto out;
                }
                /* From the fd checked above too: the path opened again
                 * would follow a parent swapped for a link since. */
                r = spawn_prepare_idmapped_fd(src, q->source, q->host_uid, q->host_gid,
                                              &ret->tree_fd, NULL, err);
                if (r >= 0 && ret->tree_fd >= 0 && mounts_set_attr(ret->tree_fd, attrs, true) < 0)
                        r = al_error_set(err, errno, "mount %s", q->source);
                else if (r >= 0 && ret->tree_fd < 0)
                        r = mounts_clone_tree(src, attrs);
        }
        if (r < 0) {
                al_error_set(err, r, "mount %s at %s (the kernel refused to clone it)", q->source,
                             q->target);
                goto out;
        }
        if (ret->tree_fd < 0)
                ret->tree_fd = r;
        r = 0;

        /* A writable tree's write-protected paths (.git/hooks and the
         * like, protect.c) go in read-only on top of it. */
        for (size_t i = 0; !q->readonly && i < plan->n_protect; i++) {
                if (!mounts_path_under(plan->protect[i], real) || STREQ(plan->protect[i], real))
                        continue;
                /* Beneath the tree mounted, without links: the path from
                 * the root would reach another tree after a swap. */
                const char *rel = plan->protect[i] + strlen(real);
                while (*rel == '/')
                        rel++;
                _cleanup_close_ int pf =
                    fs_openat2(src, rel, O_PATH | O_CLOEXEC, 0,
                               RESOLVE_BENEATH | RESOLVE_NO_SYMLINKS | RESOLVE_NO_MAGICLINKS);
                if (pf == -ENOENT)
                        continue; /* gone since the plan looked */
                if (pf < 0) {
                        r = al_error_set(err, pf, "mount %s: protecting %s", q->source,
                                         plan->protect[i]);
                        goto out;
                }
                int c = mounts_clone_tree(pf, attrs | MOUNT_ATTR_RDONLY);
                if (c < 0) {
                        r = al_error_set(err, c, "mount %s: protecting %s", q->source,
                                         plan->protect[i]);
                        goto out;
                }
                ret->protect_fds =
                    xrealloc(ret->protect_fds, ret->n_protect + 1, sizeof(*ret->protect_fds));
                ret->protect_rel =
                    xrealloc(ret->protect_rel, ret->n_protect + 1, sizeof(*ret->protect_rel));
                ret->protect_fds[ret->n_protect] = c;
                ret->protect_rel[ret->n_protect] = xstrdup(plan->protect[i] + strlen(real));
                ret->n_protect++;
        }
out:
        mounts_plan_free(plan, 1);
        if (r < 0)
                mounts_live_clear(ret);
        return r;
}

/* In the child: join the sandbox's mount namespace (its root becomes
 * ours) and do `what`; the errno goes back as the exit status. */
static int in_sandbox(int pidfd, int (*what)(void *), void *arg)
{
        pid_t pid = fork();
        if (pid < 0)
                return -errno;
        if (pid == 0) {
                child_fd_dir = open("/proc/self/fd", O_PATH | O_DIRECTORY | O_CLOEXEC);
                if (child_fd_dir < 0 || setns(pidfd, CLONE_NEWNS) < 0)
                        _exit(errno & 0xff);
                int r = what(arg);
                _exit(r < 0 ? (-r) & 0xff : 0);
        }
        int st;
        while (waitpid(pid, &st, 0) < 0)
                if (errno != EINTR)
                        return -errno;
        if (!WIFEXITED(st))
                return -EIO;
        return -WEXITSTATUS(st);
}

struct attach_args {
        struct mounts_live *m;
        const char *target;
};

static int move_to(int mnt, const char *path)
{
        _cleanup_close_ int t = fs_openat2(AT_FDCWD, path, O_PATH | O_CLOEXEC, 0,
                                           RESOLVE_NO_SYMLINKS | RESOLVE_NO_MAGICLINKS);
        if (t < 0)
                return t;
        if (move_mount(mnt, "", t, "", MOVE_MOUNT_F_EMPTY_PATH | MOVE_MOUNT_T_EMPTY_PATH) < 0)
                return -errno;
        return 0;
}

static int do_attach(void *arg)
{
        struct attach_args *a = arg;
        int r = move_to(a->m->tree_fd, a->target);
        if (r < 0)
                return r;
        for (size_t i = 0; i < a->m->n_protect; i++) {
                char p[PATH_MAX];
                if (snprintf(p, sizeof(p), "%s%s", a->target, a->m->protect_rel[i]) >=
                    (int)sizeof(p))
                        r = -ENAMETOOLONG;
                else
                        r = move_to(a->m->protect_fds[i], p);
                if (r < 0) {
                        /* Not half protected: the whole mount goes again. */
                        umount_fd(a->m->tree_fd);
                        return r;
                }
        }
        return 0;
}

int mounts_live_attach(int pidfd, struct mounts_live *m, const char *target, struct al_error *err)
{
        struct attach_args a = {.m = m, .target = target};
        int r = in_sandbox(pidfd, do_attach, &a);
        if (r < 0)
                return al_error_set(err, r, "mount at %s: moving it into the sandbox", target);
        for (size_t i = 0; i < m->n_protect; i++)
                if (m->protect_fds[i] >= 0) {
                        close(m->protect_fds[i]);
                        m->protect_fds[i] = -1;
                }
        return 0;
}

static int do_detach(void *arg)
{
        return umount_fd(*(int *)arg);
}

int mounts_live_detach(int pidfd, struct mounts_live *m, const char *target, struct al_error *err)
{
        int r = in_sandbox(pidfd, do_detach, &m->tree_fd);
        if (r < 0)
                return al_error_set(err, r, "unmounting %s in the sandbox", target);
        mounts_live_clear(m);
        return 0;
}
