/* SPDX-License-Identifier: Apache-2.0 */
#include <errno.h>
#include <stdio.h>
#include <string.h>

#include "daemon.h"
#include "health.h"
#include "util.h"

static struct health_reason *find(struct health *h, const char *source)
{
        for (size_t i = 0; i < HEALTH_SOURCES_MAX; i++)
                if (STREQ(h->r[i].source, source))
                        return &h->r[i];
        return NULL;
}

void daemon_health_set(struct daemon *d, const char *source, const char *reason)
{
        struct health_reason *r = find(&d->health, source);
        if (!reason || !*reason) {
                if (r)
                        memset(r, 0, sizeof(*r));
                return;
        }
        if (!r)
                r = find(&d->health, "");
        if (!r) /* every slot taken: the last one says the newest */
                r = &d->health.r[HEALTH_SOURCES_MAX - 1];
        bool changed = !STREQ(r->source, source) || !STREQ(r->reason, reason);
        snprintf(r->source, sizeof(r->source), "%s", source);
        snprintf(r->reason, sizeof(r->reason), "%s", reason);
        if (changed)
                daemon_log(d, "unhealthy (%s): %s", source, reason);
}

const char *daemon_health_get(const struct daemon *d, const char *source)
{
        struct health_reason *r = find((struct health *)&d->health, source);
        return r ? r->reason : NULL;
}

bool daemon_health_ok(const struct daemon *d)
{
        for (size_t i = 0; i < HEALTH_SOURCES_MAX; i++)
                if (d->health.r[i].source[0])
                        return false;
        return true;
}

void daemon_health_fill(const struct daemon *d, json_t *o)
{
        bool ok = daemon_health_ok(d);
        json_object_set_new(o, "ok", json_boolean(ok));
        if (ok)
                return;
        json_t *reasons = json_object();
        char line[HEALTH_SOURCES_MAX * (HEALTH_REASON_MAX + 24)];
        size_t len = 0;
        line[0] = '\0';
        for (size_t i = 0; i < HEALTH_SOURCES_MAX; i++)
                if (d->health.r[i].source[0]) {
                        json_object_set_new(reasons, d->health.r[i].source,
                                            json_string(d->health.r[i].reason));
                        int n = snprintf(line + len, sizeof(line) - len, "%s%s: %s",
                                         len ? "; " : "", d->health.r[i].source,
                                         d->health.r[i].reason);
                        if (n > 0 && (size_t)n < sizeof(line) - len)
                                len += (size_t)n;
                }
        json_object_set_new(o, "reasons", reasons);
        /* The same in one line, for a person reading the answer. */
        json_object_set_new(o, "reason", json_string(line));
}

int daemon_store_result(struct daemon *d, int r)
{
        /* Only gc.c's check clears it: one small write that fits does not
         * mean the next record will. */
        if (r >= 0 || r == -EEXIST || r == -ENOENT)
                return r; /* ENOENT, EEXIST: an answer about the data, not a failure */
        _cleanup_free_ char *why =
            xasprintf("the state database cannot be written: %s", store_last_error(d->store));
        daemon_health_set(d, "store", why);
        if (r == -EUCLEAN && !daemon_health_get(d, "database")) {
                _cleanup_free_ char *c = xasprintf("the state database is corrupt: %s; writes are "
                                                   "refused until the daemon is restarted on a "
                                                   "restored copy",
                                                   store_last_error(d->store));
                daemon_health_set(d, "database", c);
        }
        return r;
}

static void on_store_sync(evutil_socket_t fd, short what, void *arg)
{
        struct daemon *d = arg;
        if (daemon_store_result(d, store_sync(d->store)) < 0)
                daemon_log(d, "syncing the state database: %s", store_last_error(d->store));
}

void daemon_store_sync_soon(struct daemon *d)
{
        if (!d->store_sync_timer)
                d->store_sync_timer = evtimer_new(d->base, on_store_sync, d);
        struct timeval tv = {.tv_sec = 0, .tv_usec = DAEMON_STORE_SYNC_MS * 1000};
        if (d->store_sync_timer && !evtimer_pending(d->store_sync_timer, NULL))
                evtimer_add(d->store_sync_timer, &tv);
}
