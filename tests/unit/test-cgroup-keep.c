/* SPDX-License-Identifier: Apache-2.0 */
/* cgroup_keep(): the layout a run's record was made from is taken by the
 * supervisor's cgroup_open() of the same leaf (the host's layout read once
 * per start), never by another leaf's, nor when limits.io asks for a look
 * of its own. Nothing is created. */
#include <criterion/criterion.h>
#include <string.h>
#include <sys/statfs.h>

#include "cgroup.h"
#include "util.h"

static struct cgroup *open_or_skip(const char *name, const struct cgroup_limits *l)
{
        struct cgroup *cg = NULL;
        struct al_error err = {0};
        if (cgroup_open(name, l, &cg, &err) < 0) {
                cr_skip_test("no cgroup layout to open here: %s", err.msg);
                return NULL;
        }
        return cg;
}

Test(cgroup_keep, the_same_leaf_takes_the_kept_layout)
{
        struct cgroup_limits none = {0};
        struct cgroup *first = open_or_skip("airlock-00000000000000aa", &none);
        char *dirs[CGROUP_V1_MAX];
        size_t n = first->n_dirs;
        for (size_t i = 0; i < n; i++)
                dirs[i] = xstrdup(first->dirs[i]);
        cgroup_keep(first);
        struct cgroup_limits lim = {.memory = 1 << 20, .pids = 7};
        struct cgroup *again = open_or_skip("airlock-00000000000000aa", &lim);
        cr_expect_eq(again, first, "the kept layout was read again");
        cr_expect_str_eq(again->name, "airlock-00000000000000aa");
        cr_expect_eq(again->limits.memory, 1 << 20, "the limits asked now apply");
        cr_expect_eq(again->limits.pids, 7);
        cr_assert_eq(again->n_dirs, n);
        for (size_t i = 0; i < n; i++) {
                cr_expect_str_eq(again->dirs[i], dirs[i]);
                free(dirs[i]);
        }
        cr_expect(!again->created);
        cgroup_free(again);
}

Test(cgroup_keep, another_leaf_or_io_limits_read_it_afresh)
{
        struct cgroup_limits none = {0};
        struct cgroup *first = open_or_skip("airlock-00000000000000bb", &none);
        cgroup_keep(first);
        struct cgroup *other = open_or_skip("airlock-00000000000000cc", &none);
        cr_expect_str_eq(other->name, "airlock-00000000000000cc");
        for (size_t i = 0; i < other->n_dirs; i++)
                cr_expect(strstr(other->dirs[i], "airlock-00000000000000cc"), "%s", other->dirs[i]);
        cgroup_free(other);

        /* The kept one was dropped by that open: the same name now reads
         * the layout again. */
        first = open_or_skip("airlock-00000000000000bb", &none);
        cgroup_keep(first);
        struct cgroup_limits io = {.io = {.write_bps = 1, .devs = {1}, .n_devs = 1}};
        struct cgroup *cg = NULL;
        struct al_error err = {0};
        int r = cgroup_open("airlock-00000000000000bb", &io, &cg, &err);
        if (r >= 0) {
                cr_expect_neq(cg, first, "limits.io took a layout found without it");
                cgroup_free(cg);
        }
        cgroup_keep(NULL);
}

/* The sweep beside the leaves a run asks for with its record's layout
 * (cgroup_sweep_later) goes with the layout to the supervisor's open, kept
 * or looked at afresh for limits.io, for the spawner to run. */
Test(cgroup_keep, the_sweep_asked_for_goes_with_the_layout)
{
        struct cgroup_limits none = {0};
        struct cgroup *first = open_or_skip("airlock-00000000000000dd", &none);
        cgroup_sweep_later(first);
        cgroup_keep(first);
        struct cgroup *again = open_or_skip("airlock-00000000000000dd", &none);
        cr_expect_eq(again, first);
        cr_expect(again->sweep_pending, "the kept layout lost its sweep");
        again->sweep_pending = false; /* no sweep of the host in a unit test */
        cgroup_free(again);

        first = open_or_skip("airlock-00000000000000dd", &none);
        cgroup_sweep_later(first);
        cgroup_keep(first);
        struct cgroup_limits io = {.io = {.write_bps = 1, .devs = {1}, .n_devs = 1}};
        struct cgroup *cg = NULL;
        struct al_error err = {0};
        if (cgroup_open("airlock-00000000000000dd", &io, &cg, &err) >= 0) {
                cr_expect(cg->sweep_pending, "a fresh look for limits.io lost the sweep");
                cg->sweep_pending = false;
                cgroup_free(cg);
        }
        cgroup_keep(NULL);
}
