/* SPDX-License-Identifier: Apache-2.0 */
#include <criterion/criterion.h>
#include <string.h>

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

/* A v1 hierarchy refuses favordynmods on a remount: the fix names the v2
 * hierarchy of a hybrid host, whose remount takes it (and relaxes the lock
 * every move takes), never a v1 mount point. */
Test(probe_dynmods, the_fix_remounts_the_v2_hierarchy_of_a_hybrid_host)
{
        const char *m = "cgroup /sys/fs/cgroup/memory cgroup rw,relatime,memory 0 0\n"
                        "cgroup2 /sys/fs/cgroup/unified cgroup2 rw,relatime 0 0\n";
        struct probe_check c;
        probe_start_cost_of(m, &c);
        cr_assert(!c.ok);
        cr_assert(strstr(c.fix, "mount -o remount,favordynmods /sys/fs/cgroup/unified "), "%s",
                  c.fix);
        cr_assert_null(strstr(c.fix, "/sys/fs/cgroup/memory"), "%s", c.fix);
}

Test(probe_dynmods, the_fix_of_a_v1_only_host_mounts_v2_with_the_option)
{
        const char *m = "cgroup /sys/fs/cgroup/memory cgroup rw,relatime,memory 0 0\n"
                        "cgroup /sys/fs/cgroup/pids cgroup rw,relatime,pids 0 0\n";
        struct probe_check c;
        probe_start_cost_of(m, &c);
        cr_assert(!c.ok);
        cr_assert(strstr(c.fix, "remount cannot add it"), "%s", c.fix);
        cr_assert(strstr(c.fix, "mount -t cgroup2 -o favordynmods"), "%s", c.fix);
        cr_assert_null(strstr(c.fix, "remount,favordynmods"), "%s", c.fix);
}

Test(probe_dynmods, the_option_on_v2_is_enough)
{
        const char *m = "cgroup /sys/fs/cgroup/memory cgroup rw,relatime,memory 0 0\n"
                        "cgroup2 /sys/fs/cgroup/unified cgroup2 rw,relatime,favordynmods 0 0\n";
        struct probe_check c;
        probe_start_cost_of(m, &c);
        cr_assert(c.ok, "%s", c.detail);
}
