/* SPDX-License-Identifier: Apache-2.0 */
#include <errno.h>
#include <string.h>
#include <time.h>

#include "agent/agent.h"
#include "control-proto.h"
#include "util.h"

/* The loop: ask the model, run the tool calls it makes in the sandbox, give
 * the results back, until it stops asking or a budget runs out. */

#define REPLY_MAX (8u << 20)

void agent_outcome_clear(struct agent_outcome *o)
{
        free(o->final_text);
        memset(o, 0, sizeof(*o));
}

static void emit(const struct agent_config *cfg, json_t *e)
{
        if (!e)
                return;
        json_object_set_new(e, "ts", json_integer((json_int_t)(now_realtime_us() / 1000)));
        if (cfg->transcript)
                cfg->transcript(cfg->ud, e);
        else
                json_decref(e);
}

struct fetch_answer {
        bool ok;
        int status;
        char error[64];
        char message[256];
        char *body;
        size_t body_len;
        char *gate_reason;
        char *content_type;
};

static int fetch_line(void *ud, json_t *msg)
{
        struct fetch_answer *a = ud;
        if (!json_is_true(json_object_get(msg, "ok"))) {
                const char *e = json_string_value(json_object_get(msg, "error"));
                const char *m = json_string_value(json_object_get(msg, "message"));
                snprintf(a->error, sizeof(a->error), "%s", e ? e : "error");
                snprintf(a->message, sizeof(a->message), "%s", m ? m : "");
                return 0;
        }
        a->ok = true;
        a->status = (int)json_integer_value(json_object_get(msg, "status"));
        const char *gr = json_string_value(json_object_get(msg, "gateReason"));
        if (gr)
                a->gate_reason = xstrdup(gr);
        size_t i;
        json_t *h;
        json_array_foreach(json_object_get(msg, "headers"), i, h)
        {
                const char *n = json_string_value(json_array_get(h, 0));
                const char *v = json_string_value(json_array_get(h, 1));
                if (n && v && strcasecmp(n, "content-type") == 0 && !a->content_type)
                        a->content_type = xstrdup(v);
        }
        const char *b = json_string_value(json_object_get(msg, "body"));
        unsigned char *d = NULL;
        if (b && base64_decode(b, &d, &a->body_len) >= 0)
                a->body = (char *)d;
        return 0;
}

static void fetch_answer_clear(struct fetch_answer *a)
{
        free(a->body);
        free(a->gate_reason);
        free(a->content_type);
        memset(a, 0, sizeof(*a));
}

static uint64_t elapsed_ms(uint64_t start_us)
{
        return (now_monotonic_us() - start_us) / 1000;
}

static void sleep_ms(uint64_t ms)
{
        struct timespec ts = {.tv_sec = (time_t)(ms / 1000),
                              .tv_nsec = (long)(ms % 1000) * 1000000};
        while (nanosleep(&ts, &ts) < 0 && errno == EINTR)
                ;
}

/* One model call, retried after an API error (a status of 429 or 5xx, a
 * failed connection, an answer that cannot be read) with exponential
 * backoff, at most budget.retries times. 0: *reply filled; -EREMOTEIO: the
 * retries are spent (err says why); -ETIME: the run's time ran out. */
static int call_model(const struct agent_config *cfg, json_t *messages, uint64_t start_us,
                      struct agent_outcome *o, struct agent_reply *reply, struct al_error *err)
{
        const struct agent_tool_def *tools;
        size_t n_tools = agent_tools(cfg->host_tools, &tools);
        _cleanup_free_ char *body =
            agent_request_body(cfg->provider, cfg->model, cfg->system, messages, tools, n_tools,
                               cfg->reply_tokens, cfg->stream);
        if (!body)
                return al_error_set(err, -ENOMEM, "building the model request");
        _cleanup_free_ char *b64 = base64_encode(body, strlen(body));
        unsigned wait = cfg->budget.backoff_ms;
        for (unsigned attempt = 0;; attempt++) {
                uint64_t timeout_ms = 300 * 1000;
                if (cfg->budget.timeout_ms) {
                        uint64_t used = elapsed_ms(start_us);
                        if (used >= cfg->budget.timeout_ms)
                                return -ETIME;
                        if (cfg->budget.timeout_ms - used < timeout_ms)
                                timeout_ms = cfg->budget.timeout_ms - used;
                }
                json_t *req =
                    json_pack("{s:s, s:s, s:s, s:s, s:{s:s, s:s}, s:s, s:I, s:I, s:s}", "op",
                              CONTROL_OP_FETCH, "route", cfg->route, "method", "POST", "path",
                              agent_provider_path(cfg->provider), "headers", "content-type",
                              "application/json", "accept",
                              cfg->stream ? "text/event-stream" : "application/json", "body", b64,
                              "timeoutMs", (json_int_t)timeout_ms, "responseMax",
                              (json_int_t)REPLY_MAX, "tool", "agent.model");
                if (cfg->provider == AGENT_PROVIDER_ANTHROPIC)
                        json_object_set_new(json_object_get(req, "headers"), "anthropic-version",
                                            json_string("2023-06-01"));
                struct fetch_answer a = {0};
                struct al_error ce = {0};
                o->model_calls++;
                int r = agent_ctl_call(cfg->control_socket, req, (unsigned)timeout_ms + 10000,
                                       fetch_line, &a, &ce);
                json_decref(req);
                char why[AL_ERROR_MAX];
                bool retry = true;
                if (r < 0)
                        snprintf(why, sizeof(why), "%s", ce.msg);
                else if (!a.ok) {
                        snprintf(why, sizeof(why), "%s: %s", a.error, a.message);
                        retry = !STREQ(a.error, CONTROL_ERR_BAD_REQUEST);
                } else if (a.status != 200) {
                        snprintf(why, sizeof(why), "the model API answered %d%s%s", a.status,
                                 a.gate_reason ? " from the network gate: " : "",
                                 a.gate_reason ? a.gate_reason : "");
                        /* The gate's refusals and the client errors other than
                         * rate limits do not get better by asking again. */
                        retry = !a.gate_reason && (a.status == 429 || a.status >= 500);
                } else {
                        bool sse = cfg->stream && a.content_type &&
                                   strncasecmp(a.content_type, "text/event-stream", 17) == 0;
                        struct al_error pe = {0};
                        r = sse ? agent_parse_stream(cfg->provider, a.body ? a.body : "",
                                                     a.body_len, reply, &pe)
                                : agent_parse_reply(cfg->provider, a.body ? a.body : "", a.body_len,
                                                    reply, &pe);
                        if (r >= 0) {
                                emit(cfg, json_pack("{s:s, s:i, s:i, s:b}", "type", "model.call",
                                                    "attempt", attempt + 1, "status", a.status,
                                                    "stream", sse));
                                fetch_answer_clear(&a);
                                return 0;
                        }
                        snprintf(why, sizeof(why), "%s", pe.msg);
                }
                emit(cfg, json_pack("{s:s, s:i, s:i, s:s, s:b}", "type", "model.error", "attempt",
                                    attempt + 1, "status", a.ok ? a.status : 0, "message", why,
                                    "retry", retry && attempt < cfg->budget.retries));
                fetch_answer_clear(&a);
                if (!retry || attempt >= cfg->budget.retries)
                        return al_error_set(err, -EREMOTEIO,
                                            "the model call failed after %u "
                                            "attempt(s): %s",
                                            attempt + 1, why);
                sleep_ms(wait);
                wait = wait * 2 > 30000 ? 30000 : wait * 2;
        }
}

static void end(struct agent_outcome *o, const char *code, const char *msg)
{
        o->error_code = code;
        snprintf(o->message, sizeof(o->message), "%s", msg);
}

int agent_run(const struct agent_config *cfg, struct agent_outcome *ret, struct al_error *err)
{
        struct agent_outcome o = {0};
        uint64_t start_us = now_monotonic_us();
        json_t *messages = agent_conversation_new(cfg->provider, cfg->system, cfg->task);
        emit(cfg, json_pack("{s:s, s:s, s:s, s:s}", "type", "task", "task", cfg->task, "provider",
                            agent_provider_name(cfg->provider), "model", cfg->model));
        for (;;) {
                if (cfg->budget.timeout_ms && elapsed_ms(start_us) >= cfg->budget.timeout_ms) {
                        end(&o, "timeout", "the run's time (--timeout) ran out");
                        break;
                }
                if (cfg->budget.max_turns && o.turns >= cfg->budget.max_turns) {
                        end(&o, "budget_exhausted", "the model used every turn (--max-turns)");
                        break;
                }
                if (cfg->budget.max_tokens &&
                    o.input_tokens + o.output_tokens >= cfg->budget.max_tokens) {
                        end(&o, "budget_exhausted", "the model used its tokens (--max-tokens)");
                        break;
                }
                struct agent_reply reply = {0};
                struct al_error me = {0};
                int r = call_model(cfg, messages, start_us, &o, &reply, &me);
                if (r == -ETIME) {
                        end(&o, "timeout", "the run's time (--timeout) ran out");
                        break;
                }
                if (r < 0) {
                        end(&o, "task_failed", me.msg);
                        break;
                }
                o.turns++;
                o.input_tokens += reply.input_tokens;
                o.output_tokens += reply.output_tokens;
                json_t *calls = json_array();
                for (size_t i = 0; i < reply.n_calls; i++)
                        json_array_append_new(
                            calls, json_pack("{s:s, s:s, s:O}", "id", reply.calls[i].id, "name",
                                             reply.calls[i].name, "input", reply.calls[i].input));
                emit(cfg,
                     json_pack("{s:s, s:i, s:o, s:o, s:o, s:{s:I, s:I}}", "type", "assistant",
                               "turn", o.turns, "text",
                               reply.text ? json_string(reply.text) : json_null(), "stopReason",
                               reply.stop_reason ? json_string(reply.stop_reason) : json_null(),
                               "toolCalls", calls, "usage", "inputTokens",
                               (json_int_t)reply.input_tokens, "outputTokens",
                               (json_int_t)reply.output_tokens));
                agent_conversation_add_reply(cfg->provider, messages, &reply);
                if (reply.n_calls == 0) {
                        free(o.final_text);
                        o.final_text = reply.text ? xstrdup(reply.text) : NULL;
                        agent_reply_clear(&reply);
                        break;
                }
                char *results[AGENT_CALLS_MAX] = {0};
                bool is_error[AGENT_CALLS_MAX] = {0};
                for (size_t i = 0; i < reply.n_calls && r >= 0; i++) {
                        char *text = NULL;
                        json_t *rec = NULL;
                        /* A command may not outrun the run: its timeout is
                         * cut to the time left (at least a second). */
                        struct agent_config tc = *cfg;
                        if (cfg->budget.timeout_ms) {
                                uint64_t used = elapsed_ms(start_us);
                                uint64_t left_s = used < cfg->budget.timeout_ms
                                                      ? (cfg->budget.timeout_ms - used + 999) / 1000
                                                      : 1;
                                if (left_s < tc.budget.cmd_timeout)
                                        tc.budget.cmd_timeout = (unsigned)left_s;
                        }
                        r = agent_tool_run(&tc, &reply.calls[i], &text, &is_error[i], &rec, err);
                        if (r < 0)
                                break;
                        o.tool_calls++;
                        results[i] = agent_text_for_model(text, strlen(text), strlen(text),
                                                          strlen(text) + 1);
                        free(text);
                        json_object_set_new(rec, "type", json_string("tool.result"));
                        json_object_set_new(rec, "id", json_string(reply.calls[i].id));
                        json_object_set_new(rec, "name", json_string(reply.calls[i].name));
                        json_object_set_new(rec, "isError", json_boolean(is_error[i]));
                        json_object_set_new(rec, "result", json_string(results[i]));
                        emit(cfg, rec);
                }
                if (r >= 0)
                        agent_conversation_add_results(cfg->provider, messages, &reply, results,
                                                       is_error);
                for (size_t i = 0; i < reply.n_calls; i++)
                        free(results[i]);
                agent_reply_clear(&reply);
                if (r < 0) {
                        end(&o, "internal", err->msg);
                        break;
                }
        }
        json_decref(messages);
        emit(cfg, json_pack("{s:s, s:o, s:s, s:i, s:i}", "type", "end", "errorCode",
                            o.error_code ? json_string(o.error_code) : json_null(), "message",
                            o.message, "turns", o.turns, "toolCalls", o.tool_calls));
        *ret = o;
        return 0;
}
