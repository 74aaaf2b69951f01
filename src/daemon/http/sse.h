/* SPDX-License-Identifier: Apache-2.0 */
#pragma once

#include <event2/buffer.h>
#include <event2/http.h>
#include <stdbool.h>
#include <stddef.h>

/* A server-sent-event push stream (stream.c, beside reply_stream): the
 * lifetime every such stream shares. It holds a slot of its grant's while
 * open (counted per grant and kind, with a daemon-wide backstop), ticks
 * while the client is connected, ends within a second of its grant being
 * revoked, sends a heartbeat comment if asked to, and frees its source when
 * the client goes away or the stream ends. GET /v1/events and GET
 * /v1/runs/{id}/events are its users. */

struct daemon;
struct grant;
struct sse_stream;

enum sse_kind {
        SSE_EVENTS, /* GET /v1/events */
        SSE_RUNS,   /* GET /v1/runs/{id}/events */
        SSE_KINDS,
};

struct sse_stream_ops {
        /* Each tick: send what there is (sse_send) or end the stream
         * (sse_end; s is freed then and must not be used after). */
        void (*tick)(struct sse_stream *s, void *ctx);
        /* The data of the final "end" event when the grant was revoked; a
         * new string. NULL: {"reason": "the grant was revoked"}. */
        char *(*revoked)(void *ctx);
        void (*free_ctx)(void *ctx);
};

struct sse_stream_opts {
        enum sse_kind kind;
        unsigned tick_ms;         /* 1 to 999 */
        unsigned heartbeat_s;     /* a ": heartbeat" comment this often; 0 = none */
        size_t high;              /* no heartbeat while this much waits for the client */
        unsigned write_timeout_s; /* the connection's write timeout */
};

/* At most this many streams of a kind per grant, and in all. */
#define SSE_EVENTS_PER_GRANT 16
#define SSE_EVENTS_MAX       256
#define SSE_RUNS_PER_GRANT   8
#define SSE_RUNS_MAX         64
/* The last eighth of a kind's streams is kept for grants holding fewer
 * than this many. */
#define SSE_FEW 2

/* Start the stream (200, text/event-stream) with ctx as its source; NULL,
 * with 429 too_many_streams sent and ctx freed, when the grant (or the
 * daemon) has no slot left. The first tick comes after tick_ms: call
 * sse_tick_now() to have it at once. */
struct sse_stream *sse_start(struct daemon *d, struct evhttp_request *req, const struct grant *g,
                             const struct sse_stream_opts *o, const struct sse_stream_ops *ops,
                             void *ctx);
void sse_tick_now(struct sse_stream *s);
/* Bytes waiting for the client. */
size_t sse_queued(struct sse_stream *s);
/* Send buf's bytes (buf is drained), when there are any. */
void sse_send(struct sse_stream *s, struct evbuffer *buf);
/* A final "event: EVENT" with data (one line of JSON), then the end; s
 * and its source are freed. */
void sse_end(struct sse_stream *s, const char *event, const char *data);
/* Open streams of the grant's of that kind (for tests of the bound). */
unsigned sse_open_count(const char *grant, enum sse_kind kind);
