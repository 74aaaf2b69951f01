/* SPDX-License-Identifier: Apache-2.0 */
/* Hostile images against `airlock image import`:
 * - a tree deeper than the cache takes, by plain names or through a
 *   symbolic link inside it: refused, and what it unpacked does not stay
 *   behind on the host's disk (the staging tree must stay shallow enough to
 *   be removed);
 * - an OCI layout whose blob (manifest or layer) is a FIFO: refused at
 *   once, never waited on (a layout another user prepared could hang the
 *   import forever);
 * - a directory whose sparse or hard-linked files copy to far more than
 *   they hold: bounded as an archive's unpacking is. */
#include <criterion/criterion.h>
#include <dirent.h>
#include <fcntl.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <unistd.h>

#include "fs.h"
#include "image-internal.h"
#include "image.h"
#include "image-test-tar.h"
#include "util.h"

static char base[64];
static gzFile tar; /* the archive being written, plain */

static void setup(void)
{
        snprintf(base, sizeof(base), "/tmp/airlock-depth-XXXXXX");
        cr_assert_not_null(mkdtemp(base));
        char path[128];
        snprintf(path, sizeof(path), "%s/layer.tar", base);
        int fd = open(path, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0600);
        cr_assert_geq(fd, 0);
        tar = gzdopen(fd, "wT");
        cr_assert_not_null(tar);
}

static void teardown(void)
{
        if (tar)
                gzclose(tar);
        tar = NULL;
        /* Deeper than fs_remove_tree goes when the import left it. */
        char cmd[128];
        snprintf(cmd, sizeof(cmd), "rm -rf %s", base);
        cr_assert_eq(system(cmd), 0);
}

static size_t pax_record(char *out, size_t cap, const char *key, const char *value)
{
        size_t body = 1 + strlen(key) + 1 + strlen(value) + 1, total = body + 1;
        while (total != body + (size_t)snprintf(NULL, 0, "%zu", total))
                total = body + (size_t)snprintf(NULL, 0, "%zu", total);
        int n = snprintf(out, cap, "%zu %s=%s\n", total, key, value);
        cr_assert_lt((size_t)n, cap);
        return (size_t)n;
}

/* An entry of any name and link length: a pax header carries them. */
static void entry(const char *name, char type, const char *link, size_t size)
{
        char rec[8192];
        size_t n = pax_record(rec, sizeof(rec) - 512, "path", name);
        if (link)
                n += pax_record(rec + n, sizeof(rec) - 512 - n, "linkpath", link);
        image_test_header(tar, "pax", 'x', NULL, n);
        memset(rec + n, 0, 512);
        size_t padded = (n + 511) / 512 * 512;
        cr_assert_eq(gzwrite(tar, rec, (unsigned)padded), (int)padded);
        image_test_header(tar, "x", type, NULL, size);
        image_test_zeros(tar, (size + 511) / 512 * 512);
}

/* "d/d/.../d" of `depth` names under `prefix`, each directory an entry. */
static void chain(const char *prefix, int depth)
{
        char name[4096];
        size_t o = (size_t)snprintf(name, sizeof(name), "%s", prefix);
        for (int i = 0; i < depth; i++) {
                o += (size_t)snprintf(name + o, sizeof(name) - o, "%sd", o ? "/" : "");
                entry(name, '5', NULL, 0);
        }
        o += (size_t)snprintf(name + o, sizeof(name) - o, "/file");
        entry(name, '0', NULL, 4096);
}

static void end(void)
{
        image_test_zeros(tar, 1024);
        cr_assert_eq(gzclose(tar), Z_OK);
        tar = NULL;
}

/* The cache holds nothing but its "names" directory after a refused
 * import. */
static void assert_cache_clean(void)
{
        char images[128];
        snprintf(images, sizeof(images), "%s/images", base);
        DIR *d = opendir(images);
        cr_assert_not_null(d);
        struct dirent *de;
        while ((de = readdir(d))) {
                if (STREQ(de->d_name, ".") || STREQ(de->d_name, "..") || STREQ(de->d_name, "names"))
                        continue;
                char left[300];
                snprintf(left, sizeof(left), "%s", de->d_name);
                closedir(d);
                cr_assert_fail("a refused import left %s/%s on the host", images, left);
        }
        closedir(d);
}

static int import(struct al_error *err)
{
        char images[128], src[128];
        snprintf(images, sizeof(images), "%s/images", base);
        snprintf(src, sizeof(src), "%s/layer.tar", base);
        struct image_info info = {0};
        return image_import(images, src, "deep", &info, err);
}

Test(image_depth, deep_names_refused_and_removed, .init = setup, .fini = teardown, .timeout = 60)
{
        chain("", FS_REMOVE_DEPTH_MAX + 8);
        end();
        struct al_error err = {0};
        cr_assert_lt(import(&err), 0, "a tree %d directories deep was imported",
                     FS_REMOVE_DEPTH_MAX + 8);
        cr_assert(strstr(err.msg, "deeper than"), "%s", err.msg);
        assert_cache_clean();
}

Test(image_depth, deep_through_a_link_refused_and_removed, .init = setup, .fini = teardown,
     .timeout = 60)
{
        /* No name is deeper than 51 directories; each link leads to the
         * bottom of the chain so far, and the chain goes on beneath it. */
        chain("", 50);
        char prev[4096] = "";
        for (int hop = 0; hop < 6; hop++) {
                char ln[16], target[4096], start[16];
                snprintf(ln, sizeof(ln), "l%d", hop);
                size_t o = (size_t)snprintf(target, sizeof(target), "%s", hop ? prev : "d");
                for (int i = hop ? 0 : 1; i < 50; i++)
                        o += (size_t)snprintf(target + o, sizeof(target) - o, "/d");
                entry(ln, '2', target, 0);
                snprintf(start, sizeof(start), "l%d", hop);
                chain(start, 50);
                snprintf(prev, sizeof(prev), "%s", ln);
        }
        end();
        struct al_error err = {0};
        cr_assert_lt(import(&err), 0, "a tree 350 directories deep was imported");
        cr_assert(strstr(err.msg, "deeper than"), "%s", err.msg);
        assert_cache_clean();
}

Test(image_depth, within_the_bound_imports, .init = setup, .fini = teardown, .timeout = 60)
{
        chain("", IMAGE_DEPTH_MAX); /* as deep as the cache takes */
        end();
        struct al_error err = {0};
        cr_assert_eq(import(&err), 0, "%s", err.msg);
}

/* An OCI layout in base/layout whose file `fifo` (beneath it) is a FIFO;
 * index.json names sha256:<64 x "a"> when the FIFO is a blob. */
static void layout_with_fifo(const char *fifo)
{
        char path[256];
        snprintf(path, sizeof(path), "%s/layout/blobs/sha256", base);
        cr_assert_eq(mkdir_p(path, 0755, 0755), 0);
        const char *hex = "aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa";
        struct {
                const char *name, *text;
        } files[] = {
            {"oci-layout", "{\"imageLayoutVersion\": \"1.0.0\"}"},
            {"index.json", NULL},
        };
        char index[256];
        snprintf(index, sizeof(index),
                 "{\"schemaVersion\": 2, \"manifests\": [{\"digest\": \"sha256:%s\"}]}", hex);
        files[1].text = index;
        for (size_t i = 0; i < ARRAY_SIZE(files); i++) {
                if (STREQ(files[i].name, fifo))
                        continue;
                snprintf(path, sizeof(path), "%s/layout/%s", base, files[i].name);
                int fd = open(path, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0644);
                cr_assert_geq(fd, 0);
                cr_assert_eq(write(fd, files[i].text, strlen(files[i].text)),
                             (ssize_t)strlen(files[i].text));
                close(fd);
        }
        if (STREQ(fifo, "blob"))
                snprintf(path, sizeof(path), "%s/layout/blobs/sha256/%s", base, hex);
        else
                snprintf(path, sizeof(path), "%s/layout/%s", base, fifo);
        cr_assert_eq(mkfifo(path, 0644), 0);
}

static int import_layout(struct al_error *err)
{
        char images[128], src[128];
        snprintf(images, sizeof(images), "%s/images", base);
        snprintf(src, sizeof(src), "%s/layout", base);
        struct image_info info = {0};
        return image_import(images, src, NULL, &info, err);
}

/* The test's timeout is what fails on a wait: the FIFO has no writer. */
Test(image_special, fifo_blob_refused, .init = setup, .fini = teardown, .timeout = 20)
{
        layout_with_fifo("blob");
        struct al_error err = {0};
        cr_assert_lt(import_layout(&err), 0, "a FIFO blob was taken");
        cr_assert(strstr(err.msg, "not a regular file"), "%s", err.msg);
        assert_cache_clean();
}

/* A root file system given as a directory (one an agent made, say) whose
 * files are far larger on copy than on disk: a sparse file, or one file
 * under many hard links. The cache copy is bounded as an archive's
 * unpacking is. RLIMIT_FSIZE keeps a copy that ignores the bound from
 * filling this machine's disk: it then fails with EFBIG, not the bound. */
static int import_dir(uint64_t bytes_max, struct al_error *err)
{
        struct rlimit rl = {64u << 20, 64u << 20};
        cr_assert_eq(setrlimit(RLIMIT_FSIZE, &rl), 0);
        signal(SIGXFSZ, SIG_IGN);
        char images[128], src[128];
        snprintf(images, sizeof(images), "%s/images", base);
        snprintf(src, sizeof(src), "%s/rootfs", base);
        struct image_info info = {.bytes_max = bytes_max};
        return image_import(images, src, NULL, &info, err);
}

static void rootfs_file(const char *name, off_t size)
{
        char path[256];
        snprintf(path, sizeof(path), "%s/rootfs", base);
        mkdir(path, 0755);
        snprintf(path, sizeof(path), "%s/rootfs/%s", base, name);
        int fd = open(path, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0644);
        cr_assert_geq(fd, 0);
        cr_assert_eq(ftruncate(fd, size), 0);
        close(fd);
}

Test(image_bytes, sparse_file_in_a_directory_bounded, .init = setup, .fini = teardown,
     .timeout = 60)
{
        rootfs_file("sparse", (off_t)1 << 30); /* 1 GiB of nothing on disk */
        struct al_error err = {0};
        cr_assert_lt(import_dir(8u << 20, &err), 0, "a 1 GiB sparse file was copied");
        cr_assert(strstr(err.msg, "unpacks to more than"), "%s", err.msg);
        assert_cache_clean();
}

Test(image_bytes, hard_links_in_a_directory_bounded, .init = setup, .fini = teardown,
     .timeout = 60)
{
        rootfs_file("f", 3u << 20);
        for (int i = 0; i < 4; i++) {
                char from[256], to[256];
                snprintf(from, sizeof(from), "%s/rootfs/f", base);
                snprintf(to, sizeof(to), "%s/rootfs/l%d", base, i);
                cr_assert_eq(link(from, to), 0);
        }
        struct al_error err = {0};
        cr_assert_lt(import_dir(8u << 20, &err), 0, "15 MiB copied under an 8 MiB bound");
        cr_assert(strstr(err.msg, "unpacks to more than"), "%s", err.msg);
        assert_cache_clean();
}

Test(image_bytes, directory_within_the_bound_imports, .init = setup, .fini = teardown,
     .timeout = 60)
{
        rootfs_file("f", 1u << 20);
        struct al_error err = {0};
        cr_assert_eq(import_dir(8u << 20, &err), 0, "%s", err.msg);
}
