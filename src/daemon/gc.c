/* SPDX-License-Identifier: Apache-2.0 */
#include <string.h>

#include "daemon.h"
#include "util.h"

/* Collection on a timer: sandboxes past their TTL, sandboxes idle past their
 * idle timeout (no request and no process running), a refresh of each
 * sandbox's status for the metrics, and the warm pool's refill. */

#define STATUS_EVERY_MS   15000
#define STATUS_INFLIGHT   16

static unsigned status_inflight;

static void on_idle_status(struct sandbox *sb, int error, const char *message, void *userdata)
{
        status_inflight--;
        if (error < 0 || sb->state != SANDBOX_RUNNING)
                return;
        uint64_t now = daemon_now_ms();
        if (sb->status.busy || sb->streams > 0) {
                sb->last_active_ms = now;
                return;
        }
        if (sb->idle_timeout_ms && now - sb->last_active_ms >= sb->idle_timeout_ms)
                sandbox_destroy(sb, "idle", NULL, NULL);
}

static void on_poll_status(struct sandbox *sb, int error, const char *message, void *userdata)
{
        status_inflight--;
}

void gc_run(struct daemon *d)
{
        uint64_t now = daemon_now_ms();
        /* A destroy may end a sandbox at once and unlink it: walk ids. */
        size_t n = 0;
        for (struct sandbox *sb = d->sandboxes; sb; sb = sb->next)
                n++;
        char (*ids)[17] = xcalloc(n ? n : 1, sizeof(*ids));
        size_t k = 0;
        for (struct sandbox *sb = d->sandboxes; sb && k < n; sb = sb->next)
                memcpy(ids[k++], sb->id, 17);

        for (size_t i = 0; i < k; i++) {
                struct sandbox *sb = sandbox_find(d, ids[i]);
                if (!sb || (sb->state != SANDBOX_RUNNING && sb->state != SANDBOX_POOLED))
                        continue;
                if (sb->state == SANDBOX_RUNNING && sb->expires_ms && now >= sb->expires_ms) {
                        sandbox_destroy(sb, "ttl", NULL, NULL);
                        continue;
                }
                if (sb->state == SANDBOX_RUNNING && sb->idle_timeout_ms && sb->streams == 0 &&
                    now - sb->last_active_ms >= sb->idle_timeout_ms) {
                        /* Idle by the API's account; ask whether a background
                         * process still runs. */
                        if (status_inflight < STATUS_INFLIGHT * 4 &&
                            sandbox_refresh_status(sb, on_idle_status, NULL) >= 0)
                                status_inflight++;
                        continue;
                }
                if (status_inflight < STATUS_INFLIGHT &&
                    (!sb->status.valid || now - sb->status.at_ms >= STATUS_EVERY_MS) &&
                    sandbox_refresh_status(sb, on_poll_status, NULL) >= 0)
                        status_inflight++;
        }
        free(ids);
        pool_refill(d);
}

static void on_gc_timer(evutil_socket_t fd, short what, void *arg)
{
        gc_run(arg);
}

void gc_start(struct daemon *d)
{
        d->gc_timer = event_new(d->base, -1, EV_PERSIST, on_gc_timer, d);
        uint64_t ms = d->gc_interval_ms ? d->gc_interval_ms : 1000;
        struct timeval tv = {.tv_sec = (time_t)(ms / 1000), .tv_usec = (suseconds_t)(ms % 1000) * 1000};
        event_add(d->gc_timer, &tv);
}
