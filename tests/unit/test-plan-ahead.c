/* SPDX-License-Identifier: Apache-2.0 */
/* A cold run resolves the deny list ahead, on a thread, while it writes its
 * run record and audit log (mounts_deny_ahead(), plan.c); the plan takes
 * that answer only while the policy's deny entries and the caller's home
 * are the ones the thread copied. Taken, it is the list the plan would have
 * resolved itself; changed since (an entry added, another home), the plan
 * resolves them again: a path denied after the thread started is masked. */
#include <criterion/criterion.h>
#include <fcntl.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "mounts.h"
#include "policy.h"
#include "util.h"

TestSuite(plan_ahead, .timeout = 30);

static char base[PATH_MAX / 4], home[PATH_MAX / 2], ws[PATH_MAX / 2];

static void setup_tree(void)
{
        char tmpl[] = "/tmp/airlock-plan-ahead-XXXXXX";
        cr_assert_not_null(mkdtemp(tmpl));
        char real[PATH_MAX];
        cr_assert_not_null(realpath(tmpl, real));
        cr_assert_lt(strlen(real), sizeof(base));
        memcpy(base, real, strlen(real) + 1);
        snprintf(home, sizeof(home), "%s/home", base);
        snprintf(ws, sizeof(ws), "%s/home/project", base);
        cr_assert_eq(mkdir(home, 0755), 0);
        cr_assert_eq(mkdir(ws, 0755), 0);
        char p[PATH_MAX];
        snprintf(p, sizeof(p), "%s/.ssh", home);
        cr_assert_eq(mkdir(p, 0700), 0);
        snprintf(p, sizeof(p), "%s/secret", ws);
        close(open(p, O_CREAT | O_WRONLY | O_CLOEXEC, 0600));
        snprintf(p, sizeof(p), "%s/later", ws);
        close(open(p, O_CREAT | O_WRONLY | O_CLOEXEC, 0600));
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
        snprintf(deny, sizeof(deny), "%s/secret", ws);
        policy_add_deny_read(p, deny);
        cr_assert_eq(policy_finalize(p, base, home, &err), 0, "%s", err.msg);
        return p;
}

static bool has(const struct mounts_plan *plan, const char *suffix)
{
        char want[PATH_MAX];
        snprintf(want, sizeof(want), "%s%s", base, suffix);
        for (size_t i = 0; i < plan->n_deny; i++)
                if (STREQ(plan->deny[i], want))
                        return true;
        return false;
}

static bool same_lists(const struct mounts_plan *a, const struct mounts_plan *b)
{
        if (a->n_deny != b->n_deny || a->internal_lo != b->internal_lo ||
            a->internal_hi != b->internal_hi)
                return false;
        for (size_t i = 0; i < a->n_deny; i++)
                if (!STREQ(a->deny[i], b->deny[i]) || a->deny_mode[i] != b->deny_mode[i] ||
                    a->deny_dir[i] != b->deny_dir[i])
                        return false;
        return true;
}

/* The list also holds what the host has then (its listening sockets, the
 * machine's homes), which tests running beside this one change: the two
 * resolutions are made again, at most 20 times, until nothing changed
 * between them. A taken answer that differs every time fails. */
Test(plan_ahead, taken_it_is_the_plans_own_answer)
{
        setup_tree();
        struct policy *p = new_policy();
        struct al_error err = {0};
        bool same = false;
        for (int i = 0; i < 20 && !same; i++) {
                struct mounts_plan *inline_plan = NULL, *ahead_plan = NULL;
                cr_assert_eq(mounts_plan_new(p, home, &inline_plan, &err), 0, "%s", err.msg);
                mounts_deny_ahead(p, home);
                cr_assert_eq(mounts_plan_new(p, home, &ahead_plan, &err), 0, "%s", err.msg);
                same = same_lists(inline_plan, ahead_plan);
                cr_assert(has(ahead_plan, "/home/.ssh"));
                cr_assert(has(ahead_plan, "/home/project/secret"));
                mounts_plan_free(inline_plan, p->n_mounts);
                mounts_plan_free(ahead_plan, p->n_mounts);
                mounts_deny_ahead_end();
        }
        cr_assert(same, "the answer resolved ahead differs from the plan's own, 20 times");
        policy_free(p);
        cleanup_tree();
}

Test(plan_ahead, an_entry_added_since_is_resolved_again)
{
        setup_tree();
        struct policy *p = new_policy();
        struct al_error err = {0};
        mounts_deny_ahead(p, home);
        char deny[PATH_MAX];
        snprintf(deny, sizeof(deny), "%s/later", ws);
        policy_add_deny_read(p, deny); /* after the thread copied the list */
        struct mounts_plan *plan = NULL;
        cr_assert_eq(mounts_plan_new(p, home, &plan, &err), 0, "%s", err.msg);
        cr_assert(has(plan, "/home/project/later"), "an entry added after the start is missing");
        cr_assert(has(plan, "/home/project/secret"));
        mounts_plan_free(plan, p->n_mounts);
        policy_free(p);
        cleanup_tree();
}

Test(plan_ahead, another_home_is_resolved_again)
{
        setup_tree();
        struct policy *p = new_policy();
        struct al_error err = {0};
        mounts_deny_ahead(p, "/nonexistent-home");
        struct mounts_plan *plan = NULL;
        cr_assert_eq(mounts_plan_new(p, home, &plan, &err), 0, "%s", err.msg);
        cr_assert(has(plan, "/home/.ssh"), "the caller's home was not the one resolved");
        mounts_plan_free(plan, p->n_mounts);
        policy_free(p);
        cleanup_tree();
}

Test(plan_ahead, ended_without_a_plan)
{
        setup_tree();
        struct policy *p = new_policy();
        mounts_deny_ahead(p, home);
        mounts_deny_ahead_end(); /* joined and dropped: no thread left */
        mounts_deny_ahead_end();
        struct al_error err = {0};
        struct mounts_plan *plan = NULL;
        cr_assert_eq(mounts_plan_new(p, home, &plan, &err), 0, "%s", err.msg);
        cr_assert(has(plan, "/home/.ssh"));
        mounts_plan_free(plan, p->n_mounts);
        policy_free(p);
        cleanup_tree();
}
