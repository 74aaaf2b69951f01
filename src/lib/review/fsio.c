/* SPDX-License-Identifier: Apache-2.0 */
/* The review module's file helpers: resolution beneath a directory without
 * following any symlink, JSON files replaced atomically, bounded copies and
 * comparisons of file content. */
#include <errno.h>
#include <fcntl.h>
#include <linux/openat2.h>
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/sysmacros.h>
#include <unistd.h>

#include "fs.h"
#include "review-internal.h"
#include "trusted.h"

/* Resolve path beneath dirfd without following any symlink, the last
 * component included (with O_PATH that opens the symlink itself), and
 * without crossing a mount point: a mount the host has inside the
 * workspace is another file system, which review neither reads nor writes
 * (-EXDEV, review_xdev_explain). */
int review_open_beneath(int dirfd, const char *path, int flags)
{
        return fs_openat2(dirfd, *path ? path : ".", flags | O_CLOEXEC | O_NOFOLLOW, 0600,
                          RESOLVE_BENEATH | RESOLVE_NO_SYMLINKS | RESOLVE_NO_MAGICLINKS |
                              RESOLVE_NO_XDEV);
}

int review_xdev_explain(int r, struct al_error *err)
{
        if (r != -EXDEV)
                return r;
        char was[AL_ERROR_MAX];
        snprintf(was, sizeof(was), "%s", err->msg);
        return al_error_set_message(
            err, EXDEV,
            "%s: a mount point of the host is on that path in the workspace (another file "
            "system); review does not read or write across it, and nothing was changed. "
            "Unmount it and try again, or discard the changes",
            was);
}

/* What the workspace holds at path, looked up beneath it. */
int review_host_stat(int dirfd, const char *path, struct host *ret)
{
        *ret = (struct host){0};
        _cleanup_close_ int fd = review_open_beneath(dirfd, path, O_PATH);
        if (fd == -ENOENT)
                return 0;
        if (fd < 0)
                return fd;
        struct statx stx;
        if (statx(fd, "", AT_EMPTY_PATH | AT_SYMLINK_NOFOLLOW,
                  STATX_TYPE | STATX_MODE | STATX_CTIME | STATX_UID | STATX_GID | STATX_INO,
                  &stx) < 0)
                return -errno;
        ret->dev = makedev(stx.stx_dev_major, stx.stx_dev_minor);
        ret->ino = stx.stx_ino;
        ret->mode = stx.stx_mode;
        ret->ctime_ns = (uint64_t)stx.stx_ctime.tv_sec * 1000000000ULL + stx.stx_ctime.tv_nsec;
        ret->uid = stx.stx_uid;
        ret->gid = stx.stx_gid;
        return 0;
}

/* "a/b/c" → dir "a/b", name "c"; "c" → dir "", name "c". */
const char *review_split_path(const char *path, char dir[static PATH_MAX])
{
        const char *slash = strrchr(path, '/');
        if (!slash) {
                dir[0] = '\0';
                return path;
        }
        size_t n = (size_t)(slash - path);
        memcpy(dir, path, n);
        dir[n] = '\0';
        return slash + 1;
}

bool review_is_beneath(const char *path, const char *top)
{
        size_t n = strlen(top);
        if (n == 0)
                return true;
        return strncmp(path, top, n) == 0 && (path[n] == '\0' || path[n] == '/');
}

int review_write_json_at(int dirfd, const char *name, json_t *j)
{
        char tmp[64];
        char hex[17];
        int r = random_hex(hex, 16);
        if (r < 0)
                return r;
        snprintf(tmp, sizeof(tmp), ".%s.%s.tmp", name, hex);
        _cleanup_free_ char *s = json_dumps(j, JSON_INDENT(1) | JSON_SORT_KEYS);
        if (!s)
                return -ENOMEM;
        _cleanup_close_ int fd =
            openat(dirfd, tmp, O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0600);
        if (fd < 0)
                return -errno;
        r = write_full(fd, s, strlen(s));
        if (r >= 0)
                r = write_full(fd, "\n", 1);
        if (r >= 0 && fsync(fd) < 0)
                r = -errno;
        if (r >= 0 && renameat(dirfd, tmp, dirfd, name) < 0)
                r = -errno;
        if (r < 0)
                unlinkat(dirfd, tmp, 0);
        return r;
}

int review_read_json_at(int dirfd, const char *name, json_t **ret)
{
        /* As root, a file another user could have written is not read: the
         * directory is one only root or the caller can change (review_open),
         * so what is checked here is what is read. */
        struct stat st;
        if (geteuid() == 0) {
                if (fstatat(dirfd, name, &st, AT_SYMLINK_NOFOLLOW) < 0)
                        return -errno;
                if (!S_ISREG(st.st_mode) || trusted_stat_foreign(&st, trusted_caller()))
                        return -EPERM;
        }
        _cleanup_free_ char *buf = NULL;
        size_t len = 0;
        int r = read_file_at(dirfd, name, JSON_MAX, &buf, &len);
        if (r < 0)
                return r;
        json_t *j = json_loadb(buf, len, JSON_REJECT_DUPLICATES, NULL);
        if (!json_is_object(j)) {
                json_decref(j);
                return -EBADMSG;
        }
        *ret = j;
        return 0;
}

int review_foreign_json(struct al_error *err, const char *state_dir, const char *name)
{
        return al_error_set_message(
            err, EPERM,
            "%s/%s is not a regular file only root (or the user sudo runs for) can write; "
            "Airlock, running as root, does not act on what another user could have written "
            "there. Accept or discard it as the user who owns it",
            state_dir, name);
}

/* Remove name beneath dirfd, a whole tree when it is a directory. Only used
 * on the state directory, which the host alone writes. */
int review_remove_tree_at(int at, const char *name, unsigned depth)
{
        return fs_remove_tree(at, name, REVIEW_MAX_DEPTH + 2 - depth);
}

static int copy_range(int in, int out, off_t off, off_t len)
{
        static char buf[COPY_CHUNK];
        bool fallback = false;
        off_t ioff = off, ooff = off;

        while (len > 0) {
                size_t want = len > (1 << 30) ? (1 << 30) : (size_t)len;
                ssize_t n;
                if (!fallback) {
                        n = copy_file_range(in, &ioff, out, &ooff, want, 0);
                        if (n < 0 && (errno == EXDEV || errno == EINVAL || errno == ENOSYS ||
                                      errno == EOPNOTSUPP || errno == EPERM)) {
                                fallback = true;
                                continue;
                        }
                } else {
                        n = pread(in, buf, want < sizeof(buf) ? want : sizeof(buf), ioff);
                        if (n > 0) {
                                int r = 0;
                                for (ssize_t done = 0; done < n && r >= 0;) {
                                        ssize_t w = pwrite(out, buf + done, (size_t)(n - done),
                                                           ooff + done);
                                        if (w < 0 && errno != EINTR)
                                                r = -errno;
                                        else if (w > 0)
                                                done += w;
                                }
                                if (r < 0)
                                        return r;
                                ioff += n;
                                ooff += n;
                        }
                }
                if (n < 0) {
                        if (errno == EINTR)
                                continue;
                        return -errno;
                }
                if (n == 0)
                        return -EIO; /* the source shrank under us */
                len -= n;
        }
        return 0;
}

/* Copy a regular file's content, at most max bytes of it, keeping holes: a
 * sparse file stays sparse. A file that grows while it is copied (a
 * running sandbox's) is cut at max, the size it was charged at. */
int review_copy_data(int in, int out, uint64_t max, uint64_t *ret_bytes)
{
        struct stat st;
        if (fstat(in, &st) < 0)
                return -errno;
        off_t size = (uint64_t)st.st_size > max ? (off_t)max : st.st_size, pos = 0;
        uint64_t bytes = 0;
        while (pos < size) {
                off_t data = lseek(in, pos, SEEK_DATA);
                if ((data < 0 && errno == ENXIO) || data >= size)
                        break;
                off_t hole = data < 0 ? size : lseek(in, data, SEEK_HOLE);
                if (data < 0)
                        data = pos;
                if (hole < 0 || hole > size)
                        hole = size;
                int r = copy_range(in, out, data, hole - data);
                if (r < 0)
                        return r;
                bytes += (uint64_t)(hole - data);
                pos = hole;
        }
        if (ftruncate(out, size) < 0)
                return -errno;
        *ret_bytes += bytes;
        return 0;
}

int review_files_equal(int a, int b, bool *ret)
{
        static char ba[COPY_CHUNK], bb[COPY_CHUNK];
        struct stat sa, sb;
        if (fstat(a, &sa) < 0 || fstat(b, &sb) < 0)
                return -errno;
        *ret = false;
        if (sa.st_size != sb.st_size)
                return 0;
        for (off_t off = 0; off < sa.st_size;) {
                ssize_t na = pread(a, ba, sizeof(ba), off);
                ssize_t nb = pread(b, bb, sizeof(bb), off);
                if (na < 0 || nb < 0)
                        return -errno;
                if (na != nb || na == 0)
                        return 0;
                if (memcmp(ba, bb, (size_t)na) != 0)
                        return 0;
                off += na;
        }
        *ret = true;
        return 0;
}

int review_is_binary(int fd, bool *ret)
{
        char buf[BINARY_PROBE];
        ssize_t n = pread(fd, buf, sizeof(buf), 0);
        if (n < 0)
                return -errno;
        *ret = memchr(buf, '\0', (size_t)n) != NULL;
        return 0;
}

int review_read_link(int dirfd, const char *path, char buf[static PATH_MAX])
{
        _cleanup_close_ int fd = review_open_beneath(dirfd, path, O_PATH);
        if (fd < 0)
                return fd;
        ssize_t n = readlinkat(fd, "", buf, PATH_MAX);
        if (n < 0)
                return -errno;
        if (n >= PATH_MAX)
                return -ENAMETOOLONG;
        buf[n] = '\0';
        return 0;
}
