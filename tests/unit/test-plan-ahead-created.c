/* SPDX-License-Identifier: Apache-2.0 */
/* The deny list resolved ahead (plan.c) runs while the run itself creates
 * files: its run record and audit log under the caller's state root
 * (~/.local/state/airlock, an internal deny entry), the git snapshot. A
 * path the thread found missing is masked only where the sandbox could
 * create it (a writable mount), so with `read: host` a state root made
 * after the thread looked stayed readable inside: the first run of a user
 * showed every record and audit line of that state root. The plan takes
 * the thread's answer only while what it found missing is still missing. */
#include <criterion/criterion.h>
#include <fcntl.h>
#include <limits.h>
#include <sched.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "mounts.h"
#include "paths.h"
#include "policy.h"
#include "util.h"

TestSuite(plan_ahead_created, .timeout = 30);

static char base[PATH_MAX / 4], home[PATH_MAX / 2], ws[PATH_MAX / 2];

static void setup_tree(void)
{
        cpu_set_t set;
        if (sched_getaffinity(0, sizeof(set), &set) < 0 || CPU_COUNT(&set) < 2)
                cr_skip_test("one CPU: the deny list is resolved inline");
        char tmpl[] = "/tmp/airlock-plan-created-XXXXXX";
        cr_assert_not_null(mkdtemp(tmpl));
        char real[PATH_MAX];
        cr_assert_not_null(realpath(tmpl, real));
        cr_assert_lt(strlen(real), sizeof(base));
        memcpy(base, real, strlen(real) + 1);
        snprintf(home, sizeof(home), "%s/home", base);
        snprintf(ws, sizeof(ws), "%s/home/project", base);
        cr_assert_eq(mkdir(home, 0755), 0);
        cr_assert_eq(mkdir(ws, 0755), 0);
}

static void cleanup_tree(void)
{
        char cmd[PATH_MAX + 16];
        snprintf(cmd, sizeof(cmd), "rm -rf %s", base);
        cr_assert_eq(system(cmd), 0);
}

static struct policy *new_policy(void)
{
        struct policy *p = policy_new();
        struct al_error err = {0};
        p->workspace = xstrdup(ws);
        char deny[PATH_MAX];
        snprintf(deny, sizeof(deny), "%s/appears", ws);
        policy_add_deny_read(p, deny);
        cr_assert_eq(policy_finalize(p, base, home, &err), 0, "%s", err.msg);
        return p;
}

static mode_t mode_of(const struct mounts_plan *plan, const char *suffix)
{
        char want[PATH_MAX];
        snprintf(want, sizeof(want), "%s%s", base, suffix);
        for (size_t i = 0; i < plan->n_deny; i++)
                if (STREQ(plan->deny[i], want))
                        return plan->deny_mode[i];
        cr_assert_fail("%s is not in the deny list", want);
        return 0;
}

Test(plan_ahead_created, a_path_created_after_the_thread_is_seen)
{
        setup_tree();
        struct policy *p = new_policy();
        struct al_error err = {0};
        mounts_deny_ahead(p, home);
        usleep(300 * 1000); /* the thread has looked */
        /* What the run makes meanwhile: its state root, and a file the
         * user denied. */
        char path[PATH_MAX];
        snprintf(path, sizeof(path), "%s/.local", home);
        cr_assert_eq(mkdir(path, 0700), 0);
        snprintf(path, sizeof(path), "%s/.local/state", home);
        cr_assert_eq(mkdir(path, 0700), 0);
        snprintf(path, sizeof(path), "%s/" PATHS_STATE_ROOT_HOME, home);
        cr_assert_eq(mkdir(path, 0700), 0);
        snprintf(path, sizeof(path), "%s/appears", ws);
        close(open(path, O_CREAT | O_WRONLY | O_CLOEXEC, 0600));
        struct mounts_plan *plan = NULL;
        cr_assert_eq(mounts_plan_new(p, home, &plan, &err), 0, "%s", err.msg);
        cr_assert(S_ISDIR(mode_of(plan, "/home/" PATHS_STATE_ROOT_HOME)),
                  "the state root made after the thread looked is planned as missing (masked "
                  "only on a writable mount)");
        cr_assert(S_ISREG(mode_of(plan, "/home/project/appears")),
                  "a denied file made after the thread looked is planned as missing");
        mounts_plan_free(plan, p->n_mounts);
        mounts_deny_ahead_end();
        policy_free(p);
        cleanup_tree();
}
