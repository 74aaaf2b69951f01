/* SPDX-License-Identifier: Apache-2.0 */
/* airlock-runtime's linux.cgroupsPath on cgroup v2, against a fake
 * hierarchy (control files are plain files): where the leaf goes, the
 * controllers handed down every level, the limits in the leaf, and what is
 * refused. */
#include <criterion/criterion.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "cgpath.h"
#include "util.h"

static char root[] = "/tmp/oci-cgpath-XXXXXX";

static void put(const char *rel, const char *content)
{
        _cleanup_free_ char *p = xasprintf("%s/%s", root, rel);
        _cleanup_close_ int fd = open(p, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
        cr_assert_geq(fd, 0, "%s", p);
        cr_assert_geq(write_full(fd, content, strlen(content)), 0);
}

static char *get(const char *rel)
{
        _cleanup_free_ char *p = xasprintf("%s/%s", root, rel);
        char *s = NULL;
        if (read_file_at(AT_FDCWD, p, 4096, &s, NULL) < 0)
                return NULL;
        return s;
}

static void setup(void)
{
        memcpy(root, "/tmp/oci-cgpath-XXXXXX", sizeof(root));
        cr_assert_not_null(mkdtemp(root));
        put("cgroup.controllers", "cpuset cpu io memory hugetlb pids rdma misc\n");
        _cleanup_free_ char *shim = xasprintf("%s/shim", root);
        cr_assert_eq(mkdir(shim, 0755), 0);
        put("shim/cgroup.controllers", "cpu memory pids\n");
}

static void teardown(void)
{
        _cleanup_free_ char *cmd = xasprintf("rm -rf %s", root);
        (void)system(cmd);
}

TestSuite(oci_cgpath, .init = setup, .fini = teardown);

Test(oci_cgpath, absolute_path_is_beneath_the_root)
{
        struct cgroup_limits l = {.memory = 64 << 20, .pids = 40, .cpus_milli = 500};
        struct rt_cgpath c = {0};
        struct al_error e = {0};
        int r = rt_cgpath_setup_v2(root, "/shim", "/kubepods/pod1//c1", &l, true, &c, &e);
        cr_assert_eq(r, 0, "%s", e.msg);
        _cleanup_free_ char *want = xasprintf("%s/kubepods/pod1/c1", root);
        cr_assert_str_eq(c.leaves[0], want);
        cr_assert_null(c.leaves[1]);
        _cleanup_free_ char *home = xasprintf("%s/shim", root);
        cr_assert_str_eq(c.home[0], home);
        cr_assert(c.v2);
        _cleanup_free_ char *mem = get("kubepods/pod1/c1/memory.max");
        _cleanup_free_ char *pids = get("kubepods/pod1/c1/pids.max");
        _cleanup_free_ char *cpu = get("kubepods/pod1/c1/cpu.max");
        cr_assert_str_eq(mem, "67108864");
        cr_assert_str_eq(pids, "40");
        cr_assert_str_eq(cpu, "50000 100000");
        /* Every level hands the controllers down: the root, the parent
         * made here, and the leaf's own parent. */
        const char *levels[] = {"cgroup.subtree_control", "kubepods/cgroup.subtree_control",
                                "kubepods/pod1/cgroup.subtree_control"};
        for (size_t i = 0; i < 3; i++) {
                _cleanup_free_ char *s = get(levels[i]);
                cr_assert_not_null(s, "%s", levels[i]);
                cr_assert(strstr(s, "+memory") && strstr(s, "+pids") && strstr(s, "+cpu"), "%s: %s",
                          levels[i], s);
                cr_assert_null(strstr(s, "+io"), "io only with limits.io: %s", s);
        }
        /* The keeper joins it. */
        put("kubepods/pod1/c1/cgroup.procs", "");
        cr_assert_eq(rt_cgpath_enter(&c, 4242, &e), 0, "%s", e.msg);
        _cleanup_free_ char *procs = get("kubepods/pod1/c1/cgroup.procs");
        cr_assert_str_eq(procs, "4242");
        rt_cgpath_free(&c);
        cr_assert_null(c.cg);
        struct stat st;
        cr_assert_neq(stat(want, &st), 0, "the leaf goes");
        _cleanup_free_ char *parent = xasprintf("%s/kubepods/pod1", root);
        cr_assert_eq(stat(parent, &st), 0, "its parents stay (their owner's)");
}

Test(oci_cgpath, relative_path_is_beneath_the_runtimes_own)
{
        struct cgroup_limits l = {.memory = 32 << 20};
        struct rt_cgpath c = {0};
        struct al_error e = {0};
        int r = rt_cgpath_setup_v2(root, "/shim", "c2", &l, true, &c, &e);
        cr_assert_eq(r, 0, "%s", e.msg);
        _cleanup_free_ char *want = xasprintf("%s/shim/c2", root);
        cr_assert_str_eq(c.leaves[0], want);
        _cleanup_free_ char *mem = get("shim/c2/memory.max");
        cr_assert_str_eq(mem, "33554432");
        rt_cgpath_free(&c);
}

Test(oci_cgpath, an_undelegated_controller_is_named)
{
        put("shim/cgroup.controllers", "cpu memory\n");
        struct cgroup_limits l = {.pids = 10};
        struct rt_cgpath c = {0};
        struct al_error e = {0};
        int r = rt_cgpath_setup_v2(root, "/shim", "c3", &l, true, &c, &e);
        cr_assert_lt(r, 0);
        cr_assert(strstr(e.msg, "pids"), "%s", e.msg);
        _cleanup_free_ char *leaf = xasprintf("%s/shim/c3", root);
        struct stat st;
        cr_assert_neq(stat(leaf, &st), 0, "nothing is left");
}

Test(oci_cgpath, refused)
{
        static const struct {
                const char *path, *needle;
        } bad[] = {
            {"/", "names no cgroup"}, {"//", "names no cgroup"}, {"/a/../b", "\"..\""},
            {"a/./b", "\".\""},       {"/shim", "exists"},
        };
        struct cgroup_limits l = {0};
        for (size_t i = 0; i < ARRAY_SIZE(bad); i++) {
                struct rt_cgpath c = {0};
                struct al_error e = {0};
                int r = rt_cgpath_setup_v2(root, "/", bad[i].path, &l, true, &c, &e);
                cr_assert_lt(r, 0, "%s accepted", bad[i].path);
                cr_assert(strstr(e.msg, bad[i].needle), "%s: %s", bad[i].path, e.msg);
                cr_assert_null(c.leaves);
        }
}

Test(oci_cgpath, reclaim_stays_beneath_sys_fs_cgroup)
{
        /* A leaf outside the cgroup file system, or a hierarchy's root, is
         * never emptied or removed. */
        _cleanup_free_ char *d = xasprintf("%s/keep", root);
        cr_assert_eq(mkdir(d, 0755), 0);
        char *leaves[] = {d, (char *)"/sys/fs/cgroup", (char *)"/sys/fs/cgroup/memory",
                          (char *)"/sys/fs/cgroup/memory/../memory", NULL};
        cr_assert_eq(rt_cgpath_reclaim(leaves, NULL, false), 0);
        struct stat st;
        cr_assert_eq(stat(d, &st), 0);
}
