/* SPDX-License-Identifier: Apache-2.0 */
/* GET /v1/events: the audit log as Server-Sent Events. Each event is one
 * audit line, unchanged, with its seq as the event id, so a client that
 * reconnects with Last-Event-ID: N gets every line after N once, in order
 * (events-cursor.h finds them across rotations). A grant sees the lines of its own
 * sandboxes only; ?sandbox=ID and ?kind=K (exact, or "net.*" for a prefix)
 * narrow that, each repeatable.
 *
 * Bounded: at most EVENTS_STREAMS_MAX streams; the log is read for a
 * client only while less than EVENTS_HIGH bytes wait for it, and a client
 * that leaves that much unread for EVENTS_STALL_MS is dropped with a final
 * "end" event naming the id to resume from. A comment every heartbeat
 * keeps proxies from closing an idle stream; a grant revoked ends it. */
#include <ctype.h>
#include <errno.h>
#include <inttypes.h>
#include <event2/buffer.h>
#include <event2/bufferevent.h>
#include <event2/event.h>
#include <event2/http.h>
#include <string.h>

#include "daemon.h"
#include "events-cursor.h"
#include "http.h"
#include "routes.h"
#include "util.h"

#define EVENTS_STREAMS_MAX   64
#define EVENTS_HIGH          (64u << 10)
#define EVENTS_READ_CHUNK    (64u << 10)
#define EVENTS_TICK_MS       100
#define EVENTS_STALL_MS      5000
#define EVENTS_HEARTBEAT_DEF 15
#define EVENTS_HEARTBEAT_MAX 300
#define EVENTS_FILTERS_MAX   16
#define EVENTS_KIND_MAX      64
#define EVENTS_OWN_CACHE     64

static unsigned streams_active;

struct own_entry {
        char id[17];
        bool mine;
};

struct events_stream {
        struct daemon *d;
        struct evhttp_request *req;
        struct evhttp_connection *conn;
        struct events_cursor *cur;
        struct event *tick;
        struct event *heartbeat;
        char grant[GRANT_NAME_MAX + 1];
        char grant_hash[GRANT_HASH_HEX + 1];
        char ids[EVENTS_FILTERS_MAX][17];
        size_t n_ids;
        char kinds[EVENTS_FILTERS_MAX][EVENTS_KIND_MAX + 3];
        size_t n_kinds;
        struct own_entry own[EVENTS_OWN_CACHE];
        size_t n_own, own_next;
        uint64_t stalled_since_us;
        struct evbuffer *out; /* while reading */
};

static void stream_free(struct events_stream *s)
{
        if (s->conn)
                evhttp_connection_set_closecb(s->conn, NULL, NULL);
        if (s->tick)
                event_free(s->tick);
        if (s->heartbeat)
                event_free(s->heartbeat);
        events_cursor_free(s->cur);
        free(s);
        streams_active--;
}

static void stream_closed(struct evhttp_connection *conn, void *arg)
{
        struct events_stream *s = arg;
        s->conn = NULL;
        stream_free(s);
}

static size_t queued(struct events_stream *s)
{
        struct bufferevent *bev = s->conn ? evhttp_connection_get_bufferevent(s->conn) : NULL;
        return bev ? evbuffer_get_length(bufferevent_get_output(bev)) : 0;
}

/* The final event: why the stream ends and the id to resume after. */
static void stream_end(struct events_stream *s, const char *reason)
{
        json_t *o = json_pack("{s:s, s:I}", "reason", reason, "lastEventId",
                              (json_int_t)events_cursor_seq(s->cur));
        _cleanup_free_ char *j = json_dumps(o, JSON_COMPACT);
        json_decref(o);
        struct evbuffer *buf = evbuffer_new();
        evbuffer_add_printf(buf, "event: end\ndata: %s\n\n", j ? j : "{}");
        struct evhttp_request *req = s->req;
        stream_free(s);
        evhttp_send_reply_chunk(req, buf);
        evbuffer_free(buf);
        evhttp_send_reply_end(req);
}

/* Whether the grant made the sandbox: the store's record says, and what it
 * says is kept (a pooled sandbox is nobody's until handed out, and an id
 * not recorded yet may be soon: neither is kept). */
static bool sandbox_mine(struct events_stream *s, const char *id)
{
        for (size_t i = 0; i < s->n_own; i++)
                if (STREQ(s->own[i].id, id))
                        return s->own[i].mine;
        struct store_sandbox *r = NULL;
        if (strlen(id) != 16 || store_sandbox_get(s->d->store, id, &r) < 0)
                return false;
        bool mine = r->grant && STREQ(r->grant, s->grant);
        if (r->grant && !STREQ(r->state, "pooled")) {
                struct own_entry *e = &s->own[s->own_next];
                s->own_next = (s->own_next + 1) % EVENTS_OWN_CACHE;
                if (s->n_own < EVENTS_OWN_CACHE)
                        s->n_own++;
                snprintf(e->id, sizeof(e->id), "%s", id);
                e->mine = mine;
        }
        store_sandbox_free(r);
        return mine;
}

static bool kind_matches(const struct events_stream *s, const char *kind)
{
        if (!s->n_kinds)
                return true;
        for (size_t i = 0; i < s->n_kinds; i++) {
                const char *k = s->kinds[i];
                size_t n = strlen(k);
                if (n >= 2 && STREQ(k + n - 2, ".*")) {
                        if (strncmp(kind, k, n - 1) == 0)
                                return true;
                } else if (STREQ(kind, k))
                        return true;
        }
        return false;
}

static bool wanted(struct events_stream *s, const char *line, size_t len)
{
        json_error_t jerr;
        json_t *o = json_loadb(line, len, 0, &jerr);
        const char *sb = json_string_value(json_object_get(o, "sandbox"));
        const char *kind = json_string_value(json_object_get(o, "kind"));
        bool ok = sb && kind && kind_matches(s, kind);
        if (ok && s->n_ids) {
                ok = false;
                for (size_t i = 0; i < s->n_ids && !ok; i++)
                        ok = STREQ(s->ids[i], sb);
        }
        ok = ok && sandbox_mine(s, sb);
        json_decref(o);
        return ok;
}

static int on_line(const char *line, size_t len, uint64_t seq, void *userdata)
{
        struct events_stream *s = userdata;
        if (!wanted(s, line, len))
                return 0;
        /* An audit line is one line of compact JSON: no CR or LF in it. */
        evbuffer_add_printf(s->out, "id: %" PRIu64 "\ndata: ", seq);
        evbuffer_add(s->out, line, len);
        evbuffer_add(s->out, "\n\n", 2);
        return 0;
}

static void stream_send(struct events_stream *s, struct evbuffer *buf)
{
        if (evbuffer_get_length(buf))
                evhttp_send_reply_chunk(s->req, buf);
}

static void stream_tick(evutil_socket_t fd, short what, void *arg)
{
        struct events_stream *s = arg;
        uint64_t now = now_monotonic_us();
        if (queued(s) >= EVENTS_HIGH) {
                if (!s->stalled_since_us)
                        s->stalled_since_us = now;
                else if (now - s->stalled_since_us > (uint64_t)EVENTS_STALL_MS * 1000) {
                        stream_end(s, "slow client: events were left unread; reconnect with "
                                      "Last-Event-ID to resume");
                }
                return;
        }
        s->stalled_since_us = 0;
        struct evbuffer *out = evbuffer_new();
        s->out = out;
        int r = 0;
        for (int i = 0; i < 16 && evbuffer_get_length(out) < EVENTS_HIGH; i++) {
                r = events_cursor_read(s->cur, EVENTS_READ_CHUNK, on_line, s);
                if (r <= 0)
                        break;
        }
        s->out = NULL;
        stream_send(s, out);
        evbuffer_free(out);
        if (r < 0)
                stream_end(s, "the audit log could not be read");
}

static void stream_heartbeat(evutil_socket_t fd, short what, void *arg)
{
        struct events_stream *s = arg;
        struct grant *g = NULL;
        int r = store_grant_by_hash(s->d->store, s->grant_hash, &g);
        grant_free(g);
        if (r == -ENOENT) {
                stream_end(s, "the grant was revoked");
                return;
        }
        if (queued(s) < EVENTS_HIGH) {
                struct evbuffer *buf = evbuffer_new();
                evbuffer_add_printf(buf, ": heartbeat\n\n");
                stream_send(s, buf);
                evbuffer_free(buf);
        }
}

static bool kind_valid(const char *k)
{
        size_t n = strlen(k);
        if (n == 0 || n > EVENTS_KIND_MAX + 2)
                return false;
        if (n >= 2 && STREQ(k + n - 2, ".*"))
                n -= 2;
        if (n == 0 || n > EVENTS_KIND_MAX)
                return false;
        for (size_t i = 0; i < n; i++)
                if (!islower((unsigned char)k[i]) && !isdigit((unsigned char)k[i]) &&
                    !strchr("._-", k[i]))
                        return false;
        return true;
}

static bool id_valid(const char *id)
{
        if (strlen(id) != 16)
                return false;
        for (size_t i = 0; i < 16; i++)
                if (!isdigit((unsigned char)id[i]) && !(id[i] >= 'a' && id[i] <= 'f'))
                        return false;
        return true;
}

/* The filters of the query into s; false with a 400 or 404 sent. */
static bool parse_filters(struct daemon *d, struct evhttp_request *req, const struct route_args *a,
                          struct events_stream *s)
{
        const struct query *q = a->query;
        for (size_t i = 0; i < q->n; i++) {
                const char *k = q->key[i], *v = q->value[i];
                if (STREQ(k, "sandbox")) {
                        if (!id_valid(v)) {
                                reply_bad_field(d, req, "sandbox", "must be a sandbox id");
                                return false;
                        }
                        if (s->n_ids == EVENTS_FILTERS_MAX) {
                                reply_bad_field(d, req, "sandbox", "at most 16 sandboxes");
                                return false;
                        }
                        /* Another grant's sandbox is no sandbox to this one. */
                        struct store_sandbox *r = find_recorded(d, req, v);
                        if (!r)
                                return false;
                        bool mine = r->grant && STREQ(r->grant, s->grant);
                        store_sandbox_free(r);
                        if (!mine) {
                                reply_error(d, req, 404, "not_found", "no sandbox %s", v);
                                return false;
                        }
                        snprintf(s->ids[s->n_ids++], sizeof(s->ids[0]), "%s", v);
                } else if (STREQ(k, "kind")) {
                        if (!kind_valid(v)) {
                                reply_bad_field(d, req, "kind",
                                                "must be an event kind (a-z 0-9 . _ -), or a "
                                                "prefix ending in .* such as net.*");
                                return false;
                        }
                        if (s->n_kinds == EVENTS_FILTERS_MAX) {
                                reply_bad_field(d, req, "kind", "at most 16 kinds");
                                return false;
                        }
                        snprintf(s->kinds[s->n_kinds++], sizeof(s->kinds[0]), "%s", v);
                } else if (!STREQ(k, "heartbeat") && !STREQ(k, "lastEventId")) {
                        reply_error_fields(d, req, 400, "bad_request",
                                           json_pack("{s:s}", "field", k),
                                           "unknown parameter \"%s\": use sandbox, kind, "
                                           "heartbeat or lastEventId",
                                           k);
                        return false;
                }
        }
        return true;
}

void route_events_stream(struct daemon *d, struct evhttp_request *req, const struct route_args *a)
{
        uint64_t heartbeat = EVENTS_HEARTBEAT_DEF;
        const char *hb = query_get(a->query, "heartbeat");
        if (hb && (safe_atou64(hb, &heartbeat) < 0 || heartbeat < 1 ||
                   heartbeat > EVENTS_HEARTBEAT_MAX)) {
                reply_bad_field(d, req, "heartbeat", "must be seconds from 1 to 300");
                return;
        }
        /* Last-Event-ID, or lastEventId for a client that cannot set it. */
        const char *last =
            evhttp_find_header(evhttp_request_get_input_headers(req), "Last-Event-ID");
        const char *field = "Last-Event-ID";
        if (!last) {
                last = query_get(a->query, "lastEventId");
                field = "lastEventId";
        }
        uint64_t after = 0;
        if (last && safe_atou64(last, &after) < 0) {
                reply_bad_field(d, req, field, "must be the id of an event (a number)");
                return;
        }
        struct events_stream *s = xcalloc(1, sizeof(*s));
        s->d = d;
        snprintf(s->grant, sizeof(s->grant), "%s", a->grant->name);
        snprintf(s->grant_hash, sizeof(s->grant_hash), "%s", a->grant->token_hash);
        if (!parse_filters(d, req, a, s)) {
                free(s);
                return;
        }
        if (!d->audit_path) {
                free(s);
                reply_error(d, req, 503, "no_audit_log", "the daemon keeps no audit log");
                return;
        }
        if (streams_active >= EVENTS_STREAMS_MAX) {
                free(s);
                reply_error(d, req, 429, "too_many_streams",
                            "at most %d event streams at once; end one first", EVENTS_STREAMS_MAX);
                return;
        }
        int r = events_cursor_new(d->audit_path, last != NULL, after, &s->cur);
        if (r < 0) {
                free(s);
                reply_error(d, req, 500, "internal", "reading the audit log: %s", strerror(-r));
                return;
        }
        streams_active++;
        s->req = req;
        s->conn = evhttp_request_get_connection(req);
        s->tick = event_new(d->base, -1, EV_PERSIST, stream_tick, s);
        s->heartbeat = event_new(d->base, -1, EV_PERSIST, stream_heartbeat, s);
        struct timeval ttv = {.tv_usec = EVENTS_TICK_MS * 1000};
        struct timeval htv = {.tv_sec = (time_t)heartbeat};
        event_add(s->tick, &ttv);
        event_add(s->heartbeat, &htv);
        if (s->conn)
                evhttp_connection_set_closecb(s->conn, stream_closed, s);
        struct evkeyvalq *h = evhttp_request_get_output_headers(req);
        evhttp_add_header(h, "Content-Type", "text/event-stream");
        evhttp_add_header(h, "Cache-Control", "no-store");
        count_reply(d, 200);
        evhttp_send_reply_start(req, 200, NULL);
        /* No read timeout (a stream is long and the client says nothing);
         * the write timeout counts only while output waits: a backstop
         * under the stall drop above. */
        struct bufferevent *bev = s->conn ? evhttp_connection_get_bufferevent(s->conn) : NULL;
        if (bev) {
                struct timeval wtv = {.tv_sec = 6 * EVENTS_STALL_MS / 1000};
                bufferevent_set_timeouts(bev, NULL, &wtv);
        }
        struct evbuffer *buf = evbuffer_new();
        evbuffer_add_printf(buf, ": events after %" PRIu64 "\n\n", events_cursor_seq(s->cur));
        stream_send(s, buf);
        evbuffer_free(buf);
        stream_tick(-1, 0, s);
}
