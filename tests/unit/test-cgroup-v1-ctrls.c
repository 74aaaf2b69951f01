/* SPDX-License-Identifier: Apache-2.0 */
/* cgroup v1: a control file goes to the tree whose controllers
 * cgroup_open() noted (struct cgroup.ctrls), named by the part of the file
 * name before the first dot, whatever the trees are called and without
 * looking for the file; a controller no tree holds gets nothing; a leaf
 * held locked is written and read through its descriptor. */
#include <criterion/criterion.h>
#include <fcntl.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "cgroup.h"
#include "cgroup-test-util.h"
#include "util.h"

static void setup(void)
{
        fake_cgroup_setup("cgroup-v1-ctrls");
}

TestSuite(cgroup_v1_ctrls, .init = setup, .fini = teardown);

enum { MEMORY = 1 << 0, PIDS = 1 << 1, CPU = 1 << 2, CPUACCT = 1 << 3, FREEZER = 1 << 4 };

/* Two trees named for no controller: "a" holds memory, "b" pids, cpu and
 * cpuacct (co-mounted). */
static struct cgroup *two_trees(void)
{
        _cleanup_free_ char *a = xasprintf("%s/a", tmp);
        _cleanup_free_ char *b = xasprintf("%s/b", tmp);
        cr_assert_eq(mkdir(a, 0755), 0);
        cr_assert_eq(mkdir(b, 0755), 0);
        char *parents[] = {a, b};
        struct cgroup *cg = NULL;
        cr_assert_eq(cgroup_v1_new(parents, 2, "airlock-0123456789abcdef", true, &cg), 0);
        cg->ctrls[0] = MEMORY;
        cg->ctrls[1] = PIDS | CPU | CPUACCT;
        return cg;
}

static bool exists(const char *dir, const char *file)
{
        _cleanup_free_ char *p = xasprintf("%s/%s", dir, file);
        return access(p, F_OK) == 0;
}

Test(cgroup_v1_ctrls, limits_go_to_their_controllers_tree)
{
        struct cgroup *cg = two_trees();
        struct cgroup_limits l = {.memory = 1 << 20, .pids = 64, .cpus_milli = 500};
        struct al_error err = {0};
        cr_assert_eq(cgroup_create(cg, &l, &err), 0, "%s", err.msg);
        _cleanup_free_ char *mem = get(cg->dirs[0], "memory.limit_in_bytes");
        cr_expect_str_eq(mem, "1048576");
        _cleanup_free_ char *pids = get(cg->dirs[1], "pids.max");
        cr_expect_str_eq(pids, "64");
        _cleanup_free_ char *quota = get(cg->dirs[1], "cpu.cfs_quota_us");
        cr_expect_str_eq(quota, "50000");
        cr_expect(!exists(cg->dirs[1], "cpu.cfs_period_us"),
                  "the period a new cgroup has (100 ms) was written again");
        cr_expect(!exists(cg->dirs[0], "pids.max"), "pids.max went to the memory tree");
        cr_expect(!exists(cg->dirs[1], "memory.limit_in_bytes"),
                  "memory.limit_in_bytes went to the pids tree");
        cgroup_free(cg);
}

Test(cgroup_v1_ctrls, usage_is_read_from_each_controllers_tree)
{
        struct cgroup *cg = two_trees();
        struct al_error err = {0};
        struct cgroup_limits none = {0};
        cr_assert_eq(cgroup_create(cg, &none, &err), 0, "%s", err.msg);
        put(cg->dirs[0], "memory.max_usage_in_bytes", "4096\n");
        put(cg->dirs[0], "memory.oom_control", "oom_kill_disable 0\nunder_oom 0\noom_kill 2\n");
        put(cg->dirs[1], "cpuacct.usage", "7000000\n");
        put(cg->dirs[1], "pids.current", "3\n");
        /* A file of the same name in the wrong tree is not read. */
        put(cg->dirs[0], "pids.current", "99\n");
        struct cgroup_usage u;
        cr_assert_eq(cg->ops->usage(cg, &u), 0);
        cr_expect_eq(u.memory_peak, 4096);
        cr_expect_eq(u.oom_kills, 2);
        cr_expect_eq(u.cpu_usec, 7000);
        cr_expect_eq(u.pids_current, 3);
        /* A leaf held locked is read through its descriptor: moved, it
         * still answers. */
        _cleanup_free_ char *moved0 = xasprintf("%s.moved", cg->dirs[0]);
        _cleanup_free_ char *moved1 = xasprintf("%s.moved", cg->dirs[1]);
        cr_assert_eq(rename(cg->dirs[0], moved0), 0);
        cr_assert_eq(rename(cg->dirs[1], moved1), 0);
        struct cgroup_usage moved;
        cr_assert_eq(cg->ops->usage(cg, &moved), 0);
        cr_expect_eq(moved.memory_peak, 4096);
        cr_expect_eq(moved.cpu_usec, 7000);
        cr_expect_eq(moved.pids_current, 3);
        cr_assert_eq(rename(moved0, cg->dirs[0]), 0);
        cr_assert_eq(rename(moved1, cg->dirs[1]), 0);
        cgroup_free(cg);
}

Test(cgroup_v1_ctrls, a_controller_no_tree_holds_is_not_there)
{
        struct cgroup *cg = two_trees();
        struct al_error err = {0};
        struct cgroup_limits none = {0};
        cr_assert_eq(cgroup_create(cg, &none, &err), 0, "%s", err.msg);
        /* No freezer tree: the kill switch's freeze is refused, even with
         * a file of that name lying in another tree. */
        put(cg->dirs[1], "freezer.state", "THAWED\n");
        cr_expect_eq(cgroup_freeze(cg, true), -EOPNOTSUPP);
        cgroup_free(cg);
}

/* A leaf this process created and holds locked is written through its
 * descriptor: a lookup of one name, not of the whole path again. Shown by
 * moving the leaf: the write still lands in it. */
Test(cgroup_v1_ctrls, a_locked_leaf_is_written_through_its_descriptor)
{
        struct cgroup *cg = two_trees();
        struct al_error err = {0};
        struct cgroup_limits none = {0};
        cr_assert_eq(cgroup_create(cg, &none, &err), 0, "%s", err.msg);
        cr_assert_eq(cg->n_locks, cg->n_dirs);
        _cleanup_free_ char *moved = xasprintf("%s.moved", cg->dirs[1]);
        cr_assert_eq(rename(cg->dirs[1], moved), 0);
        cr_expect_eq(cg->ops->attach(cg, 4242, &err), 0, "%s", err.msg);
        _cleanup_free_ char *procs = get(moved, "cgroup.procs");
        cr_expect_str_eq(procs, "4242");
        cr_assert_eq(rename(moved, cg->dirs[1]), 0);
        cgroup_free(cg);
}

