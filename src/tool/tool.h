/* SPDX-License-Identifier: Apache-2.0 */
#pragma once

/* airlock-tool, the tool gateway's client inside a sandbox (docs/tools.md):
 * one connection to the gateway's socket, JSON lines both ways. Linked
 * statically with jansson alone, so that it runs in any root the sandbox
 * has; it shares no code with the host side. */

#include <jansson.h>
#include <stddef.h>

#define TOOL_VERSION "0.1.0"

/* `airlock-tool connect HOST PORT` (connect.c). */
int tool_connect_main(int argc, char **argv);

/* Exit codes of `airlock-tool call`, one per errorCode (docs/tools.md). */
enum {
        TOOL_EXIT_OK = 0,
        TOOL_EXIT_CLIENT = 1, /* no gateway here, or it broke the protocol */
        TOOL_EXIT_USAGE = 2,
        TOOL_EXIT_POLICY_DENIED = 3,
        TOOL_EXIT_BAD_ARGS = 4,
        TOOL_EXIT_RATE_LIMITED = 5,
        TOOL_EXIT_TIMEOUT = 6,
        TOOL_EXIT_TOOL_FAILED = 7,
        TOOL_EXIT_RUN_MISMATCH = 8,
        TOOL_EXIT_INTERNAL = 9,
        TOOL_EXIT_AUDIT_FAILED = 10, /* the call could not be recorded; not run */
};

/* A response line may carry a tool's whole output (outputMax) as JSON. */
#define TOOL_RESPONSE_MAX (64u << 20)

struct tool_client {
        int fd;
        const char *run_id;
        unsigned long next_call;
        char *buf; /* what was read past the last line */
        size_t len;
        size_t cap;
};

/* Connect to $AIRLOCK_TOOL_SOCKET with $AIRLOCK_RUN_ID. -1 with a message
 * in err (naming what is missing) when there is no gateway. */
int tool_client_open(struct tool_client *c, char *err, size_t errlen);
void tool_client_close(struct tool_client *c);

/* Send `req` (taken over) with runId and a fresh callId, and return the
 * response with that callId; NULL with a message in err when the
 * connection fails or the gateway breaks the protocol. */
json_t *tool_client_request(struct tool_client *c, json_t *req, char *err, size_t errlen);

/* The exit code for an errorCode. */
int tool_exit_code(const char *error_code);

/* `airlock-tool hw ...`: the hardware gate's calls (hw.c). */
int tool_hw_main(int argc, char **argv);

/* `airlock-tool mcp`: an MCP server on stdin/stdout (mcp.c). */
int tool_mcp_main(void);
