/* SPDX-License-Identifier: Apache-2.0 */
/* A reply streamed from a source one chunk at a time (http.h,
 * reply_stream): the next chunk is pulled when the last has left for the
 * client, so that a body of any size takes no more of the daemon's memory
 * than one chunk, and a client that goes away frees the source. Below it,
 * the server-sent-event push streams of sse.h. */
#include <errno.h>
#include <event2/buffer.h>
#include <event2/bufferevent.h>
#include <event2/event.h>
#include <event2/http.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "daemon.h"
#include "grants.h"
#include "grantwatch.h"
#include "http.h"
#include "sse.h"
#include "store.h"
#include "util.h"

struct stream {
        struct evhttp_request *req;
        struct evhttp_connection *conn;
        stream_pull_fn pull;
        stream_free_fn free_src;
        void *src;
};

static void stream_free(struct stream *s)
{
        if (s->conn)
                evhttp_connection_set_closecb(s->conn, NULL, NULL);
        s->free_src(s->src);
        free(s);
}

/* The client went away. A reply under way is detached from its connection
 * by libevent and left to its sender (evhttp_connection_incoming_fail):
 * freed here; one still on the connection is libevent's to free. */
static void request_release(struct evhttp_request *req)
{
        if (!evhttp_request_get_connection(req))
                evhttp_request_free(req);
}

static void stream_closed(struct evhttp_connection *conn, void *arg)
{
        struct stream *s = arg;
        struct evhttp_request *req = s->req;
        (void)conn;
        s->conn = NULL;
        stream_free(s);
        request_release(req);
}

static void stream_next(struct evhttp_connection *conn, void *arg)
{
        struct stream *s = arg;
        (void)conn;
        struct evbuffer *buf = evbuffer_new();
        int n = buf ? s->pull(s->src, buf) : -1;
        if (n <= 0 || evbuffer_get_length(buf) == 0) {
                /* The end, or a read error: the client sees a short body,
                 * never bytes from elsewhere. */
                if (buf)
                        evbuffer_free(buf);
                struct evhttp_request *req = s->req;
                stream_free(s);
                evhttp_send_reply_end(req);
                return;
        }
        evhttp_send_reply_chunk_with_cb(s->req, buf, stream_next, s);
        evbuffer_free(buf);
}

void reply_stream(struct daemon *d, struct evhttp_request *req, stream_pull_fn pull,
                  stream_free_fn free_src, void *src)
{
        struct stream *s = xcalloc(1, sizeof(*s));
        s->req = req;
        s->pull = pull;
        s->free_src = free_src;
        s->src = src;
        s->conn = evhttp_request_get_connection(req);
        if (s->conn)
                evhttp_connection_set_closecb(s->conn, stream_closed, s);
        count_reply(d, 200);
        evhttp_send_reply_start(req, 200, NULL);
        stream_next(s->conn, s);
}

/* ---- server-sent-event push streams (sse.h) ---- */

struct sse_slots {
        struct sse_slots *next;
        unsigned n[SSE_KINDS];
        char grant[GRANT_NAME_MAX + 1];
};

static struct sse_slots *sse_slots;
static unsigned sse_total[SSE_KINDS];
/* Of sse_total, the streams of grants that make nothing (neither
 * sandboxes nor runs): together they take at most half of the daemon's
 * slots, so that readers, however many grants they hold, cannot deny the
 * grants that make sandboxes their streams. */
static unsigned sse_readers[SSE_KINDS];

static const unsigned sse_per_grant[SSE_KINDS] = {SSE_EVENTS_PER_GRANT, SSE_RUNS_PER_GRANT};
static const unsigned sse_max[SSE_KINDS] = {SSE_EVENTS_MAX, SSE_RUNS_MAX};
static const char *const sse_kind_name[SSE_KINDS] = {"event", "run"};

#define SSE_GRANT_CHECK_MS 1000

struct sse_stream {
        struct daemon *d;
        struct evhttp_request *req;
        struct evhttp_connection *conn;
        struct event *tick, *heartbeat;
        const struct sse_stream_ops *ops;
        void *ctx;
        struct sse_slots *slot;
        enum sse_kind kind;
        bool reader; /* counted in sse_readers */
        size_t high;
        unsigned ticks, ticks_per_check;
        char grant_hash[GRANT_HASH_HEX + 1];
};

static struct sse_slots *sse_slot_find(const char *grant, bool create)
{
        for (struct sse_slots *e = sse_slots; e; e = e->next)
                if (STREQ(e->grant, grant))
                        return e;
        if (!create)
                return NULL;
        struct sse_slots *e = xcalloc(1, sizeof(*e));
        snprintf(e->grant, sizeof(e->grant), "%s", grant);
        e->next = sse_slots;
        sse_slots = e;
        return e;
}

static void sse_slot_put(struct sse_slots *e, enum sse_kind kind)
{
        e->n[kind]--;
        sse_total[kind]--;
        for (size_t k = 0; k < SSE_KINDS; k++)
                if (e->n[k])
                        return;
        for (struct sse_slots **p = &sse_slots; *p; p = &(*p)->next)
                if (*p == e) {
                        *p = e->next;
                        free(e);
                        return;
                }
}

unsigned sse_open_count(const char *grant, enum sse_kind kind)
{
        struct sse_slots *e = sse_slot_find(grant, false);
        return e ? e->n[kind] : 0;
}

static void sse_free(struct sse_stream *s)
{
        if (s->conn)
                evhttp_connection_set_closecb(s->conn, NULL, NULL);
        if (s->tick)
                event_free(s->tick);
        if (s->heartbeat)
                event_free(s->heartbeat);
        s->ops->free_ctx(s->ctx);
        sse_slot_put(s->slot, s->kind);
        if (s->reader)
                sse_readers[s->kind]--;
        free(s);
}

static void sse_closed(struct evhttp_connection *conn, void *arg)
{
        struct sse_stream *s = arg;
        struct evhttp_request *req = s->req;
        (void)conn;
        s->conn = NULL;
        sse_free(s);
        request_release(req);
}

size_t sse_queued(struct sse_stream *s)
{
        struct bufferevent *bev = s->conn ? evhttp_connection_get_bufferevent(s->conn) : NULL;
        return bev ? evbuffer_get_length(bufferevent_get_output(bev)) : 0;
}

void sse_send(struct sse_stream *s, struct evbuffer *buf)
{
        if (evbuffer_get_length(buf))
                evhttp_send_reply_chunk(s->req, buf);
}

void sse_end(struct sse_stream *s, const char *event, const char *data)
{
        struct evbuffer *buf = evbuffer_new();
        evbuffer_add_printf(buf, "event: %s\ndata: %s\n\n", event, data);
        struct evhttp_request *req = s->req;
        sse_free(s);
        evhttp_send_reply_chunk(req, buf);
        evbuffer_free(buf);
        evhttp_send_reply_end(req);
}

/* A revoked grant reads no more: its streams end as its requests would be
 * refused. */
static bool sse_revoked(struct sse_stream *s)
{
        if (++s->ticks < s->ticks_per_check)
                return false;
        s->ticks = 0;
        if (!grant_hash_revoked(s->d, s->grant_hash))
                return false;
        _cleanup_free_ char *data = s->ops->revoked ? s->ops->revoked(s->ctx) : NULL;
        sse_end(s, "end", data ? data : "{\"reason\":\"the grant was revoked\"}");
        return true;
}

static void sse_on_tick(evutil_socket_t fd, short what, void *arg)
{
        struct sse_stream *s = arg;
        (void)fd;
        (void)what;
        if (sse_revoked(s))
                return;
        s->ops->tick(s, s->ctx);
}

void sse_tick_now(struct sse_stream *s)
{
        s->ops->tick(s, s->ctx);
}

static void sse_on_heartbeat(evutil_socket_t fd, short what, void *arg)
{
        struct sse_stream *s = arg;
        (void)fd;
        (void)what;
        if (sse_queued(s) >= s->high)
                return;
        struct evbuffer *buf = evbuffer_new();
        evbuffer_add_printf(buf, ": heartbeat\n\n");
        sse_send(s, buf);
        evbuffer_free(buf);
}

struct sse_stream *sse_start(struct daemon *d, struct evhttp_request *req, const struct grant *g,
                             const struct sse_stream_opts *o, const struct sse_stream_ops *ops,
                             void *ctx)
{
        struct sse_slots *e = sse_slot_find(g->name, false);
        unsigned mine = e ? e->n[o->kind] : 0;
        bool reader = !g->allow_sandbox && !g->allow_runs;
        bool readers_full = reader && sse_readers[o->kind] >= sse_max[o->kind] / 2;
        /* The last eighth of the slots goes only to grants that hold fewer
         * than SSE_FEW: grants that each open all they may cannot, together,
         * leave another grant none. */
        unsigned reserve = sse_max[o->kind] / 8;
        bool reserved = mine >= SSE_FEW && sse_total[o->kind] + reserve >= sse_max[o->kind];
        if (mine >= sse_per_grant[o->kind] || sse_total[o->kind] >= sse_max[o->kind] ||
            readers_full || reserved) {
                ops->free_ctx(ctx);
                const char *what = sse_kind_name[o->kind];
                if (mine >= sse_per_grant[o->kind])
                        reply_error_fields(d, req, 429, "too_many_streams",
                                           json_pack("{s:s, s:I}", "limit", "streamsPerGrant",
                                                     "max", (json_int_t)sse_per_grant[o->kind]),
                                           "grant \"%s\" has %u %s streams open, its most at "
                                           "once; end one first",
                                           g->name, sse_per_grant[o->kind], what);
                else if (readers_full)
                        reply_error_fields(d, req, 429, "too_many_streams",
                                           json_pack("{s:s, s:I}", "limit", "readerStreams", "max",
                                                     (json_int_t)sse_max[o->kind] / 2),
                                           "grants that make no sandboxes have %u %s streams "
                                           "open, their most at once (the rest are kept for "
                                           "the grants that do); try again later",
                                           sse_max[o->kind] / 2, what);
                else if (reserved && sse_total[o->kind] < sse_max[o->kind])
                        reply_error_fields(d, req, 429, "too_many_streams",
                                           json_pack("{s:s, s:I}", "limit", "streamsReserved",
                                                     "max", (json_int_t)reserve),
                                           "the daemon keeps its last %u %s streams for grants "
                                           "that hold fewer than %u; grant \"%s\" holds %u; "
                                           "try again later",
                                           reserve, what, SSE_FEW, g->name, mine);
                else
                        reply_error_fields(d, req, 429, "too_many_streams",
                                           json_pack("{s:s, s:I}", "limit", "streams", "max",
                                                     (json_int_t)sse_max[o->kind]),
                                           "the daemon has %u %s streams open, its most at "
                                           "once; try again later",
                                           sse_max[o->kind], what);
                return NULL;
        }
        struct sse_stream *s = xcalloc(1, sizeof(*s));
        s->d = d;
        s->req = req;
        s->ops = ops;
        s->ctx = ctx;
        s->kind = o->kind;
        s->reader = reader;
        if (reader)
                sse_readers[o->kind]++;
        s->high = o->high;
        s->slot = sse_slot_find(g->name, true);
        s->slot->n[o->kind]++;
        sse_total[o->kind]++;
        snprintf(s->grant_hash, sizeof(s->grant_hash), "%s", g->token_hash);
        s->ticks_per_check = SSE_GRANT_CHECK_MS / o->tick_ms;
        s->conn = evhttp_request_get_connection(req);
        s->tick = event_new(d->base, -1, EV_PERSIST, sse_on_tick, s);
        struct timeval ttv = {.tv_usec = (suseconds_t)o->tick_ms * 1000};
        event_add(s->tick, &ttv);
        if (o->heartbeat_s) {
                s->heartbeat = event_new(d->base, -1, EV_PERSIST, sse_on_heartbeat, s);
                struct timeval htv = {.tv_sec = (time_t)o->heartbeat_s};
                event_add(s->heartbeat, &htv);
        }
        if (s->conn)
                evhttp_connection_set_closecb(s->conn, sse_closed, s);
        struct evkeyvalq *h = evhttp_request_get_output_headers(req);
        evhttp_add_header(h, "Content-Type", "text/event-stream");
        evhttp_add_header(h, "Cache-Control", "no-store");
        count_reply(d, 200);
        evhttp_send_reply_start(req, 200, NULL);
        /* No read timeout (a stream is long and the client says nothing);
         * the write timeout counts only while output waits. */
        struct bufferevent *bev = s->conn ? evhttp_connection_get_bufferevent(s->conn) : NULL;
        if (bev) {
                struct timeval wtv = {.tv_sec = (time_t)o->write_timeout_s};
                bufferevent_set_timeouts(bev, NULL, &wtv);
        }
        return s;
}
