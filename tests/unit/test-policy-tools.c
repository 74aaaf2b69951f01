/* SPDX-License-Identifier: Apache-2.0 */
/* tools.define and tools.allow: definitions checked whole at load, names
 * and routes at finalize; every refusal names the tool and the key. */
#include <criterion/criterion.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "policy-test-util.h"
#include "policy.h"
#include "schema.h"

#define DEF(body) "{\"tools\": {\"define\": {\"t.x\": " body "}}}"

static void load_fails(const char *json, const char *needle)
{
        struct policy *p = policy_new();
        struct al_error e = {0};
        int r = policy_load_string(p, json, "policy.json", &e);
        cr_assert_lt(r, 0, "accepted: %s", json);
        cr_assert(strstr(e.msg, needle), "message \"%s\" lacks \"%s\"", e.msg, needle);
        policy_free(p);
}

static void finalize_fails(const char *json, const char *needle)
{
        struct policy *p = load_ok(json);
        struct al_error e = {0};
        int r = policy_finalize(p, "/base", "/home/u", &e);
        cr_assert_lt(r, 0, "finalized: %s", json);
        cr_assert(strstr(e.msg, needle), "message \"%s\" lacks \"%s\"", e.msg, needle);
        policy_free(p);
}

Test(policy_tools, defaults_and_fields)
{
        struct policy *p = finalize_ok(
            "{\"tools\": {\"allow\": [\"t.x\"], \"define\": {\"t.x\": {\"description\": \"d\", "
            "\"args\": {\"type\": \"object\", \"properties\": {\"q\": {\"type\": \"string\"}}, "
            "\"required\": [\"q\"]}, \"command\": [\"/bin/echo\", \"--\", \"${args.q}\"], "
            "\"env\": {\"TOKEN\": \"${secret:GH}\"}}}}}");
        const struct policy_tool *t = policy_tool_find(p, "t.x");
        cr_assert_not_null(t);
        cr_assert_eq(t->runner, POLICY_TOOL_COMMAND);
        cr_assert_eq(t->n_argv, 3);
        cr_assert_str_eq(t->argv[2], "${args.q}");
        cr_assert_eq(t->timeout_ms, 30000);
        cr_assert_eq(t->output_max, 1u << 20);
        cr_assert_eq(t->rate_per_min, 60);
        cr_assert_eq(t->concurrency, 4);
        cr_assert_eq(t->clamp, POLICY_TOOL_CLAMP);
        cr_assert_str_eq(t->env[0].key, "TOKEN");
        cr_assert(policy_tool_allowed(p, "t.x"));
        cr_assert_not(policy_tool_allowed(p, "t.y"));
        policy_free(p);
}

Test(policy_tools, limits_parsed)
{
        struct policy *p = load_ok(DEF("{\"command\": [\"/bin/date\"], \"timeout\": \"10s\", "
                                       "\"outputMax\": \"2K\", \"rate\": 5, \"concurrency\": 2, "
                                       "\"clamp\": \"refuse\"}"));
        const struct policy_tool *t = policy_tool_find(p, "t.x");
        cr_assert_eq(t->timeout_ms, 10000);
        cr_assert_eq(t->output_max, 2048);
        cr_assert_eq(t->rate_per_min, 5);
        cr_assert_eq(t->concurrency, 2);
        cr_assert_eq(t->clamp, POLICY_TOOL_REFUSE);
        policy_free(p);
}

Test(policy_tools, builtin_needs_no_definition)
{
        struct policy *p = finalize_ok("{\"tools\": {\"allow\": [\"core.time\"]}}");
        const struct policy_tool *t = policy_tool_find(p, "core.time");
        cr_assert_not_null(t);
        cr_assert_eq(t->runner, POLICY_TOOL_BUILTIN);
        cr_assert_not_null(t->schema);
        /* The canonical JSON leaves built-ins out and reads back. */
        char *s = policy_to_json(p);
        cr_assert_null(strstr(s, "\"define\""), "%s", s);
        struct policy *q = load_ok(s);
        free(s);
        policy_free(q);
        policy_free(p);
        load_fails("{\"tools\": {\"define\": {\"core.x\": {\"command\": [\"/bin/date\"]}}}}",
                   "built-in");
}

Test(policy_tools, allow_names_undefined_tool)
{
        finalize_fails("{\"tools\": {\"allow\": [\"gh.prs\"]}}", "\"gh.prs\"");
        finalize_fails("{\"tools\": {\"allow\": [\"gh.*\"]}}", "neither a built-in");
        struct policy *p = finalize_ok(
            "{\"tools\": {\"allow\": [\"gh.*\"], \"define\": {\"gh.prs\": {\"command\": "
            "[\"/bin/date\"]}}}}");
        cr_assert(policy_tool_allowed(p, "gh.prs"));
        cr_assert_not(policy_tool_allowed(p, "core.time"));
        policy_free(p);
}

Test(policy_tools, no_shell_ever)
{
        load_fails(DEF("{\"command\": [\"/bin/sh\", \"-c\", \"date\"]}"), "shell");
        load_fails(DEF("{\"command\": [\"/usr/bin/bash\"]}"), "tool \"t.x\": \"command\"");
        load_fails(DEF("{\"command\": [\"/usr/bin/env\", \"date\"]}"), "shell");
        load_fails(DEF("{\"command\": [\"/bin/busybox\", \"date\"]}"), "shell");
        load_fails(DEF("{\"command\": [\"/usr/bin/zsh5\"]}"), "shell");
        load_fails(DEF("{\"command\": [\"/usr/bin/xargs\", \"date\"]}"), "shell");
        load_fails(DEF("{\"command\": [\"date\"]}"), "absolute path");
        load_fails(DEF("{\"command\": [\"/usr/bin/python3\", \"-c\", \"print(1)\"]}"),
                   "command string");
        load_fails(DEF("{\"command\": [\"/usr/bin/python3\", \"-Bc\", \"print(1)\"]}"),
                   "command string");
        load_fails(DEF("{\"command\": [\"/usr/bin/perl\", \"-e\", \"1\"]}"), "command string");
        load_fails(DEF("{\"command\": [\"/usr/bin/node\", \"--eval=1\"]}"), "command string");
        load_fails(DEF("{\"command\": [\"/usr/bin/python3\", \"-\"]}"), "stdin");
        /* An argument in the script's place would choose the code. */
        load_fails(DEF("{\"args\": {\"type\": \"object\", \"properties\": {\"s\": {\"type\": "
                       "\"string\"}}, \"required\": [\"s\"]}, \"command\": [\"/usr/bin/python3\", "
                       "\"${args.s}\"]}"),
                   "script");
        /* A link to a shell is a shell. */
        char dir[] = "/tmp/tools-test-XXXXXX", link[64], json[256];
        cr_assert_not_null(mkdtemp(dir));
        snprintf(link, sizeof(link), "%s/innocent", dir);
        cr_assert_eq(symlink("/bin/bash", link), 0);
        snprintf(json, sizeof(json), DEF("{\"command\": [\"%s\"]}"), link);
        load_fails(json, "shell");
        unlink(link);
        rmdir(dir);
        /* A script is fine. */
        policy_free(load_ok(DEF("{\"command\": [\"/usr/bin/python3\", \"-B\", "
                                "\"/opt/tools/x.py\"]}")));
}

Test(policy_tools, placeholders_whole_and_known)
{
        const char *schema = "\"args\": {\"type\": \"object\", \"properties\": {\"q\": {\"type\": "
                             "\"string\"}, \"l\": {\"type\": \"array\", \"items\": {\"type\": "
                             "\"string\"}}, \"o\": {\"type\": \"string\"}}, \"required\": [\"q\", "
                             "\"l\"]}";
        char json[1024];
        snprintf(json, sizeof(json), DEF("{%s, \"command\": [\"/bin/echo\", \"--q=${args.q}\"]}"),
                 schema);
        load_fails(json, "whole argv element");
        snprintf(json, sizeof(json), DEF("{%s, \"command\": [\"/bin/echo\", \"${args.zz}\"]}"),
                 schema);
        load_fails(json, "\"zz\", which \"args\" does not define");
        snprintf(json, sizeof(json), DEF("{%s, \"command\": [\"/bin/echo\", \"${args.l}\"]}"),
                 schema);
        load_fails(json, "array");
        snprintf(json, sizeof(json), DEF("{%s, \"command\": [\"/bin/echo\", \"${args.o}\"]}"),
                 schema);
        load_fails(json, "required");
        snprintf(json, sizeof(json), DEF("{%s, \"command\": [\"/bin/echo\", \"${secret:X}\"]}"),
                 schema);
        load_fails(json, "secrets go in");
        snprintf(json, sizeof(json), DEF("{%s, \"command\": [\"/bin/echo\", \"${args.q}\"]}"),
                 schema);
        policy_free(load_ok(json));
}

Test(policy_tools, schema_subset_enforced)
{
        load_fails(DEF("{\"args\": {\"type\": \"object\", \"oneOf\": []}, \"command\": "
                       "[\"/bin/date\"]}"),
                   "unknown schema keyword \"oneOf\"");
        load_fails(DEF("{\"args\": {\"type\": \"object\", \"additionalProperties\": true}, "
                       "\"command\": [\"/bin/date\"]}"),
                   "additionalProperties");
        load_fails(DEF("{\"args\": {\"type\": \"string\"}, \"command\": [\"/bin/date\"]}"),
                   "must be of type \"object\"");
        load_fails(DEF("{\"args\": {\"type\": \"object\", \"properties\": {\"p\": {\"type\": "
                       "\"string\", \"pattern\": \"(\"}}}, \"command\": [\"/bin/date\"]}"),
                   "pattern");
        load_fails(DEF("{\"args\": {\"type\": \"object\", \"properties\": {\"a\": {\"type\": "
                       "\"array\"}}}, \"command\": [\"/bin/date\"]}"),
                   "items");
        load_fails(DEF("{\"args\": {\"type\": \"object\", \"required\": [\"x\"]}, \"command\": "
                       "[\"/bin/date\"]}"),
                   "not in \"properties\"");
        /* Depth limit. */
        char deep[4096] = "", json[8192];
        size_t n = 0;
        for (int i = 0; i < 12; i++)
                n += (size_t)snprintf(deep + n, sizeof(deep) - n,
                                      "{\"type\": \"object\", \"properties\": {\"a\": ");
        n += (size_t)snprintf(deep + n, sizeof(deep) - n, "{\"type\": \"string\"}");
        for (int i = 0; i < 12; i++)
                n += (size_t)snprintf(deep + n, sizeof(deep) - n, "}}");
        snprintf(json, sizeof(json), DEF("{\"args\": %s, \"command\": [\"/bin/date\"]}"), deep);
        load_fails(json, "deeper");
}

Test(policy_tools, runner_keys)
{
        load_fails(DEF("{\"description\": \"x\"}"), "needs a runner");
        load_fails(DEF("{\"command\": [\"/bin/date\"], \"http\": {}}"), "not both");
        load_fails(DEF("{\"command\": [\"/bin/date\"], \"shell\": true}"), "unknown key \"shell\"");
        load_fails(DEF("{\"command\": [\"/bin/date\"], \"timeout\": 0}"), "\"timeout\"");
        load_fails(DEF("{\"command\": [\"/bin/date\"], \"concurrency\": 1000}"), "\"concurrency\"");
        load_fails(DEF("{\"command\": [\"/bin/date\"], \"clamp\": \"maybe\"}"), "\"clamp\"");
        load_fails(DEF("{\"http\": {\"route\": \"gh\", \"method\": \"TRACE\", \"path\": \"/\"}}"),
                   "http.method");
        load_fails(DEF("{\"http\": {\"route\": \"gh\", \"method\": \"GET\", \"path\": "
                       "\"/x/${secret:T}\"}}"),
                   "http.path");
        load_fails("{\"tools\": {\"define\": {\"a b\": {\"command\": [\"/bin/date\"]}}}}",
                   "tool name");
        load_fails(DEF("{\"command\": [\"/bin/date\"], \"env\": {\"T\": \"${secret:}\"}}"),
                   "\"env\" \"T\": a template");
        load_fails(DEF("{\"command\": [\"/bin/date\"], \"env\": {\"T\": \"${run.attempt}\"}}"),
                   "a template");
        load_fails(DEF("{\"command\": [\"/bin/date\"], \"env\": {\"1T\": \"x\"}}"), "key \"1T\"");
        policy_free(load_ok(DEF("{\"command\": [\"/bin/date\"], \"env\": {\"T\": \"a $${x} "
                                "${secret:GH_1} ${run.id}/${sandbox.id}/${account}\"}}")));
        /* A route the policy lacks. */
        finalize_fails("{\"tools\": {\"allow\": [\"t.x\"], \"define\": {\"t.x\": {\"http\": "
                       "{\"route\": \"gh\", \"method\": \"GET\", \"path\": \"/repos\"}}}}}",
                       "\"http.route\" names \"gh\"");
        struct policy *p = finalize_ok(
            "{\"network\": {\"routes\": [{\"name\": \"gh\", \"upstream\": "
            "\"https://api.example.com\"}]}, \"tools\": {\"allow\": [\"t.x\"], \"define\": "
            "{\"t.x\": {\"http\": {\"route\": \"gh\", \"method\": \"GET\", \"path\": "
            "\"/repos\"}}}}}");
        cr_assert_eq(policy_tool_find(p, "t.x")->runner, POLICY_TOOL_HTTP);
        policy_free(p);
}

Test(policy_tools, json_round_trip)
{
        struct policy *p = finalize_ok(
            "{\"tools\": {\"allow\": [\"t.x\", \"core.time\"], \"define\": {\"t.x\": "
            "{\"description\": \"d\", \"args\": {\"type\": \"object\", \"properties\": {\"n\": "
            "{\"type\": \"integer\", \"minimum\": 1, \"maximum\": 5}}, \"required\": [\"n\"]}, "
            "\"command\": [\"/bin/echo\", \"${args.n}\"], \"timeout\": 1.5, \"env\": {\"A\": "
            "\"b\"}}}}}");
        char *s = policy_to_json(p);
        cr_assert(strstr(s, "\"define\":{\"t.x\""), "%s", s);
        struct policy *q = policy_new();
        struct al_error e = {0};
        cr_assert_eq(policy_load_string(q, s, "canonical", &e), 0, "%s", e.msg);
        cr_assert_eq(policy_finalize(q, "/base", "/home/u", &e), 0, "%s", e.msg);
        char *s2 = policy_to_json(q);
        cr_assert_str_eq(s, s2);
        cr_assert_eq(policy_tool_find(q, "t.x")->timeout_ms, 1500);
        free(s);
        free(s2);
        policy_free(q);
        policy_free(p);
}

Test(policy_tools, definitions_file)
{
        char path[] = "/tmp/tools-def-XXXXXX";
        int fd = mkstemp(path);
        cr_assert_geq(fd, 0);
        const char *doc = "{\"define\": {\"f.y\": {\"command\": [\"/bin/date\"]}}}";
        cr_assert_eq(write(fd, doc, strlen(doc)), (ssize_t)strlen(doc));
        close(fd);
        struct policy *p = load_ok("{\"tools\": {\"allow\": [\"f.y\"]}}");
        struct al_error e = {0};
        cr_assert_eq(policy_tools_load_file(p, path, &e), 0, "%s", e.msg);
        cr_assert_eq(policy_finalize(p, "/base", "/home/u", &e), 0, "%s", e.msg);
        cr_assert_not_null(policy_tool_find(p, "f.y"));
        /* Defining it again is refused, and the policy is unchanged. */
        e = (struct al_error){0};
        cr_assert_lt(policy_tools_load_file(p, path, &e), 0);
        cr_assert(strstr(e.msg, "defined twice"), "%s", e.msg);
        fd = open(path, O_WRONLY | O_TRUNC);
        const char *bad = "{\"tools\": {}}";
        cr_assert_eq(write(fd, bad, strlen(bad)), (ssize_t)strlen(bad));
        close(fd);
        e = (struct al_error){0};
        cr_assert_lt(policy_tools_load_file(p, path, &e), 0);
        cr_assert(strstr(e.msg, "unknown key \"tools\""), "%s", e.msg);
        unlink(path);
        policy_free(p);
}

Test(policy_tools, http_templates)
{
        const char *pre = "{\"network\": {\"routes\": [{\"name\": \"gh\", \"upstream\": "
                          "\"https://api.example.com\"}]}, \"tools\": {\"allow\": [\"t.x\"], "
                          "\"define\": {\"t.x\": {\"args\": {\"type\": \"object\", \"properties\": "
                          "{\"r\": {\"type\": \"string\"}, \"l\": {\"type\": \"array\", \"items\": "
                          "{\"type\": \"string\"}}}}, \"http\": ";
        char json[1024];
        snprintf(json, sizeof(json),
                 "%s{\"route\": \"gh\", \"method\": \"POST\", \"path\": "
                 "\"/repos/${args.r}\", \"body\": {\"q\": \"${args.r}\"}}}}}}",
                 pre);
        struct policy *p = finalize_ok(json);
        const struct policy_tool *t = policy_tool_find(p, "t.x");
        cr_assert_str_eq(t->path, "/repos/${args.r}");
        cr_assert_str_eq(t->body, "{\"q\":\"${args.r}\"}");
        char *s = policy_to_json(p);
        struct policy *q = load_ok(s);
        char *s2 = policy_to_json(q);
        cr_assert_str_eq(s, s2);
        free(s);
        free(s2);
        policy_free(q);
        policy_free(p);
        snprintf(json, sizeof(json),
                 "%s{\"route\": \"gh\", \"method\": \"GET\", \"path\": \"/r/${args.zz}\"}}}}}",
                 pre);
        load_fails(json, "\"zz\", which \"args\" does not define");
        snprintf(json, sizeof(json),
                 "%s{\"route\": \"gh\", \"method\": \"GET\", \"path\": \"/r/${args.l}\"}}}}}", pre);
        load_fails(json, "array or object");
        snprintf(json, sizeof(json),
                 "%s{\"route\": \"gh\", \"method\": \"GET\", \"path\": \"/r\", \"x\": 1}}}}}", pre);
        load_fails(json, "unknown key \"x\"");
        snprintf(json, sizeof(json),
                 "%s{\"route\": \"gh\", \"method\": \"GET\", \"path\": \"/r\"}, \"env\": "
                 "{\"A\": \"b\"}}}}}",
                 pre);
        load_fails(json, "applies to \"command\" tools only");
}
