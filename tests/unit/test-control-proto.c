/* SPDX-License-Identifier: Apache-2.0 */
#include <criterion/criterion.h>
#include <errno.h>
#include <string.h>

#include "control-proto.h"

static int parse(const char *line, json_t **req)
{
        return control_parse_request(line, strlen(line), req);
}

Test(control_proto, ops)
{
        static const struct {
                const char *line;
                int op;
        } cases[] = {
            {"{\"op\":\"status\"}", CONTROL_REQ_STATUS},
            {"{\"op\":\"exec\",\"argv\":[\"true\"]}", CONTROL_REQ_EXEC},
            {"{\"op\":\"attach\",\"pid\":1}", CONTROL_REQ_ATTACH},
            {"{\"op\":\"stdin\"}", CONTROL_REQ_STDIN},
            {"{\"op\":\"signal\"}", CONTROL_REQ_SIGNAL},
            {"{\"op\":\"review\"}", CONTROL_REQ_REVIEW},
            {"{\"op\":\"destroy\"}", CONTROL_REQ_DESTROY},
            {"{\"op\":\"reboot\"}", CONTROL_REQ_UNKNOWN},
        };
        for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
                json_t *req = NULL;
                cr_expect_eq(parse(cases[i].line, &req), cases[i].op, "%s", cases[i].line);
                cr_expect(json_is_object(req), "%s", cases[i].line);
                json_decref(req);
        }
}

Test(control_proto, not_a_request)
{
        static const char *const bad[] = {"",
                                          "{",
                                          "[]",
                                          "\"op\"",
                                          "{\"op\":1}",
                                          "{\"pid\":1}",
                                          "{\"op\":null}",
                                          "{\"op\":\"status\"} trailing"};
        for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
                json_t *req = (json_t *)1;
                cr_expect_eq(parse(bad[i], &req), -EINVAL, "%s", bad[i]);
                cr_expect_null(req, "%s", bad[i]);
        }
}

static int exec_of(const char *text, struct control_exec *x, const char **why)
{
        json_t *req = json_loads(text, 0, NULL);
        cr_assert(req, "%s", text);
        int r = control_parse_exec(req, x, why);
        json_decref(req);
        return r;
}

Test(control_proto, exec_fields)
{
        struct control_exec x;
        const char *why = NULL;
        cr_assert_eq(
            exec_of("{\"argv\":[\"sh\",\"-c\",\"x\"],\"env\":{\"A\":\"1\"},\"stdin\":\"aGk=\","
                    "\"timeout\":1.5,\"stallTimeout\":2,\"background\":true}",
                    &x, &why),
            0, "%s", why);
        cr_expect_str_eq(x.argv[0], "sh");
        cr_expect_str_eq(x.argv[2], "x");
        cr_expect_null(x.argv[3]);
        cr_expect_str_eq(x.env[0], "A=1");
        cr_expect_eq(x.stdin_len, 2);
        cr_expect_eq(memcmp(x.stdin_data, "hi", 2), 0);
        cr_expect_str_eq(x.cwd, "/workspace");
        cr_expect_eq(x.stall_ms, 2000);
        cr_expect(x.timeout_s > 1.4 && x.timeout_s < 1.6);
        cr_expect(x.background);
        control_exec_clear(&x);

        cr_assert_eq(exec_of("{\"argv\":[\"true\"]}", &x, &why), 0);
        cr_expect_eq(x.stall_ms, CONTROL_STALL_DEFAULT_MS);
        cr_expect_eq(x.timeout_s, 0);
        cr_expect_null(x.env);
        control_exec_clear(&x);
}

Test(control_proto, exec_refusals)
{
        static const struct {
                const char *req;
                const char *why;
        } cases[] = {
            {"{}", "\"argv\" must be a non-empty array of strings"},
            {"{\"argv\":[]}", "\"argv\" must be a non-empty array of strings"},
            {"{\"argv\":[\"a\",1]}", "\"argv\" must be a non-empty array of strings"},
            {"{\"argv\":[\"a\"],\"env\":[]}", "\"env\" must be an object of strings"},
            {"{\"argv\":[\"a\"],\"env\":{\"A=B\":\"1\"}}", "\"env\" must be an object of strings"},
            {"{\"argv\":[\"a\"],\"env\":{\"\":\"1\"}}", "\"env\" must be an object of strings"},
            {"{\"argv\":[\"a\"],\"env\":{\"T\":\"${secret:x}\"}}",
             "env values may not name a secret: secrets never enter the sandbox"},
            {"{\"argv\":[\"a\"],\"cwd\":\"rel\"}", "\"cwd\" must be an absolute path"},
            {"{\"argv\":[\"a\"],\"cwd\":\"\"}", "\"cwd\" must be an absolute path"},
            {"{\"argv\":[\"a\"],\"stdin\":5}", "\"stdin\" must be base64 or null"},
            {"{\"argv\":[\"a\"],\"stdin\":\"***\"}", "\"stdin\" is not valid base64"},
            {"{\"argv\":[\"a\"],\"timeout\":0}",
             "\"timeout\" must be a positive number of seconds"},
            {"{\"argv\":[\"a\"],\"stallTimeout\":3601}",
             "\"stallTimeout\" must be a positive number of seconds, at most 3600"},
        };
        for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
                struct control_exec x;
                const char *why = NULL;
                cr_expect_eq(exec_of(cases[i].req, &x, &why), -EINVAL, "%s", cases[i].req);
                cr_expect_str_eq(why ? why : "", cases[i].why, "%s", cases[i].req);
                cr_expect_null(x.argv, "%s", cases[i].req);
        }
}
