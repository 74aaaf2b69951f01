/* SPDX-License-Identifier: Apache-2.0 */
#pragma once

/* What the policy tests share: a document that must load (and finalize)
 * cleanly, against the same base directory and home. */

#include <criterion/criterion.h>

#include "policy.h"

static inline struct policy *load_ok(const char *json)
{
        struct policy *p = policy_new();
        struct al_error e = {0};
        int r = policy_load_string(p, json, "policy.json", &e);
        cr_assert_eq(r, 0, "loading %s: %d %s", json, r, e.msg);
        return p;
}

static inline struct policy *finalize_ok(const char *json)
{
        struct policy *p = load_ok(json);
        struct al_error e = {0};
        int r = policy_finalize(p, "/base", "/home/u", &e);
        cr_assert_eq(r, 0, "finalizing %s: %d %s", json, r, e.msg);
        return p;
}
