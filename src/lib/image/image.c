/* SPDX-License-Identifier: Apache-2.0 */
/* The image cache of the container tier (image.h). */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <linux/openat2.h>
#include <openssl/evp.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "fs.h"
#include "image-internal.h"
#include "image.h"
#include "paths.h"
#include "util.h"

char *image_dir(uid_t uid, const char *home)
{
        _cleanup_free_ char *root = paths_state_root(uid, home);
        return root ? xasprintf("%s/images", root) : NULL;
}

static bool is_id(const char *s)
{
        size_t n = 0;
        for (; s[n]; n++)
                if (!((s[n] >= '0' && s[n] <= '9') || (s[n] >= 'a' && s[n] <= 'f')))
                        return false;
        return n == IMAGE_ID_LEN;
}

const char *image_name_check(const char *name)
{
        size_t n = name ? strlen(name) : 0;
        if (n == 0 || n > IMAGE_NAME_MAX)
                return "must be 1 to 64 characters";
        for (size_t i = 0; i < n; i++) {
                char ch = name[i];
                bool ok = (ch >= 'a' && ch <= 'z') || (ch >= 'A' && ch <= 'Z') ||
                          (ch >= '0' && ch <= '9') || (i > 0 && strchr("._-", ch));
                if (!ok)
                        return "must be letters, digits, '.', '_' and '-', starting with a "
                               "letter or digit";
        }
        if (is_id(name))
                return "must not look like an image id (64 hex digits)";
        return NULL;
}

static void dirp_free(DIR **d)
{
        if (*d)
                closedir(*d);
}

static int cmp_names(const void *a, const void *b)
{
        return strcmp(*(char *const *)a, *(char *const *)b);
}

/* The entries of directory fd, sorted (so that the digest is stable). */
int image_sorted_entries(int fd, char ***ret, size_t *ret_n)
{
        int dfd = openat(fd, ".", O_RDONLY | O_DIRECTORY | O_CLOEXEC);
        if (dfd < 0)
                return -errno;
        _cleanup_(dirp_free) DIR *d = fdopendir(dfd);
        if (!d) {
                int e = errno;
                close(dfd);
                return -e;
        }
        char **v = NULL;
        size_t n = 0;
        struct dirent *de;
        while ((de = readdir(d))) {
                if (STREQ(de->d_name, ".") || STREQ(de->d_name, ".."))
                        continue;
                if (n >= IMAGE_ENTRIES_MAX) {
                        strv_free(v);
                        return -E2BIG;
                }
                v = strv_append(v, &n, de->d_name);
        }
        if (n)
                qsort(v, n, sizeof(*v), cmp_names);
        *ret = v;
        *ret_n = n;
        return 0;
}

struct copy {
        EVP_MD_CTX *md;
        struct image_info *info;
        struct al_error *err;
        uint64_t entries;
        uint64_t bytes_max; /* image_bytes_bound: info->bytes may not pass it */
};

static void digest(struct copy *c, const char *kind, const char *path, mode_t mode,
                   const char *extra)
{
        char head[64];
        int n = snprintf(head, sizeof(head), "%s %04o ", kind, (unsigned)(mode & 07777));
        EVP_DigestUpdate(c->md, head, (size_t)n);
        EVP_DigestUpdate(c->md, path, strlen(path) + 1);
        if (extra)
                EVP_DigestUpdate(c->md, extra, strlen(extra) + 1);
}

static int copy_file(struct copy *c, int src, int dst, const char *name, const char *path,
                     const struct stat *st)
{
        _cleanup_close_ int in =
            openat(src, name, O_RDONLY | O_NOFOLLOW | O_NOCTTY | O_NONBLOCK | O_CLOEXEC);
        if (in < 0)
                return al_error_set(c->err, errno, "reading %s", path);
        struct stat now;
        if (fstat(in, &now) < 0 || !S_ISREG(now.st_mode) || now.st_ino != st->st_ino)
                return al_error_set(c->err, 0, "%s changed while it was imported", path);
        /* Counted before it is written: a sparse file, or one file under
         * many hard links, copies to far more than it holds on disk. */
        int r = image_take_bytes(c->info, c->bytes_max, (uint64_t)now.st_size, path, c->err);
        if (r < 0)
                return r;
        _cleanup_close_ int out =
            openat(dst, name, O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0600);
        if (out < 0)
                return al_error_set(c->err, errno, "writing %s into the image cache", path);
        /* Permission bits only: no set-id or sticky bit survives. */
        mode_t mode = now.st_mode & 0777;
        if (now.st_mode & 07000)
                c->info->setid_stripped++;
        char size[32];
        snprintf(size, sizeof(size), "%jd", (intmax_t)now.st_size);
        digest(c, "F", path, mode, size);
        char buf[65536];
        off_t total = 0;
        for (;;) {
                ssize_t n = read(in, buf, sizeof(buf));
                if (n < 0 && errno == EINTR)
                        continue;
                if (n < 0)
                        return al_error_set(c->err, errno, "reading %s", path);
                if (n == 0)
                        break;
                total += n;
                if (total > now.st_size)
                        return al_error_set(c->err, 0, "%s grew while it was imported", path);
                EVP_DigestUpdate(c->md, buf, (size_t)n);
                if (write_full(out, buf, (size_t)n) < 0)
                        return al_error_set(c->err, errno, "writing %s into the image cache", path);
        }
        if (total != now.st_size)
                return al_error_set(c->err, 0, "%s shrank while it was imported", path);
        if (fchmod(out, mode) < 0)
                return al_error_set(c->err, errno, "writing %s into the image cache", path);
        c->info->files++;
        return 0;
}

static int copy_tree(struct copy *c, int src, int dst, const char *rel, unsigned depth)
{
        if (depth > IMAGE_DEPTH_MAX)
                return al_error_set(c->err, 0, "%s: deeper than %d directories, refused", rel,
                                    IMAGE_DEPTH_MAX);
        char **names = NULL;
        size_t n = 0;
        int r = image_sorted_entries(src, &names, &n);
        if (r < 0)
                return al_error_set(c->err, r, "reading %s", rel[0] ? rel : "/");
        for (size_t i = 0; i < n && r >= 0; i++) {
                const char *name = names[i];
                _cleanup_free_ char *path = xasprintf("%s/%s", rel, name);
                struct stat st;
                if (++c->entries > IMAGE_ENTRIES_MAX) {
                        r = al_error_set(c->err, 0, "more than %d entries, refused",
                                         IMAGE_ENTRIES_MAX);
                        break;
                }
                if (fstatat(src, name, &st, AT_SYMLINK_NOFOLLOW) < 0) {
                        r = al_error_set(c->err, errno, "reading %s", path);
                        break;
                }
                if (S_ISDIR(st.st_mode)) {
                        _cleanup_close_ int s =
                            openat(src, name, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
                        if (s < 0) {
                                r = al_error_set(c->err, errno, "reading %s", path);
                                break;
                        }
                        r = image_take_bytes(c->info, c->bytes_max, IMAGE_DIR_BYTES, path,
                                             c->err);
                        if (r < 0)
                                break;
                        if (mkdirat(dst, name, 0700) < 0) {
                                r = al_error_set(c->err, errno, "creating %s in the image cache",
                                                 path);
                                break;
                        }
                        _cleanup_close_ int d =
                            openat(dst, name, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
                        if (d < 0) {
                                r = al_error_set(c->err, errno, "opening %s in the image cache",
                                                 path);
                                break;
                        }
                        digest(c, "D", path, st.st_mode & 0777, NULL);
                        if (st.st_mode & 07000)
                                c->info->setid_stripped++;
                        r = copy_tree(c, s, d, path, depth + 1);
                        /* The directory's own bits last: one without the
                         * owner's write bit could not have been filled. */
                        if (r >= 0 && fchmod(d, st.st_mode & 0777) < 0)
                                r = al_error_set(c->err, errno, "%s in the image cache", path);
                        c->info->dirs++;
                } else if (S_ISREG(st.st_mode)) {
                        /* A hard link is copied as a file of its own: the
                         * cache holds no link to anything outside it. */
                        r = copy_file(c, src, dst, name, path, &st);
                } else if (S_ISLNK(st.st_mode)) {
                        char target[PATH_MAX];
                        ssize_t len = readlinkat(src, name, target, sizeof(target) - 1);
                        if (len < 0) {
                                r = al_error_set(c->err, errno, "reading link %s", path);
                                break;
                        }
                        target[len] = '\0';
                        r = image_take_bytes(c->info, c->bytes_max, (uint64_t)len, path, c->err);
                        if (r < 0)
                                break;
                        if (symlinkat(target, dst, name) < 0) {
                                r = al_error_set(c->err, errno, "creating link %s", path);
                                break;
                        }
                        digest(c, "L", path, 0777, target);
                        c->info->links++;
                } else
                        c->info->skipped++; /* devices, FIFOs, sockets */
        }
        strv_free(names);
        return r < 0 ? r : 0;
}

/* Files Airlock mounts over the image's own when a sandbox starts: its
 * /etc/passwd and /etc/group (mounts_build_passwd), the gate's resolver in
 * a gated sandbox, and the sandbox's CA bundle when a route terminates TLS.
 * An image root is read-only, so each needs a file to mount on: an empty
 * one is made where the image has none. A directory or link the image has
 * in the way is left as it is (a sandbox that needs that mount then fails
 * to start, naming it). */
static const struct {
        const char *path;
        bool always; /* every sandbox mounts it: an image without room fails here */
} mount_points[] = {
    {"etc/passwd", true},
    {"etc/group", true},
    {"etc/resolv.conf", false},
    {"etc/ssl/certs/ca-certificates.crt", false},
};

static int add_mount_point(struct copy *c, int root, const char *rel, bool always)
{
        _cleanup_close_ int dir = fcntl(root, F_DUPFD_CLOEXEC, 3);
        if (dir < 0)
                return al_error_set(c->err, errno, "opening the image");
        _cleanup_free_ char *path = xasprintf("/%s", rel);
        const char *name = rel;
        for (const char *slash; (slash = strchr(name, '/'));) {
                _cleanup_free_ char *part = xasprintf("%.*s", (int)(slash - name), name);
                _cleanup_free_ char *sofar = xasprintf("%.*s", (int)(slash - rel) + 1, path);
                if (mkdirat(dir, part, 0755) == 0)
                        digest(c, "D", sofar, 0755, NULL);
                else if (errno != EEXIST)
                        return al_error_set(c->err, errno, "creating %s in the image", sofar);
                int next = openat(dir, part, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
                if (next < 0 && !always && (errno == ENOTDIR || errno == ELOOP))
                        return 0;
                if (next < 0)
                        return al_error_set(c->err, errno, "%s of the image is not a directory",
                                            sofar);
                close(dir);
                dir = next;
                name = slash + 1;
        }
        int fd = openat(dir, name, O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0644);
        if (fd >= 0) {
                digest(c, "F", path, 0644, "0");
                close(fd);
        } else if (errno != EEXIST)
                return al_error_set(c->err, errno, "creating %s in the image", path);
        return 0;
}

static int add_mount_points(struct copy *c, int root)
{
        for (size_t i = 0; i < ARRAY_SIZE(mount_points); i++) {
                int r = add_mount_point(c, root, mount_points[i].path, mount_points[i].always);
                if (r < 0)
                        return r;
        }
        return 0;
}

static int open_cache(const char *images_dir, bool create, struct al_error *err)
{
        if (!images_dir || images_dir[0] != '/')
                return al_error_set(err, EINVAL, "the image cache has no absolute directory");
        if (create) {
                int r = mkdir_p(images_dir, 0700, 0700);
                if (r < 0)
                        return al_error_set(err, r, "creating the image cache %s", images_dir);
        }
        int fd = open(images_dir, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
        if (fd < 0)
                return al_error_set(err, errno, "opening the image cache %s", images_dir);
        if (create && mkdirat(fd, "names", 0700) < 0 && errno != EEXIST) {
                int e = errno;
                close(fd);
                return al_error_set(err, e, "creating %s/names", images_dir);
        }
        return fd;
}

static int set_name(int cache, const char *name, const char *id, struct al_error *err)
{
        char tmp[IMAGE_NAME_MAX + 32], hex[17];
        int r = random_hex(hex, 16);
        if (r < 0)
                return al_error_set(err, r, "naming image %s", name);
        snprintf(tmp, sizeof(tmp), "names/.tmp-%s", hex);
        _cleanup_close_ int fd =
            openat(cache, tmp, O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0600);
        if (fd < 0)
                return al_error_set(err, errno, "naming image %s", name);
        _cleanup_free_ char *line = xasprintf("%s\n", id);
        if (write_full(fd, line, strlen(line)) < 0 || fsync(fd) < 0) {
                int e = errno;
                unlinkat(cache, tmp, 0);
                return al_error_set(err, e, "naming image %s", name);
        }
        _cleanup_free_ char *dst = xasprintf("names/%s", name);
        if (renameat(cache, tmp, cache, dst) < 0) {
                int e = errno;
                unlinkat(cache, tmp, 0);
                return al_error_set(err, e, "naming image %s", name);
        }
        return 0;
}

int image_import(const char *images_dir, const char *src, const char *name, struct image_info *ret,
                 struct al_error *err)
{
        const char *why;
        if (name && (why = image_name_check(name)))
                return al_error_set_message(err, EINVAL, "image name \"%s\": %s", name, why);
        _cleanup_close_ int cache = open_cache(images_dir, true, err);
        if (cache < 0)
                return cache;

        /* An archive or an OCI layout is unpacked into a staging tree
         * first; the cache then gets a copy made as a directory's is. */
        char hex[17], tmp[32], stage[32];
        if (random_hex(hex, 16) < 0)
                return al_error_set(err, EIO, "choosing a staging name");
        snprintf(tmp, sizeof(tmp), ".tmp-%s", hex);
        snprintf(stage, sizeof(stage), ".stage-%s", hex);
        if (mkdirat(cache, stage, 0700) < 0)
                return al_error_set(err, errno, "creating %s/%s", images_dir, stage);
        /* A caller's bound (tests), else the free space's. */
        uint64_t bytes_max = ret ? ret->bytes_max : 0;
        struct image_info staged_info = {.bytes_max = bytes_max};
        bool staged = false;
        _cleanup_close_ int in = -1;
        {
                _cleanup_close_ int sfd =
                    openat(cache, stage, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
                int r = sfd < 0 ? al_error_set(err, errno, "creating %s/%s", images_dir, stage)
                                : image_stage(src, sfd, &staged, &staged_info, err);
                if (r >= 0) {
                        in = staged ? openat(sfd, "rootfs",
                                             O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC)
                                    : open(src, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
                        if (in < 0)
                                r = al_error_set(err, errno, "image source %s", src);
                }
                if (r < 0) {
                        fs_remove_tree(cache, stage, FS_REMOVE_DEPTH_MAX);
                        return r;
                }
        }
        if (mkdirat(cache, tmp, 0700) < 0)
                return al_error_set(err, errno, "creating %s/%s", images_dir, tmp);
        int r;
        _cleanup_close_ int root = -1;
        _cleanup_close_ int t = openat(cache, tmp, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
        if (t < 0 || mkdirat(t, "rootfs", 0755) < 0) {
                r = al_error_set(err, errno, "creating %s/%s", images_dir, tmp);
                goto fail;
        }
        root = openat(t, "rootfs", O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
        if (root < 0) {
                r = al_error_set(err, errno, "creating %s/%s/rootfs", images_dir, tmp);
                goto fail;
        }

        struct image_info info = {.bytes_max = bytes_max};
        unsigned char md[32];
        unsigned mdlen = 0;
        struct copy c = {.md = EVP_MD_CTX_new(),
                         .info = &info,
                         .err = err,
                         .bytes_max = image_bytes_bound(root, &info)};
        if (!c.md || EVP_DigestInit_ex(c.md, EVP_sha256(), NULL) != 1) {
                EVP_MD_CTX_free(c.md);
                r = al_error_set(err, ENOMEM, "sha256");
                goto fail;
        }
        r = copy_tree(&c, in, root, "", 0);
        if (r >= 0)
                r = add_mount_points(&c, root);
        EVP_DigestFinal_ex(c.md, md, &mdlen);
        EVP_MD_CTX_free(c.md);
        if (r < 0) {
                al_error_wrap(err, "importing %s", src);
                goto fail;
        }
        for (unsigned i = 0; i < 32; i++)
                snprintf(info.id + 2 * i, 3, "%02x", md[i]);
        if (fchmod(root, 0755) < 0 || fsync(root) < 0) {
                r = al_error_set(err, errno, "importing %s", src);
                goto fail;
        }
        if (renameat(cache, tmp, cache, info.id) < 0) {
                if (errno != EEXIST && errno != ENOTEMPTY) {
                        r = al_error_set(err, errno, "storing image %s", info.id);
                        goto fail;
                }
                info.cached = 1; /* the same tree is there already */
                fs_remove_tree(cache, tmp, FS_REMOVE_DEPTH_MAX);
        }
        fs_remove_tree(cache, stage, FS_REMOVE_DEPTH_MAX);
        if (name) {
                r = set_name(cache, name, info.id, err);
                if (r < 0)
                        return r;
        }
        info.skipped += staged_info.skipped;
        info.setid_stripped += staged_info.setid_stripped;
        info.whiteouts = staged_info.whiteouts;
        if (ret)
                *ret = info;
        return 0;
fail:
        fs_remove_tree(cache, tmp, FS_REMOVE_DEPTH_MAX);
        fs_remove_tree(cache, stage, FS_REMOVE_DEPTH_MAX);
        return r;
}

static int read_name(int cache, const char *name, char id[IMAGE_ID_LEN + 1])
{
        _cleanup_free_ char *path = xasprintf("names/%s", name);
        _cleanup_close_ int fd = fs_openat2(cache, path, O_RDONLY | O_NOFOLLOW | O_CLOEXEC, 0,
                                            RESOLVE_BENEATH | RESOLVE_NO_SYMLINKS);
        if (fd < 0)
                return fd;
        char buf[IMAGE_ID_LEN + 2];
        ssize_t n = read(fd, buf, sizeof(buf));
        if (n < 0)
                return -errno;
        if (n < IMAGE_ID_LEN)
                return -EBADMSG;
        memcpy(id, buf, IMAGE_ID_LEN);
        id[IMAGE_ID_LEN] = '\0';
        return is_id(id) ? 0 : -EBADMSG;
}

int image_resolve(const char *images_dir, const char *ref, char **ret_rootfs,
                  char ret_id[IMAGE_ID_LEN + 1], struct al_error *err)
{
        char id[IMAGE_ID_LEN + 1];
        if (!ref || (!is_id(ref) && image_name_check(ref)))
                return al_error_set_message(err, EINVAL, "image \"%s\": not an image name or id",
                                            ref ? ref : "");
        _cleanup_close_ int cache = open_cache(images_dir, false, err);
        if (cache < 0) {
                if (cache == -ENOENT)
                        return al_error_set_message(err, ENOENT,
                                                    "image \"%s\" not found: no image was imported "
                                                    "yet (airlock image import DIR --name %s)",
                                                    ref, ref);
                return cache;
        }
        if (is_id(ref))
                snprintf(id, sizeof(id), "%s", ref);
        else {
                int r = read_name(cache, ref, id);
                if (r == -ENOENT)
                        return al_error_set_message(err, ENOENT,
                                                    "image \"%s\" not found (airlock image ls "
                                                    "lists the images; airlock image import DIR "
                                                    "--name %s adds one)",
                                                    ref, ref);
                if (r < 0)
                        return al_error_set(err, r, "reading image name %s", ref);
        }
        _cleanup_free_ char *rel = xasprintf("%s/rootfs", id);
        _cleanup_close_ int fd = fs_openat2(cache, rel, O_PATH | O_DIRECTORY | O_CLOEXEC, 0,
                                            RESOLVE_BENEATH | RESOLVE_NO_SYMLINKS);
        if (fd < 0)
                return al_error_set_message(err, -fd, "image \"%s\" (%s) is not in the cache", ref,
                                            id);
        *ret_rootfs = xasprintf("%s/%s", images_dir, rel);
        if (ret_id)
                memcpy(ret_id, id, sizeof(id));
        return 0;
}

int image_list(const char *images_dir, json_t **ret, struct al_error *err)
{
        json_t *out = json_array();
        _cleanup_close_ int cache = open_cache(images_dir, false, err);
        if (cache == -ENOENT) {
                *ret = out;
                return 0;
        }
        if (cache < 0) {
                json_decref(out);
                return cache;
        }
        char **ids = NULL, **names = NULL;
        size_t n_ids = 0, n_names = 0;
        int r = image_sorted_entries(cache, &ids, &n_ids);
        _cleanup_close_ int nd =
            openat(cache, "names", O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
        if (r >= 0 && nd >= 0)
                r = image_sorted_entries(nd, &names, &n_names);
        if (r < 0) {
                strv_free(ids);
                json_decref(out);
                return al_error_set(err, r, "reading the image cache %s", images_dir);
        }
        for (size_t i = 0; i < n_ids; i++) {
                if (!is_id(ids[i]))
                        continue;
                json_t *nv = json_array();
                for (size_t j = 0; j < n_names; j++) {
                        char id[IMAGE_ID_LEN + 1];
                        if (names[j][0] != '.' && read_name(cache, names[j], id) == 0 &&
                            STREQ(id, ids[i]))
                                json_array_append_new(nv, json_string(names[j]));
                }
                json_array_append_new(out, json_pack("{s:s, s:o}", "id", ids[i], "names", nv));
        }
        strv_free(ids);
        strv_free(names);
        *ret = out;
        return 0;
}

int image_remove(const char *images_dir, const char *ref, struct al_error *err)
{
        char id[IMAGE_ID_LEN + 1];
        if (!ref || (!is_id(ref) && image_name_check(ref)))
                return al_error_set_message(err, EINVAL, "image \"%s\": not an image name or id",
                                            ref ? ref : "");
        _cleanup_close_ int cache = open_cache(images_dir, false, err);
        if (cache < 0)
                return cache == -ENOENT
                           ? al_error_set_message(err, ENOENT, "image \"%s\" not found", ref)
                           : cache;
        bool by_id = is_id(ref);
        if (by_id)
                snprintf(id, sizeof(id), "%s", ref);
        else {
                int r = read_name(cache, ref, id);
                if (r == -ENOENT)
                        return al_error_set_message(err, ENOENT, "image \"%s\" not found", ref);
                if (r < 0)
                        return al_error_set(err, r, "reading image name %s", ref);
                _cleanup_free_ char *p = xasprintf("names/%s", ref);
                if (unlinkat(cache, p, 0) < 0)
                        return al_error_set(err, errno, "removing image name %s", ref);
        }
        /* The names left for this id: by id all go, by name the tree stays
         * while another name needs it. */
        char **names = NULL;
        size_t n = 0;
        _cleanup_close_ int nd =
            openat(cache, "names", O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
        if (nd >= 0 && image_sorted_entries(nd, &names, &n) < 0)
                n = 0;
        bool used = false;
        for (size_t i = 0; i < n; i++) {
                char other[IMAGE_ID_LEN + 1];
                if (names[i][0] == '.' || read_name(cache, names[i], other) < 0 ||
                    !STREQ(other, id))
                        continue;
                if (by_id) {
                        _cleanup_free_ char *p = xasprintf("names/%s", names[i]);
                        unlinkat(cache, p, 0);
                } else
                        used = true;
        }
        strv_free(names);
        if (used)
                return 0;
        struct stat st;
        if (fstatat(cache, id, &st, AT_SYMLINK_NOFOLLOW) < 0)
                return by_id ? al_error_set_message(err, ENOENT, "image \"%s\" not found", ref) : 0;
        int r = fs_remove_tree(cache, id, FS_REMOVE_DEPTH_MAX);
        if (r < 0)
                return al_error_set(err, r, "removing image %s", id);
        return 0;
}
