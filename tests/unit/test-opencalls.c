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
        cr_assert_eq(open_calls_closing(dir, 5000, "test", &calls), 0);
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
        cr_assert_eq(open_calls_closing(dir, 5000, "test", &calls), 0);
        cr_assert_eq(json_array_size(calls), 0);
        json_decref(calls);
        open_calls_free(oc);
}

Test(opencalls, no_directory_is_no_call)
{
        json_t *calls = NULL;
        cr_assert_eq(open_calls_closing("/nonexistent/opencalls", 1, "test", &calls), 0);
        cr_assert_eq(json_array_size(calls), 0);
        json_decref(calls);
}

Test(opencalls, a_file_not_ours_is_refused)
{
        json_t *calls = NULL;
        put("{\"callId\": \"x\"}");
        cr_assert_eq(open_calls_closing(dir, 1, "test", &calls), -EINVAL);
        cr_assert_null(calls);
        put("[{\"callId\": 5, \"tool\": \"t\", \"startedMs\": 1}]");
        cr_assert_eq(open_calls_closing(dir, 1, "test", &calls), -EINVAL);
        put("[{\"callId\": \"a\", \"tool\": \"t\", \"startedMs\": -1}]");
        cr_assert_eq(open_calls_closing(dir, 1, "test", &calls), -EINVAL);
        put("[{\"callId\": \"a\", \"tool\": \"t\", \"startedMs\": 1}");
        cr_assert_eq(open_calls_closing(dir, 1, "test", &calls), -EINVAL);
}

Test(opencalls, a_link_is_not_followed)
{
        char path[256];
        snprintf(path, sizeof(path), "%s/%s", dir, OPEN_CALLS_FILE);
        cr_assert_eq(symlink("/etc/passwd", path), 0);
        json_t *calls = NULL;
        cr_assert_lt(open_calls_closing(dir, 1, "test", &calls), 0);
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
        cr_assert_eq(open_calls_closing(lazy, 1500, "airlock", &calls), 0);
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
