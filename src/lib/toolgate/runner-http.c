/* SPDX-License-Identifier: Apache-2.0 */
#include <errno.h>
#include <stdio.h>
#include <string.h>

#include <event2/buffer.h>
#include <jansson.h>

#include "netgate/netgate.h"
#include "policy.h"
#include "secrets.h"
#include "toolgate-internal.h"
#include "utf8.h"
#include "util.h"

/* The HTTP runner: a tool whose runner is "http" sends one request through
 * a policy route with netgate_route_fetch(), so the route's inject, strip,
 * record and CA rules, the private address check, the connect, the TLS
 * verification, the budgets and the record are the network gate's own.
 * Here: the path and body templates filled from the arguments, the call's
 * timeout and output cap, status >= 400 as tool_failed, the answer (JSON
 * when it is JSON, else text) as the value, and every byte of it through
 * the secrets' redactor before it leaves the host. */

#define ARGS_PREFIX     "${args."
#define ARGS_PREFIX_LEN (sizeof(ARGS_PREFIX) - 1)
#define ARG_NAME_MAX    128
#define BODY_DEPTH_MAX  32

/* ---- the templates ---- */

static void evbuffer_freep(struct evbuffer **b)
{
        if (*b)
                evbuffer_free(*b);
}

/* A placeholder "${args.NAME}" at s: its length (0 when none), the NAME. */
static size_t placeholder(const char *s, const char **ret_name, size_t *ret_len)
{
        if (strncmp(s, ARGS_PREFIX, ARGS_PREFIX_LEN) != 0)
                return 0;
        const char *name = s + ARGS_PREFIX_LEN, *end = strchr(name, '}');
        if (!end || end == name || (size_t)(end - name) > ARG_NAME_MAX)
                return 0;
        *ret_name = name;
        *ret_len = (size_t)(end - name);
        return (size_t)(end + 1 - s);
}

/* How an argument's value is written where its placeholder stands. */
enum fill_mode {
        FILL_TEXT,    /* a string's bytes, a number's or a boolean's JSON text,
                       * nothing when absent or null; never an array or object */
        FILL_PERCENT, /* the same, every byte but the unreserved ones
                       * percent-encoded */
        FILL_JSON,    /* JSON-encoded: a string with its quotes and escapes */
};

static bool unreserved(unsigned char c)
{
        return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') ||
               c == '-' || c == '.' || c == '_' || c == '~';
}

static void put_bytes(struct evbuffer *out, const char *b, size_t n, enum fill_mode mode)
{
        static const char hex[] = "0123456789ABCDEF";
        if (mode != FILL_PERCENT) {
                evbuffer_add(out, b, n);
                return;
        }
        for (size_t i = 0; i < n; i++) {
                unsigned char c = (unsigned char)b[i];
                char e[3] = {'%', hex[c >> 4], hex[c & 15]};
                if (unreserved(c))
                        evbuffer_add(out, &b[i], 1);
                else
                        evbuffer_add(out, e, 3);
        }
}

static int arg_write(const json_t *v, enum fill_mode mode, struct evbuffer *out)
{
        if (mode != FILL_JSON) {
                if (!v || json_is_null(v))
                        return 0;
                if (json_is_array(v) || json_is_object(v))
                        return -EINVAL;
                if (json_is_string(v)) {
                        put_bytes(out, json_string_value(v), json_string_length(v), mode);
                        return 0;
                }
        }
        _cleanup_free_ char *t = json_dumps(v ? v : json_null(), JSON_ENCODE_ANY | JSON_COMPACT);
        if (!t)
                return -ENOMEM;
        put_bytes(out, t, strlen(t), mode);
        return 0;
}

/* Replace every placeholder in `tmpl` by its argument, written as `mode`
 * says. *ret_bad names an argument that cannot stand there. */
static int fill_text(const char *tmpl, const json_t *args, enum fill_mode mode,
                     struct evbuffer *out, char *ret_bad, size_t bad_size)
{
        for (const char *s = tmpl; *s;) {
                const char *name;
                size_t len, n = placeholder(s, &name, &len);
                if (n == 0) {
                        evbuffer_add(out, s, 1);
                        s++;
                        continue;
                }
                int r = arg_write(json_object_getn(args, name, len), mode, out);
                if (r < 0) {
                        snprintf(ret_bad, bad_size, "%.*s", (int)len, name);
                        return r;
                }
                s += n;
        }
        return 0;
}

/* The whole of `tmpl` filled, NUL-terminated, in *ret. */
static int fill_string(const char *tmpl, const json_t *args, enum fill_mode mode, char **ret,
                       char *ret_bad, size_t bad_size)
{
        _cleanup_(evbuffer_freep) struct evbuffer *out = evbuffer_new();
        if (!out)
                return -ENOMEM;
        int r = fill_text(tmpl ? tmpl : "", args, mode, out, ret_bad, bad_size);
        if (r < 0)
                return r;
        evbuffer_add(out, "", 1);
        *ret = xstrdup((const char *)evbuffer_pullup(out, -1));
        return 0;
}

/* The path below the route. Every argument is percent-encoded whole (all
 * but the unreserved bytes), so that a value adds no segment, query or
 * fragment: "a/b" is sent as "a%2Fb", and the route's path check refuses
 * encoded separators, "." and ".." segments and "%25" outright. */
static int fill_path(const char *tmpl, const json_t *args, char **ret, char *ret_bad,
                     size_t bad_size)
{
        return fill_string(tmpl, args, FILL_PERCENT, ret, ret_bad, bad_size);
}

/* A JSON value of the body template with its placeholders filled: a string
 * that is one placeholder becomes the argument itself (typed: a number
 * stays a number); a placeholder inside a longer string adds the
 * argument's text to it. The arguments are never parsed as JSON text, so
 * no value can add a key or close a string. */
static json_t *fill_json(const json_t *t, const json_t *args, unsigned depth, int *ret_err,
                         char *ret_bad, size_t bad_size)
{
        if (depth > BODY_DEPTH_MAX) {
                *ret_err = -ELOOP;
                return NULL;
        }
        if (json_is_string(t)) {
                const char *s = json_string_value(t), *name;
                size_t len, n = placeholder(s, &name, &len);
                if (n && n == json_string_length(t)) {
                        const json_t *v = json_object_getn(args, name, len);
                        return v ? json_deep_copy(v) : json_null();
                }
                _cleanup_(evbuffer_freep) struct evbuffer *out = evbuffer_new();
                if (!out || (*ret_err = fill_text(s, args, FILL_TEXT, out, ret_bad, bad_size)) < 0)
                        return NULL;
                json_t *r =
                    json_stringn((const char *)evbuffer_pullup(out, -1), evbuffer_get_length(out));
                if (!r)
                        *ret_err = -EILSEQ;
                return r;
        }
        if (json_is_object(t)) {
                json_t *o = json_object();
                const char *k;
                json_t *v;
                json_object_foreach((json_t *)t, k, v)
                {
                        json_t *f = fill_json(v, args, depth + 1, ret_err, ret_bad, bad_size);
                        if (!f) {
                                json_decref(o);
                                return NULL;
                        }
                        json_object_set_new(o, k, f);
                }
                return o;
        }
        if (json_is_array(t)) {
                json_t *a = json_array();
                size_t i;
                json_t *v;
                json_array_foreach(t, i, v)
                {
                        json_t *f = fill_json(v, args, depth + 1, ret_err, ret_bad, bad_size);
                        if (!f) {
                                json_decref(a);
                                return NULL;
                        }
                        json_array_append_new(a, f);
                }
                return a;
        }
        return json_deep_copy(t);
}

/* The request body: a template that is JSON is filled value by value
 * (fill_json()); any other is filled as text, each argument JSON-encoded. */
static int fill_body(const char *tmpl, const json_t *args, char **ret, char *ret_bad,
                     size_t bad_size)
{
        json_t *t = json_loads(tmpl, JSON_DECODE_ANY, NULL);
        if (!t)
                return fill_string(tmpl, args, FILL_JSON, ret, ret_bad, bad_size);
        int r = 0;
        json_t *b = fill_json(t, args, 0, &r, ret_bad, bad_size);
        json_decref(t);
        if (!b)
                return r < 0 ? r : -ENOMEM;
        *ret = json_dumps(b, JSON_ENCODE_ANY | JSON_COMPACT);
        json_decref(b);
        return *ret ? 0 : -ENOMEM;
}

/* ---- the answer ---- */

/* The value the sandbox gets: the redacted body, as JSON when it is JSON,
 * else as a string when it is UTF-8 text; NULL otherwise. */
static json_t *answer_value(const struct redactor *red, const char *body, size_t len)
{
        _cleanup_free_ char *clean = NULL;
        size_t clean_len = 0;
        if (redactor_apply(red, body, len, &clean, &clean_len) < 0)
                return NULL;
        json_t *v = json_loadb(clean, clean_len, JSON_DECODE_ANY, NULL);
        if (v) {
                /* Parsing decodes escapes the byte redactor does not know. */
                json_t *scrubbed = toolgate_redact_json(red, v);
                json_decref(v);
                return scrubbed;
        }
        if (memchr(clean, '\0', clean_len) || !utf8_str_valid(clean))
                return NULL;
        return json_stringn(clean, clean_len);
}

/* ---- the call ---- */

struct http_run {
        struct netgate_fetch *fetch;
};

static void run_end(struct tg_call *c)
{
        free(c->runner);
        c->runner = NULL;
        c->cancel = NULL;
        c->revoke = NULL;
}

/* Its tool revoked while the request is under way: dropped, refused. */
static void http_revoke(struct tg_call *c, const char *msg)
{
        struct http_run *h = c->runner;
        netgate_fetch_cancel(h->fetch);
        run_end(c);
        toolgate_call_finish(c, NULL, "policy_denied", "tools.allow", msg, -1, 0);
}

/* toolgate_free: the request is dropped unanswered. */
static void http_cancel(struct tg_call *c)
{
        struct http_run *h = c->runner;
        netgate_fetch_cancel(h->fetch);
        run_end(c);
        toolgate_call_finish(c, NULL, "internal", "shutdown", "the sandbox is stopping", -1, 0);
}

static void fetched(void *ud, int err, const struct netgate_fetch_response *resp)
{
        struct tg_call *c = ud;
        const struct policy_tool *d = c->tool->def;
        char msg[512];
        run_end(c);
        if (err == -ETIMEDOUT) {
                snprintf(msg, sizeof(msg), "tool \"%s\" did not answer within %u ms", d->name,
                         d->timeout_ms);
                toolgate_call_finish(c, NULL, "timeout", "timeout", msg, -1, 0);
                return;
        }
        if (err == -EFBIG) {
                snprintf(msg, sizeof(msg), "tool \"%s\": the answer is over outputMax (%llu bytes)",
                         d->name, (unsigned long long)d->output_max);
                toolgate_call_finish(c, NULL, "tool_failed", "outputMax", msg, -1, d->output_max);
                return;
        }
        if (err < 0) {
                snprintf(msg, sizeof(msg),
                         "tool \"%s\": the request through route \"%s\" failed: %s", d->name,
                         d->route, strerror(-err));
                toolgate_call_finish(c, NULL, "tool_failed", "http", msg, -1, 0);
                return;
        }
        if (resp->status >= 400) {
                if (resp->gate_reason)
                        snprintf(msg, sizeof(msg),
                                 "tool \"%s\": the network gate refused the request through route "
                                 "\"%s\" (%d, %s)",
                                 d->name, d->route, resp->status, resp->gate_reason);
                else
                        snprintf(msg, sizeof(msg), "tool \"%s\": route \"%s\" answered %d", d->name,
                                 d->route, resp->status);
                toolgate_call_finish(c, NULL, "tool_failed", "status", msg, -1, resp->body_len);
                return;
        }
        json_t *value = answer_value(toolgate_redactor(c->t), resp->body, resp->body_len);
        if (!value) {
                snprintf(msg, sizeof(msg), "tool \"%s\": the answer is neither JSON nor UTF-8 text",
                         d->name);
                toolgate_call_finish(c, NULL, "tool_failed", "output", msg, -1, resp->body_len);
                return;
        }
        toolgate_call_finish(c, value, NULL, NULL, NULL, -1, resp->body_len);
}

void toolgate_http_start(struct tg_call *c)
{
        const struct policy_tool *d = c->tool->def;
        char msg[512], bad[ARG_NAME_MAX + 1] = "";
        _cleanup_free_ char *path = NULL, *body = NULL;
        struct al_error err = {0};

        if (!c->t->netgate) {
                snprintf(msg, sizeof(msg),
                         "tool \"%s\" needs the network gate (network mode \"gated\")", d->name);
                toolgate_call_finish(c, NULL, "internal", "http", msg, -1, 0);
                return;
        }
        int r = fill_path(d->path, c->args, &path, bad, sizeof(bad));
        if (r >= 0 && d->body)
                r = fill_body(d->body, c->args, &body, bad, sizeof(bad));
        if (r < 0) {
                snprintf(msg, sizeof(msg), "tool \"%s\": argument \"%s\" cannot fill the request",
                         d->name, bad);
                toolgate_call_finish(c, NULL, "bad_args", "http", msg, -1, 0);
                return;
        }
        static const struct netgate_header json_headers[] = {
            {"Accept", "application/json"},
            {"Content-Type", "application/json"},
        };
        struct netgate_fetch_request req = {
            .route = d->route,
            .method = d->method,
            .path = path,
            .body = body,
            .body_len = body ? strlen(body) : 0,
            .headers = json_headers,
            .n_headers = body ? 2 : 1,
            .response_max = d->output_max,
            .timeout_ms = d->timeout_ms,
            .tool = d->name,
        };
        struct http_run *h = xcalloc(1, sizeof(*h));
        c->runner = h;
        c->cancel = http_cancel;
        c->revoke = http_revoke;
        r = netgate_route_fetch(c->t->netgate, &req, fetched, c, &h->fetch, &err);
        if (r < 0) {
                run_end(c);
                snprintf(msg, sizeof(msg), "tool \"%s\": %.400s", d->name, err.msg);
                toolgate_call_finish(c, NULL, r == -EMSGSIZE ? "bad_args" : "internal", "http", msg,
                                     -1, 0);
        }
}
