/* SPDX-License-Identifier: Apache-2.0 */
#pragma once

#include <stdbool.h>
#include <stddef.h>

/* A parser for server-sent events (the WHATWG event-stream format), as the
 * model APIs stream their answers: lines of "field: value", an event ended
 * by a blank line, "data" lines joined with "\n", comments (":...")
 * ignored, CR, LF and CRLF line ends. The bytes come from the network and
 * are hostile: every line and every event has a bound, and going past it
 * is an error, not a realloc. Fed in pieces of any size. */

#define AGENT_SSE_LINE_MAX  (1u << 20) /* one line */
#define AGENT_SSE_EVENT_MAX (4u << 20) /* one event's data */
#define AGENT_SSE_NAME_MAX  64         /* an event's name */

struct agent_sse;

/* One complete event: its name ("message" when none was given) and its
 * data, NUL-terminated after len bytes. Return < 0 to stop the parse with
 * that error. */
typedef int (*agent_sse_event_fn)(void *ud, const char *name, const char *data, size_t len);

struct agent_sse *agent_sse_new(agent_sse_event_fn fn, void *ud);
struct agent_sse *agent_sse_free(struct agent_sse *s);

/* Feed bytes. Returns 0, -EMSGSIZE (a line or an event over its bound), or
 * what the callback returned. After an error the parser stays failed. */
int agent_sse_feed(struct agent_sse *s, const char *buf, size_t len);
/* The stream ended: an event not ended by a blank line is dropped, as the
 * format says. Returns 0 or the parser's earlier error. */
int agent_sse_finish(struct agent_sse *s);
