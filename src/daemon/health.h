/* SPDX-License-Identifier: Apache-2.0 */
#pragma once

#include <jansson.h>
#include <stdbool.h>

/* What /healthz says: the daemon is healthy unless some part of it has a
 * reason not to be. Each part sets or clears its own reason under a short
 * name ("store", "database", "audit"); the answer lists every reason set. */

#define HEALTH_SOURCES_MAX 8
#define HEALTH_REASON_MAX  512

struct health_reason {
        char source[16]; /* "" when the slot is free */
        char reason[HEALTH_REASON_MAX];
};

struct health {
        struct health_reason r[HEALTH_SOURCES_MAX];
};

struct daemon;

/* reason NULL (or "") clears the source's reason. */
void daemon_health_set(struct daemon *d, const char *source, const char *reason);
/* The reason a source has set, or NULL. */
const char *daemon_health_get(const struct daemon *d, const char *source);
bool daemon_health_ok(const struct daemon *d);
/* The result of a store write: sets the "store" reason on a failure (with
 * the store's message; "database" too for a corrupt file). Returns r. The
 * daemon's periodic store check (gc.c) clears it. */
int daemon_store_result(struct daemon *d, int r);
/* What the store wrote unsynced (store_process_start,
 * store_sandbox_put_unsynced) is synced within DAEMON_STORE_SYNC_MS. */
#define DAEMON_STORE_SYNC_MS 100u
void daemon_store_sync_soon(struct daemon *d);
/* Adds "ok" and, when not ok, "reasons": {source: reason} to `o`. */
void daemon_health_fill(const struct daemon *d, json_t *o);
