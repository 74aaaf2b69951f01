/* SPDX-License-Identifier: Apache-2.0 */
#include <event2/buffer.h>
#include <jansson.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "schema.h"
#include "toolgate-internal.h"

/* The tool gateway's protocol (src/lib/toolgate/proto.c): the bytes a
 * sandbox sends are split into lines as the server splits them, each line
 * is read by toolgate_proto_parse, and the args of an accepted call are
 * checked (and clamped) against a schema that uses every keyword of the
 * subset, as the server does before a runner sees them. A refusal says
 * why; an answer is one line of JSON. */

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static const char schema_text[] =
    "{\"type\": \"object\", \"properties\": {"
    " \"n\": {\"type\": \"integer\", \"minimum\": 1, \"maximum\": 10},"
    " \"x\": {\"type\": \"number\", \"minimum\": -1.5, \"maximum\": 2.5},"
    " \"s\": {\"type\": \"string\", \"minLength\": 1, \"maxLength\": 16, \"pattern\": "
    "\"^[a-z]+(-[a-z]+)*$\"},"
    " \"e\": {\"type\": \"string\", \"enum\": [\"a\", \"b\"]},"
    " \"b\": {\"type\": \"boolean\"},"
    " \"l\": {\"type\": \"array\", \"maxItems\": 4, \"items\": {\"type\": \"object\","
    "   \"properties\": {\"k\": {\"type\": \"integer\"}}, \"required\": [\"k\"]}}},"
    " \"required\": [\"n\"], \"additionalProperties\": false}";

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
        static struct tool_schema *schema;
        if (!schema) {
                char why[256];
                json_t *doc = json_loads(schema_text, 0, NULL);
                schema = tool_schema_compile(doc, why, sizeof(why));
                json_decref(doc);
                if (!schema)
                        abort();
        }
        struct evbuffer *in = evbuffer_new();
        if (!in)
                return 0;
        evbuffer_add(in, data, size);
        char *line;
        size_t len;
        while ((line = evbuffer_readln(in, &len, EVBUFFER_EOL_LF))) {
                struct toolgate_request req;
                const char *why = NULL;
                size_t n = 0;
                char *answer;
                if (toolgate_proto_parse(line, len, &req, &why) < 0) {
                        if (!why)
                                abort();
                        answer = toolgate_proto_error(req.call_id, "bad_args", why, &n);
                } else {
                        if (!json_is_object(req.doc) || (!req.list && !req.tool) ||
                            (req.args && !json_is_object(req.args)))
                                abort();
                        json_t *args = req.args ? json_deep_copy(req.args) : json_object();
                        json_t *clamps = NULL;
                        char msg[256];
                        if (tool_schema_check(schema, args, true, &clamps, msg, sizeof(msg)) < 0 &&
                            !msg[0])
                                abort();
                        answer = toolgate_proto_ok(req.call_id, args, &n);
                        json_decref(args);
                        json_decref(clamps);
                }
                if (!answer || n == 0 || answer[n - 1] != '\n' || memchr(answer, '\n', n - 1))
                        abort();
                char esc[64];
                toolgate_escape(req.tool ? req.tool : line, esc, sizeof(esc));
                free(answer);
                toolgate_request_clear(&req);
                free(line);
        }
        evbuffer_free(in);
        return 0;
}
