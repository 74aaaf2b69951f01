/* SPDX-License-Identifier: Apache-2.0 */
#include <criterion/criterion.h>

#include "audit.h"
#include "paths.h"
#include "review.h"
#include "util.h"

TestSuite(paths, .timeout = 10);

static void is(char *got, const char *want)
{
        if (!want)
                cr_assert_null(got, "%s", got);
        else {
                cr_assert_not_null(got);
                cr_assert_str_eq(got, want);
        }
        free(got);
}

Test(paths, root_uses_the_system_directories)
{
        is(paths_state_root(0, NULL), "/var/lib/airlock");
        is(paths_daemon_state_dir(0, "/root"), "/var/lib/airlock/daemon");
        is(paths_audit_log(0, NULL), "/var/lib/airlock/audit/audit.jsonl");
        is(paths_daemon_socket(0, NULL), "/run/airlock/airlockd.sock");
        is(paths_sandbox_run_dir(0, "/run/user/0"), "/run/airlock/sandboxes");
}

Test(paths, users_use_home_and_xdg_runtime_dir)
{
        is(paths_state_root(1000, "/home/bob/"), "/home/bob/.local/state/airlock");
        is(paths_daemon_state_dir(1000, "/home/bob"), "/home/bob/.local/state/airlock/daemon");
        is(paths_audit_log(1000, "/home/bob"), "/home/bob/.local/state/airlock/audit/audit.jsonl");
        is(paths_daemon_socket(1000, "/run/user/1000"), "/run/user/1000/airlock/airlockd.sock");
        is(paths_sandbox_run_dir(1000, "/run/user/1000"), "/run/user/1000/airlock/sandboxes");
        is(paths_state_root(1000, NULL), NULL);
        is(paths_state_root(1000, "relative"), NULL);
        is(paths_daemon_socket(1000, NULL), NULL);
        is(paths_sandbox_run_dir(1000, "run"), NULL);
        /* The library's callers agree. */
        is(review_state_root(1000, "/home/bob"), "/home/bob/.local/state/airlock");
        is(audit_default_path(1000, "/home/bob"),
           "/home/bob/.local/state/airlock/audit/audit.jsonl");
}
