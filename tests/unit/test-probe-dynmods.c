/* SPDX-License-Identifier: Apache-2.0 */
#include <criterion/criterion.h>

#include "probe.h"

TestSuite(probe_dynmods, .timeout = 10);

Test(probe_dynmods, hybrid_without_the_option)
{
        const char *m = "proc /proc proc rw,nosuid 0 0\n"
                        "tmpfs /sys/fs/cgroup tmpfs rw,relatime,mode=755 0 0\n"
                        "cgroup /sys/fs/cgroup/memory cgroup rw,relatime,memory 0 0\n"
                        "cgroup /sys/fs/cgroup/pids cgroup rw,relatime,pids 0 0\n"
                        "cgroup2 /sys/fs/cgroup/unified cgroup2 rw,relatime 0 0\n";
        struct probe_dynmods d;
        cr_assert_eq(probe_cgroup_dynmods(m, &d), 0);
        cr_assert_eq(d.v1, 2);
        cr_assert_eq(d.v1_favor, 0);
        cr_assert_eq(d.v2, 1);
        cr_assert_eq(d.v2_favor, 0);
}

Test(probe_dynmods, the_option_anywhere_in_the_list)
{
        const char *m = "cgroup /sys/fs/cgroup/memory cgroup rw,favordynmods,memory 0 0\n"
                        "cgroup /sys/fs/cgroup/pids cgroup rw,relatime,pids 0 0\n"
                        "cgroup2 /sys/fs/cgroup cgroup2 rw,nsdelegate,favordynmods 0 0";
        struct probe_dynmods d;
        probe_cgroup_dynmods(m, &d);
        cr_assert_eq(d.v1, 2);
        cr_assert_eq(d.v1_favor, 1);
        cr_assert_eq(d.v2, 1);
        cr_assert_eq(d.v2_favor, 1);
}

Test(probe_dynmods, a_name_that_only_looks_alike)
{
        const char *m = "cgroupfoo /x cgroupfs rw,favordynmods 0 0\n"
                        "cgroup /sys/fs/cgroup/cpu cgroup rw,favordynmodsx,cpu 0 0\n"
                        "garbage\n\n";
        struct probe_dynmods d;
        probe_cgroup_dynmods(m, &d);
        cr_assert_eq(d.v1, 1);
        cr_assert_eq(d.v1_favor, 0);
        cr_assert_eq(d.v2, 0);
}
