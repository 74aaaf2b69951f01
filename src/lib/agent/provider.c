/* SPDX-License-Identifier: Apache-2.0 */
#include <errno.h>
#include <string.h>

#include "agent/provider.h"
#include "agent/sse.h"
#include "utf8.h"
#include "util.h"

int agent_provider_parse(const char *s, enum agent_provider *ret)
{
        if (s && STREQ(s, "anthropic"))
                *ret = AGENT_PROVIDER_ANTHROPIC;
        else if (s && STREQ(s, "openai"))
                *ret = AGENT_PROVIDER_OPENAI;
        else
                return -EINVAL;
        return 0;
}

const char *agent_provider_name(enum agent_provider p)
{
        return p == AGENT_PROVIDER_ANTHROPIC ? "anthropic" : "openai";
}

const char *agent_provider_path(enum agent_provider p)
{
        return p == AGENT_PROVIDER_ANTHROPIC ? "/v1/messages" : "/v1/chat/completions";
}

void agent_reply_clear(struct agent_reply *r)
{
        free(r->text);
        free(r->stop_reason);
        for (size_t i = 0; i < r->n_calls; i++) {
                free(r->calls[i].id);
                free(r->calls[i].name);
                json_decref(r->calls[i].input);
        }
        memset(r, 0, sizeof(*r));
}

/* ---- requests ---- */

json_t *agent_conversation_new(enum agent_provider p, const char *system, const char *task)
{
        json_t *m = json_array();
        if (p == AGENT_PROVIDER_OPENAI && system)
                json_array_append_new(m,
                                      json_pack("{s:s, s:s}", "role", "system", "content", system));
        json_array_append_new(m, json_pack("{s:s, s:s}", "role", "user", "content", task));
        return m;
}

char *agent_request_body(enum agent_provider p, const char *model, const char *system,
                         json_t *messages, const struct agent_tool_def *tools, size_t n_tools,
                         uint64_t max_tokens, bool stream)
{
        json_t *jt = json_array();
        for (size_t i = 0; i < n_tools; i++) {
                json_t *schema = json_loads(tools[i].schema, 0, NULL);
                if (!schema)
                        schema = json_pack("{s:s}", "type", "object");
                if (p == AGENT_PROVIDER_ANTHROPIC)
                        json_array_append_new(
                            jt, json_pack("{s:s, s:s, s:o}", "name", tools[i].name, "description",
                                          tools[i].description, "input_schema", schema));
                else
                        json_array_append_new(
                            jt, json_pack("{s:s, s:{s:s, s:s, s:o}}", "type", "function",
                                          "function", "name", tools[i].name, "description",
                                          tools[i].description, "parameters", schema));
        }
        json_t *o = json_pack("{s:s, s:O, s:o, s:I, s:b}", "model", model, "messages", messages,
                              "tools", jt, "max_tokens", (json_int_t)max_tokens, "stream", stream);
        if (p == AGENT_PROVIDER_ANTHROPIC && system)
                json_object_set_new(o, "system", json_string(system));
        if (p == AGENT_PROVIDER_OPENAI && stream)
                json_object_set_new(o, "stream_options", json_pack("{s:b}", "include_usage", 1));
        char *s = json_dumps(o, JSON_COMPACT);
        json_decref(o);
        return s;
}

/* ---- answers ---- */

static int bad(struct al_error *err, const char *what)
{
        return al_error_set(err, -EBADMSG, "the model's answer: %s", what);
}

static bool name_ok(const char *s)
{
        if (!s || !s[0] || strlen(s) > AGENT_NAME_MAX)
                return false;
        for (; *s; s++)
                if (*s <= 0x20 || *s >= 0x7f)
                        return false;
        return true;
}

static int add_text(struct agent_reply *r, const char *s, size_t len, struct al_error *err)
{
        size_t have = r->text ? strlen(r->text) : 0;
        if (have + len > AGENT_TEXT_MAX)
                return bad(err, "the text is over 1 MiB");
        if (memchr(s, '\0', len))
                return bad(err, "the text holds a NUL byte");
        r->text = xrealloc(r->text, have + len + 1, 1);
        memcpy(r->text + have, s, len);
        r->text[have + len] = '\0';
        return 0;
}

static void usage_from(struct agent_reply *r, json_t *u, const char *in, const char *out)
{
        json_t *ji = json_object_get(u, in), *jo = json_object_get(u, out);
        if (json_is_integer(ji) && json_integer_value(ji) >= 0) {
                r->input_tokens = (uint64_t)json_integer_value(ji);
                r->usage_reported = true;
        }
        if (json_is_integer(jo) && json_integer_value(jo) >= 0) {
                r->output_tokens = (uint64_t)json_integer_value(jo);
                r->usage_reported = true;
        }
}

static int api_error(json_t *o, struct al_error *err)
{
        json_t *e = json_object_get(o, "error");
        const char *msg = json_string_value(json_object_get(e, "message"));
        if (!msg)
                msg = json_string_value(e);
        return al_error_set(err, -EREMOTEIO, "the model API answered an error: %.300s",
                            msg ? msg : "(no message)");
}

/* A call's arguments as JSON text (openai) or an object (anthropic). */
static int add_call(struct agent_reply *r, const char *id, const char *name, json_t *input_obj,
                    const char *input_text, size_t input_len, struct al_error *err)
{
        if (r->n_calls == AGENT_CALLS_MAX)
                return bad(err, "more than 64 tool calls in one turn");
        if (!name_ok(id) || !name_ok(name))
                return bad(err, "a tool call without a well-formed id or name");
        json_t *in = NULL;
        if (input_obj)
                in = json_incref(input_obj);
        else if (input_len == 0)
                in = json_object();
        else {
                if (input_len > AGENT_ARGS_MAX)
                        return bad(err, "a tool call's arguments are over 1 MiB");
                in = json_loadb(input_text, input_len, 0, NULL);
        }
        if (!json_is_object(in)) {
                json_decref(in);
                /* The model wrote arguments that are not a JSON object: the
                 * call stays, and the tool says so to the model. */
                in = json_pack("{s:s}", "_invalid", "the arguments were not a JSON object");
        }
        struct agent_tool_call *c = &r->calls[r->n_calls++];
        c->id = xstrdup(id);
        c->name = xstrdup(name);
        c->input = in;
        return 0;
}

static int parse_anthropic(json_t *o, struct agent_reply *r, struct al_error *err)
{
        json_t *content = json_object_get(o, "content");
        if (!json_is_array(content))
                return bad(err, "no \"content\" array");
        size_t i;
        json_t *b;
        json_array_foreach(content, i, b)
        {
                const char *type = json_string_value(json_object_get(b, "type"));
                int rr = 0;
                if (type && STREQ(type, "text")) {
                        const char *t = json_string_value(json_object_get(b, "text"));
                        if (t)
                                rr = add_text(r, t, strlen(t), err);
                } else if (type && STREQ(type, "tool_use"))
                        rr = add_call(r, json_string_value(json_object_get(b, "id")),
                                      json_string_value(json_object_get(b, "name")),
                                      json_object_get(b, "input"), NULL, 0, err);
                if (rr < 0)
                        return rr;
        }
        const char *sr = json_string_value(json_object_get(o, "stop_reason"));
        if (sr)
                r->stop_reason = xstrdup(sr);
        usage_from(r, json_object_get(o, "usage"), "input_tokens", "output_tokens");
        return 0;
}

static int parse_openai(json_t *o, struct agent_reply *r, struct al_error *err)
{
        json_t *ch = json_array_get(json_object_get(o, "choices"), 0);
        json_t *msg = json_object_get(ch, "message");
        if (!json_is_object(msg))
                return bad(err, "no \"choices[0].message\"");
        const char *t = json_string_value(json_object_get(msg, "content"));
        int rr = t ? add_text(r, t, strlen(t), err) : 0;
        size_t i;
        json_t *tc;
        json_array_foreach(json_object_get(msg, "tool_calls"), i, tc)
        {
                if (rr < 0)
                        break;
                json_t *fn = json_object_get(tc, "function");
                const char *args = json_string_value(json_object_get(fn, "arguments"));
                rr = add_call(r, json_string_value(json_object_get(tc, "id")),
                              json_string_value(json_object_get(fn, "name")), NULL,
                              args ? args : "", args ? strlen(args) : 0, err);
        }
        if (rr < 0)
                return rr;
        const char *fr = json_string_value(json_object_get(ch, "finish_reason"));
        if (fr)
                r->stop_reason = xstrdup(fr);
        usage_from(r, json_object_get(o, "usage"), "prompt_tokens", "completion_tokens");
        return 0;
}

int agent_parse_reply(enum agent_provider p, const char *body, size_t len, struct agent_reply *ret,
                      struct al_error *err)
{
        struct agent_reply r = {0};
        json_t *o = json_loadb(body, len, 0, NULL);
        int rr;
        if (!json_is_object(o))
                rr = bad(err, "not a JSON object");
        else if (json_object_get(o, "error") && !json_is_null(json_object_get(o, "error")))
                rr = api_error(o, err);
        else
                rr = p == AGENT_PROVIDER_ANTHROPIC ? parse_anthropic(o, &r, err)
                                                   : parse_openai(o, &r, err);
        json_decref(o);
        if (rr < 0) {
                agent_reply_clear(&r);
                return rr;
        }
        *ret = r;
        return 0;
}

/* ---- streams ---- */

/* A call being streamed: its id and name come first, its arguments in
 * pieces. */
struct partial_call {
        char *id, *name;
        char *args;
        size_t args_len;
        bool used;
};

struct stream_state {
        enum agent_provider p;
        struct agent_reply *r;
        struct al_error *err;
        struct partial_call calls[AGENT_CALLS_MAX];
        bool done, failed;
};

static int append_args(struct stream_state *st, struct partial_call *pc, const char *s)
{
        size_t n = strlen(s);
        if (pc->args_len + n > AGENT_ARGS_MAX)
                return bad(st->err, "a tool call's arguments are over 1 MiB");
        pc->args = xrealloc(pc->args, pc->args_len + n + 1, 1);
        memcpy(pc->args + pc->args_len, s, n);
        pc->args_len += n;
        pc->args[pc->args_len] = '\0';
        return 0;
}

static int slot(struct stream_state *st, json_t *jindex, struct partial_call **ret)
{
        if (!json_is_integer(jindex) || json_integer_value(jindex) < 0 ||
            json_integer_value(jindex) >= AGENT_CALLS_MAX)
                return bad(st->err, "a streamed block's index is missing or out of range");
        *ret = &st->calls[json_integer_value(jindex)];
        return 0;
}

static void set_once(char **dst, const char *s)
{
        if (s && !*dst)
                *dst = xstrdup(s);
}

static int anthropic_event(struct stream_state *st, const char *name, json_t *o)
{
        const char *type = json_string_value(json_object_get(o, "type"));
        if (!type)
                type = name;
        struct partial_call *pc;
        if (STREQ(type, "error"))
                return api_error(o, st->err);
        if (STREQ(type, "message_start")) {
                usage_from(st->r, json_object_get(json_object_get(o, "message"), "usage"),
                           "input_tokens", "output_tokens");
        } else if (STREQ(type, "content_block_start")) {
                json_t *b = json_object_get(o, "content_block");
                const char *bt = json_string_value(json_object_get(b, "type"));
                if (bt && STREQ(bt, "tool_use")) {
                        if (slot(st, json_object_get(o, "index"), &pc) < 0)
                                return -EBADMSG;
                        pc->used = true;
                        set_once(&pc->id, json_string_value(json_object_get(b, "id")));
                        set_once(&pc->name, json_string_value(json_object_get(b, "name")));
                } else if (bt && STREQ(bt, "text")) {
                        const char *t = json_string_value(json_object_get(b, "text"));
                        if (t && add_text(st->r, t, strlen(t), st->err) < 0)
                                return -EBADMSG;
                }
        } else if (STREQ(type, "content_block_delta")) {
                json_t *d = json_object_get(o, "delta");
                const char *dt = json_string_value(json_object_get(d, "type"));
                if (dt && STREQ(dt, "text_delta")) {
                        const char *t = json_string_value(json_object_get(d, "text"));
                        if (t && add_text(st->r, t, strlen(t), st->err) < 0)
                                return -EBADMSG;
                } else if (dt && STREQ(dt, "input_json_delta")) {
                        const char *pj = json_string_value(json_object_get(d, "partial_json"));
                        if (slot(st, json_object_get(o, "index"), &pc) < 0)
                                return -EBADMSG;
                        if (!pc->used)
                                return bad(st->err, "arguments for a tool call never started");
                        if (pj && append_args(st, pc, pj) < 0)
                                return -EBADMSG;
                }
        } else if (STREQ(type, "message_delta")) {
                const char *sr =
                    json_string_value(json_object_get(json_object_get(o, "delta"), "stop_reason"));
                if (sr) {
                        free(st->r->stop_reason);
                        st->r->stop_reason = xstrdup(sr);
                }
                json_t *u = json_object_get(o, "usage");
                json_t *jo = json_object_get(u, "output_tokens");
                if (json_is_integer(jo) && json_integer_value(jo) >= 0) {
                        st->r->output_tokens = (uint64_t)json_integer_value(jo);
                        st->r->usage_reported = true;
                }
        } else if (STREQ(type, "message_stop"))
                st->done = true;
        return 0;
}

static int openai_event(struct stream_state *st, json_t *o)
{
        if (json_object_get(o, "error") && !json_is_null(json_object_get(o, "error")))
                return api_error(o, st->err);
        json_t *u = json_object_get(o, "usage");
        if (json_is_object(u))
                usage_from(st->r, u, "prompt_tokens", "completion_tokens");
        json_t *ch = json_array_get(json_object_get(o, "choices"), 0);
        if (!ch)
                return 0;
        json_t *d = json_object_get(ch, "delta");
        const char *t = json_string_value(json_object_get(d, "content"));
        if (t && add_text(st->r, t, strlen(t), st->err) < 0)
                return -EBADMSG;
        size_t i;
        json_t *tc;
        json_array_foreach(json_object_get(d, "tool_calls"), i, tc)
        {
                struct partial_call *pc;
                if (slot(st, json_object_get(tc, "index"), &pc) < 0)
                        return -EBADMSG;
                pc->used = true;
                json_t *fn = json_object_get(tc, "function");
                set_once(&pc->id, json_string_value(json_object_get(tc, "id")));
                set_once(&pc->name, json_string_value(json_object_get(fn, "name")));
                const char *a = json_string_value(json_object_get(fn, "arguments"));
                if (a && append_args(st, pc, a) < 0)
                        return -EBADMSG;
        }
        const char *fr = json_string_value(json_object_get(ch, "finish_reason"));
        if (fr) {
                free(st->r->stop_reason);
                st->r->stop_reason = xstrdup(fr);
        }
        return 0;
}

static int on_event(void *ud, const char *name, const char *data, size_t len)
{
        struct stream_state *st = ud;
        if (st->done)
                return 0;
        if (st->p == AGENT_PROVIDER_OPENAI && len == 6 && memcmp(data, "[DONE]", 6) == 0) {
                st->done = true;
                return 0;
        }
        json_t *o = json_loadb(data, len, 0, NULL);
        int r;
        if (!json_is_object(o))
                r = bad(st->err, "a streamed event is not a JSON object");
        else
                r = st->p == AGENT_PROVIDER_ANTHROPIC ? anthropic_event(st, name, o)
                                                      : openai_event(st, o);
        json_decref(o);
        return r;
}

int agent_parse_stream(enum agent_provider p, const char *body, size_t len, struct agent_reply *ret,
                       struct al_error *err)
{
        struct agent_reply r = {0};
        struct stream_state st = {.p = p, .r = &r, .err = err};
        struct agent_sse *s = agent_sse_new(on_event, &st);
        int rr = agent_sse_feed(s, body, len);
        if (rr >= 0)
                rr = agent_sse_finish(s);
        agent_sse_free(s);
        if (rr == -EMSGSIZE)
                rr = bad(err, "a streamed line or event is over its bound");
        if (rr >= 0 && !st.done)
                rr = bad(err, "the stream ended before the answer did");
        for (size_t i = 0; i < AGENT_CALLS_MAX; i++) {
                struct partial_call *pc = &st.calls[i];
                if (rr >= 0 && pc->used)
                        rr = add_call(&r, pc->id, pc->name, NULL, pc->args ? pc->args : "",
                                      pc->args_len, err);
                free(pc->id);
                free(pc->name);
                free(pc->args);
        }
        if (rr < 0) {
                agent_reply_clear(&r);
                return rr;
        }
        *ret = r;
        return 0;
}

/* ---- the conversation ---- */

void agent_conversation_add_reply(enum agent_provider p, json_t *messages,
                                  const struct agent_reply *r)
{
        if (p == AGENT_PROVIDER_ANTHROPIC) {
                json_t *content = json_array();
                if (r->text && r->text[0])
                        json_array_append_new(
                            content, json_pack("{s:s, s:s}", "type", "text", "text", r->text));
                for (size_t i = 0; i < r->n_calls; i++)
                        json_array_append_new(content, json_pack("{s:s, s:s, s:s, s:O}", "type",
                                                                 "tool_use", "id", r->calls[i].id,
                                                                 "name", r->calls[i].name, "input",
                                                                 r->calls[i].input));
                if (json_array_size(content) == 0)
                        json_array_append_new(
                            content, json_pack("{s:s, s:s}", "type", "text", "text", "(no text)"));
                json_array_append_new(
                    messages, json_pack("{s:s, s:o}", "role", "assistant", "content", content));
                return;
        }
        json_t *m = json_pack("{s:s, s:o}", "role", "assistant", "content",
                              r->text ? json_string(r->text) : json_null());
        if (r->n_calls) {
                json_t *tcs = json_array();
                for (size_t i = 0; i < r->n_calls; i++) {
                        char *args = json_dumps(r->calls[i].input, JSON_COMPACT);
                        json_array_append_new(tcs, json_pack("{s:s, s:s, s:{s:s, s:s}}", "id",
                                                             r->calls[i].id, "type", "function",
                                                             "function", "name", r->calls[i].name,
                                                             "arguments", args ? args : "{}"));
                        free(args);
                }
                json_object_set_new(m, "tool_calls", tcs);
        }
        json_array_append_new(messages, m);
}

void agent_conversation_add_results(enum agent_provider p, json_t *messages,
                                    const struct agent_reply *r, char *const *results,
                                    const bool *is_error)
{
        if (p == AGENT_PROVIDER_ANTHROPIC) {
                json_t *content = json_array();
                for (size_t i = 0; i < r->n_calls; i++)
                        json_array_append_new(
                            content, json_pack("{s:s, s:s, s:s, s:b}", "type", "tool_result",
                                               "tool_use_id", r->calls[i].id, "content", results[i],
                                               "is_error", is_error[i]));
                json_array_append_new(messages,
                                      json_pack("{s:s, s:o}", "role", "user", "content", content));
                return;
        }
        for (size_t i = 0; i < r->n_calls; i++)
                json_array_append_new(messages,
                                      json_pack("{s:s, s:s, s:s}", "role", "tool", "tool_call_id",
                                                r->calls[i].id, "content", results[i]));
}

void agent_conversation_add_user(enum agent_provider p, json_t *messages, const char *text)
{
        (void)p;
        json_array_append_new(messages, json_pack("{s:s, s:s}", "role", "user", "content", text));
}
