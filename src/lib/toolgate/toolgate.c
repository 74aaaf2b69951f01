/* SPDX-License-Identifier: Apache-2.0 */
/* The tool gateway's server: connections on the sandbox's socket, one
 * request per line, and the order every call is checked in (run id,
 * tools.allow, schema, rate limits, concurrency) before a runner gets it.
 * Internals: docs/internals/toolgate.md. */
#include <errno.h>
#include <event2/buffer.h>
#include <event2/bufferevent.h>
#include <event2/event.h>
#include <stdio.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include "hwgate/hwgate.h"
#include "policy.h"
#include "schema.h"
#include "secrets.h"
#include "toolgate-internal.h"
#include "util.h"

struct tg_conn {
        struct toolgate *t;
        struct bufferevent *bev;
        unsigned pending; /* calls of this connection queued or running */
        bool closing;     /* answer what is written, then close */
        struct tg_conn *next, **prev;
};

static uint64_t now_ms(void)
{
        return now_monotonic_us() / 1000;
}

/* Answers */

static void conn_free(struct tg_conn *c);

static void conn_send(struct tg_conn *c, char *line, size_t len)
{
        if (c && line && !c->closing)
                bufferevent_write(c->bev, line, len);
        free(line);
        /* A client that does not read its answers is not read either. */
        if (c && evbuffer_get_length(bufferevent_get_output(c->bev)) > TOOLGATE_OUT_HIGH)
                bufferevent_disable(c->bev, EV_READ);
}

static void refuse(struct toolgate *t, struct tg_conn *c, const char *call_id, const char *tool,
                   const json_t *args, const char *code, const char *rule, const char *msg)
{
        size_t len;
        _cleanup_free_ char *scrubbed = toolgate_scrub_message(t, msg);
        char *line = toolgate_proto_error(call_id, code, scrubbed, &len);
        conn_send(c, line, len);
        if (toolgate_refusal_counted(t, tool, code, rule))
                return;
        char esc_tool[TOOLGATE_TOOL_NAME_MAX * 4 + 8], esc_id[TOOLGATE_CALL_ID_MAX * 4 + 8];
        struct toolgate_record rec = {
            .call_id = call_id ? toolgate_escape(call_id, esc_id, sizeof(esc_id)) : NULL,
            .tool = toolgate_escape(tool, esc_tool, sizeof(esc_tool)),
            .decision = "deny",
            .rule = rule,
            .error_code = code,
            .exit_status = -1,
        };
        toolgate_record(t, &rec, args);
}

/* Calls */

static struct tg_tool *tool_state(struct toolgate *t, const char *name)
{
        for (size_t i = 0; i < t->n_tools; i++)
                if (STREQ(t->tools[i].def->name, name))
                        return &t->tools[i];
        return NULL;
}

static void bucket_init(struct tg_bucket *b, uint32_t per_min)
{
        b->cap = per_min;
        b->tokens = per_min;
        b->per_ms = per_min / 60000.0;
        b->last_ms = now_ms();
}

static bool bucket_take(struct tg_bucket *b)
{
        uint64_t now = now_ms();
        b->tokens += (double)(now - b->last_ms) * b->per_ms;
        if (b->tokens > b->cap)
                b->tokens = b->cap;
        b->last_ms = now;
        if (b->tokens < 1.0)
                return false;
        b->tokens -= 1.0;
        return true;
}

static void call_free(struct tg_call *c)
{
        free(c->call_id);
        json_decref(c->args);
        json_decref(c->clamps);
        free(c);
}

static void call_start(struct tg_call *c)
{
        struct toolgate *t = c->t;
        c->started = true;
        c->tool->running++;
        c->next_running = t->running;
        if (t->running)
                t->running->prev_running = &c->next_running;
        c->prev_running = &t->running;
        t->running = c;
        /* Allowed when it came, perhaps revoked while it waited its turn:
         * the live capabilities decide when it would start. */
        if (!c->asked && t->allowed && !t->allowed(t->allowed_ud, c->tool->def->name)) {
                char msg[TOOLGATE_TOOL_NAME_MAX * 4 + 128], esc[TOOLGATE_TOOL_NAME_MAX * 4 + 8];
                snprintf(msg, sizeof(msg),
                         "tool \"%s\" was revoked while this call waited its turn; it was not "
                         "run",
                         toolgate_escape(c->tool->def->name, esc, sizeof(esc)));
                toolgate_call_finish(c, NULL, "policy_denied", "tools.allow", msg, -1, 0);
                return;
        }
        if (toolgate_record_ahead(c) < 0) {
                toolgate_call_finish(c, NULL, "audit_failed", "audit",
                                     "the call could not be recorded in the host's audit log, so "
                                     "the tool was not run",
                                     -1, 0);
                return;
        }
        switch (c->tool->def->runner) {
        case POLICY_TOOL_BUILTIN:
                toolgate_builtin_start(c);
                break;
        case POLICY_TOOL_COMMAND:
                toolgate_cmd_start(c);
                break;
        case POLICY_TOOL_HTTP:
                toolgate_http_start(c);
                break;
        }
}

void toolgate_recheck(struct toolgate *t)
{
        if (!t->allowed)
                return;
        for (struct tg_call *c = t->running, *next; c; c = next) {
                next = c->next_running;
                if (c->asked || c->revoking || !c->revoke ||
                    t->allowed(t->allowed_ud, c->tool->def->name))
                        continue;
                char msg[TOOLGATE_TOOL_NAME_MAX * 4 + 128], esc[TOOLGATE_TOOL_NAME_MAX * 4 + 8];
                snprintf(msg, sizeof(msg),
                         "tool \"%s\" was revoked while this call ran; it was stopped",
                         toolgate_escape(c->tool->def->name, esc, sizeof(esc)));
                c->revoking = true;
                c->revoke(c, msg); /* may finish c */
        }
}

static void start_waiting(struct tg_tool *tool)
{
        while (tool->queue_head && tool->running < tool->def->concurrency) {
                struct tg_call *c = tool->queue_head;
                tool->queue_head = c->next_queued;
                if (!tool->queue_head)
                        tool->queue_tail = NULL;
                c->next_queued = NULL;
                call_start(c);
        }
}

void toolgate_call_finish(struct tg_call *c, json_t *value, const char *error_code,
                          const char *rule, const char *safe_message, int exit_status,
                          uint64_t output_bytes)
{
        struct toolgate *t = c->t;
        struct tg_tool *tool = c->tool;
        size_t len;

        t->requests_held -= c->held;
        if (c->started) {
                tool->running--;
                *c->prev_running = c->next_running;
                if (c->next_running)
                        c->next_running->prev_running = c->prev_running;
        }
        if (c->conn) {
                char *line;
                if (error_code) {
                        _cleanup_free_ char *msg = toolgate_scrub_message(t, safe_message);
                        line = toolgate_proto_error(c->call_id, error_code, msg, &len);
                } else
                        line = toolgate_proto_ok(c->call_id, value, &len);
                if (!line)
                        line = toolgate_proto_error(c->call_id, "internal",
                                                    "the tool's answer could not be encoded", &len);
                conn_send(c->conn, line, len);
                c->conn->pending--;
        }
        struct toolgate_record rec = {
            .call_id = c->call_id,
            .seq = c->seq,
            .tool = tool->def->name,
            .args_digest = c->digest,
            .decision = "allow",
            .rule = rule ? rule : "tools.allow",
            .error_code = error_code,
            .clamps = c->clamps,
            .duration_ms = (now_monotonic_us() - c->start_us) / 1000,
            .output_bytes = output_bytes,
            .exit_status = exit_status,
        };
        toolgate_record(t, &rec, c->args);
        json_decref(value);
        call_free(c);
        if (!t->freeing)
                start_waiting(tool);
}

/* What the gateway holds now (TOOLGATE_HELD_MAX). */
static size_t held_bytes(const struct toolgate *t)
{
        size_t n = t->requests_held;
        for (const struct tg_conn *c = t->conns; c; c = c->next)
                n += evbuffer_get_length(bufferevent_get_output(c->bev));
        return n;
}

/* hw.* calls: the hardware gate answers them (at once, or when its driver
 * does), records them (hw.command) and applies its own rate. */
struct tg_hwcall {
        struct toolgate *t;
        struct tg_conn *conn; /* NULL once the connection is gone */
        char *call_id;
        struct tg_hwcall *next, **prev;
};

static void hw_done(void *ud, json_t *value, const char *error_code, const char *message)
{
        struct tg_hwcall *h = ud;
        size_t len;
        if (h->conn) {
                char *line = error_code
                                 ? toolgate_proto_error(h->call_id, error_code, message, &len)
                                 : toolgate_proto_ok(h->call_id, value, &len);
                conn_send(h->conn, line, len);
                h->conn->pending--;
        }
        json_decref(value);
        *h->prev = h->next;
        if (h->next)
                h->next->prev = h->prev;
        free(h->call_id);
        free(h);
}

static void handle_hw(struct tg_conn *conn, struct toolgate_request *req)
{
        struct toolgate *t = conn->t;
        /* A stop is never refused, not even on a crowded connection. */
        if (conn->pending >= TOOLGATE_PENDING_MAX && !STREQ(req->tool, "hw.stop")) {
                size_t len;
                conn_send(conn,
                          toolgate_proto_error(req->call_id, "rate_limited",
                                               "too many calls wait on this connection", &len),
                          len);
                return;
        }
        struct tg_hwcall *h = xcalloc(1, sizeof(*h));
        h->t = t;
        h->conn = conn;
        h->call_id = req->call_id ? xstrdup(req->call_id) : NULL;
        h->next = t->hwcalls;
        if (t->hwcalls)
                t->hwcalls->prev = &h->next;
        h->prev = &t->hwcalls;
        t->hwcalls = h;
        conn->pending++;
        hwgate_call(t->hw, req->tool, req->args, hw_done, h);
}

/* The limits, then start or queue: the call is allowed. Takes c. */
static void admit(struct tg_call *c, size_t len)
{
        struct toolgate *t = c->t;
        struct tg_conn *conn = c->conn;
        struct tg_tool *tool = c->tool;
        char msg[512], esc[TOOLGATE_TOOL_NAME_MAX * 4 + 8];
        const char *name = toolgate_escape(tool->def->name, esc, sizeof(esc));
        const char *limit = NULL;
        if (conn->pending >= TOOLGATE_PENDING_MAX)
                limit = "pending";
        else if (held_bytes(t) + len > TOOLGATE_HELD_MAX)
                limit = "held";
        else if (!bucket_take(&tool->bucket))
                limit = "rate";
        else if (!bucket_take(&t->sandbox_bucket))
                limit = "rate.sandbox";
        if (limit) {
                if (STREQ(limit, "held"))
                        snprintf(msg, sizeof(msg),
                                 "the gateway holds too many unanswered or unread calls for this "
                                 "sandbox; read the answers and retry");
                else if (STREQ(limit, "pending"))
                        snprintf(msg, sizeof(msg),
                                 "more than %u calls are waiting on this connection; wait for "
                                 "answers",
                                 TOOLGATE_PENDING_MAX);
                else if (STREQ(limit, "rate"))
                        snprintf(msg, sizeof(msg),
                                 "tool \"%s\" allows %u calls a minute; wait and retry", name,
                                 tool->def->rate_per_min);
                else
                        snprintf(msg, sizeof(msg),
                                 "this sandbox may make %u tool calls a minute; wait and retry",
                                 TOOLGATE_SANDBOX_RATE_PER_MIN);
                refuse(t, conn, c->call_id, tool->def->name, c->args, "rate_limited", limit, msg);
                call_free(c);
                return;
        }
        c->start_us = now_monotonic_us();
        c->held = len;
        t->requests_held += len;
        conn->pending++;
        if (tool->running < tool->def->concurrency && !tool->queue_head) {
                call_start(c);
                return;
        }
        if (tool->queue_tail)
                tool->queue_tail->next_queued = c;
        else
                tool->queue_head = c;
        tool->queue_tail = c;
}

static void asking_unlink(struct tg_call *c)
{
        *c->prev_asking = c->next_asking;
        if (c->next_asking)
                c->next_asking->prev_asking = c->prev_asking;
        c->next_asking = NULL;
        c->prev_asking = NULL;
        c->conn->pending--;
}

static void ask_refuse(struct tg_call *c, const char *reason)
{
        char msg[512], esc[TOOLGATE_TOOL_NAME_MAX * 4 + 8];
        const char *name = toolgate_escape(c->tool->def->name, esc, sizeof(esc));
        if (STREQ(reason, "ask_timeout"))
                snprintf(msg, sizeof(msg),
                         "tool \"%s\" is not in tools.allow and the operator did not answer in "
                         "time; call again to ask again",
                         name);
        else if (STREQ(reason, "ask_pending_limit"))
                snprintf(msg, sizeof(msg),
                         "tool \"%s\" is not in tools.allow and too many requests of this "
                         "sandbox wait for the operator; retry later",
                         name);
        else if (STREQ(reason, "ask_shutdown"))
                snprintf(msg, sizeof(msg), "the sandbox is stopping");
        else
                snprintf(msg, sizeof(msg),
                         "the operator denied tool \"%s\" for this sandbox; ask them to add it "
                         "to tools.allow",
                         name);
        refuse(c->t, c->conn, c->call_id, c->tool->def->name, c->args, "policy_denied",
               "tools.onUnlisted", msg);
        call_free(c);
}

static void ask_done(void *ud, bool allow, const char *reason)
{
        struct tg_call *c = ud;
        size_t len = c->held;
        asking_unlink(c);
        c->held = 0;
        if (allow)
                admit(c, len);
        else
                ask_refuse(c, reason);
}

static void handle_call(struct tg_conn *conn, struct toolgate_request *req, size_t len)
{
        struct toolgate *t = conn->t;
        char msg[512], why[256], esc[TOOLGATE_TOOL_NAME_MAX * 4 + 8];
        const char *name = toolgate_escape(req->tool, esc, sizeof(esc));

        if (t->hw && hwgate_is_tool(req->tool)) {
                handle_hw(conn, req);
                return;
        }
        struct tg_tool *tool = NULL;
        bool ask = false;
        if (t->allowed ? t->allowed(t->allowed_ud, req->tool)
                       : policy_tool_allowed(t->policy, req->tool))
                tool = tool_state(t, req->tool);
        else if (t->policy->tools_ask && t->asker.ask) {
                tool = tool_state(t, req->tool);
                ask = tool != NULL;
        }
        if (!tool) {
                snprintf(msg, sizeof(msg),
                         "tool \"%s\" is not allowed in this sandbox; ask the operator to "
                         "define it and add it to tools.allow",
                         name);
                refuse(t, conn, req->call_id, req->tool, req->args, "policy_denied", "tools.allow",
                       msg);
                return;
        }
        json_t *args = req->args ? json_deep_copy(req->args) : json_object();
        json_t *clamps = NULL;
        if (tool_schema_check(tool->def->schema, args, tool->def->clamp == POLICY_TOOL_CLAMP,
                              &clamps, why, sizeof(why)) < 0) {
                snprintf(msg, sizeof(msg), "tool \"%s\": %s", name, why);
                refuse(t, conn, req->call_id, req->tool, req->args, "bad_args", "schema", msg);
                json_decref(args);
                json_decref(clamps);
                return;
        }

        struct tg_call *c = xcalloc(1, sizeof(*c));
        c->t = t;
        c->conn = conn;
        c->tool = tool;
        c->call_id = req->call_id ? xstrdup(req->call_id) : NULL;
        c->args = args;
        c->clamps = clamps;
        c->start_us = now_monotonic_us();
        toolgate_args_digest(args, c->digest);
        c->asked = ask;
        if (!ask) {
                admit(c, len);
                return;
        }
        if (conn->pending >= TOOLGATE_PENDING_MAX) {
                admit(c, len); /* refused there, as any call past the bound */
                return;
        }
        const char *reason = "ask_denied";
        uint64_t token = 0;
        switch (
            t->asker.ask(t->asker.ud, tool->def->name, c->digest, ask_done, c, &token, &reason)) {
        case TOOLGATE_ASK_ALLOW:
                admit(c, len);
                return;
        case TOOLGATE_ASK_HELD:
                c->ask_token = token;
                c->held = len;
                conn->pending++;
                c->next_asking = t->asking;
                if (t->asking)
                        t->asking->prev_asking = &c->next_asking;
                c->prev_asking = &t->asking;
                t->asking = c;
                return;
        case TOOLGATE_ASK_DENY:
        default:
                ask_refuse(c, reason);
                return;
        }
}

static void handle_line(struct tg_conn *conn, const char *line, size_t len)
{
        struct toolgate *t = conn->t;
        struct toolgate_request req;
        const char *why = NULL;
        size_t n;

        if (len > 0 && line[len - 1] == '\r')
                len--;
        if (len == 0)
                return;
        if (toolgate_proto_parse(line, len, &req, &why) < 0) {
                refuse(t, conn, req.call_id, req.tool, NULL, "bad_args", "protocol", why);
                toolgate_request_clear(&req);
                return;
        }
        /* The run id first: a request from another run learns nothing else. */
        if (!req.run_id || !STREQ(req.run_id, t->run_id)) {
                refuse(t, conn, req.call_id, req.tool, NULL, "run_mismatch", "runId",
                       "the request's runId is not this sandbox's run (AIRLOCK_RUN_ID)");
                toolgate_request_clear(&req);
                return;
        }
        if (req.list && held_bytes(t) > TOOLGATE_HELD_MAX) {
                /* A list is an answer the gateway holds until it is read. */
                refuse(t, conn, req.call_id, NULL, NULL, "rate_limited", "held",
                       "the gateway holds too many unanswered or unread calls for this "
                       "sandbox; read the answers and retry");
        } else if (req.list) {
                json_t *l = toolgate_list_with(t->policy, t->allowed, t->allowed_ud);
                char *answer = toolgate_proto_ok(req.call_id, l, &n);
                conn_send(conn, answer, n);
                json_decref(l);
        } else
                handle_call(conn, &req, len);
        toolgate_request_clear(&req);
}

/* Connections */

/* A held call whose connection is going: the ask is withdrawn. */
static void asking_cancel(struct tg_call *c)
{
        struct toolgate *t = c->t;
        if (t->asker.cancel)
                t->asker.cancel(t->asker.ud, c->ask_token);
        asking_unlink(c);
        call_free(c);
}

static void conn_free(struct tg_conn *c)
{
        struct toolgate *t = c->t;
        for (struct tg_call *a = t->asking, *next; a; a = next) {
                next = a->next_asking;
                if (a->conn == c)
                        asking_cancel(a);
        }
        /* Calls still queued or running finish unanswered. */
        for (struct tg_call *r = t->running; r; r = r->next_running)
                if (r->conn == c)
                        r->conn = NULL;
        for (size_t i = 0; i < t->n_tools; i++)
                for (struct tg_call *q = t->tools[i].queue_head; q; q = q->next_queued)
                        if (q->conn == c)
                                q->conn = NULL;
        for (struct tg_hwcall *h = t->hwcalls; h; h = h->next)
                if (h->conn == c)
                        h->conn = NULL;
        *c->prev = c->next;
        if (c->next)
                c->next->prev = c->prev;
        t->n_conns--;
        bufferevent_free(c->bev);
        free(c);
}

static void conn_read(struct bufferevent *bev, void *ud)
{
        struct tg_conn *c = ud;
        struct evbuffer *in = bufferevent_get_input(bev);

        while (!c->closing) {
                size_t eol_len = 0;
                struct evbuffer_ptr eol = evbuffer_search_eol(in, NULL, &eol_len, EVBUFFER_EOL_LF);
                if (eol.pos < 0) {
                        if (evbuffer_get_length(in) > TOOLGATE_LINE_MAX) {
                                /* Too long: answer once, drop the rest, close
                                 * once the answer is written (conn_write). */
                                refuse(c->t, c, NULL, NULL, NULL, "bad_args", "protocol",
                                       "the request line is longer than the gateway's limit "
                                       "(1 MiB)");
                                c->closing = true;
                                evbuffer_drain(in, evbuffer_get_length(in));
                                bufferevent_disable(bev, EV_READ);
                        }
                        return;
                }
                size_t len = (size_t)eol.pos;
                if (len > TOOLGATE_LINE_MAX) {
                        evbuffer_drain(in, len + eol_len);
                        refuse(c->t, c, NULL, NULL, NULL, "bad_args", "protocol",
                               "the request line is longer than the gateway's limit (1 MiB)");
                        c->closing = true;
                        bufferevent_disable(bev, EV_READ);
                        return;
                }
                char *line = (char *)evbuffer_pullup(in, (ssize_t)(len + eol_len));
                handle_line(c, line, len);
                evbuffer_drain(in, len + eol_len);
                if (!(bufferevent_get_enabled(bev) & EV_READ))
                        return;
        }
}

static void conn_write(struct bufferevent *bev, void *ud)
{
        struct tg_conn *c = ud;
        if (evbuffer_get_length(bufferevent_get_output(bev)) > 0)
                return;
        if (c->closing) {
                conn_free(c);
                return;
        }
        if (!(bufferevent_get_enabled(bev) & EV_READ)) {
                bufferevent_enable(bev, EV_READ);
                conn_read(bev, c); /* lines already buffered */
        }
}

static void conn_event(struct bufferevent *bev, short what, void *ud)
{
        if (what & (BEV_EVENT_EOF | BEV_EVENT_ERROR))
                conn_free(ud);
}

static void accept_cb(evutil_socket_t lfd, short what, void *ud)
{
        struct toolgate *t = ud;
        int fd = accept4(lfd, NULL, NULL, SOCK_CLOEXEC | SOCK_NONBLOCK);
        if (fd < 0)
                return;
        if (t->n_conns >= TOOLGATE_CONNECTIONS_MAX) {
                close(fd);
                if (!toolgate_refusal_counted(t, "", "rate_limited", "connections")) {
                        struct toolgate_record rec = {
                            .tool = "",
                            .decision = "deny",
                            .rule = "connections",
                            .error_code = "rate_limited",
                            .exit_status = -1,
                        };
                        toolgate_record(t, &rec, NULL);
                }
                return;
        }
        struct tg_conn *c = xcalloc(1, sizeof(*c));
        c->t = t;
        c->bev = bufferevent_socket_new(t->base, fd, BEV_OPT_CLOSE_ON_FREE);
        if (!c->bev) {
                close(fd);
                free(c);
                return;
        }
        /* The input stops growing one byte past the longest line. */
        bufferevent_setwatermark(c->bev, EV_READ, 0, TOOLGATE_LINE_MAX + 2);
        bufferevent_setcb(c->bev, conn_read, conn_write, conn_event, c);
        bufferevent_enable(c->bev, EV_READ | EV_WRITE);
        c->next = t->conns;
        if (t->conns)
                t->conns->prev = &c->next;
        c->prev = &t->conns;
        t->conns = c;
        t->n_conns++;
}

/* The gateway */

struct toolgate *toolgate_new(struct event_base *base, const struct toolgate_config *cfg,
                              struct al_error *err)
{
        if (!cfg || !cfg->policy || !cfg->run_id || !*cfg->run_id) {
                al_error_set(err, EINVAL, "tool gateway: a policy and a run id are required");
                return NULL;
        }
        struct toolgate *t = xcalloc(1, sizeof(*t));
        t->base = base;
        t->policy = cfg->policy;
        t->sandbox = xstrdup(cfg->sandbox ? cfg->sandbox : "");
        t->run_id = xstrdup(cfg->run_id);
        t->account = xstrdup(cfg->account);
        /* Without the caller's secrets, an empty set: ${run.id} and the
         * like still expand, and a ${secret:...} fails as not set. */
        t->secrets = cfg->secrets ? cfg->secrets : (t->own_secrets = secrets_new());
        t->netgate = cfg->netgate;
        t->recorder = cfg->recorder;
        t->ahead = cfg->ahead;
        t->ud = cfg->ud;
        t->allowed = cfg->allowed;
        t->allowed_ud = cfg->allowed_ud;
        t->hw = cfg->hw;
        if (cfg->asker)
                t->asker = *cfg->asker;
        t->tools = xcalloc(cfg->policy->n_tools ? cfg->policy->n_tools : 1, sizeof(*t->tools));
        for (size_t i = 0; i < cfg->policy->n_tools; i++) {
                const struct policy_tool *d = &cfg->policy->tools[i];
                if (!d->schema)
                        continue;
                struct tg_tool *s = &t->tools[t->n_tools++];
                s->def = d;
                bucket_init(&s->bucket, d->rate_per_min ? d->rate_per_min : 60);
        }
        bucket_init(&t->sandbox_bucket, TOOLGATE_SANDBOX_RATE_PER_MIN);
        t->kinds_timer = evtimer_new(base, toolgate_refusals_tick, t);
        if (!t->kinds_timer) {
                al_error_set(err, ENOMEM, "tool gateway: making a timer");
                toolgate_free(t);
                return NULL;
        }
        return t;
}

int toolgate_add_listener(struct toolgate *t, int fd, struct al_error *err)
{
        if (t->n_listeners >= ARRAY_SIZE(t->listeners))
                return al_error_set(err, EMFILE, "tool gateway: too many listeners");
        if (evutil_make_socket_nonblocking(fd) < 0)
                return al_error_set(err, errno, "tool gateway: listener");
        struct event *ev = event_new(t->base, fd, EV_READ | EV_PERSIST, accept_cb, t);
        if (!ev || event_add(ev, NULL) < 0) {
                if (ev)
                        event_free(ev);
                return al_error_set(err, ENOMEM, "tool gateway: listening");
        }
        t->listeners[t->n_listeners] = ev;
        t->listen_fds[t->n_listeners++] = fd;
        return 0;
}

void toolgate_free(struct toolgate *t)
{
        if (!t)
                return;
        t->freeing = true;
        for (size_t i = 0; i < t->n_listeners; i++) {
                event_free(t->listeners[i]);
                close(t->listen_fds[i]);
        }
        while (t->conns)
                conn_free(t->conns);
        /* hw.* calls still waiting for the driver: never answered now. */
        while (t->hwcalls) {
                struct tg_hwcall *h = t->hwcalls;
                t->hwcalls = h->next;
                hwgate_forget(t->hw, h);
                free(h->call_id);
                free(h);
        }
        /* Waiting calls never start; running ones are killed and reaped. */
        for (size_t i = 0; i < t->n_tools; i++)
                while (t->tools[i].queue_head) {
                        struct tg_call *c = t->tools[i].queue_head;
                        t->tools[i].queue_head = c->next_queued;
                        toolgate_call_finish(c, NULL, "internal", "shutdown",
                                             "the sandbox is stopping", -1, 0);
                }
        while (t->running) {
                struct tg_call *c = t->running;
                if (c->cancel)
                        c->cancel(c); /* finishes c */
                else
                        toolgate_call_finish(c, NULL, "internal", "shutdown",
                                             "the sandbox is stopping", -1, 0);
        }
        if (t->kinds_timer) {
                toolgate_refusals_flush(t, true);
                event_free(t->kinds_timer);
        }
        secrets_free(t->own_secrets);
        free(t->tools);
        free(t->sandbox);
        free(t->run_id);
        free(t->account);
        free(t);
}

/* Listing */

/* What the schema enforces anyway, said in the listing: no member an
 * object's schema does not name. */
static void close_objects(json_t *schema)
{
        const char *key;
        json_t *v;

        if (!json_is_object(schema))
                return;
        if (json_is_string(json_object_get(schema, "type")) &&
            STREQ(json_string_value(json_object_get(schema, "type")), "object") &&
            !json_object_get(schema, "additionalProperties"))
                json_object_set_new(schema, "additionalProperties", json_false());
        json_object_foreach(json_object_get(schema, "properties"), key, v) close_objects(v);
        close_objects(json_object_get(schema, "items"));
}

json_t *toolgate_list(const struct policy *p)
{
        return toolgate_list_with(p, NULL, NULL);
}

json_t *toolgate_list_with(const struct policy *p, bool (*allowed)(void *ud, const char *name),
                           void *ud)
{
        json_t *a = json_array();
        for (size_t i = 0; i < p->n_tools; i++) {
                const struct policy_tool *d = &p->tools[i];
                if (allowed ? !allowed(ud, d->name) : !policy_tool_allowed(p, d->name))
                        continue;
                json_t *schema = d->schema_json ? json_loads(d->schema_json, 0, NULL) : NULL;
                close_objects(schema);
                json_array_append_new(a,
                                      json_pack("{s:s, s:s, s:o}", "name", d->name, "description",
                                                d->description ? d->description : "", "inputSchema",
                                                schema ? schema : json_object()));
        }
        if (p->hardware_json) {
                json_t *hw = hwgate_tools();
                json_array_extend(a, hw);
                json_decref(hw);
        }
        return a;
}

int toolgate_wanted(const struct policy *p)
{
        return p->n_tools_allow > 0 || p->hardware_json || (p->tools_ask && p->n_tools > 0);
}
