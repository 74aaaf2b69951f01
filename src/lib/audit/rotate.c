/* SPDX-License-Identifier: Apache-2.0 */
#include <dirent.h>
#include <fcntl.h>
#include <inttypes.h>
#include <stdarg.h>
#include <stdio.h>
#include <string.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <time.h>

#include "audit.h"
#include "paths.h"
#include "util.h"
#include "audit-internal.h"

#define ROTATE_MAX_FILES 100000
int audit_pread_full(int fd, char *buf, size_t len, off_t off)
{
        while (len > 0) {
                ssize_t n = pread(fd, buf, len, off);
                if (n < 0) {
                        if (errno == EINTR)
                                continue;
                        return -errno;
                }
                if (n == 0)
                        return -EIO; /* shrank under us */
                buf += n;
                len -= (size_t)n;
                off += n;
        }
        return 0;
}

/* Where the line ending just before `end` begins: the offset after the last
 * newline before it, 0 when there is none. Reads backwards in small steps,
 * so finding the end of the chain costs a page, not a megabyte. -EMSGSIZE
 * when the line is longer than AUDIT_LINE_MAX. */
static int line_start(int fd, off_t end, off_t *ret)
{
        char buf[4096];
        off_t pos = end;

        while (pos > 0) {
                size_t n = pos < (off_t)sizeof(buf) ? (size_t)pos : sizeof(buf);
                int r = audit_pread_full(fd, buf, n, pos - (off_t)n);
                if (r < 0)
                        return r;
                char *nl = memrchr(buf, '\n', n);
                if (nl) {
                        *ret = pos - (off_t)n + (nl - buf) + 1;
                        return end - *ret > AUDIT_LINE_MAX ? -EMSGSIZE : 0;
                }
                pos -= (off_t)n;
                if (end - pos > AUDIT_LINE_MAX)
                        return -EMSGSIZE;
        }
        *ret = 0;
        return 0;
}

/* The seq a record's first bytes claim: {"seq":N,… is how every line starts. */
uint64_t audit_fragment_seq(const char *s, size_t len)
{
        static const char head[] = "{\"seq\":";
        uint64_t v = 0;
        size_t i = sizeof(head) - 1;

        if (len <= i || memcmp(s, head, i) != 0)
                return 0;
        for (; i < len && s[i] >= '0' && s[i] <= '9'; i++) {
                if (v > (UINT64_MAX - 9) / 10)
                        return 0;
                v = v * 10 + (uint64_t)(s[i] - '0');
        }
        return v;
}

/* Read the last line of a log file whose first `size` bytes end in a newline:
 * its seq and hash. */
static int read_tail(int fd, off_t size, const char *name, uint64_t *ret_seq, char *ret_hash,
                     struct al_error *err)
{
        if (size == 0) {
                *ret_seq = 0;
                memcpy(ret_hash, AUDIT_GENESIS, AUDIT_HASH_HEX + 1);
                return 0;
        }

        char last;
        int r = audit_pread_full(fd, &last, 1, size - 1);
        if (r < 0)
                return al_error_set(err, r, "reading the end of \"%s\"", name);
        if (last != '\n') {
                al_error_set(err, 0,
                             "\"%s\": the last line is incomplete (no newline at the end); "
                             "check it with `airlock audit verify`",
                             name);
                return -EBADMSG;
        }
        off_t start;
        r = line_start(fd, size - 1, &start);
        if (r == -EMSGSIZE) {
                al_error_set(err, 0, "\"%s\": the last line is longer than %d bytes", name,
                             AUDIT_LINE_MAX);
                return -EBADMSG;
        }
        if (r < 0)
                return al_error_set(err, r, "reading the end of \"%s\"", name);
        size_t len = (size_t)(size - 1 - start);
        _cleanup_free_ char *buf = xcalloc(len + 1, 1);
        r = audit_pread_full(fd, buf, len, start);
        if (r < 0)
                return al_error_set(err, r, "reading the end of \"%s\"", name);

        json_error_t jerr;
        json_auto_t *o = json_loadb(buf, len, JSON_REJECT_DUPLICATES, &jerr);
        json_t *seq = json_object_get(o, "seq");
        if (!o || !json_is_integer(seq) || json_integer_value(seq) < 1) {
                al_error_set(err, 0,
                             "\"%s\": cannot continue the chain: the last line is not an audit "
                             "record; check it with `airlock audit verify`",
                             name);
                return -EBADMSG;
        }
        *ret_seq = (uint64_t)json_integer_value(seq);
        audit_hash_hex(buf, len, ret_hash);
        return 0;
}

static char *rotated_name(const char *path, unsigned long i)
{
        return xasprintf("%s.%lu", path, i);
}

/* The end of the chain before byte `end` of our file: its last line, or, at
 * the very start of a fresh file after a rotation, FILE.1's last line. */
int audit_tail_before(struct audit *a, off_t end, uint64_t *ret_seq, char *ret_hash,
                      struct al_error *err)
{
        if (end > 0)
                return read_tail(a->fd, end, a->path, ret_seq, ret_hash, err);

        _cleanup_free_ char *older = rotated_name(a->path, 1);
        _cleanup_close_ int fd =
            open(older, O_RDONLY | O_CLOEXEC | O_NOFOLLOW | O_NOCTTY | O_NONBLOCK);
        struct stat ost;
        if (fd < 0 && errno != ENOENT)
                return al_error_set(err, errno, "opening \"%s\"", older);
        if (fd >= 0 && fstat(fd, &ost) < 0)
                return al_error_set(err, errno, "inspecting \"%s\"", older);
        return read_tail(fd, fd >= 0 ? ost.st_size : 0, older, ret_seq, ret_hash, err);
}

/* Under the lock: FILE.n-1 → FILE.n, …, FILE → FILE.1, then lock the new FILE. */
int audit_rotate_log(struct audit *a, struct al_error *err)
{
        int r = audit_flush(a);
        if (r < 0)
                return al_error_set(err, r, "syncing audit log \"%s\"", a->path);

        unsigned long top = 1;
        for (;; top++) {
                struct stat st;
                _cleanup_free_ char *name = rotated_name(a->path, top);
                if (lstat(name, &st) < 0) {
                        if (errno == ENOENT)
                                break;
                        return al_error_set(err, errno, "inspecting \"%s\"", name);
                }
                if (top >= ROTATE_MAX_FILES)
                        return al_error_set(err, EMLINK, "rotating audit log \"%s\"", a->path);
        }
        if (a->keep > 0 && top > a->keep)
                top = a->keep;
        for (unsigned long i = top; i > 1; i--) {
                _cleanup_free_ char *from = rotated_name(a->path, i - 1);
                _cleanup_free_ char *to = rotated_name(a->path, i);
                if (rename(from, to) < 0)
                        return al_error_set(err, errno, "renaming \"%s\" to \"%s\"", from, to);
        }
        _cleanup_free_ char *first = rotated_name(a->path, 1);
        if (rename(a->path, first) < 0)
                return al_error_set(err, errno, "renaming \"%s\" to \"%s\"", a->path, first);
        r = audit_fsync_dir_of(a->path);
        if (r < 0)
                return al_error_set(err, r, "syncing the directory of \"%s\"", a->path);

        /* Other writers may reach the new file before us; they continue the
         * chain from FILE.1 just as we would, and audit_sync_tail() picks their lines
         * up once we hold the lock. */
        int fd = -1;
        r = audit_log_open(a->path, &fd);
        if (r < 0)
                return al_error_set(err, r, "creating audit log \"%s\"", a->path);
        close(a->fd);
        a->fd = fd;
        a->known_size = -1;
        return audit_lock_current(a, err);
}

/* Under the lock, with the file ending in a partial line at [start, size):
 * a writer died mid-write, or the disk filled and its own cleanup failed.
 * Every later line would be built on it, so it is repaired here, in the way
 * that keeps the chain verifiable. */
int audit_repair_torn(struct audit *a, off_t size, struct al_error *err)
{
        off_t start;
        int r = line_start(a->fd, size, &start);
        if (r == -EMSGSIZE) {
                al_error_set(err, 0,
                             "\"%s\": the last line is incomplete and longer than %d bytes; "
                             "check it with `airlock audit verify`",
                             a->path, AUDIT_LINE_MAX);
                return -EBADMSG;
        }
        if (r < 0)
                return al_error_set(err, r, "reading the end of \"%s\"", a->path);
        size_t len = (size_t)(size - start);
        _cleanup_free_ char *frag = xcalloc(len + 1, 1);
        r = audit_pread_full(a->fd, frag, len, start);
        if (r < 0)
                return al_error_set(err, r, "reading the end of \"%s\"", a->path);

        uint64_t seq;
        char hash[AUDIT_HASH_HEX + 1];
        r = audit_tail_before(a, start, &seq, hash, err);
        if (r < 0)
                return r;

        /* Only the newline is missing and the record chains on: complete it. */
        json_error_t jerr;
        json_auto_t *o = json_loadb(frag, len, JSON_REJECT_DUPLICATES, &jerr);
        json_t *fseq = json_object_get(o, "seq");
        const char *fprev = json_string_value(json_object_get(o, "prev"));
        if (json_is_integer(fseq) && (uint64_t)json_integer_value(fseq) == seq + 1 && fprev &&
            STREQ(fprev, hash)) {
                r = write_full(a->fd, "\n", 1);
                if (r >= 0 && fdatasync(a->fd) < 0)
                        r = -errno;
                if (r < 0)
                        return al_error_set(err, r, "completing the last line of \"%s\"", a->path);
                a->seq = seq + 1;
                audit_hash_hex(frag, len, a->hash);
                a->known_size = size + 1;
                return 0;
        }

        /* Anything else is cut off, and what was cut is written down. */
        if (ftruncate(a->fd, start) < 0 || fdatasync(a->fd) < 0)
                return al_error_set(err, errno, "cutting the torn last line of \"%s\"", a->path);
        a->seq = seq;
        memcpy(a->hash, hash, sizeof(a->hash));
        a->known_size = start;

        char frag_hash[AUDIT_HASH_HEX + 1];
        audit_hash_hex(frag, len, frag_hash);
        uint64_t claimed = audit_fragment_seq(frag, len);
        _cleanup_free_ char *data = len <= AUDIT_TORN_DATA_MAX ? base64_encode(frag, len) : NULL;
        json_auto_t *f =
            json_pack("{s:s, s:I, s:I, s:s, s:o, s:o}", "file", a->path, "offset",
                      (json_int_t)start, "bytes", (json_int_t)len, "sha256", frag_hash, "tornSeq",
                      claimed ? json_integer((json_int_t)claimed) : json_null(), "data",
                      data ? json_string(data) : json_null());
        size_t llen = 0;
        _cleanup_free_ char *line =
            f ? audit_build_line(a, AUDIT_SANDBOX_NONE, "audit.torn", f, &llen) : NULL;
        if (!line)
                return al_error_set(err, ENOMEM, "recording the torn line of \"%s\"", a->path);
        r = audit_write_line(a, line, llen, err);
        if (r < 0)
                return r;
        r = audit_flush(a);
        if (r < 0)
                return al_error_set(err, r, "syncing audit log \"%s\"", a->path);
        return 0;
}

static int cmp_desc(const void *x, const void *y)
{
        unsigned long a = *(const unsigned long *)x, b = *(const unsigned long *)y;
        return a < b ? 1 : a > b ? -1 : 0;
}

int audit_rotated_files(const char *path, char ***ret, size_t *ret_n, unsigned long *ret_missing)
{
        _cleanup_free_ char *dir = xstrdup(path);
        char *slash = strrchr(dir, '/');
        const char *base = slash ? path + (slash - dir) + 1 : path;
        if (slash == dir)
                slash[1] = '\0';
        else if (slash)
                *slash = '\0';
        else {
                free(dir);
                dir = xstrdup(".");
        }
        size_t blen = strlen(base);

        _cleanup_(closedirp) DIR *d = opendir(dir);
        if (!d && errno != ENOENT)
                return -errno;
        _cleanup_free_ unsigned long *idx = NULL;
        size_t n_idx = 0, cap = 0;
        for (struct dirent *de; d && (errno = 0, de = readdir(d));) {
                const char *name = de->d_name;
                uint64_t v;
                /* FILE.N with N a plain decimal number, no leading zero. */
                if (strncmp(name, base, blen) != 0 || name[blen] != '.' || name[blen + 1] == '0' ||
                    strspn(name + blen + 1, "0123456789") != strlen(name + blen + 1) ||
                    safe_atou64(name + blen + 1, &v) < 0 || v == 0 || v > ROTATE_MAX_FILES)
                        continue;
                if (n_idx >= ROTATE_MAX_FILES)
                        return -EMLINK;
                if (n_idx == cap) {
                        cap = cap ? cap * 2 : 16;
                        idx = xrealloc(idx, cap, sizeof(*idx));
                }
                idx[n_idx++] = (unsigned long)v;
        }
        if (d && errno != 0)
                return -errno;
        if (n_idx > 0)
                qsort(idx, n_idx, sizeof(*idx), cmp_desc);

        unsigned long missing = 0;
        for (size_t i = 0; i < n_idx; i++) {
                unsigned long below = i + 1 < n_idx ? idx[i + 1] : 0;
                if (idx[i] - below > 1) {
                        missing = idx[i] - 1;
                        break;
                }
        }
        char **v = NULL;
        size_t n = 0;
        for (size_t i = 0; i < n_idx; i++) {
                _cleanup_free_ char *name = rotated_name(path, idx[i]);
                v = strv_append(v, &n, name);
        }
        v = strv_append(v, &n, path);
        *ret = v;
        if (ret_n)
                *ret_n = n;
        if (ret_missing)
                *ret_missing = missing;
        return 0;
}

int audit_rotated_paths(const char *path, char ***ret, size_t *ret_n)
{
        return audit_rotated_files(path, ret, ret_n, NULL);
}

int audit_parse_rotate(const char *s, struct audit_options *opt)
{
        if (!s || !*s)
                return -EINVAL;
        _cleanup_free_ char *size = xstrdup(s);
        char *colon = strchr(size, ':');
        uint64_t keep = 0, bytes = 0;
        if (colon) {
                *colon = '\0';
                if (STREQ(colon + 1, "all"))
                        keep = AUDIT_KEEP_ALL;
                else if (safe_atou64(colon + 1, &keep) < 0 || keep == 0 || keep >= AUDIT_KEEP_ALL ||
                         keep >= ROTATE_MAX_FILES)
                        return -EINVAL;
        }
        if (STREQ(size, "never") || STREQ(size, "0"))
                bytes = AUDIT_ROTATE_NEVER;
        else if (parse_size(size, &bytes) < 0 || bytes < 4096 || bytes >= AUDIT_ROTATE_NEVER)
                return -EINVAL;
        opt->rotate_size = bytes;
        opt->rotate_keep = (unsigned)keep;
        return 0;
}
