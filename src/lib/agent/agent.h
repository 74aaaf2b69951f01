/* SPDX-License-Identifier: Apache-2.0 */
#pragma once

#include <jansson.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

#include "agent/provider.h"
#include "error.h"

/* The host-owned agent loop (docs/agent.md, docs/internals/agent.md): the
 * host talks to the model, the model asks for tool calls, the sandbox only
 * executes them. The loop drives one sandbox's supervisor over its control
 * socket (docs/control.md): each model call is a `fetch` op through one of
 * the sandbox's routes (the key is injected by the supervisor's network
 * gate, the call recorded as route.call), each tool call an `exec` op run
 * by the sandbox's pid 1 (recorded as process.started / process.ended).
 * Nothing here reads or writes the workspace from the host. */

struct agent_budget {
        unsigned max_turns;   /* model calls; 0: none */
        uint64_t max_tokens;  /* input + output tokens the model reported; 0: none */
        uint64_t timeout_ms;  /* the whole run's wall time; 0: none */
        unsigned cmd_timeout; /* seconds a bash call may run (default 120) */
        size_t output_cap;    /* bytes of a tool's result given to the model */
        unsigned retries;     /* model calls retried after an API error */
        unsigned backoff_ms;  /* the first retry's wait, doubled each time */
};

struct agent_config {
        const char *control_socket;
        enum agent_provider provider;
        const char *route; /* the route the model is reached through */
        const char *model;
        const char *system;
        const char *task;
        bool stream;
        uint64_t reply_tokens; /* max_tokens asked of the model per turn */
        bool host_tools;       /* the sandbox has the tool gateway (airlock-tool) */
        struct agent_budget budget;
        /* Transcript: each entry as one JSON line (taken over: the callee
         * decref's it). May be NULL. */
        void (*transcript)(void *ud, json_t *entry);
        void *ud;
};

struct agent_outcome {
        const char *error_code; /* NULL, "budget_exhausted", "timeout", "task_failed", "internal" */
        char message[AL_ERROR_MAX];
        unsigned turns;
        unsigned tool_calls;
        unsigned model_calls; /* attempts, retries included */
        uint64_t input_tokens, output_tokens;
        char *final_text; /* the model's last words; NULL: none */
};

/* Run the loop to its end. Returns 0 with *ret filled whenever the loop ran
 * (its end may still be an error_code), < 0 when it could not start. */
int agent_run(const struct agent_config *cfg, struct agent_outcome *ret, struct al_error *err);
void agent_outcome_clear(struct agent_outcome *o);

/* ---- the control socket, blocking (agent/ctl.c) ---- */

/* One request: each answer line to `line` (borrowed; a return < 0 stops the
 * call with it), until the supervisor closes. `timeout_ms` bounds each wait
 * for a line. */
int agent_ctl_call(const char *socket_path, json_t *req, unsigned timeout_ms,
                   int (*line)(void *ud, json_t *msg), void *ud, struct al_error *err);

/* A command in the sandbox, its output collected up to `cap` bytes (the
 * rest counted, not kept). */
struct agent_exec_result {
        int exit_code;
        char error_code[32]; /* "" or the supervisor's errorCode */
        int pid;
        char *out; /* stdout then stderr as they came, NUL-terminated */
        size_t out_len;
        uint64_t out_total;
};
int agent_exec(const char *socket_path, char *const *argv, const void *stdin_data, size_t stdin_len,
               unsigned timeout_s, size_t cap, struct agent_exec_result *ret, struct al_error *err);
void agent_exec_result_clear(struct agent_exec_result *r);

/* ---- the tools (agent/tools.c) ---- */

/* The tool set offered to the model: bash, read_file, write_file, edit,
 * list_files, and `host_tool` when the sandbox has the tool gateway. */
size_t agent_tools(bool host_tools, const struct agent_tool_def **ret);

/* Run one call in the sandbox; *ret_text is the result for the model
 * (valid UTF-8, truncated with a note past the cap), *ret_error whether the
 * call failed. Returns < 0 only when the sandbox could not be asked. */
int agent_tool_run(const struct agent_config *cfg, const struct agent_tool_call *call,
                   char **ret_text, bool *ret_error, json_t **ret_record, struct al_error *err);

/* Bytes as valid UTF-8 (bad sequences and NULs become U+FFFD), cut to `cap`
 * bytes with a note saying how much was left out. */
char *agent_text_for_model(const char *s, size_t len, uint64_t total, size_t cap);
