/* SPDX-License-Identifier: Apache-2.0 */
/* The hardware gate: the sandbox's hw.* calls checked (allow and deny
 * lists, values, the action rate), motion clamped to ±maxSpeed and ramped
 * at maxAcceleration, the deadman, the stops; every command recorded as one
 * hw.command. Internals: docs/internals/hwgate.md. */
#include <errno.h>
#include <event2/buffer.h>
#include <event2/event.h>
#include <math.h>
#include <stdio.h>
#include <string.h>

#include "hardware.h"
#include "hwgate-internal.h"
#include "hwgate.h"
#include "util.h"

struct act {
        char name[POLICY_HW_NAME_MAX + 1];
        double max_speed, max_accel;
        double current;           /* what the driver was last told */
        double target;            /* where the ramp goes */
        uint64_t moving_since_ms; /* 0: at rest */
        uint64_t ramp_ms;         /* the ramp's last step (or its start) */
};

struct pending {
        uint64_t id;
        bool list;
        char name[POLICY_HW_NAME_MAX + 1];
        hwgate_done_fn done; /* NULL: forgotten */
        void *ud;
        uint64_t sent_ms;
};

struct hwgate {
        struct event_base *base;
        struct policy_hardware hw;
        struct hwgate_driver drv;
        bool driver_lost;
        struct event *ev_read, *ev_tick;
        struct evbuffer *in;
        struct act acts[HWGATE_ACTUATORS_MAX];
        size_t n_acts;
        struct hwgate_bucket bucket;
        uint64_t last_tick_ms;
        uint64_t motion_timeout_ms;
        bool estopped;
        /* The driver stopped taking commands (its queue was full): every
         * actuator was told to stop and motion is refused from then on. */
        bool stalled;
        uint64_t next_id;
        struct pending pending[HWGATE_PENDING_MAX];
        size_t n_pending;
        uint64_t window_ms; /* the rate refusals' window */
        unsigned singles;
        uint64_t counted;
        int (*recorder)(void *ud, const char *kind, json_t *fields);
        void *rud;
};

#define HWGATE_STALLED                                                                             \
        "the hardware driver stopped reading its commands; every actuator was told to stop and "   \
        "no motion is allowed until the sandbox ends"

static uint64_t now_ms(void)
{
        return now_monotonic_us() / 1000;
}

static int record(struct hwgate *g, json_t *fields)
{
        if (g->recorder && fields)
                return g->recorder(g->rud, "hw.command", fields);
        json_decref(fields);
        return 0;
}

/* One hw.command: op, name, requested (the value as given, any JSON),
 * actual (what the device was told to go to), decision, rule, reason. */
static int record_cmd(struct hwgate *g, const char *op, const char *name, const json_t *requested,
                      const double *actual, const char *decision, const char *rule,
                      const char *reason)
{
        json_t *f = json_pack("{s:s, s:s, s:s}", "op", op, "decision", decision, "rule", rule);
        if (!f)
                return -ENOMEM;
        if (name)
                json_object_set_new(f, "name", json_string(name));
        if (requested) {
                /* What the sandbox sent, bounded: a long string is cut. */
                if (json_is_string(requested) && json_string_length(requested) > 64)
                        json_object_set_new(f, "requested",
                                            json_stringn(json_string_value(requested), 64));
                else if (json_is_number(requested) || json_is_string(requested) ||
                         json_is_null(requested) || json_is_boolean(requested))
                        json_object_set(f, "requested", (json_t *)requested);
                else
                        json_object_set_new(f, "requested", json_string("(not a number)"));
        }
        if (actual)
                json_object_set_new(f, "actual", json_real(*actual));
        if (reason)
                json_object_set_new(f, "reason", json_string(reason));
        return record(g, f);
}

/* Rate refusals of a flood: the first few a second one by one, the rest
 * counted into one record (count: how many it stands for) when the window
 * ends, or the gate closes. */
static void rate_flush(struct hwgate *g, uint64_t now)
{
        if (g->counted)
                record(g, json_pack("{s:s, s:s, s:s, s:s, s:I, s:s}", "op", "*", "name", "*",
                                    "decision", "deny", "rule", "rate", "count",
                                    (json_int_t)g->counted, "reason",
                                    "more calls than limits.rate allows"));
        g->window_ms = now;
        g->singles = 0;
        g->counted = 0;
}

static bool rate_refusal_counted(struct hwgate *g, uint64_t now)
{
        if (now - g->window_ms >= 1000)
                rate_flush(g, now);
        if (g->singles < HWGATE_REFUSAL_SINGLES) {
                g->singles++;
                return false;
        }
        g->counted++;
        return true;
}

static struct act *act_find(struct hwgate *g, const char *name)
{
        for (size_t i = 0; i < g->n_acts; i++)
                if (STREQ(g->acts[i].name, name))
                        return &g->acts[i];
        return NULL;
}

/* A request the driver does not answer (set, stop). A set the driver
 * does not read in time (HWGATE_OUT_MAX waiting) is lost; a stop drops
 * what waits first. */
static int send_req(struct hwgate *g, const char *op, const char *name, const double *value)
{
        size_t len = 0;
        char *line = hwgate_proto_request(++g->next_id, op, name, value, &len);
        if (!line)
                return -ENOMEM;
        int r = hwgate_driver_send(&g->drv, line, len);
        free(line);
        return r;
}

/* Tell the driver where an actuator goes now, and keep its motion clock.
 * A set the driver cannot take (its queue is full: it stopped reading) is
 * not done: the caller stops everything (driver_stalled). */
static int apply(struct hwgate *g, struct act *a, double v, uint64_t now)
{
        int r = send_req(g, "set", a->name, &v);
        if (r < 0)
                return r;
        a->current = v;
        if (v == 0)
                a->moving_since_ms = 0;
        else if (!a->moving_since_ms)
                a->moving_since_ms = now ? now : 1;
        return 0;
}

/* Every actuator to rest, at once: what waits for the driver is dropped
 * and the stop goes first. */
static int stop_all(struct hwgate *g, const char *rule, const char *reason)
{
        for (size_t i = 0; i < g->n_acts; i++) {
                g->acts[i].current = g->acts[i].target = 0;
                g->acts[i].moving_since_ms = 0;
        }
        hwgate_driver_drop_queued(&g->drv);
        int r = send_req(g, "stop", NULL, NULL);
        record_cmd(g, "stop", "*", NULL, NULL, "stop", rule, reason);
        return r;
}

/* A set was not queued: what the device does is no longer what the gate
 * knows. Everything stops (the stop goes ahead of what waits) and motion
 * is refused until the sandbox ends; what waits is still written as the
 * driver reads. */
static void driver_stalled(struct hwgate *g)
{
        if (g->stalled)
                return;
        g->stalled = true;
        stop_all(g, "driver",
                 "the hardware driver stopped reading its commands; every actuator was told to "
                 "stop and motion is refused until the sandbox ends");
}

static void pending_fail(struct hwgate *g, size_t i, const char *code, const char *msg)
{
        struct pending p = g->pending[i];
        g->pending[i] = g->pending[--g->n_pending];
        if (p.done)
                p.done(p.ud, NULL, code, msg);
}

static void driver_lost(struct hwgate *g, const char *why)
{
        if (g->driver_lost)
                return;
        g->driver_lost = true;
        if (g->ev_read)
                event_del(g->ev_read);
        if (g->recorder)
                g->recorder(g->rud, "hw.driver",
                            json_pack("{s:s, s:s}", "state", "lost", "reason", why));
        while (g->n_pending)
                pending_fail(g, 0, "tool_failed", "the hardware driver is gone");
}

static void on_reply(struct hwgate *g, const char *line, size_t len)
{
        struct hwgate_reply r;
        const char *why = NULL;
        if (len == 0)
                return;
        if (hwgate_proto_parse_reply(line, len, &r, &why) < 0) {
                if (g->recorder)
                        g->recorder(g->rud, "hw.driver",
                                    json_pack("{s:s, s:s}", "state", "bad_answer", "reason", why));
                return;
        }
        for (size_t i = 0; i < g->n_pending; i++) {
                if (g->pending[i].id != r.id)
                        continue;
                struct pending p = g->pending[i];
                g->pending[i] = g->pending[--g->n_pending];
                if (!p.done)
                        break;
                if (!r.ok) {
                        char msg[320];
                        snprintf(msg, sizeof(msg), "the driver says: %s", r.error);
                        p.done(p.ud, NULL, "tool_failed", msg);
                } else if (p.list) {
                        json_t *l = hwgate_annotate_list(&g->hw, r.value, &why);
                        if (l)
                                p.done(p.ud, l, NULL, NULL);
                        else
                                p.done(p.ud, NULL, "tool_failed", why);
                } else
                        p.done(p.ud, json_pack("{s:s, s:O}", "name", p.name, "value", r.value),
                               NULL, NULL);
                break;
        }
        hwgate_reply_clear(&r);
}

static void on_read(evutil_socket_t fd, short what, void *ud)
{
        struct hwgate *g = ud;
        int n = evbuffer_read(g->in, fd, 65536);
        if (n <= 0) {
                if (n < 0 && (errno == EAGAIN || errno == EINTR))
                        return;
                driver_lost(g, n == 0 ? "the driver closed its connection"
                                      : "reading from the driver failed");
                return;
        }
        for (;;) {
                size_t eol_len = 0;
                struct evbuffer_ptr eol =
                    evbuffer_search_eol(g->in, NULL, &eol_len, EVBUFFER_EOL_LF);
                if (eol.pos < 0) {
                        if (evbuffer_get_length(g->in) > HWGATE_LINE_MAX) {
                                evbuffer_drain(g->in, evbuffer_get_length(g->in));
                                driver_lost(g, "the driver sent a line longer than 64 KiB");
                        }
                        return;
                }
                size_t len = (size_t)eol.pos;
                if (len > HWGATE_LINE_MAX) {
                        evbuffer_drain(g->in, len + eol_len);
                        continue;
                }
                char *line = (char *)evbuffer_pullup(g->in, (ssize_t)(len + eol_len));
                on_reply(g, line, len);
                evbuffer_drain(g->in, len + eol_len);
        }
}

static void on_tick(evutil_socket_t fd, short what, void *ud)
{
        struct hwgate *g = ud;
        uint64_t now = now_ms();
        g->last_tick_ms = now;

        if (!g->driver_lost) {
                for (size_t i = 0; i < g->n_acts; i++) {
                        struct act *a = &g->acts[i];
                        if (a->current == a->target)
                                continue;
                        /* The time since its own last step: a ramp that began
                         * between two ticks gets only what has passed. */
                        double adt = (double)(now - a->ramp_ms) / 1000.0;
                        a->ramp_ms = now;
                        if (apply(g, a, hwgate_ramp(a->current, a->target, a->max_accel, adt),
                                  now) < 0) {
                                driver_stalled(g);
                                break;
                        }
                }
                for (size_t i = 0; i < g->n_acts; i++) {
                        struct act *a = &g->acts[i];
                        if (hwgate_deadman_due(a->moving_since_ms, now, g->motion_timeout_ms)) {
                                char why[160];
                                snprintf(why, sizeof(why),
                                         "deadman: %s moved for %.1f s without a rest "
                                         "(limits.motionTimeout)",
                                         a->name, g->hw.motion_timeout);
                                stop_all(g, "deadman", why);
                                break;
                        }
                }
                if (hwgate_driver_flush(&g->drv) < 0)
                        driver_lost(g, "writing to the driver failed");
        }
        for (size_t i = 0; i < g->n_pending;)
                if (now - g->pending[i].sent_ms > HWGATE_REPLY_MS)
                        pending_fail(g, i, "timeout", "the hardware driver did not answer in 2 s");
                else
                        i++;
        if (now - g->window_ms >= 1000)
                rate_flush(g, now);
}

struct hwgate *hwgate_new(struct event_base *base, const struct hwgate_config *cfg,
                          struct al_error *err)
{
        struct hwgate *g = xcalloc(1, sizeof(*g));
        g->base = base;
        g->drv.fd = -1;
        g->drv.pid = -1;
        g->drv.pidfd = -1;
        g->recorder = cfg->recorder;
        g->rud = cfg->ud;
        if (policy_hardware_from_text(cfg->policy_text, &g->hw, err) < 0) {
                free(g);
                return NULL;
        }
        for (size_t i = 0; i < g->hw.n_act_allow && g->n_acts < HWGATE_ACTUATORS_MAX; i++) {
                const char *name = g->hw.act_allow[i];
                if (!policy_hardware_actuator_allowed(&g->hw, name))
                        continue;
                struct act *a = &g->acts[g->n_acts++];
                snprintf(a->name, sizeof(a->name), "%s", name);
                policy_hardware_limits(&g->hw, name, &a->max_speed, &a->max_accel);
        }
        g->motion_timeout_ms = (uint64_t)ceil(g->hw.motion_timeout * 1000.0);
        uint64_t now = now_ms();
        hwgate_bucket_init(&g->bucket, g->hw.rate, now);
        g->last_tick_ms = now;
        g->window_ms = now;
        g->in = evbuffer_new();
        if (hwgate_driver_check_reach(&g->hw, cfg->policy, err) < 0 ||
            hwgate_driver_open(&g->drv, &g->hw, err) < 0) {
                hwgate_free(g);
                return NULL;
        }
        g->ev_read = event_new(base, g->drv.fd, EV_READ | EV_PERSIST, on_read, g);
        g->ev_tick = event_new(base, -1, EV_PERSIST, on_tick, g);
        struct timeval tv = {.tv_sec = 0, .tv_usec = HWGATE_TICK_MS * 1000};
        if (!g->in || !g->ev_read || !g->ev_tick || event_add(g->ev_read, NULL) < 0 ||
            event_add(g->ev_tick, &tv) < 0) {
                al_error_set(err, ENOMEM, "hardware gate: events");
                hwgate_free(g);
                return NULL;
        }
        /* A driver that starts must find its actuators at rest. */
        send_req(g, "stop", NULL, NULL);
        return g;
}

bool hwgate_is_tool(const char *tool)
{
        return tool && (STREQ(tool, "hw.ls") || STREQ(tool, "hw.set") || STREQ(tool, "hw.read") ||
                        STREQ(tool, "hw.stop"));
}

/* args may hold only these keys. */
static bool keys_ok(const json_t *args, const char *a, const char *b)
{
        const char *key;
        json_t *v;
        json_object_foreach((json_t *)args, key, v)
        {
                if (!(a && STREQ(key, a)) && !(b && STREQ(key, b)))
                        return false;
        }
        return true;
}

static void ask_driver(struct hwgate *g, bool list, const char *name, hwgate_done_fn done, void *ud)
{
        size_t len;
        if (g->n_pending >= HWGATE_PENDING_MAX) {
                done(ud, NULL, "rate_limited", "too many reads wait for the hardware driver");
                return;
        }
        char *line = hwgate_proto_request(++g->next_id, list ? "list" : "read", name, NULL, &len);
        int r = line ? hwgate_driver_send(&g->drv, line, len) : -ENOMEM;
        free(line);
        if (r < 0) {
                done(ud, NULL, "tool_failed", "the hardware driver cannot be reached");
                return;
        }
        struct pending *p = &g->pending[g->n_pending++];
        *p = (struct pending){
            .id = g->next_id, .list = list, .done = done, .ud = ud, .sent_ms = now_ms()};
        snprintf(p->name, sizeof(p->name), "%s", name ? name : "");
}

static void do_set(struct hwgate *g, const json_t *args, hwgate_done_fn done, void *ud)
{
        char msg[256];
        const char *why = NULL;
        json_t *jname = json_object_get(args, "name"), *jval = json_object_get(args, "value");
        const char *name = json_string_value(jname);
        uint64_t now = now_ms();

        if (!keys_ok(args, "name", "value") || !name || !policy_hardware_name_ok(name)) {
                record_cmd(g, "set", name && policy_hardware_name_ok(name) ? name : NULL, jval,
                           NULL, "deny", "bad_args", "bad name or an unknown key");
                done(ud, NULL, "bad_args",
                     "hw.set takes {\"name\": a device name, \"value\": a number}");
                return;
        }
        double v;
        if (hwgate_value(jval, &v, &why) < 0) {
                record_cmd(g, "set", name, jval, NULL, "deny", "bad_args", why);
                done(ud, NULL, "bad_args", why);
                return;
        }
        struct act *a = act_find(g, name);
        if (!a) {
                snprintf(msg, sizeof(msg),
                         "actuator \"%s\" is not allowed in this sandbox "
                         "(hardware.actuators.allow)",
                         name);
                record_cmd(g, "set", name, jval, NULL, "deny", "actuators.allow", msg);
                done(ud, NULL, "policy_denied", msg);
                return;
        }
        if (g->estopped) {
                record_cmd(g, "set", name, jval, NULL, "deny", "estop",
                           "the host's emergency stop holds");
                done(ud, NULL, "policy_denied",
                     "the host stopped this sandbox's hardware (emergency stop); no motion is "
                     "allowed until the sandbox ends");
                return;
        }
        if (g->driver_lost) {
                record_cmd(g, "set", name, jval, NULL, "deny", "driver", "the driver is gone");
                done(ud, NULL, "tool_failed", "the hardware driver is gone");
                return;
        }
        if (g->stalled) {
                record_cmd(g, "set", name, jval, NULL, "deny", "driver",
                           "the driver stopped reading its commands");
                done(ud, NULL, "tool_failed", HWGATE_STALLED);
                return;
        }
        if (!hwgate_bucket_take(&g->bucket, now)) {
                if (!rate_refusal_counted(g, now))
                        record_cmd(g, "set", name, jval, NULL, "deny", "rate",
                                   "more calls than limits.rate allows");
                snprintf(msg, sizeof(msg),
                         "this sandbox may make %g hardware calls a second; wait and retry",
                         g->hw.rate);
                done(ud, NULL, "rate_limited", msg);
                return;
        }
        bool clamped;
        double actual = hwgate_clamp(v, a->max_speed, &clamped);
        bool ramp = a->max_accel > 0 && actual != a->current;
        /* On the log before the device is told: a set that cannot be
         * recorded (the audit disk full) moves nothing. */
        char reason[160];
        snprintf(reason, sizeof(reason), "%s%s%s", clamped ? "clamped to maxSpeed" : "",
                 clamped && ramp ? "; " : "", ramp ? "ramped at maxAcceleration" : "");
        if (record_cmd(g, "set", name, jval, &actual, "allow", "actuators.allow",
                       reason[0] ? reason : NULL) < 0) {
                done(ud, NULL, "audit_failed",
                     "the set could not be recorded in the host's audit log, so the device was "
                     "not told");
                return;
        }
        if (ramp && a->target == a->current)
                a->ramp_ms = now; /* a ramp starts now */
        a->target = actual;
        if (!ramp && actual != a->current && apply(g, a, actual, now) < 0) {
                record_cmd(g, "set", name, jval, &actual, "deny", "driver",
                           "the driver stopped reading its commands");
                driver_stalled(g);
                done(ud, NULL, "tool_failed", HWGATE_STALLED);
                return;
        }
        json_t *ans = json_pack("{s:s, s:f, s:f, s:b, s:b}", "name", name, "requested", v, "actual",
                                actual, "clamped", clamped, "ramping", ramp);
        done(ud, ans, NULL, NULL);
}

static void do_read(struct hwgate *g, const json_t *args, hwgate_done_fn done, void *ud)
{
        char msg[256];
        const char *name = json_string_value(json_object_get(args, "name"));
        if (!keys_ok(args, "name", NULL) || !name || !policy_hardware_name_ok(name)) {
                record_cmd(g, "read", NULL, NULL, NULL, "deny", "bad_args",
                           "bad name or an unknown key");
                done(ud, NULL, "bad_args", "hw.read takes {\"name\": a device name}");
                return;
        }
        if (!policy_hardware_sensor_allowed(&g->hw, name)) {
                snprintf(msg, sizeof(msg),
                         "sensor \"%s\" is denied in this sandbox (hardware.sensors.deny)", name);
                record_cmd(g, "read", name, NULL, NULL, "deny", "sensors.deny", msg);
                done(ud, NULL, "policy_denied", msg);
                return;
        }
        uint64_t now = now_ms();
        if (!hwgate_bucket_take(&g->bucket, now)) {
                if (!rate_refusal_counted(g, now))
                        record_cmd(g, "read", name, NULL, NULL, "deny", "rate",
                                   "more calls than limits.rate allows");
                done(ud, NULL, "rate_limited", "too many hardware calls; wait and retry");
                return;
        }
        record_cmd(g, "read", name, NULL, NULL, "allow", "sensors.deny", NULL);
        ask_driver(g, false, name, done, ud);
}

void hwgate_call(struct hwgate *g, const char *tool, const json_t *args, hwgate_done_fn done,
                 void *ud)
{
        json_t *empty = NULL;
        if (!args)
                args = empty = json_object();
        if (STREQ(tool, "hw.stop")) {
                /* Never rate-limited, never refused. */
                int r = stop_all(g, "hw.stop", "the sandbox asked (hw stop)");
                done(ud, json_pack("{s:b, s:b}", "stopped", 1, "driverTold", r >= 0), NULL, NULL);
        } else if (STREQ(tool, "hw.set"))
                do_set(g, args, done, ud);
        else if (STREQ(tool, "hw.read"))
                do_read(g, args, done, ud);
        else if (STREQ(tool, "hw.ls")) {
                uint64_t now = now_ms();
                if (!keys_ok(args, NULL, NULL))
                        done(ud, NULL, "bad_args", "hw.ls takes no arguments");
                else if (g->driver_lost)
                        done(ud, NULL, "tool_failed", "the hardware driver is gone");
                else if (!hwgate_bucket_take(&g->bucket, now))
                        done(ud, NULL, "rate_limited", "too many hardware calls; wait and retry");
                else
                        ask_driver(g, true, NULL, done, ud);
        } else
                done(ud, NULL, "bad_args", "no such hardware call");
        json_decref(empty);
}

void hwgate_forget(struct hwgate *g, void *ud)
{
        for (size_t i = 0; g && i < g->n_pending; i++)
                if (g->pending[i].ud == ud)
                        g->pending[i].done = NULL;
}

int hwgate_estop(struct hwgate *g, const char *by)
{
        char why[200];
        g->estopped = true;
        snprintf(why, sizeof(why), "emergency stop from the host (%s)", by ? by : "unknown");
        int r = stop_all(g, "estop", why);
        if (r >= 0)
                r = hwgate_driver_drain(&g->drv, 50);
        return r;
}

void hwgate_free(struct hwgate *g)
{
        if (!g)
                return;
        if (g->drv.fd >= 0 && !g->driver_lost) {
                stop_all(g, "shutdown", "the sandbox ended");
                hwgate_driver_drain(&g->drv, 500);
        }
        while (g->n_pending)
                pending_fail(g, 0, "internal", "the sandbox is stopping");
        rate_flush(g, now_ms());
        if (g->ev_read)
                event_free(g->ev_read);
        if (g->ev_tick)
                event_free(g->ev_tick);
        if (g->in)
                evbuffer_free(g->in);
        /* Closing is the second signal: a driver stops on connection loss. */
        hwgate_driver_close(&g->drv, 2000);
        policy_hardware_clear(&g->hw);
        free(g);
}

static json_t *tool_entry(const char *name, const char *desc, const char *schema)
{
        json_error_t jerr;
        json_t *s = json_loads(schema, 0, &jerr);
        return json_pack("{s:s, s:s, s:o}", "name", name, "description", desc, "inputSchema",
                         s ? s : json_object());
}

json_t *hwgate_tools(void)
{
        json_t *a = json_array();
        json_array_append_new(
            a,
            tool_entry("hw.ls", "List the robot's devices and what the policy allows.",
                       "{\"type\":\"object\",\"properties\":{},\"additionalProperties\":false}"));
        json_array_append_new(
            a, tool_entry("hw.set",
                          "Set an actuator's speed (clamped to maxSpeed, ramped at "
                          "maxAcceleration).",
                          "{\"type\":\"object\",\"properties\":{\"name\":{\"type\":\"string\"},"
                          "\"value\":{\"type\":\"number\"}},\"required\":[\"name\",\"value\"],"
                          "\"additionalProperties\":false}"));
        json_array_append_new(
            a, tool_entry("hw.read", "Read a sensor.",
                          "{\"type\":\"object\",\"properties\":{\"name\":{\"type\":\"string\"}},"
                          "\"required\":[\"name\"],\"additionalProperties\":false}"));
        json_array_append_new(
            a,
            tool_entry("hw.stop", "Stop every actuator now (never refused).",
                       "{\"type\":\"object\",\"properties\":{},\"additionalProperties\":false}"));
        return a;
}
