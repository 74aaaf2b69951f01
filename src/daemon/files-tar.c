/* SPDX-License-Identifier: Apache-2.0 */
#include <dirent.h>
#include <fcntl.h>
#include <inttypes.h>
#include <linux/openat2.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "files-tar.h"
#include "files.h"
#include "fs.h"
#include "util.h"

#define BLOCK        512
#define RESOLVE_TREE (RESOLVE_BENEATH | RESOLVE_NO_SYMLINKS | RESOLVE_NO_MAGICLINKS)
#define NAME_MAX_TAR 4096

/* ---- reading ---- */

/* An octal field: digits, then NUL or spaces; leading spaces allowed. The
 * base-256 form (for sizes past 8 GiB) is refused: no request is that big. */
static int octal(const unsigned char *f, size_t n, uint64_t *ret)
{
        size_t i = 0;
        uint64_t v = 0;
        while (i < n && f[i] == ' ')
                i++;
        size_t digits = 0;
        for (; i < n && f[i] >= '0' && f[i] <= '7'; i++, digits++) {
                if (v > (UINT64_MAX >> 3))
                        return -ERANGE;
                v = (v << 3) | (uint64_t)(f[i] - '0');
        }
        for (; i < n; i++)
                if (f[i] != ' ' && f[i] != '\0')
                        return -EINVAL;
        if (digits == 0)
                return -EINVAL;
        *ret = v;
        return 0;
}

static bool checksum_ok(const unsigned char *h)
{
        uint64_t want;
        if (octal(h + 148, 8, &want) < 0)
                return false;
        uint64_t sum = 0;
        for (size_t i = 0; i < BLOCK; i++)
                sum += (i >= 148 && i < 156) ? ' ' : h[i];
        return sum == want;
}

static bool all_zero(const unsigned char *h)
{
        for (size_t i = 0; i < BLOCK; i++)
                if (h[i])
                        return false;
        return true;
}

/* A field that may fill its whole width without a NUL. */
static char *field(const unsigned char *f, size_t n)
{
        size_t len = strnlen((const char *)f, n);
        return xasprintf("%.*s", (int)len, (const char *)f);
}

/* The "path" and "size" records of a pax header; others are ignored. */
static int pax_records(const char *d, size_t n, char **path, uint64_t *size, bool *has_size)
{
        size_t off = 0;
        while (off < n) {
                size_t len = 0, i = off;
                while (i < n && d[i] >= '0' && d[i] <= '9' && len < 1000000)
                        len = len * 10 + (size_t)(d[i++] - '0');
                if (i >= n || d[i] != ' ' || len < 5 || len > n - off || d[off + len - 1] != '\n')
                        return -EINVAL;
                const char *kv = d + i + 1, *end = d + off + len - 1;
                const char *eq = memchr(kv, '=', (size_t)(end - kv));
                if (!eq)
                        return -EINVAL;
                size_t klen = (size_t)(eq - kv), vlen = (size_t)(end - eq - 1);
                if (klen == 4 && memcmp(kv, "path", 4) == 0) {
                        if (vlen == 0 || vlen > NAME_MAX_TAR || memchr(eq + 1, '\0', vlen))
                                return -EINVAL;
                        free(*path);
                        *path = xasprintf("%.*s", (int)vlen, eq + 1);
                } else if (klen == 4 && memcmp(kv, "size", 4) == 0) {
                        _cleanup_free_ char *v = xasprintf("%.*s", (int)vlen, eq + 1);
                        if (safe_atou64(v, size) < 0)
                                return -EINVAL;
                        *has_size = true;
                }
                off += len;
        }
        return 0;
}

struct entry {
        char *path; /* beneath the workspace */
        bool dir;
        size_t off, size;
        int mode;
};

static void entries_free(struct entry *e, size_t n)
{
        for (size_t i = 0; i < n; i++)
                free(e[i].path);
        free(e);
}

static int refuse(struct al_error *err, size_t index, const char *name, const char *why)
{
        return al_error_set_message(err, EPERM, "tar entry %zu \"%.200s\": %s", index,
                                    name ? name : "", why);
}

/* Check the whole archive: the list of what to make, or an error. */
static int parse(const char *rel, const unsigned char *data, size_t len, struct entry **ret,
                 size_t *ret_n, struct al_error *err)
{
        struct entry *v = NULL;
        size_t n = 0, off = 0, index = 0;
        _cleanup_free_ char *next_path = NULL;
        uint64_t next_size = 0;
        bool next_has_size = false;
        int r = 0;
        for (;;) {
                if (len - off < BLOCK) {
                        r = al_error_set_message(err, EINVAL,
                                                 "tar: ends without its end-of-archive blocks");
                        goto fail;
                }
                const unsigned char *h = data + off;
                if (all_zero(h))
                        break; /* the end (a second zero block may follow) */
                index++;
                if (!checksum_ok(h)) {
                        r = al_error_set_message(err, EINVAL,
                                                 "tar entry %zu: bad header checksum (not a tar "
                                                 "archive, or a damaged one)",
                                                 index);
                        goto fail;
                }
                uint64_t size, mode;
                if (octal(h + 124, 12, &size) < 0 || octal(h + 100, 8, &mode) < 0) {
                        r = al_error_set_message(err, EINVAL, "tar entry %zu: bad size or mode",
                                                 index);
                        goto fail;
                }
                char type = (char)h[156];
                if (next_has_size && type != 'x' && type != 'L')
                        size = next_size;
                off += BLOCK;
                if (size > len - off) {
                        r = al_error_set_message(err, EINVAL,
                                                 "tar entry %zu: runs past the end of the "
                                                 "archive",
                                                 index);
                        goto fail;
                }
                size_t padded = (size_t)((size + BLOCK - 1) / BLOCK * BLOCK);
                if (padded > len - off)
                        padded = len - off;
                const char *body = (const char *)data + off;
                if (type == 'x' || type == 'L') {
                        if (size > NAME_MAX_TAR + 64) {
                                r = al_error_set_message(err, EINVAL,
                                                         "tar entry %zu: extended header too "
                                                         "large",
                                                         index);
                                goto fail;
                        }
                        if (type == 'x' &&
                            pax_records(body, size, &next_path, &next_size, &next_has_size) < 0) {
                                r = al_error_set_message(
                                    err, EINVAL, "tar entry %zu: malformed pax header", index);
                                goto fail;
                        }
                        if (type == 'L') {
                                size_t l = strnlen(body, size);
                                if (l == 0) {
                                        r = refuse(err, index, "", "empty long name");
                                        goto fail;
                                }
                                free(next_path);
                                next_path = xasprintf("%.*s", (int)l, body);
                        }
                        off += padded;
                        continue;
                }
                _cleanup_free_ char *name = NULL;
                if (next_path)
                        name = TAKE_PTR(next_path);
                else {
                        _cleanup_free_ char *base = field(h, 100);
                        bool ustar = memcmp(h + 257, "ustar", 5) == 0;
                        _cleanup_free_ char *prefix = ustar ? field(h + 345, 155) : NULL;
                        name =
                            prefix && *prefix ? xasprintf("%s/%s", prefix, base) : TAKE_PTR(base);
                }
                next_has_size = false;
                bool dir = type == '5';
                if ((type == '0' || type == '\0') && *name && name[strlen(name) - 1] == '/')
                        dir = true; /* the old convention */
                if (!dir && type != '0' && type != '\0' && type != '7') {
                        const char *what = type == '1'   ? "a hard link"
                                           : type == '2' ? "a symbolic link"
                                           : type == '3' ? "a character device"
                                           : type == '4' ? "a block device"
                                           : type == '6' ? "a FIFO"
                                                         : "an unsupported entry type";
                        _cleanup_free_ char *why = xasprintf(
                            "%s is not accepted; only regular files and directories", what);
                        r = refuse(err, index, name, why);
                        goto fail;
                }
                if (name[0] == '/') {
                        r = refuse(err, index, name, "an absolute name is not accepted");
                        goto fail;
                }
                _cleanup_free_ char *clean = NULL;
                struct al_error e = {0};
                if (files_clean_path(name, true, &clean, &e) < 0) {
                        r = refuse(err, index, name, e.msg);
                        goto fail;
                }
                if (STREQ(clean, ".") && !dir) {
                        r = refuse(err, index, name, "names the directory itself");
                        goto fail;
                }
                if (n >= FILES_TAR_ENTRIES_MAX) {
                        r = al_error_set_message(err, E2BIG, "tar: more than %d entries",
                                                 FILES_TAR_ENTRIES_MAX);
                        goto fail;
                }
                char *full = STREQ(rel, ".")     ? xstrdup(clean)
                             : STREQ(clean, ".") ? xstrdup(rel)
                                                 : xasprintf("%s/%s", rel, clean);
                v = xrealloc(v, n + 1, sizeof(*v));
                v[n++] = (struct entry){.path = full,
                                        .dir = dir,
                                        .off = off,
                                        .size = dir ? 0 : (size_t)size,
                                        .mode = (int)(mode & 0777)};
                off += padded;
        }
        *ret = v;
        *ret_n = n;
        return 0;
fail:
        entries_free(v, n);
        return r;
}

int files_tar_check(const char *rel, const void *data, size_t len, size_t *ret_entries,
                    struct al_error *err)
{
        struct entry *v = NULL;
        size_t n = 0;
        int r = parse(rel, data, len, &v, &n, err);
        if (r < 0)
                return r;
        entries_free(v, n);
        *ret_entries = n;
        return 0;
}

int files_tar_extract(int root, const char *rel, const void *data, size_t len, json_t **ret,
                      struct al_error *err)
{
        struct entry *v = NULL;
        size_t n = 0;
        int r = parse(rel, data, len, &v, &n, err);
        if (r < 0)
                return r;
        size_t files = 0, dirs = 0;
        uint64_t bytes = 0;
        if (!STREQ(rel, ".")) {
                r = files_mkdir(root, rel, true, err);
                if (r < 0)
                        goto out;
        }
        for (size_t i = 0; i < n; i++) {
                if (v[i].dir) {
                        if (!STREQ(v[i].path, "."))
                                r = files_mkdir(root, v[i].path, true, err);
                        dirs++;
                } else {
                        r = files_write_mode(root, v[i].path, (const char *)data + v[i].off,
                                             v[i].size, true, v[i].mode, err);
                        files++;
                        bytes += v[i].size;
                }
                if (r < 0)
                        goto out;
        }
        *ret = json_pack("{s:s, s:I, s:I, s:I}", "path", rel, "files", (json_int_t)files, "dirs",
                         (json_int_t)dirs, "bytes", (json_int_t)bytes);
out:
        entries_free(v, n);
        return r;
}

/* ---- writing ---- */

struct frame {
        DIR *d;
        char *path; /* "" for the archive's top */
};

struct files_tar_writer {
        struct frame stack[FILES_TAR_DEPTH_MAX + 1];
        size_t depth;
        int cur; /* the file being copied, or -1 */
        uint64_t cur_left, cur_pad;
        char pending[16 * BLOCK + NAME_MAX_TAR];
        size_t pending_len, pending_off;
        bool ended;
        size_t entries;
};

static void put_octal(char *f, size_t n, uint64_t v)
{
        /* n-1 digits and a NUL; the callers keep v within them. */
        f[n - 1] = '\0';
        for (size_t i = n - 1; i > 0; i--) {
                f[i - 1] = (char)('0' + (v & 7));
                v >>= 3;
        }
}

static void finish_header(char *h)
{
        memcpy(h + 257, "ustar", 6);
        memcpy(h + 263, "00", 2);
        memset(h + 148, ' ', 8);
        uint64_t sum = 0;
        for (size_t i = 0; i < BLOCK; i++)
                sum += (unsigned char)h[i];
        snprintf(h + 148, 8, "%06" PRIo64, sum);
        h[155] = ' ';
}

/* One entry's header(s) into w->pending: a pax header first when the name
 * or the size does not fit ustar's fields. */
static void add_header(struct files_tar_writer *w, const char *name, char type, mode_t mode,
                       uint64_t size, time_t mtime)
{
        char *out = w->pending;
        size_t o = 0, nlen = strlen(name);
        const char *base = name, *prefix = NULL;
        size_t plen = 0;
        if (nlen > 100) {
                /* ustar's prefix: split at a '/' so both halves fit. */
                for (const char *s = name + nlen - 1; s > name; s--)
                        if (*s == '/' && (size_t)(s - name) <= 155 && strlen(s + 1) <= 100 &&
                            s[1]) {
                                prefix = name;
                                plen = (size_t)(s - name);
                                base = s + 1;
                                break;
                        }
        }
        bool pax_path = nlen > 100 && !prefix;
        bool pax_size = size >= 077777777777ull;
        if (pax_path || pax_size) {
                char rec[NAME_MAX_TAR + 64];
                size_t rl = 0;
                if (pax_path) {
                        size_t body = 1 + 5 + nlen + 1; /* " path=" ... "\n" */
                        size_t total = body + 1;
                        while (total != body + (size_t)snprintf(NULL, 0, "%zu", total))
                                total = body + (size_t)snprintf(NULL, 0, "%zu", total);
                        rl += (size_t)snprintf(rec + rl, sizeof(rec) - rl, "%zu path=%s\n", total,
                                               name);
                }
                if (pax_size) {
                        char num[32];
                        int nl = snprintf(num, sizeof(num), "%" PRIu64, size);
                        size_t body = 1 + 5 + (size_t)nl + 1;
                        size_t total = body + 2;
                        while (total != body + (size_t)snprintf(NULL, 0, "%zu", total))
                                total = body + (size_t)snprintf(NULL, 0, "%zu", total);
                        rl += (size_t)snprintf(rec + rl, sizeof(rec) - rl, "%zu size=%s\n", total,
                                               num);
                }
                char *h = out + o;
                memset(h, 0, BLOCK);
                snprintf(h, 100, "PaxHeader");
                put_octal(h + 100, 8, 0644);
                put_octal(h + 108, 8, 0);
                put_octal(h + 116, 8, 0);
                put_octal(h + 124, 12, rl);
                put_octal(h + 136, 12, (uint64_t)mtime);
                h[156] = 'x';
                finish_header(h);
                o += BLOCK;
                memset(out + o, 0, (rl + BLOCK - 1) / BLOCK * BLOCK);
                memcpy(out + o, rec, rl);
                o += (rl + BLOCK - 1) / BLOCK * BLOCK;
        }
        char *h = out + o;
        memset(h, 0, BLOCK);
        if (pax_path)
                memcpy(h, name, 100);
        else {
                memcpy(h, base, strlen(base));
                if (prefix)
                        memcpy(h + 345, prefix, plen);
        }
        put_octal(h + 100, 8, mode & 0777);
        put_octal(h + 108, 8, 0);
        put_octal(h + 116, 8, 0);
        put_octal(h + 124, 12, pax_size ? 0 : size);
        put_octal(h + 136, 12, (uint64_t)(mtime < 0 ? 0 : mtime));
        h[156] = type;
        finish_header(h);
        o += BLOCK;
        w->pending_len = o;
        w->pending_off = 0;
}

int files_tar_writer_new(int root, const char *rel, struct files_tar_writer **ret,
                         struct al_error *err)
{
        int fd =
            fs_openat2(root, rel, O_RDONLY | O_DIRECTORY | O_NONBLOCK | O_CLOEXEC, 0, RESOLVE_TREE);
        if (fd == -EXDEV)
                return al_error_set_message(err, EXDEV, "%s: leads out of the workspace", rel);
        if (fd == -ELOOP)
                return al_error_set_message(err, ELOOP, "%s: a symbolic link is in the way", rel);
        if (fd < 0)
                return al_error_set(err, -fd, "%s", rel);
        DIR *d = fdopendir(fd);
        if (!d) {
                int e = errno;
                close(fd);
                return al_error_set(err, e, "%s", rel);
        }
        struct files_tar_writer *w = xcalloc(1, sizeof(*w));
        w->cur = -1;
        w->stack[0] = (struct frame){.d = d, .path = xstrdup("")};
        w->depth = 1;
        *ret = w;
        return 0;
}

/* The next entry's header into pending, or the end blocks; false when the
 * archive is complete. */
static bool next_entry(struct files_tar_writer *w)
{
        while (w->depth > 0) {
                struct frame *f = &w->stack[w->depth - 1];
                struct dirent *de = readdir(f->d);
                if (!de) {
                        closedir(f->d);
                        free(f->path);
                        w->depth--;
                        continue;
                }
                if (STREQ(de->d_name, ".") || STREQ(de->d_name, ".."))
                        continue;
                if (w->entries >= FILES_TAR_ENTRIES_MAX)
                        continue;
                struct stat st;
                if (fstatat(dirfd(f->d), de->d_name, &st, AT_SYMLINK_NOFOLLOW) < 0)
                        continue;
                _cleanup_free_ char *path =
                    *f->path ? xasprintf("%s/%s", f->path, de->d_name) : xstrdup(de->d_name);
                if (strlen(path) + 2 > NAME_MAX_TAR)
                        continue;
                if (S_ISDIR(st.st_mode)) {
                        if (w->depth > FILES_TAR_DEPTH_MAX)
                                continue;
                        int sub = fs_openat2(dirfd(f->d), de->d_name,
                                             O_RDONLY | O_DIRECTORY | O_NONBLOCK | O_CLOEXEC, 0,
                                             RESOLVE_TREE);
                        DIR *sd = sub >= 0 ? fdopendir(sub) : NULL;
                        if (!sd) {
                                if (sub >= 0)
                                        close(sub);
                                continue;
                        }
                        _cleanup_free_ char *dname = xasprintf("%s/", path);
                        add_header(w, dname, '5', st.st_mode, 0, st.st_mtime);
                        w->stack[w->depth++] = (struct frame){.d = sd, .path = TAKE_PTR(path)};
                        w->entries++;
                        return true;
                }
                if (!S_ISREG(st.st_mode))
                        continue; /* links and special files are left out */
                int fd = fs_openat2(dirfd(f->d), de->d_name,
                                    O_RDONLY | O_NONBLOCK | O_NOCTTY | O_CLOEXEC, 0, RESOLVE_TREE);
                if (fd < 0)
                        continue;
                if (fstat(fd, &st) < 0 || !S_ISREG(st.st_mode)) {
                        close(fd);
                        continue;
                }
                add_header(w, path, '0', st.st_mode, (uint64_t)st.st_size, st.st_mtime);
                w->cur = fd;
                w->cur_left = (uint64_t)st.st_size;
                w->cur_pad = (BLOCK - (uint64_t)st.st_size % BLOCK) % BLOCK;
                w->entries++;
                return true;
        }
        if (w->ended)
                return false;
        memset(w->pending, 0, 2 * BLOCK);
        w->pending_len = 2 * BLOCK;
        w->pending_off = 0;
        w->ended = true;
        return true;
}

ssize_t files_tar_writer_read(struct files_tar_writer *w, char *buf, size_t cap)
{
        size_t out = 0;
        while (out < cap) {
                if (w->pending_off < w->pending_len) {
                        size_t k = w->pending_len - w->pending_off;
                        if (k > cap - out)
                                k = cap - out;
                        memcpy(buf + out, w->pending + w->pending_off, k);
                        w->pending_off += k;
                        out += k;
                        continue;
                }
                if (w->cur >= 0) {
                        if (w->cur_left > 0) {
                                size_t want = cap - out;
                                if (want > w->cur_left)
                                        want = (size_t)w->cur_left;
                                ssize_t n = read(w->cur, buf + out, want);
                                if (n < 0 && errno == EINTR)
                                        continue;
                                if (n < 0)
                                        return -errno;
                                if (n == 0) {
                                        /* Shrunk since its header: zeros keep the
                                         * archive whole. */
                                        memset(buf + out, 0, want);
                                        n = (ssize_t)want;
                                }
                                out += (size_t)n;
                                w->cur_left -= (uint64_t)n;
                                continue;
                        }
                        if (w->cur_pad > 0) {
                                size_t k = cap - out;
                                if (k > w->cur_pad)
                                        k = (size_t)w->cur_pad;
                                memset(buf + out, 0, k);
                                out += k;
                                w->cur_pad -= k;
                                continue;
                        }
                        close(w->cur);
                        w->cur = -1;
                }
                if (!next_entry(w))
                        break;
        }
        return (ssize_t)out;
}

struct files_tar_writer *files_tar_writer_free(struct files_tar_writer *w)
{
        if (!w)
                return NULL;
        while (w->depth > 0) {
                closedir(w->stack[w->depth - 1].d);
                free(w->stack[w->depth - 1].path);
                w->depth--;
        }
        if (w->cur >= 0)
                close(w->cur);
        free(w);
        return NULL;
}
