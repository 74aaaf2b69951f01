/* SPDX-License-Identifier: Apache-2.0 */
/* The event stream's reader of the audit log (events-cursor.h). Writers append
 * whole lines under flock and every line starts {"seq":N, so the reader
 * needs no lock: it reads what is there, keeps an incomplete last line for
 * the next read, and finds its place in the rotated files by their first
 * seq. */
#include <errno.h>
#include <fcntl.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "audit.h"
#include "events-cursor.h"
#include "util.h"

struct events_cursor {
        char *path;
        int fd;
        dev_t dev;
        ino_t ino;
        uint64_t off; /* next byte to read from fd */
        char *buf;    /* an incomplete line: AUDIT_LINE_MAX bytes at most */
        size_t n;
        bool skipping; /* inside a line longer than AUDIT_LINE_MAX */
        uint64_t seq;
};

/* The seq a line starts with ({"seq":N,…}); 0 when it does not. */
static uint64_t line_seq(const char *line, size_t len)
{
        static const char pre[] = "{\"seq\":";
        if (len < sizeof(pre) || memcmp(line, pre, sizeof(pre) - 1) != 0)
                return 0;
        uint64_t v = 0;
        size_t i = sizeof(pre) - 1, digits = 0;
        for (; i < len && line[i] >= '0' && line[i] <= '9' && digits < 19; i++, digits++)
                v = v * 10 + (uint64_t)(line[i] - '0');
        if (!digits || i >= len || line[i] != ',')
                return 0;
        return v;
}

static int open_log(const char *path, struct stat *st)
{
        int fd = open(path, O_RDONLY | O_CLOEXEC | O_NOFOLLOW | O_NOCTTY);
        if (fd < 0)
                return -errno;
        if (fstat(fd, st) < 0 || !S_ISREG(st->st_mode)) {
                int e = errno ? -errno : -EINVAL;
                close(fd);
                return S_ISREG(st->st_mode) ? e : -EINVAL;
        }
        return fd;
}

/* The seq of a file's first line; 0 when it is empty or unreadable. */
static uint64_t first_seq(const char *path)
{
        struct stat st;
        _cleanup_close_ int fd = open_log(path, &st);
        if (fd < 0)
                return 0;
        char b[64];
        ssize_t k = pread(fd, b, sizeof(b), 0);
        return k > 0 ? line_seq(b, (size_t)k) : 0;
}

/* The seq of a file's last complete line; 0 when it has none. */
static uint64_t last_seq(int fd, uint64_t size)
{
        if (size == 0)
                return 0;
        uint64_t span = size < AUDIT_LINE_MAX + 1 ? size : AUDIT_LINE_MAX + 1;
        _cleanup_free_ char *b = xcalloc(1, span);
        ssize_t k = pread(fd, b, span, (off_t)(size - span));
        if (k != (ssize_t)span || b[span - 1] != '\n')
                return 0;
        size_t start = span - 1;
        while (start > 0 && b[start - 1] != '\n')
                start--;
        if (start == 0 && span != size)
                return 0;
        return line_seq(b + start, span - 1 - start);
}

/* The last seq of the newest rotated file that has one: where a live
 * file just rotated (still empty) continues from. */
static uint64_t rotated_last_seq(const char *path)
{
        _cleanup_strv_ char **paths = NULL;
        size_t n = 0;
        if (audit_rotated_paths(path, &paths, &n) < 0)
                return 0;
        for (size_t i = n; i-- > 0;) {
                struct stat st;
                _cleanup_close_ int fd = open_log(paths[i], &st);
                uint64_t seq = fd >= 0 ? last_seq(fd, (uint64_t)st.st_size) : 0;
                if (seq)
                        return seq;
        }
        return 0;
}

static void use_fd(struct events_cursor *c, int fd, const struct stat *st, uint64_t off)
{
        if (c->fd >= 0)
                close(c->fd);
        c->fd = fd;
        c->dev = st->st_dev;
        c->ino = st->st_ino;
        c->off = off;
        c->n = 0;
        c->skipping = false;
}

/* Move to the oldest file whose first seq is past c->seq, if another: 1
 * moved, 0 none (yet). */
static int next_file(struct events_cursor *c, bool from_start)
{
        _cleanup_strv_ char **paths = NULL;
        size_t n = 0;
        int r = audit_rotated_paths(c->path, &paths, &n);
        if (r < 0)
                return r;
        ssize_t pick = -1;
        for (size_t i = 0; i < n; i++) {
                uint64_t f = first_seq(paths[i]);
                if (!f)
                        continue;
                if (from_start) {
                        /* The last file that may hold seq c->seq + 1, or
                         * the oldest when all start after it. */
                        if (f <= c->seq + 1 || pick < 0)
                                pick = (ssize_t)i;
                        if (f > c->seq + 1)
                                break;
                } else if (f > c->seq) {
                        pick = (ssize_t)i;
                        break;
                }
        }
        if (pick < 0)
                return 0;
        struct stat st;
        int fd = open_log(paths[pick], &st);
        if (fd < 0)
                return fd == -ENOENT ? 0 : fd;
        if (c->fd >= 0 && st.st_dev == c->dev && st.st_ino == c->ino && !from_start) {
                close(fd);
                return 0;
        }
        use_fd(c, fd, &st, 0);
        return 1;
}

int events_cursor_new(const char *path, bool after_set, uint64_t after, struct events_cursor **ret)
{
        struct events_cursor *c = xcalloc(1, sizeof(*c));
        c->path = xstrdup(path);
        c->fd = -1;
        c->buf = xcalloc(1, AUDIT_LINE_MAX);
        int r;
        if (after_set) {
                c->seq = after;
                r = next_file(c, true);
        } else {
                /* The end of the live file: new lines only. */
                struct stat st;
                int fd = open_log(path, &st);
                r = fd;
                if (fd >= 0) {
                        c->seq = last_seq(fd, (uint64_t)st.st_size);
                        use_fd(c, fd, &st, (uint64_t)st.st_size);
                        if (!c->seq)
                                c->seq = rotated_last_seq(path);
                } else if (fd == -ENOENT)
                        r = 0;
        }
        if (r < 0) {
                events_cursor_free(c);
                return r;
        }
        *ret = c;
        return 0;
}

struct events_cursor *events_cursor_free(struct events_cursor *c)
{
        if (!c)
                return NULL;
        if (c->fd >= 0)
                close(c->fd);
        free(c->buf);
        free(c->path);
        free(c);
        return NULL;
}

uint64_t events_cursor_seq(const struct events_cursor *c)
{
        return c->seq;
}

static int hand_out(struct events_cursor *c, const char *line, size_t len, events_line_fn cb,
                    void *userdata)
{
        uint64_t seq = line_seq(line, len);
        /* A fragment a writer cut off, or a line seen already. */
        if (!seq || seq <= c->seq)
                return 0;
        c->seq = seq;
        return cb(line, len, seq, userdata);
}

int events_cursor_read(struct events_cursor *c, size_t max, events_line_fn cb, void *userdata)
{
        if (c->fd < 0) {
                int r = next_file(c, true);
                if (r <= 0)
                        return r;
        }
        struct stat st;
        if (fstat(c->fd, &st) < 0)
                return -errno;
        if ((uint64_t)st.st_size < c->off) {
                /* A torn line repaired under us: what was cut is gone. */
                c->off = (uint64_t)st.st_size;
                c->n = 0;
        }
        if ((uint64_t)st.st_size == c->off) {
                struct stat live;
                if (stat(c->path, &live) == 0 && live.st_dev == c->dev && live.st_ino == c->ino)
                        return 0;
                /* Rotated (or reading an older file): on to the next. */
                return next_file(c, false);
        }
        size_t room = AUDIT_LINE_MAX - c->n;
        size_t want = max < room ? max : room;
        ssize_t k = pread(c->fd, c->buf + c->n, want, (off_t)c->off);
        if (k < 0)
                return -errno;
        if (k == 0)
                return 0;
        c->off += (uint64_t)k;
        size_t end = c->n + (size_t)k, start = 0;
        for (size_t i = c->n; i < end; i++) {
                if (c->buf[i] != '\n')
                        continue;
                if (c->skipping)
                        c->skipping = false;
                else {
                        c->buf[i] = '\0';
                        int r = hand_out(c, c->buf + start, i - start, cb, userdata);
                        if (r < 0) {
                                memmove(c->buf, c->buf + i + 1, end - i - 1);
                                c->n = end - i - 1;
                                return r;
                        }
                }
                start = i + 1;
        }
        if (start == 0 && end == AUDIT_LINE_MAX)
                /* No line ends within the limit: drop it to its newline. */
                c->skipping = true;
        if (c->skipping)
                start = end;
        memmove(c->buf, c->buf + start, end - start);
        c->n = end - start;
        return 1;
}
