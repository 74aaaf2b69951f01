/* SPDX-License-Identifier: Apache-2.0 */
#include <criterion/criterion.h>
#include <errno.h>
#include <string.h>

#include "agent/agent.h"
#include "agent/provider.h"
#include "agent/sse.h"

/* The model API formats of the host-owned agent loop (src/lib/agent). */

static int parse(enum agent_provider p, bool stream, const char *body, struct agent_reply *r)
{
        struct al_error err = {0};
        memset(r, 0, sizeof(*r));
        return stream ? agent_parse_stream(p, body, strlen(body), r, &err)
                      : agent_parse_reply(p, body, strlen(body), r, &err);
}

Test(agent_provider, anthropic_whole)
{
        struct agent_reply r;
        cr_assert_eq(
            parse(AGENT_PROVIDER_ANTHROPIC, false,
                  "{\"content\":[{\"type\":\"text\",\"text\":\"hi\"},{\"type\":\"tool_use\","
                  "\"id\":\"t1\",\"name\":\"bash\",\"input\":{\"command\":\"ls\"}}],"
                  "\"stop_reason\":\"tool_use\",\"usage\":{\"input_tokens\":7,"
                  "\"output_tokens\":3}}",
                  &r),
            0);
        cr_assert_str_eq(r.text, "hi");
        cr_assert_eq(r.n_calls, 1);
        cr_assert_str_eq(r.calls[0].name, "bash");
        cr_assert_str_eq(json_string_value(json_object_get(r.calls[0].input, "command")), "ls");
        cr_assert_eq(r.input_tokens, 7);
        cr_assert_eq(r.output_tokens, 3);
        agent_reply_clear(&r);
}

Test(agent_provider, openai_whole_with_bad_arguments)
{
        struct agent_reply r;
        cr_assert_eq(
            parse(AGENT_PROVIDER_OPENAI, false,
                  "{\"choices\":[{\"message\":{\"content\":null,\"tool_calls\":[{\"id\":"
                  "\"c1\",\"type\":\"function\",\"function\":{\"name\":\"read_file\","
                  "\"arguments\":\"{\\\"path\\\":\\\"a\\\"}\"}},{\"id\":\"c2\",\"function\":"
                  "{\"name\":\"bash\",\"arguments\":\"not json\"}}]},\"finish_reason\":"
                  "\"tool_calls\"}],\"usage\":{\"prompt_tokens\":5,\"completion_tokens\":2}}",
                  &r),
            0);
        cr_assert_null(r.text);
        cr_assert_eq(r.n_calls, 2);
        cr_assert_str_eq(json_string_value(json_object_get(r.calls[0].input, "path")), "a");
        /* Arguments that are not an object: the call stays, marked. */
        cr_assert_not_null(json_object_get(r.calls[1].input, "_invalid"));
        cr_assert_eq(r.input_tokens, 5);
        agent_reply_clear(&r);
}

Test(agent_provider, api_error_object)
{
        struct agent_reply r;
        cr_assert_eq(parse(AGENT_PROVIDER_ANTHROPIC, false,
                           "{\"type\":\"error\",\"error\":{\"type\":\"overloaded_error\","
                           "\"message\":\"Overloaded\"}}",
                           &r),
                     -EREMOTEIO);
        cr_assert_eq(parse(AGENT_PROVIDER_OPENAI, false, "[1,2]", &r), -EBADMSG);
        cr_assert_eq(parse(AGENT_PROVIDER_OPENAI, false, "{\"choices\":[]}", &r), -EBADMSG);
}

Test(agent_provider, anthropic_stream_in_pieces)
{
        const char *s =
            "event: message_start\r\ndata: {\"type\":\"message_start\",\"message\":{\"usage\":"
            "{\"input_tokens\":11}}}\r\n\r\n"
            ": a comment\n"
            "event: content_block_start\ndata: {\"type\":\"content_block_start\",\"index\":0,"
            "\"content_block\":{\"type\":\"text\",\"text\":\"\"}}\n\n"
            "event: content_block_delta\ndata: {\"type\":\"content_block_delta\",\"index\":0,"
            "\"delta\":{\"type\":\"text_delta\",\"text\":\"Hel\"}}\n\n"
            "data: {\"type\":\"content_block_delta\",\"index\":0,"
            "\"delta\":{\"type\":\"text_delta\",\"text\":\"lo\"}}\n\n"
            "data: {\"type\":\"content_block_start\",\"index\":1,\"content_block\":{\"type\":"
            "\"tool_use\",\"id\":\"t9\",\"name\":\"edit\",\"input\":{}}}\n\n"
            "data: {\"type\":\"content_block_delta\",\"index\":1,\"delta\":{\"type\":"
            "\"input_json_delta\",\"partial_json\":\"{\\\"path\\\":\"}}\n\n"
            "data: {\"type\":\"content_block_delta\",\"index\":1,\"delta\":{\"type\":"
            "\"input_json_delta\",\"partial_json\":\"\\\"x\\\"}\"}}\n\n"
            "data: {\"type\":\"message_delta\",\"delta\":{\"stop_reason\":\"tool_use\"},"
            "\"usage\":{\"output_tokens\":4}}\n\n"
            "data: {\"type\":\"message_stop\"}\n\n";
        struct agent_reply r;
        cr_assert_eq(parse(AGENT_PROVIDER_ANTHROPIC, true, s, &r), 0);
        cr_assert_str_eq(r.text, "Hello");
        cr_assert_eq(r.n_calls, 1);
        cr_assert_str_eq(r.calls[0].id, "t9");
        cr_assert_str_eq(json_string_value(json_object_get(r.calls[0].input, "path")), "x");
        cr_assert_str_eq(r.stop_reason, "tool_use");
        cr_assert_eq(r.input_tokens, 11);
        cr_assert_eq(r.output_tokens, 4);
        agent_reply_clear(&r);
}

Test(agent_provider, openai_stream)
{
        const char *s =
            "data: {\"choices\":[{\"delta\":{\"role\":\"assistant\",\"content\":\"a\"}}]}\n\n"
            "data: {\"choices\":[{\"delta\":{\"tool_calls\":[{\"index\":0,\"id\":\"c1\","
            "\"function\":{\"name\":\"bash\",\"arguments\":\"{\\\"comm\"}}]}}]}\n\n"
            "data: {\"choices\":[{\"delta\":{\"tool_calls\":[{\"index\":0,\"function\":"
            "{\"arguments\":\"and\\\":\\\"ls\\\"}\"}}]},\"finish_reason\":\"tool_calls\"}]}\n\n"
            "data: {\"choices\":[],\"usage\":{\"prompt_tokens\":3,\"completion_tokens\":1}}\n\n"
            "data: [DONE]\n\n";
        struct agent_reply r;
        cr_assert_eq(parse(AGENT_PROVIDER_OPENAI, true, s, &r), 0);
        cr_assert_str_eq(r.text, "a");
        cr_assert_eq(r.n_calls, 1);
        cr_assert_str_eq(json_string_value(json_object_get(r.calls[0].input, "command")), "ls");
        cr_assert_eq(r.input_tokens, 3);
        agent_reply_clear(&r);
}

Test(agent_provider, streams_refused)
{
        struct agent_reply r;
        /* Cut short: no message_stop / [DONE]. */
        cr_assert_eq(parse(AGENT_PROVIDER_OPENAI, true,
                           "data: {\"choices\":[{\"delta\":{\"content\":\"a\"}}]}\n\n", &r),
                     -EBADMSG);
        /* An error event. */
        cr_assert_eq(
            parse(AGENT_PROVIDER_ANTHROPIC, true,
                  "event: error\ndata: {\"type\":\"error\",\"error\":{\"message\":\"x\"}}\n\n", &r),
            -EREMOTEIO);
        /* A block index out of range. */
        cr_assert_eq(
            parse(AGENT_PROVIDER_OPENAI, true,
                  "data: {\"choices\":[{\"delta\":{\"tool_calls\":[{\"index\":64}]}}]}\n\n", &r),
            -EBADMSG);
        /* Arguments for a block never started. */
        cr_assert_eq(
            parse(AGENT_PROVIDER_ANTHROPIC, true,
                  "data: {\"type\":\"content_block_delta\",\"index\":0,\"delta\":{\"type\":"
                  "\"input_json_delta\",\"partial_json\":\"{}\"}}\n\n",
                  &r),
            -EBADMSG);
        /* A tool name with a control character. */
        cr_assert_eq(parse(AGENT_PROVIDER_ANTHROPIC, false,
                           "{\"content\":[{\"type\":\"tool_use\",\"id\":\"t\",\"name\":\"a\\nb\","
                           "\"input\":{}}]}",
                           &r),
                     -EBADMSG);
}

static int collect(void *ud, const char *name, const char *data, size_t len)
{
        char *out = ud;
        strncat(out, name, 100);
        strncat(out, "=", 2);
        strncat(out, data, len);
        strncat(out, ";", 2);
        return 0;
}

Test(agent_sse, framing_and_bounds)
{
        char out[256] = "";
        struct agent_sse *s = agent_sse_new(collect, out);
        const char *in = "data: a\ndata:b\r\rid: 1\nevent: x\ndata\n\n: c\n\ndata: tail";
        for (size_t i = 0; in[i]; i++)
                cr_assert_eq(agent_sse_feed(s, in + i, 1), 0);
        cr_assert_eq(agent_sse_finish(s), 0);
        cr_assert_str_eq(out, "message=a\nb;x=;");
        agent_sse_free(s);

        /* A line over its bound fails the parser, and it stays failed. */
        s = agent_sse_new(collect, out);
        char *big = malloc(AGENT_SSE_LINE_MAX + 2);
        memset(big, 'a', AGENT_SSE_LINE_MAX + 1);
        big[AGENT_SSE_LINE_MAX + 1] = '\0';
        cr_assert_eq(agent_sse_feed(s, big, AGENT_SSE_LINE_MAX + 1), -EMSGSIZE);
        cr_assert_eq(agent_sse_feed(s, "\n\n", 2), -EMSGSIZE);
        free(big);
        agent_sse_free(s);
}

Test(agent_tools, text_for_model)
{
        char *t = agent_text_for_model("ok\xff\0x", 5, 5, 100);
        cr_assert_str_eq(t, "ok\xef\xbf\xbd\xef\xbf\xbdx");
        free(t);
        t = agent_text_for_model("abcdef", 6, 1000, 3);
        cr_assert(strncmp(t, "abc\n[airlock: output truncated, 997 more bytes", 46) == 0, "%s", t);
        free(t);
}

Test(agent_provider, conversation_round_trip)
{
        struct agent_reply r;
        cr_assert_eq(parse(AGENT_PROVIDER_OPENAI, false,
                           "{\"choices\":[{\"message\":{\"content\":\"x\",\"tool_calls\":[{\"id\":"
                           "\"c1\",\"function\":{\"name\":\"bash\",\"arguments\":\"{}\"}}]}}]}",
                           &r),
                     0);
        json_t *m = agent_conversation_new(AGENT_PROVIDER_OPENAI, "sys", "task");
        agent_conversation_add_reply(AGENT_PROVIDER_OPENAI, m, &r);
        char *res[] = {"out"};
        bool err[] = {false};
        agent_conversation_add_results(AGENT_PROVIDER_OPENAI, m, &r, res, err);
        cr_assert_eq(json_array_size(m), 4);
        cr_assert_str_eq(json_string_value(json_object_get(json_array_get(m, 3), "tool_call_id")),
                         "c1");
        const struct agent_tool_def *tools;
        size_t n = agent_tools(false, &tools);
        char *body = agent_request_body(AGENT_PROVIDER_OPENAI, "m", "sys", m, tools, n, 100, true);
        json_t *o = json_loads(body, 0, NULL);
        cr_assert_eq(json_array_size(json_object_get(o, "tools")), 5);
        cr_assert(
            json_is_true(json_object_get(json_object_get(o, "stream_options"), "include_usage")));
        json_decref(o);
        free(body);
        json_decref(m);
        agent_reply_clear(&r);
}
