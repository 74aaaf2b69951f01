/* SPDX-License-Identifier: Apache-2.0 */
#include <criterion/criterion.h>
#include <string.h>

#include "grants.h"
#include "policy.h"
#include "util.h"

/* A sentinel sends a secret to the hosts it lists: through the API, only
 * the secrets the grant names. */

static int check(const char *secret, const char *const *named, struct grant_policy_refusal *why)
{
        struct grant g = {.name = "g", .allow_sandbox = true};
        struct al_error err = {0};
        for (size_t i = 0; named && named[i]; i++)
                cr_assert_eq(grant_add_secret(&g.secrets, &g.n_secrets, named[i], &err), 0);
        char *json = xasprintf("{\"network\": {\"allow\": [\"h.test\"], \"sentinels\": [{\"env\": "
                               "\"T\", \"secret\": \"%s\", \"hosts\": [\"h.test\"]}]}}",
                               secret);
        struct policy *p = policy_new();
        cr_assert_eq(policy_load_string(p, json, "test", &err), 0, "%s", err.msg);
        int r = grant_check_policy(&g, p, why);
        policy_free(p);
        free(json);
        strv_free(g.secrets);
        return r;
}

Test(grants_sentinels, only_named_secrets)
{
        static const char *const named[] = {"GH_TOKEN", NULL};
        struct grant_policy_refusal why = {0};
        cr_expect_eq(check("GH_TOKEN", named, &why), 0);
        cr_assert_eq(check("OTHER", named, &why), -EPERM);
        cr_expect_str_eq(why.limit, "secrets");
        cr_expect(strstr(why.message, "OTHER") && strstr(why.message, "--secret OTHER"), "%s",
                  why.message);
        cr_assert_eq(check("OTHER", NULL, &why), -EPERM);
}
