/* SPDX-License-Identifier: Apache-2.0 */
/* Per-sandbox host id ranges (boundary/idrange.c): /etc/subuid parsing,
 * which uids a command may take, and the policy key "users". */
#include <criterion/criterion.h>
#include <string.h>

#include "idrange.h"
#include "policy-test-util.h"
#include "util.h"

Test(idrange, parse_subid)
{
        const char *text = "# comment\n"
                           "alice:100000:65536\n"
                           "bob:200000\n"        /* malformed: skipped */
                           "carol:x:5\n"         /* not a number */
                           "1001:300000:1024\n"  /* by number */
                           "dave:4294967295:2\n" /* past the end of ids */
                           "alice:900000:10\n";  /* the first range wins */
        uint32_t s = 0, c = 0;
        cr_assert_eq(idrange_parse_subid(text, "alice", 1000, &s, &c), 0);
        cr_assert(s == 100000 && c == 65536);
        cr_assert_eq(idrange_parse_subid(text, "erin", 1001, &s, &c), 0);
        cr_assert(s == 300000 && c == 1024);
        cr_assert_eq(idrange_parse_subid(text, "bob", 7, &s, &c), -ENOENT);
        cr_assert_eq(idrange_parse_subid(text, "carol", 7, &s, &c), -ENOENT);
        cr_assert_eq(idrange_parse_subid(text, "dave", 7, &s, &c), -ENOENT);
        cr_assert_eq(idrange_parse_subid(text, "alic", 7, &s, &c), -ENOENT);
        cr_assert_eq(idrange_parse_subid("", NULL, 7, &s, &c), -ENOENT);
}

Test(idrange, check_uid)
{
        char buf[256];
        struct policy *one = finalize_ok("{}");
        cr_assert_null(idrange_check_uid(one, -1, buf, sizeof(buf)));
        cr_assert_null(idrange_check_uid(one, 1000, buf, sizeof(buf)));
        cr_assert_not_null(idrange_check_uid(one, 0, buf, sizeof(buf)));
        cr_assert(strstr(buf, "one user") && strstr(buf, "\"users\""));
        struct policy *many = finalize_ok("{\"users\": 2048}");
        for (long u = 0; u < 2048; u += 511)
                cr_assert_null(idrange_check_uid(many, u, buf, sizeof(buf)));
        cr_assert_not_null(idrange_check_uid(many, 2048, buf, sizeof(buf)));
        cr_assert(strstr(buf, "0 to 2047"));
        cr_assert_not_null(idrange_check_uid(many, -2, buf, sizeof(buf)));
        policy_free(one);
        policy_free(many);
}

/* Refused at load or at finalize, with a message naming "users". */
static void refused(const char *json)
{
        struct policy *p = policy_new();
        struct al_error e = {0};
        int r = policy_load_string(p, json, "policy.json", &e);
        if (r == 0)
                r = policy_finalize(p, "/base", "/home/u", &e);
        cr_assert_lt(r, 0, "%s was accepted", json);
        cr_assert(strstr(e.msg, "users"), "%s: %s", json, e.msg);
        policy_free(p);
}

Test(idrange, policy_key)
{
        struct policy *p = finalize_ok("{\"users\": 65536, \"uid\": 0}");
        cr_assert_eq(p->users, 65536);
        policy_free(p);
        static const char *const bad[] = {
            "{\"users\": 1}",     "{\"users\": 1000}",
            "{\"users\": 65537}", "{\"users\": \"many\"}",
            "{\"users\": -3}",    "{\"users\": 10, \"uid\": 0, \"gid\": 20}",
            "{\"users\": 1024, \"tier\": \"gvisor\"}",
        };
        for (size_t i = 0; i < ARRAY_SIZE(bad); i++)
                refused(bad[i]);
}
