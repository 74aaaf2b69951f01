/* SPDX-License-Identifier: Apache-2.0 */
/* Image layers (image-internal.h): a tar stream, gzip-compressed or not,
 * applied to a staging root with the OCI whiteouts, read with the one tar
 * reader (src/lib/base/tar.h), this file being the policy. The archive is
 * hostile:
 * every entry's parent is resolved inside the root (openat2 RESOLVE_IN_ROOT,
 * so a symbolic link in the tree resolves to the tree, never the host), the
 * last component is never followed, a name with ".." or an absolute name is
 * refused, a hard link is copied from inside the tree, device nodes and
 * FIFOs are left out, set-id and sticky bits are cleared. */
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <linux/openat2.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/statvfs.h>
#include <unistd.h>
#include <zlib.h>

#include "fs.h"
#include "image-internal.h"
#include "tar.h"
#include "util.h"

#define IMAGE_EXT_MAX (1u << 20) /* an extended header (pax, GNU long name) */

struct reader {
        gzFile gz;
        struct al_error *err;
        const char *what;
        uint64_t bytes_max; /* info->bytes may not pass it */
        struct tar_reader tar;
};

/* A gzip bomb, a file copied again and again by hard links, must not
 * fill the host's disk: every byte written is counted. */
int image_take_bytes(struct image_info *info, uint64_t max, uint64_t n, const char *what,
                     struct al_error *err)
{
        if (n > max || info->bytes > max - n)
                return al_error_set_message(err, EFBIG,
                                            "%s: the image unpacks to more than %llu bytes "
                                            "(the bound is the lesser of %llu GiB and the free "
                                            "space less %llu MiB): refused; free some space or "
                                            "import a smaller image",
                                            what, (unsigned long long)max,
                                            IMAGE_BYTES_MAX >> 30, IMAGE_BYTES_SPARE >> 20);
        info->bytes += n;
        return 0;
}

static int take_bytes(struct reader *r, struct image_info *info, uint64_t n)
{
        return image_take_bytes(info, r->bytes_max, n, r->what, r->err);
}

uint64_t image_bytes_bound(int root, const struct image_info *info)
{
        if (info->bytes_max)
                return info->bytes_max;
        struct statvfs sv;
        uint64_t room = IMAGE_BYTES_MAX;
        if (fstatvfs(root, &sv) == 0) {
                uint64_t avail = (uint64_t)sv.f_bavail * (uint64_t)sv.f_frsize;
                room = avail > IMAGE_BYTES_SPARE ? avail - IMAGE_BYTES_SPARE : 0;
        }
        uint64_t b = info->bytes + room;
        return b < info->bytes || b > IMAGE_BYTES_MAX ? IMAGE_BYTES_MAX : b;
}

/* The tar reader's source: the layer, gzip-compressed or not. */
static int gz_read(void *src, void *buf, size_t n, struct al_error *err)
{
        struct reader *r = src;
        size_t got = 0;
        while (got < n) {
                int k = gzread(r->gz, (char *)buf + got,
                               (unsigned)(n - got > (1u << 30) ? (1u << 30) : n - got));
                if (k < 0)
                        return al_error_set_message(err, EIO, "%s: a damaged archive", r->what);
                if (k == 0)
                        return -ENODATA;
                got += (size_t)k;
        }
        return 0;
}

/* The entry's name made relative and checked: no "..", no absolute name,
 * no NUL; "./" and trailing slashes dropped. NULL when refused. */
static char *clean_name(const char *name)
{
        while (name[0] == '.' && name[1] == '/')
                name += 2;
        while (name[0] == '/' && name[1] == '\0') /* "./" itself */
                name++;
        if (!name[0] || STREQ(name, "."))
                return xstrdup(".");
        if (name[0] == '/')
                return NULL;
        char *s = xstrdup(name);
        size_t n = strlen(s);
        while (n > 1 && s[n - 1] == '/')
                s[--n] = '\0';
        for (const char *c = s; *c;) {
                size_t k = strcspn(c, "/");
                if (k == 0 || (k == 2 && c[0] == '.' && c[1] == '.')) {
                        free(s);
                        return NULL;
                }
                c += k;
                if (*c == '/')
                        c++;
        }
        if (STREQ(s, ".")) {
                free(s);
                return xstrdup(".");
        }
        return s;
}

/* The parent directory of `rel` inside the root, links in the tree resolved
 * as inside it; *ret_base points at the last component. */
static int open_parent(int root, char *rel, const char **ret_base)
{
        char *slash = strrchr(rel, '/');
        if (!slash) {
                *ret_base = rel;
                int fd = fcntl(root, F_DUPFD_CLOEXEC, 3);
                return fd < 0 ? -errno : fd;
        }
        *slash = '\0';
        *ret_base = slash + 1;
        int fd = fs_openat2(root, rel, O_PATH | O_DIRECTORY | O_CLOEXEC, 0,
                            RESOLVE_IN_ROOT | RESOLVE_NO_MAGICLINKS | RESOLVE_NO_XDEV);
        *slash = '/';
        return fd;
}

/* How many directories `dir` lies below `root` (0: the root itself),
 * walked up by ".." and compared by identity; -ELOOP past `max`. A
 * directory entry's name alone does not tell: a link in the tree can lead
 * its parent anywhere inside. */
static int depth_below(int root, int dir, int max)
{
        struct stat rst;
        if (fstat(root, &rst) < 0)
                return -errno;
        _cleanup_close_ int cur = fcntl(dir, F_DUPFD_CLOEXEC, 3);
        if (cur < 0)
                return -errno;
        for (int depth = 0; depth <= max; depth++) {
                struct stat st;
                if (fstat(cur, &st) < 0)
                        return -errno;
                if (st.st_dev == rst.st_dev && st.st_ino == rst.st_ino)
                        return depth;
                int up = openat(cur, "..", O_PATH | O_DIRECTORY | O_CLOEXEC);
                if (up < 0)
                        return -errno;
                close(cur);
                cur = up;
        }
        return -ELOOP;
}

/* Make `name` in dir free for a new entry (a directory stays when a
 * directory is wanted). */
static int clear(int dir, const char *name, bool keep_dir)
{
        struct stat st;
        if (fstatat(dir, name, &st, AT_SYMLINK_NOFOLLOW) < 0)
                return errno == ENOENT ? 0 : -errno;
        if (keep_dir && S_ISDIR(st.st_mode))
                return 0;
        return fs_remove_tree(dir, name, FS_REMOVE_DEPTH_MAX);
}

static int copy_fd(int in, int out)
{
        char buf[65536];
        for (;;) {
                ssize_t n = read(in, buf, sizeof(buf));
                if (n < 0 && errno == EINTR)
                        continue;
                if (n < 0)
                        return -errno;
                if (n == 0)
                        return 0;
                if (write_full(out, buf, (size_t)n) < 0)
                        return -errno;
        }
}

static int write_entry(struct reader *r, int dir, const char *base, mode_t mode, uint64_t size,
                       struct image_info *info)
{
        int e = take_bytes(r, info, size);
        if (e < 0)
                return e;
        e = clear(dir, base, false);
        if (e < 0)
                return e;
        _cleanup_close_ int fd =
            openat(dir, base, O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0600);
        if (fd < 0)
                return -errno;
        char buf[TAR_BLOCK * 32];
        uint64_t left = size;
        while (left > 0) {
                size_t k = left > sizeof(buf) ? sizeof(buf) : (size_t)left;
                e = tar_data(&r->tar, buf, k);
                if (e < 0)
                        return e;
                if (write_full(fd, buf, k) < 0)
                        return -errno;
                left -= k;
        }
        if (mode & 07000)
                info->setid_stripped++;
        /* Readable by its owner, so that the tree can be copied into the
         * cache by an ordinary user too. */
        if (fchmod(fd, (mode & 0777) | 0400) < 0)
                return -errno;
        return 0;
}

int image_layer_apply(int root, int in, const char *what, struct image_info *info,
                      struct al_error *err)
{
        int fd = fcntl(in, F_DUPFD_CLOEXEC, 3);
        if (fd < 0)
                return al_error_set(err, errno, "%s", what);
        struct reader r = {.gz = gzdopen(fd, "rb"),
                           .err = err,
                           .what = what,
                           .bytes_max = image_bytes_bound(root, info)};
        if (!r.gz) {
                close(fd);
                return al_error_set(err, ENOMEM, "%s", what);
        }
        gzbuffer(r.gz, 1 << 16);
        r.tar = (struct tar_reader){.read = gz_read,
                                    .src = &r,
                                    .what = what,
                                    .err = err,
                                    .ext_max = IMAGE_EXT_MAX,
                                    .end_optional = true};
        int e = 0;
        struct tar_entry t = {0};

        for (;;) {
                tar_entry_clear(&t);
                e = tar_next(&r.tar, &t);
                if (e <= 0)
                        break;
                if (r.tar.index > IMAGE_ENTRIES_MAX) {
                        e = al_error_set_message(err, E2BIG, "%s: more than %d entries", what,
                                                 IMAGE_ENTRIES_MAX);
                        break;
                }
                uint64_t entries_max =
                    info->entries_max ? info->entries_max : IMAGE_UNPACK_ENTRIES_MAX;
                if (++info->entries > entries_max) {
                        e = al_error_set_message(err, E2BIG,
                                                 "%s: the image unpacks to more than %llu "
                                                 "entries over all its layers: refused",
                                                 what, (unsigned long long)entries_max);
                        break;
                }
                char type = t.type;
                uint64_t size = t.size, mode = t.mode;
                const char *raw = t.name, *link = t.link;
                _cleanup_free_ char *name = clean_name(raw);
                if (!name) {
                        e = al_error_set_message(err, EPERM,
                                                 "%s: entry \"%.200s\" is absolute or climbs "
                                                 "out with \"..\": refused",
                                                 what, raw);
                        break;
                }
                if (STREQ(name, ".")) /* the root itself */
                        continue;
                const char *base;
                _cleanup_close_ int dir = open_parent(root, name, &base);
                if (dir < 0) {
                        e = al_error_set(err, -dir, "%s: the directory of \"%.200s\"", what, name);
                        break;
                }
                if (strncmp(base, ".wh.", 4) == 0) {
                        /* OCI whiteouts: ".wh..wh..opq" empties the
                         * directory of what lower layers put there,
                         * ".wh.NAME" removes NAME. */
                        if (STREQ(base, ".wh..wh..opq")) {
                                _cleanup_close_ int d =
                                    openat(dir, ".", O_RDONLY | O_DIRECTORY | O_CLOEXEC);
                                char **names = NULL;
                                size_t n = 0;
                                e = d < 0 ? -errno : image_sorted_entries(d, &names, &n);
                                for (size_t i = 0; e >= 0 && i < n; i++)
                                        e = fs_remove_tree(d, names[i], FS_REMOVE_DEPTH_MAX);
                                strv_free(names);
                        } else if (base[4] && !STREQ(base + 4, ".") && !STREQ(base + 4, ".."))
                                e = fs_remove_tree(dir, base + 4, FS_REMOVE_DEPTH_MAX);
                        /* A whiteout not applied would keep what the image
                         * removed: the import fails instead. */
                        if (e < 0) {
                                al_error_set(err, -e, "%s: whiteout \"%.200s\"", what, name);
                                break;
                        }
                        info->whiteouts++;
                        continue;
                }
                int wdir = dir; /* O_PATH directory fds serve the *at calls */
                switch (type) {
                case '0':
                case '\0':
                case '7':
                        e = write_entry(&r, wdir, base, (mode_t)mode, size, info);
                        if (e >= 0)
                                info->files++;
                        break;
                case '5':
                        /* The tree stays as shallow as the cache takes it
                         * (copy_tree): a deeper staging tree could not be
                         * removed either, and would stay on the host's
                         * disk once the import is refused. */
                        e = depth_below(root, wdir, IMAGE_DEPTH_MAX - 1);
                        if (e == -ELOOP) {
                                e = al_error_set_message(err, ELOOP,
                                                         "%s: directory \"%.200s\" is deeper than "
                                                         "%d directories: refused",
                                                         what, name, IMAGE_DEPTH_MAX);
                                break;
                        }
                        if (e >= 0)
                                e = take_bytes(&r, info, IMAGE_DIR_BYTES);
                        if (e >= 0)
                                e = clear(wdir, base, true);
                        if (e >= 0 && mkdirat(wdir, base, 0755) < 0 && errno != EEXIST)
                                e = -errno;
                        if (e >= 0) {
                                /* Owner bits kept usable so that the tree can
                                 * be filled and removed. */
                                if (mode & 07000)
                                        info->setid_stripped++;
                                if (fchmodat(wdir, base, ((mode_t)mode & 0777) | 0700, 0) < 0)
                                        e = -errno;
                                info->dirs++;
                        }
                        break;
                case '2':
                        e = take_bytes(&r, info, strlen(link));
                        if (e >= 0)
                                e = clear(wdir, base, false);
                        if (e >= 0 && symlinkat(link, wdir, base) < 0)
                                e = -errno;
                        if (e >= 0)
                                info->links++;
                        break;
                case '1': {
                        /* A hard link: its target must already be a regular
                         * file inside the tree, reached without following
                         * any link; it is copied, never linked. */
                        _cleanup_free_ char *target = clean_name(link);
                        _cleanup_close_ int src =
                            target ? fs_openat2(root, target, O_RDONLY | O_NOFOLLOW | O_CLOEXEC, 0,
                                                RESOLVE_BENEATH | RESOLVE_NO_SYMLINKS |
                                                    RESOLVE_NO_MAGICLINKS)
                                   : -EPERM;
                        struct stat st;
                        if (src < 0 || fstat(src, &st) < 0 || !S_ISREG(st.st_mode)) {
                                e = al_error_set_message(err, EPERM,
                                                         "%s: hard link \"%.200s\" to "
                                                         "\"%.200s\", which is not a file "
                                                         "inside the image: refused",
                                                         what, name, link);
                                break;
                        }
                        e = take_bytes(&r, info, (uint64_t)st.st_size);
                        if (e >= 0)
                                e = clear(wdir, base, false);
                        _cleanup_close_ int out =
                            e < 0 ? -1
                                  : openat(wdir, base,
                                           O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC,
                                           st.st_mode & 0777);
                        if (e >= 0 && out < 0)
                                e = -errno;
                        if (e >= 0)
                                e = copy_fd(src, out);
                        if (e >= 0)
                                info->files++;
                        break;
                }
                default:
                        /* Devices, FIFOs, anything else: left out. */
                        info->skipped++;
                }
                if (e < 0) {
                        if (!err->msg[0])
                                al_error_set(err, -e, "%s: \"%.200s\"", what, name);
                        break;
                }
        }
        tar_entry_clear(&t);
        gzclose(r.gz);
        return e < 0 ? e : 0;
}
