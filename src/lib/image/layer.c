/* SPDX-License-Identifier: Apache-2.0 */
/* Image layers (image-internal.h): a tar stream, gzip-compressed or not,
 * applied to a staging root with the OCI whiteouts. The archive is hostile:
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
#include "util.h"

#define BLOCK 512

struct reader {
        gzFile gz;
        struct al_error *err;
        const char *what;
        uint64_t entries;
        uint64_t bytes_max; /* info->bytes may not pass it */
};

/* `n` more bytes to write into the tree: refused past the bound, before
 * anything is written (a gzip bomb, a file copied again and again by hard
 * links, must not fill the host's disk). */
static int take_bytes(struct reader *r, struct image_info *info, uint64_t n)
{
        if (n > r->bytes_max || info->bytes > r->bytes_max - n)
                return al_error_set_message(r->err, EFBIG,
                                            "%s: the image unpacks to more than %llu bytes "
                                            "(the bound is the lesser of %llu GiB and the free "
                                            "space less %llu MiB): refused; free some space or "
                                            "import a smaller image",
                                            r->what, (unsigned long long)r->bytes_max,
                                            IMAGE_BYTES_MAX >> 30, IMAGE_BYTES_SPARE >> 20);
        info->bytes += n;
        return 0;
}

/* The bound for this archive: the caller's, or what the target's file
 * system can take beyond what is already unpacked, less a reserve. */
static uint64_t bytes_bound(int root, const struct image_info *info)
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

static int rd(struct reader *r, void *buf, size_t n)
{
        size_t got = 0;
        while (got < n) {
                int k = gzread(r->gz, (char *)buf + got,
                               (unsigned)(n - got > (1u << 30) ? (1u << 30) : n - got));
                if (k < 0)
                        return al_error_set_message(r->err, EIO, "%s: a damaged archive", r->what);
                if (k == 0)
                        return -ENODATA;
                got += (size_t)k;
        }
        return 0;
}

static int skip(struct reader *r, uint64_t n)
{
        char buf[BLOCK * 16];
        while (n > 0) {
                size_t k = n > sizeof(buf) ? sizeof(buf) : (size_t)n;
                int e = rd(r, buf, k);
                if (e < 0)
                        return e == -ENODATA ? al_error_set_message(r->err, EIO,
                                                                    "%s: the archive ends "
                                                                    "inside an entry",
                                                                    r->what)
                                             : e;
                n -= k;
        }
        return 0;
}

static uint64_t padded(uint64_t n)
{
        return (n + BLOCK - 1) / BLOCK * BLOCK;
}

static int octal(const unsigned char *f, size_t n, uint64_t *ret)
{
        size_t i = 0;
        uint64_t v = 0;
        if (n && (f[0] & 0x80)) /* base-256: sizes beyond 8 GiB, not taken */
                return -ERANGE;
        while (i < n && f[i] == ' ')
                i++;
        for (; i < n && f[i] >= '0' && f[i] <= '7'; i++) {
                if (v > (UINT64_MAX >> 3))
                        return -ERANGE;
                v = v * 8 + (uint64_t)(f[i] - '0');
        }
        for (; i < n; i++)
                if (f[i] != ' ' && f[i] != '\0')
                        return -EINVAL;
        *ret = v;
        return 0;
}

static bool checksum_ok(const unsigned char *h)
{
        uint64_t want;
        if (octal(h + 148, 8, &want) < 0)
                return false;
        unsigned sum = 0;
        for (size_t i = 0; i < BLOCK; i++)
                sum += (i >= 148 && i < 156) ? ' ' : h[i];
        return sum == want;
}

static char *field(const unsigned char *f, size_t n)
{
        return strndup((const char *)f, n);
}

/* A long value (GNU 'L'/'K' or a pax record) of at most PATH_MAX bytes. */
static int read_long(struct reader *r, uint64_t size, char **ret)
{
        if (size == 0 || size > 1 << 20)
                return al_error_set_message(r->err, EINVAL,
                                            "%s: an extended header of %llu "
                                            "bytes, refused",
                                            r->what, (unsigned long long)size);
        char *buf = xcalloc(1, padded(size) + 1);
        int e = rd(r, buf, padded(size));
        if (e < 0) {
                free(buf);
                return e == -ENODATA ? al_error_set_message(r->err, EIO, "%s: truncated", r->what)
                                     : e;
        }
        buf[size] = '\0';
        *ret = buf;
        return 0;
}

/* "LEN key=value\n" records: path, linkpath and size are taken. */
static int pax(struct reader *r, const char *d, size_t n, char **path, char **link, uint64_t *size,
               bool *has_size)
{
        size_t off = 0;
        while (off < n) {
                uint64_t len = 0;
                size_t i = off;
                while (i < n && d[i] >= '0' && d[i] <= '9' && len < (1 << 20))
                        len = len * 10 + (uint64_t)(d[i++] - '0');
                if (i >= n || d[i] != ' ' || len == 0 || off + len > n || d[off + len - 1] != '\n')
                        return al_error_set_message(r->err, EINVAL, "%s: a bad pax record",
                                                    r->what);
                const char *kv = d + i + 1;
                size_t kvlen = off + len - 1 - (i + 1);
                const char *eq = memchr(kv, '=', kvlen);
                if (eq) {
                        size_t klen = (size_t)(eq - kv);
                        char *val = strndup(eq + 1, kvlen - klen - 1);
                        if (klen == 4 && !memcmp(kv, "path", 4)) {
                                free(*path);
                                *path = val;
                        } else if (klen == 8 && !memcmp(kv, "linkpath", 8)) {
                                free(*link);
                                *link = val;
                        } else if (klen == 4 && !memcmp(kv, "size", 4)) {
                                if (safe_atou64(val, size) < 0) {
                                        free(val);
                                        return al_error_set_message(r->err, EINVAL,
                                                                    "%s: a bad pax size", r->what);
                                }
                                *has_size = true;
                                free(val);
                        } else
                                free(val);
                }
                off += len;
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
        char buf[BLOCK * 32];
        uint64_t left = size;
        while (left > 0) {
                size_t k = left > sizeof(buf) ? sizeof(buf) : (size_t)left;
                e = rd(r, buf, k);
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
        return skip(r, padded(size) - size);
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
                           .bytes_max = bytes_bound(root, info)};
        if (!r.gz) {
                close(fd);
                return al_error_set(err, ENOMEM, "%s", what);
        }
        gzbuffer(r.gz, 1 << 16);
        int e = 0;
        char *long_name = NULL, *long_link = NULL, *pax_path = NULL, *pax_link = NULL;
        uint64_t pax_size = 0;
        bool has_pax_size = false;
        unsigned zero_blocks = 0;

        for (;;) {
                unsigned char h[BLOCK];
                e = rd(&r, h, BLOCK);
                if (e == -ENODATA) { /* an archive without its end blocks */
                        e = 0;
                        break;
                }
                if (e < 0)
                        break;
                bool zero = true;
                for (size_t i = 0; i < BLOCK && zero; i++)
                        zero = h[i] == 0;
                if (zero) {
                        if (++zero_blocks == 2)
                                break;
                        continue;
                }
                zero_blocks = 0;
                if (!checksum_ok(h)) {
                        e = al_error_set_message(err, EINVAL,
                                                 "%s: a header with a bad checksum "
                                                 "(not a tar archive?)",
                                                 what);
                        break;
                }
                if (++r.entries > IMAGE_ENTRIES_MAX) {
                        e = al_error_set_message(err, E2BIG, "%s: more than %d entries", what,
                                                 IMAGE_ENTRIES_MAX);
                        break;
                }
                uint64_t size, mode;
                if (octal(h + 124, 12, &size) < 0 || octal(h + 100, 8, &mode) < 0) {
                        e = al_error_set_message(err, EINVAL, "%s: a bad size or mode", what);
                        break;
                }
                char type = (char)h[156];
                if (type == 'L' || type == 'K' || type == 'x' || type == 'g') {
                        char *v = NULL;
                        e = read_long(&r, size, &v);
                        if (e < 0)
                                break;
                        if (type == 'L') {
                                free(long_name);
                                long_name = v;
                        } else if (type == 'K') {
                                free(long_link);
                                long_link = v;
                        } else {
                                if (type == 'x')
                                        e = pax(&r, v, (size_t)size, &pax_path, &pax_link,
                                                &pax_size, &has_pax_size);
                                free(v);
                                if (e < 0)
                                        break;
                        }
                        continue;
                }
                if (has_pax_size)
                        size = pax_size;
                _cleanup_free_ char *raw = NULL;
                if (pax_path)
                        raw = xstrdup(pax_path);
                else if (long_name)
                        raw = xstrdup(long_name);
                else if (h[345] && memcmp(h + 257, "ustar", 5) == 0) {
                        _cleanup_free_ char *pre = field(h + 345, 155), *nm = field(h, 100);
                        raw = xasprintf("%s/%s", pre, nm);
                } else
                        raw = field(h, 100);
                _cleanup_free_ char *link = pax_link    ? xstrdup(pax_link)
                                            : long_link ? xstrdup(long_link)
                                                        : field(h + 157, 100);
                free(long_name);
                free(long_link);
                free(pax_path);
                free(pax_link);
                long_name = long_link = pax_path = pax_link = NULL;
                has_pax_size = false;

                _cleanup_free_ char *name = clean_name(raw);
                if (!name) {
                        e = al_error_set_message(err, EPERM,
                                                 "%s: entry \"%.200s\" is absolute or climbs "
                                                 "out with \"..\": refused",
                                                 what, raw);
                        break;
                }
                bool has_data = type == '0' || type == '\0' || type == '7';
                if (STREQ(name, ".")) { /* the root itself */
                        e = skip(&r, has_data ? padded(size) : 0);
                        if (e < 0)
                                break;
                        continue;
                }
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
                                if (d >= 0 && image_sorted_entries(d, &names, &n) >= 0) {
                                        for (size_t i = 0; i < n; i++)
                                                fs_remove_tree(d, names[i], FS_REMOVE_DEPTH_MAX);
                                        strv_free(names);
                                }
                        } else if (base[4] && !STREQ(base + 4, ".") && !STREQ(base + 4, ".."))
                                fs_remove_tree(dir, base + 4, FS_REMOVE_DEPTH_MAX);
                        e = skip(&r, padded(size));
                        if (e < 0)
                                break;
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
                        e = e < 0 ? e : skip(&r, padded(size));
                        break;
                case '2':
                        e = clear(wdir, base, false);
                        if (e >= 0 && symlinkat(link, wdir, base) < 0)
                                e = -errno;
                        if (e >= 0)
                                info->links++;
                        e = e < 0 ? e : skip(&r, padded(size));
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
                        e = e < 0 ? e : skip(&r, padded(size));
                        break;
                }
                default:
                        /* Devices, FIFOs, anything else: left out. */
                        info->skipped++;
                        e = skip(&r, has_data ? padded(size) : 0);
                }
                if (e < 0) {
                        if (!err->msg[0])
                                al_error_set(err, -e, "%s: \"%.200s\"", what, name);
                        break;
                }
        }
        free(long_name);
        free(long_link);
        free(pax_path);
        free(pax_link);
        gzclose(r.gz);
        return e < 0 ? e : 0;
}
