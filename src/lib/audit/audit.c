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
#include "sha256.h"
#include "util.h"
#include "audit-internal.h"

#define APPEND_MAX_TRIES 16
/* A batch goes out in writes of at most this much (whole lines). */
#define AUDIT_BATCH_WRITE_MAX (256 * 1024)

void audit_hash_hex(const void *buf, size_t len, char ret[static AUDIT_HASH_HEX + 1])
{
        sha256_hex(buf, len, ret);
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

int audit_log_open(const char *path, int *ret_fd)
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

/* Take the lock on the file that is at a->path now; another writer may have
 * rotated ours away while we waited. */
int audit_lock_current(struct audit *a, struct al_error *err)
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
                        if (pst.st_dev == fst.st_dev && pst.st_ino == fst.st_ino) {
                                /* Only writers holding this lock change the
                                 * size: audit_sync_tail() needs no fstat of
                                 * its own. */
                                a->locked_size = fst.st_size;
                                return 0;
                        }
                } else if (errno != ENOENT)
                        return al_error_set(err, errno, "inspecting audit log \"%s\"", a->path);

                if (tries >= APPEND_MAX_TRIES)
                        return al_error_set(err, EAGAIN, "audit log \"%s\" keeps being replaced",
                                            a->path);
                /* Lines of ours still unsynced are in the file rotated
                 * away (another writer renames it with nothing of its own
                 * pending, so without a sync): synced through its
                 * descriptor before it is dropped, or audit_flush() would
                 * sync only the new file and report them on the disk. */
                int r = audit_flush(a);
                if (r < 0)
                        return al_error_set(err, r, "syncing audit log \"%s\" rotated away",
                                            a->path);
                int fd = -1;
                r = audit_log_open(a->path, &fd);
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

int audit_fsync_dir_of(const char *path)
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
        if (!a)
                return 0;
        int r = audit_syncer_wait(a);
        if (r < 0)
                return r;
        if (a->flush_deadline == 0)
                return 0;
        if (fdatasync(a->fd) < 0)
                return -errno;
        a->flush_deadline = 0;
        return 0;
}

int audit_flush_soon(struct audit *a)
{
        if (!a)
                return 0;
        if (!audit_syncer_usable(a))
                return audit_flush(a);
        return a->flush_deadline == 0 ? 0 : audit_syncer_start(a);
}

uint64_t audit_flush_deadline(const struct audit *a)
{
        return a ? a->flush_deadline : 0;
}

bool audit_needs_flush(const struct audit *a, uint64_t now_us)
{
        return a && a->flush_deadline != 0 && now_us >= a->flush_deadline;
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

static char *build_line(uint64_t seq, const char *prev, const char *sandbox, const char *kind,
                        json_t *body, size_t *ret_len)
{
        char ts[32];
        json_auto_t *o = json_object();

        format_ts(now_realtime_us(), ts);
        if (json_object_set_new(o, "seq", json_integer((json_int_t)seq)) < 0 ||
            json_object_set_new(o, "ts", json_string(ts)) < 0 ||
            json_object_set_new(o, "sandbox", json_string(sandbox)) < 0 ||
            json_object_set_new(o, "kind", json_string(kind)) < 0 ||
            (body && json_object_update(o, body) < 0) ||
            json_object_set_new(o, "prev", json_string(prev)) < 0)
                return NULL;
        char *s = json_dumps(o, JSON_COMPACT);
        if (s)
                *ret_len = strlen(s);
        return s;
}

char *audit_build_line(const struct audit *a, const char *sandbox, const char *kind, json_t *body,
                       size_t *ret_len)
{
        return build_line(a->seq + 1, a->hash, sandbox, kind, body, ret_len);
}

/* Under the lock: append n whole lines (buf, each ending in a newline) in one
 * write(); last_hash is the hash of the last of them. */
int audit_write_lines(struct audit *a, const char *buf, size_t len, uint64_t n,
                      const char *last_hash, struct al_error *err)
{
        int r = write_full(a->fd, buf, len);
        if (r < 0) {
                /* Never leave part of a line: it would break every later append. */
                if (a->known_size >= 0) {
                        int t = ftruncate(a->fd, a->known_size);
                        (void)t;
                }
                return al_error_set(err, r, "writing audit log \"%s\"", a->path);
        }
        a->known_size += (off_t)len;
        a->seq += n;
        memcpy(a->hash, last_hash, sizeof(a->hash));

        if (a->opt.sync == AUDIT_SYNC_EVENT) {
                if (fdatasync(a->fd) < 0)
                        return al_error_set(err, errno, "syncing audit log \"%s\"", a->path);
                return 0;
        }
        uint64_t now = now_monotonic_us();
        if (a->flush_deadline == 0)
                a->flush_deadline = now + a->opt.batch_ms * 1000;
        if (now >= a->flush_deadline) {
                r = audit_flush_soon(a);
                if (r < 0)
                        return al_error_set(err, r, "syncing audit log \"%s\"", a->path);
        }
        return 0;
}

int audit_write_line(struct audit *a, char *line, size_t len, struct al_error *err)
{
        char hash[AUDIT_HASH_HEX + 1];

        audit_hash_hex(line, len, hash);
        /* The NUL jansson left at line[len] becomes the newline: one write(). */
        line[len] = '\n';
        int r = audit_write_lines(a, line, len + 1, 1, hash, err);
        line[len] = '\0';
        return r;
}

/* Under the lock (audit_lock_current() just set locked_size): make seq and
 * hash describe the current end of the chain. */
int audit_sync_tail(struct audit *a, struct al_error *err)
{
        off_t size = a->locked_size; /* what fstat() saw under this lock */

        if (size == a->known_size)
                return 0; /* nobody else appended: seq and hash are ours */
        if (size > 0) {
                char last;
                int r = audit_pread_full(a->fd, &last, 1, size - 1);
                if (r < 0)
                        return al_error_set(err, r, "reading the end of \"%s\"", a->path);
                if (last != '\n')
                        return audit_repair_torn(a, size, err);
        }
        int r = audit_tail_before(a, size, &a->seq, a->hash, err);
        if (r < 0)
                return r;
        a->known_size = size;
        return 0;
}

/* Lines built under the lock, not yet written: they go out in one write(). */
struct pending {
        char *buf;
        size_t len, cap;
        uint64_t n;
        char hash[AUDIT_HASH_HEX + 1]; /* of the last line built (or the chain's end) */
};

static int pending_write(struct audit *a, struct pending *p, struct al_error *err)
{
        if (p->n == 0)
                return 0;
        int r = audit_write_lines(a, p->buf, p->len, p->n, p->hash, err);
        p->len = 0;
        p->n = 0;
        return r;
}

static int check_record(const struct audit_record *rec, struct al_error *err)
{
        if (!rec->sandbox || !*rec->sandbox || !rec->kind || !*rec->kind)
                return al_error_set(err, EINVAL, "audit event without sandbox or kind");
        if (rec->fields && !json_is_object(rec->fields))
                return al_error_set(err, 0, "audit event \"%s\": fields are not an object",
                                    rec->kind);
        for (size_t i = 0; i < ARRAY_SIZE(reserved_keys); i++)
                if (json_object_get(rec->fields, reserved_keys[i]))
                        return al_error_set(err, 0, "audit event \"%s\": field \"%s\" is reserved",
                                            rec->kind, reserved_keys[i]);
        return 0;
}

/* Under the lock: build every record onto the chain's end and write them,
 * rotating between two records when the next would take the file past
 * rotate_at. */
static int append_locked(struct audit *a, const struct audit_record *recs, json_t *const *bodies,
                         size_t n, struct al_error *err)
{
        struct pending p = {0};
        int r = audit_sync_tail(a, err);
        if (r < 0)
                return r;
        memcpy(p.hash, a->hash, sizeof(p.hash));

        for (size_t i = 0; i < n; i++) {
                const char *kind = recs[i].kind;
                for (unsigned tries = 0;; tries++) {
                        size_t len = 0;
                        _cleanup_free_ char *line = build_line(
                            a->seq + p.n + 1, p.hash, recs[i].sandbox, kind, bodies[i], &len);
                        if (!line) {
                                r = al_error_set(
                                    err, 0, "audit event \"%s\": cannot encode it as JSON", kind);
                                goto out;
                        }
                        if (len + 1 > AUDIT_LINE_MAX) {
                                r = al_error_set(err, 0,
                                                 "audit event \"%s\" is larger than %d bytes", kind,
                                                 AUDIT_LINE_MAX);
                                goto out;
                        }
                        uint64_t size = (uint64_t)a->known_size + p.len;
                        if (a->rotate_at > 0 && size > 0 && tries < APPEND_MAX_TRIES &&
                            size + len + 1 > a->rotate_at) {
                                r = pending_write(a, &p, err);
                                if (r >= 0)
                                        r = audit_rotate_log(a, err);
                                if (r >= 0)
                                        r = audit_sync_tail(a, err);
                                if (r < 0)
                                        goto out;
                                memcpy(p.hash, a->hash, sizeof(p.hash));
                                continue; /* rebuilt on the new file's chain end */
                        }
                        if (p.len > 0 && p.len + len + 1 > AUDIT_BATCH_WRITE_MAX) {
                                r = pending_write(a, &p, err);
                                if (r < 0)
                                        goto out;
                        }
                        if (p.len + len + 1 > p.cap) {
                                p.cap = p.cap * 2 > p.len + len + 1 ? p.cap * 2 : p.len + len + 1;
                                p.buf = xrealloc(p.buf, p.cap, 1);
                        }
                        memcpy(p.buf + p.len, line, len);
                        p.buf[p.len + len] = '\n';
                        p.len += len + 1;
                        p.n++;
                        audit_hash_hex(line, len, p.hash);
                        break;
                }
        }
        r = pending_write(a, &p, err);
out:
        free(p.buf);
        return r;
}

int audit_append_many(struct audit *a, const struct audit_record *recs, size_t n,
                      struct al_error *err)
{
        if (!a || (n > 0 && !recs))
                return al_error_set(err, EINVAL, "audit events without a log");
        if (n == 0)
                return 0;
        for (size_t i = 0; i < n; i++) {
                int r = check_record(&recs[i], err);
                if (r < 0)
                        return r;
        }

        json_t *one[1];
        _cleanup_free_ json_t **many = n > 1 ? xcalloc(n, sizeof(json_t *)) : NULL;
        json_t **bodies = n > 1 ? many : one;
        int r = 0;
        size_t made = 0;
        for (; made < n; made++) {
                json_t *fields = recs[made].fields;
                if (fields && a->opt.redact) {
                        r = redact_value(a, fields, &bodies[made], err);
                        if (r < 0) {
                                al_error_wrap(err, "audit event \"%s\"", recs[made].kind);
                                break;
                        }
                } else
                        bodies[made] = json_incref(fields);
        }
        if (r >= 0) {
                r = audit_lock_current(a, err);
                if (r >= 0) {
                        r = append_locked(a, recs, bodies, n, err);
                        unlock(a);
                }
        }
        for (size_t i = 0; i < made; i++)
                json_decref(bodies[i]);
        return r;
}

int audit_append(struct audit *a, const char *sandbox, const char *kind, json_t *fields,
                 struct al_error *err)
{
        struct audit_record rec = {.sandbox = sandbox, .kind = kind, .fields = fields};
        return audit_append_many(a, &rec, 1, err);
}

int audit_reserve(struct audit *a, struct al_error *err)
{
        if (!a)
                return 0;
        int r = audit_lock_current(a, err);
        if (r < 0)
                return r;
        if (fallocate(a->fd, FALLOC_FL_KEEP_SIZE, a->locked_size, AUDIT_RESERVE_BYTES) < 0 &&
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
        r = audit_log_open(path, &fd);
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

        r = audit_lock_current(a, err);
        if (r >= 0) {
                r = audit_sync_tail(a, err);
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

const char *audit_file_path(const struct audit *a)
{
        return a ? a->path : NULL;
}

struct audit *audit_close(struct audit *a)
{
        if (!a)
                return NULL;
        (void)audit_flush(a);
        audit_syncer_free(a);
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
