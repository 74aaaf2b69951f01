/* SPDX-License-Identifier: Apache-2.0 */
#include <dirent.h>
#include <fcntl.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/statfs.h>
#include <unistd.h>

#include "diskuse.h"
#include "quota.h"
#include "util.h"

#define TREE_DEPTH_MAX   256
#define FAST_INTERVAL_US 100000ULL  /* fs and quota: one cheap call */
#define TREE_INTERVAL_US 1000000ULL /* the least time between two walks */
#define TREE_COST_FACTOR 20         /* a walk's time, times this, between walks */

enum source { SRC_FS, SRC_QUOTA, SRC_TREE };

struct disk_meter {
        enum source src;
        int fd;          /* SRC_FS: borrowed; SRC_TREE: owned */
        struct quota *q; /* SRC_QUOTA: borrowed */
        uint64_t base;   /* bytes at the start (fs, tree) */
        uint64_t peak, last;
        uint64_t next_us; /* no sample before this */
        bool measured;    /* at least one sample, and none failed for good */
        bool broken;      /* the tree grew past the cap, or a sample failed */
};

struct walk {
        dev_t dev;
        uint64_t entries, max_entries, bytes;
        uint64_t deadline_us; /* 0: none */
};

static int walk_dir(struct walk *w, int dfd, int depth)
{
        if (depth > TREE_DEPTH_MAX)
                return -ELOOP;
        int dup = fcntl(dfd, F_DUPFD_CLOEXEC, 3);
        if (dup < 0)
                return -errno;
        DIR *d = fdopendir(dup);
        if (!d) {
                int r = -errno;
                close(dup);
                return r;
        }
        /* The duplicate shares the directory's offset with dfd: start over,
         * or every walk after the first would read nothing. */
        rewinddir(d);
        int r = 0;
        struct dirent *de;
        while ((de = readdir(d))) {
                if (STREQ(de->d_name, ".") || STREQ(de->d_name, ".."))
                        continue;
                if (++w->entries > w->max_entries) {
                        r = -E2BIG;
                        break;
                }
                if (w->deadline_us && w->entries % 64 == 0 && now_monotonic_us() > w->deadline_us) {
                        r = -ETIME;
                        break;
                }
                struct stat st;
                if (fstatat(dfd, de->d_name, &st, AT_SYMLINK_NOFOLLOW) < 0)
                        continue; /* gone since readdir: the sandbox is running */
                if (st.st_dev != w->dev)
                        continue;
                w->bytes += (uint64_t)st.st_blocks * 512;
                if (!S_ISDIR(st.st_mode))
                        continue;
                /* O_NOFOLLOW|O_DIRECTORY: a directory swapped for a link or a
                 * FIFO since the stat is refused, not followed or opened. */
                int fd =
                    openat(dfd, de->d_name,
                           O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC | O_NOCTTY | O_NONBLOCK);
                if (fd < 0)
                        continue; /* unreadable or gone: its own blocks counted */
                r = walk_dir(w, fd, depth + 1);
                close(fd);
                if (r < 0)
                        break;
        }
        closedir(d);
        return r;
}

static int tree_bytes(int dfd, uint64_t max_entries, uint64_t deadline_us, uint64_t *ret_bytes)
{
        struct stat st;
        if (fstat(dfd, &st) < 0)
                return -errno;
        struct walk w = {.dev = st.st_dev,
                         .max_entries = max_entries,
                         .bytes = (uint64_t)st.st_blocks * 512,
                         .deadline_us = deadline_us};
        int r = walk_dir(&w, dfd, 0);
        if (r < 0)
                return r;
        *ret_bytes = w.bytes;
        return 0;
}

int diskuse_tree_bytes(int dfd, uint64_t max_entries, uint64_t *ret_bytes)
{
        return tree_bytes(dfd, max_entries, 0, ret_bytes);
}

static int fs_used(int fd, uint64_t *ret)
{
        struct statfs s;
        if (fstatfs(fd, &s) < 0)
                return -errno;
        *ret = (uint64_t)(s.f_blocks - s.f_bfree) * (uint64_t)s.f_bsize;
        return 0;
}

static struct disk_meter *meter_new(enum source src)
{
        struct disk_meter *m = xcalloc(1, sizeof(*m));
        m->src = src;
        m->fd = -1;
        return m;
}

struct disk_meter *disk_meter_fs(int fd)
{
        struct disk_meter *m = meter_new(SRC_FS);
        m->fd = fd;
        /* No base: the layer is made empty for the sandbox, and the command
         * may already be writing by the time the meter exists. */
        return m;
}

struct disk_meter *disk_meter_quota(struct quota *q)
{
        struct disk_meter *m = meter_new(SRC_QUOTA);
        m->q = q; /* quota_usage() counts from the quota's own base */
        return m;
}

struct disk_meter *disk_meter_tree(const char *path)
{
        struct disk_meter *m = meter_new(SRC_TREE);
        m->fd = open(path, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
        /* The base is walked before the sandbox starts, so it must stay
         * cheap: a tree that takes longer is not measured. */
        if (m->fd < 0 || tree_bytes(m->fd, DISKUSE_TREE_ENTRIES,
                                    now_monotonic_us() + DISKUSE_BASE_BUDGET_US, &m->base) < 0)
                m->broken = true;
        return m;
}

void disk_meter_sample(struct disk_meter *m, uint64_t now_us, bool force)
{
        if (!m || m->broken || (!force && now_us < m->next_us))
                return;
        uint64_t cur = 0, added = 0;
        bool at_limit;
        int r;
        switch (m->src) {
        case SRC_FS:
                r = fs_used(m->fd, &cur);
                added = cur > m->base ? cur - m->base : 0;
                m->next_us = now_us + FAST_INTERVAL_US;
                break;
        case SRC_QUOTA:
                r = quota_usage(m->q, &added, &at_limit);
                m->next_us = now_us + FAST_INTERVAL_US;
                break;
        default: {
                uint64_t t0 = now_monotonic_us();
                /* A forced sample ends a run: bounded like the base, and one
                 * that runs out keeps the peak sampled so far. */
                r = tree_bytes(m->fd, DISKUSE_TREE_ENTRIES, force ? t0 + DISKUSE_BASE_BUDGET_US : 0,
                               &cur);
                if (r == -ETIME && m->measured)
                        return;
                uint64_t cost = (now_monotonic_us() - t0) * TREE_COST_FACTOR;
                added = cur > m->base ? cur - m->base : 0;
                m->next_us = now_us + (cost > TREE_INTERVAL_US ? cost : TREE_INTERVAL_US);
                break;
        }
        }
        if (r < 0) {
                m->broken = true;
                return;
        }
        m->last = added;
        if (added > m->peak)
                m->peak = added;
        m->measured = true;
}

bool disk_meter_result(const struct disk_meter *m, uint64_t *ret_peak, uint64_t *ret_last)
{
        if (!m || m->broken || !m->measured)
                return false;
        *ret_peak = m->peak;
        *ret_last = m->last;
        return true;
}

struct disk_meter *disk_meter_free(struct disk_meter *m)
{
        if (!m)
                return NULL;
        if (m->src == SRC_TREE && m->fd >= 0)
                close(m->fd);
        free(m);
        return NULL;
}
