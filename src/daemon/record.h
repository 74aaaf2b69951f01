/* SPDX-License-Identifier: Apache-2.0 */
#pragma once

#include <jansson.h>
#include <stdbool.h>

#include "daemon.h"

/* The daemon's own audit records (record.c): who asked for what, next to
 * the supervisors' events in the same log. */

/* Synced in batches (AUDIT_BATCH_MS). `fields` is stolen. Returns -errno,
 * with d->audit_fault saying why, when the line could not be written: the
 * action must then be refused. */
int record_audit(struct daemon *d, const char *sandbox, const char *kind, json_t *fields);
/* As record_audit(), and durable before returning. */
int record_audit_durably(struct daemon *d, const char *sandbox, const char *kind, json_t *fields);
/* As record_audit_durably(), with also(arg) run while the log's helper
 * process syncs the line: when `also` syncs another file (a record in the
 * state database), both reach the disk in about the time of one. The
 * line is written before `also` runs, which must not touch the audit log;
 * `also` is not run when the line cannot be written. Returns the audit's
 * result; *ret_also is also's (0 when not run). */
int record_audit_durably_with(struct daemon *d, const char *sandbox, const char *kind,
                              json_t *fields, int (*also)(void *), void *arg, int *ret_also);
/* Room for the next line (the log's reserve, no sync): false, with
 * d->audit_fault saying why, when there is none; the action must then be
 * refused. For an action whose line names its outcome, written after it. */
bool record_audit_room(struct daemon *d);
/* The audit log failed with msg: /healthz says so, the log once per cause. */
void record_audit_failed(struct daemon *d, const char *msg);
/* /healthz's view of the audit log: room for the records to come. */
bool record_audit_healthy(struct daemon *d);
