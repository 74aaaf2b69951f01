/* SPDX-License-Identifier: Apache-2.0 */
/* The workspace's disk meter (diskuse.h): the tree walk counts allocated
 * bytes without following links, stops at its entry cap, and walks the same
 * directory fd again from the start; the meter keeps the peak of its
 * samples and the last one. */
#include <criterion/criterion.h>
#include <fcntl.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "diskuse.h"
#include "util.h"

static char tmp[64];

static void setup(void)
{
        snprintf(tmp, sizeof(tmp), "/tmp/test-diskuse-XXXXXX");
        cr_assert_not_null(mkdtemp(tmp));
}

static void teardown(void)
{
        _cleanup_free_ char *cmd = xasprintf("rm -rf '%s'", tmp);
        cr_assert_eq(system(cmd), 0);
}

static void fill(const char *name, size_t bytes)
{
        _cleanup_free_ char *p = xasprintf("%s/%s", tmp, name);
        _cleanup_close_ int fd = open(p, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
        cr_assert_geq(fd, 0);
        _cleanup_free_ char *buf = xcalloc(1, bytes + 1);
        memset(buf, 'x', bytes);
        cr_assert_geq(write_full(fd, buf, bytes), 0);
        cr_assert_eq(fsync(fd), 0);
}

TestSuite(diskuse, .init = setup, .fini = teardown);

Test(diskuse, tree_counts_files_in_subdirs_and_walks_again)
{
        _cleanup_free_ char *sub = xasprintf("%s/a/b", tmp);
        cr_assert_eq(mkdir_p(sub, 0755, 0755), 0);
        fill("a/b/f", 1 << 20);
        fill("g", 256 << 10);
        _cleanup_close_ int fd = open(tmp, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
        uint64_t one = 0, two = 0;
        cr_assert_eq(diskuse_tree_bytes(fd, 100, &one), 0);
        cr_expect_geq(one, (1 << 20) + (256 << 10));
        cr_expect_lt(one, (1 << 20) + (256 << 10) + (256 << 10));
        /* The same fd again: the walk starts over, not at the last offset. */
        cr_assert_eq(diskuse_tree_bytes(fd, 100, &two), 0);
        cr_expect_eq(one, two);
}

Test(diskuse, links_are_not_followed)
{
        fill("f", 64 << 10);
        _cleanup_free_ char *l = xasprintf("%s/up", tmp);
        cr_assert_eq(symlink("/usr", l), 0); /* a large tree, if it were followed */
        _cleanup_close_ int fd = open(tmp, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
        uint64_t b = 0;
        cr_assert_eq(diskuse_tree_bytes(fd, 1000, &b), 0);
        cr_expect_lt(b, 1 << 20);
}

Test(diskuse, the_walk_stops_at_its_cap)
{
        for (int i = 0; i < 11; i++) {
                char n[16];
                snprintf(n, sizeof(n), "f%d", i);
                fill(n, 1);
        }
        _cleanup_close_ int fd = open(tmp, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
        uint64_t b = 0;
        cr_expect_eq(diskuse_tree_bytes(fd, 10, &b), -E2BIG);
        cr_expect_eq(diskuse_tree_bytes(fd, 11, &b), 0);
}

Test(diskuse, meter_keeps_the_peak_and_the_last)
{
        fill("before", 128 << 10);
        struct disk_meter *m = disk_meter_tree(tmp);
        uint64_t peak = 1, last = 1;
        cr_expect_not(disk_meter_result(m, &peak, &last), "no sample yet");
        fill("big", 2 << 20);
        disk_meter_sample(m, 1, true);
        /* Not due: the next walk is a second away at least. */
        _cleanup_free_ char *big = xasprintf("%s/big", tmp);
        cr_assert_eq(unlink(big), 0);
        disk_meter_sample(m, 2, false);
        cr_assert(disk_meter_result(m, &peak, &last));
        cr_expect_geq(peak, 2 << 20);
        cr_expect_geq(last, 2 << 20, "the undue sample was not taken");
        disk_meter_sample(m, 3, true);
        cr_assert(disk_meter_result(m, &peak, &last));
        cr_expect_geq(peak, 2 << 20);
        cr_expect_lt(last, 64 << 10, "the file before the start is not growth");
        disk_meter_free(m);
}

Test(diskuse, a_tree_it_cannot_walk_is_not_measured)
{
        struct disk_meter *m = disk_meter_tree("/nonexistent-airlock-test");
        uint64_t peak, last;
        disk_meter_sample(m, 1, true);
        cr_expect_not(disk_meter_result(m, &peak, &last));
        disk_meter_free(m);
}
