/* SPDX-License-Identifier: Apache-2.0 */
#include <criterion/criterion.h>
#include <string.h>

#include "grants.h"
#include "policy.h"
#include "util.h"

/* What a policy given through the API may name under a grant. */

static struct policy *load(const char *json)
{
        struct policy *p = policy_new();
        struct al_error err = {0};
        cr_assert_eq(policy_load_string(p, json, "test", &err), 0, "%s: %s", json, err.msg);
        return p;
}

static struct grant make(const char *const *secrets, bool host)
{
        struct grant g = {.name = "g", .allow_sandbox = true, .allow_host_workspace = host};
        struct al_error err = {0};
        for (size_t i = 0; secrets && secrets[i]; i++)
                cr_assert_eq(grant_add_secret(&g.secrets, &g.n_secrets, secrets[i], &err), 0, "%s",
                             err.msg);
        return g;
}

static const char *check(const struct grant *g, const char *json, const char **ret_limit)
{
        static struct grant_policy_refusal why;
        struct policy *p = load(json);
        int r = grant_check_policy(g, p, &why);
        policy_free(p);
        if (r == 0)
                return NULL;
        cr_assert_eq(r, -EPERM);
        *ret_limit = why.limit;
        return why.message;
}

#define ROUTE(v)                                                                                   \
        "{\"network\": {\"routes\": [{\"name\": \"r\", \"upstream\": \"http://127.0.0.1:9\", "     \
        "\"inject\": {\"x-api-key\": \"" v "\"}}]}}"

Test(grants_policy, secrets_only_as_named)
{
        static const char *const named[] = {"API_KEY", NULL};
        struct grant g = make(named, false);
        const char *limit = NULL, *m;

        cr_expect_null(check(&g, ROUTE("${secret:API_KEY}"), &limit));
        cr_expect_null(check(&g, ROUTE("sb=${sandbox.id} ${account}"), &limit));
        cr_expect_null(check(&g, "{}", &limit));

        m = check(&g, ROUTE("Bearer ${secret:OTHER}"), &limit);
        cr_assert_not_null(m);
        cr_expect_str_eq(limit, "secrets");
        cr_expect(strstr(m, "${secret:OTHER}") && strstr(m, "--secret OTHER"), "%s", m);

        /* A longer name that starts with a granted one is another name. */
        m = check(&g, ROUTE("${secret:API_KEY_2}"), &limit);
        cr_expect_not_null(m);
        char long_name[400];
        memset(long_name, 'A', sizeof(long_name) - 1);
        long_name[sizeof(long_name) - 1] = '\0';
        char *json = xasprintf(ROUTE("${secret:%s}"), long_name);
        static const char *const longs[] = {NULL};
        struct grant none = make(longs, false);
        cr_expect_not_null(check(&none, json, &limit));
        free(json);

        for (const char *const *n = (const char *const[]){"GIT_TOKEN", "GIT_USERNAME", NULL}; *n;
             n++) {
                json = xasprintf(ROUTE("x ${secret:%s}"), *n);
                m = check(&g, json, &limit);
                cr_assert_not_null(m, "%s", *n);
                cr_expect_str_eq(limit, "secrets");
                cr_expect(strstr(m, "git credential"), "%s", m);
                free(json);
        }
        strv_free(g.secrets);
}

Test(grants_policy, git_credentials_cannot_be_granted)
{
        char **v = NULL;
        size_t n = 0;
        struct al_error err = {0};
        cr_expect_lt(grant_add_secret(&v, &n, "GIT_TOKEN", &err), 0);
        cr_expect(strstr(err.msg, "git credential"), "%s", err.msg);
        cr_expect_lt(grant_add_secret(&v, &n, "9X", &err), 0);
        cr_expect_lt(grant_add_secret(&v, &n, "", &err), 0);
        cr_expect_eq(grant_add_secret(&v, &n, "A_1", &err), 0);
        cr_expect_lt(grant_add_secret(&v, &n, "A_1", &err), 0);
        cr_expect_eq(n, 1);
        struct grant g = {.name = "g", .secrets = v, .n_secrets = n};
        char *csv = grant_secrets_string(&g);
        cr_expect_str_eq(csv, "A_1");
        char **back = NULL;
        size_t nb = 0;
        cr_expect_eq(grant_parse_secrets(csv, &back, &nb, &err), 0);
        cr_expect_eq(nb, 1);
        cr_expect_str_eq(back[0], "A_1");
        cr_expect_lt(grant_parse_secrets("A,GIT_TOKEN", &back, &nb, &err), 0);
        free(csv);
        strv_free(back);
        strv_free(v);
}

Test(grants_policy, host_paths_need_allow_host_workspace)
{
        struct grant g = make(NULL, false), host = make(NULL, true);
        static const char *const pols[] = {
            "{\"network\": {\"routes\": [{\"name\": \"r\", \"upstream\": \"https://x.test\", "
            "\"caFile\": \"/etc/shadow\"}]}}",
            "{\"filesystem\": {\"denyRead\": [\"/root/.ssh\"]}}",
            "{\"filesystem\": {\"mounts\": [{\"source\": \"/etc\", \"target\": \"/x\"}]}}",
            "{\"filesystem\": {\"read\": \"host\"}}",
            "{\"filesystem\": {\"denyWrite\": [\"/srv/x\"]}}",
            "{\"filesystem\": {\"denyRead\": [\"/srv\"], \"allowRead\": [\"/srv/x\"]}}",
            "{\"workspace\": {\"allowBroad\": true}}",
            "{\"workspace\": {\"path\": \"/srv\"}}",
        };
        for (size_t i = 0; i < ARRAY_SIZE(pols); i++) {
                const char *limit = NULL;
                const char *m = check(&g, pols[i], &limit);
                cr_expect_not_null(m, "%s", pols[i]);
                if (m)
                        cr_expect_str_eq(limit, "allowHostWorkspace");
                cr_expect_null(check(&host, pols[i], &limit), "%s", pols[i]);
        }
}
