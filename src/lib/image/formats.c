/* SPDX-License-Identifier: Apache-2.0 */
/* What `airlock image import` takes (image-internal.h): an OCI image layout
 * (a directory, or a tar of one), a docker-archive tarball (docker save), a
 * tarball of a root file system, or a plain directory. Archives are
 * unpacked by the one layer engine (layer.c) into a staging directory; the
 * layers then go, in order, onto stage/rootfs. Every file an index or
 * manifest names is reached beneath the layout's directory without
 * following links, and an OCI blob must hash to its digest. */
#include <errno.h>
#include <fcntl.h>
#include <jansson.h>
#include <linux/openat2.h>
#include <openssl/evp.h>
#include <stdbool.h>
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "fs.h"
#include "image-internal.h"
#include "util.h"

#define MANIFEST_MAX (4 << 20)
#define LAYERS_MAX   256

static json_t *read_json_fd(int fd, const char *rel, struct al_error *err);

/* A regular file, opened without waiting: a FIFO or a device a layout's
 * author left there (a layout another user prepared) is refused, never
 * read. Beneath dir with no link followed, or (dir AT_FDCWD) the path the
 * caller gave as it is. The fd, blocking again, or -errno. */
static int open_file(int dir, const char *rel, struct al_error *err)
{
        bool beneath = dir != AT_FDCWD;
        _cleanup_close_ int fd = fs_openat2(
            dir, rel, O_RDONLY | (beneath ? O_NOFOLLOW : 0) | O_NONBLOCK | O_NOCTTY | O_CLOEXEC, 0,
            beneath ? RESOLVE_BENEATH | RESOLVE_NO_SYMLINKS | RESOLVE_NO_MAGICLINKS : 0);
        if (fd < 0)
                return al_error_set(err, -fd, "image: %s", rel);
        struct stat st;
        if (fstat(fd, &st) < 0)
                return al_error_set(err, errno, "image: %s", rel);
        if (!S_ISREG(st.st_mode))
                return al_error_set_message(err, EINVAL, "image: %s is not a regular file: refused",
                                            rel);
        int fl = fcntl(fd, F_GETFL);
        if (fl < 0 || fcntl(fd, F_SETFL, fl & ~O_NONBLOCK) < 0)
                return al_error_set(err, errno, "image: %s", rel);
        return TAKE_FD(fd);
}

/* A JSON file beneath dir, no link followed. */
static json_t *read_json(int dir, const char *rel, struct al_error *err)
{
        _cleanup_close_ int fd = open_file(dir, rel, err);
        if (fd < 0)
                return NULL;
        return read_json_fd(fd, rel, err);
}

static json_t *read_json_fd(int fd, const char *rel, struct al_error *err)
{
        _cleanup_free_ char *text = xcalloc(1, MANIFEST_MAX + 1);
        size_t len = 0;
        ssize_t n;
        while ((n = read(fd, text + len, MANIFEST_MAX + 1 - len)) > 0) {
                len += (size_t)n;
                if (len > MANIFEST_MAX) {
                        al_error_set_message(err, EFBIG, "image: %s is larger than 4 MiB", rel);
                        return NULL;
                }
        }
        json_error_t jerr;
        json_t *j = json_loadb(text, len, JSON_REJECT_DUPLICATES, &jerr);
        if (!j)
                al_error_set_message(err, EINVAL, "image: %s: %d:%d: %s", rel, jerr.line,
                                     jerr.column, jerr.text);
        return j;
}

/* "sha256:<64 hex>" -> "blobs/sha256/<hex>", or NULL. */
static char *blob_path(const char *digest)
{
        if (!digest || strncmp(digest, "sha256:", 7) != 0 || strlen(digest) != 7 + 64)
                return NULL;
        for (const char *c = digest + 7; *c; c++)
                if (!((*c >= '0' && *c <= '9') || (*c >= 'a' && *c <= 'f')))
                        return NULL;
        return xasprintf("blobs/sha256/%s", digest + 7);
}

/* The blob's content must hash to its digest: a layout cannot swap one.
 * The fd that was hashed, rewound, goes to *ret_fd: what is used is what
 * was checked, never the path opened again. */
static int check_blob(int dir, const char *rel, const char *digest, int *ret_fd,
                      struct al_error *err)
{
        _cleanup_close_ int fd = open_file(dir, rel, err);
        if (fd < 0)
                return fd;
        /* Every step checked: in airlock, libcrypto is loaded on first use
         * (src/cli/tlslazy.c) and each call fails if it cannot be. */
        EVP_MD_CTX *md = EVP_MD_CTX_new();
        bool ok = md && EVP_DigestInit_ex(md, EVP_sha256(), NULL) == 1;
        char buf[65536];
        ssize_t n = 0;
        while (ok && (n = read(fd, buf, sizeof(buf))) > 0)
                ok = EVP_DigestUpdate(md, buf, (size_t)n) == 1;
        unsigned char h[32];
        unsigned hl = 0;
        ok = ok && n == 0 && EVP_DigestFinal_ex(md, h, &hl) == 1 && hl == sizeof(h);
        int e = errno;
        EVP_MD_CTX_free(md);
        if (n < 0)
                return al_error_set(err, e, "image: blob %s", rel);
        if (!ok)
                return al_error_set(err, EIO, "image: blob %s: sha256 failed", rel);
        char hex[65];
        for (int i = 0; i < 32; i++)
                snprintf(hex + 2 * i, 3, "%02x", h[i]);
        if (!STREQ(hex, digest + 7))
                return al_error_set_message(
                    err, EINVAL, "image: blob %s does not hash to its digest %s", rel, digest);
        if (lseek(fd, 0, SEEK_SET) < 0)
                return al_error_set(err, errno, "image: blob %s", rel);
        *ret_fd = TAKE_FD(fd);
        return 0;
}

/* A layer from the fd check_blob hashed. */
static int apply(int fd, const char *rel, int rootfs, struct image_info *info, struct al_error *err)
{
        struct stat st;
        if (fstat(fd, &st) < 0 || !S_ISREG(st.st_mode))
                return al_error_set_message(err, EINVAL, "image: layer %s is not a file", rel);
        _cleanup_free_ char *what = xasprintf("layer %s", rel);
        return image_layer_apply(rootfs, fd, what, info, err);
}

static int oci_layout(int dir, int rootfs, struct image_info *info, struct al_error *err)
{
        json_t *index = read_json(dir, "index.json", err);
        if (!index)
                return -EINVAL;
        json_t *m = json_array_get(json_object_get(index, "manifests"), 0);
        const char *digest = json_string_value(json_object_get(m, "digest"));
        json_t *manifest = NULL;
        int r = 0;
        for (int depth = 0; depth < 2; depth++) {
                _cleanup_free_ char *rel = blob_path(digest);
                if (!rel) {
                        r = al_error_set_message(err, EINVAL,
                                                 "image: index.json names no manifest by a "
                                                 "sha256 digest");
                        break;
                }
                _cleanup_close_ int bfd = -1;
                if ((r = check_blob(dir, rel, digest, &bfd, err)) < 0)
                        break;
                json_decref(manifest);
                manifest = read_json_fd(bfd, rel, err);
                if (!manifest) {
                        r = -EINVAL;
                        break;
                }
                json_t *sub = json_object_get(manifest, "manifests");
                if (!sub) /* an image manifest, not an index */
                        break;
                /* An image index: the first manifest for linux/amd64, or
                 * the first. */
                size_t i;
                json_t *e;
                json_t *pick = json_array_get(sub, 0);
                json_array_foreach(sub, i, e)
                {
                        json_t *pl = json_object_get(e, "platform");
                        const char *os = json_string_value(json_object_get(pl, "os"));
                        const char *arch = json_string_value(json_object_get(pl, "architecture"));
                        if (os && arch && STREQ(os, "linux") && STREQ(arch, "amd64")) {
                                pick = e;
                                break;
                        }
                }
                digest = json_string_value(json_object_get(pick, "digest"));
        }
        json_t *layers = r < 0 ? NULL : json_object_get(manifest, "layers");
        if (r >= 0 && (!json_is_array(layers) || json_array_size(layers) > LAYERS_MAX))
                r = al_error_set_message(err, EINVAL,
                                         "image: the manifest has no list of at most %d layers",
                                         LAYERS_MAX);
        size_t i;
        json_t *l;
        if (r >= 0)
                json_array_foreach(layers, i, l)
                {
                        const char *d = json_string_value(json_object_get(l, "digest"));
                        _cleanup_free_ char *rel = blob_path(d);
                        if (!rel) {
                                r = al_error_set_message(
                                    err, EINVAL, "image: layer %zu has no sha256 digest", i);
                                break;
                        }
                        _cleanup_close_ int bfd = -1;
                        if ((r = check_blob(dir, rel, d, &bfd, err)) < 0 ||
                            (r = apply(bfd, rel, rootfs, info, err)) < 0)
                                break;
                }
        json_decref(manifest);
        json_decref(index);
        return r;
}

static int docker_archive(int dir, int rootfs, struct image_info *info, struct al_error *err)
{
        json_t *manifest = read_json(dir, "manifest.json", err);
        if (!manifest)
                return -EINVAL;
        json_t *layers = json_object_get(json_array_get(manifest, 0), "Layers");
        int r = 0;
        if (!json_is_array(layers) || json_array_size(layers) > LAYERS_MAX)
                r = al_error_set_message(err, EINVAL,
                                         "image: manifest.json has no list of at most %d layers",
                                         LAYERS_MAX);
        size_t i;
        json_t *l;
        if (r >= 0)
                json_array_foreach(layers, i, l)
                {
                        const char *rel = json_string_value(l);
                        if (!rel) {
                                r = al_error_set_message(err, EINVAL,
                                                         "image: manifest.json layer %zu is "
                                                         "not a path",
                                                         i);
                                break;
                        }
                        _cleanup_close_ int lfd = open_file(dir, rel, err);
                        if (lfd < 0) {
                                r = lfd;
                                break;
                        }
                        if ((r = apply(lfd, rel, rootfs, info, err)) < 0)
                                break;
                }
        json_decref(manifest);
        return r;
}

static bool exists(int dir, const char *name)
{
        struct stat st;
        return fstatat(dir, name, &st, AT_SYMLINK_NOFOLLOW) == 0 && S_ISREG(st.st_mode);
}

int image_stage(const char *src, int stage, bool *ret_staged, struct image_info *info,
                struct al_error *err)
{
        struct stat st;
        *ret_staged = false;
        if (stat(src, &st) < 0)
                return al_error_set(err, errno, "image source %s", src);
        _cleanup_close_ int layout = -1;
        if (S_ISDIR(st.st_mode)) {
                layout = open(src, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
                if (layout < 0)
                        return al_error_set(err, errno, "image source %s", src);
                if (!exists(layout, "oci-layout") || !exists(layout, "index.json"))
                        return 0; /* a root file system as it is */
        } else if (S_ISREG(st.st_mode)) {
                /* An archive: unpacked first, as hostile as any layer. */
                if (mkdirat(stage, "archive", 0700) < 0)
                        return al_error_set(err, errno, "staging %s", src);
                layout = openat(stage, "archive", O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
                if (layout < 0)
                        return al_error_set(err, errno, "staging %s", src);
                _cleanup_close_ int fd = open_file(AT_FDCWD, src, err);
                if (fd < 0)
                        return fd;
                int r = image_layer_apply(layout, fd, src, info, err);
                if (r < 0)
                        return r;
        } else
                return al_error_set_message(err, EINVAL,
                                            "image source %s: give a directory, an OCI layout or "
                                            "an image tarball",
                                            src);

        if (mkdirat(stage, "rootfs", 0755) < 0)
                return al_error_set(err, errno, "staging %s", src);
        _cleanup_close_ int rootfs =
            openat(stage, "rootfs", O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
        if (rootfs < 0)
                return al_error_set(err, errno, "staging %s", src);
        int r;
        if (exists(layout, "oci-layout") && exists(layout, "index.json"))
                r = oci_layout(layout, rootfs, info, err);
        else if (exists(layout, "manifest.json"))
                r = docker_archive(layout, rootfs, info, err);
        else {
                /* A tarball of a root file system: what was unpacked is it. */
                if (renameat(stage, "archive", stage, "rootfs.tmp") < 0 ||
                    unlinkat(stage, "rootfs", AT_REMOVEDIR) < 0 ||
                    renameat(stage, "rootfs.tmp", stage, "rootfs") < 0)
                        return al_error_set(err, errno, "staging %s", src);
                r = 0;
        }
        if (r < 0)
                return r;
        *ret_staged = true;
        return 0;
}
