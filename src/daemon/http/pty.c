/* SPDX-License-Identifier: Apache-2.0 */
/* Terminals over the API (docs/api.md, "Terminals"): a process started
 * with "pty" has a terminal whose master its supervisor holds; here are its
 * resize call and its byte stream, a WebSocket (RFC 6455) on
 * GET …/processes/{pid}/pty.
 *
 * The stream relays the supervisor's kept events of the process (attach):
 * output goes to the client as binary frames, from the byte offset it asks
 * for (?offset=N, the bytes it already has), so a client that lost its
 * connection reconnects with the count of bytes it got and loses nothing
 * that is still kept; the process's other events (started, exit, a gap in
 * what was kept) go as text frames of JSON. What the client sends in binary
 * frames is typed into the terminal ("stdin" calls, one at a time).
 *
 * libevent 2.1's HTTP server has no WebSocket: the 101 answer goes out as a
 * reply without a body, then the connection's bufferevent is read here (the
 * guard is told to let its bytes through, http_guard_upgraded) and written
 * here, raw, until one side closes. Then the request is ended with
 * "Connection: close" so that libevent frees the connection. */
#include <ctype.h>
#include <errno.h>
#include <event2/buffer.h>
#include <event2/bufferevent.h>
#include <event2/event.h>
#include <event2/http.h>
#include <inttypes.h>
#include <string.h>
#include <strings.h>

#include "ctl.h"
#include "daemon.h"
#include "grantwatch.h"
#include "http.h"
#include "httpguard.h"
#include "routes.h"
#include "sandbox.h"
#include "uisession.h"
#include "util.h"
#include "ws.h"

#define WS_FRAME_MAX   (64u * 1024)  /* the largest frame a client may send */
#define WS_READ_HIGH   (256u * 1024) /* client bytes read ahead of the terminal */
#define WS_INPUT_MAX   (256u * 1024) /* input waiting for the supervisor */
#define WS_INPUT_CHUNK (48u * 1024)  /* input in one "stdin" call */
#define WS_OUT_HIGH    (1u << 20)    /* output queued to a client before reading pauses */
#define WS_PING_S      20            /* a ping this often ... */
#define WS_IDLE_S      60            /* ... and a client silent this long is gone */
#define WS_CLOSE_S     10            /* the close frame goes out within this */

struct ws_session {
        struct ws_session *next;
        struct daemon *d;
        struct evhttp_request *req;
        struct evhttp_connection *conn;
        struct bufferevent *bev;
        bufferevent_data_cb http_write_cb; /* libevent's, put back at the end */
        bufferevent_event_cb http_event_cb;
        void *http_cb_arg;
        struct sandbox *sb;
        uint64_t pid;
        char accept[29];
        struct ctl_call *attach;  /* the process's events */
        struct ctl_call *input;   /* a "stdin" call in flight */
        struct evbuffer *pending; /* input not yet sent */
        struct event *ping;
        struct grant_watch *grant_watch; /* a revoked grant's terminal is closed */
        char grant_hash[GRANT_HASH_HEX + 1];
        uint64_t offset;  /* the next output byte the client is to get */
        uint64_t last_rx; /* monotonic us of the client's last frame */
        bool upgraded, closing, fragment, exited;
};

static struct ws_session *sessions;

static void session_unlink(struct ws_session *s)
{
        for (struct ws_session **p = &sessions; *p; p = &(*p)->next)
                if (*p == s) {
                        *p = s->next;
                        return;
                }
}

static void session_free(struct ws_session *s)
{
        session_unlink(s);
        ctl_call_cancel(s->attach);
        ctl_call_cancel(s->input);
        if (s->ping)
                event_free(s->ping);
        s->grant_watch = grant_watch_free(s->grant_watch);
        if (s->pending)
                evbuffer_free(s->pending);
        if (s->sb) {
                if (s->sb->streams > 0)
                        s->sb->streams--;
                sandbox_touch(s->sb);
                sandbox_unref(s->sb);
        }
        free(s);
}

static void ws_send(struct ws_session *s, uint8_t op, const void *data, size_t len)
{
        uint8_t hdr[10];
        size_t hl = ws_server_header(hdr, op, len);
        struct evbuffer *out = bufferevent_get_output(s->bev);
        evbuffer_add(out, hdr, hl);
        if (len)
                evbuffer_add(out, data, len);
}

static void ws_send_json(struct ws_session *s, json_t *o)
{
        char *t = json_dumps(o, JSON_COMPACT);
        json_decref(o);
        if (t) {
                ws_send(s, WS_TEXT, t, strlen(t));
                free(t);
        }
}

/* The end of the stream, from our side: a close frame, then the request is
 * ended so that libevent closes the connection once the frame is out. */
static void ws_finish(struct ws_session *s, uint16_t code, const char *reason)
{
        if (s->closing)
                return;
        s->closing = true;
        uint8_t payload[2 + 123];
        size_t rl = reason ? strlen(reason) : 0;
        if (rl > 123)
                rl = 123;
        payload[0] = (uint8_t)(code >> 8);
        payload[1] = (uint8_t)code;
        if (rl)
                memcpy(payload + 2, reason, rl);
        ws_send(s, WS_CLOSE, payload, 2 + rl);
        evhttp_connection_set_closecb(s->conn, NULL, NULL);
        /* libevent's callbacks back, and its write callback only once all
         * is out: it frees the connection then. */
        bufferevent_setwatermark(s->bev, EV_WRITE, 0, 0);
        /* A client that reads nothing more does not keep the connection:
         * what is left must go within WS_CLOSE_S. */
        struct timeval wt = {.tv_sec = WS_CLOSE_S};
        bufferevent_set_timeouts(s->bev, NULL, &wt);
        bufferevent_setcb(s->bev, NULL, s->http_write_cb, s->http_event_cb, s->http_cb_arg);
        struct evkeyvalq *h = evhttp_request_get_output_headers(s->req);
        evhttp_remove_header(h, "Connection");
        evhttp_add_header(h, "Connection", "close");
        evhttp_send_reply_end(s->req);
        session_free(s);
}

/* The client closed the connection (or libevent gave up on it). */
static void on_conn_close(struct evhttp_connection *conn, void *arg)
{
        struct ws_session *s = arg;
        s->closing = true;
        evhttp_send_reply_end(s->req); /* frees the detached request */
        session_free(s);
}

static void pump_input(struct ws_session *s);

static void on_input_line(struct ctl_call *call, json_t *msg, void *arg)
{
        struct ws_session *s = arg;
        if (json_is_false(json_object_get(msg, "ok"))) {
                /* The terminal is gone or not reading: said once, input dropped. */
                const char *m = json_string_value(json_object_get(msg, "message"));
                ws_send_json(s, json_pack("{s:s, s:s}", "type", "error", "message",
                                          m ? m : "the terminal took no input"));
                evbuffer_drain(s->pending, evbuffer_get_length(s->pending));
        }
}

static void process_frames(struct ws_session *s);

static void on_input_done(struct ctl_call *call, int error, void *arg)
{
        struct ws_session *s = arg;
        s->input = NULL;
        process_frames(s); /* what waited for room, then the next call; may end s */
}

static const struct ctl_call_ops input_ops = {.line = on_input_line, .done = on_input_done};

/* A terminal is one request that lasts: its grant stands behind every
 * byte typed into it, so a revocation closes it (1008), as it ends the
 * grant's event streams. True when s was ended (and freed). */
static bool grant_revoked(struct ws_session *s)
{
        if (!grant_hash_revoked(s->d, s->grant_hash))
                return false;
        ws_finish(s, WS_CLOSE_POLICY, "the grant was revoked");
        return true;
}

static void on_grant_revoked(void *arg)
{
        (void)grant_revoked(arg);
}

/* One "stdin" call at a time, in order. */
static void pump_input(struct ws_session *s)
{
        size_t n = evbuffer_get_length(s->pending);
        if (s->input || n == 0 || s->closing)
                return;
        if (grant_revoked(s))
                return;
        if (n > WS_INPUT_CHUNK)
                n = WS_INPUT_CHUNK;
        _cleanup_free_ char *b64 = base64_encode(evbuffer_pullup(s->pending, (ev_ssize_t)n), n);
        evbuffer_drain(s->pending, n);
        json_t *req = json_pack("{s:s, s:I, s:s}", "op", "stdin", "pid", (json_int_t)s->pid, "data",
                                b64 ? b64 : "");
        int r =
            ctl_call_start(s->d->base, s->sb->control_path, req, 10000, &input_ops, s, &s->input);
        json_decref(req);
        if (r < 0) {
                s->input = NULL;
                ws_finish(s, WS_CLOSE_INTERNAL, "the sandbox's supervisor did not answer");
        }
}

/* Read the client's frames: input, pings, close. Stops (leaving bytes in the
 * buffer, and so the socket unread past WS_READ_HIGH) while the input
 * waiting for the terminal is at its cap. A bad frame closes the stream. */
static void process_frames(struct ws_session *s)
{
        struct evbuffer *in = bufferevent_get_input(s->bev);
        if (s->closing)
                return;
        while (evbuffer_get_length(s->pending) < WS_INPUT_MAX) {
                size_t len = evbuffer_get_length(in);
                size_t peek = len < WS_FRAME_MAX + 14 ? len : WS_FRAME_MAX + 14;
                if (peek == 0)
                        break;
                uint8_t *buf = evbuffer_pullup(in, (ev_ssize_t)peek);
                struct ws_frame f;
                int r = ws_parse_client_frame(buf, peek, WS_FRAME_MAX, &f);
                if (r == 0)
                        break;
                if (r < 0) {
                        ws_finish(s, (uint16_t)-r,
                                  -r == WS_CLOSE_TOO_BIG ? "frame too large" : "bad frame");
                        return;
                }
                uint8_t *payload = buf + f.header_len;
                ws_unmask(payload, (size_t)f.len, f.mask, 0);
                s->last_rx = now_monotonic_us();
                switch (f.opcode) {
                case WS_BINARY:
                case WS_CONT:
                        if ((f.opcode == WS_CONT) != s->fragment) {
                                ws_finish(s, WS_CLOSE_PROTOCOL,
                                          s->fragment ? "expected a continuation frame"
                                                      : "continuation without a start");
                                return;
                        }
                        s->fragment = !f.fin;
                        evbuffer_add(s->pending, payload, (size_t)f.len);
                        break;
                case WS_TEXT:
                        ws_finish(s, WS_CLOSE_UNSUPPORTED,
                                  "input goes in binary frames (resize: POST .../resize)");
                        return;
                case WS_PING:
                        ws_send(s, WS_PONG, payload, (size_t)f.len);
                        break;
                case WS_PONG:
                        break;
                case WS_CLOSE: {
                        uint16_t code = WS_CLOSE_NORMAL;
                        if (f.len == 1) {
                                ws_finish(s, WS_CLOSE_PROTOCOL, "bad close frame");
                                return;
                        }
                        if (f.len >= 2)
                                code = (uint16_t)(payload[0] << 8 | payload[1]);
                        evbuffer_drain(in, f.header_len + (size_t)f.len);
                        ws_finish(s, code < 1000 || code >= 5000 ? WS_CLOSE_PROTOCOL : code, NULL);
                        return;
                }
                }
                evbuffer_drain(in, f.header_len + (size_t)f.len);
        }
        pump_input(s);
}

static void on_ws_read(struct bufferevent *bev, void *arg)
{
        for (struct ws_session *s = sessions; s; s = s->next)
                if (s->bev == bev) {
                        process_frames(s); /* may end s */
                        return;
                }
}

static void on_ws_write(struct bufferevent *bev, void *arg)
{
        for (struct ws_session *s = sessions; s; s = s->next)
                if (s->bev == bev) {
                        if (s->attach)
                                ctl_call_pause(s->attach, false);
                        return;
                }
}

static void on_ping(evutil_socket_t fd, short what, void *arg)
{
        struct ws_session *s = arg;
        if (now_monotonic_us() - s->last_rx > (uint64_t)WS_IDLE_S * 1000000) {
                ws_finish(s, WS_CLOSE_GOING_AWAY, "no answer to pings");
                return;
        }
        ws_send(s, WS_PING, "airlock", 7);
}

static bool header_has_token(const char *v, const char *token);

/* 101, then the connection is ours. */
static void upgrade(struct ws_session *s)
{
        struct evkeyvalq *h = evhttp_request_get_output_headers(s->req);
        evhttp_add_header(h, "Upgrade", "websocket");
        evhttp_add_header(h, "Connection", "Upgrade");
        evhttp_add_header(h, "Sec-WebSocket-Accept", s->accept);
        /* The dashboard offers its own subprotocol beside the one carrying
         * its session's token (uisession.h): a browser closes a WebSocket
         * whose answer names none it offered. */
        if (header_has_token(evhttp_find_header(evhttp_request_get_input_headers(s->req),
                                                "Sec-WebSocket-Protocol"),
                             UI_WS_PROTOCOL))
                evhttp_add_header(h, "Sec-WebSocket-Protocol", UI_WS_PROTOCOL);
        evhttp_send_reply_start(s->req, 101, "Switching Protocols");
        count_reply(s->d, 101);
        http_guard_upgraded(s->req);
        s->upgraded = true;
        s->bev = evhttp_connection_get_bufferevent(s->conn);
        bufferevent_data_cb rcb;
        bufferevent_getcb(s->bev, &rcb, &s->http_write_cb, &s->http_event_cb, &s->http_cb_arg);
        bufferevent_setcb(s->bev, on_ws_read, on_ws_write, s->http_event_cb, s->http_cb_arg);
        /* evhttp's request timeouts do not apply to a terminal left open;
         * pings find a client that is gone. */
        bufferevent_set_timeouts(s->bev, NULL, NULL);
        bufferevent_setwatermark(s->bev, EV_READ, 0, WS_READ_HIGH);
        bufferevent_setwatermark(s->bev, EV_WRITE, WS_OUT_HIGH / 2, 0);
        bufferevent_enable(s->bev, EV_READ | EV_WRITE);
        s->last_rx = now_monotonic_us();
        s->ping = event_new(s->d->base, -1, EV_PERSIST, on_ping, s);
        struct timeval tv = {.tv_sec = WS_PING_S};
        event_add(s->ping, &tv);
        s->grant_watch = grant_watch_new(s->d, s->grant_hash, on_grant_revoked, s);
        /* Frames that came with the handshake are read from the loop. */
        bufferevent_trigger(s->bev, EV_READ, BEV_OPT_DEFER_CALLBACKS);
}

/* One output event: the bytes from the client's offset on. */
static void relay_output(struct ws_session *s, json_t *msg)
{
        const char *data = json_string_value(json_object_get(msg, "data"));
        json_t *jo = json_object_get(msg, "offset");
        _cleanup_free_ unsigned char *bytes = NULL;
        size_t n = 0;
        if (!data || !json_is_integer(jo) || base64_decode(data, &bytes, &n) < 0)
                return;
        uint64_t at = (uint64_t)json_integer_value(jo);
        if (at + n <= s->offset)
                return; /* the client has these */
        if (at > s->offset) {
                /* Dropped from what the supervisor keeps: said, not hidden. */
                ws_send_json(s, json_pack("{s:s, s:I, s:I}", "type", "gap", "from",
                                          (json_int_t)s->offset, "to", (json_int_t)at));
                s->offset = at;
        }
        size_t skip = (size_t)(s->offset - at);
        ws_send(s, WS_BINARY, bytes + skip, n - skip);
        s->offset = at + n;
        if (evbuffer_get_length(bufferevent_get_output(s->bev)) > WS_OUT_HIGH)
                ctl_call_pause(s->attach, true);
}

static int ctl_status(const char *code)
{
        if (code && STREQ(code, "unknown_process"))
                return 404;
        if (code && STREQ(code, "bad_request"))
                return 400;
        if (code && STREQ(code, "destroyed"))
                return 409;
        return 502;
}

static void on_attach_line(struct ctl_call *call, json_t *msg, void *arg)
{
        struct ws_session *s = arg;
        const char *type = json_string_value(json_object_get(msg, "type"));
        if (!s->upgraded) {
                if (json_is_false(json_object_get(msg, "ok"))) {
                        const char *code = json_string_value(json_object_get(msg, "error"));
                        const char *m = json_string_value(json_object_get(msg, "message"));
                        evhttp_connection_set_closecb(s->conn, NULL, NULL);
                        reply_error(s->d, s->req, ctl_status(code),
                                    code && STREQ(code, "unknown_process") ? "not_found"
                                                                           : "supervisor_error",
                                    "process %" PRIu64 ": %s", s->pid, m ? m : "refused");
                        s->attach = NULL;
                        ctl_call_cancel(call);
                        session_free(s);
                        return;
                }
                if (type && STREQ(type, "started") && !json_is_true(json_object_get(msg, "pty"))) {
                        evhttp_connection_set_closecb(s->conn, NULL, NULL);
                        reply_error(s->d, s->req, 400, "no_terminal",
                                    "process %" PRIu64 " has no terminal: start it with "
                                    "\"pty\": {\"rows\", \"cols\"}",
                                    s->pid);
                        s->attach = NULL;
                        ctl_call_cancel(call);
                        session_free(s);
                        return;
                }
                upgrade(s);
        }
        if (!type)
                return;
        if (STREQ(type, "stdout") || STREQ(type, "stderr")) {
                relay_output(s, msg);
        } else if (STREQ(type, "exit")) {
                s->exited = true;
                ws_send_json(s, json_incref(msg));
                s->attach = NULL;
                ctl_call_cancel(call);
                ws_finish(s, WS_CLOSE_NORMAL, "exited");
        } else if (!STREQ(type, "gap")) {
                ws_send_json(s, json_incref(msg)); /* started, error */
        }
}

static void on_attach_done(struct ctl_call *call, int error, void *arg)
{
        struct ws_session *s = arg;
        s->attach = NULL;
        if (!s->upgraded) {
                evhttp_connection_set_closecb(s->conn, NULL, NULL);
                reply_error(s->d, s->req, 502, "supervisor_gone",
                            "the sandbox's supervisor ended the stream");
                session_free(s);
                return;
        }
        ws_send_json(s, json_pack("{s:s, s:s}", "type", "error", "error", "supervisor_gone"));
        ws_finish(s, WS_CLOSE_GOING_AWAY, "the sandbox ended");
}

static const struct ctl_call_ops attach_ops = {.line = on_attach_line, .done = on_attach_done};

/* A header's comma-separated tokens contain `token` (case-insensitive). */
static bool header_has_token(const char *v, const char *token)
{
        size_t tl = strlen(token);
        while (v && *v) {
                while (*v == ' ' || *v == '\t' || *v == ',')
                        v++;
                size_t n = strcspn(v, ",");
                size_t m = n;
                while (m > 0 && (v[m - 1] == ' ' || v[m - 1] == '\t'))
                        m--;
                if (m == tl && strncasecmp(v, token, tl) == 0)
                        return true;
                v += n;
        }
        return false;
}

void route_pty(struct daemon *d, struct evhttp_request *req, const struct route_args *a)
{
        if (!require(d, req, a->grant, a->grant->allow_exec, "allowExec"))
                return;
        struct evkeyvalq *h = evhttp_request_get_input_headers(req);
        const char *upg = evhttp_find_header(h, "Upgrade");
        const char *conn = evhttp_find_header(h, "Connection");
        const char *ver = evhttp_find_header(h, "Sec-WebSocket-Version");
        const char *key = evhttp_find_header(h, "Sec-WebSocket-Key");
        if (!header_has_token(upg, "websocket") || !header_has_token(conn, "upgrade")) {
                evhttp_add_header(evhttp_request_get_output_headers(req), "Upgrade", "websocket");
                reply_error(d, req, 426, "upgrade_required",
                            "this is a WebSocket endpoint: send Upgrade: websocket and "
                            "Connection: Upgrade");
                return;
        }
        if (!ver || !STREQ(ver, "13")) {
                evhttp_add_header(evhttp_request_get_output_headers(req), "Sec-WebSocket-Version",
                                  "13");
                reply_error(d, req, 426, "upgrade_required", "Sec-WebSocket-Version must be 13");
                return;
        }
        char accept[29];
        if (ws_accept_key(key, accept) < 0) {
                reply_error(d, req, 400, "bad_request",
                            "Sec-WebSocket-Key must be the base64 of 16 bytes");
                return;
        }
        uint64_t offset = 0;
        const char *o = query_get(a->query, "offset");
        if (o && (safe_atou64(o, &offset) < 0 || offset > (1ull << 53))) {
                reply_bad_field(d, req, "offset", "must be the number of bytes already received");
                return;
        }
        struct sandbox *sb = find_running(d, req, a->id);
        if (!sb)
                return;
        struct ws_session *s = xcalloc(1, sizeof(*s));
        s->d = d;
        s->req = req;
        s->conn = evhttp_request_get_connection(req);
        s->pid = a->pid;
        s->offset = offset;
        s->pending = evbuffer_new();
        memcpy(s->accept, accept, sizeof(accept));
        snprintf(s->grant_hash, sizeof(s->grant_hash), "%s", a->grant->token_hash);
        s->sb = sb;
        sandbox_ref(sb);
        sb->streams++;
        sandbox_touch(sb);
        s->next = sessions;
        sessions = s;
        json_t *ctl = json_pack("{s:s, s:I}", "op", "attach", "pid", (json_int_t)a->pid);
        int r = ctl_call_start(d->base, sb->control_path, ctl, 0, &attach_ops, s, &s->attach);
        json_decref(ctl);
        if (r < 0 || !s->conn) {
                s->attach = NULL;
                reply_error(d, req, 502, "supervisor_unavailable",
                            "the sandbox's supervisor did not answer: %s",
                            strerror(r < 0 ? -r : EIO));
                session_free(s);
                return;
        }
        evhttp_connection_set_closecb(s->conn, on_conn_close, s);
}

/* POST …/processes/{pid}/resize */

struct resize_call {
        struct daemon *d;
        struct evhttp_request *req;
        struct sandbox *sb;
        bool replied;
};

static void on_resize_line(struct ctl_call *call, json_t *msg, void *arg)
{
        struct resize_call *c = arg;
        if (c->replied)
                return;
        c->replied = true;
        if (json_is_true(json_object_get(msg, "ok"))) {
                reply_json(c->d, c->req, 200, json_pack("{s:b}", "ok", 1));
                return;
        }
        const char *code = json_string_value(json_object_get(msg, "error"));
        const char *m = json_string_value(json_object_get(msg, "message"));
        reply_error(c->d, c->req, ctl_status(code),
                    code && STREQ(code, "unknown_process") ? "not_found"
                    : code && STREQ(code, "bad_request")   ? "bad_request"
                                                           : "supervisor_error",
                    "%s", m ? m : "refused");
}

static void on_resize_done(struct ctl_call *call, int error, void *arg)
{
        struct resize_call *c = arg;
        if (!c->replied)
                reply_error(c->d, c->req, 502, "supervisor_gone",
                            "the sandbox's supervisor did not answer");
        sandbox_unref(c->sb);
        free(c);
}

static const struct ctl_call_ops resize_ops = {.line = on_resize_line, .done = on_resize_done};

void route_resize(struct daemon *d, struct evhttp_request *req, const struct route_args *a)
{
        if (!require(d, req, a->grant, a->grant->allow_exec, "allowExec"))
                return;
        json_t *body = read_json_body(d, req, false);
        if (!body)
                return;
        static const char *const keys[] = {"rows", "cols", NULL};
        uint16_t rows, cols;
        if (reject_unknown(d, req, body, keys))
                goto out;
        if (control_parse_size(body, &rows, &cols) < 0) {
                reply_bad_field(d, req,
                                json_is_integer(json_object_get(body, "rows")) ? "cols" : "rows",
                                "must be a number from 1 to 4096");
                goto out;
        }
        struct sandbox *sb = find_running(d, req, a->id);
        if (!sb)
                goto out;
        struct resize_call *c = xcalloc(1, sizeof(*c));
        c->d = d;
        c->req = req;
        c->sb = sb;
        sandbox_ref(sb);
        json_t *ctl = json_pack("{s:s, s:I, s:i, s:i}", "op", "resize", "pid", (json_int_t)a->pid,
                                "rows", rows, "cols", cols);
        struct ctl_call *call = NULL;
        int r = ctl_call_start(d->base, sb->control_path, ctl, 10000, &resize_ops, c, &call);
        json_decref(ctl);
        if (r < 0) {
                reply_error(d, req, 502, "supervisor_unavailable",
                            "the sandbox's supervisor did not answer: %s", strerror(-r));
                sandbox_unref(sb);
                free(c);
        }
out:
        json_decref(body);
}

bool pty_exec_option(struct daemon *d, struct evhttp_request *req, json_t *body, json_t *ctl)
{
        json_t *pty = json_object_get(body, "pty");
        uint16_t rows, cols;
        if (!pty || json_is_null(pty))
                return true;
        if (control_parse_size(pty, &rows, &cols) < 0 || json_object_size(pty) != 2) {
                reply_bad_field(d, req, "pty",
                                "must be {\"rows\": R, \"cols\": C}, each 1 to 4096");
                return false;
        }
        if (json_object_get(body, "stdin") && !json_is_null(json_object_get(body, "stdin"))) {
                reply_bad_field(d, req, "stdin",
                                "cannot go with \"pty\": type into the terminal instead");
                return false;
        }
        json_object_set_new(ctl, "pty", json_pack("{s:i, s:i}", "rows", rows, "cols", cols));
        return true;
}

void pty_shutdown(struct daemon *d)
{
        while (sessions) {
                struct ws_session *s = sessions;
                if (s->upgraded)
                        ws_finish(s, WS_CLOSE_GOING_AWAY, "the daemon is stopping");
                else {
                        evhttp_connection_set_closecb(s->conn, NULL, NULL);
                        reply_error(d, s->req, 503, "shutting_down", "the daemon is stopping");
                        session_free(s);
                }
        }
}
