/* SPDX-License-Identifier: Apache-2.0 */
/* A hostile image layer that unpacks to far more than it weighs: a gzip
 * bomb, or one file copied again and again through hard links. The import
 * stops at a bound, with a message, instead of filling the host's disk. */
#include <criterion/criterion.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>
#include <zlib.h>

#include "fs.h"
#include "image-internal.h"
#include "image-test-tar.h"
#include "util.h"

static char base[64];
static int root = -1;

static void setup(void)
{
        snprintf(base, sizeof(base), "/tmp/airlock-bomb-XXXXXX");
        cr_assert_not_null(mkdtemp(base));
        root = open(base, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
        cr_assert_geq(root, 0);
}

static void teardown(void)
{
        close(root);
        fs_remove_tree(AT_FDCWD, base, FS_REMOVE_DEPTH_MAX);
}

/* A layer in a memfd: `n_files` files of `size` zero bytes, then `n_links`
 * hard links to the first. */
static int layer(size_t size, int n_files, int n_links)
{
        int fd = memfd_create("layer", MFD_CLOEXEC);
        cr_assert_geq(fd, 0);
        gzFile gz = gzdopen(dup(fd), "wb9");
        cr_assert_not_null(gz);
        char name[32];
        for (int i = 0; i < n_files; i++) {
                snprintf(name, sizeof(name), "f%d", i);
                image_test_header(gz, name, '0', NULL, size);
                image_test_zeros(gz, (size + 511) / 512 * 512);
        }
        for (int i = 0; i < n_links; i++) {
                snprintf(name, sizeof(name), "l%d", i);
                image_test_header(gz, name, '1', "f0", 0);
        }
        image_test_zeros(gz, 1024);
        cr_assert_eq(gzclose(gz), Z_OK);
        cr_assert_eq(lseek(fd, 0, SEEK_SET), 0);
        return fd;
}

Test(image_bomb, gzip_bomb_stops_at_the_bound, .init = setup, .fini = teardown, .timeout = 30)
{
        int in = layer(8u << 20, 1, 0); /* 8 MiB of zeros, a few KiB packed */
        struct stat st;
        cr_assert_eq(fstat(in, &st), 0);
        cr_assert_lt(st.st_size, 64 * 1024);
        struct image_info info = {.bytes_max = 1u << 20};
        struct al_error err = {0};
        int r = image_layer_apply(root, in, "layer", &info, &err);
        close(in);
        cr_assert_lt(r, 0, "an 8 MiB file unpacked under a 1 MiB bound");
        cr_assert(strstr(err.msg, "unpacks to more than"), "%s", err.msg);
}

Test(image_bomb, hard_link_copies_count, .init = setup, .fini = teardown, .timeout = 30)
{
        int in = layer(512u << 10, 1, 8); /* 512 KiB, copied 8 times: 4.5 MiB */
        struct image_info info = {.bytes_max = 2u << 20};
        struct al_error err = {0};
        int r = image_layer_apply(root, in, "layer", &info, &err);
        close(in);
        cr_assert_lt(r, 0, "hard links copied %llu bytes past a 2 MiB bound",
                     (unsigned long long)info.bytes);
        cr_assert(strstr(err.msg, "unpacks to more than"), "%s", err.msg);
}

Test(image_bomb, within_the_bound_unpacks, .init = setup, .fini = teardown, .timeout = 30)
{
        int in = layer(256u << 10, 2, 2);
        struct image_info info = {.bytes_max = 2u << 20};
        struct al_error err = {0};
        cr_assert_eq(image_layer_apply(root, in, "layer", &info, &err), 0, "%s", err.msg);
        close(in);
        cr_assert_eq(info.files, 4u);
}

Test(image_bomb, entries_count_over_all_layers, .init = setup, .fini = teardown, .timeout = 30)
{
        /* Each layer is far below the per-layer bound; together they pass
         * the import's. */
        struct image_info info = {.entries_max = 1000};
        struct al_error err = {0};
        int in = layer(0, 600, 0);
        cr_assert_eq(image_layer_apply(root, in, "layer 1", &info, &err), 0, "%s", err.msg);
        close(in);
        in = layer(0, 600, 0);
        int r = image_layer_apply(root, in, "layer 2", &info, &err);
        close(in);
        cr_assert_lt(r, 0, "%llu entries unpacked past a bound of 1000",
                     (unsigned long long)info.entries);
        cr_assert(strstr(err.msg, "entries over all its layers"), "%s", err.msg);
}

/* A layer of `n` entries of `type` ('2' symbolic links with 90-byte
 * targets, or '5' directories) and nothing else. */
static int layer_of(char type, int n)
{
        int fd = memfd_create("layer", MFD_CLOEXEC);
        cr_assert_geq(fd, 0);
        gzFile gz = gzdopen(dup(fd), "wb9");
        cr_assert_not_null(gz);
        char name[32], target[91];
        memset(target, 't', 90);
        target[90] = '\0';
        for (int i = 0; i < n; i++) {
                snprintf(name, sizeof(name), "e%d", i);
                image_test_header(gz, name, type, type == '2' ? target : NULL, 0);
        }
        image_test_zeros(gz, 1024);
        cr_assert_eq(gzclose(gz), Z_OK);
        cr_assert_eq(lseek(fd, 0, SEEK_SET), 0);
        return fd;
}

/* Neither holds a byte of data, yet each takes the host's disk. */
static void assert_counted(char type)
{
        struct image_info info = {.bytes_max = 64u << 10};
        struct al_error err = {0};
        int in = layer_of(type, 1000);
        int r = image_layer_apply(root, in, "layer", &info, &err);
        close(in);
        cr_assert_lt(r, 0, "1000 entries of type %c counted %llu bytes under 64 KiB", type,
                     (unsigned long long)info.bytes);
        cr_assert(strstr(err.msg, "unpacks to more than"), "%s", err.msg);
}

Test(image_bomb, symbolic_links_count, .init = setup, .fini = teardown, .timeout = 30)
{
        assert_counted('2');
}

Test(image_bomb, directories_count, .init = setup, .fini = teardown, .timeout = 30)
{
        assert_counted('5');
}
