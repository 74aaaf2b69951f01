/* SPDX-License-Identifier: Apache-2.0 */
#include <criterion/criterion.h>
#include <string.h>

#include "env.h"
#include "policy.h"
#include "util.h"

/* A sandbox with the tool gateway's endpoint: its environment names the
 * socket and the run id, and finds airlock-tool on PATH. */

static const char *get(char **v, const char *key)
{
        size_t n = strlen(key);
        const char *found = NULL;
        for (; v && *v; v++)
                if (strncmp(*v, key, n) == 0 && (*v)[n] == '=') {
                        cr_assert_null(found, "%s set twice", key);
                        found = *v + n + 1;
                }
        return found;
}

Test(env_tool, names_the_endpoint)
{
        struct policy *p = policy_new();
        struct al_error err = {0};
        char **v = NULL;
        cr_assert_eq(env_build(p, "/home/agent", "agent", NULL, &v, &err), 0, "%s", err.msg);
        cr_assert_null(get(v, "AIRLOCK_TOOL_SOCKET"));
        cr_assert_null(get(v, "AIRLOCK_RUN_ID"));
        env_add_tool(&v, "0123456789abcdef0123456789abcdef");
        cr_assert_str_eq(get(v, "AIRLOCK_TOOL_SOCKET"), "/run/airlock/tool.sock");
        cr_assert_str_eq(get(v, "AIRLOCK_RUN_ID"), "0123456789abcdef0123456789abcdef");
        const char *path = get(v, "PATH");
        cr_assert(path && strlen(path) > 16);
        cr_assert_str_eq(path + strlen(path) - 17, ":/run/airlock/bin");
        strv_free(v);
        policy_free(p);
}

Test(env_tool, overrides_the_policy)
{
        struct policy *p = policy_new();
        struct al_error err = {0};
        char **v = NULL;
        policy_add_env(p, "AIRLOCK_RUN_ID", "forged");
        policy_add_env(p, "PATH", "/opt/bin");
        cr_assert_eq(env_build(p, "/home/agent", "agent", NULL, &v, &err), 0, "%s", err.msg);
        env_add_tool(&v, "fedcba9876543210fedcba9876543210");
        cr_assert_str_eq(get(v, "AIRLOCK_RUN_ID"), "fedcba9876543210fedcba9876543210");
        cr_assert_str_eq(get(v, "PATH"), "/opt/bin:/run/airlock/bin");
        strv_free(v);
        policy_free(p);
}
