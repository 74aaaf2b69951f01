/* SPDX-License-Identifier: Apache-2.0 */
/* A host tool never acts before its call is on the audit log: the call's
 * record comes before the tool runs, and when it cannot be written (the
 * audit disk full) the tool is not run and the call is refused
 * (audit_failed). Before, the one tool.call record was written after the
 * tool had run, so a full disk let a tool act on the host unrecorded. */
#include <sys/stat.h>

#include "toolgate-test-util.h"

#define Q(s) "{\"runId\": \"" RUN_ID "\", " s "}\n"

static const char touch_tools[] =
    "{\"allow\": [\"t.*\"], \"define\": {"
    "  \"t.touch\": {\"args\": {\"type\": \"object\", \"properties\": {"
    "    \"p\": {\"type\": \"string\"}}, \"required\": [\"p\"]},"
    "   \"command\": [\"/usr/bin/touch\", \"--\", \"${args.p}\"]}"
    "}}";

static char marker[160];
static bool marker_seen_at_first_record, any_record;

static void watch_recorder(void *ud, const struct toolgate_record *rec)
{
        if (!any_record && rec->call_id && STREQ(rec->call_id, "t")) {
                struct stat st;
                any_record = true;
                marker_seen_at_first_record = stat(marker, &st) == 0;
        }
        tg_recorder(ud, rec);
}

static int watch_ahead(void *ud, const struct toolgate_record *rec)
{
        if (!any_record && rec->call_id && STREQ(rec->call_id, "t")) {
                struct stat st;
                any_record = true;
                marker_seen_at_first_record = stat(marker, &st) == 0;
        }
        return tg_ahead(ud, rec);
}

static int full_disk(void *ud, const struct toolgate_record *rec)
{
        any_record = true;
        return -ENOSPC;
}

static void setup(void)
{
        any_record = marker_seen_at_first_record = false;
        tg_setup(touch_tools);
        snprintf(marker, sizeof(marker), "%s/acted", T.dir);
}

static void fini(void)
{
        unlink(marker);
        tg_teardown();
}

TestSuite(toolgate_audit_ahead, .init = setup, .fini = fini, .timeout = 30);

static json_t *touch_call(void)
{
        char line[512];
        snprintf(line, sizeof(line),
                 Q("\"callId\": \"t\", \"tool\": \"t.touch\", \"args\": {\"p\": \"%s\"}"), marker);
        int fd = tg_connect();
        json_t *r = tg_call(fd, line);
        close(fd);
        return r;
}

Test(toolgate_audit_ahead, recorded_before_the_tool_acts)
{
        T.tg->recorder = watch_recorder;
        T.tg->ahead = watch_ahead;
        json_t *r = touch_call();
        cr_assert(json_is_true(json_object_get(r, "ok")), "%s", str_of(r, "safeMessage"));
        json_decref(r);
        struct stat st;
        cr_assert_eq(stat(marker, &st), 0, "the tool did not run");
        cr_assert(any_record, "no record at all");
        cr_assert_not(marker_seen_at_first_record,
                      "the tool acted on the host before any record of its call");
}

Test(toolgate_audit_ahead, started_record_names_the_call)
{
        json_t *r = touch_call();
        cr_assert(json_is_true(json_object_get(r, "ok")), "%s", str_of(r, "safeMessage"));
        json_decref(r);
        cr_assert_eq(json_array_size(T.ahead), 1);
        json_t *a = json_array_get(T.ahead, 0);
        cr_assert_str_eq(str_of(a, "tool"), "t.touch");
        cr_assert_str_eq(str_of(a, "callId"), "t");
        cr_assert_eq(strlen(str_of(a, "argsDigest")), 64);
        cr_assert_str_eq(json_string_value(json_object_get(json_object_get(a, "args"), "p")),
                         marker);
        cr_assert_null(json_object_get(a, "durationMs"));
        /* and the call's own record after it, with the same digest */
        json_t *last = last_record();
        cr_assert_str_eq(str_of(last, "argsDigest"), str_of(a, "argsDigest"));
}

Test(toolgate_audit_ahead, unrecorded_call_never_runs)
{
        T.tg->ahead = full_disk;
        json_t *r = touch_call();
        assert_error(r, "audit_failed");
        json_decref(r);
        struct stat st;
        cr_assert(any_record);
        cr_assert_neq(stat(marker, &st), 0, "the tool ran on the host with no record of its call");
        /* The gateway goes on: the next call, recorded, runs. */
        T.tg->ahead = tg_ahead;
        r = touch_call();
        cr_assert(json_is_true(json_object_get(r, "ok")), "%s", str_of(r, "safeMessage"));
        json_decref(r);
        cr_assert_eq(stat(marker, &st), 0);
}

/* Large arguments are written whole once (tool.call); the record ahead
 * keeps their digest and size. */
Test(toolgate_audit_ahead, large_args_not_written_twice)
{
        static char line[16384];
        char big[6001];
        memset(big, 'a', sizeof(big) - 1);
        big[sizeof(big) - 1] = '\0';
        snprintf(line, sizeof(line),
                 Q("\"callId\": \"t\", \"tool\": \"t.touch\", \"args\": {\"p\": \"%s/%s\"}"), T.dir,
                 big);
        int fd = tg_connect();
        json_t *r = tg_call(fd, line);
        close(fd);
        json_decref(r);
        cr_assert_eq(json_array_size(T.ahead), 1);
        json_t *a = json_array_get(T.ahead, 0);
        cr_assert(json_is_null(json_object_get(a, "args")));
        cr_assert(json_is_true(json_object_get(a, "argsTruncated")));
        cr_assert_gt(json_integer_value(json_object_get(a, "argsBytes")), 6000);
        json_t *last = last_record();
        cr_assert_str_eq(str_of(last, "argsDigest"), str_of(a, "argsDigest"));
        cr_assert(json_is_object(json_object_get(last, "args")), "the call's line lost its args");
}
