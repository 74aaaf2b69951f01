/* SPDX-License-Identifier: Apache-2.0 */
/* linux.cgroupsPath: the container's cgroup where the spec says (cgpath.h). */
#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdio.h>
#include <linux/magic.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/statfs.h>
#include <unistd.h>

#include "cgpath.h"
#include "util.h"

#define CGROUP_FS "/sys/fs/cgroup"

static char *xstrndup(const char *s, size_t n)
{
        char *p = xcalloc(1, n + 1);
        memcpy(p, s, n);
        return p;
}

/* base + the spec's path, one slash between components; "." and ".."
 * components, and a path naming the base itself, are refused. */
static int join_path(const char *base, const char *spec_path, char **ret, struct al_error *err)
{
        size_t cap = strlen(base) + strlen(spec_path) + 2;
        char *out = xcalloc(1, cap);
        size_t len = strlen(base);
        memcpy(out, base, len);
        while (len > 0 && out[len - 1] == '/')
                out[--len] = '\0';
        size_t n_comp = 0;
        for (const char *p = spec_path; *p;) {
                size_t n = strcspn(p, "/");
                if ((n == 1 && p[0] == '.') || (n == 2 && p[0] == '.' && p[1] == '.')) {
                        free(out);
                        return al_error_set_message(
                            err, EINVAL,
                            "linux.cgroupsPath: \"%s\" has a \".\" or \"..\" component", spec_path);
                }
                if (n > 0) {
                        out[len++] = '/';
                        memcpy(out + len, p, n);
                        len += n;
                        out[len] = '\0';
                        n_comp++;
                }
                p += n;
                while (*p == '/')
                        p++;
        }
        if (n_comp == 0) {
                free(out);
                return al_error_set_message(
                    err, EINVAL, "linux.cgroupsPath: \"%s\" names no cgroup of its own", spec_path);
        }
        *ret = out;
        return 0;
}

static char *parent_of(const char *dir)
{
        char *p = xstrdup(dir);
        char *slash = strrchr(p, '/');
        if (slash && slash != p)
                *slash = '\0';
        return p;
}

static int refuse_existing(const char *leaf, struct al_error *err)
{
        struct stat st;
        if (lstat(leaf, &st) == 0)
                return al_error_set_message(err, EEXIST,
                                            "linux.cgroupsPath: %s exists; Airlock makes the "
                                            "container's cgroup and does not join another's",
                                            leaf);
        return 0;
}

/* The leaf's parent, when it exists, holds no processes (besides the
 * runtime's own cgroup, `home`, and the hierarchy's root `hroot`): one that
 * does is another container's or a service's, whose limits, freezer and
 * removal the leaf would share. */
static int refuse_busy_parent(const char *leaf, const char *home, const char *hroot,
                              struct al_error *err)
{
        _cleanup_free_ char *parent = parent_of(leaf);
        if (STREQ(parent, home) || STREQ(parent, hroot))
                return 0;
        _cleanup_free_ char *procs = xasprintf("%s/cgroup.procs", parent);
        _cleanup_free_ char *s = NULL;
        if (read_file_at(AT_FDCWD, procs, 1 << 20, &s, NULL) < 0)
                return 0; /* not there yet: made here */
        if (s[strspn(s, " \n")] != '\0')
                return al_error_set_message(err, EBUSY,
                                            "linux.cgroupsPath: %s holds processes (another "
                                            "container's cgroup, or a service's); Airlock puts "
                                            "a container's cgroup only beneath one with none",
                                            parent);
        return 0;
}

/* mkdir -p of the directories between `base` (which exists) and `dir`,
 * `dir` included; each new one goes through `made`. `leaf`: `dir` itself
 * must be new (made here, not one that appeared since it was checked). */
static int make_below(const char *base, const char *dir, bool leaf,
                      void (*made)(const char *, void *), void *data, struct al_error *err)
{
        size_t blen = strlen(base);
        _cleanup_free_ char *path = xstrdup(dir);
        for (char *p = path + blen; p && *p;) {
                char *slash = strchr(p + 1, '/');
                if (slash)
                        *slash = '\0';
                if (mkdir(path, 0755) == 0) {
                        if (made)
                                made(path, data);
                } else if (errno != EEXIST || (leaf && !slash)) {
                        return al_error_set(err, errno, "linux.cgroupsPath: creating %s", path);
                }
                if (!slash)
                        break;
                *slash = '/';
                p = slash;
        }
        return 0;
}

/* ---- v2 ---- */

struct v2_made {
        bool fake;
};

/* A fake hierarchy shows a new directory's controllers as the kernel
 * would: those its parent has. */
static void v2_fake_made(const char *dir, void *data)
{
        const struct v2_made *m = data;
        if (!m->fake)
                return;
        _cleanup_free_ char *parent = parent_of(dir);
        _cleanup_free_ char *src = xasprintf("%s/cgroup.controllers", parent);
        _cleanup_free_ char *dst = xasprintf("%s/cgroup.controllers", dir);
        _cleanup_free_ char *s = NULL;
        _cleanup_close_ int fd = open(dst, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
        if (fd >= 0 && read_file_at(AT_FDCWD, src, 4096, &s, NULL) >= 0)
                (void)write_full(fd, s, strlen(s));
}

/* Let `dir`'s children use the controllers the leaf needs (those `dir`
 * has; the leaf's own parent is checked by the library's create, which
 * names what is missing). */
static int v2_enable(const char *dir, bool fake, bool io, struct al_error *err)
{
        _cleanup_free_ char *ctl = xasprintf("%s/cgroup.controllers", dir);
        _cleanup_free_ char *avail = NULL;
        int r = read_file_at(AT_FDCWD, ctl, 4096, &avail, NULL);
        if (r < 0)
                return al_error_set(err, -r, "linux.cgroupsPath: reading %s", ctl);
        static const char *const want[] = {"memory", "pids", "cpu", "io"};
        _cleanup_free_ char *line = xstrdup("");
        for (size_t i = 0; i < ARRAY_SIZE(want) - !io; i++) {
                size_t n = strlen(want[i]);
                bool has = false;
                for (const char *p = avail; (p = strstr(p, want[i])); p += n)
                        if ((p == avail || p[-1] == ' ') &&
                            (p[n] == '\0' || p[n] == ' ' || p[n] == '\n'))
                                has = true;
                if (!has)
                        continue;
                char *next = xasprintf("%s%s+%s", line, *line ? " " : "", want[i]);
                free(line);
                line = next;
        }
        if (!*line)
                return 0;
        _cleanup_free_ char *sub = xasprintf("%s/cgroup.subtree_control", dir);
        int flags = O_WRONLY | O_CLOEXEC | (fake ? O_CREAT | O_TRUNC : 0);
        _cleanup_close_ int fd = open(sub, flags, 0644);
        if (fd < 0 || write_full(fd, line, strlen(line)) < 0)
                return al_error_set(err, errno,
                                    "linux.cgroupsPath: enabling %s in %s (it holds processes, "
                                    "or the controllers are not delegated)",
                                    line, dir);
        return 0;
}

int rt_cgpath_setup_v2(const char *root, const char *own, const char *spec_path,
                       const struct cgroup_limits *l, bool fake, struct rt_cgpath *ret,
                       struct al_error *err)
{
        _cleanup_free_ char *home = NULL;
        int r = join_path(root, STREQ(own, "/") ? "" : own, &home, NULL);
        if (r < 0)
                home = xstrdup(root);
        const char *base = spec_path[0] == '/' ? root : home;
        _cleanup_free_ char *leaf = NULL;
        r = join_path(base, spec_path, &leaf, err);
        if (r < 0)
                return r;
        r = refuse_existing(leaf, err);
        if (r >= 0)
                r = refuse_busy_parent(leaf, home, root, err);
        if (r < 0)
                return r;
        _cleanup_free_ char *parent = parent_of(leaf);
        struct v2_made m = {.fake = fake};
        if (strlen(parent) > strlen(base)) {
                r = make_below(base, parent, false, v2_fake_made, &m, err);
                if (r < 0)
                        return r;
        }
        /* Every level from the base down to the leaf's grandparent hands
         * the controllers down; the library does the leaf's parent. */
        _cleanup_free_ char *walk = xstrdup(base);
        while (strlen(walk) < strlen(parent)) {
                r = v2_enable(walk, fake, cgroup_io_limited(l), err);
                if (r < 0)
                        return r;
                const char *next = strchr(parent + strlen(walk) + 1, '/');
                free(walk);
                walk = next ? xstrndup(parent, (size_t)(next - parent)) : xstrdup(parent);
        }
        struct cgroup *cg = NULL;
        r = cgroup_v2_new(parent, strrchr(leaf, '/') + 1, fake, &cg);
        if (r < 0)
                return al_error_set(err, -r, "linux.cgroupsPath");
        cg->limits = *l;
        r = cgroup_realize(cg, err);
        if (r < 0) {
                cgroup_free(cg);
                return al_error_wrap(err, "linux.cgroupsPath %s", spec_path);
        }
        size_t n = 0;
        *ret = (struct rt_cgpath){.cg = cg, .v2 = true};
        ret->leaves = strv_append(NULL, &n, leaf);
        n = 0;
        ret->home = strv_append(NULL, &n, home);
        return 0;
}

/* ---- v1 ---- */

struct v1_hier {
        char *ctrls; /* "cpu,cpuacct", "name=systemd" */
        char *own;   /* the runtime's path in it */
        char *mnt;   /* where it is mounted */
};

static bool has_token(const char *list, const char *tok)
{
        size_t n = strlen(tok);
        for (const char *p = list; p && *p;) {
                size_t len = strcspn(p, ",");
                if (len == n && strncmp(p, tok, n) == 0)
                        return true;
                p += len;
                if (*p == ',')
                        p++;
        }
        return false;
}

/* The mount point of the v1 hierarchy whose first controller is that of
 * `ctrls`, from mountinfo: "... mountpoint opts - cgroup src superopts". */
static char *v1_mount_of(const char *mountinfo, const char *ctrls)
{
        _cleanup_free_ char *first = xstrndup(ctrls, strcspn(ctrls, ","));
        for (const char *line = mountinfo; line && *line;) {
                const char *nl = strchr(line, '\n');
                _cleanup_free_ char *l = nl ? xstrndup(line, (size_t)(nl - line)) : xstrdup(line);
                line = nl ? nl + 1 : NULL;
                char *sep = strstr(l, " - cgroup ");
                if (!sep)
                        continue;
                char *super = strrchr(sep, ' ');
                if (!super || !has_token(super + 1, first))
                        continue;
                /* The 4th field is the root within the hierarchy: only a
                 * mount of its root names paths as /proc/self/cgroup does. */
                char *f[5] = {0};
                char *save = NULL;
                *sep = '\0';
                for (int i = 0; i < 5; i++)
                        f[i] = strtok_r(i ? NULL : l, " ", &save);
                if (f[3] && f[4] && STREQ(f[3], "/"))
                        return xstrdup(f[4]);
        }
        return NULL;
}

static bool v1_limits_hier(const char *ctrls)
{
        static const char *const lim[] = {"memory", "pids", "cpu", "cpuacct", "freezer", "blkio"};
        for (size_t i = 0; i < ARRAY_SIZE(lim); i++)
                if (has_token(ctrls, lim[i]))
                        return true;
        return false;
}

/* A new cpuset cgroup has no cpus or memory nodes until given its
 * parent's. */
static void v1_cpuset_made(const char *dir, void *data)
{
        (void)data;
        _cleanup_free_ char *parent = parent_of(dir);
        static const char *const files[] = {"cpuset.cpus", "cpuset.mems"};
        for (size_t i = 0; i < ARRAY_SIZE(files); i++) {
                _cleanup_free_ char *src = xasprintf("%s/%s", parent, files[i]);
                _cleanup_free_ char *dst = xasprintf("%s/%s", dir, files[i]);
                _cleanup_free_ char *s = NULL;
                if (read_file_at(AT_FDCWD, src, 4096, &s, NULL) >= 0)
                        (void)write_file_at(AT_FDCWD, dst, s);
        }
}

static void hier_free(struct v1_hier *h, size_t n)
{
        for (size_t i = 0; i < n; i++) {
                free(h[i].ctrls);
                free(h[i].own);
                free(h[i].mnt);
        }
}

enum { V1_HIER_MAX = 16 };

static int setup_v1(const char *spec_path, const struct cgroup_limits *l, struct rt_cgpath *ret,
                    struct al_error *err)
{
        _cleanup_free_ char *self = NULL, *mountinfo = NULL;
        int r = read_file_at(AT_FDCWD, "/proc/self/cgroup", 1 << 20, &self, NULL);
        if (r >= 0)
                r = read_file_at(AT_FDCWD, "/proc/self/mountinfo", 4 << 20, &mountinfo, NULL);
        if (r < 0)
                return al_error_set(err, -r, "linux.cgroupsPath: reading /proc/self");
        struct v1_hier h[V1_HIER_MAX];
        size_t n = 0;
        for (char *line = self; line && *line && n < V1_HIER_MAX;) {
                char *nl = strchr(line, '\n');
                if (nl)
                        *nl = '\0';
                char *c1 = strchr(line, ':');
                char *c2 = c1 ? strchr(c1 + 1, ':') : NULL;
                if (c1 && c2 && c2 > c1 + 1) {
                        *c2 = '\0';
                        char *mnt = v1_mount_of(mountinfo, c1 + 1);
                        if (mnt)
                                h[n++] = (struct v1_hier){
                                    .ctrls = xstrdup(c1 + 1), .own = xstrdup(c2 + 1), .mnt = mnt};
                }
                line = nl ? nl + 1 : NULL;
        }
        char *lparents[CGROUP_V1_MAX];
        size_t n_lim = 0, n_leaves = 0, n_home = 0;
        char **leaves = NULL, **home = NULL;
        _cleanup_free_ char *leaf_name = NULL;
        r = 0;
        for (size_t i = 0; i < n && r >= 0; i++) {
                _cleanup_free_ char *own = NULL, *leaf = NULL;
                if (join_path(h[i].mnt, h[i].own, &own, NULL) < 0)
                        own = xstrdup(h[i].mnt);
                r = join_path(spec_path[0] == '/' ? h[i].mnt : own, spec_path, &leaf, err);
                if (r >= 0)
                        r = refuse_existing(leaf, err);
                if (r >= 0)
                        r = refuse_busy_parent(leaf, own, h[i].mnt, err);
                if (r < 0)
                        break;
                if (!leaf_name)
                        leaf_name = xstrdup(strrchr(leaf, '/') + 1);
                bool cpuset = has_token(h[i].ctrls, "cpuset");
                bool lim = v1_limits_hier(h[i].ctrls) && n_lim < CGROUP_V1_MAX;
                /* The limits' hierarchies get their leaf from the library;
                 * the others get it here. */
                _cleanup_free_ char *parent = parent_of(leaf);
                r = make_below(spec_path[0] == '/' ? h[i].mnt : own, lim ? parent : leaf, !lim,
                               cpuset ? v1_cpuset_made : NULL, NULL, err);
                if (r < 0)
                        break;
                if (lim)
                        lparents[n_lim++] = TAKE_PTR(parent);
                leaves = strv_append(leaves, &n_leaves, leaf);
                home = strv_append(home, &n_home, own);
        }
        hier_free(h, n);
        struct cgroup *cg = NULL;
        if (r >= 0 && n_lim == 0)
                r = al_error_set_message(err, EOPNOTSUPP,
                                         "linux.cgroupsPath: no cgroup v1 hierarchy with the "
                                         "memory, pids or cpu controller is mounted");
        if (r >= 0) {
                r = cgroup_v1_new(lparents, n_lim, leaf_name, false, &cg);
                if (r < 0)
                        al_error_set(err, -r, "linux.cgroupsPath");
        }
        for (size_t i = 0; i < n_lim; i++)
                free(lparents[i]);
        if (r >= 0) {
                cg->limits = *l;
                r = cgroup_realize(cg, err);
                if (r < 0)
                        cg = cgroup_free(cg);
        }
        if (r < 0) {
                /* The leaves made here go again (the library's are gone). */
                (void)rt_cgpath_reclaim(leaves, NULL, false);
                strv_free(leaves);
                strv_free(home);
                return r;
        }
        *ret = (struct rt_cgpath){.cg = cg, .leaves = leaves, .home = home};
        return 0;
}

int rt_cgpath_setup(const char *spec_path, const struct cgroup_limits *l, struct rt_cgpath *ret,
                    struct al_error *err)
{
        struct statfs sfs;
        if (statfs(CGROUP_FS, &sfs) < 0)
                return al_error_set(err, errno, "linux.cgroupsPath: %s", CGROUP_FS);
        if (sfs.f_type != CGROUP2_SUPER_MAGIC)
                return setup_v1(spec_path, l, ret, err);
        _cleanup_free_ char *self = NULL;
        int r = read_file_at(AT_FDCWD, "/proc/self/cgroup", 1 << 20, &self, NULL);
        if (r < 0)
                return al_error_set(err, -r, "linux.cgroupsPath: reading /proc/self/cgroup");
        const char *own = strstr(self, "0::");
        if (!own || (own != self && own[-1] != '\n'))
                return al_error_set_message(err, ENOENT,
                                            "linux.cgroupsPath: no cgroup v2 line in "
                                            "/proc/self/cgroup");
        _cleanup_free_ char *path = xstrndup(own + 3, strcspn(own + 3, "\n"));
        return rt_cgpath_setup_v2(CGROUP_FS, path, spec_path, l, false, ret, err);
}

int rt_cgpath_enter(const struct rt_cgpath *c, pid_t pid, struct al_error *err)
{
        char buf[32];
        snprintf(buf, sizeof(buf), "%d", (int)pid);
        for (size_t i = 0; c->leaves && c->leaves[i]; i++) {
                _cleanup_free_ char *procs = xasprintf("%s/cgroup.procs", c->leaves[i]);
                int r = write_file_at(AT_FDCWD, procs, buf);
                if (r < 0)
                        return al_error_set(err, -r, "linux.cgroupsPath: moving %d into %s",
                                            (int)pid, c->leaves[i]);
        }
        return 0;
}

void rt_cgpath_leave(const struct rt_cgpath *c)
{
        char buf[32];
        snprintf(buf, sizeof(buf), "%d", (int)getpid());
        for (size_t i = 0; c->home && c->home[i]; i++) {
                _cleanup_free_ char *procs = xasprintf("%s/cgroup.procs", c->home[i]);
                (void)write_file_at(AT_FDCWD, procs, buf);
        }
}

void rt_cgpath_free(struct rt_cgpath *c)
{
        /* The library's leaves first (with its freezer thawed), then the
         * rest: every one emptied and removed. */
        c->cg = cgroup_free(c->cg);
        (void)rt_cgpath_reclaim(c->leaves, NULL, c->v2);
        strv_free(c->leaves);
        strv_free(c->home);
        c->leaves = c->home = NULL;
}

/* Beneath /sys/fs/cgroup/, no "." or ".." component, and not a
 * hierarchy's root (its parent is another file system). */
static bool reclaimable(const char *dir)
{
        static const char root[] = CGROUP_FS "/";
        if (strncmp(dir, root, sizeof(root) - 1) != 0 || strstr(dir, "/../") ||
            strstr(dir, "/./") || strstr(dir, "//"))
                return false;
        size_t n = strlen(dir);
        if (dir[n - 1] == '/' || (n >= 3 && STREQ(dir + n - 3, "/..")) ||
            (n >= 2 && STREQ(dir + n - 2, "/.")))
                return false;
        _cleanup_free_ char *parent = parent_of(dir);
        struct stat a, b;
        if (lstat(dir, &a) < 0 || lstat(parent, &b) < 0)
                return false;
        return S_ISDIR(a.st_mode) && a.st_dev == b.st_dev;
}

char *rt_cgpath_id(const char *dir)
{
        struct stat st;
        if (lstat(dir, &st) < 0 || !S_ISDIR(st.st_mode))
                return NULL;
        return xasprintf("%llu:%llu", (unsigned long long)st.st_dev, (unsigned long long)st.st_ino);
}

static bool same_id(const struct stat *st, const char *id)
{
        char now[64];
        snprintf(now, sizeof(now), "%llu:%llu", (unsigned long long)st->st_dev,
                 (unsigned long long)st->st_ino);
        return S_ISDIR(st->st_mode) && STREQ(now, id);
}

static void write_at(int dir, const char *file, const char *value)
{
        _cleanup_close_ int fd = openat(dir, file, O_WRONLY | O_CLOEXEC);
        if (fd >= 0)
                (void)write_full(fd, value, strlen(value));
}

/* A leaf made by create, reclaimed by delete: opened once beneath its
 * parent and its identity checked on that open directory, then thawed and
 * emptied through it, so that a cgroup swapped in at the same path after
 * the check is never signalled (checking the path, then killing by path,
 * let a swap in between kill another container's processes). Its removal
 * re-checks the name just before the rmdir; a cgroup swapped in between
 * those two that holds processes cannot be removed (the kernel refuses a
 * populated cgroup). 0: gone or not ours; -EBUSY: still there. */
static int reclaim_checked(const char *leaf, const char *id)
{
        _cleanup_free_ char *parent = parent_of(leaf);
        const char *name = strrchr(leaf, '/') + 1;
        _cleanup_close_ int pfd = open(parent, O_PATH | O_DIRECTORY | O_CLOEXEC);
        if (pfd < 0)
                return 0;
        _cleanup_close_ int fd = openat(pfd, name, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
        struct stat st;
        if (fd < 0 || fstat(fd, &st) < 0 || !same_id(&st, id))
                return 0;
        /* cgroup v2 kills the leaf and what is beneath it at once; v1 has
         * no cgroup.kill: its members are signalled as listed, after the
         * freezer lets them run to die. */
        write_at(fd, "cgroup.kill", "1");
        write_at(fd, "cgroup.freeze", "0");
        write_at(fd, "freezer.state", "THAWED");
        for (int round = 0; round < 100; round++) {
                _cleanup_free_ char *procs = NULL;
                if (read_file_at(fd, "cgroup.procs", 1 << 20, &procs, NULL) < 0 || !procs[0])
                        break;
                for (char *p = procs; *p;) {
                        char *nl = strchr(p, '\n');
                        if (nl)
                                *nl = '\0';
                        int pid;
                        if (safe_atoi(p, &pid) == 0 && pid > 1)
                                (void)kill(pid, SIGKILL);
                        if (!nl)
                                break;
                        p = nl + 1;
                }
                usleep(2000);
        }
        for (int i = 0; i < 250; i++) {
                struct stat now;
                if (fstatat(pfd, name, &now, AT_SYMLINK_NOFOLLOW) < 0 || now.st_ino != st.st_ino ||
                    now.st_dev != st.st_dev)
                        return 0; /* gone, or another's now */
                if (unlinkat(pfd, name, AT_REMOVEDIR) == 0 || errno == ENOENT)
                        return 0;
                if (errno != EBUSY)
                        break;
                usleep(2000);
        }
        return -EBUSY;
}

int rt_cgpath_reclaim(char *const *leaves, char *const *ids, bool v2)
{
        int ret = 0;
        size_t n_ids = 0;
        while (ids && ids[n_ids])
                n_ids++;
        for (size_t i = 0; leaves && leaves[i]; i++) {
                if (access(leaves[i], F_OK) < 0 || !reclaimable(leaves[i]))
                        continue;
                if (ids) {
                        /* Another container's cgroup at the same path is not ours. */
                        if (i < n_ids && reclaim_checked(leaves[i], ids[i]) == -EBUSY)
                                ret = -EBUSY;
                        continue;
                }
                _cleanup_free_ char *parent = parent_of(leaves[i]);
                char *parents[1] = {parent};
                const char *name = strrchr(leaves[i], '/') + 1;
                struct cgroup *cg = NULL;
                if ((v2 ? cgroup_v2_new(parent, name, false, &cg)
                        : cgroup_v1_new(parents, 1, name, false, &cg)) < 0)
                        continue;
                cg->created = true;
                cgroup_free(cg); /* kills what is left, removes the leaf */
                if (access(leaves[i], F_OK) == 0)
                        ret = -EBUSY;
        }
        return ret;
}
