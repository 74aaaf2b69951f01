/* SPDX-License-Identifier: Apache-2.0 */
/* GET /metrics (Prometheus text) and GET /healthz. */
#include <event2/buffer.h>
#include <event2/http.h>
#include <string.h>

#include "health-sandbox.h"
#include "sandbox.h"
#include "pool.h"
#include "daemon.h"
#include "http.h"
#include "metrics.h"
#include "record.h"
#include "routes.h"
#include "util.h"

/* /healthz and /metrics */

static void handle_metrics(struct daemon *d, struct evhttp_request *req)
{
        struct metrics_live live = {
            .state_names = sandbox_state_names,
            .n_states = SANDBOX_STATE_COUNT,
            .max_sandboxes = d->max_sandboxes,
            .pool_ready = pool_ready(d),
        };
        for (struct sandbox *sb = d->sandboxes; sb; sb = sb->next) {
                if (sb->state < SANDBOX_DESTROYED)
                        live.by_state[sb->state]++;
                live.gate_allowed += sb->status.allowed;
                live.gate_denied += sb->status.denied;
                live.gate_bytes_up += sb->status.bytes_up;
                live.gate_bytes_down += sb->status.bytes_down;
                live.oom_kills += sb->status.oom_kills;
        }
        uint64_t destroyed = 0, failed = 0;
        (void)store_sandbox_count_state(d->store, "destroyed", &destroyed);
        (void)store_sandbox_count_state(d->store, "failed", &failed);
        live.by_state[SANDBOX_DESTROYED] = destroyed;
        live.by_state[SANDBOX_FAILED] = failed;
        char *text = metrics_render(&d->metrics, &live);
        struct evbuffer *buf = evbuffer_new();
        evbuffer_add(buf, text, strlen(text));
        free(text);
        sandbox_health_metrics(buf);
        reply_body(d, req, 200, "text/plain; version=0.0.4", buf);
        evbuffer_free(buf);
}

void route_metrics(struct daemon *d, struct evhttp_request *req, const struct route_args *a)
{
        handle_metrics(d, req);
}

void route_healthz(struct daemon *d, struct evhttp_request *req, const struct route_args *a)
{
        _cleanup_free_ char *why =
            record_audit_healthy(d) ? NULL : xasprintf("audit log: %s", d->audit_fault);
        daemon_health_set(d, "audit", why);
        json_t *h = json_pack("{s:b, s:s, s:I}", "ok", 1, "version", "0.1.0", "sandboxes",
                              (json_int_t)sandbox_count(d, NULL, false));
        daemon_health_fill(d, h); /* health.c: "ok" and its reasons */
        json_object_set_new(h, "unhealthySandboxes", sandbox_health_unhealthy());
        reply_json(d, req, daemon_health_ok(d) ? 200 : 503, h);
}
