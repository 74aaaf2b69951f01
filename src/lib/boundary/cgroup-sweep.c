/* SPDX-License-Identifier: Apache-2.0 */
/* Leaves whose owner is gone. The process that makes a sandbox's leaf holds
 * a shared flock on it, in every hierarchy, for as long as it lives; the
 * kernel drops the lock however the owner dies. A sweep removes an
 * airlock-<16 hex> leaf only when it can take the lock exclusively, the
 * leaf is older than the time between mkdir and lock, and the kernel lets
 * the directory go (rmdir refuses one that holds processes or children):
 * no process is killed here, and no state root is needed to find them. */
#include <dirent.h>
#include <fcntl.h>
#include <linux/magic.h>
#include <string.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/statfs.h>
#include <time.h>

#include "cgroup-internal.h"
#include "util.h"

int cgroup_lock_leaves(struct cgroup *cg)
{
        for (size_t i = cg->n_locks; i < cg->n_dirs; i++) {
                int fd = open(cg->dirs[i], O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
                if (fd < 0)
                        return -errno;
                if (flock(fd, LOCK_SH) < 0) {
                        int r = -errno;
                        close(fd);
                        return r;
                }
                cg->locks[cg->n_locks++] = fd;
        }
        return 0;
}

void cgroup_unlock_leaves(struct cgroup *cg)
{
        for (size_t i = 0; i < cg->n_locks; i++)
                close(cg->locks[i]);
        cg->n_locks = 0;
}

static bool sandbox_leaf(const char *name)
{
        return strncmp(name, "airlock-", 8) == 0 && strlen(name + 8) == 16 &&
               strspn(name + 8, "0123456789abcdef") == 16;
}

/* 1 when the leaf `name` beneath parent was removed, else 0. */
static int sweep_leaf(int parent, const char *name, time_t now, unsigned min_age_s)
{
        _cleanup_close_ int fd =
            openat(parent, name, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
        struct stat st;
        if (fd < 0 || fstat(fd, &st) < 0 || st.st_mtime + (time_t)min_age_s > now)
                return 0;
        if (flock(fd, LOCK_EX | LOCK_NB) < 0)
                return 0; /* its owner lives */
        return unlinkat(parent, name, AT_REMOVEDIR) == 0 ? 1 : 0;
}

/* Sweep the children of dir; descend into those that are not sandbox
 * leaves while depth and budget last. Returns how many were removed. The
 * entries are read with getdents64 on `dir` itself (a fresh descriptor
 * each caller closes): a directory stream would cost a dup, an fstat and
 * two fcntl per directory, at every start (cgroup_sweep_beside). */
static int sweep_tree(int dir, unsigned depth, unsigned *budget, time_t now, unsigned min_age_s)
{
        _Alignas(8) char buf[8192];
        int n = 0;
        for (;;) {
                long got = syscall(SYS_getdents64, dir, buf, sizeof(buf));
                if (got <= 0)
                        break;
                for (long off = 0; off<got && * budget> 0;) {
                        struct dirent64 *de = (struct dirent64 *)(buf + off);
                        off += de->d_reclen;
                        if (de->d_type != DT_DIR || de->d_name[0] == '.')
                                continue;
                        (*budget)--;
                        if (sandbox_leaf(de->d_name)) {
                                n += sweep_leaf(dir, de->d_name, now, min_age_s);
                                continue;
                        }
                        if (depth == 0)
                                continue;
                        int sub = openat(dir, de->d_name,
                                         O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
                        if (sub >= 0) {
                                n += sweep_tree(sub, depth - 1, budget, now, min_age_s);
                                close(sub);
                        }
                }
                if (*budget == 0)
                        break;
        }
        return n;
}

int cgroup_sweep_dir(const char *parent, unsigned min_age_s)
{
        _cleanup_close_ int fd = open(parent, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
        if (fd < 0)
                return errno == ENOENT ? 0 : -errno;
        unsigned budget = 20000;
        return sweep_tree(fd, 0, &budget, time(NULL), min_age_s);
}

int cgroup_sweep_beside(char *const *leaves, size_t n, unsigned min_age_s)
{
        int removed = 0;
        for (size_t i = 0; i < n; i++) {
                _cleanup_free_ char *parent = xstrdup(leaves[i]);
                char *slash = strrchr(parent, '/');
                if (!slash || slash == parent)
                        continue;
                *slash = '\0';
                int r = cgroup_sweep_dir(parent, min_age_s);
                if (r > 0)
                        removed += r;
        }
        return removed;
}

void cgroup_sweep_later(struct cgroup *cg)
{
        cg->sweep_pending = true;
}

int cgroup_sweep_now(struct cgroup *cg)
{
        if (!cg || !cg->sweep_pending)
                return 0;
        cg->sweep_pending = false;
        return cgroup_sweep_beside(cg->dirs, cg->n_dirs, CGROUP_SWEEP_MIN_AGE_S);
}

static bool is_cgroupfs(int fd)
{
        struct statfs s;
        return fstatfs(fd, &s) == 0 && ((unsigned long)s.f_type == CGROUP_SUPER_MAGIC ||
                                        (unsigned long)s.f_type == CGROUP2_SUPER_MAGIC);
}

int cgroup_sweep_all(unsigned min_age_s)
{
        _cleanup_close_ int root = open("/sys/fs/cgroup", O_RDONLY | O_DIRECTORY | O_CLOEXEC);
        if (root < 0)
                return 0;
        time_t now = time(NULL);
        unsigned budget = 20000;
        if (is_cgroupfs(root))
                return sweep_tree(root, 6, &budget, now, min_age_s);
        /* v1 (or hybrid): each hierarchy is a cgroup file system of its own. */
        int dup = fcntl(root, F_DUPFD_CLOEXEC, 3);
        _cleanup_(closedirp) DIR *d = dup >= 0 ? fdopendir(dup) : NULL;
        if (!d) {
                if (dup >= 0)
                        close(dup);
                return 0;
        }
        int n = 0;
        struct dirent *de;
        while ((de = readdir(d))) {
                if (de->d_type != DT_DIR || de->d_name[0] == '.')
                        continue;
                _cleanup_close_ int h =
                    openat(dirfd(d), de->d_name, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
                if (h >= 0 && is_cgroupfs(h))
                        n += sweep_tree(h, 6, &budget, now, min_age_s);
        }
        return n;
}
