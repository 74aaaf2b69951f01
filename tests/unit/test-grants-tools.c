/* SPDX-License-Identifier: Apache-2.0 */
#include <criterion/criterion.h>
#include <errno.h>
#include <string.h>

#include "grants.h"
#include "policy.h"
#include "util.h"

/* A grant names the host tools its sandboxes may be given; an API policy's
 * tools.allow may name no other. */

static struct policy *load(const char *json)
{
        struct policy *p = policy_new();
        struct al_error err = {0};
        cr_assert_eq(policy_load_string(p, json, "test", &err), 0, "%s: %s", json, err.msg);
        return p;
}

Test(grants_tools, names_are_checked)
{
        char **v = NULL;
        size_t n = 0;
        struct al_error err = {0};
        cr_assert_eq(grant_add_tool(&v, &n, "core.time", &err), 0);
        cr_assert_eq(grant_add_tool(&v, &n, "forge.prs_list-2", &err), 0);
        static const char *const bad[] = {
            "",     "-x",
            ".x",   "a,b",
            "a b",  "a/b",
            "${x}", "aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa"};
        for (size_t i = 0; i < ARRAY_SIZE(bad); i++)
                cr_assert_lt(grant_add_tool(&v, &n, bad[i], &err), 0, "%s", bad[i]);
        cr_assert_lt(grant_add_tool(&v, &n, "core.time", &err), 0);
        cr_assert(strstr(err.msg, "twice"));
        cr_assert_eq(n, 2);
        strv_free(v);
}

Test(grants_tools, round_trip)
{
        struct grant g = {.name = "g"};
        struct al_error err = {0};
        cr_assert_eq(grant_add_tool(&g.tools, &g.n_tools, "core.time", &err), 0);
        cr_assert_eq(grant_add_tool(&g.tools, &g.n_tools, "forge.prs", &err), 0);
        char *s = grant_tools_string(&g);
        cr_assert_str_eq(s, "core.time,forge.prs");
        char **v = NULL;
        size_t n = 0;
        cr_assert_eq(grant_parse_tools(s, &v, &n, &err), 0);
        cr_assert_eq(n, 2);
        cr_assert_str_eq(v[1], "forge.prs");
        free(s);
        strv_free(v);
        strv_free(g.tools);
}

Test(grants_tools, policy_may_allow_only_granted_tools)
{
        struct grant g = {.name = "g", .allow_sandbox = true};
        struct grant_policy_refusal why;
        struct al_error err = {0};
        struct policy *p = load("{\"tools\": {\"allow\": [\"core.time\"]}}");
        cr_assert_eq(grant_check_policy(&g, p, &why), -EPERM);
        cr_assert_str_eq(why.limit, "tools");
        cr_assert(strstr(why.message, "\"core.time\"") && strstr(why.message, "--tool core.time"),
                  "%s", why.message);
        cr_assert_eq(grant_add_tool(&g.tools, &g.n_tools, "core.time", &err), 0);
        cr_assert_eq(grant_check_policy(&g, p, &why), 0);
        policy_free(p);
        p = load("{}");
        cr_assert_eq(grant_check_policy(&g, p, &why), 0);
        policy_free(p);
        strv_free(g.tools);
}
