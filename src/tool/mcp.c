/* SPDX-License-Identifier: Apache-2.0 */
/* `airlock-tool mcp`: the allowed tools as an MCP server on stdio. JSON-RPC
 * 2.0, one message a line; initialize (version negotiation), ping,
 * tools/list and tools/call, each answered through the tool gateway, so an
 * agent that speaks MCP gets exactly what the policy allows and every call
 * is checked and audited on the host. A tool's refusal or failure is a
 * result with isError (the model sees why); a broken request is a JSON-RPC
 * error. */
#include <errno.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "tool.h"

/* Newest first; the newest is the MCP SDK's LATEST_PROTOCOL_VERSION. */
static const char *const versions[] = {"2025-11-25", "2025-06-18", "2025-03-26", "2024-11-05"};

#define MCP_LINE_MAX (16u << 20)

enum {
        RPC_PARSE_ERROR = -32700,
        RPC_INVALID_REQUEST = -32600,
        RPC_METHOD_NOT_FOUND = -32601,
        RPC_INVALID_PARAMS = -32602,
        RPC_INTERNAL = -32603,
};

static void send_msg(json_t *msg)
{
        char *s = json_dumps(msg, JSON_COMPACT | JSON_PRESERVE_ORDER);
        json_decref(msg);
        if (!s)
                return;
        fputs(s, stdout);
        putchar('\n');
        fflush(stdout);
        free(s);
}

static void send_result(json_t *id, json_t *result)
{
        json_t *m = json_pack("{s:s}", "jsonrpc", "2.0");
        json_object_set(m, "id", id);
        json_object_set_new(m, "result", result);
        send_msg(m);
}

static void send_error(json_t *id, int code, const char *message)
{
        json_t *m = json_pack("{s:s}", "jsonrpc", "2.0");
        json_object_set(m, "id", id ? id : json_null());
        json_object_set_new(m, "error", json_pack("{s:i, s:s}", "code", code, "message", message));
        send_msg(m);
}

static json_t *initialize(json_t *params)
{
        const char *asked = json_string_value(json_object_get(params, "protocolVersion"));
        const char *v = versions[0];
        for (size_t i = 0; asked && i < sizeof(versions) / sizeof(versions[0]); i++)
                if (strcmp(asked, versions[i]) == 0)
                        v = versions[i];
        return json_pack("{s:s, s:{s:{s:b}}, s:{s:s, s:s}, s:s}", "protocolVersion", v,
                         "capabilities", "tools", "listChanged", 0, "serverInfo", "name",
                         "airlock-tool", "version", TOOL_VERSION, "instructions",
                         "Host tools through Airlock's tool gateway: only the tools this "
                         "sandbox's policy allows; each call is checked and audited on the "
                         "host.");
}

/* A gateway round trip; NULL after answering the request with an error. */
static json_t *ask(struct tool_client *c, json_t *id, json_t *req)
{
        char err[512];
        json_t *resp = tool_client_request(c, req, err, sizeof(err));
        if (!resp)
                send_error(id, RPC_INTERNAL, err);
        return resp;
}

static json_t *text_content(const char *text)
{
        return json_pack("[{s:s, s:s}]", "type", "text", "text", text);
}

static void tools_call(struct tool_client *c, json_t *id, json_t *params)
{
        json_t *name = json_object_get(params, "name");
        json_t *args = json_object_get(params, "arguments");
        if (!json_is_string(name)) {
                send_error(id, RPC_INVALID_PARAMS, "tools/call needs params.name, a string");
                return;
        }
        if (args && !json_is_null(args) && !json_is_object(args)) {
                send_error(id, RPC_INVALID_PARAMS, "tools/call: params.arguments is not an object");
                return;
        }
        json_t *req = json_pack("{s:O, s:o}", "tool", name, "args",
                                json_is_object(args) ? json_incref(args) : json_object());
        json_t *resp = ask(c, id, req);
        if (!resp)
                return;
        json_t *result;
        if (json_is_true(json_object_get(resp, "ok"))) {
                json_t *v = json_object_get(resp, "value");
                char *text =
                    json_is_string(v) ? strdup(json_string_value(v))
                    : v ? json_dumps(v, JSON_COMPACT | JSON_ENCODE_ANY | JSON_PRESERVE_ORDER)
                        : strdup("");
                result = json_pack("{s:o, s:b}", "content", text_content(text ? text : ""),
                                   "isError", 0);
                if (json_is_object(v))
                        json_object_set(result, "structuredContent", v);
                free(text);
        } else {
                const char *code = json_string_value(json_object_get(resp, "errorCode"));
                const char *msg = json_string_value(json_object_get(resp, "safeMessage"));
                size_t n = (code ? strlen(code) : 5) + (msg ? strlen(msg) : 0) + 3;
                char *text = malloc(n);
                if (text)
                        snprintf(text, n, "%s%s%s", code ? code : "error", msg ? ": " : "",
                                 msg ? msg : "");
                result = json_pack("{s:o, s:b}", "content", text_content(text ? text : "error"),
                                   "isError", 1);
                free(text);
        }
        json_decref(resp);
        send_result(id, result);
}

static void handle(struct tool_client *c, json_t *msg)
{
        if (!json_is_object(msg)) {
                send_error(NULL, RPC_INVALID_REQUEST, "expected a JSON-RPC 2.0 message object");
                return;
        }
        json_t *id = json_object_get(msg, "id");
        json_t *method = json_object_get(msg, "method");
        bool has_id = id && (json_is_string(id) || json_is_integer(id));
        if (!json_is_string(method)) {
                /* A response to us (we send no requests), or garbage. */
                if (!json_object_get(msg, "result") && !json_object_get(msg, "error"))
                        send_error(has_id ? id : NULL, RPC_INVALID_REQUEST,
                                   "expected a JSON-RPC 2.0 request");
                return;
        }
        const char *jv = json_string_value(json_object_get(msg, "jsonrpc"));
        if (!jv || strcmp(jv, "2.0") != 0 || (id && !has_id)) {
                if (id)
                        send_error(has_id ? id : NULL, RPC_INVALID_REQUEST,
                                   "expected jsonrpc \"2.0\" and a string or integer id");
                return;
        }
        const char *m = json_string_value(method);
        json_t *params = json_object_get(msg, "params");
        if (!has_id)
                return; /* notifications: initialized, cancelled, ... need no answer */
        if (params && !json_is_object(params)) {
                send_error(id, RPC_INVALID_PARAMS, "params must be an object");
                return;
        }
        if (strcmp(m, "initialize") == 0) {
                send_result(id, initialize(params));
        } else if (strcmp(m, "ping") == 0) {
                send_result(id, json_object());
        } else if (strcmp(m, "tools/list") == 0) {
                json_t *resp = ask(c, id, json_pack("{s:s}", "op", "list"));
                if (!resp)
                        return;
                json_t *v = json_object_get(resp, "value");
                if (json_is_true(json_object_get(resp, "ok")) && json_is_array(v))
                        send_result(id, json_pack("{s:O}", "tools", v));
                else
                        send_error(id, RPC_INTERNAL,
                                   json_string_value(json_object_get(resp, "safeMessage"))
                                       ?: "the tool gateway refused the list");
                json_decref(resp);
        } else if (strcmp(m, "tools/call") == 0) {
                tools_call(c, id, params);
        } else {
                send_error(id, RPC_METHOD_NOT_FOUND, "method not found");
        }
}

int tool_mcp_main(void)
{
        struct tool_client c;
        char err[512];
        if (tool_client_open(&c, err, sizeof(err)) < 0) {
                fprintf(stderr, "airlock-tool: mcp: %s\n", err);
                return TOOL_EXIT_CLIENT;
        }
        char *line = NULL;
        size_t cap = 0;
        ssize_t n;
        while ((n = getline(&line, &cap, stdin)) >= 0) {
                if ((size_t)n > MCP_LINE_MAX) {
                        send_error(NULL, RPC_INVALID_REQUEST, "message too long");
                        continue;
                }
                while (n > 0 && (line[n - 1] == '\n' || line[n - 1] == '\r'))
                        line[--n] = '\0';
                if (n == 0)
                        continue;
                json_error_t je;
                json_t *msg = json_loadb(line, (size_t)n, JSON_REJECT_DUPLICATES, &je);
                if (!msg) {
                        send_error(NULL, RPC_PARSE_ERROR, "parse error");
                        continue;
                }
                handle(&c, msg);
                json_decref(msg);
        }
        free(line);
        tool_client_close(&c);
        return 0;
}
