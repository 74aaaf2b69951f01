/* SPDX-License-Identifier: Apache-2.0 */
#include <criterion/criterion.h>
#include <fcntl.h>
#include <jansson.h>
#include <string.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <unistd.h>

#include "audit.h"
#include "orphans.h"
#include "util.h"

/* The sweep against records written by hand in a scratch state root; the
 * cgroup side is covered for real by tests/faults/test_run_kill.py. */

static char root[64];
static char runs[128], audit_path[128];
static const char *const ID = "0123456789abcdef";

static void setup(void)
{
        snprintf(root, sizeof(root), "/tmp/airlock-test-orphans-XXXXXX");
        cr_assert_not_null(mkdtemp(root));
        snprintf(runs, sizeof(runs), "%s/runs", root);
        snprintf(audit_path, sizeof(audit_path), "%s/audit.jsonl", root);
        cr_assert_eq(mkdir(runs, 0700), 0);
}

static void teardown(void)
{
        _cleanup_free_ char *cmd = xasprintf("rm -rf '%s'", root);
        cr_assert_eq(system(cmd), 0);
}

static void write_record(const char *owner, const char *cgroups_json)
{
        _cleanup_free_ char *path = xasprintf("%s/%s", runs, ID);
        _cleanup_free_ char *json =
            xasprintf("{\"sandbox\":\"%s\",\"owner\":\"%s\",\"pid\":999999,\"startedUs\":1,"
                      "\"audit\":\"%s\",\"cgroups\":%s}",
                      ID, owner, audit_path, cgroups_json);
        _cleanup_close_ int fd = open(path, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0600);
        cr_assert_geq(fd, 0);
        cr_assert_eq(write_full(fd, json, strlen(json)), 0);
}

static bool record_exists(void)
{
        _cleanup_free_ char *path = xasprintf("%s/%s", runs, ID);
        return access(path, F_OK) == 0;
}

/* How many sandbox.destroyed lines for ID, and the reason of the last. */
static int ends(char *reason, size_t len)
{
        _cleanup_free_ char *s = NULL;
        int n = 0;
        if (read_file_at(AT_FDCWD, audit_path, 1 << 20, &s, NULL) < 0)
                return 0;
        char *save = NULL;
        for (char *line = strtok_r(s, "\n", &save); line; line = strtok_r(NULL, "\n", &save)) {
                json_t *o = json_loads(line, 0, NULL);
                cr_assert_not_null(o, "bad audit line: %s", line);
                if (STREQ(json_string_value(json_object_get(o, "kind")), "sandbox.destroyed") &&
                    STREQ(json_string_value(json_object_get(o, "sandbox")), ID)) {
                        n++;
                        const char *r = json_string_value(json_object_get(o, "reason"));
                        if (reason)
                                snprintf(reason, len, "%s", r ? r : "");
                }
                json_decref(o);
        }
        return n;
}

TestSuite(orphans, .init = setup, .fini = teardown);

Test(orphans, finishes_a_run_nobody_holds_once)
{
        struct al_error err = {0};
        char reason[64] = "";
        write_record("run", "[]");
        cr_assert_eq(orphans_sweep(root, &err), 1, "%s", err.msg);
        cr_assert_eq(ends(reason, sizeof(reason)), 1);
        cr_assert_str_eq(reason, "owner_died");
        cr_assert(!record_exists());
        cr_assert_eq(orphans_sweep(root, &err), 0, "%s", err.msg);
        cr_assert_eq(ends(NULL, 0), 1);
}

Test(orphans, leaves_a_live_run_alone)
{
        struct al_error err = {0};
        write_record("run", "[]");
        _cleanup_free_ char *path = xasprintf("%s/%s", runs, ID);
        _cleanup_close_ int fd = open(path, O_RDONLY | O_CLOEXEC);
        cr_assert_geq(fd, 0);
        cr_assert_eq(flock(fd, LOCK_EX), 0); /* the owner, alive */
        cr_assert_eq(orphans_sweep(root, &err), 0, "%s", err.msg);
        cr_assert(record_exists());
        cr_assert_eq(ends(NULL, 0), 0);
}

Test(orphans, end_already_recorded_is_not_repeated)
{
        struct al_error err = {0};
        struct audit *a = NULL;
        cr_assert_eq(audit_open(audit_path, NULL, &a, &err), 0, "%s", err.msg);
        json_t *f = json_pack("{s:i}", "durationMs", 5);
        cr_assert_eq(audit_append(a, ID, "sandbox.destroyed", f, &err), 0, "%s", err.msg);
        json_decref(f);
        audit_close(a);
        write_record("run", "[]");
        cr_assert_eq(orphans_sweep(root, &err), 1, "%s", err.msg);
        cr_assert_eq(ends(NULL, 0), 1);
        cr_assert(!record_exists());
}

Test(orphans, supervise_end_is_the_daemons)
{
        struct al_error err = {0};
        write_record("supervise", "[]");
        cr_assert_eq(orphans_sweep(root, &err), 1, "%s", err.msg);
        cr_assert_eq(ends(NULL, 0), 0);
        cr_assert(!record_exists());
}

/* A record names directories to kill in and remove: only sandbox leaves
 * beneath /sys/fs/cgroup, never anything else. */
Test(orphans, touches_only_sandbox_cgroups)
{
        struct al_error err = {0};
        _cleanup_free_ char *victim = xasprintf("%s/airlock-%s", root, ID);
        cr_assert_eq(mkdir(victim, 0755), 0);
        _cleanup_free_ char *list =
            xasprintf("[\"%s\", \"/sys/fs/cgroup/../../%s\", \"/sys/fs/cgroup/pids/not-airlock\"]",
                      victim, victim);
        write_record("run", list);
        cr_assert_lt(orphans_sweep(root, &err), 0);
        cr_assert(strstr(err.msg, ID), "%s", err.msg);
        struct stat st;
        cr_assert_eq(stat(victim, &st), 0, "the sweep removed a directory outside /sys/fs/cgroup");
        cr_assert(record_exists(), "a run that could not be finished must keep its record");
        cr_assert_eq(ends(NULL, 0), 0);
}

Test(orphans, no_state_root_is_no_run)
{
        struct al_error err = {0};
        _cleanup_free_ char *missing = xasprintf("%s/none", root);
        cr_assert_eq(orphans_sweep(missing, &err), 0, "%s", err.msg);
        cr_assert_eq(orphans_sweep(NULL, &err), 0);
}

/* A calls file beside the record that is not what the supervisor writes
 * does not keep the run's own end off the log: the run is ended without
 * it, once, and what it left is removed. */
Test(orphans, an_unreadable_calls_file_does_not_hold_the_end)
{
        struct al_error err = {0};
        char reason[64] = "";
        write_record("run", "[]");
        _cleanup_free_ char *calls = xasprintf("%s/%s.calls", runs, ID);
        cr_assert_eq(mkdir(calls, 0700), 0);
        _cleanup_free_ char *file = xasprintf("%s/tool-calls.json", calls);
        _cleanup_close_ int fd = open(file, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0600);
        cr_assert_geq(fd, 0);
        cr_assert_eq(write_full(fd, "{not json", 9), 0);
        cr_assert_eq(orphans_sweep(root, &err), 1, "%s", err.msg);
        cr_assert_eq(ends(reason, sizeof(reason)), 1);
        cr_assert_str_eq(reason, "owner_died");
        cr_assert(!record_exists());
        cr_assert_neq(access(calls, F_OK), 0, "the calls directory stayed");
}
