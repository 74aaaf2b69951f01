/* SPDX-License-Identifier: Apache-2.0 */
/* The mount plan, made on the host before the sandbox starts: the
 * workspace checked (never "/", a system directory or a whole home unless
 * the user says so), every host path the policy names resolved and opened
 * for the sandbox, the deny list and the protected paths resolved, the
 * host's service sockets masked. mounts.c builds the root from it. */
#include <dirent.h>
#include <fcntl.h>
#include <glob.h>
#include <inttypes.h>
#include <limits.h>
#include <linux/openat2.h>
#include <pthread.h>
#include <pwd.h>
#include <sched.h>
#include <signal.h>
#include <stdio.h>
#include <string.h>
#include <sys/mount.h>
#include <sys/stat.h>
#include <sys/syscall.h>

#include "fs.h"
#include "mounts.h"
#include "paths.h"
#include "realcache.h"
#include "trace.h"
#include "trusted.h"
#include "util.h"
#include "mounts-internal.h"

/* Host paths that hold Airlock's own state: always hidden. */
static const char *const internal_deny[] = {
    PATHS_STATE_ROOT_SYSTEM,
    "~/" PATHS_STATE_ROOT_HOME,
    PATHS_RUN_ROOT_SYSTEM,
};

/* "/", the system directories and whole homes are not workspaces unless the
 * user says so: `cd / && airlock run` would hand the agent the host. */
static const char *broad_reason_quick(const char *real, const char *caller_home)
{
        static const char *const exact[] = {"/", "/var", "/opt", "/home", "/root", "/tmp"};
        static const char *const trees[] = {"/usr",   "/bin",    "/sbin", "/lib",  "/lib32",
                                            "/lib64", "/libx32", "/etc",  "/boot", "/proc",
                                            "/sys",   "/dev",    "/run"};
        for (size_t i = 0; i < ARRAY_SIZE(trees); i++)
                if (mounts_path_under(real, trees[i]))
                        return "is a system directory";
        for (size_t i = 0; i < ARRAY_SIZE(exact); i++)
                if (STREQ(real, exact[i]))
                        return STREQ(real, "/home")   ? "holds whole homes"
                               : STREQ(real, "/root") ? "is a whole home directory"
                               : STREQ(real, "/tmp")  ? "is shared by every user"
                                                      : "is a system directory";
        char home[PATH_MAX];
        if (caller_home && realpath(caller_home, home) && mounts_path_under(home, real))
                return STREQ(home, real) ? "is a whole home directory" : "holds a whole home";
        return NULL;
}

static const char *broad_reason(struct realcache *rc, const char *real, const char *caller_home)
{
        const char *why = broad_reason_quick(real, caller_home);
        if (why)
                return why;
        char home[PATH_MAX];
        /* A home in /etc/passwd, or a directory that holds one. Homes of
         * "/" are no one's. Read a line at a time (mounts_passwd_homes):
         * the C library's reader seeked twice per entry. */
        _cleanup_fclose_ FILE *pw = fopen("/etc/passwd", "re");
        size_t n = 0;
        _cleanup_strv_ char **homes = pw ? mounts_passwd_homes(pw, NULL, &n) : NULL;
        for (size_t i = 0; i < n; i++)
                if (realcache_resolve(rc, homes[i], home) == 0 && !STREQ(home, "/") &&
                    mounts_path_under(home, real))
                        return STREQ(home, real) ? "is a whole home directory"
                                                 : "holds a whole home";
        return NULL;
}

static int broad_refused(const struct policy *p, const char *real, const char *why,
                         struct al_error *err)
{
        return al_error_set_message(err, EPERM,
                                    "workspace %s %s: the agent would get all of it%s; give a "
                                    "project directory with -w DIR, or pass "
                                    "--allow-broad-workspace (workspace.allowBroad) if you mean it",
                                    real, why,
                                    p->workspace_mode == POLICY_WORKSPACE_RO ? "" : " to write");
}

int mounts_workspace_trusted(const struct policy *p, struct al_error *err)
{
        if (!p->workspace || geteuid() != 0)
                return 0;
        char real[PATH_MAX];
        int fd = trusted_open(p->workspace, trusted_caller(), false, real, "workspace", err);
        if (fd >= 0)
                close(fd);
        return fd == -EPERM ? fd : 0;
}

int mounts_workspace_quick_check(const struct policy *p, const char *caller_home,
                                 struct al_error *err)
{
        int r = mounts_workspace_trusted(p, err);
        if (r < 0)
                return r;
        char real[PATH_MAX];
        if (!p->workspace || p->allow_broad || !realpath(p->workspace, real))
                return 0; /* the plan says why it cannot resolve it */
        /* In full, another user's home too: nothing may read a workspace
         * that is refused (gitguard's snapshot reads it as root). */
        const char *why = broad_reason(NULL, real, caller_home);
        return why ? broad_refused(p, real, why, err) : 0;
}

/* A detached read-only clone of a host tree, made with the caller's view
 * (root: the sandbox user may not be able to reach it, e.g. under /root).
 * -1 when the caller cannot clone trees (rootless: the sandbox then binds
 * the path itself, with the caller's own rights). */
int mounts_open_source(const struct policy *p, int ws_fd, const struct policy_mount *m)
{
        if (!m->in_workspace) {
                int fd = open(m->source, O_PATH | O_NOFOLLOW | O_CLOEXEC);
                return fd < 0 ? -errno : fd;
        }
        if (!p->workspace)
                return -ENOENT;
        _cleanup_close_ int ws = -1;
        if (ws_fd < 0) {
                ws = open(p->workspace, O_PATH | O_DIRECTORY | O_CLOEXEC);
                if (ws < 0)
                        return -errno;
                ws_fd = ws;
        }
        return fs_openat2(ws_fd, m->in_workspace, O_PATH | O_NOFOLLOW | O_CLOEXEC, 0,
                          RESOLVE_BENEATH | RESOLVE_NO_SYMLINKS | RESOLVE_NO_MAGICLINKS);
}

/* A repository's mount source, resolved as mounts_open_source opens it:
 * the real path of what lies beneath the workspace, or -errno. */
static int repo_source_real(const struct policy *p, int ws_fd, const struct policy_mount *m,
                            char real[PATH_MAX], struct al_error *err)
{
        _cleanup_close_ int fd = mounts_open_source(p, ws_fd, m);
        if (fd < 0)
                return al_error_set(err, -fd,
                                    "mount %s at %s: .airlock/isolation.json's source must be "
                                    "reached inside the workspace without symbolic links (has "
                                    "it been replaced since it was checked?)",
                                    m->in_workspace, m->target);
        char proc[64];
        snprintf(proc, sizeof(proc), "/proc/self/fd/%d", fd);
        ssize_t n = readlink(proc, real, PATH_MAX - 1);
        if (n < 0)
                return al_error_set(err, errno, "mount %s at %s", m->in_workspace, m->target);
        real[n] = '\0';
        return 0;
}

static int clone_for_sandbox_fd(int fd, const char *path, bool readonly, struct al_error *err);

static int clone_for_sandbox(const char *path, bool readonly, struct al_error *err)
{
        if (geteuid() != 0)
                return -1;
        _cleanup_close_ int fd = open(path, O_PATH | O_NOFOLLOW | O_CLOEXEC);
        if (fd < 0)
                return al_error_set(err, errno, "mount %s; give an existing host path", path);
        return clone_for_sandbox_fd(fd, path, readonly, err);
}

static int clone_for_sandbox_fd(int fd, const char *path, bool readonly, struct al_error *err)
{
        if (geteuid() != 0)
                return -1;
        struct stat st;
        if (fstat(fd, &st) < 0)
                return al_error_set(err, errno, "mount %s", path);
        if (S_ISLNK(st.st_mode))
                return al_error_set(err, 0, "mount %s: is a symbolic link; give its target", path);
        int mnt = mounts_clone_tree(fd, MOUNT_ATTR_NOSUID | MOUNT_ATTR_NODEV |
                                            (readonly ? MOUNT_ATTR_RDONLY : 0));
        return mnt < 0 ? -1 : mnt;
}

/* Listening unix sockets with a path, from the host's /proc/net/unix: a
 * read-only bind does not stop connect(), so a host service's socket that
 * shows up inside (with `read: host`, or in a workspace) is masked. */
static void add_sockets(struct mounts_plan *plan, struct realcache *rc)
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
                /* realpath() and an lstat of what it names, through the
                 * plan's cache of directories (a readlink per component
                 * was most of this step). */
                if (realcache_resolve_stat(rc, path, real, &st) < 0 || !S_ISSOCK(st.st_mode))
                        continue;
                bool dup = false;
                for (size_t i = plan->internal_hi; i < plan->n_deny && !dup; i++)
                        dup = STREQ(plan->deny[i], real);
                if (!dup) {
                        mounts_plan_add_deny(plan, real, S_IFSOCK, false);
                        n++;
                }
        }
}

/* The deny list into `plan`: the mandatory entries under every home, the
 * internal ones, the user's (deny_read, n_deny_read), and the host's
 * listening sockets. */
static int resolve_deny_list(struct mounts_plan *plan, struct realcache *rc, char *const *deny_read,
                             size_t n_deny_read, const char *caller_home, struct al_error *err)
{
        size_t n_homes = 0;
        _cleanup_strv_ char **homes = mounts_list_homes(caller_home, &n_homes);
        int r = 0;
        for (size_t i = 0; policy_mandatory_deny[i]; i++) {
                r = mounts_resolve_entry(plan, rc, homes, n_homes, caller_home,
                                         policy_mandatory_deny[i], false, err);
                if (r < 0)
                        return r;
        }
        plan->internal_lo = plan->n_deny;
        for (size_t i = 0; i < ARRAY_SIZE(internal_deny); i++) {
                r = mounts_resolve_entry(plan, rc, homes, n_homes, caller_home, internal_deny[i],
                                         false, err);
                if (r < 0)
                        return r;
        }
        plan->internal_hi = plan->n_deny;
        for (size_t i = 0; i < n_deny_read; i++) {
                r = mounts_resolve_entry(plan, rc, homes, n_homes, caller_home, deny_read[i], true,
                                         err);
                if (r < 0) {
                        al_error_wrap(err, "--deny-read/filesystem.denyRead");
                        return r;
                }
        }
        al_trace_mark("plan.deny");
        add_sockets(plan, rc);
        al_trace_mark("plan.sockets");
        return 0;
}

/* The deny list resolved ahead (mounts_deny_ahead()): on a thread of its
 * own, from copies of what it depends on, taken by the plan of the same
 * policy when they are still equal. */
static struct {
        bool started;
        pthread_t thread;
        const struct policy *p;
        char *home;
        char **deny_read;
        size_t n_deny_read;
        struct mounts_plan *part;
        struct realcache *rc;
        int r;
        struct al_error err;
} ahead;

static void *deny_ahead_main(void *arg)
{
        (void)arg;
        ahead.r = resolve_deny_list(ahead.part, ahead.rc, ahead.deny_read, ahead.n_deny_read,
                                    ahead.home, &ahead.err);
        return NULL;
}

void mounts_deny_ahead(const struct policy *p, const char *caller_home)
{
        /* Beside other work only where a second CPU can run it. */
        cpu_set_t set;
        if (ahead.started || sched_getaffinity(0, sizeof(set), &set) < 0 || CPU_COUNT(&set) < 2)
                return;
        ahead.p = p;
        ahead.home = caller_home ? xstrdup(caller_home) : NULL;
        for (size_t i = 0; i < p->n_deny_read; i++)
                ahead.deny_read = strv_append(ahead.deny_read, &ahead.n_deny_read, p->deny_read[i]);
        ahead.part = xcalloc(1, sizeof(*ahead.part));
        ahead.part->workspace_ro_fd = -1;
        ahead.part->workspace_fd = -1;
        ahead.part->tool_bin_fd = -1;
        ahead.rc = realcache_new();
        ahead.err = (struct al_error){0};
        /* Every signal blocked on the thread: they are the main thread's. */
        sigset_t all, old;
        sigfillset(&all);
        pthread_sigmask(SIG_SETMASK, &all, &old);
        ahead.started = pthread_create(&ahead.thread, NULL, deny_ahead_main, NULL) == 0;
        pthread_sigmask(SIG_SETMASK, &old, NULL);
        if (!ahead.started)
                mounts_deny_ahead_end();
}

/* Join the thread; true when its answer is for p and caller_home as they
 * are now (then *plan and *rc take it over; its error, if any, in err). */
static bool deny_ahead_take(const struct policy *p, const char *caller_home,
                            struct mounts_plan *plan, struct realcache **rc, int *r,
                            struct al_error *err)
{
        if (!ahead.started)
                return false;
        pthread_join(ahead.thread, NULL);
        ahead.started = false;
        bool same = ahead.p == p && ahead.n_deny_read == p->n_deny_read &&
                    !!caller_home == !!ahead.home &&
                    (!caller_home || STREQ(caller_home, ahead.home));
        for (size_t i = 0; same && i < p->n_deny_read; i++)
                same = STREQ(p->deny_read[i], ahead.deny_read[i]);
        /* The run made files meanwhile (its record and audit log under the
         * state root, an internal entry; the git snapshot, in a workspace
         * the user's entries may name): a path the thread found missing is
         * masked only on a writable mount, so one of those that is there
         * now is resolved again. The mandatory entries under the homes
         * (most of the list, nearly all missing) are not the run's to
         * make: an lstat of each would cost what the thread saves. */
        struct stat st;
        for (size_t i = ahead.part->internal_lo; same && ahead.r == 0 && i < ahead.part->n_deny;
             i++)
                same = ahead.part->deny_mode[i] || (lstat(ahead.part->deny[i], &st) < 0 &&
                                                    (errno == ENOENT || errno == ENOTDIR));
        if (same) {
                struct mounts_plan *a = ahead.part;
                plan->deny = TAKE_PTR(a->deny);
                plan->deny_mode = TAKE_PTR(a->deny_mode);
                plan->deny_dir = TAKE_PTR(a->deny_dir);
                plan->n_deny = a->n_deny;
                plan->internal_lo = a->internal_lo;
                plan->internal_hi = a->internal_hi;
                a->n_deny = 0;
                *rc = TAKE_PTR(ahead.rc);
                *r = ahead.r;
                if (*r < 0 && err)
                        *err = ahead.err;
        }
        mounts_deny_ahead_end();
        return same;
}

void mounts_deny_ahead_end(void)
{
        if (ahead.started) {
                pthread_join(ahead.thread, NULL);
                ahead.started = false;
        }
        ahead.part = mounts_plan_free(ahead.part, 0);
        ahead.rc = realcache_free(ahead.rc);
        strv_free(ahead.deny_read);
        ahead.deny_read = NULL;
        ahead.n_deny_read = 0;
        free(ahead.home);
        ahead.home = NULL;
        ahead.p = NULL;
}

int mounts_plan_new(const struct policy *p, const char *caller_home, struct mounts_plan **ret,
                    struct al_error *err)
{
        struct mounts_plan *plan = xcalloc(1, sizeof(*plan));
        plan->workspace_ro_fd = -1;
        plan->workspace_fd = -1;
        plan->tool_bin_fd = -1;
        /* The deny entries under every home share their directories:
         * each is resolved once (realcache.h), for this plan only. */
        struct realcache *rc = NULL;
        int r = 0;
        if (!deny_ahead_take(p, caller_home, plan, &rc, &r, err)) {
                rc = realcache_new();
                r = resolve_deny_list(plan, rc, p->deny_read, p->n_deny_read, caller_home, err);
        }
        if (r < 0)
                goto fail;

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
                /* As root, walked by the rule trusted.h gives, and pinned:
                 * the mounts are made from this fd, never the path again. */
                bool found;
                if (geteuid() == 0) {
                        plan->workspace_fd = trusted_open(p->workspace, trusted_caller(), false,
                                                          real, "workspace", err);
                        if (plan->workspace_fd == -EPERM) {
                                r = plan->workspace_fd;
                                plan->workspace_fd = -1;
                                goto fail;
                        }
                        found = plan->workspace_fd >= 0;
                        if (!found) {
                                errno = -plan->workspace_fd;
                                plan->workspace_fd = -1;
                        }
                } else
                        found = realpath(p->workspace, real) != NULL;
                if (!found) {
                        r = al_error_set(err, errno,
                                         "workspace %s; give an existing directory you can read "
                                         "with -w (or workspace.path)",
                                         p->workspace);
                        goto fail;
                }
                const char *why = broad_reason(rc, real, caller_home);
                if (why && !p->allow_broad) {
                        r = broad_refused(p, real, why, err);
                        goto fail;
                }
                plan->workspace_real = xstrdup(real);
                r = mounts_check_not_denied(&b, p->workspace);
                if (r < 0)
                        goto fail;
                if (p->workspace_mode == POLICY_WORKSPACE_RO) {
                        plan->workspace_ro_fd =
                            plan->workspace_fd >= 0
                                ? clone_for_sandbox_fd(plan->workspace_fd, p->workspace, true, err)
                                : clone_for_sandbox(p->workspace, true, err);
                        if (plan->workspace_ro_fd < -1) {
                                r = plan->workspace_ro_fd;
                                goto fail;
                        }
                } else
                        mounts_protect_root(plan, p, real);
        }
        plan->mount_reals = xcalloc(p->n_mounts + 1, sizeof(char *));
        plan->mount_ro_fds = xcalloc(p->n_mounts + 1, sizeof(int));
        for (size_t i = 0; i < p->n_mounts; i++)
                plan->mount_ro_fds[i] = -1;
        for (size_t i = 0; i < p->n_mounts; i++) {
                const struct policy_mount *m = &p->mounts[i];
                if (m->volume)
                        continue; /* Airlock's own state, attached by spawn.c */
                if (m->in_workspace) {
                        r = repo_source_real(p, plan->workspace_fd, m, real, err);
                        if (r < 0)
                                goto fail;
                } else if (!realpath(m->source, real)) {
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
                r = mounts_check_not_denied(&b, m->in_workspace ? real : m->source);
                if (r < 0)
                        goto fail;
                if (m->readonly) {
                        _cleanup_close_ int sfd = -1;
                        if (m->in_workspace && geteuid() == 0) {
                                sfd = mounts_open_source(p, plan->workspace_fd, m);
                                if (sfd < 0) {
                                        r = al_error_set(err, -sfd, "mount %s at %s",
                                                         m->in_workspace, m->target);
                                        goto fail;
                                }
                        }
                        plan->mount_ro_fds[i] =
                            sfd >= 0 ? clone_for_sandbox_fd(sfd, m->source, true, err)
                                     : clone_for_sandbox(m->source, true, err);
                        if (plan->mount_ro_fds[i] < -1) {
                                r = plan->mount_ro_fds[i];
                                plan->mount_ro_fds[i] = -1;
                                goto fail;
                        }
                } else
                        mounts_protect_root(plan, p, real);
        }

        for (size_t i = 0; i < p->n_deny_write; i++) {
                if (!realpath(p->deny_write[i], real)) {
                        r = al_error_set(err, errno,
                                         "filesystem.denyWrite entry %s cannot be resolved; give "
                                         "an existing path you can read, or remove it",
                                         p->deny_write[i]);
                        goto fail;
                }
                mounts_plan_add_protect(plan, real, false);
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
                        if (mounts_path_under(real, plan->deny[j]) ||
                            mounts_path_under(plan->deny[j], real)) {
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
        realcache_free(rc);
        *ret = plan;
        return 0;
fail:
        realcache_free(rc);
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
        if (plan->workspace_fd >= 0)
                close(plan->workspace_fd);
        for (size_t i = 0; plan->mount_reals && i < n_mounts; i++)
                free(plan->mount_reals[i]);
        free(plan->mount_reals);
        for (size_t i = 0; plan->mount_ro_fds && i < n_mounts; i++)
                if (plan->mount_ro_fds[i] >= 0)
                        close(plan->mount_ro_fds[i]);
        free(plan->mount_ro_fds);
        if (plan->tool_bin_fd >= 0)
                close(plan->tool_bin_fd);
        rootdir_free(plan->rootfs);
        free(plan);
        return NULL;
}

int mounts_plan_tool(struct mounts_plan *plan, const char *bin, struct al_error *err)
{
        struct stat st;
        int e = stat(bin, &st) < 0 ? errno : S_ISREG(st.st_mode) ? 0 : EINVAL;
        if (e)
                return al_error_set(err, e,
                                    "the tool gateway's client %s is missing; it is installed "
                                    "beside airlock (make install)",
                                    bin);
        int fd = clone_for_sandbox(bin, true, err);
        if (fd < -1)
                return fd;
        plan->tool_bin_fd = fd;
        return 0;
}

int mounts_plan_rootfs(struct mounts_plan *plan, const char *rootfs, bool readonly,
                       struct al_error *err)
{
        return rootdir_list(rootfs, ROOTDIR_BUNDLE, readonly, &plan->rootfs, err);
}
