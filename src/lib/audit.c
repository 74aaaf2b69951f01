/* SPDX-License-Identifier: Apache-2.0 */
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

/* Read the last line of a log file of the given size: its seq and hash. */
static int read_tail(int fd, off_t size, const char *name, uint64_t *ret_seq, char *ret_hash,
                     struct al_error *err)
{
        if (size == 0) {
                *ret_seq = 0;
                memcpy(ret_hash, AUDIT_GENESIS, AUDIT_HASH_HEX + 1);
                return 0;
        }

        /* The last line, its newline, and the newline before it. */
        size_t want = (uint64_t)size < AUDIT_LINE_MAX + 1 ? (size_t)size : AUDIT_LINE_MAX + 1;
        off_t off = size - (off_t)want;
        _cleanup_free_ char *buf = xcalloc(want + 1, 1);
        int r = pread_full(fd, buf, want, off);
        if (r < 0)
                return al_error_set(err, r, "reading the end of \"%s\"", name);
        if (buf[want - 1] != '\n') {
                al_error_set(err, 0,
                             "\"%s\": the last line is incomplete (no newline at the end); "
                             "check it with `airlock audit verify`",
                             name);
                return -EBADMSG;
        }
        char *start, *nl = memrchr(buf, '\n', want - 1);
        if (nl)
                start = nl + 1;
        else if (off == 0)
                start = buf;
        else {
                al_error_set(err, 0, "\"%s\": the last line is longer than %d bytes", name,
                             AUDIT_LINE_MAX);
                return -EBADMSG;
        }
        size_t len = (size_t)(buf + want - 1 - start);

        json_error_t jerr;
        json_auto_t *o = json_loadb(start, len, JSON_REJECT_DUPLICATES, &jerr);
        json_t *seq = json_object_get(o, "seq");
        if (!o || !json_is_integer(seq) || json_integer_value(seq) < 1) {
                al_error_set(err, 0,
                             "\"%s\": cannot continue the chain: the last line is not an audit "
                             "record; check it with `airlock audit verify`",
                             name);
                return -EBADMSG;
        }
        *ret_seq = (uint64_t)json_integer_value(seq);
        audit_hash_hex(start, len, ret_hash);
        return 0;
}

static char *rotated_name(const char *path, unsigned long i)
{
        return xasprintf("%s.%lu", path, i);
}

/* Under the lock: make seq and hash describe the current end of the chain. */
static int sync_tail(struct audit *a, struct al_error *err)
{
        struct stat st;

        if (fstat(a->fd, &st) < 0)
                return al_error_set(err, errno, "inspecting audit log \"%s\"", a->path);
        if (st.st_size == a->known_size)
                return 0;

        int r;
        if (st.st_size > 0)
                r = read_tail(a->fd, st.st_size, a->path, &a->seq, a->hash, err);
        else {
                /* Fresh after a rotation: the chain goes on from FILE.1. */
                _cleanup_free_ char *older = rotated_name(a->path, 1);
                _cleanup_close_ int fd =
                    open(older, O_RDONLY | O_CLOEXEC | O_NOFOLLOW | O_NOCTTY | O_NONBLOCK);
                struct stat ost;
                if (fd < 0 && errno != ENOENT)
                        return al_error_set(err, errno, "opening \"%s\"", older);
                if (fd >= 0 && fstat(fd, &ost) < 0)
                        return al_error_set(err, errno, "inspecting \"%s\"", older);
                r = read_tail(fd, fd >= 0 ? ost.st_size : 0, older, &a->seq, a->hash, err);
        }
        if (r < 0)
                return r;
        a->known_size = st.st_size;
        return 0;
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
        if (a->opt.rotate_keep > 0 && top > a->opt.rotate_keep)
                top = a->opt.rotate_keep;
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
                if (a->opt.rotate_size > 0 && a->known_size > 0 && tries < APPEND_MAX_TRIES &&
                    (uint64_t)a->known_size + len + 1 > a->opt.rotate_size) {
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
        if (uid == 0)
                return xstrdup("/var/lib/airlock/audit/audit.jsonl");
        if (!home || home[0] != '/')
                return NULL;
        size_t n = strlen(home);
        while (n > 1 && home[n - 1] == '/')
                n--;
        return xasprintf("%.*s/.local/state/airlock/audit/audit.jsonl", (int)n, home);
}

int audit_rotated_paths(const char *path, char ***ret, size_t *ret_n)
{
        unsigned long top = 1;

        for (;; top++) {
                struct stat st;
                _cleanup_free_ char *name = rotated_name(path, top);
                if (lstat(name, &st) < 0) {
                        if (errno == ENOENT)
                                break;
                        return -errno;
                }
                if (top >= ROTATE_MAX_FILES)
                        return -EMLINK;
        }
        char **v = NULL;
        size_t n = 0;
        for (unsigned long i = top; i > 1; i--) {
                _cleanup_free_ char *name = rotated_name(path, i - 1);
                v = strv_append(v, &n, name);
        }
        v = strv_append(v, &n, path);
        *ret = v;
        if (ret_n)
                *ret_n = n;
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
                return vfail(st, st->file, lineno, 0,
                             "incomplete line (no newline at the end): the file was truncated");
        }

        json_error_t jerr;
        json_auto_t *o = json_loadb(line, len, JSON_REJECT_DUPLICATES, &jerr);
        if (!o || !json_is_object(o)) {
                if (st->pending)
                        return resolve_pending(st, false);
                return vfail(st, st->file, lineno, 0, "not a JSON object: %s",
                             o ? "wrong type" : jerr.text);
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
