/* SPDX-License-Identifier: Apache-2.0 */
#include <dirent.h>
#include <fcntl.h>
#include <inttypes.h>
/* The one-shot SHA-256 of libcrypto's low-level interface: the EVP path would
 * load the provider machinery first, which costs more than a short sandbox
 * run's whole setup. */
#define OPENSSL_SUPPRESS_DEPRECATED
#include <openssl/sha.h>
#include <stdarg.h>
#include <stdio.h>
#include <string.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <time.h>

#include "audit.h"
#include "paths.h"
#include "util.h"

#define ROTATE_MAX_FILES 100000
#define APPEND_MAX_TRIES 16

struct audit {
        char *path;
        int fd; /* O_RDWR so the tail can be read from the very inode we hold locked */
        struct audit_options opt;
        off_t known_size; /* file size when we last read or wrote it; -1: unknown */
        uint64_t seq;     /* last line's seq, 0 before the first line */
        char hash[AUDIT_HASH_HEX + 1];
        uint64_t flush_deadline; /* monotonic µs; 0 when nothing is pending */
        uint64_t rotate_at;      /* 0: never */
        unsigned keep;           /* 0: all */
};

void audit_hash_hex(const void *buf, size_t len, char ret[static AUDIT_HASH_HEX + 1])
{
        static const char hex[] = "0123456789abcdef";
        unsigned char md[SHA256_DIGEST_LENGTH];
        SHA256_CTX c;

        if (SHA256_Init(&c) != 1 || SHA256_Update(&c, buf, len) != 1 || SHA256_Final(md, &c) != 1)
                abort(); /* SHA-256 missing from libcrypto: nothing sane to do */
        for (unsigned i = 0; i < 32; i++) {
                ret[2 * i] = hex[md[i] >> 4];
                ret[2 * i + 1] = hex[md[i] & 15];
        }
        ret[AUDIT_HASH_HEX] = '\0';
}

static bool is_hash_hex(const char *s)
{
        if (!s || strlen(s) != AUDIT_HASH_HEX)
                return false;
        for (const char *p = s; *p; p++)
                if (!((*p >= '0' && *p <= '9') || (*p >= 'a' && *p <= 'f')))
                        return false;
        return true;
}

static int mkdir_parents(const char *path)
{
        _cleanup_free_ char *p = xstrdup(path);

        for (char *s = strchr(p + 1, '/'); s; s = strchr(s + 1, '/')) {
                *s = '\0';
                if (mkdir(p, 0700) < 0 && errno != EEXIST)
                        return -errno;
                *s = '/';
        }
        return 0;
}

static int open_log(const char *path, int *ret_fd)
{
        struct stat st;
        _cleanup_close_ int fd =
            open(path, O_RDWR | O_APPEND | O_CREAT | O_CLOEXEC | O_NOFOLLOW | O_NOCTTY | O_NONBLOCK,
                 0600);
        if (fd < 0)
                return -errno;
        if (fstat(fd, &st) < 0)
                return -errno;
        if (!S_ISREG(st.st_mode))
                return -EINVAL;
        *ret_fd = TAKE_FD(fd);
        return 0;
}

static int pread_full(int fd, char *buf, size_t len, off_t off)
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
                int r = pread_full(fd, buf, n, pos - (off_t)n);
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
static uint64_t fragment_seq(const char *s, size_t len)
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
        int r = pread_full(fd, &last, 1, size - 1);
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
        r = pread_full(fd, buf, len, start);
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
static int tail_before(struct audit *a, off_t end, uint64_t *ret_seq, char *ret_hash,
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

/* Take the lock on the file that is at a->path now; another writer may have
 * rotated ours away while we waited. */
static int lock_current(struct audit *a, struct al_error *err)
{
        for (unsigned tries = 0;; tries++) {
                struct stat fst, pst;

                if (flock(a->fd, LOCK_EX) < 0) {
                        if (errno == EINTR)
                                continue;
                        return al_error_set(err, errno, "locking audit log \"%s\"", a->path);
                }
                if (fstat(a->fd, &fst) < 0)
                        return al_error_set(err, errno, "inspecting audit log \"%s\"", a->path);
                if (lstat(a->path, &pst) == 0) {
                        if (pst.st_dev == fst.st_dev && pst.st_ino == fst.st_ino)
                                return 0;
                } else if (errno != ENOENT)
                        return al_error_set(err, errno, "inspecting audit log \"%s\"", a->path);

                if (tries >= APPEND_MAX_TRIES)
                        return al_error_set(err, EAGAIN, "audit log \"%s\" keeps being replaced",
                                            a->path);
                int fd = -1, r = open_log(a->path, &fd);
                if (r < 0)
                        return al_error_set(err, r, "reopening audit log \"%s\"", a->path);
                close(a->fd); /* drops the lock on the old file */
                a->fd = fd;
                a->known_size = -1;
        }
}

static void unlock(struct audit *a)
{
        flock(a->fd, LOCK_UN);
}

static int fsync_dir_of(const char *path)
{
        _cleanup_free_ char *dir = xstrdup(path);
        char *slash = strrchr(dir, '/');

        if (slash == dir)
                slash[1] = '\0';
        else if (slash)
                *slash = '\0';
        else {
                free(dir);
                dir = xstrdup(".");
        }
        _cleanup_close_ int fd = open(dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
        if (fd < 0)
                return -errno;
        if (fsync(fd) < 0 && errno != EINVAL)
                return -errno;
        return 0;
}

int audit_flush(struct audit *a)
{
        if (!a || a->flush_deadline == 0)
                return 0;
        if (fdatasync(a->fd) < 0)
                return -errno;
        a->flush_deadline = 0;
        return 0;
}

uint64_t audit_flush_deadline(const struct audit *a)
{
        return a ? a->flush_deadline : 0;
}

bool audit_needs_flush(const struct audit *a, uint64_t now_us)
{
        return a && a->flush_deadline != 0 && now_us >= a->flush_deadline;
}

/* Under the lock: FILE.n-1 → FILE.n, …, FILE → FILE.1, then lock the new FILE. */
static int rotate(struct audit *a, struct al_error *err)
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
        r = fsync_dir_of(a->path);
        if (r < 0)
                return al_error_set(err, r, "syncing the directory of \"%s\"", a->path);

        /* Other writers may reach the new file before us; they continue the
         * chain from FILE.1 just as we would, and sync_tail() picks their lines
         * up once we hold the lock. */
        int fd = -1;
        r = open_log(a->path, &fd);
        if (r < 0)
                return al_error_set(err, r, "creating audit log \"%s\"", a->path);
        close(a->fd);
        a->fd = fd;
        a->known_size = -1;
        return lock_current(a, err);
}

static void format_ts(uint64_t us, char buf[static 32])
{
        time_t secs = (time_t)(us / 1000000);
        struct tm tm;

        gmtime_r(&secs, &tm);
        size_t n = strftime(buf, 32, "%Y-%m-%dT%H:%M:%S", &tm);
        snprintf(buf + n, 32 - n, ".%06uZ", (unsigned)(us % 1000000));
}

static const char *const reserved_keys[] = {"seq", "ts", "sandbox", "kind", "prev"};

static int redact_value(const struct audit *a, json_t *v, json_t **ret, struct al_error *err)
{
        switch (json_typeof(v)) {
        case JSON_STRING: {
                _cleanup_free_ char *out = NULL;
                size_t out_len = 0;
                int r = a->opt.redact(a->opt.redact_userdata, json_string_value(v),
                                      json_string_length(v), &out, &out_len);
                if (r < 0)
                        return al_error_set(err, r, "redacting an audit field");
                if (!out) {
                        *ret = json_incref(v);
                        return 0;
                }
                *ret = json_stringn(out, out_len);
                if (!*ret)
                        return al_error_set(err, 0, "redacting an audit field: invalid UTF-8");
                return 0;
        }
        case JSON_OBJECT: {
                json_auto_t *o = json_object();
                const char *key;
                json_t *val;
                json_object_foreach(v, key, val)
                {
                        json_t *c = NULL;
                        int r = redact_value(a, val, &c, err);
                        if (r < 0)
                                return r;
                        if (json_object_set_new(o, key, c) < 0)
                                return al_error_set(err, ENOMEM, "copying an audit field");
                }
                *ret = TAKE_PTR(o);
                return 0;
        }
        case JSON_ARRAY: {
                json_auto_t *o = json_array();
                size_t i;
                json_t *val;
                json_array_foreach(v, i, val)
                {
                        json_t *c = NULL;
                        int r = redact_value(a, val, &c, err);
                        if (r < 0)
                                return r;
                        if (json_array_append_new(o, c) < 0)
                                return al_error_set(err, ENOMEM, "copying an audit field");
                }
                *ret = TAKE_PTR(o);
                return 0;
        }
        default:
                *ret = json_incref(v);
                return 0;
        }
}

static char *build_line(const struct audit *a, const char *sandbox, const char *kind, json_t *body,
                        size_t *ret_len)
{
        char ts[32];
        json_auto_t *o = json_object();

        format_ts(now_realtime_us(), ts);
        if (json_object_set_new(o, "seq", json_integer((json_int_t)(a->seq + 1))) < 0 ||
            json_object_set_new(o, "ts", json_string(ts)) < 0 ||
            json_object_set_new(o, "sandbox", json_string(sandbox)) < 0 ||
            json_object_set_new(o, "kind", json_string(kind)) < 0 ||
            (body && json_object_update(o, body) < 0) ||
            json_object_set_new(o, "prev", json_string(a->hash)) < 0)
                return NULL;
        char *s = json_dumps(o, JSON_COMPACT);
        if (s)
                *ret_len = strlen(s);
        return s;
}

static int write_line(struct audit *a, char *line, size_t len, struct al_error *err)
{
        /* The NUL jansson left at line[len] becomes the newline: one write(). */
        line[len] = '\n';
        int r = write_full(a->fd, line, len + 1);
        line[len] = '\0';
        if (r < 0) {
                /* Never leave half a line: it would break every later append. */
                if (a->known_size >= 0) {
                        int t = ftruncate(a->fd, a->known_size);
                        (void)t;
                }
                return al_error_set(err, r, "writing audit log \"%s\"", a->path);
        }
        a->known_size += (off_t)len + 1;
        a->seq++;
        audit_hash_hex(line, len, a->hash);

        if (a->opt.sync == AUDIT_SYNC_EVENT) {
                if (fdatasync(a->fd) < 0)
                        return al_error_set(err, errno, "syncing audit log \"%s\"", a->path);
                return 0;
        }
        uint64_t now = now_monotonic_us();
        if (a->flush_deadline == 0)
                a->flush_deadline = now + a->opt.batch_ms * 1000;
        if (now >= a->flush_deadline) {
                r = audit_flush(a);
                if (r < 0)
                        return al_error_set(err, r, "syncing audit log \"%s\"", a->path);
        }
        return 0;
}

/* Under the lock, with the file ending in a partial line at [start, size):
 * a writer died mid-write, or the disk filled and its own cleanup failed.
 * Every later line would be built on it, so it is repaired here, in the way
 * that keeps the chain verifiable. */
static int repair_torn(struct audit *a, off_t size, struct al_error *err)
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
        r = pread_full(a->fd, frag, len, start);
        if (r < 0)
                return al_error_set(err, r, "reading the end of \"%s\"", a->path);

        uint64_t seq;
        char hash[AUDIT_HASH_HEX + 1];
        r = tail_before(a, start, &seq, hash, err);
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
        uint64_t claimed = fragment_seq(frag, len);
        _cleanup_free_ char *data = len <= AUDIT_TORN_DATA_MAX ? base64_encode(frag, len) : NULL;
        json_auto_t *f =
            json_pack("{s:s, s:I, s:I, s:s, s:o, s:o}", "file", a->path, "offset",
                      (json_int_t)start, "bytes", (json_int_t)len, "sha256", frag_hash, "tornSeq",
                      claimed ? json_integer((json_int_t)claimed) : json_null(), "data",
                      data ? json_string(data) : json_null());
        size_t llen = 0;
        _cleanup_free_ char *line =
            f ? build_line(a, AUDIT_SANDBOX_NONE, "audit.torn", f, &llen) : NULL;
        if (!line)
                return al_error_set(err, ENOMEM, "recording the torn line of \"%s\"", a->path);
        r = write_line(a, line, llen, err);
        if (r < 0)
                return r;
        r = audit_flush(a);
        if (r < 0)
                return al_error_set(err, r, "syncing audit log \"%s\"", a->path);
        return 0;
}

/* Under the lock: make seq and hash describe the current end of the chain. */
static int sync_tail(struct audit *a, struct al_error *err)
{
        struct stat st;

        if (fstat(a->fd, &st) < 0)
                return al_error_set(err, errno, "inspecting audit log \"%s\"", a->path);
        if (st.st_size == a->known_size)
                return 0;
        if (st.st_size > 0) {
                char last;
                int r = pread_full(a->fd, &last, 1, st.st_size - 1);
                if (r < 0)
                        return al_error_set(err, r, "reading the end of \"%s\"", a->path);
                if (last != '\n')
                        return repair_torn(a, st.st_size, err);
        }
        int r = tail_before(a, st.st_size, &a->seq, a->hash, err);
        if (r < 0)
                return r;
        a->known_size = st.st_size;
        return 0;
}

int audit_append(struct audit *a, const char *sandbox, const char *kind, json_t *fields,
                 struct al_error *err)
{
        if (!a || !sandbox || !*sandbox || !kind || !*kind)
                return al_error_set(err, EINVAL, "audit event without sandbox or kind");
        if (fields && !json_is_object(fields))
                return al_error_set(err, 0, "audit event \"%s\": fields are not an object", kind);
        for (size_t i = 0; i < ARRAY_SIZE(reserved_keys); i++)
                if (json_object_get(fields, reserved_keys[i]))
                        return al_error_set(err, 0, "audit event \"%s\": field \"%s\" is reserved",
                                            kind, reserved_keys[i]);

        json_auto_t *body = NULL;
        if (fields && a->opt.redact) {
                int r = redact_value(a, fields, &body, err);
                if (r < 0)
                        return al_error_wrap(err, "audit event \"%s\"", kind);
        } else
                body = json_incref(fields);

        int r = lock_current(a, err);
        if (r < 0)
                return r;
        for (unsigned tries = 0;; tries++) {
                r = sync_tail(a, err);
                if (r < 0)
                        break;
                size_t len = 0;
                _cleanup_free_ char *line = build_line(a, sandbox, kind, body, &len);
                if (!line) {
                        r = al_error_set(err, 0, "audit event \"%s\": cannot encode it as JSON",
                                         kind);
                        break;
                }
                if (len + 1 > AUDIT_LINE_MAX) {
                        r = al_error_set(err, 0, "audit event \"%s\" is larger than %d bytes", kind,
                                         AUDIT_LINE_MAX);
                        break;
                }
                if (a->rotate_at > 0 && a->known_size > 0 && tries < APPEND_MAX_TRIES &&
                    (uint64_t)a->known_size + len + 1 > a->rotate_at) {
                        r = rotate(a, err);
                        if (r < 0)
                                break;
                        continue;
                }
                r = write_line(a, line, len, err);
                break;
        }
        unlock(a);
        return r;
}

int audit_reserve(struct audit *a, struct al_error *err)
{
        struct stat st;
        if (!a)
                return 0;
        int r = lock_current(a, err);
        if (r < 0)
                return r;
        if (fstat(a->fd, &st) < 0)
                r = al_error_set(err, errno, "inspecting audit log \"%s\"", a->path);
        else if (fallocate(a->fd, FALLOC_FL_KEEP_SIZE, st.st_size, AUDIT_RESERVE_BYTES) < 0 &&
                 errno != EOPNOTSUPP && errno != ENOSYS)
                r = al_error_set(err, errno,
                                 "reserving room for the records to come in audit log \"%s\"",
                                 a->path);
        unlock(a);
        return r;
}

int audit_open(const char *path, const struct audit_options *opt, struct audit **ret,
               struct al_error *err)
{
        if (!path || !*path)
                return al_error_set(err, EINVAL, "opening the audit log");
        int r = mkdir_parents(path);
        if (r < 0)
                return al_error_set(err, r, "creating the directory of audit log \"%s\"", path);
        int fd = -1;
        r = open_log(path, &fd);
        if (r < 0)
                return al_error_set(err, r, "opening audit log \"%s\"", path);

        struct audit *a = xcalloc(1, sizeof(*a));
        a->path = xstrdup(path);
        a->fd = fd;
        if (opt)
                a->opt = *opt;
        if (a->opt.batch_ms == 0)
                a->opt.batch_ms = 100;
        a->rotate_at = a->opt.rotate_size == 0                    ? AUDIT_ROTATE_SIZE_DEFAULT
                       : a->opt.rotate_size == AUDIT_ROTATE_NEVER ? 0
                                                                  : a->opt.rotate_size;
        a->keep = a->opt.rotate_keep == 0                ? AUDIT_ROTATE_KEEP_DEFAULT
                  : a->opt.rotate_keep == AUDIT_KEEP_ALL ? 0
                                                         : a->opt.rotate_keep;
        a->known_size = -1;
        memcpy(a->hash, AUDIT_GENESIS, sizeof(a->hash));

        r = lock_current(a, err);
        if (r >= 0) {
                r = sync_tail(a, err);
                unlock(a);
        }
        if (r < 0) {
                audit_close(a);
                return r;
        }
        *ret = a;
        return 0;
}

uint64_t audit_last_seq(const struct audit *a)
{
        return a ? a->seq : 0;
}

const char *audit_last_hash(const struct audit *a)
{
        return a ? a->hash : NULL;
}

struct audit *audit_close(struct audit *a)
{
        if (!a)
                return NULL;
        (void)audit_flush(a);
        if (a->fd >= 0)
                close(a->fd);
        free(a->path);
        free(a);
        return NULL;
}

char *audit_default_path(uid_t uid, const char *home)
{
        return paths_audit_log(uid, home);
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

int audit_foreach_line(const char *path,
                       int (*cb)(const char *line, size_t len, uint64_t lineno, bool complete,
                                 void *userdata),
                       void *userdata, struct al_error *err)
{
        struct stat st;
        _cleanup_close_ int fd = open(path, O_RDONLY | O_CLOEXEC | O_NOCTTY);
        if (fd < 0)
                return al_error_set(err, errno, "opening \"%s\"", path);
        if (fstat(fd, &st) < 0)
                return al_error_set(err, errno, "inspecting \"%s\"", path);
        if (S_ISDIR(st.st_mode))
                return al_error_set(err, EISDIR, "reading \"%s\"", path);

        size_t cap = 64 * 1024, len = 0, start = 0;
        _cleanup_free_ char *buf = xcalloc(cap, 1);
        uint64_t lineno = 0;
        bool eof = false;
        for (;;) {
                char *nl = memchr(buf + start, '\n', len - start);
                if (nl) {
                        *nl = '\0';
                        int r =
                            cb(buf + start, (size_t)(nl - (buf + start)), ++lineno, true, userdata);
                        if (r < 0)
                                return r;
                        start = (size_t)(nl + 1 - buf);
                        continue;
                }
                if (eof) {
                        if (start < len) {
                                buf[len] = '\0';
                                int r = cb(buf + start, len - start, ++lineno, false, userdata);
                                if (r < 0)
                                        return r;
                        }
                        return 0;
                }
                if (start > 0) {
                        memmove(buf, buf + start, len - start);
                        len -= start;
                        start = 0;
                }
                if (len >= AUDIT_LINE_MAX) {
                        al_error_set(err, 0, "\"%s\": line %" PRIu64 " is longer than %d bytes",
                                     path, lineno + 1, AUDIT_LINE_MAX);
                        return -EMSGSIZE;
                }
                if (len + 1 >= cap) {
                        cap = cap * 2 < AUDIT_LINE_MAX + 1 ? cap * 2 : AUDIT_LINE_MAX + 1;
                        buf = xrealloc(buf, cap, 1);
                }
                ssize_t n = read(fd, buf + len, cap - 1 - len);
                if (n < 0) {
                        if (errno == EINTR)
                                continue;
                        return al_error_set(err, errno, "reading \"%s\"", path);
                }
                if (n == 0)
                        eof = true;
                len += (size_t)n;
        }
}

/* Verification. */

struct vline {
        size_t file;
        uint64_t lineno;
        uint64_t seq;
        char hash[AUDIT_HASH_HEX + 1];
};

struct vstate {
        const struct audit_verify_options *opt;
        struct audit_verify_result *res;
        size_t file;
        uint64_t lineno; /* last line number seen in the current file */
        bool have_prev;
        struct vline prev; /* the last line accepted */
        /* A line whose prev did not match: either it or the one before it
         * (pend_before) was changed; the line after it decides. */
        bool pending;
        struct vline pend_before, pend;
        bool expect_seen;
};

#define VERIFY_STOP (-ECANCELED)

static int vfail(struct vstate *st, size_t file, uint64_t lineno, uint64_t seq, const char *fmt,
                 ...) __attribute__((format(printf, 5, 6)));

static int vfail(struct vstate *st, size_t file, uint64_t lineno, uint64_t seq, const char *fmt,
                 ...)
{
        va_list ap;

        st->res->ok = false;
        st->res->bad_file = file;
        st->res->bad_line = lineno;
        st->res->bad_seq = seq;
        va_start(ap, fmt);
        vsnprintf(st->res->reason, sizeof(st->res->reason), fmt, ap);
        va_end(ap);
        return VERIFY_STOP;
}

/* The line after a prev mismatch is known: next_links tells whether it
 * chains correctly onto the suspicious line. */
static int resolve_pending(struct vstate *st, bool next_links)
{
        st->pending = false;
        if (next_links)
                return vfail(st, st->pend_before.file, st->pend_before.lineno, st->pend_before.seq,
                             "line changed: its hash does not match prev of the next line");
        return vfail(st, st->pend.file, st->pend.lineno, st->pend.seq,
                     "prev does not match the hash of the previous line (seq %" PRIu64
                     "): this line or the one before it was changed, or lines between them "
                     "were replaced",
                     st->pend_before.seq);
}

static bool is_ts(const char *s)
{
        static const char shape[] = "dddd-dd-ddTdd:dd:dd.ddddddZ";

        if (!s || strlen(s) != sizeof(shape) - 1)
                return false;
        for (size_t i = 0; shape[i]; i++)
                if (shape[i] == 'd' ? !(s[i] >= '0' && s[i] <= '9') : s[i] != shape[i])
                        return false;
        return true;
}

static int verify_line(const char *line, size_t len, uint64_t lineno, bool complete, void *userdata)
{
        struct vstate *st = userdata;
        struct vline cur = {.file = st->file, .lineno = lineno};

        st->lineno = lineno;
        st->res->lines++;
        if (!complete) {
                if (st->pending)
                        return resolve_pending(st, false);
                st->res->torn = true;
                return vfail(st, st->file, lineno, fragment_seq(line, len),
                             "torn record: the last line is incomplete (%zu bytes, no newline "
                             "at the end): a write was cut off, or the file was truncated; the "
                             "next writer cuts it off and records it as audit.torn",
                             len);
        }

        json_error_t jerr;
        json_auto_t *o = json_loadb(line, len, JSON_REJECT_DUPLICATES, &jerr);
        if (!o || !json_is_object(o)) {
                if (st->pending)
                        return resolve_pending(st, false);
                /* Writers repair a torn last line before appending, so a
                 * broken line with more after it was changed, not torn. */
                return vfail(st, st->file, lineno, fragment_seq(line, len),
                             "corrupt record: not a JSON object: %s", o ? "wrong type" : jerr.text);
        }
        json_t *seq = json_object_get(o, "seq");
        if (!json_is_integer(seq) || json_integer_value(seq) < 1) {
                if (st->pending)
                        return resolve_pending(st, false);
                return vfail(st, st->file, lineno, 0, "missing or invalid seq");
        }
        cur.seq = (uint64_t)json_integer_value(seq);
        const char *prev = json_string_value(json_object_get(o, "prev"));
        const char *bad_field = NULL;
        if (!is_hash_hex(prev))
                bad_field = "prev";
        else if (!is_ts(json_string_value(json_object_get(o, "ts"))))
                bad_field = "ts";
        else if (!json_is_string(json_object_get(o, "sandbox")))
                bad_field = "sandbox";
        else if (!json_is_string(json_object_get(o, "kind")))
                bad_field = "kind";
        if (bad_field) {
                if (st->pending)
                        return resolve_pending(st, false);
                return vfail(st, st->file, lineno, cur.seq, "missing or invalid %s", bad_field);
        }
        audit_hash_hex(line, len, cur.hash);

        if (st->pending)
                return resolve_pending(st,
                                       cur.seq == st->pend.seq + 1 && STREQ(prev, st->pend.hash));

        if (!st->have_prev) {
                if (!st->opt->from_rotated) {
                        if (cur.seq != 1)
                                return vfail(st, st->file, lineno, cur.seq,
                                             "the chain starts at seq %" PRIu64
                                             ", not 1: earlier lines are missing (or were "
                                             "rotated away: --from-rotated)",
                                             cur.seq);
                        if (!STREQ(prev, AUDIT_GENESIS))
                                return vfail(st, st->file, lineno, cur.seq,
                                             "prev of the first line is not the genesis value");
                }
                st->res->first_seq = cur.seq;
        } else {
                uint64_t want = st->prev.seq + 1;
                if (cur.seq > want)
                        return vfail(st, st->file, lineno, cur.seq,
                                     "seq %" PRIu64 " follows seq %" PRIu64 ": %" PRIu64
                                     " line(s) missing",
                                     cur.seq, st->prev.seq, cur.seq - want);
                if (cur.seq < want)
                        return vfail(st, st->file, lineno, cur.seq,
                                     "seq %" PRIu64 " follows seq %" PRIu64
                                     ": lines reordered, repeated or inserted",
                                     cur.seq, st->prev.seq);
                if (!STREQ(prev, st->prev.hash)) {
                        st->pending = true;
                        st->pend_before = st->prev;
                        st->pend = cur;
                }
        }

        if (st->opt->expect_last_seq && cur.seq == st->opt->expect_last_seq) {
                st->expect_seen = true;
                if (st->opt->expect_last_hash && !STREQ(cur.hash, st->opt->expect_last_hash))
                        return vfail(st, st->file, lineno, cur.seq,
                                     "line changed: its hash differs from the recorded one");
        }
        st->prev = cur;
        st->have_prev = true;
        st->res->last_seq = cur.seq;
        memcpy(st->res->last_hash, cur.hash, sizeof(cur.hash));
        return 0;
}

int audit_verify_files(const char *const *paths, size_t n, const struct audit_verify_options *opt,
                       struct audit_verify_result *ret, struct al_error *err)
{
        static const struct audit_verify_options defaults = {0};
        struct audit_verify_result res = {.ok = true};
        struct vstate st = {.opt = opt ? opt : &defaults, .res = &res};

        memcpy(res.last_hash, AUDIT_GENESIS, sizeof(res.last_hash));
        for (size_t i = 0; i < n && res.ok; i++) {
                st.file = i;
                st.lineno = 0;
                int r = audit_foreach_line(paths[i], verify_line, &st, err);
                if (r == -EMSGSIZE) {
                        res.lines++;
                        if (st.pending)
                                resolve_pending(&st, false);
                        else
                                vfail(&st, i, st.lineno + 1, 0, "line longer than %d bytes",
                                      AUDIT_LINE_MAX);
                } else if (r < 0 && r != VERIFY_STOP)
                        return r;
        }
        if (res.ok && st.pending)
                resolve_pending(&st, false);
        if (res.ok && st.opt->expect_last_seq && !st.expect_seen) {
                if (res.last_seq < st.opt->expect_last_seq)
                        vfail(&st, n > 0 ? n - 1 : 0, st.lineno + 1, res.last_seq + 1,
                              "the chain ends at seq %" PRIu64 " but seq %" PRIu64
                              " was recorded: lines were removed from the end",
                              res.last_seq, st.opt->expect_last_seq);
                else
                        vfail(&st, 0, 1, res.first_seq,
                              "the chain starts after the recorded seq %" PRIu64,
                              st.opt->expect_last_seq);
        }
        *ret = res;
        return 0;
}
