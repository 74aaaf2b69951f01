/* SPDX-License-Identifier: Apache-2.0 */
#include <dirent.h>
#include <fcntl.h>
#include <linux/magic.h>
#include <signal.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/statfs.h>
#include <sys/syscall.h>

#include "cgroup.h"
#include "cgroup-internal.h"
#include "util.h"

int cgroup_parse_keyed(const char *content, const char *key, uint64_t *ret)
{
        size_t klen = strlen(key);
        for (const char *line = content; line && *line;) {
                const char *nl = strchr(line, '\n');
                size_t len = nl ? (size_t)(nl - line) : strlen(line);
                if (len > klen && strncmp(line, key, klen) == 0 && line[klen] == ' ') {
                        char num[32];
                        size_t nlen = len - klen - 1;
                        if (nlen == 0 || nlen >= sizeof(num))
                                return -EINVAL;
                        memcpy(num, line + klen + 1, nlen);
                        num[nlen] = '\0';
                        return safe_atou64(num, ret);
                }
                line = nl ? nl + 1 : NULL;
        }
        return -ENOENT;
}

/* A leaf this process holds locked (cgroup_lock_leaves) is open already:
 * its files are looked up in it, not by the whole path. Its descriptor,
 * else -1. */
static int held_leaf(const struct cgroup *cg, const char *dir, const char *file)
{
        for (size_t i = 0; i < cg->n_locks && !strchr(file, '/'); i++)
                if (cg->dirs[i] == dir || STREQ(cg->dirs[i], dir))
                        return cg->locks[i];
        return -1;
}

int cgroup_write(struct cgroup *cg, const char *dir, const char *file, const char *value)
{
        int flags = O_WRONLY | O_CLOEXEC | O_NOCTTY | (cg->fake ? O_CREAT | O_TRUNC : 0);
        int leaf = held_leaf(cg, dir, file);
        _cleanup_free_ char *path = leaf < 0 ? xasprintf("%s/%s", dir, file) : NULL;
        _cleanup_close_ int fd = openat(leaf < 0 ? AT_FDCWD : leaf, path ? path : file, flags, 0644);
        if (fd < 0)
                return -errno;
        return write_full(fd, value, strlen(value));
}

bool cgroup_has(const struct cgroup *cg, const char *dir, const char *file)
{
        int leaf = held_leaf(cg, dir, file);
        if (leaf >= 0)
                return faccessat(leaf, file, F_OK, 0) == 0;
        _cleanup_free_ char *path = xasprintf("%s/%s", dir, file);
        return access(path, F_OK) == 0;
}

int cgroup_read(const struct cgroup *cg, const char *dir, const char *file, size_t max, char **ret)
{
        int leaf = held_leaf(cg, dir, file);
        if (leaf >= 0)
                return read_file_at(leaf, file, max, ret, NULL);
        _cleanup_free_ char *path = xasprintf("%s/%s", dir, file);
        return read_file_at(AT_FDCWD, path, max, ret, NULL);
}

int cgroup_read_u64(const struct cgroup *cg, const char *dir, const char *file, uint64_t *ret)
{
        _cleanup_free_ char *s = NULL;
        int r = cgroup_read(cg, dir, file, 4096, &s);
        if (r < 0)
                return r;
        s[strcspn(s, "\n")] = '\0';
        if (STREQ(s, "max")) {
                *ret = UINT64_MAX;
                return 0;
        }
        return safe_atou64(s, ret);
}

int cgroup_read_keyed(const struct cgroup *cg, const char *dir, const char *file, const char *key,
                      uint64_t *ret)
{
        _cleanup_free_ char *s = NULL;
        int r = cgroup_read(cg, dir, file, 64 * 1024, &s);
        if (r < 0)
                return r;
        return cgroup_parse_keyed(s, key, ret);
}

/* Remove a leaf directory; the kernel refuses with EBUSY while a dying task
 * is still being torn down, so retry for a while. */
int cgroup_rmdir(struct cgroup *cg, const char *dir)
{
        for (int i = 0; i < 500; i++) {
                if (rmdir(dir) == 0 || errno == ENOENT)
                        return 0;
                if (errno != EBUSY)
                        break;
                usleep(2000);
        }
        if (cg->fake) {
                /* A fake hierarchy holds plain files: remove them first. */
                _cleanup_free_ char *cmd = NULL;
                int dfd = open(dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
                if (dfd >= 0) {
                        DIR *d = fdopendir(dfd);
                        struct dirent *de;
                        while (d && (de = readdir(d)))
                                if (de->d_name[0] != '.')
                                        unlinkat(dfd, de->d_name, 0);
                        if (d)
                                closedir(d);
                        else
                                close(dfd);
                }
                if (rmdir(dir) == 0)
                        return 0;
        }
        return -errno;
}

int cgroup_create(struct cgroup *cg, const struct cgroup_limits *l, struct al_error *err)
{
        if (l != &cg->limits)
                cg->limits = *l; /* create() reads which controllers are needed */
        int r = cg->ops->create(cg, err);
        if (r < 0)
                return r;
        cg->created = true;
        r = cgroup_lock_leaves(cg);
        if (r < 0)
                return al_error_set(err, r, "cgroup: locking %s", cg->name);
        return cg->ops->apply(cg, l, err);
}

int cgroup_freeze(struct cgroup *cg, bool frozen)
{
        if (!cg || !cg->created)
                return -ESRCH;
        return cg->ops->freeze(cg, frozen);
}

struct cgroup *cgroup_free(struct cgroup *cg)
{
        if (!cg)
                return NULL;
        (void)cgroup_sweep_now(cg); /* no sandbox started to sweep beside */
        if (cg->created) {
                cg->ops->kill(cg);
                cg->ops->destroy(cg);
        }
        cgroup_unlock_leaves(cg);
        if (cg->dir_fd >= 0)
                close(cg->dir_fd);
        for (size_t i = 0; i < cg->n_dirs; i++)
                free(cg->dirs[i]);
        free(cg->parent_v2);
        free(cg->name);
        free(cg);
        return NULL;
}

static bool reclaimable(const char *dir)
{
        static const char root[] = "/sys/fs/cgroup/";
        if (strncmp(dir, root, sizeof(root) - 1) != 0 || strstr(dir, "/../") ||
            strstr(dir, "/./") || strstr(dir, "//"))
                return false;
        const char *base = strrchr(dir, '/') + 1;
        return strncmp(base, "airlock-", 8) == 0 && strlen(base + 8) == 16 &&
               strspn(base + 8, "0123456789abcdef") == 16;
}

/* SIGKILL every member until the leaf is empty; false when it never was. */
static bool empty_leaf(const char *dir)
{
        _cleanup_free_ char *procs = xasprintf("%s/cgroup.procs", dir);
        for (int round = 0; round < 200; round++) {
                _cleanup_free_ char *s = NULL;
                int r = read_file_at(AT_FDCWD, procs, 1 << 20, &s, NULL);
                if (r == -ENOENT)
                        return true;
                if (r < 0)
                        return false;
                bool any = false;
                for (char *line = s; *line;) {
                        char *nl = strchr(line, '\n');
                        if (nl)
                                *nl = '\0';
                        int pid;
                        if (safe_atoi(line, &pid) >= 0 && pid > 1) {
                                kill(pid, SIGKILL);
                                any = true;
                        }
                        if (!nl)
                                break;
                        line = nl + 1;
                }
                /* A leaf frozen by a stop that did not finish (v1: its
                 * members die only once thawed; v2 lets SIGKILL through). */
                if (any) {
                        struct cgroup cg = {.dir_fd = -1};
                        (void)cgroup_write(&cg, dir, "freezer.state", "THAWED");
                        (void)cgroup_write(&cg, dir, "cgroup.freeze", "0");
                }
                if (!any)
                        return true;
                usleep(10000);
        }
        return false;
}

int cgroup_reclaim(char *const *dirs, size_t n)
{
        int ret = 0;
        for (size_t i = 0; i < n; i++) {
                if (!reclaimable(dirs[i])) {
                        ret = -EINVAL;
                        continue;
                }
                struct cgroup cg = {.dir_fd = -1};
                struct stat st;
                if (lstat(dirs[i], &st) < 0) {
                        if (errno != ENOENT)
                                ret = -errno;
                        continue;
                }
                if (!S_ISDIR(st.st_mode)) {
                        ret = -ENOTDIR;
                        continue;
                }
                /* v2 kills the whole leaf at once; v1 has no cgroup.kill. */
                (void)cgroup_write(&cg, dirs[i], "cgroup.kill", "1");
                if (!empty_leaf(dirs[i])) {
                        ret = -EBUSY;
                        continue;
                }
                int r = cgroup_rmdir(&cg, dirs[i]);
                if (r < 0)
                        ret = r;
        }
        return ret;
}

/* The caller's cgroup in the hierarchy that holds `controller` ("" for the
 * unified one), from the text of /proc/self/cgroup (`self`, or read here
 * when NULL). */
static int own_cgroup_path(const char *self, const char *controller, char **ret)
{
        _cleanup_free_ char *s = NULL;
        if (self)
                s = xstrdup(self);
        else {
                int r = read_file_at(AT_FDCWD, "/proc/self/cgroup", 1 << 20, &s, NULL);
                if (r < 0)
                        return r;
        }
        for (char *line = s; line && *line;) {
                char *nl = strchr(line, '\n');
                if (nl)
                        *nl = '\0';
                char *c1 = strchr(line, ':');
                char *c2 = c1 ? strchr(c1 + 1, ':') : NULL;
                if (c1 && c2) {
                        *c2 = '\0';
                        const char *ctrls = c1 + 1;
                        bool match = false;
                        if (!*controller)
                                match = (*ctrls == '\0');
                        else {
                                _cleanup_free_ char *copy = xstrdup(ctrls);
                                char *save = NULL;
                                for (char *t = strtok_r(copy, ",", &save); t;
                                     t = strtok_r(NULL, ",", &save))
                                        if (STREQ(t, controller))
                                                match = true;
                        }
                        if (match) {
                                *ret = xstrdup(c2 + 1);
                                return 0;
                        }
                }
                line = nl ? nl + 1 : NULL;
        }
        return -ENOENT;
}

/* The mount point of the v1 hierarchy carrying `controller`, from the text
 * of /proc/self/mountinfo. */
static int v1_mount_point(const char *mountinfo, const char *controller, char **ret)
{
        _cleanup_free_ char *s = xstrdup(mountinfo);
        for (char *line = s; line && *line;) {
                char *nl = strchr(line, '\n');
                if (nl)
                        *nl = '\0';
                /* id parent maj:min root mountpoint opts [optional...] - fstype source superopts */
                char *sep = strstr(line, " - ");
                if (sep) {
                        char *fields[6] = {0};
                        char *save = NULL, *copy = line;
                        for (int i = 0; i < 5; i++)
                                fields[i] = strtok_r(i ? NULL : copy, " ", &save);
                        char *fstype = sep + 3;
                        char *src = strchr(fstype, ' ');
                        char *super = src ? strchr(src + 1, ' ') : NULL;
                        if (fields[4] && src && super && strncmp(fstype, "cgroup ", 7) == 0) {
                                super++;
                                char *save2 = NULL;
                                for (char *t = strtok_r(super, ",", &save2); t;
                                     t = strtok_r(NULL, ",", &save2))
                                        if (STREQ(t, controller)) {
                                                *ret = xstrdup(fields[4]);
                                                return 0;
                                        }
                        }
                }
                line = nl ? nl + 1 : NULL;
        }
        return -ENOENT;
}

/* An ordinary user refused a cgroup: say which recipe of docs/rootless.md
 * applies to this host's cgroup version. */
static void rootless_hint(const struct cgroup *cg, int r, struct al_error *err)
{
        if (!err || cg->fake || geteuid() == 0 ||
            (r != -EACCES && r != -EPERM && r != -EROFS && r != -EOPNOTSUPP && r != -EBUSY))
                return;
        const char *hint =
            cg->ops == &cgroup_v2_ops
                ? "; this host has cgroup v2: run Airlock in a delegated cgroup, e.g. "
                  "'systemd-run --user --scope -p Delegate=yes airlock run ...' "
                  "(docs/rootless.md, \"cgroup v2\")"
                : "; this host has cgroup v1: root must give you a cgroup of your own in "
                  "the memory, pids, cpu and cpuacct hierarchies and start you in it "
                  "(docs/rootless.md, \"cgroup v1\")";
        size_t len = strlen(err->msg);
        snprintf(err->msg + len, sizeof(err->msg) - len, "%s", hint);
}

int cgroup_realize(struct cgroup *cg, struct al_error *err)
{
        if (cg->created)
                return 0;
        int r = cgroup_create(cg, &cg->limits, err);
        if (r < 0 && cg->created) {
                cg->ops->destroy(cg);
                cg->created = false;
        }
        if (r < 0)
                rootless_hint(cg, r, err);
        return r;
}

int cgroup_setup(const char *name, const struct cgroup_limits *l, struct cgroup **ret,
                 struct al_error *err)
{
        struct cgroup *cg = NULL;
        int r = cgroup_open(name, l, &cg, err);
        if (r < 0)
                return r;
        r = cgroup_realize(cg, err);
        if (r < 0) {
                cgroup_free(cg);
                return r;
        }
        *ret = cg;
        return 0;
}

/* A layout found for a run's record (cgroup_keep), taken by the next
 * cgroup_open() of the same leaf in this process. */
static struct cgroup *kept;

void cgroup_keep(struct cgroup *cg)
{
        cgroup_free(kept);
        kept = cg && !cg->created ? cg : cgroup_free(cg);
}

int cgroup_open(const char *name, const struct cgroup_limits *l, struct cgroup **ret,
                struct al_error *err)
{
        struct statfs sfs;
        struct cgroup *cg = NULL;
        bool sweep = false;
        int r;

        if (kept) {
                cg = TAKE_PTR(kept);
                /* Found with no limits: limits.io makes blkio required,
                 * which only a fresh look can refuse. */
                if (STREQ(cg->name, name) && !cgroup_io_limited(l)) {
                        cg->limits = *l;
                        *ret = cg;
                        return 0;
                }
                /* The sweep it was to make goes with the fresh look. */
                sweep = STREQ(cg->name, name) && cg->sweep_pending;
                cg->sweep_pending = false;
                cg = cgroup_free(cg);
        }

        if (statfs("/sys/fs/cgroup", &sfs) < 0)
                return al_error_set(err, errno, "cgroup: /sys/fs/cgroup");

        if (sfs.f_type == CGROUP2_SUPER_MAGIC) {
                _cleanup_free_ char *own = NULL;
                r = own_cgroup_path(NULL, "", &own);
                if (r < 0)
                        return al_error_set(err, r, "cgroup: finding own cgroup");
                _cleanup_free_ char *parent = xasprintf("/sys/fs/cgroup%s", own);
                r = cgroup_v2_new(parent, name, false, &cg);
        } else {
                /* blkio last: optional unless limits.io is set (its byte
                 * counts show in the usage when it is there). */
                static const char *const ctrls[] = CGROUP_V1_CTRLS;
                char *parents[CGROUP_V1_MAX] = {0};
                unsigned held[CGROUP_V1_MAX] = {0};
                size_t n = 0;
                /* Each read once for every controller. */
                _cleanup_free_ char *mountinfo = NULL, *self = NULL;
                r = read_file_at(AT_FDCWD, "/proc/self/mountinfo", 4 << 20, &mountinfo, NULL);
                if (r < 0)
                        return al_error_set(err, r, "cgroup: reading /proc/self/mountinfo");
                r = read_file_at(AT_FDCWD, "/proc/self/cgroup", 1 << 20, &self, NULL);
                if (r < 0)
                        return al_error_set(err, r, "cgroup: reading /proc/self/cgroup");
                for (size_t i = 0; i < ARRAY_SIZE(ctrls) && r >= 0; i++) {
                        _cleanup_free_ char *mnt = NULL, *own = NULL;
                        r = v1_mount_point(mountinfo, ctrls[i], &mnt);
                        /* The freezer lets the kill switch stop the sandbox
                         * before killing it; a user it is not delegated to
                         * (or a host without it) gets a kill without the
                         * freeze, and the stop says so. */
                        if (STREQ(ctrls[i], "freezer") && r < 0) {
                                r = 0;
                                continue;
                        }
                        if (r < 0 && STREQ(ctrls[i], "blkio") && !cgroup_io_limited(l)) {
                                r = 0;
                                break;
                        }
                        if (r < 0) {
                                al_error_set(err, r,
                                             "cgroup: no v1 hierarchy with the %s controller",
                                             ctrls[i]);
                                break;
                        }
                        r = own_cgroup_path(self, ctrls[i], &own);
                        if (r < 0 && STREQ(ctrls[i], "freezer")) {
                                r = 0;
                                continue;
                        }
                        if (r < 0) {
                                al_error_set(err, r, "cgroup: finding own %s cgroup", ctrls[i]);
                                break;
                        }
                        char *dir = xasprintf("%s%s", mnt, STREQ(own, "/") ? "" : own);
                        if (STREQ(ctrls[i], "freezer") && access(dir, W_OK) < 0) {
                                free(dir);
                                continue;
                        }
                        /* Without limits.io, blkio only counts bytes: a caller
                         * it is not delegated to goes without. */
                        if (STREQ(ctrls[i], "blkio") && access(dir, W_OK) < 0) {
                                free(dir);
                                if (!cgroup_io_limited(l))
                                        break;
                                r = al_error_set(err, EACCES,
                                                 "limits.io: the cgroup v1 blkio controller is "
                                                 "not delegated to this user, so I/O cannot be "
                                                 "throttled; run as root or remove limits.io");
                                break;
                        }
                        bool dup = false;
                        for (size_t j = 0; j < n && !dup; j++)
                                if (STREQ(parents[j], dir)) {
                                        held[j] |= 1u << i; /* co-mounted */
                                        dup = true;
                                }
                        if (dup)
                                free(dir);
                        else {
                                held[n] = 1u << i;
                                parents[n++] = dir;
                        }
                }
                if (r >= 0)
                        r = cgroup_v1_new(parents, n, name, false, &cg);
                for (size_t j = 0; r >= 0 && j < n; j++)
                        cg->ctrls[j] = held[j];
                for (size_t j = 0; j < n; j++)
                        free(parents[j]);
                if (r < 0)
                        return err && err->msg[0] ? r : al_error_set(err, r, "cgroup");
        }
        if (r < 0)
                return al_error_set(err, r, "cgroup");
        cg->limits = *l;
        cg->sweep_pending = sweep;
        *ret = cg;
        return 0;
}

/* ---- cgroups left by a supervisor that died ---- */

static bool is_cgroupfs(int fd)
{
        struct statfs s;
        return fstatfs(fd, &s) == 0 && ((unsigned long)s.f_type == CGROUP_SUPER_MAGIC ||
                                        (unsigned long)s.f_type == CGROUP2_SUPER_MAGIC);
}

/* Kill a process listed in a cgroup named `tag` (or below it), by a pidfd
 * taken before its membership is checked: a listed process that has ended
 * may have left its number to another, and a number read a moment ago is
 * no name for a process. */
static void kill_member(int pid, const char *tag)
{
        _cleanup_close_ int pfd = (int)syscall(SYS_pidfd_open, pid, 0);
        if (pfd < 0)
                return;
        _cleanup_free_ char *path = xasprintf("/proc/%d/cgroup", pid);
        _cleanup_free_ char *cg = NULL;
        _cleanup_free_ char *needle = xasprintf("/%s", tag);
        if (read_file_at(AT_FDCWD, path, 64 * 1024, &cg, NULL) < 0)
                return;
        size_t n = strlen(needle);
        for (const char *at = strstr(cg, needle); at; at = strstr(at + 1, needle))
                if (at[n] == '/' || at[n] == '\n' || at[n] == '\0') {
                        (void)syscall(SYS_pidfd_send_signal, pfd, SIGKILL, NULL, 0);
                        return;
                }
}

/* One pass over the cgroup `name` beneath parent, its children first: kill
 * what is in it, try to remove it. Returns 0 when it is gone, -EBUSY while
 * it still holds processes (or children). */
static int cgroup_remove_tagged(int parent, const char *name, const char *tag, unsigned depth)
{
        int fd = openat(parent, name, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
        if (fd < 0)
                return 0;
        DIR *dir = fdopendir(fd);
        if (!dir) {
                close(fd);
                return 0;
        }
        struct dirent *de;
        while ((de = readdir(dir)))
                if (de->d_type == DT_DIR && !STREQ(de->d_name, ".") && !STREQ(de->d_name, "..") &&
                    depth < 8)
                        (void)cgroup_remove_tagged(dirfd(dir), de->d_name, tag, depth + 1);
        int kfd = openat(dirfd(dir), "cgroup.kill", O_WRONLY | O_CLOEXEC);
        if (kfd >= 0) {
                /* Without cgroup.kill (v1) the processes are killed below. */
                (void)write_full(kfd, "1", 1);
                close(kfd);
        }
        _cleanup_free_ char *procs = NULL;
        bool any = false;
        if (read_file_at(dirfd(dir), "cgroup.procs", 1 << 20, &procs, NULL) == 0) {
                for (char *p = procs; *p;) {
                        char *nl = strchr(p, '\n');
                        if (nl)
                                *nl = '\0';
                        int pid;
                        if (safe_atoi(p, &pid) == 0 && pid > 1) {
                                kill_member(pid, tag);
                                any = true;
                        }
                        if (!nl)
                                break;
                        p = nl + 1;
                }
        }
        if (any) {
                /* Killed members of a frozen v1 leaf die once thawed. */
                int ffd = openat(dirfd(dir), "freezer.state", O_WRONLY | O_CLOEXEC);
                if (ffd >= 0) {
                        (void)write_full(ffd, "THAWED", 6);
                        close(ffd);
                }
        }
        int r = unlinkat(parent, name, AT_REMOVEDIR) == 0 || errno == ENOENT ? 0 : -EBUSY;
        closedir(dir);
        return r;
}

/* Freeze the cgroup `name` beneath parent: v2 cgroup.freeze, v1
 * freezer.state (only the freezer hierarchy has it). 1 when asked. */
static int cgroup_freeze_tagged(int parent, const char *name)
{
        _cleanup_close_ int fd =
            openat(parent, name, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
        if (fd < 0)
                return 0;
        static const char *const files[][2] = {{"cgroup.freeze", "1"}, {"freezer.state", "FROZEN"}};
        int ret = 0;
        for (size_t i = 0; i < ARRAY_SIZE(files); i++) {
                _cleanup_close_ int f = openat(fd, files[i][0], O_WRONLY | O_CLOEXEC);
                if (f >= 0 && write_full(f, files[i][1], strlen(files[i][1])) >= 0)
                        ret = 1;
        }
        return ret;
}

/* Find directories named `name` at most `depth` levels down, within a budget
 * of directories looked at, and remove them (or, freeze: freeze them,
 * counting them in *r). */
static void cgroup_search_do(int fd, const char *name, unsigned depth, unsigned *budget, int *r,
                             bool freeze);
static void cgroup_search(int fd, const char *name, unsigned depth, unsigned *budget, int *r)
{
        cgroup_search_do(fd, name, depth, budget, r, false);
}

static void cgroup_search_do(int fd, const char *name, unsigned depth, unsigned *budget, int *r,
                             bool freeze)
{
        int dup = fcntl(fd, F_DUPFD_CLOEXEC, 3);
        if (dup < 0)
                return;
        DIR *dir = fdopendir(dup);
        if (!dir) {
                close(dup);
                return;
        }
        struct dirent *de;
        while ((de = readdir(dir)) && *budget > 0) {
                if (de->d_type != DT_DIR || STREQ(de->d_name, ".") || STREQ(de->d_name, ".."))
                        continue;
                (*budget)--;
                if (STREQ(de->d_name, name)) {
                        if (freeze)
                                *r += cgroup_freeze_tagged(dirfd(dir), de->d_name);
                        else if (cgroup_remove_tagged(dirfd(dir), de->d_name, name, 0) < 0)
                                *r = -EBUSY;
                        continue;
                }
                if (depth == 0 || strncmp(de->d_name, "airlock-", 8) == 0)
                        continue;
                int sub =
                    openat(dirfd(dir), de->d_name, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
                if (sub >= 0) {
                        cgroup_search_do(sub, name, depth - 1, budget, r, freeze);
                        close(sub);
                }
        }
        closedir(dir);
}

int cgroup_reclaim_named(const char *name)
{
        int r = 0;
        _cleanup_close_ int root = open("/sys/fs/cgroup", O_RDONLY | O_DIRECTORY | O_CLOEXEC);
        if (root < 0)
                return 0;
        unsigned budget = 20000;
        if (is_cgroupfs(root)) {
                cgroup_search(root, name, 6, &budget, &r);
                return r;
        }
        _cleanup_(closedirp) DIR *dir = fdopendir(fcntl(root, F_DUPFD_CLOEXEC, 3));
        if (!dir)
                return 0;
        struct dirent *de;
        while ((de = readdir(dir))) {
                if (de->d_type != DT_DIR || de->d_name[0] == '.')
                        continue;
                _cleanup_close_ int h =
                    openat(dirfd(dir), de->d_name, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
                if (h >= 0 && is_cgroupfs(h)) {
                        unsigned b = budget;
                        cgroup_search(h, name, 6, &b, &r);
                }
        }
        return r;
}

int cgroup_freeze_named(const char *name)
{
        int n = 0;
        _cleanup_close_ int root = open("/sys/fs/cgroup", O_RDONLY | O_DIRECTORY | O_CLOEXEC);
        if (root < 0)
                return 0;
        unsigned budget = 20000;
        if (is_cgroupfs(root)) {
                cgroup_search_do(root, name, 6, &budget, &n, true);
                return n;
        }
        /* v1: only the freezer hierarchy can freeze. */
        _cleanup_close_ int h =
            openat(root, "freezer", O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
        if (h >= 0 && is_cgroupfs(h))
                cgroup_search_do(h, name, 6, &budget, &n, true);
        return n;
}
