/* SPDX-License-Identifier: Apache-2.0 */
/* tools.define: the host tools a sandbox may be allowed to call through the
 * tool gateway (docs/tools.md). Each definition is checked whole at load,
 * the cross-references (tools.allow names, HTTP routes) at finalize, so
 * that a definitions file may come after the policy that allows its tools.
 * A definition is host configuration: what it runs is the operator's
 * choice, but never a shell, and an argument never becomes more than one
 * whole argv element. */
#include <errno.h>
#include <fcntl.h>
#include <fnmatch.h>
#include <inttypes.h>
#include <jansson.h>
#include <limits.h>
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "policy-internal.h"
#include "tools-internal.h"
#include "schema.h"
#include "utf8.h"

#define TOOLS_MAX         256
#define TOOL_ARGV_MAX     256
#define TOOL_ELEMENT_MAX  4096
#define TOOL_DESC_MAX     1024
#define TOOL_TIMEOUT_MAX  (60ULL * 60 * 1000)
#define TOOL_OUTPUT_LIMIT (64ULL << 20)
#define TOOL_RATE_LIMIT   100000
#define TOOL_CONCURRENCY  64 /* TOOLGATE_PENDING_MAX */
#define TOOLS_FILE_MAX    (1024 * 1024)

#define TOOL_TIMEOUT_DEFAULT 30000
#define TOOL_OUTPUT_DEFAULT  (1ULL << 20)
#define TOOL_RATE_DEFAULT    60
/* A built-in costs no process: as many as the sandbox may make. */
#define TOOL_RATE_BUILTIN        600
#define TOOL_CONCURRENCY_DEFAULT 4

/* The built-in tools: answered by the gateway itself (toolgate/builtin.c). */
static const struct {
        const char *name, *description, *schema;
} builtins[] = {
    {"core.time", "The host's current time: UTC in RFC 3339 and Unix seconds.",
     "{\"type\":\"object\",\"properties\":{}}"},
};

bool policy_tool_builtin(const char *name)
{
        for (size_t i = 0; i < ARRAY_SIZE(builtins); i++)
                if (STREQ(builtins[i].name, name))
                        return true;
        return false;
}

/* "${args.NAME}" as a whole string: NAME, else NULL. */
const char *policy_tool_placeholder(const char *s, char *name, size_t size)
{
        size_t len = strlen(s);
        if (len < 9 || strncmp(s, "${args.", 7) != 0 || s[len - 1] != '}')
                return NULL;
        size_t n = len - 8;
        if (n == 0 || n >= size)
                return NULL;
        memcpy(name, s + 7, n);
        name[n] = '\0';
        if (strpbrk(name, "${}"))
                return NULL;
        return name;
}

int policy_tool_fail_key(struct tool_ctx *tc, const char *key, const char *fmt, ...)
{
        char msg[AL_ERROR_MAX / 2];
        va_list ap;

        va_start(ap, fmt);
        vsnprintf(msg, sizeof(msg), fmt, ap);
        va_end(ap);
        return policy_fail(tc->c, "tool \"%s\": \"%s\" %s", tc->t->name, key, msg);
}

static int get_duration(struct tool_ctx *tc, const char *key, json_t *v, uint64_t max,
                        uint64_t *ret)
{
        uint64_t ms = 0;
        if (json_is_integer(v) && json_integer_value(v) > 0 &&
            (uint64_t)json_integer_value(v) <= max / 1000)
                ms = (uint64_t)json_integer_value(v) * 1000;
        else if (json_is_real(v) && isfinite(json_real_value(v)) && json_real_value(v) > 0 &&
                 json_real_value(v) * 1000.0 <= (double)max)
                ms = (uint64_t)(json_real_value(v) * 1000.0 + 0.5);
        else if (json_is_string(v) &&
                 policy_parse_text(json_string_value(v), KIND_DURATION, &ms) < 0)
                ms = 0;
        if (ms == 0 || ms > max)
                return policy_tool_fail_key(tc, key,
                                            "must be a duration from 1ms to %" PRIu64
                                            "s, in seconds or "
                                            "a string such as \"10s\"",
                                            max / 1000);
        *ret = ms;
        return 0;
}

static int get_number(struct tool_ctx *tc, const char *key, json_t *v, bool size, uint64_t max,
                      uint64_t *ret)
{
        uint64_t x = 0;
        if (json_is_integer(v) && json_integer_value(v) > 0)
                x = (uint64_t)json_integer_value(v);
        else if (size && json_is_string(v) && parse_size(json_string_value(v), &x) < 0)
                x = 0;
        if (x == 0 || x > max)
                return policy_tool_fail_key(
                    tc, key, "must be %s from 1 to %" PRIu64,
                    size ? "a size (bytes, or a string such as \"1M\")" : "an integer", max);
        *ret = x;
        return 0;
}

static int parse_command(struct tool_ctx *tc, json_t *v)
{
        struct policy_tool *t = tc->t;
        size_t i;
        json_t *e;

        if (!json_is_array(v) || json_array_size(v) == 0 || json_array_size(v) > TOOL_ARGV_MAX)
                return policy_tool_fail_key(
                    tc, "command", "must be an array of 1 to %d strings (the argv)", TOOL_ARGV_MAX);
        t->argv = xcalloc(json_array_size(v) + 1, sizeof(char *));
        json_array_foreach(v, i, e)
        {
                if (!json_is_string(e) || json_string_length(e) > TOOL_ELEMENT_MAX ||
                    strlen(json_string_value(e)) != json_string_length(e))
                        return policy_tool_fail_key(
                            tc, "command",
                            "element %zu must be a string of at most %d bytes "
                            "without NUL",
                            i, TOOL_ELEMENT_MAX);
                t->argv[i] = xstrdup(json_string_value(e));
                t->n_argv = i + 1;
        }
        return 0;
}

/* HTTP path and body: placeholders name scalar arguments; nothing else is
 * expanded there (secrets travel in the route's injected headers). */
static int check_http_template(struct tool_ctx *tc, const char *key, const char *s)
{
        char name[160];
        const char *p = s;

        while ((p = strstr(p, "${"))) {
                const char *end = strchr(p, '}');
                if (strncmp(p, "${args.", 7) != 0 || !end || (size_t)(end - p) + 1 >= sizeof(name))
                        return policy_tool_fail_key(
                            tc, key,
                            "may hold only \"${args.NAME}\" placeholders (secrets "
                            "go in the route's inject)");
                size_t n = (size_t)(end - p) - 7;
                memcpy(name, p + 7, n);
                name[n] = '\0';
                enum tool_schema_type type;
                if (tool_schema_property(tc->t->schema, name, &type, NULL) < 0)
                        return policy_tool_fail_key(
                            tc, key, "names \"%s\", which \"args\" does not define", SHOWN(name));
                if (type == TOOL_SCHEMA_ARRAY || type == TOOL_SCHEMA_OBJECT)
                        return policy_tool_fail_key(
                            tc, key,
                            "names \"%s\", an array or object; only scalars "
                            "are substituted",
                            SHOWN(name));
                p = end + 1;
        }
        return 0;
}

static int parse_http(struct tool_ctx *tc, json_t *v)
{
        static const char *const methods[] = {"GET", "POST", "PUT", "PATCH", "DELETE", "HEAD"};
        struct policy_tool *t = tc->t;
        const char *key;
        json_t *e;

        if (!json_is_object(v))
                return policy_tool_fail_key(tc, "http",
                                            "must be an object {\"route\", \"method\", \"path\"}");
        json_object_foreach(v, key, e)
        {
                if (STREQ(key, "body")) {
                        t->body = json_is_string(e) ? xstrdup(json_string_value(e))
                                                    : json_dumps(e, JSON_COMPACT | JSON_ENCODE_ANY);
                        continue;
                }
                if (!STREQ(key, "route") && !STREQ(key, "method") && !STREQ(key, "path"))
                        return policy_tool_fail_key(tc, "http",
                                                    "has an unknown key \"%s\" (route, method, "
                                                    "path, body)",
                                                    SHOWN(key));
                if (!json_is_string(e) || strlen(json_string_value(e)) != json_string_length(e))
                        return policy_tool_fail_key(tc, "http", "\"%s\" must be a string", key);
                char **f = STREQ(key, "route")    ? &t->route
                           : STREQ(key, "method") ? &t->method
                                                  : &t->path;
                *f = xstrdup(json_string_value(e));
        }
        if (!t->route || !t->method || !t->path)
                return policy_tool_fail_key(tc, "http", "needs \"route\", \"method\" and \"path\"");
        bool ok = false;
        for (size_t i = 0; i < ARRAY_SIZE(methods); i++)
                ok = ok || STREQ(methods[i], t->method);
        if (!ok)
                return policy_tool_fail_key(tc, "http.method",
                                            "must be one of GET, POST, PUT, PATCH, DELETE, "
                                            "HEAD");
        if (t->path[0] != '/' || strpbrk(t->path, " \r\n\t#"))
                return policy_tool_fail_key(tc, "http.path",
                                            "must start with \"/\" and hold no spaces, "
                                            "control characters or \"#\"");
        int r = check_http_template(tc, "http.path", t->path);
        if (r >= 0 && t->body)
                r = check_http_template(tc, "http.body", t->body);
        return r;
}

/* The templates an environment value may hold, checked here so that a
 * typo fails at load rather than at the first call: ${secret:NAME},
 * ${run.id}, ${sandbox.id}, ${account}; "$${" is a literal "${". */
static bool env_template_ok(const char *s)
{
        static const char *const vars[] = {"${run.id}", "${sandbox.id}", "${account}"};
        for (const char *p = s; (p = strstr(p, "${"));) {
                if (p > s && p[-1] == '$') {
                        p += 2;
                        continue;
                }
                bool ok = false;
                for (size_t i = 0; i < ARRAY_SIZE(vars) && !ok; i++)
                        if (strncmp(p, vars[i], strlen(vars[i])) == 0) {
                                ok = true;
                                p += strlen(vars[i]);
                        }
                if (!ok && strncmp(p, "${secret:", 9) == 0) {
                        const char *q = p + 9;
                        if ((*q >= 'A' && *q <= 'Z') || (*q >= 'a' && *q <= 'z') || *q == '_') {
                                while ((*q >= 'A' && *q <= 'Z') || (*q >= 'a' && *q <= 'z') ||
                                       (*q >= '0' && *q <= '9') || *q == '_')
                                        q++;
                                ok = *q == '}';
                                p = q + 1;
                        }
                }
                if (!ok)
                        return false;
        }
        return true;
}

static int parse_env(struct tool_ctx *tc, json_t *v)
{
        struct policy_tool *t = tc->t;
        const char *key;
        json_t *e;

        if (!json_is_object(v))
                return policy_tool_fail_key(tc, "env", "must be an object of strings");
        t->env = xcalloc(json_object_size(v), sizeof(*t->env));
        json_object_foreach(v, key, e)
        {
                bool name_ok = (key[0] >= 'A' && key[0] <= 'Z') ||
                               (key[0] >= 'a' && key[0] <= 'z') || key[0] == '_';
                for (const char *s = key; *s; s++)
                        name_ok =
                            name_ok && ((*s >= 'A' && *s <= 'Z') || (*s >= 'a' && *s <= 'z') ||
                                        (*s >= '0' && *s <= '9') || *s == '_');
                if (!name_ok)
                        return policy_tool_fail_key(tc, "env",
                                                    "key \"%s\" must be a name of letters, digits "
                                                    "and _",
                                                    SHOWN(key));
                if (!json_is_string(e) || strlen(json_string_value(e)) != json_string_length(e) ||
                    !utf8_str_valid(json_string_value(e)))
                        return policy_tool_fail_key(tc, "env", "\"%s\" must be a UTF-8 string",
                                                    key);
                if (!env_template_ok(json_string_value(e)))
                        return policy_tool_fail_key(
                            tc, "env",
                            "\"%s\": a template must be ${secret:NAME}, ${run.id}, "
                            "${sandbox.id} or ${account} (\"$${\" for a literal)",
                            key);
                t->env[t->n_env].key = xstrdup(key);
                t->env[t->n_env].value = xstrdup(json_string_value(e));
                t->n_env++;
        }
        return 0;
}

static int check_name(struct ctx *c, const char *name)
{
        size_t n = 0;
        bool ok = true;
        for (; name[n]; n++)
                if (!(name[n] >= 'a' && name[n] <= 'z') && !(name[n] >= 'A' && name[n] <= 'Z') &&
                    !(name[n] >= '0' && name[n] <= '9') && !strchr("._:-", name[n]))
                        ok = false;
        if (!ok || n == 0 || n > 128)
                return policy_fail(c,
                                   "\"tools.define\": the tool name \"%s\" must be 1 to 128 of "
                                   "letters, digits and . _ : -",
                                   SHOWN(name));
        if (strncmp(name, "core.", 5) == 0)
                return policy_fail(c,
                                   "\"tools.define\": \"%s\": names starting \"core.\" are the "
                                   "built-in tools'",
                                   SHOWN(name));
        return 0;
}

static int parse_tool(struct ctx *c, struct policy_tool *t, json_t *def)
{
        struct tool_ctx tc = {.c = c, .t = t, .def = def};
        const char *key;
        json_t *v;
        int r = 0;

        t->timeout_ms = TOOL_TIMEOUT_DEFAULT;
        t->output_max = TOOL_OUTPUT_DEFAULT;
        t->rate_per_min = TOOL_RATE_DEFAULT;
        t->concurrency = TOOL_CONCURRENCY_DEFAULT;
        t->clamp = POLICY_TOOL_CLAMP;
        if (!json_is_object(def))
                return policy_fail(c, "tool \"%s\": the definition must be an object", t->name);

        json_t *args = json_object_get(def, "args");
        json_t *dflt = json_pack("{s:s, s:{}}", "type", "object", "properties");
        char why[256];
        t->schema = tool_schema_compile(args ? args : dflt, why, sizeof(why));
        if (t->schema)
                t->schema_json = json_dumps(args ? args : dflt, JSON_COMPACT | JSON_SORT_KEYS);
        json_decref(dflt);
        if (!t->schema)
                return policy_fail(c, "tool \"%s\": \"args\": %s", t->name, why);

        json_object_foreach(def, key, v)
        {
                uint64_t x;
                if (STREQ(key, "args"))
                        continue;
                if (STREQ(key, "description")) {
                        if (!json_is_string(v) || json_string_length(v) > TOOL_DESC_MAX ||
                            strlen(json_string_value(v)) != json_string_length(v))
                                return policy_tool_fail_key(&tc, key,
                                                            "must be a string of at most %d bytes",
                                                            TOOL_DESC_MAX);
                        free(t->description);
                        t->description = xstrdup(json_string_value(v));
                } else if (STREQ(key, "command") || STREQ(key, "http")) {
                        if (t->runner != POLICY_TOOL_BUILTIN)
                                return policy_fail(c,
                                                   "tool \"%s\": give one runner, \"command\" or "
                                                   "\"http\", not both",
                                                   t->name);
                        t->runner = STREQ(key, "command") ? POLICY_TOOL_COMMAND : POLICY_TOOL_HTTP;
                        r = STREQ(key, "command") ? parse_command(&tc, v) : parse_http(&tc, v);
                } else if (STREQ(key, "env"))
                        r = parse_env(&tc, v);
                else if (STREQ(key, "timeout")) {
                        r = get_duration(&tc, key, v, TOOL_TIMEOUT_MAX, &x);
                        t->timeout_ms = (uint32_t)x;
                } else if (STREQ(key, "outputMax")) {
                        r = get_number(&tc, key, v, true, TOOL_OUTPUT_LIMIT, &x);
                        t->output_max = x;
                } else if (STREQ(key, "rate")) {
                        r = get_number(&tc, key, v, false, TOOL_RATE_LIMIT, &x);
                        t->rate_per_min = (uint32_t)x;
                } else if (STREQ(key, "concurrency")) {
                        r = get_number(&tc, key, v, false, TOOL_CONCURRENCY, &x);
                        t->concurrency = (uint32_t)x;
                } else if (STREQ(key, "clamp")) {
                        if (!json_is_string(v) || (!STREQ(json_string_value(v), "clamp") &&
                                                   !STREQ(json_string_value(v), "refuse")))
                                return policy_tool_fail_key(&tc, key,
                                                            "must be \"clamp\" or \"refuse\"");
                        t->clamp = STREQ(json_string_value(v), "clamp") ? POLICY_TOOL_CLAMP
                                                                        : POLICY_TOOL_REFUSE;
                } else
                        return policy_fail(
                            c,
                            "tool \"%s\": unknown key \"%s\" (description, args, command, "
                            "http, env, timeout, outputMax, rate, concurrency, clamp)",
                            t->name, SHOWN(key));
                if (r < 0)
                        return r;
        }
        if (t->runner == POLICY_TOOL_BUILTIN)
                return policy_fail(
                    c, "tool \"%s\": needs a runner: \"command\" (an argv) or \"http\"", t->name);
        if (t->runner == POLICY_TOOL_COMMAND)
                return policy_tool_check_command(&tc);
        if (t->n_env)
                return policy_tool_fail_key(&tc, "env",
                                            "applies to \"command\" tools only (an HTTP tool's "
                                            "headers come from its route)");
        return 0;
}

int policy_tools_parse_define(struct ctx *c, struct policy *p, json_t *v)
{
        const char *name;
        json_t *def;

        if (!json_is_object(v))
                return policy_fail(c, "\"%s\" must be an object of tool definitions", c->path);
        if (p->n_tools + json_object_size(v) > TOOLS_MAX)
                return policy_fail(c, "\"%s\": more than %d tools", c->path, TOOLS_MAX);
        json_object_foreach(v, name, def)
        {
                int r = check_name(c, name);
                if (r < 0)
                        return r;
                if (policy_tool_find(p, name))
                        return policy_fail(c, "tool \"%s\" is defined twice", SHOWN(name));
                p->tools = xrealloc(p->tools, p->n_tools + 1, sizeof(*p->tools));
                struct policy_tool *t = &p->tools[p->n_tools++];
                memset(t, 0, sizeof(*t));
                t->name = xstrdup(name);
                r = parse_tool(c, t, def);
                if (r < 0)
                        return r;
        }
        return 0;
}

int policy_tools_load_file(struct policy *p, const char *path, struct al_error *err)
{
        struct ctx c = {.origin = path, .err = err};
        _cleanup_free_ char *text = NULL;
        size_t len = 0;
        json_error_t jerr;

        int r = read_file_at(AT_FDCWD, path, TOOLS_FILE_MAX + 1, &text, &len);
        if (r == -EFBIG || (r >= 0 && len > TOOLS_FILE_MAX))
                return al_error_set(err, EFBIG, "%s: larger than 1 MiB, refused", path);
        if (r < 0)
                return al_error_set(err, r, "reading tool definitions \"%s\"", path);
        json_t *doc = json_loadb(text, len, JSON_REJECT_DUPLICATES, &jerr);
        if (!doc)
                return al_error_set(err, 0, "%s:%d:%d: %s", path, jerr.line, jerr.column,
                                    jerr.text);
        const char *key;
        json_t *v;
        if (!json_is_object(doc))
                r = policy_fail(&c, "the document must be a JSON object {\"define\": {...}}");
        json_object_foreach(doc, key, v) if (r >= 0 && !STREQ(key, "define")) r = policy_fail(
            &c, "unknown key \"%s\": a definitions file holds {\"define\": {...}}", SHOWN(key));
        _cleanup_(policy_freep) struct policy *t = policy_dup(p);
        if (r >= 0 && (v = json_object_get(doc, "define"))) {
                policy_path_push(&c, "define");
                r = policy_tools_parse_define(&c, t, v);
        }
        json_decref(doc);
        if (r < 0)
                return r;
        policy_commit(p, TAKE_PTR(t));
        return 0;
}

const struct policy_tool *policy_tool_find(const struct policy *p, const char *name)
{
        for (size_t i = 0; name && i < p->n_tools; i++)
                if (STREQ(p->tools[i].name, name))
                        return &p->tools[i];
        return NULL;
}

static bool allow_matches(const char *pattern, const char *name)
{
        if (strchr(pattern, '*'))
                return fnmatch(pattern, name, 0) == 0;
        return STREQ(pattern, name);
}

bool policy_tool_allowed(const struct policy *p, const char *name)
{
        for (size_t i = 0; name && i < p->n_tools_allow; i++)
                if (allow_matches(p->tools_allow[i], name))
                        return true;
        return false;
}

static void add_builtin(struct policy *p, size_t k)
{
        char why[128];
        json_t *doc = json_loads(builtins[k].schema, 0, NULL);
        p->tools = xrealloc(p->tools, p->n_tools + 1, sizeof(*p->tools));
        struct policy_tool *t = &p->tools[p->n_tools++];
        *t = (struct policy_tool){
            .name = xstrdup(builtins[k].name),
            .description = xstrdup(builtins[k].description),
            .schema = tool_schema_compile(doc, why, sizeof(why)),
            .schema_json = xstrdup(builtins[k].schema),
            .runner = POLICY_TOOL_BUILTIN,
            .timeout_ms = TOOL_TIMEOUT_DEFAULT,
            .output_max = TOOL_OUTPUT_DEFAULT,
            .rate_per_min = TOOL_RATE_BUILTIN,
            .concurrency = TOOL_CONCURRENCY_DEFAULT,
        };
        json_decref(doc);
}

int policy_tools_finalize(struct ctx *c, struct policy *p)
{
        for (size_t i = 0; i < p->n_tools_allow; i++) {
                const char *a = p->tools_allow[i];
                bool found = false;
                for (size_t k = 0; k < ARRAY_SIZE(builtins); k++)
                        if (allow_matches(a, builtins[k].name)) {
                                found = true;
                                if (!policy_tool_find(p, builtins[k].name))
                                        add_builtin(p, k);
                        }
                for (size_t k = 0; k < p->n_tools && !found; k++)
                        found = allow_matches(a, p->tools[k].name);
                if (!found)
                        return policy_fail(
                            c,
                            "\"tools.allow[%zu]\" names \"%s\", which is neither a "
                            "built-in tool (core.time) nor defined in \"tools.define\" "
                            "or a definitions file (--tools); define it (docs/tools.md) "
                            "or remove it",
                            i, SHOWN(a));
        }
        for (size_t k = 0; k < p->n_tools; k++) {
                const struct policy_tool *t = &p->tools[k];
                if (t->runner != POLICY_TOOL_HTTP)
                        continue;
                bool found = false;
                for (size_t i = 0; i < p->n_routes && !found; i++)
                        found = p->routes[i].name && STREQ(p->routes[i].name, t->route);
                if (!found)
                        return policy_fail(
                            c,
                            "tool \"%s\": \"http.route\" names \"%s\", which is not in "
                            "\"network.routes\"; add the route or fix the name",
                            t->name, SHOWN(t->route));
        }
        return 0;
}

/* Ownership */

void policy_tools_free_n(struct policy_tool *t, size_t n)
{
        for (size_t i = 0; t && i < n; i++) {
                free(t[i].name);
                free(t[i].description);
                tool_schema_unref(t[i].schema);
                free(t[i].schema_json);
                strv_free_n(t[i].argv, t[i].n_argv);
                policy_kv_free_n(t[i].env, t[i].n_env);
                free(t[i].route);
                free(t[i].method);
                free(t[i].path);
                free(t[i].body);
        }
        free(t);
}

struct policy_tool *policy_tools_dup_n(const struct policy_tool *t, size_t n)
{
        if (!t)
                return NULL;
        struct policy_tool *d = xcalloc(n ? n : 1, sizeof(*d));
        for (size_t i = 0; i < n; i++) {
                d[i] = t[i];
                d[i].name = xstrdup(t[i].name);
                d[i].description = xstrdup(t[i].description);
                d[i].schema = tool_schema_ref(t[i].schema);
                d[i].schema_json = xstrdup(t[i].schema_json);
                d[i].argv = NULL;
                d[i].n_argv = 0;
                for (size_t k = 0; k < t[i].n_argv; k++)
                        d[i].argv = strv_append(d[i].argv, &d[i].n_argv, t[i].argv[k]);
                d[i].env = t[i].n_env ? xcalloc(t[i].n_env, sizeof(*d[i].env)) : NULL;
                for (size_t k = 0; k < t[i].n_env; k++) {
                        d[i].env[k].key = xstrdup(t[i].env[k].key);
                        d[i].env[k].value = xstrdup(t[i].env[k].value);
                }
                d[i].route = xstrdup(t[i].route);
                d[i].method = xstrdup(t[i].method);
                d[i].path = xstrdup(t[i].path);
                d[i].body = xstrdup(t[i].body);
        }
        return d;
}

/* tools.define as it is read back: the built-ins are left out (they need
 * no definition, and a document may not define them). */
json_t *policy_tools_define_json(const struct policy *p)
{
        json_t *o = json_object();
        for (size_t i = 0; i < p->n_tools; i++) {
                const struct policy_tool *t = &p->tools[i];
                if (t->runner == POLICY_TOOL_BUILTIN)
                        continue;
                json_t *d = json_object();
                if (t->description)
                        json_object_set_new(d, "description", json_string(t->description));
                json_object_set_new(d, "args", json_loads(t->schema_json, 0, NULL));
                if (t->runner == POLICY_TOOL_COMMAND) {
                        json_t *a = json_array();
                        for (size_t k = 0; k < t->n_argv; k++)
                                json_array_append_new(a, json_string(t->argv[k]));
                        json_object_set_new(d, "command", a);
                        json_t *e = json_object();
                        for (size_t k = 0; k < t->n_env; k++)
                                json_object_set_new(e, t->env[k].key, json_string(t->env[k].value));
                        json_object_set_new(d, "env", e);
                } else {
                        json_t *h = json_pack("{s:s, s:s, s:s}", "route", t->route, "method",
                                              t->method, "path", t->path);
                        if (t->body)
                                json_object_set_new(h, "body", json_string(t->body));
                        json_object_set_new(d, "http", h);
                }
                json_object_set_new(d, "timeout",
                                    t->timeout_ms % 1000 == 0
                                        ? json_integer(t->timeout_ms / 1000)
                                        : json_real((double)t->timeout_ms / 1000.0));
                json_object_set_new(d, "outputMax", json_integer((json_int_t)t->output_max));
                json_object_set_new(d, "rate", json_integer(t->rate_per_min));
                json_object_set_new(d, "concurrency", json_integer(t->concurrency));
                json_object_set_new(
                    d, "clamp", json_string(t->clamp == POLICY_TOOL_CLAMP ? "clamp" : "refuse"));
                json_object_set_new(o, t->name, d);
        }
        return o;
}
