/* SPDX-License-Identifier: Apache-2.0 */
#pragma once

#include <jansson.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "error.h"

/* The two model API formats the host-owned agent loop speaks: the Messages
 * API ("anthropic") and the Chat Completions API ("openai"), each answered
 * whole or streamed as server-sent events. The conversation is kept in the
 * provider's own message format; this module builds the request body from
 * it, reads an answer (hostile bytes from the network: bounded, checked)
 * into one provider-neutral reply, and appends the assistant's turn and the
 * tool results back to it. No I/O. */

enum agent_provider {
        AGENT_PROVIDER_ANTHROPIC,
        AGENT_PROVIDER_OPENAI,
};

#define AGENT_CALLS_MAX 64         /* tool calls in one reply */
#define AGENT_TEXT_MAX  (1u << 20) /* the assistant's text in one reply */
#define AGENT_ARGS_MAX  (1u << 20) /* one tool call's arguments, as JSON */
#define AGENT_NAME_MAX  128        /* a tool's name, a call's id */

/* "anthropic" / "openai" -> 0 and *ret; -EINVAL otherwise. */
int agent_provider_parse(const char *s, enum agent_provider *ret);
const char *agent_provider_name(enum agent_provider p);
/* The path below the route that the API is served at. */
const char *agent_provider_path(enum agent_provider p);

struct agent_tool_call {
        char *id;
        char *name;
        json_t *input; /* an object */
};

struct agent_reply {
        char *text; /* NULL: none */
        struct agent_tool_call calls[AGENT_CALLS_MAX];
        size_t n_calls;
        char *stop_reason; /* as the provider said it; NULL: not said */
        uint64_t input_tokens, output_tokens;
        bool usage_reported;
};

void agent_reply_clear(struct agent_reply *r);

/* A tool offered to the model. */
struct agent_tool_def {
        const char *name;
        const char *description;
        const char *schema; /* JSON Schema of its input, as JSON text */
};

/* The conversation's start: the task as the user's first message, and for
 * openai the system prompt as the first message (anthropic takes it in the
 * request). */
json_t *agent_conversation_new(enum agent_provider p, const char *system, const char *task);

/* The request body, as JSON text. */
char *agent_request_body(enum agent_provider p, const char *model, const char *system,
                         json_t *messages, const struct agent_tool_def *tools, size_t n_tools,
                         uint64_t max_tokens, bool stream);

/* An answer whole (application/json) or streamed (text/event-stream) into
 * *ret. -EBADMSG with err naming what was wrong; an API error object
 * ({"error": ...} or a stream's "error" event) is -EREMOTEIO with its
 * message. */
int agent_parse_reply(enum agent_provider p, const char *body, size_t len, struct agent_reply *ret,
                      struct al_error *err);
int agent_parse_stream(enum agent_provider p, const char *body, size_t len, struct agent_reply *ret,
                       struct al_error *err);

/* Append the assistant's turn (its text and tool calls) to the messages. */
void agent_conversation_add_reply(enum agent_provider p, json_t *messages,
                                  const struct agent_reply *r);
/* Append the results of the reply's tool calls, results[i] for calls[i]
 * (`is_error` marks a failed call). */
void agent_conversation_add_results(enum agent_provider p, json_t *messages,
                                    const struct agent_reply *r, char *const *results,
                                    const bool *is_error);
/* Append a plain user message (a note from the host, e.g. "go on"). */
void agent_conversation_add_user(enum agent_provider p, json_t *messages, const char *text);
