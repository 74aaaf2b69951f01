/* SPDX-License-Identifier: Apache-2.0 */
/* Volumes of a caller that is not root: a directory of files kept in the
 * caller's state, given to a sandbox as a tmpfs of the volume's size (the
 * limit the kernel enforces), filled from the directory when the sandbox
 * starts and saved back when it ends. docs/internals/volume.md. */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <linux/fs.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mount.h>
#include <sys/stat.h>
#include <unistd.h>

#include "diskuse.h"
#include "fs.h"
#include "util.h"
#include "volume-internal.h"

/* Copies are bounded: this deep, this many entries. */
#define COPY_DEPTH   64
#define COPY_ENTRIES (1u << 20)
#define CHUNK        (1 << 16)

struct copy {
        uint64_t budget;  /* bytes of file data still allowed */
        uint64_t entries; /* entries still allowed */
        uid_t owner;      /* only entries of this owner; (uid_t)-1: any */
};

static int copy_tree(struct copy *c, int from, int to, unsigned depth);

/* A directory's permission bits, always open to its owner: a directory the
 * agent closed (chmod 0) would otherwise stop the host's own `airlock
 * volume du` and `rm` of the volume. */
static mode_t dir_mode(mode_t m)
{
        return (m & 0777) | 0700;
}

/* A regular file's data, at most c->budget bytes. */
static int copy_file(struct copy *c, int from, int to, const char *name, const struct stat *st)
{
        _cleanup_close_ int in = openat(from, name, O_RDONLY | O_NOFOLLOW | O_NONBLOCK | O_CLOEXEC);
        if (in < 0)
                return -errno;
        struct stat now;
        /* The entry seen by fstatat must be the one opened. */
        if (fstat(in, &now) < 0 || !S_ISREG(now.st_mode) || now.st_ino != st->st_ino ||
            now.st_dev != st->st_dev)
                return -EAGAIN;
        if ((uint64_t)now.st_size > c->budget)
                return -EFBIG;
        _cleanup_close_ int out =
            openat(to, name, O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0600);
        if (out < 0)
                return -errno;
        char buf[CHUNK];
        for (;;) {
                ssize_t n = read(in, buf, sizeof(buf));
                if (n < 0 && errno == EINTR)
                        continue;
                if (n < 0)
                        return -errno;
                if (n == 0)
                        break;
                /* Hard links and a file growing under us count each time:
                 * what is copied never passes the volume's size. */
                if ((uint64_t)n > c->budget)
                        return -EFBIG;
                c->budget -= (uint64_t)n;
                int r = write_full(out, buf, (size_t)n);
                if (r < 0)
                        return r;
        }
        /* Permission bits only: no set-id or sticky bit survives a copy. */
        if (fchmod(out, now.st_mode & 0777) < 0)
                return -errno;
        struct timespec ts[2] = {now.st_atim, now.st_mtim};
        futimens(out, ts);
        return 0;
}

static int copy_entry(struct copy *c, int from, int to, const char *name, unsigned depth)
{
        struct stat st;
        if (fstatat(from, name, &st, AT_SYMLINK_NOFOLLOW) < 0)
                return errno == ENOENT ? 0 : -errno;
        if (c->entries == 0)
                return -E2BIG;
        c->entries--;
        /* A save keeps only the sandbox user's own entries: another inside
         * user's ("users") would come back as the sandbox user's, trusted
         * by every "owned by me" check of its next run. */
        if (c->owner != (uid_t)-1 && st.st_uid != c->owner)
                return 0;
        if (S_ISREG(st.st_mode))
                return copy_file(c, from, to, name, &st);
        if (S_ISLNK(st.st_mode)) {
                /* Kept as a link, never followed: it means something only
                 * inside the sandbox. */
                char target[PATH_MAX];
                ssize_t n = readlinkat(from, name, target, sizeof(target) - 1);
                if (n < 0)
                        return -errno;
                target[n] = '\0';
                if ((uint64_t)n > c->budget)
                        return -EFBIG;
                c->budget -= (uint64_t)n;
                return symlinkat(target, to, name) < 0 ? -errno : 0;
        }
        if (S_ISDIR(st.st_mode)) {
                if (depth >= COPY_DEPTH)
                        return -ELOOP;
                if (mkdirat(to, name, 0700) < 0)
                        return -errno;
                _cleanup_close_ int sub_from =
                    openat(from, name, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
                _cleanup_close_ int sub_to =
                    openat(to, name, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
                if (sub_from < 0 || sub_to < 0)
                        return -errno;
                int r = copy_tree(c, sub_from, sub_to, depth + 1);
                if (r < 0)
                        return r;
                return fchmod(sub_to, dir_mode(st.st_mode)) < 0 ? -errno : 0;
        }
        /* Devices, FIFOs and sockets are not kept. */
        return 0;
}

static int copy_tree(struct copy *c, int from, int to, unsigned depth)
{
        DIR *d = fdopendir(fcntl(from, F_DUPFD_CLOEXEC, 3));
        if (!d)
                return -errno;
        int r = 0;
        struct dirent *de;
        while (r >= 0 && (de = readdir(d))) {
                if (STREQ(de->d_name, ".") || STREQ(de->d_name, ".."))
                        continue;
                r = copy_entry(c, from, to, de->d_name, depth);
                /* Unreadable to the sandbox's own user (another user's
                 * private file): left out rather than failing it all. */
                if (r == -EACCES || r == -EPERM)
                        r = 0;
        }
        closedir(d);
        return r;
}

int dirvol_read_size(int vol, uint64_t *ret)
{
        _cleanup_free_ char *s = NULL;
        int r = read_file_at(vol, DIRVOL_SIZE, 64, &s, NULL);
        if (r < 0)
                return r;
        s[strcspn(s, "\n")] = '\0';
        r = safe_atou64(s, ret);
        if (r < 0 || *ret < VOLUME_SIZE_MIN || *ret > VOLUME_SIZE_MAX)
                return -EINVAL;
        return 0;
}

int dirvol_mount(int vol, uid_t uid, gid_t gid, int *ret_mnt, int *ret_root, struct al_error *err)
{
        uint64_t size;
        int r = dirvol_read_size(vol, &size);
        if (r < 0)
                return al_error_set(err, r, "reading the volume's size");
        _cleanup_close_ int data =
            openat(vol, DIRVOL_DATA, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
        if (data < 0)
                return al_error_set(err, errno, "opening the volume's files");
        struct stat st;
        if (fstat(data, &st) < 0)
                return al_error_set(err, errno, "opening the volume's files");
        char sz[32], u[16], g[16], mode[16], inodes[32];
        snprintf(sz, sizeof(sz), "%" PRIu64, size);
        snprintf(u, sizeof(u), "%u", (unsigned)uid);
        snprintf(g, sizeof(g), "%u", (unsigned)gid);
        snprintf(mode, sizeof(mode), "%o", (unsigned)(st.st_mode & 0777));
        /* Entries are bounded too: a million empty files would be nothing
         * in the tmpfs and a million inodes of the host's disk. */
        snprintf(inodes, sizeof(inodes), "%" PRIu64, size / 4096 + 1024);
        _cleanup_close_ int fs = fsopen("tmpfs", FSOPEN_CLOEXEC);
        if (fs < 0)
                return al_error_set(err, errno, "creating the volume's tmpfs");
        const char *opts[] = {"size", sz, "nr_inodes", inodes, "mode", mode, "uid", u, "gid", g};
        for (size_t i = 0; i < ARRAY_SIZE(opts); i += 2)
                if (fsconfig(fs, FSCONFIG_SET_STRING, opts[i], opts[i + 1], 0) < 0)
                        return al_error_set(err, errno, "creating the volume's tmpfs (%s)",
                                            opts[i]);
        if (fsconfig(fs, FSCONFIG_CMD_CREATE, NULL, NULL, 0) < 0)
                return al_error_set(err, errno, "creating the volume's tmpfs");
        _cleanup_close_ int mnt =
            fsmount(fs, FSMOUNT_CLOEXEC, MOUNT_ATTR_NOSUID | MOUNT_ATTR_NODEV);
        if (mnt < 0)
                return al_error_set(err, errno, "mounting the volume's tmpfs");
        _cleanup_close_ int root = openat(mnt, ".", O_RDONLY | O_DIRECTORY | O_CLOEXEC);
        if (root < 0)
                return al_error_set(err, errno, "opening the volume's tmpfs");
        struct copy c = {.budget = size, .entries = COPY_ENTRIES, .owner = (uid_t)-1};
        r = copy_tree(&c, data, root, 0);
        if (r < 0)
                return al_error_set(err, r, "filling the volume's tmpfs from its files");
        *ret_mnt = TAKE_FD(mnt);
        *ret_root = TAKE_FD(root);
        return 0;
}

/* Copy the tmpfs into a fresh directory beside the volume's files, then
 * swap the two in one rename: the directory is always one whole save. */
int dirvol_save(int vol, int tmpfs)
{
        uint64_t size;
        int r = dirvol_read_size(vol, &size);
        if (r < 0)
                return r;
        fs_remove_tree(vol, DIRVOL_NEW, FS_REMOVE_DEPTH_MAX);
        struct stat st;
        if (fstat(tmpfs, &st) < 0)
                return -errno;
        if (mkdirat(vol, DIRVOL_NEW, 0700) < 0)
                return -errno;
        _cleanup_close_ int to =
            openat(vol, DIRVOL_NEW, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
        if (to < 0)
                return -errno;
        /* The sandbox's own user is the caller on the host (the tmpfs's
         * root is its); every other inside user is a subordinate id. */
        struct copy c = {.budget = size, .entries = COPY_ENTRIES, .owner = geteuid()};
        r = copy_tree(&c, tmpfs, to, 0);
        if (r >= 0 && fchmod(to, dir_mode(st.st_mode)) < 0)
                r = -errno;
        if (r >= 0 && fsync(to) < 0)
                r = -errno;
        if (r >= 0 && renameat2(vol, DIRVOL_NEW, vol, DIRVOL_DATA, RENAME_EXCHANGE) < 0)
                r = -errno;
        /* After the exchange DIRVOL_NEW holds the old files; on failure the
         * partial copy. Either goes. */
        fs_remove_tree(vol, DIRVOL_NEW, FS_REMOVE_DEPTH_MAX);
        if (r >= 0)
                fsync(vol);
        return r;
}

int dirvol_used(int vol, uint64_t *ret)
{
        _cleanup_close_ int data =
            openat(vol, DIRVOL_DATA, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
        if (data < 0)
                return -errno;
        return diskuse_tree_bytes(data, COPY_ENTRIES, ret);
}
