/* SPDX-License-Identifier: Apache-2.0 */
/* The walk of a tree runs in a helper process, not in the caller's event
 * loop: the supervisor's loop is also the network gate's relay loop, and a
 * walk of a large (or slow, or hung) tree would pause every relayed
 * connection for its whole length. A process, not a thread: the
 * supervisor clones the sandbox with raw clone3, and a child of a threaded
 * process would wait forever in its C library's setresuid() for a thread
 * it does not have (audit/sync.c says the same).
 *
 * The helper is forked at the first periodic sample (so a run shorter than
 * one tick forks nothing), with every descriptor closed but its socket and
 * its own open file description of the tree. Each walk asked for is one
 * request, answered with the walk's result and its cost; at most one is in
 * flight. Answers are taken at the next sample, without waiting. The last
 * (forced) sample waits a bounded time for the walk in flight (one that
 * does not end by then keeps the peak sampled so far), then walks here,
 * bounded like the base. The helper ends at the end of its stream and is
 * killed with its parent or by disk_meter_free(). */
#include <dirent.h>
#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/statfs.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

#include "child.h"
#include "diskuse.h"
#include "quota.h"
#include "util.h"

#define TREE_DEPTH_MAX   256
#define FAST_INTERVAL_US 100000ULL  /* fs and quota: one cheap call */
#define TREE_INTERVAL_US 1000000ULL /* the least time between two walks */
#define TREE_COST_FACTOR 20         /* a walk's time, times this, between walks */
/* The last sample waits this long at most for the walk in flight: room for
 * the helper to be scheduled on a loaded machine, not for a hung mount. */
#define LAST_WAIT_US 50000ULL

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
        /* SRC_TREE: the walking helper (sock < 0: not started) */
        int sock;
        pid_t pid;
        int pidfd;         /* the helper's, to signal it: never a pid used again */
        bool busy;         /* a walk asked for and not answered */
        uint64_t asked_us; /* when it was asked for */
};

struct walk_answer {
        int32_t r; /* 0 or -errno (tree_bytes()) */
        uint32_t pad;
        uint64_t bytes;
        uint64_t cost_us;
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
        m->sock = -1;
        m->pid = -1;
        m->pidfd = -1;
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

static void close_all_but(int a, int b)
{
        if (a > b) {
                int t = a;
                a = b;
                b = t;
        }
        if (a > 0)
                syscall(SYS_close_range, 0U, (unsigned)a - 1, 0);
        if (b > a + 1)
                syscall(SYS_close_range, (unsigned)a + 1, (unsigned)b - 1, 0);
        syscall(SYS_close_range, (unsigned)b + 1, ~0U, 0);
}

_Noreturn static void helper_main(int sock, int tree)
{
        /* An open file description of our own: the inherited one shares
         * its offset (which each walk rewinds) with the parent's. */
        int own = openat(tree, ".", O_RDONLY | O_DIRECTORY | O_CLOEXEC);
        if (own < 0)
                _exit(0);
        /* Nothing of the supervisor's is held here: not the sandbox's
         * sockets, not the caller's output (which would not see its end). */
        close_all_but(sock, own);
        /* A measure, not a gate: it yields the CPU to the relay and to the
         * sandbox (at most ~5% of one CPU by its pacing anyway). */
        setpriority(PRIO_PROCESS, 0, 10); /* raising one's own niceness cannot fail */
        for (;;) {
                char q; /* one walk, not bounded */
                ssize_t n = recv(sock, &q, sizeof(q), 0);
                if (n < 0 && errno == EINTR)
                        continue;
                if (n != (ssize_t)sizeof(q))
                        _exit(0);
                uint64_t t0 = now_monotonic_us();
                struct walk_answer a = {0};
                a.r = tree_bytes(own, DISKUSE_TREE_ENTRIES, 0, &a.bytes);
                a.cost_us = now_monotonic_us() - t0;
                if (send(sock, &a, sizeof(a), MSG_NOSIGNAL) != (ssize_t)sizeof(a))
                        _exit(0);
        }
}

static int helper_start(struct disk_meter *m)
{
        int sock;
        pid_t pid;
        int r = child_helper_fork(&sock, &pid);
        if (r == 0)
                helper_main(sock, m->fd);
        if (r < 0)
                return r;
        m->sock = sock;
        m->pid = pid;
        m->pidfd = (int)syscall(SYS_pidfd_open, pid, 0); /* -1: killed by pid */
        return 0;
}

static void helper_stop(struct disk_meter *m)
{
        if (m->sock >= 0)
                close(m->sock);
        m->sock = -1;
        if (m->pid > 0) {
                /* It may be waiting on the file system: not for its stream's
                 * end. A walk's waits are killable. */
                if (m->pidfd >= 0)
                        syscall(SYS_pidfd_send_signal, m->pidfd, SIGKILL, NULL, 0);
                else
                        kill(m->pid, SIGKILL);
                while (waitpid(m->pid, NULL, 0) < 0 && errno == EINTR)
                        ;
        }
        if (m->pidfd >= 0)
                close(m->pidfd);
        m->pidfd = -1;
        m->pid = -1;
        m->busy = false;
}

/* A walk's outcome, as a sample taken at asked_us. A forced walk that ran
 * out keeps the peak sampled before it. */
static void tree_apply(struct disk_meter *m, int r, uint64_t cur, uint64_t cost_us,
                       uint64_t asked_us)
{
        if (r == -ETIME && m->measured)
                return;
        if (r < 0) {
                m->broken = true;
                return;
        }
        cost_us *= TREE_COST_FACTOR;
        m->next_us = asked_us + (cost_us > TREE_INTERVAL_US ? cost_us : TREE_INTERVAL_US);
        m->last = cur > m->base ? cur - m->base : 0;
        if (m->last > m->peak)
                m->peak = m->last;
        m->measured = true;
}

/* Take the helper's answer if it comes within wait_us (0: only if it is
 * there). A helper that is gone leaves the tree unmeasured. */
static void helper_collect(struct disk_meter *m, uint64_t wait_us)
{
        uint64_t deadline = now_monotonic_us() + wait_us;
        while (m->busy) {
                struct walk_answer a;
                ssize_t n = recv(m->sock, &a, sizeof(a), MSG_DONTWAIT);
                if (n == (ssize_t)sizeof(a)) {
                        m->busy = false;
                        tree_apply(m, a.r, a.bytes, a.cost_us, m->asked_us);
                        return;
                }
                if (n < 0 && errno == EINTR)
                        continue;
                if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK)) {
                        uint64_t now = now_monotonic_us();
                        if (now >= deadline)
                                return;
                        struct pollfd p = {.fd = m->sock, .events = POLLIN};
                        int ms = (int)((deadline - now + 999) / 1000);
                        if (poll(&p, 1, ms) < 0 && errno != EINTR)
                                return;
                        continue;
                }
                helper_stop(m);
                m->broken = true;
                return;
        }
}

static int helper_ask(struct disk_meter *m, uint64_t now_us)
{
        if (m->sock < 0) {
                int r = helper_start(m);
                if (r < 0)
                        return r;
        }
        char q = 0;
        for (;;) {
                if (send(m->sock, &q, sizeof(q), MSG_DONTWAIT | MSG_NOSIGNAL) == (ssize_t)sizeof(q))
                        break;
                if (errno == EINTR)
                        continue;
                return -errno;
        }
        m->busy = true;
        m->asked_us = now_us;
        return 0;
}

static void tree_sample(struct disk_meter *m, uint64_t now_us, bool force)
{
        if (!force) {
                helper_collect(m, 0);
                if (m->broken || m->busy || now_us < m->next_us)
                        return;
                if (helper_ask(m, now_us) < 0) {
                        helper_stop(m);
                        m->broken = true;
                }
                return;
        }
        /* The last sample: a walk in flight is waited for a bounded time;
         * one that does not end by then waits on the file system, and the
         * peak so far is kept. Otherwise the tree is walked here, bounded
         * like the base (the command has ended: nothing is relayed any
         * more), so the last figure never waits for the helper to be
         * scheduled. */
        helper_collect(m, LAST_WAIT_US);
        if (m->broken || m->busy)
                return;
        uint64_t t0 = now_monotonic_us(), cur = 0;
        int r = tree_bytes(m->fd, DISKUSE_TREE_ENTRIES, t0 + DISKUSE_BASE_BUDGET_US, &cur);
        tree_apply(m, r, cur, now_monotonic_us() - t0, now_us);
}

void disk_meter_sample(struct disk_meter *m, uint64_t now_us, bool force)
{
        if (!m || m->broken)
                return;
        if (m->src == SRC_TREE) {
                tree_sample(m, now_us, force);
                return;
        }
        if (!force && now_us < m->next_us)
                return;
        uint64_t added = 0;
        bool at_limit;
        int r;
        if (m->src == SRC_FS) {
                uint64_t cur = 0;
                r = fs_used(m->fd, &cur);
                added = cur > m->base ? cur - m->base : 0;
        } else {
                r = quota_usage(m->q, &added, &at_limit);
        }
        m->next_us = now_us + FAST_INTERVAL_US;
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
        helper_stop(m);
        if (m->src == SRC_TREE && m->fd >= 0)
                close(m->fd);
        free(m);
        return NULL;
}
