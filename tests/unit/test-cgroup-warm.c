/* SPDX-License-Identifier: Apache-2.0 */
#include <criterion/criterion.h>
#include <errno.h>
#include <string.h>

#include "cgroup.h"

TestSuite(cgroup_warm, .timeout = 10);

static const char hybrid[] = "12:pids:/user.slice/user-1000.slice\n"
                             "11:cpu,cpuacct:/user.slice\n"
                             "5:memory:/system.slice/ssh.service\n"
                             "1:name=systemd:/user.slice/user-1000.slice/session-2.scope\n"
                             "0::/user.slice/user-1000.slice/session-2.scope\n";

Test(cgroup_warm, the_memory_hierarchy_first)
{
        char buf[256];
        cr_assert_eq(cgroup_warm_path(hybrid, "/sys/fs/cgroup", buf, sizeof(buf)), 0);
        cr_assert_str_eq(buf, "/sys/fs/cgroup/memory/system.slice/ssh.service/tasks");
}

Test(cgroup_warm, pids_without_memory)
{
        char buf[256];
        const char *s = "3:pids:/a/b\n2:cpu,cpuacct:/\n";
        cr_assert_eq(cgroup_warm_path(s, "/cg", buf, sizeof(buf)), 0);
        cr_assert_str_eq(buf, "/cg/pids/a/b/tasks");
}

Test(cgroup_warm, the_top_cgroup)
{
        char buf[256];
        cr_assert_eq(cgroup_warm_path("4:memory:/\n", "/cg", buf, sizeof(buf)), 0);
        cr_assert_str_eq(buf, "/cg/memory/tasks");
}

Test(cgroup_warm, a_controller_in_a_comounted_list)
{
        char buf[256];
        cr_assert_eq(cgroup_warm_path("7:memory,pids:/x", "/cg", buf, sizeof(buf)), 0);
        cr_assert_str_eq(buf, "/cg/memory,pids/x/tasks");
}

Test(cgroup_warm, no_v1_hierarchy_or_a_name_that_only_starts_alike)
{
        char buf[256];
        cr_assert_eq(cgroup_warm_path("0::/user.slice\n", "/cg", buf, sizeof(buf)), -ENOENT);
        cr_assert_eq(cgroup_warm_path("3:memoryx:/a\n4:name=pids:/b\n", "/cg", buf, sizeof(buf)),
                     -ENOENT);
        cr_assert_eq(cgroup_warm_path("", "/cg", buf, sizeof(buf)), -ENOENT);
        cr_assert_eq(cgroup_warm_path("garbage", "/cg", buf, sizeof(buf)), -ENOENT);
}

Test(cgroup_warm, too_long_for_the_buffer)
{
        char buf[16];
        cr_assert_eq(cgroup_warm_path(hybrid, "/sys/fs/cgroup", buf, sizeof(buf)), -ENAMETOOLONG);
}
