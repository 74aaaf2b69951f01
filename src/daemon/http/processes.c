/* SPDX-License-Identifier: Apache-2.0 */
/* A sandbox's processes: the list, a process's events (attach), its stdin
 * and its signals; each but the list a call relayed by call.c. */
#include <event2/keyvalq_struct.h>
#include <signal.h>
#include <string.h>

#include "daemon.h"
#include "http.h"
#include "routes.h"
#include "sandbox.h"
#include "util.h"
#include "call.h"

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
        /* Another grant reads; it never holds the command back. */
        if (!sb->grant || !STREQ(sb->grant, g->name))
                json_object_set_new(ctl, "watch", json_true());
        if (from > 0)
                json_object_set_new(ctl, "from", json_integer((json_int_t)from));
        struct call_ctx *c = xcalloc(1, sizeof(*c));
        c->pid = pid;
        c->utf8 = query_utf8(req) > 0;
        snprintf(c->grant_hash, sizeof(c->grant_hash), "%s", g->token_hash);
        call_start(d, req, sb, CALL_ATTACH, ctl, c);
        json_decref(ctl);
}

static int parse_signal(json_t *v)
{
        if (json_is_integer(v)) {
                json_int_t n = json_integer_value(v);
                return n > 0 && n < 65 ? (int)n : -1;
        }
        int sig;
        return json_is_string(v) && signal_parse(json_string_value(v), &sig) == 0 ? sig : -1;
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
        call_start(d, req, sb, CALL_SIMPLE, ctl, c);
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
