/* SPDX-License-Identifier: Apache-2.0 */
/* limits.io in the cgroup layer: the v2 io.max writer and controller
 * enabling on a fake hierarchy (plain files in a temporary directory), the
 * v1 blkio.throttle.* writer on a fake tree, and the usage parsers. */
#include <criterion/criterion.h>
#include <fcntl.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/sysmacros.h>
#include <unistd.h>

#include "cgroup.h"
#include "cgroup-test-util.h"
#include "util.h"

static void setup(void)
{
        fake_cgroup_setup("cgroup-io");
}

TestSuite(cgroup_io, .init = setup, .fini = teardown);

Test(cgroup_io, v2_writes_io_max_and_enables_io)
{
        put(tmp, "cgroup.controllers", "cpuset cpu io memory pids\n");
        struct cgroup *cg = NULL;
        cr_assert_eq(cgroup_v2_new(tmp, "airlock-0123456789abcdef", true, &cg), 0);
        struct cgroup_limits l = {
            .memory = 1 << 20,
            .io = {.write_bps = 5242880, .read_iops = 100, .devs = {makedev(254, 0)}, .n_devs = 1}};
        struct al_error err = {0};
        cr_assert_eq(cgroup_create(cg, &l, &err), 0, "%s", err.msg);
        _cleanup_free_ char *ctl = get(tmp, "cgroup.subtree_control");
        cr_expect(strstr(ctl, "+io"), "%s", ctl);
        _cleanup_free_ char *io = get(cg->dirs[0], "io.max");
        cr_expect_str_eq(io, "254:0 rbps=max wbps=5242880 riops=100 wiops=max");
        cgroup_free(cg);
}

Test(cgroup_io, v2_without_limits_io_leaves_io_alone)
{
        /* A host that does not delegate io still runs sandboxes. */
        put(tmp, "cgroup.controllers", "cpu memory pids\n");
        struct cgroup *cg = NULL;
        cr_assert_eq(cgroup_v2_new(tmp, "airlock-0123456789abcdef", true, &cg), 0);
        struct cgroup_limits l = {.memory = 1 << 20};
        struct al_error err = {0};
        cr_assert_eq(cgroup_create(cg, &l, &err), 0, "%s", err.msg);
        _cleanup_free_ char *ctl = get(tmp, "cgroup.subtree_control");
        cr_expect_null(strstr(ctl, "io"), "%s", ctl);
        _cleanup_free_ char *p = xasprintf("%s/io.max", cg->dirs[0]);
        cr_expect_neq(access(p, F_OK), 0);
        cgroup_free(cg);
}

Test(cgroup_io, v2_io_not_delegated_is_refused)
{
        put(tmp, "cgroup.controllers", "cpu memory pids\n");
        struct cgroup *cg = NULL;
        cr_assert_eq(cgroup_v2_new(tmp, "airlock-0123456789abcdef", true, &cg), 0);
        struct cgroup_limits l = {.io = {.read_bps = 1, .devs = {makedev(8, 0)}, .n_devs = 1}};
        struct al_error err = {0};
        cr_assert_lt(cgroup_create(cg, &l, &err), 0);
        cr_expect(strstr(err.msg, "controller io is not delegated"), "%s", err.msg);
        cgroup_free(cg);
}

Test(cgroup_io, io_max_lines)
{
        struct cgroup_limits l = {.io = {.read_bps = 1,
                                         .write_bps = 2,
                                         .read_iops = 3,
                                         .write_iops = 4,
                                         .devs = {makedev(8, 0), makedev(259, 1)},
                                         .n_devs = 2}};
        char buf[160];
        cr_assert_eq(cgroup_io_max_line(&l, 1, buf, sizeof(buf)), 0);
        cr_expect_str_eq(buf, "259:1 rbps=1 wbps=2 riops=3 wiops=4");
        cr_expect_eq(cgroup_io_max_line(&l, 2, buf, sizeof(buf)), -EINVAL);
        cr_expect_eq(cgroup_io_max_line(&l, 0, buf, 10), -ENOBUFS);
}

Test(cgroup_io, v1_writes_blkio_throttle)
{
        _cleanup_free_ char *mem = xasprintf("%s/memory", tmp);
        _cleanup_free_ char *blk = xasprintf("%s/blkio", tmp);
        cr_assert_eq(mkdir(mem, 0755), 0);
        cr_assert_eq(mkdir(blk, 0755), 0);
        char *parents[] = {mem, blk};
        struct cgroup *cg = NULL;
        cr_assert_eq(cgroup_v1_new(parents, 2, "airlock-0123456789abcdef", true, &cg), 0);
        struct cgroup_limits l = {
            .io = {.read_bps = 1048576, .write_iops = 50, .devs = {makedev(7, 3)}, .n_devs = 1}};
        struct al_error err = {0};
        cr_assert_eq(cgroup_create(cg, &l, &err), 0, "%s", err.msg);
        _cleanup_free_ char *r = get(cg->dirs[1], "blkio.throttle.read_bps_device");
        cr_expect_str_eq(r, "7:3 1048576");
        _cleanup_free_ char *w = get(cg->dirs[1], "blkio.throttle.write_iops_device");
        cr_expect_str_eq(w, "7:3 50");
        _cleanup_free_ char *p = xasprintf("%s/blkio.throttle.write_bps_device", cg->dirs[1]);
        cr_expect_neq(access(p, F_OK), 0, "an unset limit is not written");
        cgroup_free(cg);
}

Test(cgroup_io, v1_without_blkio_is_refused)
{
        _cleanup_free_ char *mem = xasprintf("%s/memory", tmp);
        cr_assert_eq(mkdir(mem, 0755), 0);
        char *parents[] = {mem};
        struct cgroup *cg = NULL;
        cr_assert_eq(cgroup_v1_new(parents, 1, "airlock-0123456789abcdef", true, &cg), 0);
        struct cgroup_limits l = {.io = {.write_bps = 1, .devs = {makedev(7, 3)}, .n_devs = 1}};
        struct al_error err = {0};
        cr_assert_lt(cgroup_create(cg, &l, &err), 0);
        cr_expect(strstr(err.msg, "blkio"), "%s", err.msg);
        cgroup_free(cg);
}

Test(cgroup_io, usage_parsers)
{
        uint64_t r, w;
        cgroup_parse_io_stat("8:0 rbytes=100 wbytes=200 rios=1 wios=2 dbytes=0 dios=0\n"
                             "254:0 rbytes=5 wbytes=7 rios=1 wios=1\n",
                             &r, &w);
        cr_expect_eq(r, 105);
        cr_expect_eq(w, 207);
        cgroup_parse_blkio_bytes("254:0 Read 4096\n254:0 Write 10485760\n254:0 Sync 1\n"
                                 "254:0 Async 0\n254:0 Total 10489856\n8:0 Write 1\nTotal 9\n",
                                 &r, &w);
        cr_expect_eq(r, 4096);
        cr_expect_eq(w, 10485761);
}

Test(cgroup_io, devices_of_paths)
{
        struct cgroup_limits l = {.io = {.write_bps = 1}};
        struct al_error err = {0};
        /* /dev/shm is a tmpfs: no block device, refused with the path named. */
        char *shm[] = {"/dev/shm"};
        cr_assert_lt(cgroup_io_devices(shm, 1, &l, &err), 0);
        cr_expect(strstr(err.msg, "no block device backs /dev/shm"), "%s", err.msg);
        char *none[] = {NULL};
        cr_assert_lt(cgroup_io_devices(none, 0, &l, &err), 0);
        cr_expect(strstr(err.msg, "no workspace"), "%s", err.msg);
        struct stat st;
        cr_assert_eq(stat(".", &st), 0);
        if (major(st.st_dev) == 0)
                cr_skip_test("the build directory has no block device");
        char *here[] = {".", "."};
        cr_assert_eq(cgroup_io_devices(here, 2, &l, &err), 0, "%s", err.msg);
        cr_expect_eq(l.io.n_devs, 1, "the same disk once");
}

Test(cgroup_io, v2_io_enables_memory_for_buffered_writeback)
{
        /* The kernel charges a buffered write's writeback to the cgroup that
         * dirtied the page only when the memory and io controllers are both
         * enabled on it: io.max alone would throttle direct I/O only. */
        put(tmp, "cgroup.controllers", "cpu io memory pids\n");
        put(tmp, "cgroup.subtree_control", "");
        struct cgroup *cg = NULL;
        cr_assert_eq(cgroup_v2_new(tmp, "airlock-0123456789abcdef", true, &cg), 0);
        struct cgroup_limits l = {
            .io = {.write_bps = 1048576, .devs = {makedev(7, 0)}, .n_devs = 1}};
        struct al_error err = {0};
        cr_assert_eq(cgroup_create(cg, &l, &err), 0, "%s", err.msg);
        _cleanup_free_ char *ctl = get(tmp, "cgroup.subtree_control");
        cr_expect(strstr(ctl, "+io"), "%s", ctl);
        cr_expect(strstr(ctl, "+memory"), "no memory limit, yet memory enabled: %s", ctl);
        _cleanup_free_ char *io = get(cg->dirs[0], "io.max");
        cr_expect_str_eq(io, "7:0 rbps=max wbps=1048576 riops=max wiops=max");
        cgroup_free(cg);
}

Test(cgroup_io, v2_io_without_memory_is_refused)
{
        /* io delegated but memory not: writeback would go unthrottled. */
        put(tmp, "cgroup.controllers", "cpu io pids\n");
        struct cgroup *cg = NULL;
        cr_assert_eq(cgroup_v2_new(tmp, "airlock-0123456789abcdef", true, &cg), 0);
        struct cgroup_limits l = {.io = {.write_bps = 1, .devs = {makedev(7, 0)}, .n_devs = 1}};
        struct al_error err = {0};
        cr_assert_lt(cgroup_create(cg, &l, &err), 0);
        cr_expect(strstr(err.msg, "controller memory is not delegated"), "%s", err.msg);
        cgroup_free(cg);
}
