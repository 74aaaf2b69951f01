/* SPDX-License-Identifier: Apache-2.0 */
/* The daemon's own audit records (who asked for what), next to the
 * supervisors' events in the same log, and the log's health. */
#include <errno.h>
#include <event2/event.h>
#include <stdio.h>
#include <string.h>

#include "audit.h"
#include "daemon.h"
#include "record.h"
#include "util.h"

/* The audit log failed: say so in /healthz, and in the daemon's log once
 * per cause rather than once per request. */
void record_audit_failed(struct daemon *d, const char *msg)
{
        if (!STREQ(d->audit_fault, msg))
                daemon_log(d, "audit: %s", msg);
        snprintf(d->audit_fault, sizeof(d->audit_fault), "%s", msg);
}

/* The batch's sync, handed to the log's helper process (airlockd.c): the
 * loop does not wait for the disk. A sync that failed is returned by the
 * next call, here or in audit_flush(). */
static void on_audit_flush(evutil_socket_t fd, short what, void *arg)
{
        struct daemon *d = arg;
        int r = d->audit ? audit_flush_soon(d->audit) : 0;
        if (r < 0) {
                _cleanup_free_ char *m = xasprintf("syncing the audit log: %s", strerror(-r));
                record_audit_failed(d, m);
        }
        /* The helper still busy with the syncs asked before: asked again. */
        if (d->audit && audit_flush_deadline(d->audit)) {
                struct timeval tv = {.tv_sec = 0, .tv_usec = AUDIT_BATCH_MS * 1000};
                evtimer_add(d->audit_timer, &tv);
        }
}

/* Who asked for what, next to the supervisors' own events. Synced in
 * batches (AUDIT_BATCH_MS): an fdatasync per request would double the time
 * of an exec (an exec is made durable by its supervisor's process.started,
 * written after this line to the same file). Returns -errno, with
 * d->audit_fault saying why, when the line could not be written: the
 * action must then be refused. */
int record_audit(struct daemon *d, const char *sandbox, const char *kind, json_t *fields)
{
        struct al_error e = {0};
        int r = 0;
        if (d->audit && (r = audit_append(d->audit, sandbox, kind, fields, &e)) < 0)
                record_audit_failed(d, e.msg);
        json_decref(fields);
        if (!d->audit || !audit_flush_deadline(d->audit))
                return r;
        if (!d->audit_timer)
                d->audit_timer = evtimer_new(d->base, on_audit_flush, d);
        if (d->audit_timer && !evtimer_pending(d->audit_timer, NULL)) {
                struct timeval tv = {.tv_sec = 0, .tv_usec = AUDIT_BATCH_MS * 1000};
                evtimer_add(d->audit_timer, &tv);
        }
        return r;
}

/* As record_audit(), and durable before returning. */
int record_audit_durably(struct daemon *d, const char *sandbox, const char *kind, json_t *fields)
{
        int r = record_audit(d, sandbox, kind, fields);
        if (r < 0 || !d->audit)
                return r;
        r = audit_flush(d->audit);
        if (r < 0) {
                _cleanup_free_ char *m = xasprintf("syncing the audit log: %s", strerror(-r));
                record_audit_failed(d, m);
        }
        return r;
}

int record_audit_durably_with(struct daemon *d, const char *sandbox, const char *kind,
                              json_t *fields, int (*also)(void *), void *arg, int *ret_also)
{
        *ret_also = 0;
        int r = record_audit(d, sandbox, kind, fields);
        if (r < 0)
                return r;
        if (!d->audit) {
                *ret_also = also(arg);
                return 0;
        }
        /* The log's helper process (airlockd.c) syncs the line while
         * `also` runs; audit_flush() then waits for its answer (and syncs
         * here if it could not take the request). No thread: the daemon
         * forks. */
        int early = audit_flush_soon(d->audit);
        *ret_also = also(arg);
        r = audit_flush(d->audit);
        if (early < 0)
                r = early;
        if (r < 0) {
                _cleanup_free_ char *m = xasprintf("syncing the audit log: %s", strerror(-r));
                record_audit_failed(d, m);
        }
        return r;
}

bool record_audit_room(struct daemon *d)
{
        struct al_error e = {0};
        if (!d->audit)
                return true;
        if (audit_reserve(d->audit, &e) < 0) {
                record_audit_failed(d, e.msg);
                return false;
        }
        return true;
}

/* /healthz's view of the audit log: room for the records to come. */
bool record_audit_healthy(struct daemon *d)
{
        struct al_error e = {0};
        if (!d->audit)
                return true;
        if (audit_reserve(d->audit, &e) < 0) {
                record_audit_failed(d, e.msg);
                return false;
        }
        int r = audit_flush(d->audit);
        if (r < 0) {
                _cleanup_free_ char *m = xasprintf("syncing the audit log: %s", strerror(-r));
                record_audit_failed(d, m);
                return false;
        }
        d->audit_fault[0] = '\0';
        return true;
}
