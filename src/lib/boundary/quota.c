/* SPDX-License-Identifier: Apache-2.0 */
#include <dirent.h>
#include <fcntl.h>
#include <inttypes.h>
#include <linux/fs.h>
#include <linux/magic.h>
#include <linux/quota.h>
#include <limits.h>
#include <string.h>
#include <sys/file.h>
#include <sys/ioctl.h>
#include <sys/stat.h>
#include <sys/statfs.h>
#include <sys/syscall.h>
#include <sys/utsname.h>
#include <unistd.h>

#include "quota.h"
#include "util.h"

#ifndef __NR_quotactl_fd
#define __NR_quotactl_fd 443
#endif
#ifndef XFS_SUPER_MAGIC
#define XFS_SUPER_MAGIC 0x58465342
#endif

/* Project ids Airlock picks from: a block of its own, away from the small
 * ids administrators hand out. */
#define PROJID_BASE  0x41000000u
#define PROJID_SPAN  0x00ffffffu
#define PROJID_TRIES 64
/* Deeper trees are refused rather than left half-labelled. */
#define TREE_DEPTH_MAX 256
/* A lease's size at most: the id, the path, two newlines. */
#define LEASE_MAX (PATH_MAX + 32)
/* A lease still being written (dot-name) whose owner died, removed once
 * this old. */
#define LEASE_TMP_STALE_S 60

struct quota {
        int fd; /* the workspace directory */
        uint32_t projid;
        uint64_t base;  /* bytes the tree held when labelled */
        uint64_t limit; /* the hard limit, bytes */
        bool limit_set;
        bool labelled;
        int lease_fd; /* <state_root>/quota/<projid>, locked while we live */
        char *lease_path;
};

const char *quota_fs_name(long f_type)
{
        switch ((unsigned long)f_type) {
        case EXT4_SUPER_MAGIC:
                return "ext4";
        case XFS_SUPER_MAGIC:
                return "xfs";
        case TMPFS_MAGIC:
                return "tmpfs";
        case OVERLAYFS_SUPER_MAGIC:
                return "overlay";
        case BTRFS_SUPER_MAGIC:
                return "btrfs";
        case NFS_SUPER_MAGIC:
                return "nfs";
        default:
                return "an unrecognised file system";
        }
}

static int qctl(int fd, int cmd, uint32_t id, void *addr)
{
        /* QCMD() shifts a signed int past its range for the Q_X* commands;
         * the same bits, built unsigned. */
        unsigned qcmd = ((unsigned)cmd << SUBCMDSHIFT) | ((unsigned)PRJQUOTA & SUBCMDMASK);
        if (syscall(__NR_quotactl_fd, fd, qcmd, id, addr) < 0)
                return -errno;
        return 0;
}

/* Label one inode: `projid` and, on directories, inheritance. */
static int label(int fd, uint32_t projid, bool dir)
{
        struct fsxattr fa;
        if (ioctl(fd, FS_IOC_FSGETXATTR, &fa) < 0)
                return -errno;
        fa.fsx_projid = projid;
        if (dir && projid)
                fa.fsx_xflags |= FS_XFLAG_PROJINHERIT;
        else
                fa.fsx_xflags &= ~FS_XFLAG_PROJINHERIT;
        if (ioctl(fd, FS_IOC_FSSETXATTR, &fa) < 0)
                return -errno;
        return 0;
}

/* Label a directory and everything beneath it on the same file system;
 * symlinks and special files are left (they hold no data blocks of note). */
static int label_tree(int dfd, dev_t dev, uint32_t projid, int depth)
{
        if (depth > TREE_DEPTH_MAX)
                return -ELOOP;
        int r = label(dfd, projid, true);
        if (r < 0)
                return r;
        int dup = fcntl(dfd, F_DUPFD_CLOEXEC, 3);
        if (dup < 0)
                return -errno;
        DIR *d = fdopendir(dup);
        if (!d) {
                r = -errno;
                close(dup);
                return r;
        }
        /* The duplicate shares the offset of dfd, which for the workspace is
         * walked twice (label, release): start over, or the release would
         * read no entry and leave the tree labelled. */
        rewinddir(d);
        struct dirent *de;
        while ((de = readdir(d))) {
                if (STREQ(de->d_name, ".") || STREQ(de->d_name, ".."))
                        continue;
                struct stat st;
                if (fstatat(dfd, de->d_name, &st, AT_SYMLINK_NOFOLLOW) < 0) {
                        if (errno == ENOENT)
                                continue;
                        r = -errno;
                        break;
                }
                if (st.st_dev != dev || !(S_ISDIR(st.st_mode) || S_ISREG(st.st_mode)))
                        continue;
                int fd = openat(dfd, de->d_name,
                                O_RDONLY | O_NOFOLLOW | O_CLOEXEC | O_NOCTTY | O_NONBLOCK |
                                    (S_ISDIR(st.st_mode) ? O_DIRECTORY : 0));
                if (fd < 0) {
                        if (errno == ENOENT)
                                continue;
                        r = -errno;
                        break;
                }
                r = S_ISDIR(st.st_mode) ? label_tree(fd, dev, projid, depth + 1)
                                        : label(fd, projid, false);
                close(fd);
                if (r < 0)
                        break;
        }
        closedir(d);
        return r < 0 ? r : 0;
}

static int label_all(struct quota *q, uint32_t projid)
{
        struct stat st;
        if (fstat(q->fd, &st) < 0)
                return -errno;
        return label_tree(q->fd, st.st_dev, projid, 0);
}

static uint32_t projid_hint(const char *id)
{
        uint32_t h = 2166136261u; /* FNV-1a */
        for (const char *p = id ? id : ""; *p; p++)
                h = (h ^ (unsigned char)*p) * 16777619u;
        return h & PROJID_SPAN;
}

/* The kernel options ext4's project quotas need, as its build
 * configuration in /boot says, when it says; "" when all are there or it
 * cannot be read (/proc/config.gz is compressed). */
static void ext4_kernel_gap(char *buf, size_t size)
{
        static const char *const need[] = {"CONFIG_QUOTA", "CONFIG_QUOTACTL", "CONFIG_QFMT_V2"};
        struct utsname u;
        buf[0] = '\0';
        if (uname(&u) < 0)
                return;
        _cleanup_free_ char *path = xasprintf("/boot/config-%s", u.release);
        _cleanup_free_ char *cfg = NULL;
        if (read_file_at(AT_FDCWD, path, 1 << 20, &cfg, NULL) < 0)
                return;
        for (size_t i = 0; i < ARRAY_SIZE(need); i++) {
                char y[48], m[48];
                snprintf(y, sizeof(y), "\n%s=y\n", need[i]);
                snprintf(m, sizeof(m), "\n%s=m\n", need[i]);
                if (strstr(cfg, y) || strstr(cfg, m))
                        continue;
                size_t len = strlen(buf);
                snprintf(buf + len, size - len, "%s%s", len ? ", " : "", need[i]);
        }
}

/* Open the workspace and check that project quotas can be set on it: on
 * failure, one message naming the file system and the fix. */
static int open_checked(const char *workspace, int *ret_fd, struct al_error *err)
{
        struct statfs sfs;
        struct if_dqinfo info;
        _cleanup_close_ int fd = open(workspace, O_RDONLY | O_DIRECTORY | O_CLOEXEC | O_NOFOLLOW);
        if (fd < 0)
                return al_error_set(err, errno, "limits.workspaceDisk: opening %s", workspace);
        if (fstatfs(fd, &sfs) < 0)
                return al_error_set(err, errno, "limits.workspaceDisk: %s", workspace);
        const char *fs = quota_fs_name(sfs.f_type);
        int r = qctl(fd, Q_GETINFO, 0, &info);
        if (r == -EPERM || r == -EACCES)
                return al_error_set(
                    err, -r, "limits.workspaceDisk: setting a project quota on %s needs root",
                    workspace);
        if (r < 0) {
                char gap[96] = "";
                if ((unsigned long)sfs.f_type == EXT4_SUPER_MAGIC)
                        ext4_kernel_gap(gap, sizeof(gap));
                return al_error_set(
                    err, EOPNOTSUPP,
                    "limits.workspaceDisk: the workspace %s is on %s, which has no project "
                    "quotas enabled, so its size cannot be limited (ext4: mkfs.ext4 -O "
                    "quota,project and mount -o prjquota%s%s; XFS: mount -o prjquota); remove "
                    "limits.workspaceDisk, use --review (its layer is bounded by limits.disk), or "
                    "move the workspace",
                    workspace, fs, gap[0] ? ", on a kernel built with " : "", gap);
        }
        /* Q_GETINFO is open to anyone; setting limits is not. */
        if (geteuid() != 0)
                return al_error_set(
                    err, EPERM, "limits.workspaceDisk: setting a project quota on %s needs root",
                    workspace);
        *ret_fd = TAKE_FD(fd);
        return 0;
}

int quota_check(const char *workspace, struct al_error *err)
{
        _cleanup_close_ int fd = -1;
        return open_checked(workspace, &fd, err);
}

/* Claim `projid` for the workspace: <state_root>/quota/<projid as 8 hex
 * digits> holds the id and the workspace's path, and stays locked (flock)
 * for as long as this process lives. Written under a dot-name and renamed
 * when complete and locked, so a sweep never finds a lease without its
 * lock; link() (unlike rename()) refuses a name that exists, so two runs
 * sharing a state root never pick the same id. -EEXIST: taken. */
static int lease_take(struct quota *q, const char *state_root, uint32_t projid)
{
        _cleanup_free_ char *dir = xasprintf("%s/quota", state_root);
        int r = mkdir_p(dir, 0700, 0700);
        if (r < 0)
                return r;
        char where[64];
        snprintf(where, sizeof(where), "/proc/self/fd/%d", q->fd);
        char path[PATH_MAX];
        ssize_t n = readlink(where, path, sizeof(path) - 1);
        if (n <= 0 || path[0] != '/')
                return n < 0 ? -errno : -EINVAL;
        path[n] = '\0';
        /* One line per field: a path with a newline could not be read back. */
        if (memchr(path, '\n', (size_t)n))
                return -EINVAL;
        _cleanup_free_ char *body = xasprintf("%" PRIu32 "\n%s\n", projid, path);
        _cleanup_free_ char *tmp = xasprintf("%s/.%08" PRIx32 "-%d", dir, projid, (int)getpid());
        _cleanup_free_ char *lease = xasprintf("%s/%08" PRIx32, dir, projid);
        int fd = open(tmp, O_RDWR | O_CREAT | O_EXCL | O_CLOEXEC | O_NOFOLLOW, 0600);
        if (fd < 0)
                return -errno;
        r = 0;
        if (flock(fd, LOCK_EX) < 0)
                r = -errno;
        if (r >= 0)
                r = write_full(fd, body, strlen(body));
        /* link() fails with EEXIST where rename() would replace. */
        if (r >= 0 && link(tmp, lease) < 0)
                r = -errno;
        (void)unlink(tmp);
        if (r < 0) {
                close(fd);
                return r;
        }
        q->lease_fd = fd;
        q->lease_path = TAKE_PTR(lease);
        return 0;
}

static void lease_drop(struct quota *q)
{
        if (q->lease_path)
                (void)unlink(q->lease_path);
        if (q->lease_fd >= 0)
                close(q->lease_fd);
        q->lease_fd = -1;
        free(q->lease_path);
        q->lease_path = NULL;
}

int quota_apply(const char *workspace, uint64_t allowance, const char *sandbox_id,
                const char *state_root, struct quota **ret, struct al_error *err)
{
        struct quota *q = xcalloc(1, sizeof(*q));
        q->lease_fd = -1;
        q->fd = -1;
        int r;

        r = open_checked(workspace, &q->fd, err);
        if (r < 0)
                goto fail;

        /* A tree the administrator already put in a project keeps it:
         * relabelling would take it out of their accounting for good. */
        struct fsxattr fa;
        if (ioctl(q->fd, FS_IOC_FSGETXATTR, &fa) < 0) {
                r = al_error_set(err, errno, "limits.workspaceDisk: %s", workspace);
                goto fail;
        }
        if (fa.fsx_projid != 0) {
                r = al_error_set(err, EBUSY,
                                 "limits.workspaceDisk: the workspace %s already belongs to "
                                 "project %" PRIu32 "; Airlock will not relabel it",
                                 workspace, fa.fsx_projid);
                goto fail;
        }

        /* An id nobody uses: no blocks, no inodes, no limits. */
        uint32_t hint = projid_hint(sandbox_id);
        for (int i = 0; i < PROJID_TRIES && !q->projid; i++) {
                uint32_t id = PROJID_BASE | ((hint + (uint32_t)i) & PROJID_SPAN);
                struct if_dqblk dq;
                r = qctl(q->fd, Q_GETQUOTA, id, &dq);
                if (!(r == -ESRCH || r == -ENOENT ||
                      (r >= 0 && dq.dqb_curspace == 0 && dq.dqb_curinodes == 0 &&
                       dq.dqb_bhardlimit == 0 && dq.dqb_ihardlimit == 0)))
                        continue;
                /* The lease comes before the label: a supervisor killed after
                 * this leaves a lease that the next sweep reclaims with. */
                if (state_root) {
                        r = lease_take(q, state_root, id);
                        if (r == -EEXIST)
                                continue;
                        if (r < 0) {
                                r = al_error_set(err, -r,
                                                 "limits.workspaceDisk: recording project %" PRIu32
                                                 " in %s/quota",
                                                 id, state_root);
                                goto fail;
                        }
                }
                q->projid = id;
        }
        if (!q->projid) {
                r = al_error_set(err, EBUSY, "limits.workspaceDisk: no free project id on %s",
                                 workspace);
                goto fail;
        }
        q->labelled = true;
        r = label_all(q, q->projid);
        if (r < 0) {
                al_error_set(err, -r, "limits.workspaceDisk: labelling %s with project %" PRIu32,
                             workspace, q->projid);
                goto fail;
        }
        struct if_dqblk dq;
        r = qctl(q->fd, Q_GETQUOTA, q->projid, &dq);
        if (r < 0) {
                al_error_set(err, -r, "limits.workspaceDisk: reading project %" PRIu32, q->projid);
                goto fail;
        }
        q->base = dq.dqb_curspace;
        q->limit = q->base + allowance;
        memset(&dq, 0, sizeof(dq));
        /* The kernel counts limits in 1 KiB blocks. */
        dq.dqb_bhardlimit = dq.dqb_bsoftlimit = (q->limit + 1023) / 1024;
        dq.dqb_valid = QIF_BLIMITS;
        q->limit_set = true;
        r = qctl(q->fd, Q_SETQUOTA, q->projid, &dq);
        if (r < 0) {
                al_error_set(err, -r, "limits.workspaceDisk: setting the limit of project %" PRIu32,
                             q->projid);
                goto fail;
        }
        *ret = q;
        return 0;
fail:
        quota_release(q);
        return r < 0 ? r : -EIO;
}

int quota_usage(struct quota *q, uint64_t *added, bool *at_limit)
{
        struct if_dqblk dq;
        int r = qctl(q->fd, Q_GETQUOTA, q->projid, &dq);
        if (r < 0)
                return r;
        *added = dq.dqb_curspace > q->base ? dq.dqb_curspace - q->base : 0;
        *at_limit = dq.dqb_curspace + 4096 >= q->limit;
        return 0;
}

struct quota *quota_release(struct quota *q)
{
        if (!q)
                return NULL;
        if (q->labelled)
                (void)label_all(q, 0);
        if (q->limit_set) {
                struct if_dqblk dq = {.dqb_valid = QIF_LIMITS};
                (void)qctl(q->fd, Q_SETQUOTA, q->projid, &dq);
        }
        /* The lease goes last: a failure above is retried by a sweep. */
        lease_drop(q);
        if (q->fd >= 0)
                close(q->fd);
        free(q);
        return NULL;
}

/* Reclaim what one lease nobody holds describes: the project id off the
 * workspace tree (only if its root still carries that id: the tree may have
 * been relabelled or replaced since), and the id's limit. */
static void reclaim(uint32_t projid, const char *path)
{
        struct quota q = {.fd = -1, .lease_fd = -1, .projid = projid};
        if (path[0] != '/')
                return;
        q.fd = open(path, O_RDONLY | O_DIRECTORY | O_CLOEXEC | O_NOFOLLOW);
        if (q.fd < 0)
                return; /* gone: no tree to unlabel, no fd to reach its fs */
        struct fsxattr fa;
        if (ioctl(q.fd, FS_IOC_FSGETXATTR, &fa) == 0 && fa.fsx_projid == projid)
                (void)label_all(&q, 0);
        struct if_dqblk dq = {.dqb_valid = QIF_LIMITS};
        (void)qctl(q.fd, Q_SETQUOTA, projid, &dq);
        close(q.fd);
}

static int sweep_one(int dirfd, const char *name)
{
        _cleanup_close_ int fd = openat(dirfd, name, O_RDONLY | O_CLOEXEC | O_NOFOLLOW | O_NOCTTY);
        if (fd < 0)
                return errno == ENOENT ? 0 : -errno;
        if (flock(fd, LOCK_EX | LOCK_NB) < 0)
                return errno == EWOULDBLOCK ? 0 : -errno; /* its owner lives */
        struct stat st;
        if (fstat(fd, &st) < 0)
                return -errno;
        if (st.st_nlink == 0)
                return 0; /* reclaimed by another sweep while we waited */
        if (name[0] == '.') {
                /* A lease its owner died writing: nothing was labelled. */
                if ((uint64_t)st.st_mtime + LEASE_TMP_STALE_S < now_realtime_us() / 1000000)
                        (void)unlinkat(dirfd, name, 0);
                return 0;
        }
        char buf[LEASE_MAX + 1];
        ssize_t n = S_ISREG(st.st_mode) ? pread(fd, buf, LEASE_MAX, 0) : -1;
        if (n > 0) {
                buf[n] = '\0';
                char *nl = strchr(buf, '\n');
                char *end = nl ? strchr(nl + 1, '\n') : NULL;
                uint64_t id;
                if (nl && end) {
                        *nl = *end = '\0';
                        if (safe_atou64(buf, &id) >= 0 && id >= PROJID_BASE &&
                            id <= (PROJID_BASE | PROJID_SPAN))
                                reclaim((uint32_t)id, nl + 1);
                }
        }
        /* Reclaimed, or nothing can be done with it: it must not stay. */
        if (unlinkat(dirfd, name, 0) < 0 && errno != ENOENT)
                return -errno;
        return 1;
}

int quota_sweep(const char *state_root, struct al_error *err)
{
        if (!state_root)
                return 0;
        _cleanup_free_ char *dir = xasprintf("%s/quota", state_root);
        int dirfd = open(dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC | O_NOFOLLOW);
        if (dirfd < 0)
                return errno == ENOENT ? 0 : al_error_set(err, errno, "project leases %s", dir);
        _cleanup_(closedirp) DIR *d = fdopendir(dirfd);
        if (!d) {
                close(dirfd);
                return al_error_set(err, errno, "project leases %s", dir);
        }
        int found = 0, first = 0;
        struct dirent *de;
        while ((de = readdir(d))) {
                if (STREQ(de->d_name, ".") || STREQ(de->d_name, ".."))
                        continue;
                int r = sweep_one(dirfd, de->d_name);
                if (r > 0)
                        found++;
                else if (r < 0 && first == 0)
                        first = al_error_set(err, -r, "project lease %s/%s", dir, de->d_name);
        }
        return first < 0 ? first : found;
}
