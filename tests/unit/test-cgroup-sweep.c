/* SPDX-License-Identifier: Apache-2.0 */
/* The sweep of leaves whose owner died (cgroup-sweep.c), on fake v1
 * hierarchies (directories in a temporary directory): a leaf stays while the
 * process that made it lives (its flock), goes once that process has died,
 * in every hierarchy; young leaves, leaves that hold something, and
 * directories not named airlock-<16 hex> are never removed. */
#include <criterion/criterion.h>
#include <fcntl.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "cgroup.h"
#include "cgroup-test-util.h"
#include "util.h"

static char *parents[2];

static void setup(void)
{
        fake_cgroup_setup("cgroup-sweep");
        parents[0] = xasprintf("%s/pids", tmp);
        parents[1] = xasprintf("%s/cpu", tmp);
        cr_assert_eq(mkdir(parents[0], 0755), 0);
        cr_assert_eq(mkdir(parents[1], 0755), 0);
}

static void fini(void)
{
        free(parents[0]);
        free(parents[1]);
        teardown();
}

static struct cgroup *make(const char *name)
{
        struct cgroup *cg = NULL;
        cr_assert_eq(cgroup_v1_new(parents, 2, name, true, &cg), 0);
        struct cgroup_limits none = {0};
        struct al_error err = {0};
        cr_assert_eq(cgroup_create(cg, &none, &err), 0, "%s", err.msg);
        cr_assert_eq(cg->n_locks, 2);
        return cg;
}

static bool exists(const char *parent, const char *name)
{
        _cleanup_free_ char *p = xasprintf("%s/%s", parent, name);
        return access(p, F_OK) == 0;
}

/* An hour old: well past the time between mkdir and lock. */
static void age(const char *parent, const char *name)
{
        _cleanup_free_ char *p = xasprintf("%s/%s", parent, name);
        struct timespec ts[2] = {{.tv_sec = time(NULL) - 3600}, {.tv_sec = time(NULL) - 3600}};
        cr_assert_eq(utimensat(AT_FDCWD, p, ts, 0), 0);
}

static int sweep(unsigned min_age)
{
        int n = 0;
        for (int i = 0; i < 2; i++) {
                int r = cgroup_sweep_dir(parents[i], min_age);
                cr_assert_geq(r, 0);
                n += r;
        }
        return n;
}

/* A child makes the leaves and dies without removing them (kill -9). */
static void made_by_dead_owner(const char *name)
{
        pid_t pid = fork();
        cr_assert_geq(pid, 0);
        if (pid == 0) {
                (void)make(name);
                _exit(0);
        }
        int st;
        cr_assert_eq(waitpid(pid, &st, 0), pid);
        cr_assert(WIFEXITED(st) && WEXITSTATUS(st) == 0);
        cr_assert(exists(parents[0], name) && exists(parents[1], name));
}

TestSuite(cgroup_sweep, .init = setup, .fini = fini, .timeout = 20);

Test(cgroup_sweep, a_live_owners_leaf_stays_a_dead_owners_goes_in_every_hierarchy)
{
        const char *live = "airlock-00000000000000aa", *dead = "airlock-00000000000000bb";
        struct cgroup *cg = make(live);
        made_by_dead_owner(dead);
        for (int i = 0; i < 2; i++) {
                age(parents[i], live);
                age(parents[i], dead);
        }
        cr_assert_eq(sweep(CGROUP_SWEEP_MIN_AGE_S), 2);
        for (int i = 0; i < 2; i++) {
                cr_assert(exists(parents[i], live), "a live owner's leaf was removed");
                cr_assert_not(exists(parents[i], dead), "a dead owner's leaf was left");
        }
        cgroup_free(cg);
        cr_assert_not(exists(parents[0], live));
        cr_assert_not(exists(parents[1], live));
}

Test(cgroup_sweep, the_owner_holds_its_lock_until_freed)
{
        struct cgroup *cg = make("airlock-00000000000000cc");
        age(parents[0], cg->name);
        age(parents[1], cg->name);
        cr_assert_eq(sweep(0), 0);
        cgroup_unlock_leaves(cg);
        cr_assert_eq(cg->n_locks, 0);
        /* Beside the leaves a new run would make: the same parents. */
        cr_assert_eq(cgroup_sweep_beside(cg->dirs, cg->n_dirs, 0), 2);
        cgroup_free(cg); /* its leaves are gone already: fine */
}

Test(cgroup_sweep, young_full_and_foreign_directories_stay)
{
        const char *young = "airlock-00000000000000dd", *full = "airlock-00000000000000ee";
        made_by_dead_owner(young);
        made_by_dead_owner(full);
        put(parents[0], "airlock-00000000000000ee/cgroup.procs", "123\n"); /* not empty */
        age(parents[0], full);
        age(parents[1], full);
        static const char *const foreign[] = {"airlock-user-1001", "airlock-0123", "user.slice",
                                              "airlock-0123456789ABCDEF"};
        for (size_t i = 0; i < ARRAY_SIZE(foreign); i++) {
                _cleanup_free_ char *p = xasprintf("%s/%s", parents[0], foreign[i]);
                cr_assert_eq(mkdir(p, 0755), 0);
                age(parents[0], foreign[i]);
        }
        /* Only the full one's empty twin in the other hierarchy goes. */
        cr_assert_eq(sweep(CGROUP_SWEEP_MIN_AGE_S), 1);
        cr_assert(exists(parents[0], young) && exists(parents[1], young));
        _cleanup_free_ char *procs = get(parents[0], "airlock-00000000000000ee/cgroup.procs");
        cr_assert_str_eq(procs, "123\n");
        cr_assert_not(exists(parents[1], full));
        for (size_t i = 0; i < ARRAY_SIZE(foreign); i++)
                cr_assert(exists(parents[0], foreign[i]), "%s", foreign[i]);
        /* Without the age bound the young one goes too. */
        cr_assert_eq(sweep(0), 2);
}

Test(cgroup_sweep, a_missing_parent_is_nothing_to_sweep)
{
        _cleanup_free_ char *p = xasprintf("%s/nothere", tmp);
        cr_assert_eq(cgroup_sweep_dir(p, 0), 0);
}

/* The sweep a run asks for at its start (cgroup_sweep_later) runs once,
 * when the spawner gets to it (cgroup_sweep_now), or at cgroup_free when
 * no sandbox was started; never while the start is still on its way. */
Test(cgroup_sweep, a_sweep_asked_for_later_runs_once_when_asked_or_at_free)
{
        const char *dead = "airlock-00000000000000f1", *dead2 = "airlock-00000000000000f2";
        made_by_dead_owner(dead);
        for (int i = 0; i < 2; i++)
                age(parents[i], dead);
        struct cgroup *cg = NULL;
        cr_assert_eq(cgroup_v1_new(parents, 2, "airlock-00000000000000f0", true, &cg), 0);
        cgroup_sweep_later(cg);
        cr_assert(exists(parents[0], dead) && exists(parents[1], dead), "swept before asked");
        cr_assert_eq(cgroup_sweep_now(cg), 2);
        cr_assert_not(exists(parents[0], dead));
        cr_assert_not(exists(parents[1], dead));
        made_by_dead_owner(dead2);
        for (int i = 0; i < 2; i++)
                age(parents[i], dead2);
        cr_assert_eq(cgroup_sweep_now(cg), 0, "swept twice");
        cr_assert(exists(parents[0], dead2));
        /* Asked for and never run: cgroup_free sweeps. */
        cgroup_sweep_later(cg);
        cgroup_free(cg);
        cr_assert_not(exists(parents[0], dead2));
        cr_assert_not(exists(parents[1], dead2));
}
