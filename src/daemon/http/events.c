/* SPDX-License-Identifier: Apache-2.0 */
/* GET /v1/events: the audit log as Server-Sent Events. Each event is one
 * audit line, unchanged, with its seq as the event id, so a client that
 * reconnects with Last-Event-ID: N gets every line after N once, in order
 * (events-cursor.h finds them across rotations). A grant sees the lines of its own
 * sandboxes only; ?sandbox=ID and ?kind=K (exact, or "net.*" for a prefix)
 * narrow that, each repeatable.
 *
 * A grant's agent runs (POST /v1/runs) are its sandboxes here too.
 *
 * Bounded: the stream's lifetime and slots are sse.h's (per grant); the
 * log is read for a client only while less than EVENTS_HIGH bytes wait
 * for it, and a client that leaves that much unread for EVENTS_STALL_MS is
 * dropped with a final "end" event naming the id to resume from. A
 * comment every heartbeat keeps proxies from closing an idle stream; a
 * grant revoked ends it. */
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
#include "sse.h"
#include "util.h"

#define EVENTS_HIGH          (64u << 10)
#define EVENTS_READ_CHUNK    (64u << 10)
#define EVENTS_TICK_MS       100
#define EVENTS_STALL_MS      5000
#define EVENTS_HEARTBEAT_DEF 15
#define EVENTS_HEARTBEAT_MAX 300
#define EVENTS_FILTERS_MAX   16
#define EVENTS_KIND_MAX      64
#define EVENTS_OWN_CACHE     64

struct own_entry {
        char id[17];
        bool mine;
};

struct events_stream {
        struct daemon *d;
        struct events_cursor *cur;
        char grant[GRANT_NAME_MAX + 1];
        char ids[EVENTS_FILTERS_MAX][17];
        size_t n_ids;
        char kinds[EVENTS_FILTERS_MAX][EVENTS_KIND_MAX + 3];
        size_t n_kinds;
        struct own_entry own[EVENTS_OWN_CACHE];
        size_t n_own, own_next;
        uint64_t stalled_since_us;
        struct evbuffer *out; /* while reading */
};

static void events_free(void *ctx)
{
        struct events_stream *s = ctx;
        events_cursor_free(s->cur);
        free(s);
}

/* The final event's data: why the stream ends and the id to resume after. */
static char *end_data(struct events_stream *s, const char *reason)
{
        json_t *o = json_pack("{s:s, s:I}", "reason", reason, "lastEventId",
                              (json_int_t)events_cursor_seq(s->cur));
        char *j = json_dumps(o, JSON_COMPACT);
        json_decref(o);
        return j;
}

static void stream_end(struct sse_stream *sse, struct events_stream *s, const char *reason)
{
        _cleanup_free_ char *j = end_data(s, reason);
        sse_end(sse, "end", j ? j : "{}");
}

static char *events_revoked(void *ctx)
{
        return end_data(ctx, "the grant was revoked");
}

static void own_keep(struct events_stream *s, const char *id, bool mine)
{
        struct own_entry *e = &s->own[s->own_next];
        s->own_next = (s->own_next + 1) % EVENTS_OWN_CACHE;
        if (s->n_own < EVENTS_OWN_CACHE)
                s->n_own++;
        snprintf(e->id, sizeof(e->id), "%s", id);
        e->mine = mine;
}

/* Whether the grant made the sandbox: the store's record says, and what it
 * says is kept (a pooled sandbox is nobody's until handed out, and an id
 * not recorded yet may be soon: neither is kept). */
static bool sandbox_mine(struct events_stream *s, const char *id)
{
        for (size_t i = 0; i < s->n_own; i++)
                if (STREQ(s->own[i].id, id))
                        return s->own[i].mine;
        if (strlen(id) != 16)
                return false;
        struct store_sandbox *r = NULL;
        if (store_sandbox_get(s->d->store, id, &r) < 0) {
                /* An agent run's lines are under the run's id. */
                int owner = run_owner_is(s->d, id, s->grant);
                if (owner >= 0)
                        own_keep(s, id, owner);
                return owner > 0;
        }
        bool mine = r->grant && STREQ(r->grant, s->grant);
        if (r->grant && !STREQ(r->state, "pooled"))
                own_keep(s, id, mine);
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

static void events_tick(struct sse_stream *sse, void *ctx)
{
        struct events_stream *s = ctx;
        uint64_t now = now_monotonic_us();
        if (sse_queued(sse) >= EVENTS_HIGH) {
                if (!s->stalled_since_us)
                        s->stalled_since_us = now;
                else if (now - s->stalled_since_us > (uint64_t)EVENTS_STALL_MS * 1000) {
                        stream_end(sse, s,
                                   "slow client: events were left unread; reconnect with "
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
        sse_send(sse, out);
        evbuffer_free(out);
        if (r < 0)
                stream_end(sse, s, "the audit log could not be read");
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
        if (!parse_filters(d, req, a, s)) {
                free(s);
                return;
        }
        if (!d->audit_path) {
                free(s);
                reply_error(d, req, 503, "no_audit_log", "the daemon keeps no audit log");
                return;
        }
        int r = events_cursor_new(d->audit_path, last != NULL, after, &s->cur);
        if (r < 0) {
                free(s);
                reply_error(d, req, 500, "internal", "reading the audit log: %s", strerror(-r));
                return;
        }
        static const struct sse_stream_ops ops = {
            .tick = events_tick, .revoked = events_revoked, .free_ctx = events_free};
        /* The write timeout is a backstop under the stall drop above. */
        struct sse_stream *sse = sse_start(d, req, a->grant,
                                           &(struct sse_stream_opts){
                                               .kind = SSE_EVENTS,
                                               .tick_ms = EVENTS_TICK_MS,
                                               .heartbeat_s = (unsigned)heartbeat,
                                               .high = EVENTS_HIGH,
                                               .write_timeout_s = 6 * EVENTS_STALL_MS / 1000,
                                           },
                                           &ops, s);
        if (!sse)
                return;
        struct evbuffer *buf = evbuffer_new();
        evbuffer_add_printf(buf, ": events after %" PRIu64 "\n\n", events_cursor_seq(s->cur));
        sse_send(sse, buf);
        evbuffer_free(buf);
        sse_tick_now(sse);
}
