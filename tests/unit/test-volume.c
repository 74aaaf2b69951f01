/* SPDX-License-Identifier: Apache-2.0 */
/* Volume names, and volumes in a policy's mounts. */
#include <criterion/criterion.h>
#include <string.h>

#include "policy-test-util.h"
#include "util.h"
#include "volume.h"

Test(volume, names)
{
        static const char *const good[] = {
            "a", "agent-home", "x_1.2", "0abc",
            "aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa"};
        for (size_t i = 0; i < ARRAY_SIZE(good); i++)
                cr_assert_null(volume_name_check(good[i]), "%s", good[i]);
        static const char *const bad[] = {
            "",     ".",   "..",
            "../x", "a/b", "-a",
            "_a",   "A",   "a b",
            "a\nb", "é",   ".hid",
            "a\\b", "a:b", "aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa"};
        for (size_t i = 0; i < ARRAY_SIZE(bad); i++)
                cr_assert_not_null(volume_name_check(bad[i]), "%s", bad[i]);
        cr_assert_not_null(volume_name_check(NULL));
}

Test(volume, policy_mounts)
{
        struct policy *p = finalize_ok("{\"filesystem\": {\"mounts\": ["
                                       "{\"volume\": \"home-1\", \"target\": \"/data\", "
                                       "\"readonly\": false},"
                                       "{\"source\": \"rel\", \"target\": \"/r\"}]}}");
        cr_assert_eq(p->n_mounts, 2);
        cr_assert_str_eq(p->mounts[0].volume, "home-1");
        cr_assert_null(p->mounts[0].source, "a volume has no host path, nor is one made up");
        cr_assert_str_eq(p->mounts[1].source, "/base/rel");
        cr_assert_eq(policy_host_mounts(p), 1);
        /* Round trip: what the daemon hands its supervisors. */
        char *json = policy_to_json(p);
        cr_assert(strstr(json, "\"volume\": \"home-1\"") || strstr(json, "\"volume\":\"home-1\""),
                  "%s", json);
        struct policy *q = finalize_ok(json);
        cr_assert_str_eq(q->mounts[0].volume, "home-1");
        cr_assert_eq(q->mounts[0].readonly, false);
        policy_free(q);
        free(json);
        policy_free(p);
}

Test(volume, policy_refusals)
{
        static const char *const docs[][2] = {
            {"{\"filesystem\": {\"mounts\": [{\"volume\": \"../x\", \"target\": \"/d\"}]}}",
             "filesystem.mounts[0].volume"},
            {"{\"filesystem\": {\"mounts\": [{\"volume\": \"v\", \"source\": \"/s\", "
             "\"target\": \"/d\"}]}}",
             "exclude each other"},
            {"{\"filesystem\": {\"mounts\": [{\"volume\": \"v\", \"target\": \"/proc/x\"}]}}",
             "filesystem.mounts[0].target"},
            {"{\"filesystem\": {\"mounts\": [{\"volume\": \"v\"}]}}", "target\" is required"},
        };
        for (size_t i = 0; i < ARRAY_SIZE(docs); i++) {
                struct policy *p = policy_new();
                struct al_error e = {0};
                int r = policy_load_string(p, docs[i][0], "policy.json", &e);
                if (r >= 0)
                        r = policy_finalize(p, "/base", "/home/u", &e);
                cr_assert_lt(r, 0, "%s", docs[i][0]);
                cr_assert(strstr(e.msg, docs[i][1]), "%s: %s", docs[i][0], e.msg);
                policy_free(p);
        }
}
