/* SPDX-License-Identifier: Apache-2.0 */
/* GET /v1/sandboxes/{id}/files/watch: a directory's inotify events as a
 * stream of JSON lines (files-watch.h), bounded: at most WATCHES_MAX at
 * once, reading pauses while a client has STREAM_HIGH bytes unread (the
 * kernel's queue then overflows into an "overflow" event), a client that
 * reads nothing for STALL_S is dropped, and the stream ends after its
 * timeout. */
#include <errno.h>
#include <event2/buffer.h>
#include <event2/bufferevent.h>
#include <event2/event.h>
#include <event2/http.h>
#include <string.h>

#include "daemon.h"
#include "files-deny.h"
#include "files-watch.h"
#include "files.h"
#include "grants.h"
#include "grantwatch.h"
#include "http.h"
#include "record.h"
#include "routes.h"
#include "sandbox.h"
#include "util.h"

#define WATCHES_MAX       64
#define WATCHES_GRANT_MAX 16 /* of those, one grant's: no grant takes them all */
/* Of those, the watches of sandboxes another grant made, in all: however
 * many grants read, the rest stay for the sandboxes' makers. */
#define WATCHES_OTHERS_MAX 32
#define STREAM_HIGH        (1u << 20)
#define STALL_S            60
#define WATCH_TIMEOUT_DEF  3600
#define WATCH_TIMEOUT_MAX  86400

static unsigned watches_active;

struct watch_stream {
        struct evhttp_request *req;
        struct evhttp_connection *conn;
        struct files_watch *w;
        struct event *ev;
        struct event *timer;
        struct grant_watch *grant; /* a revoked grant's watch ends */
        char grant_name[GRANT_NAME_MAX + 1];
        struct watch_stream *next, **prev; /* in `streams` */
        bool paused;
        bool other; /* of a sandbox another grant made */
};

static struct watch_stream *streams;

static unsigned grant_watches(const char *name)
{
        unsigned n = 0;
        for (const struct watch_stream *s = streams; s; s = s->next)
                n += STREQ(s->grant_name, name);
        return n;
}

static unsigned others_watches(void)
{
        unsigned n = 0;
        for (const struct watch_stream *s = streams; s; s = s->next)
                n += s->other;
        return n;
}

static void watch_free(struct watch_stream *s)
{
        if (s->conn)
                evhttp_connection_set_closecb(s->conn, NULL, NULL);
        if (s->ev)
                event_free(s->ev);
        if (s->timer)
                event_free(s->timer);
        s->grant = grant_watch_free(s->grant);
        files_watch_free(s->w);
        *s->prev = s->next;
        if (s->next)
                s->next->prev = s->prev;
        free(s);
        watches_active--;
}

static void watch_closed(struct evhttp_connection *conn, void *arg)
{
        struct watch_stream *s = arg;
        struct evhttp_request *req = s->req;
        s->conn = NULL;
        watch_free(s);
        /* The reply under way was detached from its connection by libevent
         * and left to us (evhttp_connection_incoming_fail): freed here, or
         * every watch a client closed stayed allocated. */
        if (!evhttp_request_get_connection(req))
                evhttp_request_free(req);
}

static size_t queued(struct watch_stream *s)
{
        struct bufferevent *bev = s->conn ? evhttp_connection_get_bufferevent(s->conn) : NULL;
        return bev ? evbuffer_get_length(bufferevent_get_output(bev)) : 0;
}

static void watch_drained(struct evhttp_connection *conn, void *arg)
{
        struct watch_stream *s = arg;
        if (s->paused && queued(s) < STREAM_HIGH / 2) {
                s->paused = false;
                event_add(s->ev, NULL);
        }
}

static struct evbuffer *lines(json_t *events)
{
        struct evbuffer *buf = evbuffer_new();
        size_t i;
        json_t *e;
        json_array_foreach(events, i, e)
        {
                char *line = json_dumps(e, JSON_COMPACT);
                if (line) {
                        evbuffer_add(buf, line, strlen(line));
                        evbuffer_add(buf, "\n", 1);
                        free(line);
                }
        }
        return buf;
}

static void send_events(struct watch_stream *s, json_t *events)
{
        struct evbuffer *buf = lines(events);
        evhttp_send_reply_chunk_with_cb(s->req, buf, watch_drained, s);
        evbuffer_free(buf);
        if (queued(s) > STREAM_HIGH) {
                s->paused = true;
                event_del(s->ev);
        }
}

static void watch_end(struct watch_stream *s, const char *why)
{
        /* The last chunk carries no callback: s is gone when it drains. */
        json_t *events = json_pack("[{s:s, s:s}]", "type", "end", "reason", why);
        struct evbuffer *buf = lines(events);
        json_decref(events);
        struct evhttp_request *req = s->req;
        watch_free(s);
        evhttp_send_reply_chunk(req, buf);
        evbuffer_free(buf);
        evhttp_send_reply_end(req);
}

static void watch_readable(evutil_socket_t fd, short what, void *arg)
{
        struct watch_stream *s = arg;
        json_t *events = json_array();
        int r = files_watch_read(s->w, events);
        if (json_array_size(events) > 0)
                send_events(s, events);
        json_decref(events);
        if (r == -ENOENT)
                watch_end(s, "the directory is gone");
        else if (r < 0)
                watch_end(s, "the watch failed");
}

static void watch_timeout(evutil_socket_t fd, short what, void *arg)
{
        watch_end(arg, "timeout");
}

static void watch_revoked(void *arg)
{
        watch_end(arg, "the grant was revoked");
}

void route_files_watch(struct daemon *d, struct evhttp_request *req, const struct route_args *a)
{
        const char *path = query_get(a->query, "path");
        struct al_error err = {0};
        _cleanup_free_ char *rel = NULL;
        if (files_clean_path(path ? path : ".", true, &rel, &err) < 0) {
                reply_error_fields(d, req, err.code == EXDEV ? 403 : 400,
                                   err.code == EXDEV ? "path_refused" : "bad_request",
                                   json_pack("{s:s}", "field", "path"), "%s", err.msg);
                return;
        }
        bool recursive = true;
        if (query_bool(a->query, "recursive", true, &recursive) < 0) {
                reply_bad_field(d, req, "recursive", "must be true or false");
                return;
        }
        uint64_t timeout = WATCH_TIMEOUT_DEF;
        const char *ts = query_get(a->query, "timeout");
        if (ts && (safe_atou64(ts, &timeout) < 0 || timeout < 1 || timeout > WATCH_TIMEOUT_MAX)) {
                reply_bad_field(d, req, "timeout", "must be seconds from 1 to 86400");
                return;
        }
        struct sandbox *sb = find_running(d, req, a->id);
        if (!sb)
                return;
        if (sb->policy && sb->policy->workspace_mode == POLICY_WORKSPACE_OVERLAY) {
                reply_error(d, req, 409, "review_workspace",
                            "the workspace of sandbox %s is copy-on-write: its changes are not "
                            "in the host directory a watch would see",
                            a->id);
                return;
        }
        if (watches_active >= WATCHES_MAX) {
                reply_error(d, req, 429, "too_many_watches",
                            "at most %d watches at once; end one first", WATCHES_MAX);
                return;
        }
        if (grant_watches(a->grant->name) >= WATCHES_GRANT_MAX) {
                reply_error(d, req, 429, "too_many_watches",
                            "grant \"%s\" has its %d watches at once; end one first",
                            a->grant->name, WATCHES_GRANT_MAX);
                return;
        }
        bool other = !sb->grant || !STREQ(sb->grant, a->grant->name);
        if (other && others_watches() >= WATCHES_OTHERS_MAX) {
                reply_error(d, req, 429, "too_many_watches",
                            "at most %d watches at once of sandboxes another grant made; the "
                            "rest are kept for their makers: end one first",
                            WATCHES_OTHERS_MAX);
                return;
        }
        _cleanup_close_ int root = -1;
        if (files_open_root(sb->workspace, &root, &err) < 0) {
                reply_error(d, req, 500, "internal", "%s", err.msg);
                return;
        }
        if (files_deny_guard(d, req, sb, root, rel, recursive) < 0)
                return;
        /* Each directory is checked again as the watch reaches it: a
         * denied one moved in after the check above is never watched. */
        struct files_deny *deny = NULL;
        if (files_deny_for(d, req, sb, &deny) < 0)
                return;
        struct files_watch *w = NULL;
        if (files_watch_new_deny(root, rel, recursive, a->grant->token_hash, deny, &w, &err) < 0) {
                int e = err.code;
                if (e == EACCES) {
                        reply_error_fields(d, req, 403, "path_denied",
                                           json_pack("{s:s}", "field", "path"), "%s", err.msg);
                        return;
                }
                if (e == ENOSPC) {
                        reply_error(d, req, 429, "too_many_watches", "%s", err.msg);
                        return;
                }
                reply_error_fields(d, req,
                                   e == EXDEV || e == ELOOP ? 403
                                   : e == ENOENT            ? 404
                                   : e == ENOTDIR           ? 400
                                                            : 500,
                                   e == EXDEV || e == ELOOP ? "path_refused"
                                   : e == ENOENT            ? "not_found"
                                   : e == ENOTDIR           ? "bad_request"
                                                            : "internal",
                                   json_pack("{s:s}", "field", "path"), "%s", err.msg);
                return;
        }
        sandbox_touch(sb);
        struct watch_stream *s = xcalloc(1, sizeof(*s));
        watches_active++;
        s->other = other;
        snprintf(s->grant_name, sizeof(s->grant_name), "%s", a->grant->name);
        s->next = streams;
        if (streams)
                streams->prev = &s->next;
        s->prev = &streams;
        streams = s;
        s->req = req;
        s->w = w;
        s->conn = evhttp_request_get_connection(req);
        s->ev = event_new(d->base, files_watch_fd(w), EV_READ | EV_PERSIST, watch_readable, s);
        s->timer = evtimer_new(d->base, watch_timeout, s);
        struct timeval tv = {.tv_sec = (time_t)timeout};
        event_add(s->ev, NULL);
        evtimer_add(s->timer, &tv);
        s->grant = grant_watch_new(d, a->grant->token_hash, watch_revoked, s);
        if (s->conn)
                evhttp_connection_set_closecb(s->conn, watch_closed, s);
        struct evkeyvalq *h = evhttp_request_get_output_headers(req);
        evhttp_add_header(h, "Content-Type", "application/x-ndjson");
        evhttp_add_header(h, "Cache-Control", "no-store");
        count_reply(d, 200);
        evhttp_send_reply_start(req, 200, NULL);
        struct bufferevent *bev = s->conn ? evhttp_connection_get_bufferevent(s->conn) : NULL;
        if (bev) {
                struct timeval wtv = {.tv_sec = STALL_S};
                bufferevent_set_timeouts(bev, NULL, &wtv);
        }
        json_t *ready =
            json_pack("[{s:s, s:s, s:b}]", "type", "ready", "path", rel, "recursive", recursive);
        send_events(s, ready);
        json_decref(ready);
}
