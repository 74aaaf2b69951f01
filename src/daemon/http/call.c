/* SPDX-License-Identifier: Apache-2.0 */
/* The relay behind exec, a process's events, stdin and signals (exec.c,
 * processes.c): one call on the sandbox's control socket (ctl.h), its lines
 * relayed to the client as chunked NDJSON with back-pressure both ways, the
 * output that overtakes "started" held back, the process's records
 * written, the grant watched, and the command stopped when its client
 * goes. */
#include <event2/buffer.h>
#include <event2/bufferevent.h>
#include <event2/keyvalq_struct.h>
#include <inttypes.h>
#include <signal.h>
#include <string.h>

#include "ctl.h"
#include "daemon.h"
#include "grantwatch.h"
#include "http.h"
#include "routes.h"
#include "sandbox.h"
#include "trace.h"
#include "util.h"
#include "call.h"

#define STREAM_HIGH     (1u << 20)   /* bytes queued to a client before reading pauses */
#define STREAM_STALL_MS (30u * 1000) /* a stream's client reads nothing this long: gone */
#define HELD_MAX_BYTES  (1u << 20)

/* Before the last word to the client: the connection may carry the client's
 * next request, whose close callback is not ours to clear later. */
static void detach_conn(struct call_ctx *c)
{
        if (c->conn)
                evhttp_connection_set_closecb(c->conn, NULL, NULL);
        c->conn = NULL;
}

static void call_ctx_free(struct call_ctx *c)
{
        if (c->prev)
                c->prev->next = c->next;
        else if (c->d->calls == c)
                c->d->calls = c->next;
        if (c->next)
                c->next->prev = c->prev;
        detach_conn(c);
        if (c->sb) {
                if (c->kind != CALL_SIMPLE && c->sb->streams > 0)
                        c->sb->streams--;
                sandbox_touch(c->sb);
                sandbox_unref(c->sb);
        }
        c->watch = grant_watch_free(c->watch);
        json_decref(c->argv);
        json_decref(c->held);
        free(c->grant);
        free(c);
}

static int control_http_status(const char *code)
{
        if (!code)
                return 502;
        if (STREQ(code, "bad_request") || STREQ(code, "exec_failed"))
                return 400;
        if (STREQ(code, "unknown_process"))
                return 404;
        if (STREQ(code, "too_many_processes") || STREQ(code, "too_many_attached"))
                return 429;
        if (STREQ(code, "audit_failed"))
                return 503;
        if (STREQ(code, "destroyed"))
                return 409;
        return 500;
}

static void send_line(struct call_ctx *c, json_t *o);

static void on_client_drained(struct evhttp_connection *conn, void *arg)
{
        struct call_ctx *c = arg;
        if (c->call)
                ctl_call_pause(c->call, false);
}

/* ?encoding=utf8 (or base64, the default): 1, 0, or -1 for another value. */
int query_utf8(struct evhttp_request *req)
{
        const char *q = evhttp_uri_get_query(evhttp_request_get_evhttp_uri(req));
        struct evkeyvalq params = {0};
        if (!q || evhttp_parse_query_str(q, &params) < 0) {
                evhttp_clear_headers(&params);
                return q ? -1 : 0;
        }
        const char *v = evhttp_find_header(&params, "encoding");
        int r = !v || STREQ(v, "base64") ? 0 : STREQ(v, "utf8") ? 1 : -1;
        evhttp_clear_headers(&params);
        return r;
}

/* Output whose bytes are valid UTF-8 as "text" in place of base64 "data". */
static json_t *as_text(json_t *o)
{
        const char *data = json_string_value(json_object_get(o, "data"));
        _cleanup_free_ unsigned char *bytes = NULL;
        size_t n = 0;
        json_t *text;
        if (!data || base64_decode(data, &bytes, &n) < 0 ||
            !(text = json_stringn((const char *)bytes, n)))
                return json_incref(o);
        json_t *copy = json_copy(o);
        json_object_del(copy, "data");
        json_object_set_new(copy, "text", text);
        return copy;
}

static void send_line(struct call_ctx *c, json_t *o)
{
        json_t *conv = c->utf8 ? as_text(o) : NULL;
        char *text = json_dumps(conv ? conv : o, JSON_COMPACT);
        json_decref(conv);
        if (!text)
                return;
        struct evbuffer *buf = evbuffer_new();
        evbuffer_add(buf, text, strlen(text));
        evbuffer_add(buf, "\n", 1);
        free(text);
        struct evhttp_connection *conn = evhttp_request_get_connection(c->req);
        if (!conn || c->gone) {
                evbuffer_free(buf);
                return;
        }
        evhttp_send_reply_chunk_with_cb(c->req, buf, on_client_drained, c);
        evbuffer_free(buf);
        struct bufferevent *bev = evhttp_connection_get_bufferevent(conn);
        if (bev && evbuffer_get_length(bufferevent_get_output(bev)) > STREAM_HIGH && c->call)
                ctl_call_pause(c->call, true);
}

static int record_process(struct call_ctx *c, json_t *exit)
{
        struct store *st = c->d->store;
        uint64_t now = daemon_now_ms();
        if (exit) {
                int64_t code = json_integer_value(json_object_get(exit, "exitCode"));
                const char *ec = json_string_value(json_object_get(exit, "errorCode"));
                int r = daemon_store_result(
                    c->d, store_process_end(st, c->sb->id, c->pid, code, ec, now));
                if (r != -ENOENT) {
                        if (r < 0)
                                daemon_log(c->d,
                                           "sandbox %s: recording the end of process %" PRIu64
                                           ": %s",
                                           c->sb->id, c->pid, store_last_error(st));
                        return r;
                }
        }
        /* Its start, or an end whose start was never seen (exec failed). */
        _cleanup_free_ char *argv = c->argv ? json_dumps(c->argv, JSON_COMPACT) : NULL;
        struct store_process p = {
            .pid = c->pid,
            .argv = argv,
            .background = c->background,
            .state = exit ? "exited" : "running",
            .exit_code = exit ? json_integer_value(json_object_get(exit, "exitCode")) : -1,
            .error_code =
                (char *)(exit ? json_string_value(json_object_get(exit, "errorCode")) : NULL),
            .started_ms = now,
            .ended_ms = exit ? now : 0,
        };
        memcpy(p.sandbox, c->sb->id, sizeof(p.sandbox));
        /* A start is written before "started" goes out (a store that cannot
         * take it refuses the exec), but not synced then: the end's synced
         * write takes it to disk, or daemon_store_sync_soon() within 100 ms. */
        int r = daemon_store_result(c->d,
                                    exit ? store_process_put(st, &p) : store_process_start(st, &p));
        if (r == 0 && !exit)
                daemon_store_sync_soon(c->d);
        if (r < 0)
                daemon_log(c->d, "sandbox %s: recording process %" PRIu64 ": %s", c->sb->id, c->pid,
                           store_last_error(st));
        return r;
}

static void start_stream(struct call_ctx *c)
{
        c->replied = true;
        c->streaming = true;
        evhttp_add_header(evhttp_request_get_output_headers(c->req), "Content-Type",
                          "application/x-ndjson");
        evhttp_add_header(evhttp_request_get_output_headers(c->req), "Cache-Control", "no-store");
        count_reply(c->d, 200);
        evhttp_send_reply_start(c->req, 200, NULL);
        /* A command may be silent for longer than the request timeout; a
         * write timeout counts only while output waits, so it is the stall
         * bound: a client that takes nothing of it for that long is gone
         * (on_client_close), like the supervisor's own (docs/api.md). */
        struct evhttp_connection *conn = evhttp_request_get_connection(c->req);
        struct bufferevent *bev = conn ? evhttp_connection_get_bufferevent(conn) : NULL;
        if (bev) {
                uint64_t ms = c->stall_ms ? c->stall_ms : STREAM_STALL_MS;
                struct timeval wtv = {.tv_sec = (time_t)(ms / 1000),
                                      .tv_usec = (suseconds_t)(ms % 1000) * 1000};
                bufferevent_set_timeouts(bev, NULL, &wtv);
        }
}

static void kill_orphan(struct sandbox *sb, uint64_t pid, bool abandoned);

/* The stream's grant was revoked: a last line says so. A process's
 * events end there; an exec's client is let go as if it had left (a
 * foreground command dies with it), and what the command still says is
 * read and dropped, so that its end is recorded. */
static void call_revoked(void *arg)
{
        struct call_ctx *c = arg;
        if (c->gone || (c->replied && !c->streaming)) {
                /* Its client left, or a background command was started:
                 * nothing more is read for the grant. */
                c->watch = grant_watch_free(c->watch);
                return;
        }
        if (!c->streaming)
                return; /* no reply yet: the next check ends the stream */
        c->watch = grant_watch_free(c->watch);
        json_t *o = json_pack("{s:s, s:s, s:s}", "type", "error", "error", "grant_revoked",
                              "message", "the grant was revoked");
        send_line(c, o);
        json_decref(o);
        c->revoked = true;
        if (c->kind == CALL_ATTACH) {
                /* Watching a process does not own it: only the stream ends. */
                ctl_call_cancel(c->call);
                c->call = NULL;
                detach_conn(c);
                evhttp_send_reply_end(c->req);
                call_ctx_free(c);
                return;
        }
        c->gone = true;
        if (!c->background && c->pid && !c->saw_exit && c->sb)
                kill_orphan(c->sb, c->pid, true);
        if (c->call)
                ctl_call_pause(c->call, false);
}

/* One event to the client, with the accounting of its end. */
static void relay(struct call_ctx *c, json_t *msg)
{
        struct daemon *d = c->d;
        const char *type = json_string_value(json_object_get(msg, "type"));
        if (type && STREQ(type, "exit")) {
                c->saw_exit = true;
                const char *ec = json_string_value(json_object_get(msg, "errorCode"));
                if (c->kind == CALL_EXEC) {
                        histogram_observe(&d->metrics.exec_duration,
                                          (double)(now_monotonic_us() - c->t0_us) / 1e6);
                        if (ec && STREQ(ec, "timeout"))
                                d->metrics.exec_timeouts++;
                        else if (ec && STREQ(ec, "oom_killed"))
                                d->metrics.exec_oom_kills++;
                        else if (ec && STREQ(ec, "exec_failed"))
                                d->metrics.exec_failures++;
                }
                if (!c->pid)
                        c->pid = (uint64_t)json_integer_value(json_object_get(msg, "pid"));
                if (c->pid && c->kind == CALL_EXEC) {
                        al_trace_mark("exec.exit");
                        record_process(c, msg);
                        al_trace_mark("exec.store_end");
                } else if (c->pid && c->kind == CALL_ATTACH)
                        /* A watcher sees the end the daemon may have missed
                         * (it was down): written down if still open. */
                        (void)daemon_store_result(
                            d,
                            store_process_end(d->store, c->sb->id, c->pid,
                                              json_integer_value(json_object_get(msg, "exitCode")),
                                              json_string_value(json_object_get(msg, "errorCode")),
                                              daemon_now_ms()));
        }
        if (c->revoked)
                return;
        json_t *out = json_deep_copy(msg);
        json_object_del(out, "ok");
        send_line(c, out);
        json_decref(out);
}

static void flush_held(struct call_ctx *c)
{
        if (!c->held)
                return;
        json_t *held = c->held;
        c->held = NULL;
        c->held_bytes = 0;
        size_t i;
        json_t *m;
        json_array_foreach(held, i, m) relay(c, m);
        json_decref(held);
}

/* false: its record could not be written, and it has been killed. */
static bool on_started(struct call_ctx *c, json_t *msg)
{
        struct daemon *d = c->d;
        c->saw_started = true;
        c->pid = (uint64_t)json_integer_value(json_object_get(msg, "pid"));
        histogram_observe(&d->metrics.exec_start, (double)(now_monotonic_us() - c->t0_us) / 1e6);
        int stored = record_process(c, NULL);
        al_trace_mark("exec.store_start");
        if (stored < 0) {
                /* Not recorded, not run: what a restart would not know of
                 * must not go on. */
                kill_orphan(c->sb, c->pid, false);
                return false;
        }
        /* Its client left before it started. */
        if (c->gone && !c->background)
                kill_orphan(c->sb, c->pid, true);
        return true;
}

static void on_call_line(struct ctl_call *call, json_t *msg, void *userdata)
{
        struct call_ctx *c = userdata;
        struct daemon *d = c->d;
        json_t *ok = json_object_get(msg, "ok");
        const char *type = json_string_value(json_object_get(msg, "type"));

        if (!c->replied && json_is_false(ok)) {
                const char *code = json_string_value(json_object_get(msg, "error"));
                const char *m = json_string_value(json_object_get(msg, "message"));
                c->replied = true;
                detach_conn(c);
                if (code && STREQ(code, "unknown_process"))
                        reply_error(d, c->req, 404, "not_found", "%s", m ? m : "no such process");
                else
                        reply_error(d, c->req, control_http_status(code), code ? code : "internal",
                                    "%s", m ? m : "the supervisor refused");
                return;
        }
        if (c->kind == CALL_SIMPLE) {
                if (!c->replied) {
                        c->replied = true;
                        detach_conn(c);
                        reply_json(d, c->req, 200, json_pack("{s:b}", "ok", 1));
                }
                return;
        }
        if (c->kind == CALL_EXEC && !c->counted) {
                c->counted = true;
                d->metrics.execs++;
        }
        if (c->kind == CALL_EXEC && !c->saw_started) {
                if (type && STREQ(type, "started")) {
                        al_trace_mark("exec.started");
                        if (!on_started(c, msg)) {
                                c->replied = true;
                                detach_conn(c);
                                reply_error(
                                    d, c->req, 503, "store_unavailable",
                                    "the command was stopped: its record could not be saved: %s",
                                    store_last_error(d->store));
                                return;
                        }
                        if (c->background) {
                                c->replied = true;
                                detach_conn(c);
                                reply_json(d, c->req, 201,
                                           json_pack("{s:I}", "pid", (json_int_t)c->pid));
                                return;
                        }
                        start_stream(c);
                        relay(c, msg);
                        flush_held(c);
                        al_trace_mark("exec.started_sent");
                        return;
                }
                if (c->background) {
                        if (!c->replied && type && STREQ(type, "error")) {
                                const char *m = json_string_value(json_object_get(msg, "message"));
                                d->metrics.exec_failures++;
                                c->replied = true;
                                detach_conn(c);
                                reply_error(d, c->req, 400, "exec_failed", "%s",
                                            m ? m : "exec failed");
                        }
                        /* Output before "started" is kept by the supervisor
                         * for whoever attaches. */
                        return;
                }
                bool final = type && (STREQ(type, "error") || STREQ(type, "exit"));
                if (!final) {
                        _cleanup_free_ char *text = json_dumps(msg, JSON_COMPACT);
                        size_t n = text ? strlen(text) : 0;
                        if (c->held_bytes + n <= HELD_MAX_BYTES) {
                                if (!c->held)
                                        c->held = json_array();
                                json_array_append(c->held, msg);
                                c->held_bytes += n;
                                return;
                        }
                }
                /* It never started (exec failed), or "started" is late. */
                if (!c->replied)
                        start_stream(c);
                flush_held(c);
                relay(c, msg);
                return;
        }
        if (!c->replied)
                start_stream(c);
        if (c->streaming)
                relay(c, msg);
}

static void on_call_done(struct ctl_call *call, int error, void *userdata)
{
        struct call_ctx *c = userdata;
        struct daemon *d = c->d;
        c->call = NULL;
        if (!c->replied && c->held)
                start_stream(c);
        if (!c->replied) {
                if (c->kind == CALL_ATTACH && error == 0) {
                        /* Nothing kept and nothing running. */
                        start_stream(c);
                } else {
                        detach_conn(c);
                        reply_error(d, c->req, 502, "supervisor_unavailable",
                                    "the sandbox's supervisor did not answer%s%s",
                                    error < 0 ? ": " : "", error < 0 ? strerror(-error) : "");
                        call_ctx_free(c);
                        return;
                }
        }
        if (c->streaming)
                flush_held(c);
        if (c->streaming) {
                if (!c->saw_exit && c->kind == CALL_EXEC && !c->gone) {
                        json_t *o = json_pack("{s:s, s:s, s:s}", "type", "error", "error",
                                              "supervisor_gone", "message",
                                              "the sandbox ended before the command did");
                        send_line(c, o);
                        json_decref(o);
                }
                detach_conn(c);
                evhttp_send_reply_end(c->req);
                al_trace_mark("exec.reply_end");
        }
        call_ctx_free(c);
}

static const struct ctl_call_ops call_ops = {
    .line = on_call_line,
    .done = on_call_done,
};

static void kill_orphan(struct sandbox *sb, uint64_t pid, bool abandoned)
{
        json_t *req = json_pack("{s:s, s:I, s:i, s:b}", "op", "signal", "pid", (json_int_t)pid,
                                "signal", SIGKILL, "abandoned", abandoned);
        struct ctl_call *k = NULL;
        static const struct ctl_call_ops none = {0};
        (void)ctl_call_start(sb->d->base, sb->control_path, req, 5000, &none, NULL, &k);
        json_decref(req);
}

static void on_client_close(struct evhttp_connection *conn, void *arg)
{
        struct call_ctx *c = arg;
        c->gone = true;
        c->conn = NULL;
        if (c->kind == CALL_ATTACH) {
                /* Watching a process does not own it: let both ends go. */
                ctl_call_cancel(c->call);
                c->call = NULL;
                evhttp_send_reply_end(c->req); /* frees the detached request */
                call_ctx_free(c);
                return;
        }
        /* A foreground command dies with the client that waits for it
         * (on_started, when it has not started yet); what it still says is
         * read and dropped, so that its end is recorded. */
        if (c->kind == CALL_EXEC && !c->background && c->pid && !c->saw_exit && c->sb)
                kill_orphan(c->sb, c->pid, true);
        if (c->call)
                ctl_call_pause(c->call, false);
}

void call_start(struct daemon *d, struct evhttp_request *req, struct sandbox *sb,
                enum call_kind kind, json_t *ctl_req, struct call_ctx *c)
{
        c->d = d;
        c->req = req;
        c->sb = sb;
        c->kind = kind;
        c->t0_us = now_monotonic_us();
        sandbox_ref(sb);
        if (kind != CALL_SIMPLE)
                sb->streams++;
        sandbox_touch(sb);
        c->next = d->calls;
        if (c->next)
                c->next->prev = c;
        d->calls = c;
        int r = ctl_call_start(d->base, sb->control_path, ctl_req, kind == CALL_SIMPLE ? 10000 : 0,
                               &call_ops, c, &c->call);
        al_trace_mark("exec.ctl_sent");
        if (r < 0) {
                reply_error(d, req, 502, "supervisor_unavailable",
                            "the sandbox's supervisor did not answer: %s", strerror(-r));
                call_ctx_free(c);
                return;
        }
        c->conn = evhttp_request_get_connection(req);
        if (c->conn)
                evhttp_connection_set_closecb(c->conn, on_client_close, c);
        if (kind != CALL_SIMPLE)
                c->watch = grant_watch_new(d, c->grant_hash, call_revoked, c);
}

void exec_shutdown(struct daemon *d)
{
        while (d->calls) {
                struct call_ctx *c = d->calls;
                ctl_call_cancel(c->call);
                c->call = NULL;
                if (c->streaming) {
                        json_t *o = json_pack("{s:s, s:s, s:s}", "type", "error", "error",
                                              "shutting_down", "message", "the daemon is stopping");
                        send_line(c, o);
                        json_decref(o);
                        detach_conn(c);
                        evhttp_send_reply_end(c->req);
                } else if (!c->replied) {
                        detach_conn(c);
                        reply_error(d, c->req, 503, "shutting_down", "the daemon is stopping");
                }
                call_ctx_free(c);
        }
}
