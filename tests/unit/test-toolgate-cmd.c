/* SPDX-License-Identifier: Apache-2.0 */
/* The command runner: argv injection attempts reach the tool as exactly
 * one literal element or are refused; a hanging tool and its setsid
 * grandchild are gone after the timeout and after toolgate_free; secrets a
 * tool prints are scrubbed; output cap; exit status; clean environment. */
#include <dirent.h>
#include <signal.h>

#include "toolgate-test-util.h"

#define Q(s)   "{\"runId\": \"" RUN_ID "\", " s "}\n"
#define SECRET "s3cr3t-Value-7f2c91"

static const char cmd_tools[] =
    "{\"allow\": [\"c.*\"], \"define\": {"
    "  \"c.argv\": {\"args\": {\"type\": \"object\", \"properties\": {"
    "    \"q\": {\"type\": \"string\"}, \"n\": {\"type\": \"integer\"}}, \"required\": [\"q\", "
    "\"n\"]},"
    "   \"command\": [\"/usr/bin/python3\", \"%S\", \"argv\", \"--\", \"${args.q}\", "
    "\"${args.n}\"]},"
    "  \"c.opts\": {\"args\": {\"type\": \"object\", \"properties\": {"
    "    \"q\": {\"type\": \"string\"}}, \"required\": [\"q\"]},"
    "   \"command\": [\"/usr/bin/python3\", \"%S\", \"argv\", \"${args.q}\"]},"
    "  \"c.env\": {\"command\": [\"/usr/bin/python3\", \"%S\", \"env\"],"
    "   \"env\": {\"TOKEN\": \"${secret:TG_TEST_SECRET}\"}},"
    "  \"c.text\": {\"command\": [\"/usr/bin/python3\", \"%S\", \"text\"],"
    "   \"env\": {\"TOKEN\": \"${secret:TG_TEST_SECRET}\"}},"
    "  \"c.fail\": {\"command\": [\"/usr/bin/python3\", \"%S\", \"fail\"],"
    "   \"env\": {\"TOKEN\": \"${secret:TG_TEST_SECRET}\"}},"
    "  \"c.big\": {\"command\": [\"/usr/bin/python3\", \"%S\", \"big\"], \"outputMax\": 1024},"
    "  \"c.hang\": {\"args\": {\"type\": \"object\", \"properties\": {"
    "    \"m\": {\"type\": \"string\", \"pattern\": \"^[0-9.]+$\"}}, \"required\": [\"m\"]},"
    "   \"command\": [\"/usr/bin/python3\", \"%S\", \"hang\", \"${args.m}\"], \"timeout\": \"1s\"},"
    "  \"c.echo\": {\"args\": {\"type\": \"object\", \"properties\": {"
    "    \"s\": {\"type\": \"string\"}}},"
    "   \"command\": [\"/usr/bin/python3\", \"%S\", \"stdin\"]},"
    "  \"c.missing\": {\"command\": [\"/nonexistent/tool\"]}"
    "}}";

static void setup_cmd(void)
{
        setenv("TG_TEST_SECRET", SECRET, 1);
        tg_setup(cmd_tools);
}

TestSuite(toolgate_cmd, .init = setup_cmd, .fini = tg_teardown, .timeout = 60);

static json_t *argv_call(int fd, const char *tool, const char *q_json)
{
        char line[1024];
        snprintf(line, sizeof(line),
                 Q("\"callId\": \"a\", \"tool\": \"%s\", \"args\": {\"q\": %s, \"n\": -7}"), tool,
                 q_json);
        return tg_call(fd, line);
}

Test(toolgate_cmd, argv_injection_one_literal_element)
{
        int fd = tg_connect();
        const char *attempts[] = {
            "\"two words\"",     "\"'quoted' \\\"dq\\\"\"",
            "\"line1\\nline2\"", "\"$(id) `id`\"",
            "\"; rm -rf / #\"",  "\"--output=/etc/passwd\"",
            "\"-rf\"",           "\"*\"",
            "\"${HOME}\"",       "\"\"",
        };
        for (size_t i = 0; i < ARRAY_SIZE(attempts); i++) {
                json_t *r = argv_call(fd, "c.argv", attempts[i]);
                cr_assert(json_is_true(json_object_get(r, "ok")), "%s: %s", attempts[i],
                          str_of(r, "safeMessage"));
                json_t *v = json_object_get(r, "value");
                /* argv after the mode: "--", q, n: exactly three elements. */
                cr_assert_eq(json_array_size(v), 3, "%s", attempts[i]);
                json_t *want = json_loads(attempts[i], JSON_DECODE_ANY, NULL);
                cr_assert_str_eq(json_string_value(json_array_get(v, 1)), json_string_value(want));
                cr_assert_str_eq(json_string_value(json_array_get(v, 2)), "-7");
                json_decref(want);
                json_decref(r);
        }
        close(fd);
}

Test(toolgate_cmd, leading_dash_refused_without_double_dash)
{
        int fd = tg_connect();
        const char *attempts[] = {"\"-rf\"", "\"--output=/etc/passwd\"", "\"-\""};
        for (size_t i = 0; i < ARRAY_SIZE(attempts); i++) {
                char line[512];
                snprintf(line, sizeof(line),
                         Q("\"callId\": \"o\", \"tool\": \"c.opts\", \"args\": {\"q\": %s}"),
                         attempts[i]);
                json_t *r = tg_call(fd, line);
                assert_error(r, "bad_args");
                cr_assert(strstr(str_of(r, "safeMessage"), "begins with '-'"), "%s",
                          str_of(r, "safeMessage"));
                json_decref(r);
        }
        json_t *r = tg_call(fd, Q("\"callId\": \"o\", \"tool\": \"c.opts\", \"args\": {\"q\": "
                                  "\"a-b\"}"));
        cr_assert(json_is_true(json_object_get(r, "ok")), "%s", str_of(r, "safeMessage"));
        cr_assert_str_eq(json_string_value(json_array_get(json_object_get(r, "value"), 0)), "a-b");
        json_decref(r);
        close(fd);
}

Test(toolgate_cmd, clean_environment_and_secret_scrubbed)
{
        int fd = tg_connect();
        setenv("LEAKY_HOST_VAR", "x", 1);
        json_t *r = tg_call(fd, Q("\"callId\": \"e\", \"tool\": \"c.env\""));
        cr_assert(json_is_true(json_object_get(r, "ok")), "%s", str_of(r, "safeMessage"));
        json_t *v = json_object_get(r, "value");
        char *s = json_dumps(r, JSON_COMPACT);
        cr_assert_null(strstr(s, SECRET), "the secret reached the sandbox: %s", s);
        cr_assert_str_eq(str_of(v, "token"), REDACTOR_MARK);
        cr_assert_null(strstr(s, "LEAKY_HOST_VAR"), "the host environment leaked: %s", s);
        cr_assert_str_eq(str_of(v, "cwd"), "/");
        cr_assert_eq(json_integer_value(json_object_get(v, "uid")), (json_int_t)geteuid());
        free(s);
        json_decref(r);

        r = tg_call(fd, Q("\"callId\": \"t\", \"tool\": \"c.text\""));
        cr_assert(json_is_true(json_object_get(r, "ok")));
        cr_assert_str_eq(json_string_value(json_object_get(r, "value")),
                         "plain text, not JSON " REDACTOR_MARK);
        json_decref(r);

        /* On failure, the stderr line in the message is scrubbed too. */
        r = tg_call(fd, Q("\"callId\": \"f\", \"tool\": \"c.fail\""));
        assert_error(r, "tool_failed");
        cr_assert(strstr(str_of(r, "safeMessage"), "exit status 3"));
        cr_assert(strstr(str_of(r, "safeMessage"), "it broke: " REDACTOR_MARK), "%s",
                  str_of(r, "safeMessage"));
        cr_assert_null(strstr(str_of(r, "safeMessage"), SECRET));
        json_t *rec = last_record();
        cr_assert_str_eq(str_of(rec, "errorCode"), "tool_failed");
        json_decref(r);
        /* Nothing recorded holds the secret either. */
        s = json_dumps(T.records, JSON_COMPACT);
        cr_assert_null(strstr(s, SECRET));
        free(s);
        close(fd);
}

Test(toolgate_cmd, secret_in_args_redacted_in_record)
{
        int fd = tg_connect();
        /* The sandbox somehow knows the value and sends it: the audit
         * record keeps it redacted, the digest is still of the real args. */
        (void)secrets_get(T.secrets, "TG_TEST_SECRET");
        json_t *r = argv_call(fd, "c.argv", "\"" SECRET "\"");
        json_decref(r);
        json_t *rec = last_record();
        char *s = json_dumps(rec, JSON_COMPACT);
        cr_assert_null(strstr(s, SECRET), "%s", s);
        cr_assert(strstr(s, REDACTOR_MARK), "%s", s);
        free(s);
        close(fd);
}

Test(toolgate_cmd, output_cap)
{
        int fd = tg_connect();
        json_t *r = tg_call(fd, Q("\"callId\": \"b\", \"tool\": \"c.big\""));
        assert_error(r, "tool_failed");
        cr_assert(strstr(str_of(r, "safeMessage"), "1024 bytes"), "%s", str_of(r, "safeMessage"));
        cr_assert_str_eq(str_of(last_record(), "rule"), "outputMax");
        json_decref(r);
        close(fd);
}

Test(toolgate_cmd, missing_program_internal)
{
        int fd = tg_connect();
        json_t *r = tg_call(fd, Q("\"callId\": \"m\", \"tool\": \"c.missing\""));
        assert_error(r, "internal");
        json_decref(r);
        close(fd);
}

/* Whether a process whose command line holds `marker` is alive. */
static int count_marked(const char *marker)
{
        int n = 0;
        DIR *d = opendir("/proc");
        struct dirent *e;
        while ((e = readdir(d))) {
                char path[300], buf[512];
                if (e->d_name[0] < '0' || e->d_name[0] > '9')
                        continue;
                snprintf(path, sizeof(path), "/proc/%s/cmdline", e->d_name);
                FILE *f = fopen(path, "r");
                if (!f)
                        continue;
                size_t k = fread(buf, 1, sizeof(buf) - 1, f);
                fclose(f);
                for (size_t i = 0; i < k; i++)
                        if (buf[i] == '\0')
                                buf[i] = ' ';
                buf[k] = '\0';
                if (strstr(buf, marker) && !strstr(buf, "python3"))
                        n++;
        }
        closedir(d);
        return n;
}

static void unique_marker(char *buf, size_t size)
{
        snprintf(buf, size, "%d.%06d", 900 + (int)(getpid() % 99),
                 (int)(now_monotonic_us() % 1000000));
}

Test(toolgate_cmd, timeout_kills_tree_with_setsid_grandchild)
{
        int fd = tg_connect();
        char marker[32], line[256];
        unique_marker(marker, sizeof(marker));
        snprintf(line, sizeof(line),
                 Q("\"callId\": \"h\", \"tool\": \"c.hang\", \"args\": {\"m\": \"%s\"}"), marker);
        tg_send(fd, line);
        /* Both the tool and its grandchild (own session) are running. */
        uint64_t until = now_monotonic_us() + 900000;
        while (count_marked(marker) < 2 && now_monotonic_us() < until)
                tg_spin();
        cr_assert_eq(count_marked(marker), 2, "the tool and its grandchild did not start");
        uint64_t t0 = now_monotonic_us();
        json_t *r = tg_read(fd, 10000);
        assert_error(r, "timeout");
        cr_assert_lt(now_monotonic_us() - t0, 3000000);
        cr_assert_str_eq(str_of(last_record(), "errorCode"), "timeout");
        json_decref(r);
        cr_assert_eq(count_marked(marker), 0, "a process of the tool survived its timeout");
        close(fd);
}

Test(toolgate_cmd, free_kills_running_tools)
{
        int fd = tg_connect();
        char marker[32], line[256];
        unique_marker(marker, sizeof(marker));
        snprintf(line, sizeof(line),
                 Q("\"callId\": \"h\", \"tool\": \"c.hang\", \"args\": {\"m\": \"%s\"}"), marker);
        tg_send(fd, line);
        uint64_t until = now_monotonic_us() + 900000;
        while (count_marked(marker) < 2 && now_monotonic_us() < until)
                tg_spin();
        cr_assert_eq(count_marked(marker), 2);
        toolgate_free(T.tg);
        T.tg = NULL;
        cr_assert_eq(count_marked(marker), 0, "toolgate_free left the tool's tree running");
        json_t *rec = last_record();
        cr_assert_str_eq(str_of(rec, "rule"), "shutdown");
        close(fd);
}

/* Arguments larger than a socket buffer reach the tool's stdin whole. */
Test(toolgate_cmd, large_args_on_stdin)
{
        enum { LEN = 600000 };
        int fd = tg_connect();
        char *line = xcalloc(1, LEN + 256);
        size_t n =
            (size_t)snprintf(line, 256,
                             "{\"runId\": \"" RUN_ID
                             "\", \"callId\": \"s\", \"tool\": \"c.echo\", \"args\": {\"s\": \"");
        for (size_t i = 0; i < LEN; i++)
                line[n + i] = (char)('a' + i % 26);
        memcpy(line + n + LEN, "\"}}\n", 5);
        json_t *r = tg_call(fd, line);
        cr_assert(json_is_true(json_object_get(r, "ok")), "%s", str_of(r, "safeMessage"));
        const char *s = str_of(json_object_get(r, "value"), "s");
        cr_assert_eq(strlen(s), LEN);
        cr_assert_eq(memcmp(s, line + n, LEN), 0);
        /* {"s":"..."}: the arguments as the tool read them. */
        cr_assert_eq(json_integer_value(json_object_get(last_record(), "outputBytes")), LEN + 8);
        json_decref(r);
        free(line);
        close(fd);
}
