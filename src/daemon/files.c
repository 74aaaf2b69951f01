/* SPDX-License-Identifier: Apache-2.0 */
#include <dirent.h>
#include <fcntl.h>
#include <linux/openat2.h> /* RESOLVE_* */
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <time.h>

#include "files-deny.h"
#include "files.h"
#include "fs.h"
#include "util.h"

#define RESOLVE_READ  (RESOLVE_BENEATH | RESOLVE_NO_MAGICLINKS)
#define RESOLVE_WRITE (RESOLVE_BENEATH | RESOLVE_NO_MAGICLINKS | RESOLVE_NO_SYMLINKS)

/* One message per failure the client can cause. */
static int path_error(struct al_error *err, int r, const char *rel)
{
        switch (-r) {
        case EXDEV:
                return al_error_set_message(err, EXDEV, "%s: leads out of the workspace", rel);
        case ELOOP:
                return al_error_set_message(err, ELOOP, "%s: a symbolic link is in the way", rel);
        default:
                return al_error_set(err, -r, "%s", rel);
        }
}

int files_clean_path(const char *path, bool allow_root, char **ret, struct al_error *err)
{
        if (!path || !*path)
                return al_error_set_message(err, EINVAL, "path: empty");
        if (strlen(path) >= 4096)
                return al_error_set_message(err, ENAMETOOLONG, "path: too long");
        json_t *utf8 = json_string(path);
        if (!utf8)
                return al_error_set_message(err, EINVAL, "path: not UTF-8");
        json_decref(utf8);
        const char *p = path;
        if (p[0] == '/') {
                if (strncmp(p, "/workspace", 10) != 0 || (p[10] != '/' && p[10] != '\0'))
                        return al_error_set_message(err, EXDEV, "%s: not beneath /workspace", path);
                p += 10;
        }
        /* Join the components, dropping "." and empty ones. */
        char *out = xcalloc(strlen(p) + 2, 1);
        size_t o = 0;
        while (*p) {
                while (*p == '/')
                        p++;
                size_t n = strcspn(p, "/");
                if (n == 0)
                        break;
                if (n == 2 && p[0] == '.' && p[1] == '.') {
                        free(out);
                        return al_error_set_message(err, EXDEV, "%s: \"..\" is not allowed", path);
                }
                if (!(n == 1 && p[0] == '.')) {
                        if (o > 0)
                                out[o++] = '/';
                        memcpy(out + o, p, n);
                        o += n;
                }
                p += n;
        }
        if (o == 0) {
                if (!allow_root) {
                        free(out);
                        return al_error_set_message(err, EINVAL, "%s: names the workspace itself",
                                                    path);
                }
                out[o++] = '.';
        }
        out[o] = '\0';
        *ret = out;
        return 0;
}

int files_open_root(const char *workspace, int *ret_fd, struct al_error *err)
{
        int fd = open(workspace, O_PATH | O_DIRECTORY | O_CLOEXEC);
        if (fd < 0)
                return al_error_set(err, errno, "workspace %s", workspace);
        *ret_fd = fd;
        return 0;
}

int files_read(int root, const char *rel, size_t max, char **ret, size_t *ret_len,
               struct al_error *err)
{
        _cleanup_close_ int fd = -1;
        uint64_t size;
        int r = files_open_read(root, rel, &fd, &size, err);
        if (r < 0)
                return r;
        if (size > max)
                return al_error_set_message(err, EFBIG, "%s: larger than %zu bytes", rel, max);
        size_t cap = (size_t)size + 1, len = 0;
        char *buf = malloc(cap + 1);
        if (!buf)
                return al_error_set(err, ENOMEM, "%s", rel);
        for (;;) {
                ssize_t n = read(fd, buf + len, cap - len);
                if (n < 0 && errno == EINTR)
                        continue;
                if (n < 0) {
                        int e = errno;
                        free(buf);
                        return al_error_set(err, e, "reading %s", rel);
                }
                if (n == 0)
                        break;
                len += (size_t)n;
                if (len == cap) {
                        /* Grown since fstat: still bounded by max. */
                        if (cap > max) {
                                free(buf);
                                return al_error_set_message(err, EFBIG, "%s: larger than %zu bytes",
                                                            rel, max);
                        }
                        cap = cap * 2 > max + 1 ? max + 1 : cap * 2;
                        char *nb = realloc(buf, cap + 1);
                        if (!nb) {
                                free(buf);
                                return al_error_set(err, ENOMEM, "%s", rel);
                        }
                        buf = nb;
                }
        }
        buf[len] = '\0';
        *ret = buf;
        *ret_len = len;
        return 0;
}

static void split(const char *rel, char **ret_dir, const char **ret_name)
{
        const char *slash = strrchr(rel, '/');
        if (!slash) {
                *ret_dir = xstrdup(".");
                *ret_name = rel;
                return;
        }
        *ret_dir = xasprintf("%.*s", (int)(slash - rel), rel);
        *ret_name = slash + 1;
}

/* The directory `dir` beneath root, as a real fd, following no symlink;
 * created (with its missing parents) when `create`. */
static int open_dir(int root, const char *dir, bool create, struct al_error *err)
{
        int fd = fs_openat2(root, dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC, 0, RESOLVE_WRITE);
        if (fd >= 0 || fd != -ENOENT || !create)
                return fd < 0 ? path_error(err, fd, dir) : fd;

        _cleanup_close_ int cur =
            fs_openat2(root, ".", O_RDONLY | O_DIRECTORY | O_CLOEXEC, 0, RESOLVE_WRITE);
        if (cur < 0)
                return path_error(err, cur, ".");
        const char *p = dir;
        unsigned depth = 0;
        while (*p) {
                size_t n = strcspn(p, "/");
                _cleanup_free_ char *comp = xasprintf("%.*s", (int)n, p);
                if (++depth > FILES_DEPTH_MAX)
                        return al_error_set_message(err, ELOOP, "%s: too deep", dir);
                int next =
                    fs_openat2(cur, comp, O_RDONLY | O_DIRECTORY | O_CLOEXEC, 0, RESOLVE_WRITE);
                if (next == -ENOENT) {
                        struct stat pst;
                        if (mkdirat(cur, comp, 0755) < 0 && errno != EEXIST)
                                return al_error_set(err, errno, "creating %s", dir);
                        if (fstat(cur, &pst) == 0)
                                if (fchownat(cur, comp, pst.st_uid, pst.st_gid,
                                             AT_SYMLINK_NOFOLLOW) < 0 &&
                                    errno != EPERM)
                                        return al_error_set(err, errno, "creating %s", dir);
                        next = fs_openat2(cur, comp, O_RDONLY | O_DIRECTORY | O_CLOEXEC, 0,
                                          RESOLVE_WRITE);
                }
                if (next < 0)
                        return path_error(err, next, dir);
                close(cur);
                cur = next;
                p += n;
                while (*p == '/')
                        p++;
        }
        return TAKE_FD(cur);
}

/* The directory holding rel (made when create); rel's directory part in
 * *ret_dir (to free) and its last name in *ret_name (within rel). */
static int open_parent(int root, const char *rel, bool create, char **ret_dir,
                       const char **ret_name, struct al_error *err)
{
        split(rel, ret_dir, ret_name);
        return open_dir(root, *ret_dir, create, err);
}

int files_write(int root, const char *rel, const void *data, size_t len, bool parents,
                struct al_error *err)
{
        return files_write_mode(root, rel, data, len, parents, -1, err);
}

int files_write_mode(int root, const char *rel, const void *data, size_t len, bool parents,
                     int new_mode, struct al_error *err)
{
        if (STREQ(rel, "."))
                return al_error_set_message(err, EISDIR, "the workspace itself is a directory");
        _cleanup_free_ char *dir = NULL;
        const char *name;
        _cleanup_close_ int dfd = open_parent(root, rel, parents, &dir, &name, err);
        if (dfd < 0)
                return dfd;

        struct stat st, dst;
        bool exists = false;
        if (fstatat(dfd, name, &st, AT_SYMLINK_NOFOLLOW) == 0) {
                if (S_ISLNK(st.st_mode))
                        return al_error_set_message(
                            err, ELOOP, "%s: is a symbolic link; writes do not follow links", rel);
                if (S_ISDIR(st.st_mode))
                        return al_error_set(err, EISDIR, "%s", rel);
                if (!S_ISREG(st.st_mode))
                        return al_error_set_message(err, EINVAL, "%s: not a regular file", rel);
                exists = true;
        } else if (errno != ENOENT)
                return al_error_set(err, errno, "%s", rel);
        if (fstat(dfd, &dst) < 0)
                return al_error_set(err, errno, "%s", dir);

        char tmp[32];
        _cleanup_close_ int fd = -1;
        for (int tries = 0; tries < 16 && fd < 0; tries++) {
                char hex[13];
                int r = random_hex(hex, 12);
                if (r < 0)
                        return al_error_set(err, -r, "random name");
                snprintf(tmp, sizeof(tmp), ".airlock-%s", hex);
                fd = openat(dfd, tmp, O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0600);
                if (fd < 0 && errno != EEXIST)
                        return al_error_set(err, errno, "creating a file in %s", dir);
        }
        if (fd < 0)
                return al_error_set(err, EEXIST, "creating a file in %s", dir);
        int r = write_full(fd, data, len);
        uid_t uid = exists ? st.st_uid : dst.st_uid;
        gid_t gid = exists ? st.st_gid : dst.st_gid;
        mode_t mode = new_mode >= 0 ? ((mode_t)new_mode & 0777)
                      : exists      ? (st.st_mode & 0777)
                                    : 0644;
        if (r >= 0 && fchown(fd, uid, gid) < 0 && errno != EPERM)
                r = -errno;
        if (r >= 0 && fchmod(fd, mode) < 0)
                r = -errno;
        if (r >= 0 && renameat(dfd, tmp, dfd, name) < 0)
                r = -errno;
        if (r < 0) {
                unlinkat(dfd, tmp, 0);
                return al_error_set(err, r, "writing %s", rel);
        }
        return 0;
}

int files_remove_tree(int dirfd, const char *name)
{
        return fs_remove_tree(dirfd, name, FILES_DEPTH_MAX);
}

int files_delete(int root, const char *rel, bool recursive, struct al_error *err)
{
        if (STREQ(rel, "."))
                return al_error_set_message(err, EINVAL, "the workspace itself cannot be removed");
        _cleanup_free_ char *dir = NULL;
        const char *name;
        _cleanup_close_ int dfd = open_parent(root, rel, false, &dir, &name, err);
        if (dfd < 0)
                return dfd;
        struct stat st;
        if (fstatat(dfd, name, &st, AT_SYMLINK_NOFOLLOW) < 0)
                return al_error_set(err, errno, "%s", rel);
        int r;
        if (!S_ISDIR(st.st_mode))
                r = unlinkat(dfd, name, 0) < 0 ? -errno : 0;
        else if (recursive)
                r = fs_remove_tree(dfd, name, FILES_DEPTH_MAX);
        else
                r = unlinkat(dfd, name, AT_REMOVEDIR) < 0 ? -errno : 0;
        return r < 0 ? al_error_set(err, r, "removing %s", rel) : 0;
}

int files_mkdir(int root, const char *rel, bool parents, struct al_error *err)
{
        if (STREQ(rel, "."))
                return al_error_set_message(err, EEXIST, "the workspace itself exists");
        if (parents) {
                int fd = open_dir(root, rel, true, err);
                if (fd < 0)
                        return fd;
                close(fd);
                return 0;
        }
        _cleanup_free_ char *dir = NULL;
        const char *name;
        _cleanup_close_ int dfd = open_parent(root, rel, false, &dir, &name, err);
        if (dfd < 0)
                return dfd;
        struct stat pst;
        if (mkdirat(dfd, name, 0755) < 0)
                return al_error_set(err, errno, "creating %s", rel);
        if (fstat(dfd, &pst) == 0 &&
            fchownat(dfd, name, pst.st_uid, pst.st_gid, AT_SYMLINK_NOFOLLOW) < 0 && errno != EPERM)
                return al_error_set(err, errno, "creating %s", rel);
        return 0;
}

int files_rename(int root, const char *from, const char *to, bool overwrite, struct al_error *err)
{
        if (STREQ(from, ".") || STREQ(to, "."))
                return al_error_set_message(err, EINVAL, "the workspace itself cannot be moved");
        _cleanup_free_ char *fdir = NULL, *tdir = NULL;
        const char *fname, *tname;
        split(from, &fdir, &fname);
        split(to, &tdir, &tname);
        /* Both directories are reached following no symbolic link; the
         * names themselves are links, never followed by rename. */
        _cleanup_close_ int ffd = open_dir(root, fdir, false, err);
        if (ffd < 0)
                return ffd;
        _cleanup_close_ int tfd = open_dir(root, tdir, false, err);
        if (tfd < 0)
                return tfd;
        if (renameat2(ffd, fname, tfd, tname, overwrite ? 0 : RENAME_NOREPLACE) < 0)
                return al_error_set(err, errno, "renaming %s to %s", from, to);
        return 0;
}

static const char *type_name(mode_t m);

static json_t *stat_json(const char *name, const struct stat *st)
{
        char mtime[32];
        struct tm tm;
        gmtime_r(&st->st_mtime, &tm);
        strftime(mtime, sizeof(mtime), "%Y-%m-%dT%H:%M:%SZ", &tm);
        json_t *jname = json_string(name);
        if (!jname)
                return NULL;
        return json_pack("{s:o, s:s, s:I, s:i, s:s}", "name", jname, "type", type_name(st->st_mode),
                         "size", (json_int_t)st->st_size, "mode", (int)(st->st_mode & 07777),
                         "mtime", mtime);
}

int files_stat(int root, const char *rel, json_t **ret, struct al_error *err)
{
        /* The path as reads resolve it (links that stay beneath), the last
         * component not followed: a link is reported as one. */
        _cleanup_close_ int fd =
            fs_openat2(root, rel, O_PATH | O_NOFOLLOW | O_CLOEXEC, 0, RESOLVE_READ);
        if (fd < 0)
                return path_error(err, fd, rel);
        struct stat st;
        if (fstat(fd, &st) < 0)
                return al_error_set(err, errno, "%s", rel);
        json_t *o = stat_json(rel, &st);
        if (!o)
                return al_error_set_message(err, EINVAL, "%s: not UTF-8", rel);
        json_object_set_new(o, "path", json_string(rel));
        if (S_ISLNK(st.st_mode)) {
                char target[4096];
                ssize_t n = readlinkat(fd, "", target, sizeof(target) - 1);
                if (n >= 0) {
                        json_t *t = json_stringn(target, (size_t)n);
                        if (t)
                                json_object_set_new(o, "target", t);
                }
        }
        *ret = o;
        return 0;
}

static const char *type_name(mode_t m)
{
        return S_ISREG(m) ? "file" : S_ISDIR(m) ? "dir" : S_ISLNK(m) ? "symlink" : "other";
}

static int cmp_entries(const void *a, const void *b)
{
        json_t *const *x = a, *const *y = b;
        return strcmp(json_string_value(json_object_get(*x, "name")),
                      json_string_value(json_object_get(*y, "name")));
}

static int list_flat(int root, const char *rel, size_t max, const struct files_deny *deny,
                     json_t **ret, struct al_error *err)
{
        int fd =
            fs_openat2(root, rel, O_RDONLY | O_DIRECTORY | O_NONBLOCK | O_CLOEXEC, 0, RESOLVE_READ);
        if (fd < 0)
                return path_error(err, fd, rel);
        int r = files_deny_check_fd(deny, root, fd, rel, err);
        if (r < 0) {
                close(fd);
                return r;
        }
        DIR *d = fdopendir(fd);
        if (!d) {
                int e = errno;
                close(fd);
                return al_error_set(err, e, "%s", rel);
        }
        json_t **v = NULL;
        size_t n = 0, skipped = 0;
        bool truncated = false;
        struct dirent *de;
        while ((de = readdir(d))) {
                if (STREQ(de->d_name, ".") || STREQ(de->d_name, ".."))
                        continue;
                if (n >= max) {
                        truncated = true;
                        break;
                }
                struct stat st;
                if (fstatat(dirfd(d), de->d_name, &st, AT_SYMLINK_NOFOLLOW) < 0 ||
                    files_deny_has(deny, &st))
                        continue;
                json_t *name = json_string(de->d_name);
                if (!name) {
                        skipped++;
                        continue;
                }
                char mtime[32];
                struct tm tm;
                gmtime_r(&st.st_mtime, &tm);
                strftime(mtime, sizeof(mtime), "%Y-%m-%dT%H:%M:%SZ", &tm);
                v = xrealloc(v, n + 1, sizeof(*v));
                v[n++] = json_pack("{s:o, s:s, s:I, s:i, s:s}", "name", name, "type",
                                   type_name(st.st_mode), "size", (json_int_t)st.st_size, "mode",
                                   (int)(st.st_mode & 07777), "mtime", mtime);
        }
        closedir(d);
        if (n > 1)
                qsort(v, n, sizeof(*v), cmp_entries);
        json_t *entries = json_array();
        for (size_t i = 0; i < n; i++)
                json_array_append_new(entries, v[i]);
        free(v);
        *ret = json_pack("{s:s, s:o, s:b, s:I}", "path", rel, "entries", entries, "truncated",
                         truncated, "skipped", (json_int_t)skipped);
        return 0;
}

int files_list(int root, const char *rel, size_t max, json_t **ret, struct al_error *err)
{
        return list_flat(root, rel, max, NULL, ret, err);
}

struct tree_walk {
        const struct files_deny *deny;
        json_t **v;
        size_t n, max, skipped;
        bool truncated;
};

static int cmp_paths(const void *a, const void *b)
{
        json_t *const *x = a, *const *y = b;
        return strcmp(json_string_value(json_object_get(*x, "path")),
                      json_string_value(json_object_get(*y, "path")));
}

/* Entries of the directory `fd` (owned here) under `prefix`, and of its
 * subdirectories down to `depth` levels; a symbolic link is listed, never
 * entered. */
static void walk(struct tree_walk *w, int fd, const char *prefix, unsigned depth)
{
        DIR *d = fdopendir(fd);
        if (!d) {
                close(fd);
                return;
        }
        struct dirent *de;
        while ((de = readdir(d))) {
                if (STREQ(de->d_name, ".") || STREQ(de->d_name, ".."))
                        continue;
                if (w->n >= w->max) {
                        w->truncated = true;
                        break;
                }
                struct stat st;
                if (fstatat(dirfd(d), de->d_name, &st, AT_SYMLINK_NOFOLLOW) < 0 ||
                    files_deny_has(w->deny, &st))
                        continue;
                _cleanup_free_ char *path =
                    *prefix ? xasprintf("%s/%s", prefix, de->d_name) : xstrdup(de->d_name);
                json_t *e = stat_json(de->d_name, &st);
                json_t *jpath = e ? json_string(path) : NULL;
                if (!jpath) {
                        json_decref(e);
                        w->skipped++;
                        continue;
                }
                json_object_set_new(e, "path", jpath);
                w->v = xrealloc(w->v, w->n + 1, sizeof(*w->v));
                w->v[w->n++] = e;
                if (S_ISDIR(st.st_mode) && depth > 1) {
                        int sub = fs_openat2(dirfd(d), de->d_name,
                                             O_RDONLY | O_DIRECTORY | O_NONBLOCK | O_CLOEXEC, 0,
                                             RESOLVE_WRITE);
                        /* What was opened, not what was stat'ed: a
                         * rename between the two cannot lead into one. */
                        struct stat sst;
                        if (sub >= 0 && (fstat(sub, &sst) < 0 || files_deny_has(w->deny, &sst)))
                                close(sub);
                        else if (sub >= 0)
                                walk(w, sub, path, depth - 1);
                }
        }
        closedir(d);
}

static int list_tree(int root, const char *rel, unsigned depth, size_t max,
                     const struct files_deny *deny, json_t **ret, struct al_error *err)
{
        if (depth < 1 || depth > FILES_LIST_DEPTH_MAX)
                return al_error_set_message(err, EINVAL, "depth: give 1 to %d",
                                            FILES_LIST_DEPTH_MAX);
        int fd =
            fs_openat2(root, rel, O_RDONLY | O_DIRECTORY | O_NONBLOCK | O_CLOEXEC, 0, RESOLVE_READ);
        if (fd < 0)
                return path_error(err, fd, rel);
        /* What was opened, wherever the path led by then. */
        int r = files_deny_check_fd(deny, root, fd, rel, err);
        if (r < 0) {
                close(fd);
                return r;
        }
        struct tree_walk w = {.max = max, .deny = deny};
        walk(&w, fd, "", depth);
        if (w.n > 1)
                qsort(w.v, w.n, sizeof(*w.v), cmp_paths);
        json_t *entries = json_array();
        for (size_t i = 0; i < w.n; i++)
                json_array_append_new(entries, w.v[i]);
        free(w.v);
        *ret = json_pack("{s:s, s:i, s:o, s:b, s:I}", "path", rel, "depth", (int)depth, "entries",
                         entries, "truncated", w.truncated, "skipped", (json_int_t)w.skipped);
        return 0;
}

int files_list_tree(int root, const char *rel, unsigned depth, size_t max, json_t **ret,
                    struct al_error *err)
{
        return list_tree(root, rel, depth, max, NULL, ret, err);
}

int files_list_deny(int root, const char *rel, unsigned depth, size_t max,
                    const struct files_deny *deny, json_t **ret, struct al_error *err)
{
        return depth == 0 ? list_flat(root, rel, max, deny, ret, err)
                          : list_tree(root, rel, depth, max, deny, ret, err);
}

int files_open_read(int root, const char *rel, int *ret_fd, uint64_t *ret_size,
                    struct al_error *err)
{
        /* O_NONBLOCK: a FIFO the sandbox left must not hang the daemon. */
        _cleanup_close_ int fd =
            fs_openat2(root, rel, O_RDONLY | O_NOCTTY | O_NONBLOCK | O_CLOEXEC, 0, RESOLVE_READ);
        if (fd < 0)
                return path_error(err, fd, rel);
        struct stat st;
        if (fstat(fd, &st) < 0)
                return al_error_set(err, errno, "%s", rel);
        if (S_ISDIR(st.st_mode))
                return al_error_set(err, EISDIR, "%s", rel);
        if (!S_ISREG(st.st_mode))
                return al_error_set_message(err, EINVAL, "%s: not a regular file", rel);
        *ret_size = (uint64_t)st.st_size;
        *ret_fd = TAKE_FD(fd);
        return 0;
}

int files_append(int root, const char *rel, const void *data, size_t len, struct al_error *err)
{
        if (STREQ(rel, "."))
                return al_error_set_message(err, EISDIR, "the workspace itself is a directory");
        _cleanup_free_ char *dir = NULL;
        const char *name;
        _cleanup_close_ int dfd = open_parent(root, rel, false, &dir, &name, err);
        if (dfd < 0)
                return dfd;
        /* O_NOFOLLOW: the name itself may not be a link either; O_NONBLOCK:
         * a FIFO put there does not hang the daemon (refused below). */
        _cleanup_close_ int fd =
            openat(dfd, name, O_WRONLY | O_APPEND | O_NOFOLLOW | O_NONBLOCK | O_NOCTTY | O_CLOEXEC);
        if (fd < 0 && errno == ELOOP)
                return al_error_set_message(
                    err, ELOOP, "%s: is a symbolic link; writes do not follow links", rel);
        if (fd < 0 && errno == ENXIO) /* a FIFO with no reader, a socket */
                return al_error_set_message(err, EINVAL, "%s: not a regular file", rel);
        if (fd < 0)
                return al_error_set(err, errno, "%s", rel);
        struct stat st;
        if (fstat(fd, &st) < 0)
                return al_error_set(err, errno, "%s", rel);
        if (!S_ISREG(st.st_mode))
                return al_error_set_message(err, EINVAL, "%s: not a regular file", rel);
        int r = write_full(fd, data, len);
        return r < 0 ? al_error_set(err, r, "writing %s", rel) : 0;
}
