/* SPDX-License-Identifier: Apache-2.0 */
/* The kill switch's freezer in the cgroup layer, on fake hierarchies (plain
 * files in a temporary directory): v2 writes cgroup.freeze and waits for
 * cgroup.events to say "frozen 1"; v1 writes freezer.state in the freezer
 * hierarchy and waits for FROZEN; a kill thaws; no freezer is -EOPNOTSUPP. */
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
        fake_cgroup_setup("cgroup-freeze");
}

static struct cgroup *v2(void)
{
        put(tmp, "cgroup.controllers", "cpu memory pids\n");
        struct cgroup *cg = NULL;
        cr_assert_eq(cgroup_v2_new(tmp, "airlock-0123456789abcdef", true, &cg), 0);
        struct cgroup_limits l = {.pids = 10};
        struct al_error err = {0};
        cr_assert_eq(cgroup_create(cg, &l, &err), 0, "%s", err.msg);
        return cg;
}

TestSuite(cgroup_freeze, .init = setup, .fini = teardown, .timeout = 20);

Test(cgroup_freeze, v2_freezes_once_the_kernel_says_frozen)
{
        struct cgroup *cg = v2();
        put(cg->dirs[0], "cgroup.events", "populated 1\nfrozen 1\n");
        cr_assert_eq(cgroup_freeze(cg, true), 0);
        _cleanup_free_ char *f = get(cg->dirs[0], "cgroup.freeze");
        cr_expect_str_eq(f, "1");
        cr_assert_eq(cgroup_freeze(cg, false), 0);
        _cleanup_free_ char *t = get(cg->dirs[0], "cgroup.freeze");
        cr_expect_str_eq(t, "0");
        cgroup_free(cg);
}

Test(cgroup_freeze, v2_not_frozen_in_time_is_a_timeout)
{
        struct cgroup *cg = v2();
        put(cg->dirs[0], "cgroup.events", "populated 1\nfrozen 0\n");
        cr_assert_eq(cgroup_freeze(cg, true), -ETIMEDOUT);
        cgroup_free(cg);
}

static struct cgroup *v1(bool with_freezer)
{
        const char *ctrls[] = {"memory", "pids", "cpu", "freezer"};
        char *parents[4];
        size_t n = with_freezer ? 4 : 3;
        for (size_t i = 0; i < n; i++) {
                parents[i] = xasprintf("%s/%s", tmp, ctrls[i]);
                cr_assert_eq(mkdir(parents[i], 0755), 0);
        }
        struct cgroup *cg = NULL;
        cr_assert_eq(cgroup_v1_new(parents, n, "airlock-0123456789abcdef", true, &cg), 0);
        for (size_t i = 0; i < n; i++)
                free(parents[i]);
        struct cgroup_limits l = {.pids = 10};
        struct al_error err = {0};
        cr_assert_eq(cgroup_create(cg, &l, &err), 0, "%s", err.msg);
        return cg;
}

Test(cgroup_freeze, v1_writes_frozen_in_the_freezer_hierarchy_and_kill_thaws)
{
        struct cgroup *cg = v1(true);
        cr_assert_eq(cgroup_freeze(cg, true), 0);
        _cleanup_free_ char *fz = xasprintf("%s/freezer/airlock-0123456789abcdef", tmp);
        _cleanup_free_ char *s = get(fz, "freezer.state");
        cr_expect_str_eq(s, "FROZEN");
        /* Nothing written to the other hierarchies. */
        _cleanup_free_ char *mem =
            xasprintf("%s/memory/airlock-0123456789abcdef/freezer.state", tmp);
        cr_expect_neq(access(mem, F_OK), 0);
        cr_assert_eq(cg->ops->kill(cg), 0);
        _cleanup_free_ char *t = get(fz, "freezer.state");
        cr_expect_str_eq(t, "THAWED");
        cgroup_free(cg);
}

Test(cgroup_freeze, v1_without_a_freezer_says_so)
{
        struct cgroup *cg = v1(false);
        cr_assert_eq(cgroup_freeze(cg, true), -EOPNOTSUPP);
        cgroup_free(cg);
}

Test(cgroup_freeze, not_created_is_refused)
{
        struct cgroup *cg = NULL;
        cr_assert_eq(cgroup_v2_new(tmp, "airlock-0123456789abcdef", true, &cg), 0);
        cr_assert_eq(cgroup_freeze(cg, true), -ESRCH);
        cgroup_free(cg);
}
