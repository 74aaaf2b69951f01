/* SPDX-License-Identifier: Apache-2.0 */
#pragma once
/* The relay of a control-socket call to an HTTP client (call.c), shared by
 * exec.c and processes.c. */

#include <event2/http.h>
#include <jansson.h>
#include <stdbool.h>
#include <stdint.h>

#include "grants.h"

struct daemon;
struct sandbox;
struct ctl_call;
struct grant_watch;

#define STDIN_MAX (8u << 20) /* base64 text of stdin in one request */

enum call_kind { CALL_EXEC, CALL_ATTACH, CALL_SIMPLE };

struct call_ctx {
        struct call_ctx *prev, *next;
        struct daemon *d;
        struct evhttp_request *req;
        struct evhttp_connection *conn;
        struct sandbox *sb;
        struct ctl_call *call;
        enum call_kind kind;
        bool background;
        bool replied;   /* the status line went out */
        bool streaming; /* a chunked NDJSON body is open */
        bool gone;      /* the client went away */
        bool saw_exit;
        bool saw_started;
        bool counted;
        bool utf8; /* ?encoding=utf8: output that is UTF-8 goes as "text" */
        uint64_t t0_us;
        uint64_t pid;
        uint64_t stall_ms; /* a client that reads nothing this long is gone */
        json_t *argv;
        char *grant;
        /* A stream (an exec's output, a process's events) is its grant's:
         * looked up each GRANT_WATCH_MS whether or not anything flows, and
         * ended when revoked. */
        char grant_hash[GRANT_HASH_HEX + 1];
        struct grant_watch *watch;
        bool revoked;
        /* A command's output may overtake its "started" line on the way
         * from the supervisor; it waits here so that clients see started
         * first. */
        json_t *held;
        size_t held_bytes;
};

/* Start the call `ctl_req` on sb's control socket for `req`, relaying as
 * `kind` says; c (zeroed, then filled in by the handler: argv, grant,
 * grant_hash, pid, utf8, background, stall_ms) is the call's from here on. */
void call_start(struct daemon *d, struct evhttp_request *req, struct sandbox *sb,
                enum call_kind kind, json_t *ctl_req, struct call_ctx *c);
/* ?encoding=utf8 (or base64, the default): 1, 0, or -1 for another value. */
int query_utf8(struct evhttp_request *req);
