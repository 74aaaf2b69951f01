/* SPDX-License-Identifier: Apache-2.0 */
#include <errno.h>
#include <inttypes.h>
#include <string.h>

#include "agent/agent.h"
#include "utf8.h"
#include "util.h"

/* The tools offered to the model. Each runs inside the sandbox through its
 * pid 1 (an exec on the control socket), under the sandbox's policy: the
 * host never opens a path of the workspace on the model's behalf. edit reads
 * the file through the sandbox, replaces on the host in memory (the bytes are
 * data here, bounded) and writes it back through the sandbox. */

#define EDIT_FILE_MAX (4u << 20)

static const struct agent_tool_def tool_defs[] = {
    {"bash",
     "Run a shell command in the sandbox, in /workspace. Output (stdout and stderr) is returned, "
     "cut when large; the command is killed at its timeout.",
     "{\"type\":\"object\",\"properties\":{\"command\":{\"type\":\"string\"},\"timeout\":{"
     "\"type\":\"integer\",\"description\":\"seconds\"}},\"required\":[\"command\"]}"},
    {"read_file", "Read a file of the sandbox (a path relative to /workspace, or absolute).",
     "{\"type\":\"object\",\"properties\":{\"path\":{\"type\":\"string\"}},\"required\":[\"path\"]"
     "}"},
    {"write_file", "Write a file in the sandbox, replacing it whole; its directory is made.",
     "{\"type\":\"object\",\"properties\":{\"path\":{\"type\":\"string\"},\"content\":{\"type\":"
     "\"string\"}},\"required\":[\"path\",\"content\"]}"},
    {"edit",
     "Replace one exact occurrence of old_string with new_string in a file; refused when "
     "old_string is not found or found more than once.",
     "{\"type\":\"object\",\"properties\":{\"path\":{\"type\":\"string\"},\"old_string\":{\"type\":"
     "\"string\"},\"new_string\":{\"type\":\"string\"}},\"required\":[\"path\",\"old_string\","
     "\"new_string\"]}"},
    {"list_files",
     "List the files under a directory of the sandbox (default /workspace), 4 levels deep.",
     "{\"type\":\"object\",\"properties\":{\"path\":{\"type\":\"string\"}}}"},
    {"host_tool",
     "Call a host tool through Airlock's tool gateway (the operator's policy decides which).",
     "{\"type\":\"object\",\"properties\":{\"name\":{\"type\":\"string\"},\"arguments\":{\"type\":"
     "\"object\"}},\"required\":[\"name\"]}"},
};

size_t agent_tools(bool host_tools, const struct agent_tool_def **ret)
{
        *ret = tool_defs;
        return ARRAY_SIZE(tool_defs) - (host_tools ? 0 : 1);
}

char *agent_text_for_model(const char *s, size_t len, uint64_t total, size_t cap)
{
        size_t out_max = cap + 3 * (len < cap ? len : cap) / 1 + 256;
        char *out = xcalloc(out_max + 1, 1);
        size_t o = 0, i = 0;
        while (i < len && o < cap) {
                uint32_t cp;
                int n = utf8_decode_char((const unsigned char *)s + i, len - i, &cp);
                if (n < 0 || cp == 0) {
                        memcpy(out + o, "\xef\xbf\xbd", 3); /* U+FFFD */
                        o += 3;
                        i += 1;
                        continue;
                }
                memcpy(out + o, s + i, (size_t)n);
                o += (size_t)n;
                i += (size_t)n;
        }
        uint64_t left = total > i ? total - i : 0;
        if (left)
                o += (size_t)snprintf(
                    out + o, out_max + 1 - o,
                    "\n[airlock: output truncated, %" PRIu64 " more bytes not shown]", left);
        out[o] = '\0';
        return out;
}

static const char *arg_str(json_t *in, const char *key)
{
        return json_string_value(json_object_get(in, key));
}

static int run(const struct agent_config *cfg, char *const *argv, const void *in, size_t in_len,
               unsigned timeout, size_t cap, struct agent_exec_result *r, json_t *rec,
               struct al_error *err)
{
        int rr = agent_exec(cfg->control_socket, argv, in, in_len, timeout, cap, r, err);
        if (rr >= 0) {
                json_object_set_new(rec, "pid", json_integer(r->pid));
                json_object_set_new(rec, "exitCode", json_integer(r->exit_code));
                json_object_set_new(rec, "errorCode",
                                    r->error_code[0] ? json_string(r->error_code) : json_null());
        }
        return rr;
}

static char *exec_text(const struct agent_config *cfg, const struct agent_exec_result *r)
{
        _cleanup_free_ char *body =
            agent_text_for_model(r->out, r->out_len, r->out_total, cfg->budget.output_cap);
        if (r->error_code[0] && STREQ(r->error_code, "timeout"))
                return xasprintf("%s\n[airlock: the command was killed at its timeout (exit %d)]",
                                 body, r->exit_code);
        if (r->exit_code != 0)
                return xasprintf("%s\n[exit code %d%s%s]", body, r->exit_code,
                                 r->error_code[0] ? ", " : "", r->error_code);
        return TAKE_PTR(body);
}

static int do_edit(const struct agent_config *cfg, json_t *in, char **ret_text, bool *ret_error,
                   json_t *rec, struct al_error *err)
{
        const char *path = arg_str(in, "path"), *old = arg_str(in, "old_string"),
                   *new = arg_str(in, "new_string");
        if (!path || !old || !new || !old[0]) {
                *ret_text = xstrdup("edit: give path, a non-empty old_string and new_string");
                *ret_error = true;
                return 0;
        }
        char *argv_cat[] = {"cat", "--", (char *)path, NULL};
        struct agent_exec_result r = {0};
        int rr = run(cfg, argv_cat, NULL, 0, 30, EDIT_FILE_MAX, &r, rec, err);
        if (rr < 0)
                return rr;
        if (r.exit_code != 0 || r.out_total > EDIT_FILE_MAX || memchr(r.out, '\0', r.out_len)) {
                *ret_text = r.exit_code != 0 ? xasprintf("edit: cannot read %s: %s", path, r.out)
                                             : xasprintf("edit: %s is too large or binary", path);
                *ret_error = true;
                agent_exec_result_clear(&r);
                return 0;
        }
        size_t count = 0, olen = strlen(old);
        const char *at = NULL;
        for (const char *p = r.out; (p = strstr(p, old)); p += 1) {
                if (!at)
                        at = p;
                count++;
        }
        if (count != 1) {
                *ret_text = count ? xasprintf("edit: old_string occurs %zu times in %s; give "
                                              "more context so that it is unique",
                                              count, path)
                                  : xasprintf("edit: old_string not found in %s", path);
                *ret_error = true;
                agent_exec_result_clear(&r);
                return 0;
        }
        size_t pre = (size_t)(at - r.out), nlen = strlen(new);
        size_t total = r.out_len - olen + nlen;
        _cleanup_free_ char *buf = xcalloc(total + 1, 1);
        memcpy(buf, r.out, pre);
        memcpy(buf + pre, new, nlen);
        memcpy(buf + pre + nlen, r.out + pre + olen, r.out_len - pre - olen);
        agent_exec_result_clear(&r);
        char *argv_w[] = {"/bin/sh", "-c", "cat > \"$1\"", "sh", (char *)path, NULL};
        rr = run(cfg, argv_w, buf, total, 30, 4096, &r, rec, err);
        if (rr < 0)
                return rr;
        *ret_error = r.exit_code != 0;
        *ret_text = r.exit_code ? xasprintf("edit: writing %s failed: %s", path, r.out)
                                : xasprintf("edited %s", path);
        agent_exec_result_clear(&r);
        return 0;
}

int agent_tool_run(const struct agent_config *cfg, const struct agent_tool_call *call,
                   char **ret_text, bool *ret_error, json_t **ret_record, struct al_error *err)
{
        json_t *in = call->input;
        json_t *rec = json_object();
        struct agent_exec_result r = {0};
        size_t cap = cfg->budget.output_cap + 1024;
        int rr = 0;
        *ret_text = NULL;
        *ret_error = false;
        if (json_object_get(in, "_invalid")) {
                *ret_text = xstrdup("the arguments were not a JSON object");
                *ret_error = true;
        } else if (STREQ(call->name, "bash")) {
                const char *cmd = arg_str(in, "command");
                json_t *jt = json_object_get(in, "timeout");
                unsigned t = cfg->budget.cmd_timeout;
                if (json_is_integer(jt) && json_integer_value(jt) > 0 &&
                    (uint64_t)json_integer_value(jt) < t)
                        t = (unsigned)json_integer_value(jt);
                if (!cmd) {
                        *ret_text = xstrdup("bash: give \"command\"");
                        *ret_error = true;
                } else {
                        char *argv[] = {"/bin/sh", "-c", (char *)cmd, NULL};
                        json_object_set_new(rec, "timeout", json_integer(t));
                        rr = run(cfg, argv, NULL, 0, t, cap, &r, rec, err);
                        if (rr >= 0) {
                                *ret_text = exec_text(cfg, &r);
                                *ret_error = r.exit_code != 0;
                        }
                }
        } else if (STREQ(call->name, "read_file")) {
                const char *path = arg_str(in, "path");
                char *argv[] = {"cat", "--", (char *)(path ? path : ""), NULL};
                rr = run(cfg, argv, NULL, 0, 30, cap, &r, rec, err);
                if (rr >= 0) {
                        *ret_text = exec_text(cfg, &r);
                        *ret_error = r.exit_code != 0;
                }
        } else if (STREQ(call->name, "write_file")) {
                const char *path = arg_str(in, "path"), *content = arg_str(in, "content");
                if (!path || !content) {
                        *ret_text = xstrdup("write_file: give \"path\" and \"content\"");
                        *ret_error = true;
                } else {
                        char *argv[] = {"/bin/sh",
                                        "-c",
                                        "mkdir -p -- \"$(dirname -- \"$1\")\" && cat > \"$1\"",
                                        "sh",
                                        (char *)path,
                                        NULL};
                        rr = run(cfg, argv, content, strlen(content), 30, 4096, &r, rec, err);
                        if (rr >= 0) {
                                *ret_error = r.exit_code != 0;
                                *ret_text = r.exit_code ? exec_text(cfg, &r)
                                                        : xasprintf("wrote %zu bytes to %s",
                                                                    strlen(content), path);
                        }
                }
        } else if (STREQ(call->name, "edit")) {
                rr = do_edit(cfg, in, ret_text, ret_error, rec, err);
        } else if (STREQ(call->name, "list_files")) {
                const char *path = arg_str(in, "path");
                /* A path that find would take for an expression. */
                _cleanup_free_ char *start = !path            ? xstrdup(".")
                                             : path[0] == '-' ? xasprintf("./%s", path)
                                                              : xstrdup(path);
                char *argv[] = {"find", start,    "-maxdepth", "4",      "-name",
                                ".git", "-prune", "-o",        "-print", NULL};
                rr = run(cfg, argv, NULL, 0, 30, cap, &r, rec, err);
                if (rr >= 0) {
                        *ret_text = exec_text(cfg, &r);
                        *ret_error = r.exit_code != 0;
                }
        } else if (STREQ(call->name, "host_tool") && cfg->host_tools) {
                const char *name = arg_str(in, "name");
                json_t *args = json_object_get(in, "arguments");
                _cleanup_free_ char *js =
                    json_is_object(args) ? json_dumps(args, JSON_COMPACT) : xstrdup("{}");
                if (!name) {
                        *ret_text = xstrdup("host_tool: give \"name\"");
                        *ret_error = true;
                } else {
                        /* The sandbox's own client: the gateway decides
                         * (policy_denied and the rest come back as its
                         * answer). */
                        char *argv[] = {"airlock-tool", "call", (char *)name, "--json", js, NULL};
                        json_object_set_new(rec, "tool", json_string(name));
                        rr = run(cfg, argv, NULL, 0, cfg->budget.cmd_timeout, cap, &r, rec, err);
                        if (rr >= 0) {
                                *ret_text = exec_text(cfg, &r);
                                *ret_error = r.exit_code != 0;
                        }
                }
        } else {
                *ret_text = xasprintf("unknown tool \"%.128s\"", call->name);
                *ret_error = true;
        }
        agent_exec_result_clear(&r);
        if (rr < 0) {
                json_decref(rec);
                return rr;
        }
        *ret_record = rec;
        return 0;
}
