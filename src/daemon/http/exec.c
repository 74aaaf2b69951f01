/* SPDX-License-Identifier: Apache-2.0 */
/* Processes in a sandbox: exec (a stream of NDJSON events, or in the
 * background), a reconnecting client's events, stdin, signals, and the list.
 * Each is a call on the sandbox's control socket (ctl.h) relayed to the
 * client as the supervisor answers. About 910 lines, over the 800 the tree
 * keeps to, and kept whole on purpose: it is one resource, and every handler
 * goes through the one relay (struct call_ctx, its stream, back-pressure and
 * held lines), which a split would publish to a second file. */
#include <ctype.h>
#include <errno.h>
#include <event2/buffer.h>
#include <event2/bufferevent.h>
#include <event2/http.h>
#include <event2/keyvalq_struct.h>
#include <inttypes.h>
#include <signal.h>
#include <stdarg.h>
#include <string.h>
#include <sys/stat.h>

#include "trace.h"
#include "sandbox.h"
#include "ctl.h"
#include "daemon.h"
#include "grants.h"
#include "grantwatch.h"
#include "http.h"
#include "idrange.h"
#include "record.h"
#include "routes.h"
#include "util.h"

#define STDIN_MAX       (8u << 20)   /* base64 text of stdin in one request */
#define STREAM_HIGH     (1u << 20)   /* bytes queued to a client before reading pauses */
#define STREAM_STALL_MS (30u * 1000) /* a stream's client reads nothing this long: gone */

static bool valid_env_name(const char *k)
{
        if (!*k || isdigit((unsigned char)*k) || strlen(k) > 256)
                return false;
        for (const char *p = k; *p; p++)
                if (!isalnum((unsigned char)*p) && *p != '_')
                        return false;
        return true;
}

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

#define HELD_MAX_BYTES (1u << 20)

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
        if (STREQ(code, "too_many_processes"))
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
static int query_utf8(struct evhttp_request *req)
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

static void start_call(struct daemon *d, struct evhttp_request *req, struct sandbox *sb,
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

static void handle_exec(struct daemon *d, struct evhttp_request *req, struct grant *g,
                        const char *id)
{
        if (!require(d, req, g, g->allow_exec, "allowExec") || refuse_lost_store(d, req))
                return;
        json_t *body = read_json_body(d, req, false);
        if (!body)
                return;
        static const char *const keys[] = {"argv",    "env",          "cwd",        "stdin",
                                           "timeout", "stallTimeout", "background", "pty",
                                           "uid",     NULL};
        json_t *ctl = NULL;
        if (reject_unknown(d, req, body, keys))
                goto out;
        if (query_utf8(req) < 0) {
                reply_bad_field(d, req, "encoding", "must be utf8 or base64");
                goto out;
        }
        json_t *argv = json_object_get(body, "argv");
        json_t *env = json_object_get(body, "env");
        json_t *cwd = json_object_get(body, "cwd");
        json_t *in = json_object_get(body, "stdin");
        json_t *bg = json_object_get(body, "background");
        double timeout, stall;
        size_t i;
        json_t *v;
        if (!json_is_array(argv) || json_array_size(argv) == 0 || json_array_size(argv) > 4096) {
                reply_bad_field(d, req, "argv", "must be a non-empty array of strings");
                goto out;
        }
        json_array_foreach(argv, i, v)
        {
                if (!json_is_string(v) || strlen(json_string_value(v)) != json_string_length(v)) {
                        _cleanup_free_ char *f = xasprintf("argv[%zu]", i);
                        reply_bad_field(d, req, f, "must be a string without NUL");
                        goto out;
                }
        }
        if (env && !json_is_null(env)) {
                const char *k;
                if (!json_is_object(env) || json_object_size(env) > 1024) {
                        reply_bad_field(d, req, "env", "must be an object of strings");
                        goto out;
                }
                json_object_foreach(env, k, v)
                {
                        if (!valid_env_name(k) || !json_is_string(v) ||
                            strlen(json_string_value(v)) != json_string_length(v)) {
                                _cleanup_free_ char *f = xasprintf("env.%s", k);
                                reply_bad_field(
                                    d, req, f,
                                    "must be a string, under a name of letters, digits and _");
                                goto out;
                        }
                }
        }
        if (cwd && !json_is_null(cwd) &&
            (!json_is_string(cwd) || json_string_value(cwd)[0] != '/' ||
             strlen(json_string_value(cwd)) != json_string_length(cwd))) {
                reply_bad_field(d, req, "cwd", "must be an absolute path inside the sandbox");
                goto out;
        }
        if (in && !json_is_null(in) &&
            (!json_is_string(in) || json_string_length(in) > STDIN_MAX)) {
                reply_bad_field(d, req, "stdin", "must be base64 text of at most 6 MiB of data");
                goto out;
        }
        if (bg && !json_is_boolean(bg)) {
                reply_bad_field(d, req, "background", "must be true or false");
                goto out;
        }
        if (body_seconds(body, "timeout", 7 * 24 * 3600.0, &timeout) < 0 || timeout == 0) {
                reply_bad_field(d, req, "timeout", "must be a positive number of seconds");
                goto out;
        }
        if (body_seconds(body, "stallTimeout", 3600.0, &stall) < 0 || stall == 0) {
                reply_bad_field(d, req, "stallTimeout",
                                "must be a positive number of seconds, at most 3600");
                goto out;
        }
        struct sandbox *sb = find_running(d, req, id);
        if (!sb)
                goto out;
        al_trace_mark("exec.parsed");
        /* A sandbox's user namespace maps its policy's uid, and with
         * "users" uids 0 to users-1, each its own unprivileged host id
         * (idrange.h): a command runs as one of those or not at all. */
        json_t *juid = json_object_get(body, "uid");
        long uid = -1;
        if (juid && !json_is_null(juid)) {
                char why[256];
                /* Not an integer from 0 to 65535: the same message. */
                uid = json_is_integer(juid) && json_integer_value(juid) >= 0 &&
                              json_integer_value(juid) <= 65535
                          ? (long)json_integer_value(juid)
                          : -2;
                if (idrange_check_uid(sb->policy, uid, why, sizeof(why))) {
                        reply_bad_field(d, req, "uid", why);
                        goto out;
                }
        }
        /* The policy's wall clock bounds every command. */
        double cap = (double)sb->policy->limits.timeout_ms / 1000.0;
        if (cap > 0 && (timeout < 0 || timeout > cap))
                timeout = cap;

        ctl = json_pack("{s:s, s:O, s:b}", "op", "exec", "argv", argv, "background",
                        json_is_true(bg));
        if (env && json_is_object(env))
                json_object_set(ctl, "env", env);
        if (json_is_string(cwd))
                json_object_set(ctl, "cwd", cwd);
        if (json_is_string(in))
                json_object_set(ctl, "stdin", in);
        if (uid >= 0)
                json_object_set_new(ctl, "uid", json_integer(uid));
        if (timeout > 0)
                json_object_set_new(ctl, "timeout", json_real(timeout));
        if (stall > 0)
                json_object_set_new(ctl, "stallTimeout", json_real(stall));
        if (!pty_exec_option(d, req, body, ctl))
                goto out;
        if (record_audit(d, id, "api.exec",
                         json_pack("{s:s, s:O, s:b, s:o}", "grant", g->name, "argv", argv,
                                   "background", json_is_true(bg), "uid",
                                   uid >= 0 ? json_integer(uid) : json_null())) < 0) {
                reply_audit_failed(d, req, d->audit_fault);
                goto out;
        }
        al_trace_mark("exec.audit");
        struct call_ctx *c = xcalloc(1, sizeof(*c));
        c->utf8 = query_utf8(req) > 0;
        c->background = json_is_true(bg);
        c->stall_ms = stall > 0 ? (uint64_t)(stall * 1000) : 0;
        c->argv = json_incref(argv);
        c->grant = xstrdup(g->name);
        snprintf(c->grant_hash, sizeof(c->grant_hash), "%s", g->token_hash);
        start_call(d, req, sb, CALL_EXEC, ctl, c);
out:
        json_decref(ctl);
        json_decref(body);
}

bool parse_pid(const char *s, uint64_t *ret)
{
        return safe_atou64(s, ret) == 0 && *ret > 0 && *ret < (1u << 30);
}

/* ?from=N: the first event's sequence number a reconnecting client wants. */
static int events_from(struct evhttp_request *req, uint64_t *ret)
{
        *ret = 0;
        const char *q = evhttp_uri_get_query(evhttp_request_get_evhttp_uri(req));
        if (!q)
                return 0;
        struct evkeyvalq params = {0};
        if (evhttp_parse_query_str(q, &params) < 0) {
                evhttp_clear_headers(&params);
                return -EINVAL;
        }
        int r = 0;
        const char *v = evhttp_find_header(&params, "from");
        if (v && (safe_atou64(v, ret) < 0 || *ret > (1ull << 53)))
                r = -EINVAL;
        evhttp_clear_headers(&params);
        return r;
}

static void handle_events(struct daemon *d, struct evhttp_request *req, const struct grant *g,
                          const char *id, uint64_t pid)
{
        uint64_t from = 0;
        if (events_from(req, &from) < 0) {
                reply_bad_field(d, req, "from", "must be an event's sequence number");
                return;
        }
        if (query_utf8(req) < 0) {
                reply_bad_field(d, req, "encoding", "must be utf8 or base64");
                return;
        }
        struct sandbox *sb = find_running(d, req, id);
        if (!sb)
                return;
        json_t *ctl = json_pack("{s:s, s:I}", "op", "attach", "pid", (json_int_t)pid);
        if (from > 0)
                json_object_set_new(ctl, "from", json_integer((json_int_t)from));
        struct call_ctx *c = xcalloc(1, sizeof(*c));
        c->pid = pid;
        c->utf8 = query_utf8(req) > 0;
        snprintf(c->grant_hash, sizeof(c->grant_hash), "%s", g->token_hash);
        start_call(d, req, sb, CALL_ATTACH, ctl, c);
        json_decref(ctl);
}

static int parse_signal(json_t *v)
{
        static const struct {
                const char *name;
                int sig;
        } names[] = {
            {"HUP", SIGHUP},   {"INT", SIGINT},   {"QUIT", SIGQUIT},   {"KILL", SIGKILL},
            {"USR1", SIGUSR1}, {"USR2", SIGUSR2}, {"TERM", SIGTERM},   {"CONT", SIGCONT},
            {"STOP", SIGSTOP}, {"ALRM", SIGALRM}, {"WINCH", SIGWINCH},
        };
        if (json_is_integer(v)) {
                json_int_t n = json_integer_value(v);
                return n > 0 && n < 65 ? (int)n : -1;
        }
        if (!json_is_string(v))
                return -1;
        const char *s = json_string_value(v);
        if (strncmp(s, "SIG", 3) == 0)
                s += 3;
        for (size_t i = 0; i < ARRAY_SIZE(names); i++)
                if (STREQ(s, names[i].name))
                        return names[i].sig;
        return -1;
}

static void handle_stdin_or_signal(struct daemon *d, struct evhttp_request *req, struct grant *g,
                                   const char *id, uint64_t pid, bool is_signal)
{
        if (!require(d, req, g, g->allow_exec, "allowExec"))
                return;
        json_t *body = read_json_body(d, req, false);
        if (!body)
                return;
        static const char *const stdin_keys[] = {"data", "eof", NULL};
        static const char *const signal_keys[] = {"signal", NULL};
        json_t *ctl = NULL;
        if (reject_unknown(d, req, body, is_signal ? signal_keys : stdin_keys))
                goto out;
        if (is_signal) {
                int sig = parse_signal(json_object_get(body, "signal"));
                if (sig < 0) {
                        reply_bad_field(d, req, "signal",
                                        "must be a signal number or name (\"TERM\")");
                        goto out;
                }
                ctl = json_pack("{s:s, s:I, s:i}", "op", "signal", "pid", (json_int_t)pid, "signal",
                                sig);
        } else {
                json_t *data = json_object_get(body, "data");
                json_t *eof = json_object_get(body, "eof");
                if (data && !json_is_null(data) &&
                    (!json_is_string(data) || json_string_length(data) > STDIN_MAX)) {
                        reply_bad_field(d, req, "data", "must be base64 text");
                        goto out;
                }
                if (eof && !json_is_boolean(eof)) {
                        reply_bad_field(d, req, "eof", "must be true or false");
                        goto out;
                }
                ctl = json_pack("{s:s, s:I, s:s, s:b}", "op", "stdin", "pid", (json_int_t)pid,
                                "data", json_is_string(data) ? json_string_value(data) : "", "eof",
                                json_is_true(eof));
        }
        struct sandbox *sb = find_running(d, req, id);
        if (!sb)
                goto out;
        struct call_ctx *c = xcalloc(1, sizeof(*c));
        c->pid = pid;
        start_call(d, req, sb, CALL_SIMPLE, ctl, c);
out:
        json_decref(ctl);
        json_decref(body);
}

static void handle_processes(struct daemon *d, struct evhttp_request *req, const char *id)
{
        struct store_sandbox *r = find_recorded(d, req, id);
        if (!r)
                return;
        store_sandbox_free(r);
        struct store_process **v = NULL;
        size_t n = 0;
        if (store_process_list(d->store, id, 1000, &v, &n) < 0) {
                reply_error(d, req, 500, "internal", "listing processes");
                return;
        }
        json_t *arr = json_array();
        for (size_t i = 0; i < n; i++) {
                json_error_t jerr;
                json_t *argv = json_loads(v[i]->argv ? v[i]->argv : "[]", 0, &jerr);
                json_array_append_new(
                    arr,
                    json_pack("{s:I, s:o, s:b, s:s, s:o, s:s?}", "pid", (json_int_t)v[i]->pid,
                              "argv", argv ? argv : json_array(), "background", v[i]->background,
                              "state", v[i]->state ? v[i]->state : "", "exitCode",
                              v[i]->exit_code >= 0 ? json_integer(v[i]->exit_code) : json_null(),
                              "errorCode", v[i]->error_code));
        }
        store_processes_free(v, n);
        reply_json(d, req, 200, json_pack("{s:o}", "processes", arr));
}

/* files */

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

void route_exec(struct daemon *d, struct evhttp_request *req, const struct route_args *a)
{
        handle_exec(d, req, a->grant, a->id);
}

void route_processes(struct daemon *d, struct evhttp_request *req, const struct route_args *a)
{
        handle_processes(d, req, a->id);
}

void route_events(struct daemon *d, struct evhttp_request *req, const struct route_args *a)
{
        handle_events(d, req, a->grant, a->id, a->pid);
}

void route_stdin(struct daemon *d, struct evhttp_request *req, const struct route_args *a)
{
        handle_stdin_or_signal(d, req, a->grant, a->id, a->pid, false);
}

void route_signal(struct daemon *d, struct evhttp_request *req, const struct route_args *a)
{
        handle_stdin_or_signal(d, req, a->grant, a->id, a->pid, true);
}
