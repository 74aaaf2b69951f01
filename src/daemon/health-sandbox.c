/* SPDX-License-Identifier: Apache-2.0 */
/* Per-sandbox health (health-sandbox.h): a reader of the audit log
 * (events-cursor.h) counts each live sandbox's gate decisions into
 * per-gate totals and a ring of time buckets spanning the policy's window;
 * each tick the thresholds are checked. Bounded: one entry per live
 * sandbox, BUCKETS buckets each, and at most READ_MAX bytes of log a tick. */
#include <inttypes.h>
#include <stdio.h>
#include <string.h>
#include <time.h>

#include "daemon.h"
#include "events-cursor.h"
#include "health-sandbox.h"
#include "policy.h"
#include "record.h"
#include "sandbox.h"
#include "util.h"

#define TICK_MS  250
#define READ_MAX (1u << 20)
#define BUCKETS  60

enum { GATE_NETWORK, GATE_TOOLS, GATES };
static const char *const gate_names[GATES] = {"network", "tools"};

struct bucket {
        uint64_t epoch; /* ts_ms / width of what it holds */
        uint32_t allowed, denied;
};

struct entry {
        char id[17];
        uint64_t allowed[GATES], denied[GATES];
        uint64_t width_ms; /* a bucket's span: the window / BUCKETS, 1 s at least */
        struct bucket b[BUCKETS];
        bool unhealthy;
        char reason[256];
};

static struct {
        struct daemon *d;
        struct events_cursor *cur;
        struct event *timer;
        struct entry *e;
        size_t n, cap;
} H;

static uint64_t window_ms(const struct policy *p)
{
        return p && p->health.window_ms ? p->health.window_ms : POLICY_HEALTH_WINDOW_DEFAULT_MS;
}

static struct entry *entry_find(const char *id)
{
        for (size_t i = 0; i < H.n; i++)
                if (STREQ(H.e[i].id, id))
                        return &H.e[i];
        return NULL;
}

/* The entry of a live sandbox, made on first use; NULL when not live. */
static struct entry *entry_get(const char *id)
{
        struct entry *e = entry_find(id);
        if (e)
                return e;
        struct sandbox *sb = sandbox_find(H.d, id);
        if (!sb || sb->state >= SANDBOX_DESTROYED)
                return NULL;
        if (H.n == H.cap) {
                H.cap = H.cap ? H.cap * 2 : 16;
                H.e = xrealloc(H.e, H.cap, sizeof(*H.e));
        }
        e = &H.e[H.n++];
        memset(e, 0, sizeof(*e));
        snprintf(e->id, sizeof(e->id), "%s", id);
        uint64_t w = window_ms(sb->policy) / BUCKETS;
        e->width_ms = w < 1000 ? 1000 : w;
        return e;
}

/* Forget the sandboxes that are gone. */
static void prune(void)
{
        for (size_t i = 0; i < H.n;) {
                struct sandbox *sb = H.d ? sandbox_find(H.d, H.e[i].id) : NULL;
                if (!sb || sb->state >= SANDBOX_DESTROYED)
                        H.e[i] = H.e[--H.n];
                else
                        i++;
        }
}

/* "2026-11-22T10:00:00.123456Z" in ms; 0 when malformed. */
static uint64_t ts_ms(const char *s)
{
        struct tm tm = {0};
        const char *rest = s ? strptime(s, "%Y-%m-%dT%H:%M:%S", &tm) : NULL;
        if (!rest)
                return 0;
        time_t t = timegm(&tm);
        if (t < 0)
                return 0;
        uint64_t ms = (uint64_t)t * 1000;
        if (rest[0] == '.' && rest[1] >= '0' && rest[1] <= '9')
                ms += (uint64_t)(rest[1] - '0') * 100;
        return ms;
}

static void count(struct entry *e, int gate, bool allowed, uint64_t n, uint64_t at_ms)
{
        if (allowed)
                e->allowed[gate] += n;
        else
                e->denied[gate] += n;
        uint64_t epoch = at_ms / e->width_ms;
        struct bucket *b = &e->b[epoch % BUCKETS];
        if (b->epoch != epoch)
                *b = (struct bucket){.epoch = epoch};
        uint32_t *c = allowed ? &b->allowed : &b->denied;
        *c = *c + n > UINT32_MAX ? UINT32_MAX : (uint32_t)(*c + n);
}

static int on_line(const char *line, size_t len, uint64_t seq, void *userdata)
{
        int gate;
        if (memmem(line, len, "\"kind\":\"net.decision\"", 21) ||
            memmem(line, len, "\"kind\":\"route.call\"", 19))
                gate = GATE_NETWORK;
        else if (memmem(line, len, "\"kind\":\"tool.call\"", 18))
                gate = GATE_TOOLS;
        else
                return 0;
        json_error_t jerr;
        json_t *o = json_loadb(line, len, 0, &jerr);
        const char *sb = json_string_value(json_object_get(o, "sandbox"));
        const char *kind = json_string_value(json_object_get(o, "kind"));
        const char *decision = json_string_value(json_object_get(o, "decision"));
        struct entry *e = sb && kind && decision ? entry_get(sb) : NULL;
        if (e) {
                json_int_t n = json_integer_value(json_object_get(o, "count"));
                uint64_t at = ts_ms(json_string_value(json_object_get(o, "ts")));
                count(e, gate, STREQ(decision, "allow"), n > 0 ? (uint64_t)n : 1,
                      at ? at : now_realtime_us() / 1000);
        }
        json_decref(o);
        return 0;
}

/* Why the sandbox is unhealthy now, into why; false when it is not. */
static bool judge(struct entry *e, struct sandbox *sb, char *why, size_t size)
{
        const struct policy_health *h = sb->policy ? &sb->policy->health : NULL;
        if (!h)
                return false;
        if (h->max_denial_rate > 0) {
                uint64_t win = window_ms(sb->policy);
                uint64_t now_epoch = now_realtime_us() / 1000 / e->width_ms;
                uint64_t span = win / e->width_ms ? win / e->width_ms : 1;
                uint64_t allowed = 0, denied = 0;
                for (size_t i = 0; i < BUCKETS; i++)
                        if (e->b[i].epoch + span > now_epoch && e->b[i].epoch <= now_epoch) {
                                allowed += e->b[i].allowed;
                                denied += e->b[i].denied;
                        }
                uint64_t total = allowed + denied;
                uint64_t min =
                    h->min_decisions ? h->min_decisions : POLICY_HEALTH_MIN_DECISIONS_DEFAULT;
                if (total >= min && (double)denied / (double)total > h->max_denial_rate) {
                        snprintf(why, size,
                                 "%" PRIu64 " of %" PRIu64 " gate decisions in the last %" PRIu64
                                 " s were refusals, above health.maxDenialRate %g",
                                 denied, total, win / 1000, h->max_denial_rate);
                        return true;
                }
        }
        uint64_t limit = sb->policy->limits.memory;
        if (h->max_memory_fraction > 0 && limit && sb->status.valid && sb->status.doc) {
                json_int_t peak = json_integer_value(
                    json_object_get(json_object_get(sb->status.doc, "usage"), "memoryPeakBytes"));
                if (peak > 0 && (double)peak / (double)limit > h->max_memory_fraction) {
                        snprintf(why, size,
                                 "peak memory %" PRIu64 " bytes is above health.maxMemoryFraction "
                                 "%g of limits.memory %" PRIu64,
                                 (uint64_t)peak, h->max_memory_fraction, limit);
                        return true;
                }
        }
        return false;
}

static void tick(evutil_socket_t fd, short what, void *arg)
{
        if (H.cur) {
                size_t budget = READ_MAX;
                for (int i = 0; i < 16; i++)
                        if (events_cursor_read(H.cur, budget / 16, on_line, NULL) <= 0)
                                break;
        }
        /* Make entries for live sandboxes with no decision yet (memory),
         * drop those of sandboxes gone, and judge the rest. */
        for (struct sandbox *sb = H.d->sandboxes; sb; sb = sb->next)
                if (sb->state == SANDBOX_RUNNING)
                        (void)entry_get(sb->id);
        prune();
        for (size_t i = 0; i < H.n; i++) {
                struct entry *e = &H.e[i];
                struct sandbox *sb = sandbox_find(H.d, e->id);
                char why[sizeof(e->reason)];
                bool bad = sb->state == SANDBOX_RUNNING && judge(e, sb, why, sizeof(why));
                if (bad != e->unhealthy) {
                        e->unhealthy = bad;
                        snprintf(e->reason, sizeof(e->reason), "%s", bad ? why : "");
                        (void)record_audit(
                            H.d, e->id, "sandbox.health",
                            bad ? json_pack("{s:s, s:s}", "state", "unhealthy", "reason", why)
                                : json_pack("{s:s}", "state", "healthy"));
                } else if (bad)
                        snprintf(e->reason, sizeof(e->reason), "%s", why);
        }
}

void sandbox_health_start(struct daemon *d)
{
        H.d = d;
        if (d->audit_path && events_cursor_new(d->audit_path, true, 0, &H.cur) < 0)
                H.cur = NULL;
        H.timer = event_new(d->base, -1, EV_PERSIST, tick, NULL);
        struct timeval tv = {.tv_usec = TICK_MS * 1000};
        event_add(H.timer, &tv);
}

void sandbox_health_stop(void)
{
        if (H.timer)
                event_free(H.timer);
        H.cur = events_cursor_free(H.cur);
        free(H.e);
        memset(&H, 0, sizeof(H));
}

json_t *sandbox_health_json(const char *id)
{
        struct entry *e = H.d ? entry_get(id) : NULL;
        if (!e)
                return NULL;
        json_t *gates = json_object();
        for (int g = 0; g < GATES; g++)
                json_object_set_new(gates, gate_names[g],
                                    json_pack("{s:I, s:I}", "allowed", (json_int_t)e->allowed[g],
                                              "denied", (json_int_t)e->denied[g]));
        json_t *o = json_pack("{s:s, s:o}", "state", e->unhealthy ? "unhealthy" : "healthy",
                              "gates", gates);
        if (e->unhealthy)
                json_object_set_new(o, "reason", json_string(e->reason));
        return o;
}

void sandbox_health_metrics(struct evbuffer *out)
{
        prune();
        evbuffer_add_printf(out, "# HELP airlock_sandbox_gate_decisions_total Gate decisions of "
                                 "each live sandbox, from its audit lines.\n"
                                 "# TYPE airlock_sandbox_gate_decisions_total counter\n");
        for (size_t i = 0; i < H.n; i++)
                for (int g = 0; g < GATES; g++) {
                        evbuffer_add_printf(out,
                                            "airlock_sandbox_gate_decisions_total{sandbox=\"%s\","
                                            "gate=\"%s\",result=\"allowed\"} %" PRIu64 "\n",
                                            H.e[i].id, gate_names[g], H.e[i].allowed[g]);
                        evbuffer_add_printf(out,
                                            "airlock_sandbox_gate_decisions_total{sandbox=\"%s\","
                                            "gate=\"%s\",result=\"denied\"} %" PRIu64 "\n",
                                            H.e[i].id, gate_names[g], H.e[i].denied[g]);
                }
        evbuffer_add_printf(out, "# HELP airlock_sandbox_unhealthy 1 while a live sandbox is "
                                 "past a threshold of its policy's health section.\n"
                                 "# TYPE airlock_sandbox_unhealthy gauge\n");
        for (size_t i = 0; i < H.n; i++)
                evbuffer_add_printf(out, "airlock_sandbox_unhealthy{sandbox=\"%s\"} %d\n",
                                    H.e[i].id, H.e[i].unhealthy ? 1 : 0);
}

json_t *sandbox_health_unhealthy(void)
{
        prune();
        json_t *a = json_array();
        for (size_t i = 0; i < H.n; i++)
                if (H.e[i].unhealthy)
                        json_array_append_new(
                            a, json_pack("{s:s, s:s}", "id", H.e[i].id, "reason", H.e[i].reason));
        return a;
}
