/* SPDX-License-Identifier: Apache-2.0 */
/* The tool calls a supervisor keeps as under way (supervisor/opencalls.c):
 * what whoever sees it die reads back, one closing tool.call per call
 * started and not ended, and a file that is not what the supervisor writes
 * refused rather than half read. */
#include <criterion/criterion.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "audit.h"
#include "opencalls.h"
#include "util.h"

static char dir[] = "/tmp/opencalls-XXXXXX";

static void setup(void)
{
        cr_assert_not_null(mkdtemp(dir));
}

static void teardown(void)
{
        char path[256];
        snprintf(path, sizeof(path), "%s/%s", dir, OPEN_CALLS_FILE);
        unlink(path);
        rmdir(dir);
}

static void put(const char *text)
{
        char path[256];
        snprintf(path, sizeof(path), "%s/%s", dir, OPEN_CALLS_FILE);
        FILE *f = fopen(path, "we");
        cr_assert_not_null(f);
        fputs(text, f);
        fclose(f);
}

TestSuite(opencalls, .init = setup, .fini = teardown);

Test(opencalls, started_and_not_ended_are_closed)
{
        struct open_calls *oc = open_calls_new(dir);
        cr_assert_not_null(oc);
        cr_assert_eq(open_calls_start(oc, 1, "c1", "t.slow", "d1", "tools.allow", 1000), 0);
        cr_assert_eq(open_calls_start(oc, 2, "c2", "t.fast", "d2", "tools.allow", 2000), 0);
        cr_assert_eq(open_calls_start(oc, 3, "c1", "t.slow", "d3", "tools.allow", 3000), 0);
        open_calls_end(oc, 2);
        open_calls_end(oc, 1);
        open_calls_end(oc, 0);
        open_calls_end(oc, 99);
        json_t *calls = NULL;
        cr_assert_eq(open_calls_closing(dir, NULL, NULL, 5000, "test", &calls), 0);
        cr_assert_eq(json_array_size(calls), 1);
        json_t *f = json_array_get(calls, 0);
        cr_assert_str_eq(json_string_value(json_object_get(f, "callId")), "c1");
        cr_assert_str_eq(json_string_value(json_object_get(f, "argsDigest")), "d3");
        cr_assert_str_eq(json_string_value(json_object_get(f, "errorCode")), "supervisor_died");
        cr_assert_str_eq(json_string_value(json_object_get(f, "decision")), "allow");
        cr_assert_eq(json_integer_value(json_object_get(f, "durationMs")), 2000);
        cr_assert_str_eq(json_string_value(json_object_get(f, "closedBy")), "test");
        json_decref(calls);
        open_calls_end(oc, 3);
        /* None under way: no file, nothing to close. */
        cr_assert_eq(open_calls_closing(dir, NULL, NULL, 5000, "test", &calls), 0);
        cr_assert_eq(json_array_size(calls), 0);
        json_decref(calls);
        open_calls_free(oc);
}

Test(opencalls, no_directory_is_no_call)
{
        json_t *calls = NULL;
        cr_assert_eq(open_calls_closing("/nonexistent/opencalls", NULL, NULL, 1, "test", &calls), 0);
        cr_assert_eq(json_array_size(calls), 0);
        json_decref(calls);
}

Test(opencalls, a_file_not_ours_is_refused)
{
        json_t *calls = NULL;
        put("{\"callId\": \"x\"}");
        cr_assert_eq(open_calls_closing(dir, NULL, NULL, 1, "test", &calls), -EINVAL);
        cr_assert_null(calls);
        put("[{\"callId\": 5, \"tool\": \"t\", \"startedMs\": 1}]");
        cr_assert_eq(open_calls_closing(dir, NULL, NULL, 1, "test", &calls), -EINVAL);
        put("[{\"callId\": \"a\", \"tool\": \"t\", \"startedMs\": -1}]");
        cr_assert_eq(open_calls_closing(dir, NULL, NULL, 1, "test", &calls), -EINVAL);
        put("[{\"callId\": \"a\", \"tool\": \"t\", \"startedMs\": 1}");
        cr_assert_eq(open_calls_closing(dir, NULL, NULL, 1, "test", &calls), -EINVAL);
}

Test(opencalls, a_link_is_not_followed)
{
        char path[256];
        snprintf(path, sizeof(path), "%s/%s", dir, OPEN_CALLS_FILE);
        cr_assert_eq(symlink("/etc/passwd", path), 0);
        json_t *calls = NULL;
        cr_assert_lt(open_calls_closing(dir, NULL, NULL, 1, "test", &calls), 0);
        cr_assert_null(calls);
}

/* An `airlock run` keeps its calls in a directory made at the first call
 * only: a run without calls writes nothing; the calls a run left are read
 * back from it, and removing it takes what is in it. */
Test(opencalls, lazy_directory_is_made_at_the_first_call)
{
        char lazy[300];
        snprintf(lazy, sizeof(lazy), "%s/run.calls", dir);
        struct open_calls *oc = open_calls_new_lazy(lazy);
        cr_assert_not_null(oc);
        open_calls_end(oc, 7); /* nothing under way: nothing made */
        struct stat st;
        cr_assert_eq(stat(lazy, &st), -1);
        cr_assert_eq(open_calls_start(oc, 1, "c1", "t.slow", "sha256:x", "allow", 1000), 0);
        cr_assert_eq(stat(lazy, &st), 0);
        cr_assert_eq(st.st_mode & 07777, 0700);
        json_t *calls = NULL;
        cr_assert_eq(open_calls_closing(lazy, NULL, NULL, 1500, "airlock", &calls), 0);
        cr_assert_eq(json_array_size(calls), 1);
        json_t *c = json_array_get(calls, 0);
        cr_assert_str_eq(json_string_value(json_object_get(c, "closedBy")), "airlock");
        cr_assert_eq(json_integer_value(json_object_get(c, "durationMs")), 500);
        json_decref(calls);
        open_calls_free(oc);
        cr_assert_eq(open_calls_remove(lazy), 0);
        cr_assert_eq(stat(lazy, &st), -1);
        cr_assert_eq(open_calls_remove(lazy), 0); /* gone already */
}

/* A supervisor killed after a call's tool.call line and before the file's
 * rewrite: the call is marked as ending, its line (of its callSeq) is on
 * the log, and the sweep writes no second end. One killed before the line
 * gets its end from the sweep, as does one never marked. Before, every
 * call left in the file was closed again: two ends for the first. */
Test(opencalls, a_call_whose_end_is_on_the_log_is_not_closed_again)
{
        char log[300];
        snprintf(log, sizeof(log), "%s/audit.jsonl", dir);
        struct al_error err = {0};
        struct audit *a = NULL;
        cr_assert_eq(audit_open(log, NULL, &a, &err), 0, "%s", err.msg);
        /* Another sandbox's end of the same callSeq does not count. */
        json_t *other = json_pack("{s:s, s:I}", "tool", "t.slow", "callSeq", (json_int_t)1);
        cr_assert_eq(audit_append(a, "0000000000000002", "tool.call", other, &err), 0);
        json_decref(other);

        struct open_calls *oc = open_calls_new(dir);
        cr_assert_not_null(oc);
        cr_assert_eq(open_calls_start(oc, 1, "c1", "t.slow", "d1", "tools.allow", 1000), 0);
        cr_assert_eq(open_calls_start(oc, 2, "c2", "t.slow", "d2", "tools.allow", 1000), 0);
        cr_assert_eq(open_calls_start(oc, 3, "c3", "t.slow", "d3", "tools.allow", 1000), 0);
        /* Call 1: marked, its line written, killed before the rewrite. */
        open_calls_ending(oc, 1);
        json_t *end = json_pack("{s:s, s:s, s:I}", "callId", "c1", "tool", "t.slow", "callSeq",
                                (json_int_t)1);
        cr_assert_eq(audit_append(a, "0000000000000001", "tool.call", end, &err), 0);
        json_decref(end);
        /* Call 2: marked, killed before its line. Call 3: running. */
        open_calls_ending(oc, 2);
        cr_assert_eq(audit_flush(a), 0);
        audit_close(a);
        open_calls_free(oc); /* killed: no end */

        json_t *calls = NULL;
        cr_assert_eq(open_calls_closing(dir, log, "0000000000000001", 5000, "test", &calls), 0);
        cr_assert_eq(json_array_size(calls), 2, "%zu closing lines", json_array_size(calls));
        cr_assert_str_eq(json_string_value(json_object_get(json_array_get(calls, 0), "callId")),
                         "c2");
        cr_assert_eq(json_integer_value(json_object_get(json_array_get(calls, 0), "callSeq")), 2);
        cr_assert_str_eq(json_string_value(json_object_get(json_array_get(calls, 1), "callId")),
                         "c3");
        json_decref(calls);
        unlink(log);
}
