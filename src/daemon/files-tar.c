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

#include "files-deny.h"
#include "files-tar.h"
#include "files.h"
#include "fs.h"
#include "tar.h"
#include "util.h"

#define BLOCK        512
#define RESOLVE_TREE (RESOLVE_BENEATH | RESOLVE_NO_SYMLINKS | RESOLVE_NO_MAGICLINKS)
#define NAME_MAX_TAR 4096

/* ---- reading: the one tar reader (tar.h), with the files API's policy ---- */

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
        size_t n = 0;
        struct tar_mem m = {.data = data, .len = len};
        struct tar_reader tr = {.read = tar_mem_read,
                                .src = &m,
                                .what = "tar",
                                .err = err,
                                .ext_max = NAME_MAX_TAR + 64};
        struct tar_entry t = {0};
        int r;
        while ((r = tar_next(&tr, &t)) > 0) {
                size_t index = t.index;
                if (t.size > len - m.off) {
                        r = al_error_set_message(err, EINVAL,
                                                 "tar entry %zu: runs past the end of the "
                                                 "archive",
                                                 index);
                        goto fail;
                }
                const char *name = t.name;
                char type = t.type;
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
                                        .off = m.off,
                                        .size = dir ? 0 : (size_t)t.size,
                                        .mode = (int)(t.mode & 0777)};
                tar_entry_clear(&t);
        }
        if (r < 0)
                goto fail;
        *ret = v;
        *ret_n = n;
        return 0;
fail:
        tar_entry_clear(&t);
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

/* Where entry `path` goes: its directory made and opened following no
 * link, and checked against deny as opened (with the name itself: a hard
 * link to a denied file is that file). The nearest existing directory is
 * checked before anything is made. */
static int entry_dir(int root, const char *path, bool dir, const struct files_deny *deny,
                     int *ret_fd, const char **ret_name, struct al_error *err)
{
        const char *slash = strrchr(path, '/');
        _cleanup_free_ char *parent =
            slash ? xasprintf("%.*s", (int)(slash - path), path) : xstrdup(".");
        *ret_name = slash ? slash + 1 : path;
        int r = files_deny_check(deny, root, path, false, err);
        if (r < 0)
                return r;
        if (!STREQ(parent, ".") && (r = files_mkdir(root, parent, true, err)) < 0)
                return r;
        int fd = fs_openat2(root, parent, O_RDONLY | O_DIRECTORY | O_CLOEXEC, 0,
                            RESOLVE_BENEATH | RESOLVE_NO_SYMLINKS | RESOLVE_NO_MAGICLINKS);
        if (fd < 0)
                return al_error_set(err, -fd, "%s", path);
        r = files_deny_check_fd(deny, root, fd, path, err);
        if (r >= 0)
                r = files_deny_check(deny, fd, *ret_name, dir, err);
        if (r < 0) {
                close(fd);
                return r;
        }
        *ret_fd = fd;
        return 0;
}

int files_tar_extract(int root, const char *rel, const void *data, size_t len, json_t **ret,
                      struct al_error *err)
{
        return files_tar_extract_deny(root, rel, data, len, NULL, ret, err);
}

int files_tar_extract_deny(int root, const char *rel, const void *data, size_t len,
                           const struct files_deny *deny, json_t **ret, struct al_error *err)
{
        struct entry *v = NULL;
        size_t n = 0;
        int r = parse(rel, data, len, &v, &n, err);
        if (r < 0)
                return r;
        size_t files = 0, dirs = 0;
        uint64_t bytes = 0;
        /* All of it checked before anything is written; each entry again
         * below, where it is written. */
        for (size_t i = 0; deny && i < n; i++)
                if ((r = files_deny_check(deny, root, v[i].path, false, err)) < 0)
                        goto out;
        if (!STREQ(rel, ".")) {
                r = files_mkdir(root, rel, true, err);
                if (r < 0)
                        goto out;
        }
        for (size_t i = 0; i < n; i++) {
                int pfd = -1;
                const char *name = v[i].path;
                if (deny && !STREQ(v[i].path, ".")) {
                        r = entry_dir(root, v[i].path, v[i].dir, deny, &pfd, &name, err);
                        if (r < 0)
                                goto out;
                }
                int at = pfd >= 0 ? pfd : root;
                if (v[i].dir) {
                        if (!STREQ(v[i].path, "."))
                                r = files_mkdir(at, name, true, err);
                        dirs++;
                } else {
                        r = files_write_mode(at, name, (const char *)data + v[i].off, v[i].size,
                                             true, v[i].mode, err);
                        files++;
                        bytes += v[i].size;
                }
                if (pfd >= 0)
                        close(pfd);
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
        struct files_deny *deny; /* entries left out by identity, or NULL */
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
                /* A denied entry moved in while the tar is written is
                 * still left out: it is known by identity. */
                if (files_deny_has(w->deny, &st))
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
                        struct stat sst;
                        if (sub >= 0 && (fstat(sub, &sst) < 0 || files_deny_has(w->deny, &sst))) {
                                close(sub);
                                continue;
                        }
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
                if (fstat(fd, &st) < 0 || !S_ISREG(st.st_mode) || files_deny_has(w->deny, &st)) {
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

void files_tar_writer_deny(struct files_tar_writer *w, struct files_deny *deny)
{
        files_deny_free(w->deny);
        w->deny = deny;
}

struct files_tar_writer *files_tar_writer_free(struct files_tar_writer *w)
{
        if (!w)
                return NULL;
        files_deny_free(w->deny);
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
