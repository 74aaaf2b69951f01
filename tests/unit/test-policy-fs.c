/* SPDX-License-Identifier: Apache-2.0 */
/* The filesystem keys added for issue 10 (workspace.allowBroad,
 * filesystem.denyWrite, filesystem.allowRead) and the limits' real minimums
 * (issue 11, item 13). */
#include <criterion/criterion.h>
#include <string.h>

#include "policy.h"
#include "policy-test-util.h"
#include "util.h"


/* Loading or finalizing fails with a message that contains `part`. */
static void fails_with(const char *json, const char *part)
{
        struct policy *p = policy_new();
        struct al_error e = {0};
        int r = policy_load_string(p, json, "policy.json", &e);
        if (r == 0)
                r = policy_finalize(p, "/base", "/home/u", &e);
        cr_assert_lt(r, 0, "%s was accepted", json);
        cr_assert(strstr(e.msg, part), "%s: message \"%s\" lacks \"%s\"", json, e.msg, part);
        policy_free(p);
}

Test(policy_fs, limits_below_what_a_sandbox_needs_name_the_field)
{
        fails_with("{\"limits\": {\"openFiles\": 1}}", "\"limits.openFiles\" must be at least 8");
        fails_with("{\"limits\": {\"openFiles\": 7}}", "\"limits.openFiles\" must be at least 8");
        fails_with("{\"limits\": {\"pids\": 1}}", "\"limits.pids\" must be at least 2");
        fails_with("{\"limits\": {\"cpus\": 0.001}}", "\"limits.cpus\" must be at least 0.01");
        fails_with("{\"limits\": {\"cpus\": 0.009}}", "\"limits.cpus\" must be at least 0.01");
        fails_with("{\"limits\": {\"memory\": 4096}}",
                   "\"limits.memory\" must be at least 1048576");
        fails_with("{\"limits\": {\"memory\": \"512K\"}}", "\"limits.memory\" must be at least");

        struct policy *p = load_ok("{\"limits\": {\"openFiles\": 8, \"pids\": 2, \"cpus\": 0.01,"
                                   " \"memory\": \"1M\", \"disk\": 1, \"fileSize\": 1}}");
        cr_assert_eq(p->limits.open_files, 8);
        cr_assert_eq(p->limits.pids, 2);
        cr_assert_eq(p->limits.cpus_milli, 10);
        cr_assert_eq(p->limits.memory, 1ULL << 20);
        policy_free(p);

        /* The flags' path names the field too. */
        p = policy_new();
        struct al_error e = {0};
        cr_assert_lt(policy_set_limit(p, "openFiles", "3", &e), 0);
        cr_assert(strstr(e.msg, "limits.openFiles"), "%s", e.msg);
        cr_assert_lt(policy_set_limit(p, "cpus", "0.001", &e), 0);
        cr_assert(strstr(e.msg, "limits.cpus"), "%s", e.msg);
        policy_free(p);
}

Test(policy_fs, allow_broad)
{
        struct policy *p = finalize_ok("{}");
        cr_assert_not(p->allow_broad, "broad workspaces are refused by default");
        char *s = policy_to_json(p);
        cr_assert_null(strstr(s, "allowBroad"), "%s", s);
        free(s);
        policy_free(p);

        p = finalize_ok("{\"workspace\": {\"allowBroad\": true}}");
        cr_assert(p->allow_broad);
        s = policy_to_json(p);
        cr_assert(strstr(s, "\"allowBroad\":true"), "%s", s);
        free(s);
        policy_free(p);

        fails_with("{\"workspace\": {\"allowBroad\": \"yes\"}}", "workspace.allowBroad");
}

Test(policy_fs, deny_write_resolved_and_written)
{
        struct policy *p = finalize_ok("{\"filesystem\": {\"denyWrite\": [\"keep.txt\", "
                                       "\"~/notes\", \"/abs/y\"]}}");
        cr_assert_eq(p->n_deny_write, 3);
        cr_assert_str_eq(p->deny_write[0], "/base/keep.txt");
        cr_assert_str_eq(p->deny_write[1], "/home/u/notes");
        cr_assert_str_eq(p->deny_write[2], "/abs/y");
        char *s = policy_to_json(p);
        cr_assert(strstr(s, "\"denyWrite\":[\"/base/keep.txt\",\"/home/u/notes\",\"/abs/y\"]"),
                  "%s", s);
        free(s);

        /* The canonical form loads back to the same policy. */
        struct policy *q = policy_new();
        struct al_error e = {0};
        s = policy_to_json(p);
        cr_assert_eq(policy_load_string(q, s, "canonical", &e), 0, "%s", e.msg);
        cr_assert_eq(policy_finalize(q, "/", "/", &e), 0, "%s", e.msg);
        char *t = policy_to_json(q);
        cr_assert_str_eq(s, t);
        free(s);
        free(t);
        policy_free(q);
        policy_free(p);

        fails_with("{\"filesystem\": {\"denyWrite\": \"x\"}}", "filesystem.denyWrite");
        fails_with("{\"filesystem\": {\"denyWrite\": [\"\"]}}", "filesystem.denyWrite");
        fails_with("{\"filesystem\": {\"denyWrite\": [7]}}", "filesystem.denyWrite");
}

Test(policy_fs, allow_read_must_lie_under_deny_read)
{
        struct policy *p = finalize_ok("{\"filesystem\": {\"denyRead\": [\"secret\"],"
                                       " \"allowRead\": [\"secret/public.txt\"]}}");
        cr_assert_eq(p->n_allow_read, 1);
        cr_assert_str_eq(p->allow_read[0], "/base/secret/public.txt");
        policy_free(p);

        fails_with("{\"filesystem\": {\"allowRead\": [\"/etc/hosts\"]}}",
                   "\"filesystem.allowRead[0]\" must lie under a filesystem.denyRead entry");
        fails_with("{\"filesystem\": {\"denyRead\": [\"/data\"], \"allowRead\": [\"/data\"]}}",
                   "must lie under a filesystem.denyRead entry");
        fails_with("{\"filesystem\": {\"denyRead\": [\"/data\"],"
                   " \"allowRead\": [\"/datax/y\"]}}",
                   "must lie under a filesystem.denyRead entry");
}

Test(policy_fs, allow_read_never_reopens_the_mandatory_list)
{
        static const char *const bad[] = {
            "{\"filesystem\": {\"denyRead\": [\"/etc\"], \"allowRead\": [\"/etc/shadow\"]}}",
            "{\"filesystem\": {\"denyRead\": [\"/etc\"], \"allowRead\": [\"/etc/gshadow\"]}}",
            "{\"filesystem\": {\"denyRead\": [\"/etc\"],"
            " \"allowRead\": [\"/etc/ssh/ssh_host_rsa_key\"]}}",
            "{\"filesystem\": {\"denyRead\": [\"~\"], \"allowRead\": [\"~/.ssh/id_rsa\"]}}",
            "{\"filesystem\": {\"denyRead\": [\"/home\"],"
            " \"allowRead\": [\"/home/bob/.aws\"]}}",
            "{\"filesystem\": {\"denyRead\": [\"/srv\"],"
            " \"allowRead\": [\"/srv/h/.config/gh/hosts.yml\"]}}",
            "{\"filesystem\": {\"denyRead\": [\"/srv\"],"
            " \"allowRead\": [\"/srv/h/.git-credentials\"]}}",
        };
        for (size_t i = 0; i < ARRAY_SIZE(bad); i++)
                fails_with(bad[i], "is on the mandatory deny list and cannot be re-allowed");

        struct policy *p = finalize_ok("{\"filesystem\": {\"denyRead\": [\"/etc\"],"
                                       " \"allowRead\": [\"/etc/ssh/ssh_config\"]}}");
        policy_free(p);
}

Test(policy_fs, unknown_filesystem_key_still_refused)
{
        fails_with("{\"filesystem\": {\"denyWrites\": []}}", "filesystem.denyWrites");
}
