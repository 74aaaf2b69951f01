/* SPDX-License-Identifier: Apache-2.0 */
#pragma once

#include <jansson.h>
#include <stdbool.h>
#include <stdint.h>
#include <sys/types.h>
#include "daemon.h"
#include "error.h"
#include "policy.h"
#include "store.h"

/* The sandboxes (sandbox.c): each started as its own supervisor, `airlock
 * supervise`, which the daemon then talks to over its control socket. */

struct sandbox_params {
        const char *grant; /* NULL: for the pool */
        json_t *metadata;  /* borrowed; NULL: {} */
        uint64_t ttl_ms;
        uint64_t idle_timeout_ms;
        const char *workspace; /* host path the grant may name; NULL: make one */
        const char *id;        /* chosen beforehand (a clone waits under it); NULL: pick one */
        bool pooled;
};

/* Start a sandbox for a finalized policy (taken over; its workspace is set
 * here). cb runs once the supervisor said ready, failed, or timed out. */
int sandbox_start(struct daemon *d, struct policy *p, const struct sandbox_params *params,
                  sandbox_cb cb, void *userdata, struct sandbox **ret, struct al_error *err);
/* Ask the supervisor to destroy the sandbox; cb (may be NULL) when it is
 * gone. Several callers may wait on one destroy. */
void sandbox_destroy(struct sandbox *sb, const char *reason, sandbox_cb cb, void *userdata);
struct sandbox *sandbox_find(struct daemon *d, const char *id);
void sandbox_set_reason(struct sandbox *sb, const char *reason);
/* Write the record as it stands. */
/* The record of a live sandbox, pointing into sb; meta is its metadata as
 * JSON text (the caller's). */
struct store_sandbox;
void sandbox_as_record(const struct sandbox *sb, char *meta, struct store_sandbox *r);
int sandbox_save(struct sandbox *sb);
void sandbox_touch(struct sandbox *sb);
/* Hold a live sandbox across asynchronous work; the last unref frees one
 * that ended in between. */
void sandbox_ref(struct sandbox *sb);
void sandbox_unref(struct sandbox *sb);
/* Ask for a fresh status; cb(sb, 0 or -errno, NULL, ud). */
int sandbox_refresh_status(struct sandbox *sb, sandbox_cb cb, void *userdata);
/* Re-attach the sandboxes the records say are alive (start-up). */
int sandbox_reattach_all(struct daemon *d);
/* Remove what a dead supervisor may have left: cgroups named airlock-ID, the
 * run directory, the daemon-made workspace. */
void sandbox_cleanup_leftovers(struct daemon *d, const char *id, pid_t pid, const char *workspace,
                               bool workspace_owned);
size_t sandbox_count(struct daemon *d, const char *grant, bool include_pooled);
/* Stopping: end what waits (callbacks get -ECANCELED) and free every
 * sandbox; the sandboxes themselves keep running for the next daemon. */
void sandbox_shutdown_all(struct daemon *d);
