/* SPDX-License-Identifier: Apache-2.0 */
#include <fcntl.h>
#include <inttypes.h>
#include <jansson.h>
#include <limits.h>
#include <linux/openat2.h>
#include <signal.h>
#include <stdarg.h>
#include <string.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/sysmacros.h>
#include <sys/wait.h>
#include <sys/xattr.h>

#include "child.h"
#include "fs.h"
#include "paths.h"
#include "review.h"
#include "utf8.h"
#include "util.h"

#define META_FILE     "meta.json"
#define MANIFEST_FILE "manifest.json"
#define CHANGES_DIR   "changes"
#define JSON_MAX      (512u << 20)
#define ID_MAX        64
#define PREFIX_MIN    4
#define BINARY_PROBE  8000
#define COPY_CHUNK    (1 << 16)
#define DIFF_PROGRAM  "/usr/bin/diff"

enum etype { T_FILE, T_DIR, T_SYMLINK };

static const char *const etype_names[] = {"file", "dir", "symlink"};

struct entry {
        char *path;
        enum etype type;
        mode_t mode;
};

struct strarr {
        char **v;
        size_t n, cap;
};

struct manifest {
        struct entry *e;
        size_t n_e, cap_e;
        struct strarr deleted;
        struct strarr opaque;
        json_t *skipped;
};

/* One open state directory, locked, with its meta.json. */
struct review {
        int dir_fd;
        int changes_fd;
        int ws_fd;
        json_t *meta;
        const char *id;
        const char *workspace;
        const char *state;
        uint64_t started_ns;
        struct manifest m;
};

/* How a directory of the upper layer meets the workspace's. */
enum hstate {
        H_NONE,    /* nothing of the workspace's below it survives */
        H_MERGE,   /* the workspace's entries show through */
        H_REPLACE, /* opaque: the workspace's entries it lacks are removed */
};

static void strarr_add(struct strarr *a, const char *s)
{
        if (a->n == a->cap) {
                a->cap = a->cap ? a->cap * 2 : 16;
                a->v = xrealloc(a->v, a->cap, sizeof(char *));
        }
        a->v[a->n++] = xstrdup(s);
}

static void strarr_done(struct strarr *a)
{
        for (size_t i = 0; i < a->n; i++)
                free(a->v[i]);
        free(a->v);
        *a = (struct strarr){0};
}

static int cmp_str(const void *a, const void *b)
{
        return strcmp(*(char *const *)a, *(char *const *)b);
}

static bool strarr_has(const struct strarr *a, const char *s)
{
        return a->n && bsearch(&s, a->v, a->n, sizeof(char *), cmp_str);
}

static void manifest_add(struct manifest *m, const char *path, enum etype type, mode_t mode)
{
        if (m->n_e == m->cap_e) {
                m->cap_e = m->cap_e ? m->cap_e * 2 : 64;
                m->e = xrealloc(m->e, m->cap_e, sizeof(struct entry));
        }
        m->e[m->n_e++] = (struct entry){.path = xstrdup(path), .type = type, .mode = mode & 07777};
}

static void manifest_done(struct manifest *m)
{
        for (size_t i = 0; i < m->n_e; i++)
                free(m->e[i].path);
        free(m->e);
        strarr_done(&m->deleted);
        strarr_done(&m->opaque);
        json_decref(m->skipped);
        *m = (struct manifest){0};
}

static int cmp_entry(const void *a, const void *b)
{
        return strcmp(((const struct entry *)a)->path, ((const struct entry *)b)->path);
}

static void manifest_sort(struct manifest *m)
{
        /* qsort() wants a valid pointer even for nothing. */
        if (m->n_e > 1)
                qsort(m->e, m->n_e, sizeof(struct entry), cmp_entry);
        if (m->deleted.n > 1)
                qsort(m->deleted.v, m->deleted.n, sizeof(char *), cmp_str);
        if (m->opaque.n > 1)
                qsort(m->opaque.v, m->opaque.n, sizeof(char *), cmp_str);
}

static const struct entry *manifest_find(const struct manifest *m, const char *path)
{
        struct entry key = {.path = (char *)path};
        return m->n_e ? bsearch(&key, m->e, m->n_e, sizeof(struct entry), cmp_entry) : NULL;
}

static void review_done(struct review *rv)
{
        closep(&rv->changes_fd);
        closep(&rv->ws_fd);
        /* Closing the directory drops the flock. */
        closep(&rv->dir_fd);
        json_decref(rv->meta);
        manifest_done(&rv->m);
}

/* Resolve path beneath dirfd without following any symlink, the last
 * component included (with O_PATH that opens the symlink itself). */
static int open_beneath(int dirfd, const char *path, int flags)
{
        return fs_openat2(dirfd, *path ? path : ".", flags | O_CLOEXEC | O_NOFOLLOW, 0600,
                          RESOLVE_BENEATH | RESOLVE_NO_SYMLINKS | RESOLVE_NO_MAGICLINKS);
}

struct host {
        mode_t mode; /* 0: absent */
        uint64_t ctime_ns;
        uid_t uid;
        gid_t gid;
};

/* What the workspace holds at path, looked up beneath it. */
static int host_stat(int dirfd, const char *path, struct host *ret)
{
        *ret = (struct host){0};
        _cleanup_close_ int fd = open_beneath(dirfd, path, O_PATH);
        if (fd == -ENOENT)
                return 0;
        if (fd < 0)
                return fd;
        struct statx stx;
        if (statx(fd, "", AT_EMPTY_PATH | AT_SYMLINK_NOFOLLOW,
                  STATX_TYPE | STATX_MODE | STATX_CTIME | STATX_UID | STATX_GID, &stx) < 0)
                return -errno;
        ret->mode = stx.stx_mode;
        ret->ctime_ns = (uint64_t)stx.stx_ctime.tv_sec * 1000000000ULL + stx.stx_ctime.tv_nsec;
        ret->uid = stx.stx_uid;
        ret->gid = stx.stx_gid;
        return 0;
}

/* "a/b/c" → dir "a/b", name "c"; "c" → dir "", name "c". */
static const char *split_path(const char *path, char dir[static PATH_MAX])
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

static bool is_beneath(const char *path, const char *top)
{
        size_t n = strlen(top);
        if (n == 0)
                return true;
        return strncmp(path, top, n) == 0 && (path[n] == '\0' || path[n] == '/');
}

/* Decode the UTF-8 sequence at s (n bytes left): its length, or 0 when it
 * is not valid UTF-8 (overlong, a surrogate, past U+10FFFF, cut short). */
static size_t utf8_next(const unsigned char *s, size_t n, uint32_t *ret_cp)
{
        int k = utf8_decode_char(s, n, ret_cp);
        return k < 0 ? 0 : (size_t)k;
}

/* Code points that draw nothing, or look like a space, or make text display
 * in another order than it reads (CVE-2021-42574, "Trojan Source"): in a
 * name they make "a.txt" + U+200B look like "a.txt", or "invoice" U+202E
 * "txt.sh" look like "invoicehs.txt". */
static bool is_hidden_codepoint(uint32_t cp)
{
        static const uint32_t ranges[][2] = {
            {0x00a0, 0x00a0},   {0x00ad, 0x00ad}, {0x034f, 0x034f},   {0x061c, 0x061c},
            {0x115f, 0x1160},   {0x1680, 0x1680}, {0x17b4, 0x17b5},   {0x180b, 0x180f},
            {0x2000, 0x200f},   {0x2028, 0x202f}, {0x205f, 0x206f},   {0x2800, 0x2800},
            {0x3000, 0x3000},   {0x3164, 0x3164}, {0xfe00, 0xfe0f},   {0xfeff, 0xfeff},
            {0xffa0, 0xffa0},   {0xfff9, 0xfffb}, {0x1bca0, 0x1bca3}, {0x1d173, 0x1d17a},
            {0xe0000, 0xe0fff},
        };
        for (size_t i = 0; i < sizeof(ranges) / sizeof(ranges[0]); i++)
                if (cp >= ranges[i][0] && cp <= ranges[i][1])
                        return true;
        return false;
}

/* Valid UTF-8 without C1 control characters (U+0080 to U+009F, which a
 * terminal may take for an escape sequence's start, as 0x9b is CSI). */
static bool utf8_valid(const unsigned char *s, size_t n)
{
        for (size_t i = 0; i < n;) {
                uint32_t cp;
                size_t len = utf8_next(s + i, n - i, &cp);
                if (len == 0 || (cp >= 0x80 && cp <= 0x9f))
                        return false;
                i += len;
        }
        return true;
}

/* A file name from the upper layer: printable, valid UTF-8, so that it can
 * be stored in JSON and shown in a diff. Hidden code points are allowed
 * here; the diff flags them and accept takes them only when named. */
static bool name_valid(const char *name)
{
        size_t n = strlen(name);
        if (n == 0 || n > NAME_MAX || STREQ(name, ".") || STREQ(name, ".."))
                return false;
        for (size_t i = 0; i < n; i++)
                if ((unsigned char)name[i] < 0x20 || name[i] == 0x7f || name[i] == '/')
                        return false;
        return utf8_valid((const unsigned char *)name, n);
}

/* Where the last component of path holding a hidden code point ends (0:
 * none, or path is not valid UTF-8, as only host names can be). A request
 * takes such a path only when it names it that far. */
static size_t hidden_end(const char *path)
{
        const unsigned char *s = (const unsigned char *)path;
        size_t n = strlen(path), end = 0;
        bool in = false;
        for (size_t i = 0; i <= n;) {
                if (i == n || s[i] == '/') {
                        if (in)
                                end = i;
                        in = false;
                        i++;
                        continue;
                }
                uint32_t cp;
                size_t len = utf8_next(s + i, n - i, &cp);
                if (len == 0)
                        return 0;
                in = in || is_hidden_codepoint(cp);
                i += len;
        }
        return end;
}

static bool path_valid(const char *path)
{
        size_t len = strlen(path);
        if (len == 0 || len >= PATH_MAX)
                return false;
        char name[NAME_MAX + 1];
        for (const char *s = path;;) {
                const char *e = strchrnul(s, '/');
                size_t n = (size_t)(e - s);
                if (n == 0 || n > NAME_MAX)
                        return false;
                memcpy(name, s, n);
                name[n] = '\0';
                if (!name_valid(name))
                        return false;
                if (!*e)
                        return true;
                s = e + 1;
        }
}

static bool id_valid(const char *id)
{
        size_t n = strlen(id);
        return n > 0 && n <= ID_MAX &&
               strspn(id, "abcdefghijklmnopqrstuvwxyz"
                          "ABCDEFGHIJKLMNOPQRSTUVWXYZ"
                          "0123456789_-") == n;
}

static int write_json_at(int dirfd, const char *name, json_t *j)
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

static int read_json_at(int dirfd, const char *name, json_t **ret)
{
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

/* Remove name beneath dirfd, a whole tree when it is a directory. Only used
 * on the state directory, which the host alone writes. */
static int remove_tree_at(int at, const char *name, unsigned depth)
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
static int copy_data(int in, int out, uint64_t max, uint64_t *ret_bytes)
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

static int files_equal(int a, int b, bool *ret)
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

static int is_binary(int fd, bool *ret)
{
        char buf[BINARY_PROBE];
        ssize_t n = pread(fd, buf, sizeof(buf), 0);
        if (n < 0)
                return -errno;
        *ret = memchr(buf, '\0', (size_t)n) != NULL;
        return 0;
}

static int read_link(int dirfd, const char *path, char buf[static PATH_MAX])
{
        _cleanup_close_ int fd = open_beneath(dirfd, path, O_PATH);
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

/* Open a state directory and take its lock: exclusive for anything that
 * writes, shared for reading. */
static int review_open(const char *state_dir, bool exclusive, struct review *rv,
                       struct al_error *err)
{
        *rv = (struct review){.dir_fd = -1, .changes_fd = -1, .ws_fd = -1};
        rv->dir_fd = open(state_dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
        if (rv->dir_fd < 0)
                return al_error_set(err, errno, "opening \"%s\"", state_dir);
        if (flock(rv->dir_fd, (exclusive ? LOCK_EX : LOCK_SH) | LOCK_NB) < 0) {
                if (errno == EWOULDBLOCK)
                        return al_error_set_message(
                            err, EBUSY, "sandbox state \"%s\" is in use by another airlock",
                            state_dir);
                return al_error_set(err, errno, "locking \"%s\"", state_dir);
        }
        int r = read_json_at(rv->dir_fd, META_FILE, &rv->meta);
        if (r < 0)
                return al_error_set(err, r, "reading %s/%s", state_dir, META_FILE);
        json_t *started = json_object_get(rv->meta, "startedNs");
        rv->id = json_string_value(json_object_get(rv->meta, "id"));
        rv->workspace = json_string_value(json_object_get(rv->meta, "workspace"));
        rv->state = json_string_value(json_object_get(rv->meta, "state"));
        json_t *acc = json_object_get(rv->meta, "accepted");
        if (!rv->id || !rv->workspace || rv->workspace[0] != '/' || !json_is_integer(started) ||
            json_integer_value(started) < 0 || !rv->state ||
            !(STREQ(rv->state, "pending") || STREQ(rv->state, "accepted") ||
              STREQ(rv->state, "discarded") || STREQ(rv->state, "failed")) ||
            (acc && !json_is_array(acc)))
                return al_error_set_message(err, EBADMSG, "%s/%s", state_dir, META_FILE);
        rv->started_ns = (uint64_t)json_integer_value(started);
        size_t i;
        json_t *v;
        json_array_foreach(acc, i, v)
        {
                const char *p = json_string_value(v);
                if (!p || !(p[0] == '\0' || path_valid(p)))
                        return al_error_set_message(err, EBADMSG, "%s/%s: \"accepted\"", state_dir,
                                                    META_FILE);
        }
        return 0;
}

int review_workspace(const char *state_dir, char **ret, struct al_error *err)
{
        _cleanup_(review_done) struct review rv;
        int r = review_open(state_dir, false, &rv, err);
        if (r < 0)
                return r;
        *ret = xstrdup(rv.workspace);
        return 0;
}

static int load_manifest(struct review *rv, const char *state_dir, struct al_error *err)
{
        json_t *j = NULL;
        int r = read_json_at(rv->dir_fd, MANIFEST_FILE, &j);
        if (r < 0)
                return al_error_set(err, r, "reading %s/%s", state_dir, MANIFEST_FILE);
        json_t *entries = json_object_get(j, "entries");
        json_t *deleted = json_object_get(j, "deleted");
        json_t *opaque = json_object_get(j, "opaque");
        json_t *skipped = json_object_get(j, "skipped");
        size_t i;
        json_t *v;

        if (!json_is_array(entries) || !json_is_array(deleted) || !json_is_array(opaque) ||
            (skipped && !json_is_array(skipped)))
                goto bad;
        json_array_foreach(entries, i, v)
        {
                const char *path = json_string_value(json_object_get(v, "path"));
                const char *type = json_string_value(json_object_get(v, "type"));
                json_t *mode = json_object_get(v, "mode");
                if (!path || !path_valid(path) || !type || !json_is_integer(mode) ||
                    json_integer_value(mode) < 0 || json_integer_value(mode) > 07777)
                        goto bad;
                enum etype t;
                if (STREQ(type, "file"))
                        t = T_FILE;
                else if (STREQ(type, "dir"))
                        t = T_DIR;
                else if (STREQ(type, "symlink"))
                        t = T_SYMLINK;
                else
                        goto bad;
                manifest_add(&rv->m, path, t, (mode_t)json_integer_value(mode));
        }
        json_array_foreach(deleted, i, v)
        {
                if (!json_string_value(v) || !path_valid(json_string_value(v)))
                        goto bad;
                strarr_add(&rv->m.deleted, json_string_value(v));
        }
        json_array_foreach(opaque, i, v)
        {
                if (!json_string_value(v) || !path_valid(json_string_value(v)))
                        goto bad;
                strarr_add(&rv->m.opaque, json_string_value(v));
        }
        manifest_sort(&rv->m);
        for (i = 1; i < rv->m.n_e; i++)
                if (STREQ(rv->m.e[i - 1].path, rv->m.e[i].path))
                        goto bad;
        rv->m.skipped = skipped ? json_incref(skipped) : json_array();
        json_decref(j);
        return 0;
bad:
        json_decref(j);
        return al_error_set_message(err, EBADMSG, "%s/%s", state_dir, MANIFEST_FILE);
}

static int save_manifest(int dir_fd, const struct manifest *m)
{
        json_t *entries = json_array(), *deleted = json_array(), *opaque = json_array();
        for (size_t i = 0; i < m->n_e; i++)
                json_array_append_new(entries, json_pack("{s:s, s:s, s:i}", "path", m->e[i].path,
                                                         "type", etype_names[m->e[i].type], "mode",
                                                         (int)m->e[i].mode));
        for (size_t i = 0; i < m->deleted.n; i++)
                json_array_append_new(deleted, json_string(m->deleted.v[i]));
        for (size_t i = 0; i < m->opaque.n; i++)
                json_array_append_new(opaque, json_string(m->opaque.v[i]));
        json_t *j =
            json_pack("{s:o, s:o, s:o, s:o}", "entries", entries, "deleted", deleted, "opaque",
                      opaque, "skipped", m->skipped ? json_incref(m->skipped) : json_array());
        if (!j)
                return -ENOMEM;
        int r = write_json_at(dir_fd, MANIFEST_FILE, j);
        json_decref(j);
        return r;
}

char *review_state_root(uid_t uid, const char *home)
{
        return paths_state_root(uid, home);
}

int review_create(const char *state_root, const char *id, const char *workspace,
                  uint64_t started_ns, char **ret_dir, struct al_error *err)
{
        if (!state_root || state_root[0] != '/')
                return al_error_set_message(err, EINVAL, "state directory \"%s\" is not absolute",
                                            state_root ? state_root : "");
        if (!id_valid(id))
                return al_error_set_message(err, EINVAL, "bad sandbox id \"%s\"", id);
        if (!workspace || workspace[0] != '/')
                return al_error_set_message(err, EINVAL, "workspace \"%s\" is not an absolute path",
                                            workspace ? workspace : "");
        if (started_ns > INT64_MAX)
                return al_error_set_message(err, ERANGE, "start time %" PRIu64, started_ns);

        _cleanup_free_ char *sandboxes = xasprintf("%s/sandboxes", state_root);
        int r = mkdir_p(sandboxes, 0700, 0700);
        if (r < 0)
                return al_error_set(err, r, "creating \"%s\"", sandboxes);
        _cleanup_close_ int sfd = open(sandboxes, O_PATH | O_DIRECTORY | O_CLOEXEC);
        if (sfd < 0)
                return al_error_set(err, errno, "opening \"%s\"", sandboxes);
        if (mkdirat(sfd, id, 0700) < 0)
                return al_error_set(err, errno, "creating \"%s/%s\"", sandboxes, id);
        _cleanup_close_ int dfd = openat(sfd, id, O_PATH | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
        if (dfd < 0)
                return al_error_set(err, errno, "opening \"%s/%s\"", sandboxes, id);
        if (mkdirat(dfd, CHANGES_DIR, 0700) < 0)
                return al_error_set(err, errno, "creating \"%s/%s/%s\"", sandboxes, id,
                                    CHANGES_DIR);

        struct manifest empty = {0};
        r = save_manifest(dfd, &empty);
        if (r < 0)
                return al_error_set(err, r, "writing \"%s/%s/%s\"", sandboxes, id, MANIFEST_FILE);
        json_t *meta = json_pack("{s:s, s:s, s:I, s:s}", "id", id, "workspace", workspace,
                                 "startedNs", (json_int_t)started_ns, "state", "pending");
        if (!meta)
                return al_error_set_message(err, EINVAL, "workspace path is not valid UTF-8");
        r = write_json_at(dfd, META_FILE, meta);
        json_decref(meta);
        if (r < 0)
                return al_error_set(err, r, "writing \"%s/%s/%s\"", sandboxes, id, META_FILE);
        if (ret_dir)
                *ret_dir = xasprintf("%s/%s", sandboxes, id);
        return 0;
}

int review_find(const char *state_root, const char *id, char **ret_dir, struct al_error *err)
{
        if (!id_valid(id))
                return al_error_set_message(err, EINVAL, "bad sandbox ID \"%s\"", id);
        _cleanup_free_ char *sandboxes = xasprintf("%s/sandboxes", state_root);
        int fd = open(sandboxes, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
        if (fd < 0) {
                if (errno == ENOENT)
                        return al_error_set_message(err, ENOENT, "no sandbox \"%s\"", id);
                return al_error_set(err, errno, "opening \"%s\"", sandboxes);
        }
        _cleanup_(closedirp) DIR *d = fdopendir(fd);
        if (!d) {
                close(fd);
                return al_error_set(err, errno, "opening \"%s\"", sandboxes);
        }
        struct stat st;
        if (fstatat(dirfd(d), id, &st, AT_SYMLINK_NOFOLLOW) == 0 && S_ISDIR(st.st_mode)) {
                *ret_dir = xasprintf("%s/%s", sandboxes, id);
                return 0;
        }
        if (strlen(id) < PREFIX_MIN)
                return al_error_set_message(err, ENOENT, "no sandbox \"%s\"", id);

        _cleanup_free_ char *found = NULL;
        size_t n = strlen(id);
        struct dirent *de;
        while ((errno = 0, de = readdir(d))) {
                if (!id_valid(de->d_name) || strncmp(de->d_name, id, n) != 0)
                        continue;
                if (fstatat(dirfd(d), de->d_name, &st, AT_SYMLINK_NOFOLLOW) < 0 ||
                    !S_ISDIR(st.st_mode))
                        continue;
                if (found)
                        return al_error_set_message(
                            err, EINVAL,
                            "sandbox ID prefix \"%s\" is ambiguous (\"%s\", "
                            "\"%s\", ...)",
                            id, found, de->d_name);
                found = xstrdup(de->d_name);
        }
        if (errno)
                return al_error_set(err, errno, "reading \"%s\"", sandboxes);
        if (!found)
                return al_error_set_message(err, ENOENT, "no sandbox \"%s\"", id);
        *ret_dir = xasprintf("%s/%s", sandboxes, found);
        return 0;
}

/* ---- capture ---- */

/* Files with more than one name, by inode, and the path of the copy made
 * of them first: in changes/ for a capture, in the workspace (with the
 * copy's own inode) for an accept. */
struct link_slot {
        dev_t dev;
        ino_t ino;
        dev_t to_dev;
        ino_t to_ino;
        char *path;
};

struct linktab {
        struct link_slot *v; /* open addressing, n < cap / 2 */
        size_t n, cap;
};

static void linktab_done(struct linktab *t)
{
        for (size_t i = 0; i < t->cap; i++)
                free(t->v[i].path);
        free(t->v);
        *t = (struct linktab){0};
}

static size_t link_hash(dev_t dev, ino_t ino, size_t cap)
{
        uint64_t h = (uint64_t)ino * 0x9e3779b97f4a7c15ULL ^ (uint64_t)dev * 0xc2b2ae3d27d4eb4fULL;
        return (size_t)(h ^ (h >> 29)) & (cap - 1);
}

/* The slot of (dev, ino), empty (path NULL) when it is not there yet. */
static struct link_slot *link_find(struct linktab *t, dev_t dev, ino_t ino)
{
        if (t->n + 1 > t->cap / 2) {
                size_t cap = t->cap ? t->cap * 2 : 256;
                struct link_slot *v = xcalloc(cap, sizeof(*v));
                for (size_t i = 0; i < t->cap; i++) {
                        struct link_slot *o = &t->v[i];
                        if (!o->path)
                                continue;
                        size_t k = link_hash(o->dev, o->ino, cap);
                        while (v[k].path)
                                k = (k + 1) & (cap - 1);
                        v[k] = *o;
                }
                free(t->v);
                t->v = v;
                t->cap = cap;
        }
        size_t k = link_hash(dev, ino, t->cap);
        while (t->v[k].path && !(t->v[k].dev == dev && t->v[k].ino == ino))
                k = (k + 1) & (t->cap - 1);
        return &t->v[k];
}

static void link_set(struct linktab *t, struct link_slot *s, const struct link_slot *val)
{
        if (!s->path)
                t->n++;
        free(s->path);
        *s = *val;
        s->path = xstrdup(val->path);
}

struct capture {
        int ws_fd;      /* -1 when the workspace is gone: everything is new */
        int changes_fd; /* changes/, where hard links are made */
        struct manifest m;
        struct review_summary sum;
        size_t count;
        uint64_t max_bytes; /* what the copy may cost the host */
        uint64_t charged;
        struct linktab links;
        char path[PATH_MAX];
        struct al_error *err;
};

/* What keeping an entry costs the host, charged before it is written: a
 * file its apparent size, so that a sparse file counts as what it becomes
 * wherever it is copied without holes, in whole blocks; a directory or a
 * symlink one block. */
#define CHARGE_BLOCK 4096u

static int capture_charge(struct capture *c, uint64_t size)
{
        uint64_t cost = size > UINT64_MAX - CHARGE_BLOCK
                            ? UINT64_MAX
                            : (size + CHARGE_BLOCK - 1) / CHARGE_BLOCK * CHARGE_BLOCK;
        if (cost < CHARGE_BLOCK)
                cost = CHARGE_BLOCK;
        if (cost > c->max_bytes || c->charged > c->max_bytes - cost)
                return al_error_set_message(
                    c->err, EDQUOT,
                    "keeping \"%s\" (%" PRIu64 " bytes, a sparse file at its full size) would "
                    "take the changes past limits.disk (%" PRIu64 " bytes); nothing was kept and "
                    "the workspace is unchanged. To keep such changes, raise limits.disk",
                    c->path, size, c->max_bytes);
        c->charged += cost;
        return 0;
}

static bool has_xattr(int fd, const char *name, const char *want)
{
        char buf[8];
        ssize_t n = fgetxattr(fd, name, buf, sizeof(buf));
        if (n < 0)
                return false;
        return !want || ((size_t)n == strlen(want) && memcmp(buf, want, (size_t)n) == 0);
}

static bool has_overlay_xattr(int fd, const char *what, const char *want)
{
        char name[64];
        snprintf(name, sizeof(name), "user.overlay.%s", what);
        if (has_xattr(fd, name, want))
                return true;
        snprintf(name, sizeof(name), "trusted.overlay.%s", what);
        return has_xattr(fd, name, want);
}

static void capture_skip(struct capture *c, size_t plen, const char *name, const char *reason)
{
        /* The name may not be printable: keep it escaped. */
        char buf[PATH_MAX * 4 + 1];
        size_t o = 0;
        memcpy(buf, c->path, plen);
        o = plen;
        if (plen)
                buf[o++] = '/';
        for (const unsigned char *s = (const unsigned char *)name; *s && o + 5 < sizeof(buf); s++) {
                if (*s < 0x20 || *s >= 0x7f || *s == '\\')
                        o += (size_t)snprintf(buf + o, sizeof(buf) - o, "\\x%02x", *s);
                else
                        buf[o++] = (char)*s;
        }
        buf[o] = '\0';
        if (!c->m.skipped)
                c->m.skipped = json_array();
        json_array_append_new(c->m.skipped, json_pack("{s:s, s:s}", "path", buf, "reason", reason));
        c->sum.skipped++;
}

static const char *special_kind(mode_t mode)
{
        if (S_ISFIFO(mode))
                return "named pipe";
        if (S_ISSOCK(mode))
                return "socket";
        if (S_ISCHR(mode))
                return "character device";
        if (S_ISBLK(mode))
                return "block device";
        return "unknown file type";
}

/* Open a file or directory of the upper layer for reading. The agent may
 * have taken away its owner's read permission, which stops an unprivileged
 * capture; the upper layer is about to go, so give it back there. */
static int open_upper(int dfd, const char *name, int flags, const struct stat *st)
{
        flags |= O_RDONLY | O_NOFOLLOW | O_CLOEXEC;
        int fd = openat(dfd, name, flags);
        if (fd >= 0 || errno != EACCES || st->st_uid != geteuid())
                return fd;
        mode_t need = S_ISDIR(st->st_mode) ? S_IRUSR | S_IXUSR : S_IRUSR;
        if (fchmodat(dfd, name, (st->st_mode & 07777) | need, AT_SYMLINK_NOFOLLOW) < 0)
                return -1;
        return openat(dfd, name, flags);
}

static int capture_file(struct capture *c, int dfd, int out_fd, const char *name,
                        const struct stat *st, enum hstate ps)
{
        _cleanup_close_ int in = open_upper(dfd, name, O_NONBLOCK | O_NOCTTY, st);
        if (in < 0)
                return al_error_set(c->err, errno, "opening \"%s\" in the upper layer", c->path);
        struct stat st2;
        if (fstat(in, &st2) < 0)
                return al_error_set(c->err, errno, "reading \"%s\"", c->path);
        if (!S_ISREG(st2.st_mode) || st2.st_ino != st->st_ino || st2.st_dev != st->st_dev)
                return al_error_set_message(c->err, EAGAIN, "\"%s\" changed while being captured",
                                            c->path);
        if (has_overlay_xattr(in, "metacopy", NULL))
                return al_error_set_message(
                    c->err, EOPNOTSUPP,
                    "\"%s\" is a metadata-only copy-up, which review does not "
                    "support",
                    c->path);
        mode_t mode = st->st_mode & 0777;

        bool exists = false;
        if (ps != H_NONE) {
                struct host h;
                int r = host_stat(c->ws_fd, c->path, &h);
                exists = r >= 0 && h.mode != 0;
                if (ps == H_MERGE && exists && S_ISREG(h.mode) &&
                    (h.mode & 07777) == (st->st_mode & 07777)) {
                        _cleanup_close_ int hfd =
                            open_beneath(c->ws_fd, c->path, O_RDONLY | O_NONBLOCK | O_NOCTTY);
                        bool same = false;
                        struct stat hst;
                        if (hfd >= 0 && fstat(hfd, &hst) == 0 && S_ISREG(hst.st_mode) &&
                            files_equal(in, hfd, &same) >= 0 && same)
                                return 0;
                }
        }

        /* A file with several names is copied once; its other names become
         * hard links to that copy, as they were in the upper layer. */
        struct link_slot *slot = NULL;
        if (st2.st_nlink > 1) {
                slot = link_find(&c->links, st2.st_dev, st2.st_ino);
                if (slot->path && linkat(c->changes_fd, slot->path, out_fd, name, 0) == 0) {
                        manifest_add(&c->m, c->path, T_FILE, st->st_mode);
                        if (exists)
                                c->sum.modified++;
                        else
                                c->sum.added++;
                        return 0;
                }
                if (slot->path && errno != EMLINK)
                        return al_error_set(c->err, errno, "linking \"%s\" in changes/", c->path);
        }
        int r = capture_charge(c, (uint64_t)st2.st_size);
        if (r < 0)
                return r;
        _cleanup_close_ int out =
            openat(out_fd, name, O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0600);
        if (out < 0)
                return al_error_set(c->err, errno, "creating \"%s\" in changes/", c->path);
        r = copy_data(in, out, (uint64_t)st2.st_size, &c->sum.bytes);
        if (r < 0)
                return al_error_set(c->err, r, "copying \"%s\"", c->path);
        if (fchmod(out, mode | 0600) < 0)
                return al_error_set(c->err, errno, "setting the mode of \"%s\"", c->path);
        if (slot)
                link_set(
                    &c->links, slot,
                    &(struct link_slot){.dev = st2.st_dev, .ino = st2.st_ino, .path = c->path});
        manifest_add(&c->m, c->path, T_FILE, st->st_mode);
        if (exists)
                c->sum.modified++;
        else
                c->sum.added++;
        return 0;
}

static int capture_symlink(struct capture *c, int dfd, int out_fd, const char *name, enum hstate ps)
{
        char target[PATH_MAX];
        ssize_t n = readlinkat(dfd, name, target, sizeof(target));
        if (n < 0)
                return al_error_set(c->err, errno, "reading the symlink \"%s\"", c->path);
        if (n >= (ssize_t)sizeof(target))
                return al_error_set_message(c->err, ENAMETOOLONG, "reading the symlink \"%s\"",
                                            c->path);
        target[n] = '\0';

        bool exists = false;
        if (ps != H_NONE) {
                struct host h;
                char old[PATH_MAX];
                exists = host_stat(c->ws_fd, c->path, &h) >= 0 && h.mode != 0;
                if (ps == H_MERGE && exists && S_ISLNK(h.mode) &&
                    read_link(c->ws_fd, c->path, old) >= 0 && STREQ(old, target))
                        return 0;
        }
        int r = capture_charge(c, (uint64_t)n);
        if (r < 0)
                return r;
        if (symlinkat(target, out_fd, name) < 0)
                return al_error_set(c->err, errno, "creating \"%s\" in changes/", c->path);
        manifest_add(&c->m, c->path, T_SYMLINK, 0777);
        if (exists)
                c->sum.modified++;
        else
                c->sum.added++;
        return 0;
}

/* Walk one upper directory (fd owned here) into out_fd. ps says whether the
 * workspace has this directory too: only where its entries show through
 * (H_MERGE) may an entry identical to the workspace's be left out. */
static int capture_dir(struct capture *c, int fd, int out_fd, size_t plen, unsigned depth,
                       enum hstate ps)
{
        _cleanup_(closedirp) DIR *d = fdopendir(fd);
        if (!d) {
                close(fd);
                return al_error_set(c->err, errno, "reading \"%s\" in the upper layer",
                                    plen ? c->path : ".");
        }
        struct dirent *de;
        while ((errno = 0, de = readdir(d))) {
                const char *name = de->d_name;
                if (STREQ(name, ".") || STREQ(name, ".."))
                        continue;
                if (++c->count > REVIEW_MAX_ENTRIES)
                        return al_error_set_message(c->err, E2BIG,
                                                    "the upper layer holds more than %d entries",
                                                    REVIEW_MAX_ENTRIES);
                c->path[plen] = '\0';
                if (!name_valid(name)) {
                        capture_skip(c, plen, name, "name not allowed");
                        continue;
                }
                size_t nlen = strlen(name);
                if (plen + 1 + nlen >= sizeof(c->path))
                        return al_error_set_message(c->err, ENAMETOOLONG, "a path beneath \"%s\"",
                                                    c->path);
                size_t len = plen;
                if (plen)
                        c->path[len++] = '/';
                memcpy(c->path + len, name, nlen + 1);
                len += nlen;

                struct stat st;
                if (fstatat(dirfd(d), name, &st, AT_SYMLINK_NOFOLLOW) < 0)
                        return al_error_set(c->err, errno, "inspecting \"%s\"", c->path);

                int r = 0;
                if (S_ISCHR(st.st_mode) && st.st_rdev == makedev(0, 0)) {
                        strarr_add(&c->m.deleted, c->path);
                        c->sum.deleted++;
                } else if (S_ISDIR(st.st_mode)) {
                        if (depth + 1 > REVIEW_MAX_DEPTH)
                                return al_error_set_message(
                                    c->err, ELOOP, "the upper layer is deeper than %d levels",
                                    REVIEW_MAX_DEPTH);
                        int sub = open_upper(dirfd(d), name, O_DIRECTORY, &st);
                        if (sub < 0)
                                return al_error_set(c->err, errno, "opening \"%s\"", c->path);
                        struct stat st2;
                        if (fstat(sub, &st2) < 0 || st2.st_ino != st.st_ino) {
                                close(sub);
                                return al_error_set_message(
                                    c->err, EAGAIN, "\"%s\" changed while being captured", c->path);
                        }
                        if (has_overlay_xattr(sub, "redirect", NULL)) {
                                close(sub);
                                return al_error_set_message(
                                    c->err, EOPNOTSUPP,
                                    "\"%s\" is a redirected (renamed) directory, "
                                    "which review does not support",
                                    c->path);
                        }
                        bool opaque = has_overlay_xattr(sub, "opaque", "y");
                        enum hstate child = H_NONE;
                        struct host h;
                        if (ps != H_NONE && host_stat(c->ws_fd, c->path, &h) >= 0 &&
                            S_ISDIR(h.mode))
                                child = ps == H_REPLACE || opaque ? H_REPLACE : H_MERGE;
                        if ((r = capture_charge(c, 0)) < 0) {
                                close(sub);
                                return r;
                        }
                        if (mkdirat(out_fd, name, 0700) < 0) {
                                close(sub);
                                return al_error_set(c->err, errno, "creating \"%s\" in changes/",
                                                    c->path);
                        }
                        int out_sub =
                            openat(out_fd, name, O_PATH | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
                        if (out_sub < 0) {
                                close(sub);
                                return al_error_set(c->err, errno, "opening \"%s\" in changes/",
                                                    c->path);
                        }
                        manifest_add(&c->m, c->path, T_DIR, st.st_mode);
                        if (opaque)
                                strarr_add(&c->m.opaque, c->path);
                        r = capture_dir(c, sub, out_sub, len, depth + 1, child);
                        close(out_sub);
                } else if (S_ISREG(st.st_mode))
                        r = capture_file(c, dirfd(d), out_fd, name, &st, ps);
                else if (S_ISLNK(st.st_mode))
                        r = capture_symlink(c, dirfd(d), out_fd, name, ps);
                else
                        capture_skip(c, plen, name, special_kind(st.st_mode));
                if (r < 0)
                        return r;
        }
        if (errno)
                return al_error_set(c->err, errno, "reading \"%s\" in the upper layer",
                                    plen ? c->path : ".");
        return 0;
}

/* A DIR on fd's directory that leaves fd itself open. */
static int opendir_at(int fd, DIR **ret)
{
        int dup_fd = openat(fd, ".", O_RDONLY | O_DIRECTORY | O_CLOEXEC);
        if (dup_fd < 0)
                return -errno;
        DIR *d = fdopendir(dup_fd);
        if (!d) {
                close(dup_fd);
                return -errno;
        }
        *ret = d;
        return 0;
}

static int clear_dir(int fd)
{
        _cleanup_(closedirp) DIR *d = NULL;
        int r = opendir_at(fd, &d);
        if (r < 0)
                return r;
        struct dirent *de;
        while ((errno = 0, de = readdir(d))) {
                if (STREQ(de->d_name, ".") || STREQ(de->d_name, ".."))
                        continue;
                r = remove_tree_at(fd, de->d_name, 0);
                if (r < 0)
                        return r;
        }
        return -errno;
}

static int dir_is_empty(int fd, bool *ret)
{
        _cleanup_(closedirp) DIR *d = NULL;
        int r = opendir_at(fd, &d);
        if (r < 0)
                return r;
        struct dirent *de;
        *ret = true;
        while ((errno = 0, de = readdir(d)))
                if (!STREQ(de->d_name, ".") && !STREQ(de->d_name, "..")) {
                        *ret = false;
                        break;
                }
        return -errno;
}

/* A capture that failed keeps nothing; meta.json says why, so that diff
 * and accept name the cause instead of showing no change. */
static void mark_failed(struct review *rv, const char *why)
{
        json_object_set_new(rv->meta, "state", json_string("failed"));
        json_object_set_new(rv->meta, "error", json_string(why));
        write_json_at(rv->dir_fd, META_FILE, rv->meta);
}

static int capture(int upper_fd, const char *state_dir, bool replace, uint64_t max_bytes,
                   struct review_summary *ret, struct al_error *err)
{
        _cleanup_(review_done) struct review rv;
        int r = review_open(state_dir, true, &rv, err);
        if (r < 0)
                return r;
        /* A snapshot of a running sandbox that failed may be taken again. */
        if (!STREQ(rv.state, "pending") && !(replace && STREQ(rv.state, "failed")))
                return al_error_set_message(err, EALREADY, "sandbox %s is %s", rv.id, rv.state);
        rv.changes_fd =
            openat(rv.dir_fd, CHANGES_DIR, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
        if (rv.changes_fd < 0)
                return al_error_set(err, errno, "opening %s/%s", state_dir, CHANGES_DIR);
        bool empty = false;
        r = dir_is_empty(rv.changes_fd, &empty);
        if (r < 0)
                return al_error_set(err, r, "reading %s/%s", state_dir, CHANGES_DIR);
        if (!empty && !replace)
                return al_error_set_message(err, EEXIST,
                                            "sandbox %s already holds captured changes", rv.id);
        if (!empty) {
                r = clear_dir(rv.changes_fd);
                if (r < 0)
                        return al_error_set(err, r, "clearing %s/%s", state_dir, CHANGES_DIR);
        }

        /* A fresh open file description: the caller's offset stays put. */
        int root = openat(upper_fd, ".", O_RDONLY | O_DIRECTORY | O_CLOEXEC);
        if (root < 0)
                return al_error_set(err, errno, "opening the upper layer");

        struct capture c = {
            .err = err,
            .changes_fd = rv.changes_fd,
            .max_bytes = max_bytes ? max_bytes : REVIEW_DEFAULT_MAX_BYTES,
        };
        c.ws_fd = open(rv.workspace, O_PATH | O_DIRECTORY | O_CLOEXEC);
        r = capture_dir(&c, root, rv.changes_fd, 0, 0, c.ws_fd >= 0 ? H_MERGE : H_NONE);
        closep(&c.ws_fd);
        linktab_done(&c.links);
        if (r >= 0) {
                manifest_sort(&c.m);
                r = save_manifest(rv.dir_fd, &c.m);
                if (r < 0)
                        al_error_set(err, r, "writing %s/%s", state_dir, MANIFEST_FILE);
        }
        if (r < 0) {
                clear_dir(rv.changes_fd);
                manifest_done(&c.m);
                struct manifest none = {0};
                save_manifest(rv.dir_fd, &none);
                mark_failed(&rv, err->msg);
                al_error_wrap(err, "capturing the changes of sandbox %s", rv.id);
                return r;
        }
        manifest_done(&c.m);
        if (STREQ(rv.state, "failed")) {
                json_object_set_new(rv.meta, "state", json_string("pending"));
                json_object_del(rv.meta, "error");
                r = write_json_at(rv.dir_fd, META_FILE, rv.meta);
                if (r < 0)
                        return al_error_set(err, r, "writing %s/%s", state_dir, META_FILE);
        }
        if (ret)
                *ret = c.sum;
        return 0;
}

int review_capture(int upper_fd, const char *state_dir, uint64_t max_bytes,
                   struct review_summary *ret, struct al_error *err)
{
        return capture(upper_fd, state_dir, false, max_bytes, ret, err);
}

int review_recapture(int upper_fd, const char *state_dir, uint64_t max_bytes,
                     struct review_summary *ret, struct al_error *err)
{
        return capture(upper_fd, state_dir, true, max_bytes, ret, err);
}

/* ---- plan: what accepting would do to the workspace as it is now ---- */

enum op { OP_REMOVE, OP_DIR, OP_FILE, OP_SYMLINK };

struct item {
        char *path;
        enum op op;
        mode_t mode; /* proposed permission bits */
        struct host host;
        bool selected;
        bool noop;
};

struct plan {
        struct item *v;
        size_t n, cap;
        struct strarr accepted;
};

static void plan_done(struct plan *p)
{
        for (size_t i = 0; i < p->n; i++)
                free(p->v[i].path);
        free(p->v);
        strarr_done(&p->accepted);
        *p = (struct plan){0};
}

static int plan_add(struct plan *p, const char *path, enum op op, mode_t mode, const struct host *h)
{
        if (p->n >= 2 * (size_t)REVIEW_MAX_ENTRIES)
                return -E2BIG;
        if (p->n == p->cap) {
                p->cap = p->cap ? p->cap * 2 : 64;
                p->v = xrealloc(p->v, p->cap, sizeof(struct item));
        }
        p->v[p->n++] = (struct item){.path = xstrdup(path), .op = op, .mode = mode, .host = *h};
        return 0;
}

static int cmp_item(const void *a, const void *b)
{
        const struct item *x = a, *y = b;
        int c = strcmp(x->path, y->path);
        return c ? c : (int)x->op - (int)y->op;
}

/* Whether a request for req takes path: path is at or beneath it and, if
 * path holds hidden code points, req names every one of them. Such a name
 * is never taken by a request for a directory above it, nor by accepting
 * everything. */
static bool request_takes(const char *req, const char *path)
{
        return is_beneath(path, req) && strlen(req) >= hidden_end(path);
}

static bool plan_covered(const struct plan *p, const char *path)
{
        for (size_t i = 0; i < p->accepted.n; i++)
                if (request_takes(p->accepted.v[i], path))
                        return true;
        return false;
}

struct planner {
        struct review *rv;
        struct plan *p;
        struct al_error *err;
        enum hstate *hs; /* per manifest entry */
};

/* Removal items for the workspace entry at path and, for a directory,
 * everything beneath it. */
static int plan_remove(struct planner *pl, int at, const char *name, char *path, size_t plen,
                       unsigned depth)
{
        struct host h;
        int r = host_stat(at, name, &h);
        if (r < 0)
                return al_error_set(pl->err, r, "inspecting \"%s\" in the workspace", path);
        if (h.mode == 0)
                return 0;
        r = plan_add(pl->p, path, OP_REMOVE, 0, &h);
        if (r < 0)
                return al_error_set(pl->err, r, "too many changes");
        if (!S_ISDIR(h.mode))
                return 0;
        if (depth >= REVIEW_MAX_DEPTH)
                return al_error_set_message(pl->err, ELOOP, "\"%s\" in the workspace is too deep",
                                            path);
        int fd = open_beneath(at, name, O_RDONLY | O_DIRECTORY);
        if (fd < 0)
                return al_error_set(pl->err, fd, "opening \"%s\" in the workspace", path);
        _cleanup_(closedirp) DIR *d = fdopendir(fd);
        if (!d) {
                close(fd);
                return al_error_set(pl->err, errno, "reading \"%s\" in the workspace", path);
        }
        struct dirent *de;
        while ((errno = 0, de = readdir(d))) {
                if (STREQ(de->d_name, ".") || STREQ(de->d_name, ".."))
                        continue;
                size_t nlen = strlen(de->d_name);
                if (plen + 1 + nlen >= PATH_MAX)
                        return al_error_set_message(pl->err, ENAMETOOLONG, "a path beneath \"%s\"",
                                                    path);
                path[plen] = '/';
                memcpy(path + plen + 1, de->d_name, nlen + 1);
                r = plan_remove(pl, dirfd(d), de->d_name, path, plen + 1 + nlen, depth + 1);
                path[plen] = '\0';
                if (r < 0)
                        return r;
        }
        if (errno)
                return al_error_set(pl->err, errno, "reading \"%s\" in the workspace", path);
        return 0;
}

static int plan_remove_path(struct planner *pl, const char *rel)
{
        char path[PATH_MAX];
        snprintf(path, sizeof(path), "%s", rel);
        return plan_remove(pl, pl->rv->ws_fd, rel, path, strlen(path), 0);
}

/* Remove what the workspace has in directory dir that the opaque upper
 * directory lacks. */
static int plan_replace_children(struct planner *pl, const char *dir)
{
        int fd = open_beneath(pl->rv->ws_fd, dir, O_RDONLY | O_DIRECTORY);
        if (fd < 0)
                return al_error_set(pl->err, fd, "opening \"%s\" in the workspace", dir);
        _cleanup_(closedirp) DIR *d = fdopendir(fd);
        if (!d) {
                close(fd);
                return al_error_set(pl->err, errno, "reading \"%s\" in the workspace", dir);
        }
        char path[PATH_MAX];
        struct dirent *de;
        while ((errno = 0, de = readdir(d))) {
                if (STREQ(de->d_name, ".") || STREQ(de->d_name, ".."))
                        continue;
                if (snprintf(path, sizeof(path), "%s/%s", dir, de->d_name) >= (int)sizeof(path))
                        return al_error_set_message(pl->err, ENAMETOOLONG, "a path beneath \"%s\"",
                                                    dir);
                if (manifest_find(&pl->rv->m, path))
                        continue;
                int r = plan_remove(pl, dirfd(d), de->d_name, path, strlen(path), 0);
                if (r < 0)
                        return r;
        }
        if (errno)
                return al_error_set(pl->err, errno, "reading \"%s\" in the workspace", dir);
        return 0;
}

static enum hstate parent_state(struct planner *pl, const char *path)
{
        char dir[PATH_MAX];
        split_path(path, dir);
        if (!dir[0])
                return H_MERGE;
        const struct entry *e = manifest_find(&pl->rv->m, dir);
        if (!e || e->type != T_DIR)
                return H_NONE;
        return pl->hs[e - pl->rv->m.e];
}

static int plan_build(struct review *rv, struct plan *p, struct al_error *err)
{
        _cleanup_free_ enum hstate *hs = xcalloc(rv->m.n_e, sizeof(enum hstate));
        struct planner pl = {.rv = rv, .p = p, .err = err, .hs = hs};
        json_t *acc = json_object_get(rv->meta, "accepted");
        size_t i;
        json_t *v;
        int r;

        *p = (struct plan){0};
        json_array_foreach(acc, i, v) strarr_add(&p->accepted, json_string_value(v));

        for (i = 0; i < rv->m.n_e; i++) {
                const struct entry *e = &rv->m.e[i];
                hs[i] = H_NONE;
                bool covered = plan_covered(p, e->path);
                enum hstate ps = parent_state(&pl, e->path);
                struct host h = {0};
                if (ps != H_NONE || covered) {
                        r = host_stat(rv->ws_fd, e->path, &h);
                        if (r < 0)
                                return al_error_set(err, r, "inspecting \"%s\" in the workspace",
                                                    e->path);
                }
                if (covered) {
                        /* Taken already; what it holds may not be (a name
                         * with hidden characters), and is planned against
                         * the directory that is there now. */
                        if (e->type == T_DIR && S_ISDIR(h.mode))
                                hs[i] = H_MERGE;
                        continue;
                }
                if (e->type == T_DIR) {
                        if (S_ISDIR(h.mode)) {
                                bool opaque = strarr_has(&rv->m.opaque, e->path);
                                hs[i] = ps == H_REPLACE || opaque ? H_REPLACE : H_MERGE;
                                /* A mode change, or set-id bits the diff
                                 * must show even though accept drops them. */
                                if (((h.mode & 0777) != (e->mode & 0777) ||
                                     (e->mode & 07000 & ~h.mode)) &&
                                    (r = plan_add(p, e->path, OP_DIR, e->mode, &h)) < 0)
                                        return al_error_set(err, r, "too many changes");
                                if (hs[i] == H_REPLACE &&
                                    (r = plan_replace_children(&pl, e->path)) < 0)
                                        return r;
                                continue;
                        }
                        if (h.mode && (r = plan_remove_path(&pl, e->path)) < 0)
                                return r;
                        struct host none = {0};
                        if ((r = plan_add(p, e->path, OP_DIR, e->mode, &none)) < 0)
                                return al_error_set(err, r, "too many changes");
                        continue;
                }
                if (S_ISDIR(h.mode)) {
                        if ((r = plan_remove_path(&pl, e->path)) < 0)
                                return r;
                        h = (struct host){0};
                }
                r = plan_add(p, e->path, e->type == T_FILE ? OP_FILE : OP_SYMLINK, e->mode, &h);
                if (r < 0)
                        return al_error_set(err, r, "too many changes");
        }
        for (i = 0; i < rv->m.deleted.n; i++) {
                const char *path = rv->m.deleted.v[i];
                if (plan_covered(p, path) || manifest_find(&rv->m, path))
                        continue;
                /* Beneath an opaque directory the removal is planned already. */
                if (parent_state(&pl, path) != H_MERGE)
                        continue;
                if ((r = plan_remove_path(&pl, path)) < 0)
                        return r;
        }

        if (p->n > 1)
                qsort(p->v, p->n, sizeof(struct item), cmp_item);
        size_t o = 0;
        for (i = 0; i < p->n; i++) {
                if ((o > 0 && cmp_item(&p->v[o - 1], &p->v[i]) == 0) ||
                    plan_covered(p, p->v[i].path)) {
                        free(p->v[i].path);
                        continue;
                }
                p->v[o++] = p->v[i];
        }
        p->n = o;
        return 0;
}

static int review_load(const char *state_dir, bool exclusive, struct review *rv,
                       struct al_error *err)
{
        int r = review_open(state_dir, exclusive, rv, err);
        if (r < 0)
                return r;
        if (STREQ(rv->state, "failed")) {
                const char *why = json_string_value(json_object_get(rv->meta, "error"));
                return al_error_set_message(err, ENODATA,
                                            "the changes of sandbox %s were not kept: %s", rv->id,
                                            why ? why : "the capture failed");
        }
        if (!STREQ(rv->state, "pending"))
                return al_error_set_message(err, EALREADY, "sandbox %s was %s already", rv->id,
                                            rv->state);
        r = load_manifest(rv, state_dir, err);
        if (r < 0)
                return r;
        rv->changes_fd =
            openat(rv->dir_fd, CHANGES_DIR, O_PATH | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
        if (rv->changes_fd < 0)
                return al_error_set(err, errno, "opening %s/%s", state_dir, CHANGES_DIR);
        rv->ws_fd = open(rv->workspace, O_PATH | O_DIRECTORY | O_CLOEXEC);
        if (rv->ws_fd < 0)
                return al_error_set(err, errno, "opening the workspace \"%s\"", rv->workspace);
        return 0;
}

/* ---- diff ---- */

struct differ {
        struct review *rv;
        FILE *out;
        struct al_error *err;
};

static int spawn_diff(struct differ *d, int a, const char *alabel, int b, const char *blabel)
{
        int pipefd[2];
        if (pipe2(pipefd, O_CLOEXEC) < 0)
                return -errno;
        _cleanup_close_ int rd = pipefd[0];
        _cleanup_close_ int wr = pipefd[1];

        char *argv[] = {
            (char *)"diff",
            (char *)"-u",
            (char *)"--label",
            (char *)alabel,
            (char *)"--label",
            (char *)blabel,
            (char *)(a >= 0 ? "/dev/fd/3" : "/dev/null"),
            (char *)(b >= 0 ? "/dev/fd/4" : "/dev/null"),
            NULL,
        };
        char *envp[] = {(char *)"LC_ALL=C", (char *)"PATH=/usr/bin:/bin", NULL};
        struct child_spawn cs = {
            .path = DIFF_PROGRAM,
            .argv = argv,
            .envp = envp,
            .fds = {CHILD_FD_NULL, wr, CHILD_FD_NULL, a >= 0 ? a : CHILD_FD_CLOSED,
                    b >= 0 ? b : CHILD_FD_CLOSED},
            .n_fds = 5,
        };
        pid_t pid;
        int r = child_spawn(&cs, &pid, NULL);
        if (r < 0)
                return al_error_set(d->err, r, "running %s", DIFF_PROGRAM);
        closep(&wr);
        wr = -1;

        char buf[COPY_CHUNK];
        int rerr = 0;
        for (;;) {
                ssize_t n = read(rd, buf, sizeof(buf));
                if (n < 0 && errno == EINTR)
                        continue;
                if (n < 0) {
                        rerr = -errno;
                        break;
                }
                if (n == 0)
                        break;
                if (!rerr && fwrite(buf, 1, (size_t)n, d->out) != (size_t)n)
                        rerr = -EIO;
        }
        int status;
        while (waitpid(pid, &status, 0) < 0)
                if (errno != EINTR)
                        return al_error_set(d->err, errno, "waiting for %s", DIFF_PROGRAM);
        if (rerr < 0)
                return al_error_set(d->err, rerr, "writing the diff");
        if (!WIFEXITED(status) || WEXITSTATUS(status) > 1)
                return al_error_set(d->err, 0, "%s failed (status 0x%x)", DIFF_PROGRAM, status);
        return 0;
}

static void put_escaped(FILE *out, const char *s, bool backslash)
{
        for (; *s; s++) {
                unsigned char c = (unsigned char)*s;
                if (c < 0x20 || c == 0x7f || (backslash && c == '\\'))
                        fprintf(out, "\\x%02x", c);
                else
                        fputc(c, out);
        }
}

#define QUOTED_MAX (PATH_MAX * 4 + 8)

/* Whether a name must be quoted in a diff: it holds a hidden code point, a
 * control character, bytes that are not UTF-8 (only a host name can), a
 * double quote or a backslash. */
static bool needs_quote(const char *path)
{
        const unsigned char *s = (const unsigned char *)path;
        size_t n = strlen(path);
        for (size_t i = 0; i < n;) {
                uint32_t cp;
                size_t len = utf8_next(s + i, n - i, &cp);
                if (len == 0 || cp < 0x20 || (cp >= 0x7f && cp <= 0x9f) || cp == '"' ||
                    cp == '\\' || is_hidden_codepoint(cp))
                        return true;
                i += len;
        }
        return false;
}

/* prefix and path as the diff names them: as they are, or in double
 * quotes with control characters, hidden code points and stray bytes as
 * octal escapes, which is how git writes such a name and git apply reads
 * it. Either way a name that looks like another cannot pass for it. */
static const char *qpath(char buf[static QUOTED_MAX], const char *prefix, const char *path)
{
        if (!needs_quote(path)) {
                snprintf(buf, QUOTED_MAX, "%s%s", prefix, path);
                return buf;
        }
        const unsigned char *s = (const unsigned char *)path;
        size_t n = strlen(path), o = 0;
        o += (size_t)snprintf(buf, QUOTED_MAX, "\"%s", prefix);
        for (size_t i = 0; i < n && o + 16 < QUOTED_MAX;) {
                uint32_t cp;
                size_t len = utf8_next(s + i, n - i, &cp);
                bool esc =
                    len == 0 || cp < 0x20 || (cp >= 0x7f && cp <= 0x9f) || is_hidden_codepoint(cp);
                if (len == 0)
                        len = 1;
                for (size_t k = 0; k < len; k++) {
                        if (esc)
                                o += (size_t)snprintf(buf + o, QUOTED_MAX - o, "\\%03o", s[i + k]);
                        else if (s[i + k] == '"' || s[i + k] == '\\') {
                                buf[o++] = '\\';
                                buf[o++] = (char)s[i + k];
                        } else
                                buf[o++] = (char)s[i + k];
                }
                i += len;
        }
        buf[o++] = '"';
        buf[o] = '\0';
        return buf;
}

/* Before an entry whose name holds hidden code points, a line that shows
 * them, as \uXXXX in the name and by number; git apply skips it. */
static void note_hidden(FILE *out, const char *path)
{
        if (!hidden_end(path))
                return;
        const unsigned char *s = (const unsigned char *)path;
        size_t n = strlen(path);
        fputs("airlock: hidden characters in the name \"", out);
        for (size_t i = 0; i < n;) {
                uint32_t cp;
                size_t len = utf8_next(s + i, n - i, &cp);
                if (is_hidden_codepoint(cp))
                        fprintf(out, cp > 0xffff ? "\\U%08x" : "\\u%04x", (unsigned)cp);
                else if (cp == '\\' || cp == '"')
                        fprintf(out, "\\%c", (char)cp);
                else
                        fwrite(s + i, 1, len, out);
                i += len;
        }
        fputs("\" (", out);
        const char *sep = "";
        for (size_t i = 0; i < n;) {
                uint32_t cp;
                i += utf8_next(s + i, n - i, &cp);
                if (is_hidden_codepoint(cp)) {
                        fprintf(out, "%sU+%04X", sep, (unsigned)cp);
                        sep = ", ";
                }
        }
        fputs("); accept takes it only when it is named\n", out);
}

/* The "diff --git" line of an entry, after the notes about it. */
static void diff_header(FILE *out, const char *path)
{
        char a[QUOTED_MAX], b[QUOTED_MAX];
        note_hidden(out, path);
        fprintf(out, "diff --git %s %s\n", qpath(a, "a/", path), qpath(b, "b/", path));
}

/* Set-id and sticky bits the agent set: accept never applies them, and the
 * diff says so. */
static void note_setid(FILE *out, const char *path, mode_t mode)
{
        if (!(mode & 07000))
                return;
        const char *names[3];
        size_t n = 0;
        if (mode & S_ISUID)
                names[n++] = "setuid";
        if (mode & S_ISGID)
                names[n++] = "setgid";
        if (mode & S_ISVTX)
                names[n++] = "sticky";
        char q[QUOTED_MAX];
        fprintf(out, "airlock: %s: the sandbox set the ", qpath(q, "", path));
        for (size_t i = 0; i < n; i++)
                fprintf(out, "%s%s", i == 0 ? "" : i + 1 == n ? " and " : ", ", names[i]);
        fprintf(out, " %s (mode %04o); accept does not apply %s\n", n == 1 ? "bit" : "bits",
                (unsigned)mode & 07777, n == 1 ? "it" : "them");
}

/* Symlinks diff as one-line files holding the target, as git shows them;
 * control characters in a target are escaped so it stays one line. */
static void diff_link_body(FILE *out, const char *path, const char *old, const char *new)
{
        char q[QUOTED_MAX];
        if (old)
                fprintf(out, "--- %s\n", qpath(q, "a/", path));
        else
                fputs("--- /dev/null\n", out);
        if (new)
                fprintf(out, "+++ %s\n", qpath(q, "b/", path));
        else
                fputs("+++ /dev/null\n", out);
        fprintf(out, "@@ -%s +%s @@\n", old ? "1" : "0,0", new ? "1" : "0,0");
        if (old) {
                fputc('-', out);
                put_escaped(out, old, true);
                fputs("\n\\ No newline at end of file\n", out);
        }
        if (new) {
                fputc('+', out);
                put_escaped(out, new, true);
                fputs("\n\\ No newline at end of file\n", out);
        }
}

static unsigned git_mode(mode_t st_mode, mode_t perm)
{
        if (S_ISLNK(st_mode))
                return 0120000;
        return (unsigned)((st_mode & S_IFMT) | (perm & 0777));
}

/* The workspace's file at path is going away. */
static int diff_removed(struct differ *d, const char *path, const struct host *h)
{
        FILE *out = d->out;
        char q[QUOTED_MAX];
        diff_header(out, path);
        fprintf(out, "deleted file mode %06o\n", git_mode(h->mode, h->mode));
        if (S_ISLNK(h->mode)) {
                char target[PATH_MAX];
                int r = read_link(d->rv->ws_fd, path, target);
                if (r < 0)
                        return al_error_set(d->err, r, "reading \"%s\" in the workspace", path);
                diff_link_body(out, path, target, NULL);
                return 0;
        }
        if (!S_ISREG(h->mode))
                return 0;
        _cleanup_close_ int fd = open_beneath(d->rv->ws_fd, path, O_RDONLY | O_NONBLOCK | O_NOCTTY);
        if (fd < 0)
                return al_error_set(d->err, fd, "opening \"%s\" in the workspace", path);
        struct stat st;
        bool bin;
        if (fstat(fd, &st) < 0 || is_binary(fd, &bin) < 0)
                return al_error_set(d->err, errno, "reading \"%s\" in the workspace", path);
        if (st.st_size == 0)
                return 0;
        if (bin) {
                fprintf(out, "Binary files %s and /dev/null differ\n", qpath(q, "a/", path));
                return 0;
        }
        return spawn_diff(d, fd, qpath(q, "a/", path), -1, "/dev/null");
}

static int diff_file(struct differ *d, const struct item *it)
{
        FILE *out = d->out;
        const char *path = it->path;
        _cleanup_close_ int b = open_beneath(d->rv->changes_fd, path, O_RDONLY | O_NONBLOCK);
        if (b < 0)
                return al_error_set(d->err, b, "opening \"%s\" in changes/", path);
        struct stat bst;
        bool bbin;
        if (fstat(b, &bst) < 0 || is_binary(b, &bbin) < 0)
                return al_error_set(d->err, errno, "reading \"%s\" in changes/", path);
        if (!S_ISREG(bst.st_mode))
                return al_error_set_message(d->err, EBADMSG, "\"%s\" in changes/ is not a file",
                                            path);
        char alabel[QUOTED_MAX], blabel[QUOTED_MAX];
        qpath(alabel, "a/", path);
        qpath(blabel, "b/", path);
        unsigned bmode = git_mode(S_IFREG, it->mode);

        if (it->host.mode && !S_ISREG(it->host.mode)) {
                int r = diff_removed(d, path, &it->host);
                if (r < 0)
                        return r;
        }
        if (S_ISREG(it->host.mode)) {
                _cleanup_close_ int a =
                    open_beneath(d->rv->ws_fd, path, O_RDONLY | O_NONBLOCK | O_NOCTTY);
                if (a < 0)
                        return al_error_set(d->err, a, "opening \"%s\" in the workspace", path);
                bool same, abin;
                if (files_equal(a, b, &same) < 0 || is_binary(a, &abin) < 0)
                        return al_error_set(d->err, errno, "reading \"%s\"", path);
                unsigned amode = git_mode(S_IFREG, it->host.mode);
                note_setid(out, path, it->mode);
                if (same && amode == bmode)
                        return 0;
                diff_header(out, path);
                if (amode != bmode)
                        fprintf(out, "old mode %06o\nnew mode %06o\n", amode, bmode);
                if (same)
                        return 0;
                if (abin || bbin) {
                        fprintf(out, "Binary files %s and %s differ\n", alabel, blabel);
                        return 0;
                }
                return spawn_diff(d, a, alabel, b, blabel);
        }
        note_setid(out, path, it->mode);
        diff_header(out, path);
        fprintf(out, "new file mode %06o\n", bmode);
        if (bst.st_size == 0)
                return 0;
        if (bbin) {
                fprintf(out, "Binary files /dev/null and %s differ\n", blabel);
                return 0;
        }
        return spawn_diff(d, -1, "/dev/null", b, blabel);
}

static int diff_symlink(struct differ *d, const struct item *it)
{
        char target[PATH_MAX], old[PATH_MAX];
        int r = read_link(d->rv->changes_fd, it->path, target);
        if (r < 0)
                return al_error_set(d->err, r, "reading \"%s\" in changes/", it->path);
        if (S_ISLNK(it->host.mode)) {
                r = read_link(d->rv->ws_fd, it->path, old);
                if (r < 0)
                        return al_error_set(d->err, r, "reading \"%s\" in the workspace", it->path);
                if (STREQ(old, target))
                        return 0;
                diff_header(d->out, it->path);
                diff_link_body(d->out, it->path, old, target);
                return 0;
        }
        if (it->host.mode && (r = diff_removed(d, it->path, &it->host)) < 0)
                return r;
        diff_header(d->out, it->path);
        fputs("new file mode 120000\n", d->out);
        diff_link_body(d->out, it->path, NULL, target);
        return 0;
}

/* Directories: git shows them only through their files, so a new empty
 * one, or one the agent opened to everyone, would pass unseen. A new
 * directory is a line of its own, which git apply skips; a new mode of an
 * existing one is a mode change. */
static void diff_dir(FILE *out, const struct item *it)
{
        char q[QUOTED_MAX];
        note_setid(out, it->path, it->mode);
        if (S_ISDIR(it->host.mode)) {
                if ((it->host.mode & 0777) == (it->mode & 0777))
                        return;
                diff_header(out, it->path);
                fprintf(out, "old mode %06o\nnew mode %06o\n",
                        git_mode(it->host.mode, it->host.mode), git_mode(S_IFDIR, it->mode));
                return;
        }
        note_hidden(out, it->path);
        fprintf(out, "new directory %s/ (mode %06o%s)\n", qpath(q, "", it->path),
                git_mode(S_IFDIR, it->mode), (it->mode & 0002) ? ", writable by everyone" : "");
}

int review_diff(const char *state_dir, FILE *out, struct al_error *err)
{
        _cleanup_(review_done) struct review rv;
        _cleanup_(plan_done) struct plan p = {0};
        int r = review_load(state_dir, false, &rv, err);
        if (r < 0)
                return r;
        r = plan_build(&rv, &p, err);
        if (r < 0)
                return r;

        struct differ d = {.rv = &rv, .out = out, .err = err};
        for (size_t i = 0; i < p.n; i++) {
                const struct item *it = &p.v[i];
                r = 0;
                switch (it->op) {
                case OP_REMOVE:
                        if (S_ISDIR(it->host.mode)) {
                                /* Its files show as deleted; an empty one
                                 * would not show at all. */
                                char q[QUOTED_MAX];
                                note_hidden(out, it->path);
                                fprintf(out, "deleted directory %s/\n", qpath(q, "", it->path));
                        } else
                                r = diff_removed(&d, it->path, &it->host);
                        break;
                case OP_DIR:
                        diff_dir(out, it);
                        break;
                case OP_FILE:
                        r = diff_file(&d, it);
                        break;
                case OP_SYMLINK:
                        r = diff_symlink(&d, it);
                        break;
                }
                if (r < 0)
                        return al_error_wrap(err, "diff of \"%s\"", it->path);
        }
        size_t i;
        json_t *v;
        json_array_foreach(rv.m.skipped, i, v)
        {
                const char *path = json_string_value(json_object_get(v, "path"));
                const char *reason = json_string_value(json_object_get(v, "reason"));
                if (!path || !reason)
                        continue;
                fputs("Not captured: ", out);
                put_escaped(out, path, false);
                fputs(" (", out);
                put_escaped(out, reason, false);
                fputs(")\n", out);
        }
        if (fflush(out) != 0 || ferror(out))
                return al_error_set(err, errno ? errno : EIO, "writing the diff");
        return 0;
}

/* ---- accept ---- */

/* A path as the user typed it, made relative to the workspace: "./a//b/"
 * → "a/b", "<workspace>/a" → "a", "." → "" (everything). */
static int normalize_request(const char *workspace, const char *in, char out[static PATH_MAX])
{
        size_t wl = strlen(workspace);
        while (wl > 1 && workspace[wl - 1] == '/')
                wl--;
        if (in[0] == '/') {
                if (strncmp(in, workspace, wl) != 0 || (in[wl] != '/' && in[wl] != '\0'))
                        return -EXDEV;
                in += wl;
        }
        size_t o = 0;
        for (const char *s = in; *s;) {
                while (*s == '/')
                        s++;
                if (!*s)
                        break;
                const char *e = strchrnul(s, '/');
                size_t n = (size_t)(e - s);
                if (n == 1 && s[0] == '.') {
                        s = e;
                        continue;
                }
                if (n == 2 && s[0] == '.' && s[1] == '.')
                        return -EINVAL;
                if (o + n + 2 > PATH_MAX)
                        return -ENAMETOOLONG;
                if (o)
                        out[o++] = '/';
                memcpy(out + o, s, n);
                o += n;
                s = e;
        }
        out[o] = '\0';
        return o == 0 || path_valid(out) ? 0 : -EINVAL;
}

static struct item *plan_find(struct plan *p, const char *path)
{
        size_t lo = 0, hi = p->n;
        while (lo < hi) {
                size_t mid = lo + (hi - lo) / 2;
                if (strcmp(p->v[mid].path, path) < 0)
                        lo = mid + 1;
                else
                        hi = mid;
        }
        return lo < p->n && STREQ(p->v[lo].path, path) ? &p->v[lo] : NULL;
}

/* The directories an item needs: the items at each ancestor that make it a
 * directory (or clear a file out of the way). */
static void select_ancestors(struct plan *p, const char *path)
{
        char dir[PATH_MAX];
        snprintf(dir, sizeof(dir), "%s", path);
        for (;;) {
                char *slash = strrchr(dir, '/');
                if (!slash)
                        return;
                *slash = '\0';
                for (struct item *it = plan_find(p, dir);
                     it && it < p->v + p->n && STREQ(it->path, dir); it++)
                        if (it->op == OP_DIR || (it->op == OP_REMOVE && !S_ISDIR(it->host.mode)))
                                it->selected = true;
        }
}

/* Whether a diff shows the item: a directory that is created or removed
 * shows through what it holds, unless it is empty. */
static bool item_visible(struct plan *p, size_t i)
{
        const struct item *it = &p->v[i];
        bool dir_op = (it->op == OP_REMOVE && S_ISDIR(it->host.mode)) ||
                      (it->op == OP_DIR && !S_ISDIR(it->host.mode));
        if (!dir_op)
                return true;
        char child[PATH_MAX];
        if (snprintf(child, sizeof(child), "%s/", it->path) >= (int)sizeof(child))
                return true;
        size_t lo = i + 1, hi = p->n;
        while (lo < hi) {
                size_t mid = lo + (hi - lo) / 2;
                if (strcmp(p->v[mid].path, child) < 0)
                        lo = mid + 1;
                else
                        hi = mid;
        }
        return !(lo < p->n && is_beneath(p->v[lo].path, it->path));
}

static int same_as_proposed(struct review *rv, const struct item *it, bool *ret)
{
        *ret = false;
        if (it->op == OP_SYMLINK) {
                char a[PATH_MAX], b[PATH_MAX];
                if (!S_ISLNK(it->host.mode))
                        return 0;
                int r = read_link(rv->ws_fd, it->path, a);
                if (r >= 0)
                        r = read_link(rv->changes_fd, it->path, b);
                if (r < 0)
                        return r;
                *ret = STREQ(a, b);
                return 0;
        }
        if (!S_ISREG(it->host.mode) || (it->host.mode & 0777) != (it->mode & 0777))
                return 0;
        _cleanup_close_ int a = open_beneath(rv->ws_fd, it->path, O_RDONLY | O_NONBLOCK | O_NOCTTY);
        _cleanup_close_ int b = open_beneath(rv->changes_fd, it->path, O_RDONLY | O_NONBLOCK);
        if (a < 0)
                return a;
        if (b < 0)
                return b;
        return files_equal(a, b, ret);
}

struct applier {
        struct review *rv;
        struct review_report rep;
        struct al_error *err;
        bool root;
        struct linktab links; /* files of changes/ with several names */
};

static void applier_done(struct applier *a)
{
        linktab_done(&a->links);
}

/* Running as root on someone's workspace, give what is created the owner of
 * what it replaces, or of its directory. */
static void inherit_owner(struct applier *a, int parent, const char *name, const struct host *old)
{
        if (!a->root)
                return;
        uid_t uid;
        gid_t gid;
        struct stat st;
        if (old && old->mode) {
                uid = old->uid;
                gid = old->gid;
        } else if (fstat(parent, &st) == 0) {
                uid = st.st_uid;
                gid = st.st_gid;
        } else
                return;
        if (fchownat(parent, name, uid, gid, AT_SYMLINK_NOFOLLOW) < 0) {
                /* Best effort: the content is what matters. */
        }
}

static int open_parent(struct applier *a, const char *path, char dir[static PATH_MAX],
                       const char **ret_name)
{
        *ret_name = split_path(path, dir);
        int fd = open_beneath(a->rv->ws_fd, dir, O_PATH | O_DIRECTORY);
        if (fd < 0)
                return al_error_set(a->err, fd, "opening \"%s\" in the workspace",
                                    dir[0] ? dir : ".");
        return fd;
}

static int apply_remove(struct applier *a, const struct item *it)
{
        char dir[PATH_MAX];
        const char *name = split_path(it->path, dir);
        _cleanup_close_ int parent = open_beneath(a->rv->ws_fd, dir, O_PATH | O_DIRECTORY);
        if (parent == -ENOENT)
                return 0;
        if (parent < 0)
                return al_error_set(a->err, parent, "opening \"%s\" in the workspace",
                                    dir[0] ? dir : ".");
        struct stat st;
        if (fstatat(parent, name, &st, AT_SYMLINK_NOFOLLOW) < 0)
                return errno == ENOENT ? 0
                                       : al_error_set(a->err, errno, "inspecting \"%s\"", it->path);
        if (unlinkat(parent, name, S_ISDIR(st.st_mode) ? AT_REMOVEDIR : 0) < 0) {
                if (errno == ENOTEMPTY || errno == EEXIST)
                        return al_error_set_message(
                            a->err, EBUSY, "\"%s\" changed on the host while accepting", it->path);
                return al_error_set(a->err, errno, "removing \"%s\"", it->path);
        }
        if (!S_ISDIR(st.st_mode))
                a->rep.removed++;
        return 0;
}

static int apply_dir(struct applier *a, const struct item *it)
{
        char dir[PATH_MAX];
        const char *name;
        _cleanup_close_ int parent = open_parent(a, it->path, dir, &name);
        if (parent < 0)
                return parent;
        struct stat st;
        if (fstatat(parent, name, &st, AT_SYMLINK_NOFOLLOW) == 0) {
                if (S_ISDIR(st.st_mode))
                        return 0; /* the mode is set in the last pass */
                return al_error_set_message(a->err, EBUSY,
                                            "\"%s\" changed on the host while accepting", it->path);
        }
        if (errno != ENOENT)
                return al_error_set(a->err, errno, "inspecting \"%s\"", it->path);
        /* Owner-writable until its contents are in place. */
        if (mkdirat(parent, name, 0700) < 0)
                return al_error_set(a->err, errno, "creating the directory \"%s\"", it->path);
        inherit_owner(a, parent, name, NULL);
        a->rep.dirs++;
        return 0;
}

static int make_temp(int parent, char name[static 32], int *ret_fd)
{
        char hex[17];
        for (int tries = 0; tries < 16; tries++) {
                int r = random_hex(hex, 16);
                if (r < 0)
                        return r;
                snprintf(name, 32, ".airlock-%s", hex);
                if (!ret_fd)
                        return 0;
                int fd = openat(parent, name, O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC,
                                0600);
                if (fd >= 0) {
                        *ret_fd = fd;
                        return 0;
                }
                if (errno != EEXIST)
                        return -errno;
        }
        return -EEXIST;
}

/* Make name in parent a hard link of the file this accept wrote first for
 * slot's inode. 0 when done, 1 when that file is not there as it was
 * written (the caller copies instead), or an error. */
static int apply_link(struct applier *a, const struct item *it, int parent, const char *name,
                      const struct link_slot *slot)
{
        _cleanup_close_ int first = open_beneath(a->rv->ws_fd, slot->path, O_PATH);
        struct stat st;
        if (first < 0 || fstat(first, &st) < 0 || !S_ISREG(st.st_mode) ||
            st.st_dev != slot->to_dev || st.st_ino != slot->to_ino)
                return 1;
        char proc[64], tmp[32];
        snprintf(proc, sizeof(proc), "/proc/self/fd/%d", first);
        for (int tries = 0;; tries++) {
                int r = make_temp(parent, tmp, NULL);
                if (r < 0)
                        return al_error_set(a->err, r, "creating a link");
                if (linkat(AT_FDCWD, proc, parent, tmp, AT_SYMLINK_FOLLOW) == 0)
                        break;
                if (errno != EEXIST || tries >= 16)
                        return 1;
        }
        if (renameat(parent, tmp, parent, name) < 0) {
                int e = errno;
                unlinkat(parent, tmp, 0);
                if (e == EISDIR || e == ENOTEMPTY || e == EEXIST)
                        return al_error_set_message(
                            a->err, EBUSY, "\"%s\" changed on the host while accepting", it->path);
                return al_error_set(a->err, e, "writing \"%s\"", it->path);
        }
        a->rep.written++;
        return 0;
}

static int apply_file(struct applier *a, const struct item *it)
{
        char dir[PATH_MAX], tmp[32];
        const char *name;
        _cleanup_close_ int parent = open_parent(a, it->path, dir, &name);
        if (parent < 0)
                return parent;
        _cleanup_close_ int src = open_beneath(a->rv->changes_fd, it->path, O_RDONLY | O_NONBLOCK);
        if (src < 0)
                return al_error_set(a->err, src, "opening \"%s\" in changes/", it->path);
        struct stat st;
        if (fstat(src, &st) < 0 || !S_ISREG(st.st_mode))
                return al_error_set_message(a->err, EBADMSG, "\"%s\" in changes/ is not a file",
                                            it->path);

        /* Names the capture kept as hard links of one file become links of
         * one file in the workspace too, not a copy each. */
        struct link_slot *slot =
            st.st_nlink > 1 ? link_find(&a->links, st.st_dev, st.st_ino) : NULL;
        if (slot && slot->path) {
                int r = apply_link(a, it, parent, name, slot);
                if (r <= 0)
                        return r;
        }

        _cleanup_close_ int fd = -1;
        int r = make_temp(parent, tmp, &fd);
        if (r < 0)
                return al_error_set(a->err, r, "creating a file in \"%s\"", dir[0] ? dir : ".");
        uint64_t bytes = 0;
        r = copy_data(src, fd, UINT64_MAX, &bytes);
        struct stat wst;
        if (r >= 0 && slot && fstat(fd, &wst) == 0)
                link_set(&a->links, slot,
                         &(struct link_slot){.dev = st.st_dev,
                                             .ino = st.st_ino,
                                             .to_dev = wst.st_dev,
                                             .to_ino = wst.st_ino,
                                             .path = it->path});
        /* Permission bits only: never a set-id or sticky bit. */
        if (r >= 0 && fchmod(fd, it->mode & 0777) < 0)
                r = -errno;
        if (r >= 0) {
                inherit_owner(a, parent, tmp, &it->host);
                r = close(TAKE_FD(fd)) < 0 ? -errno : 0;
        }
        if (r >= 0 && renameat(parent, tmp, parent, name) < 0)
                r = errno == EISDIR || errno == ENOTEMPTY || errno == EEXIST ? -EBUSY : -errno;
        if (r < 0) {
                unlinkat(parent, tmp, 0);
                if (r == -EBUSY)
                        return al_error_set(a->err, r, "\"%s\" changed on the host while accepting",
                                            it->path);
                return al_error_set(a->err, r, "writing \"%s\"", it->path);
        }
        a->rep.written++;
        a->rep.bytes += bytes;
        return 0;
}

static int apply_symlink(struct applier *a, const struct item *it)
{
        char dir[PATH_MAX], tmp[32], target[PATH_MAX];
        const char *name;
        _cleanup_close_ int parent = open_parent(a, it->path, dir, &name);
        if (parent < 0)
                return parent;
        int r = read_link(a->rv->changes_fd, it->path, target);
        if (r < 0)
                return al_error_set(a->err, r, "reading \"%s\" in changes/", it->path);
        for (int tries = 0;; tries++) {
                r = make_temp(parent, tmp, NULL);
                if (r < 0)
                        return al_error_set(a->err, r, "creating a symlink");
                if (symlinkat(target, parent, tmp) == 0)
                        break;
                if (errno != EEXIST || tries >= 16)
                        return al_error_set(a->err, errno, "creating the symlink \"%s\"", it->path);
        }
        inherit_owner(a, parent, tmp, &it->host);
        if (renameat(parent, tmp, parent, name) < 0) {
                r = errno;
                unlinkat(parent, tmp, 0);
                if (r == EISDIR || r == ENOTEMPTY || r == EEXIST)
                        return al_error_set_message(
                            a->err, EBUSY, "\"%s\" changed on the host while accepting", it->path);
                return al_error_set(a->err, r, "writing the symlink \"%s\"", it->path);
        }
        a->rep.written++;
        return 0;
}

static int apply_dir_mode(struct applier *a, const struct item *it)
{
        _cleanup_close_ int fd = open_beneath(a->rv->ws_fd, it->path, O_RDONLY | O_DIRECTORY);
        if (fd < 0)
                return al_error_set(a->err, fd, "opening \"%s\" in the workspace", it->path);
        struct stat st;
        if (fstat(fd, &st) < 0)
                return al_error_set(a->err, errno, "inspecting \"%s\"", it->path);
        if ((st.st_mode & 0777) == (it->mode & 0777))
                return 0;
        /* The directory's own set-id bits stay; the agent's never apply. */
        if (fchmod(fd, (st.st_mode & 07000) | (it->mode & 0777)) < 0)
                return al_error_set(a->err, errno, "setting the mode of \"%s\"", it->path);
        if (S_ISDIR(it->host.mode))
                a->rep.dirs++;
        return 0;
}

static void record_accepted(json_t *meta, const struct strarr *paths)
{
        json_t *acc = json_object_get(meta, "accepted");
        if (!acc) {
                acc = json_array();
                json_object_set_new(meta, "accepted", acc);
        }
        for (size_t i = 0; i < paths->n; i++) {
                size_t k;
                json_t *v;
                bool dup = false;
                json_array_foreach(acc, k, v) dup = dup || STREQ(json_string_value(v), paths->v[i]);
                if (!dup)
                        json_array_append_new(acc, json_string(paths->v[i]));
        }
}

int review_accept(const char *state_dir, char *const *paths, size_t n, struct review_report *ret,
                  struct al_error *err)
{
        _cleanup_(review_done) struct review rv;
        _cleanup_(plan_done) struct plan p = {0};
        _cleanup_(strarr_done) struct strarr req = {0};
        int r = review_load(state_dir, true, &rv, err);
        if (r < 0)
                return r;
        r = plan_build(&rv, &p, err);
        if (r < 0)
                return r;

        for (size_t i = 0; i < n; i++) {
                char norm[PATH_MAX];
                r = normalize_request(rv.workspace, paths[i], norm);
                if (r == -EXDEV)
                        return al_error_set_message(err, EINVAL,
                                                    "accept: \"%s\" is outside the workspace %s",
                                                    paths[i], rv.workspace);
                if (r < 0)
                        return al_error_set_message(err, EINVAL, "accept: bad path \"%s\"",
                                                    paths[i]);
                strarr_add(&req, norm);
        }

        /* Select, and name every request that matches nothing. */
        char unknown[AL_ERROR_MAX] = "";
        size_t n_unknown = 0, selected = 0;
        if (n == 0)
                strarr_add(&req, "");
        for (size_t k = 0; k < req.n; k++) {
                bool any = false;
                for (size_t i = 0; i < p.n; i++)
                        if (request_takes(req.v[k], p.v[i].path))
                                any = p.v[i].selected = true;
                        else if (n > 0 && is_beneath(p.v[i].path, req.v[k]))
                                any = true; /* held back: reported, not "no change" */
                if (!any && n > 0) {
                        size_t ul = strlen(unknown);
                        snprintf(unknown + ul, sizeof(unknown) - ul, "%s\"%s\"",
                                 n_unknown ? ", " : "", paths[k]);
                        n_unknown++;
                }
        }
        if (n_unknown)
                return al_error_set_message(err, ENOENT, "accept: no pending change at %s",
                                            unknown);
        for (size_t i = 0; i < p.n; i++)
                if (p.v[i].selected)
                        select_ancestors(&p, p.v[i].path);

        /* Nothing is applied unless every workspace entry it replaces or
         * removes is as it was when the sandbox started. */
        for (size_t i = 0; i < p.n; i++) {
                struct item *it = &p.v[i];
                if (!it->selected)
                        continue;
                selected++;
                if (it->op == OP_DIR || !it->host.mode || S_ISDIR(it->host.mode) ||
                    it->host.ctime_ns <= rv.started_ns)
                        continue;
                if (it->op != OP_REMOVE) {
                        bool same;
                        r = same_as_proposed(&rv, it, &same);
                        if (r < 0)
                                return al_error_set(err, r, "accept: reading \"%s\"", it->path);
                        if (same) {
                                it->noop = true;
                                continue;
                        }
                }
                return al_error_set_message(
                    err, EBUSY, "accept: %s changed on the host since the sandbox started",
                    it->path);
        }

        _cleanup_(applier_done) struct applier a = {.rv = &rv, .err = err, .root = geteuid() == 0};
        /* Removals first, deepest first; then directories before what goes
         * in them; directory modes last so that a read-only one can be
         * filled. */
        for (size_t i = p.n; i-- > 0;)
                if (p.v[i].selected && p.v[i].op == OP_REMOVE &&
                    (r = apply_remove(&a, &p.v[i])) < 0)
                        return al_error_wrap(err, "accept");
        for (size_t i = 0; i < p.n; i++) {
                const struct item *it = &p.v[i];
                if (!it->selected || it->noop || it->op == OP_REMOVE)
                        continue;
                if (it->op == OP_DIR)
                        r = apply_dir(&a, it);
                else if (it->op == OP_FILE)
                        r = apply_file(&a, it);
                else
                        r = apply_symlink(&a, it);
                if (r < 0)
                        return al_error_wrap(err, "accept");
        }
        for (size_t i = p.n; i-- > 0;)
                if (p.v[i].selected && p.v[i].op == OP_DIR && (r = apply_dir_mode(&a, &p.v[i])) < 0)
                        return al_error_wrap(err, "accept");
        _cleanup_close_ int sync_fd = open_beneath(rv.ws_fd, "", O_RDONLY | O_DIRECTORY);
        if (sync_fd < 0 || syncfs(sync_fd) < 0)
                return al_error_set(err, sync_fd < 0 ? -sync_fd : errno,
                                    "accept: syncing the workspace");

        for (size_t i = 0; i < p.n; i++)
                if (!p.v[i].selected && item_visible(&p, i)) {
                        a.rep.remaining++;
                        if (hidden_end(p.v[i].path))
                                a.rep.held++;
                }
        a.rep.complete = selected == p.n;
        if (a.rep.complete)
                json_object_set_new(rv.meta, "state", json_string("accepted"));
        else
                record_accepted(rv.meta, &req);
        r = write_json_at(rv.dir_fd, META_FILE, rv.meta);
        if (r < 0)
                return al_error_set(err, r, "accept: writing %s/%s", state_dir, META_FILE);
        if (ret)
                *ret = a.rep;
        return 0;
}

int review_discard(const char *state_dir, struct al_error *err)
{
        _cleanup_(review_done) struct review rv;
        int r = review_open(state_dir, true, &rv, err);
        if (r < 0)
                return r;
        if (STREQ(rv.state, "accepted"))
                return al_error_set_message(err, EALREADY,
                                            "discard: sandbox %s was accepted already", rv.id);
        json_object_set_new(rv.meta, "state", json_string("discarded"));
        r = write_json_at(rv.dir_fd, META_FILE, rv.meta);
        if (r < 0)
                return al_error_set(err, r, "discard: writing %s/%s", state_dir, META_FILE);
        r = remove_tree_at(rv.dir_fd, CHANGES_DIR, 0);
        if (r < 0)
                return al_error_set(err, r, "discard: removing %s/%s", state_dir, CHANGES_DIR);
        return 0;
}
