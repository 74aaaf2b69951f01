/* SPDX-License-Identifier: Apache-2.0 */
#include <criterion/criterion.h>
#include <string.h>

#include "grants.h"
#include "policy.h"
#include "util.h"

/* network.parentProxySendNames lets the parent resolve names again, past
 * the gate's private-address check: through the API, as allowPrivate,
 * only with a grant that has allowHostWorkspace. */

static int check(bool send_names, bool host_rights, struct grant_policy_refusal *why)
{
        struct grant g = {.name = "g", .allow_sandbox = true, .allow_host_workspace = host_rights};
        struct al_error err = {0};
        char *json = xasprintf("{\"network\": {\"allow\": [\"h.test\"], \"parentProxy\": "
                               "\"http://192.0.2.1:3128\", \"parentProxySendNames\": %s}}",
                               send_names ? "true" : "false");
        struct policy *p = policy_new();
        cr_assert_eq(policy_load_string(p, json, "test", &err), 0, "%s", err.msg);
        int r = grant_check_policy(&g, p, why);
        policy_free(p);
        free(json);
        return r;
}

Test(grants_parent_names, needs_host_rights)
{
        struct grant_policy_refusal why = {0};
        cr_expect_eq(check(false, false, &why), 0);
        cr_assert_eq(check(true, false, &why), -EPERM);
        cr_expect_str_eq(why.limit, "allowHostWorkspace");
        cr_expect(strstr(why.message, "parentProxySendNames") != NULL, "%s", why.message);
        cr_expect_eq(check(true, true, &why), 0);
}
