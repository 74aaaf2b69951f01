/* SPDX-License-Identifier: Apache-2.0 */
#pragma once

/* The gitguard tests' start of a run (gitguard-test-util.h includes it). */

#include <criterion/criterion.h>
#include <stdio.h>
#include <unistd.h>

#include "gitguard.h"
#include "policy.h"

/* The guard's start for a read-write workspace at root. */
static inline struct gitguard *gg_begin_now(const char *root)
{
        struct policy *p = policy_new();
        struct al_error e = {0};
        char json[512];
        snprintf(json, sizeof(json), "{\"workspace\": {\"path\": \"%s\", \"mode\": \"rw\"}}", root);
        cr_assert_eq(policy_load_string(p, json, "policy.json", &e), 0, "%s", e.msg);
        cr_assert_eq(policy_finalize(p, "/", "/root", &e), 0, "%s", e.msg);
        struct gitguard *g = gitguard_begin(p);
        cr_assert_not_null(g);
        policy_free(p);
        return g;
}

/* The same past the file system's clock tick: what was written in the
 * tick the run starts in counts as the run's. */
static inline struct gitguard *gg_begin_at(const char *root)
{
        usleep(30 * 1000);
        return gg_begin_now(root);
}
