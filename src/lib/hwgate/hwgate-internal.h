/* SPDX-License-Identifier: Apache-2.0 */
#pragma once

/* Shared by the hardware gate's files: the pure rules (limits.c), the
 * driver protocol (proto.c), the driver connection (driver.c) and the gate
 * (hwgate.c). Tests include it; nothing else outside src/lib/hwgate does. */
#include <jansson.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

#include "error.h"

#define HWGATE_LINE_MAX        (64u << 10)  /* one line from the driver */
#ifndef HWGATE_OUT_MAX /* a test builds the gate with a smaller queue */
#define HWGATE_OUT_MAX (256u << 10) /* bytes waiting for the driver */
#endif
#define HWGATE_TICK_MS         20           /* the ramp's and the deadman's period */
#define HWGATE_REPLY_MS        2000         /* a driver's answer to read or list */
#define HWGATE_PENDING_MAX     64           /* reads and lists waiting for the driver */
#define HWGATE_ACTUATORS_MAX   64
#define HWGATE_REFUSAL_SINGLES 8 /* rate refusals recorded one by one per second */

/* limits.c: the rules, pure and unit-tested. */

/* A value from the sandbox: a finite JSON number within ±1e6 (the largest
 * maxSpeed there is). -EINVAL with *why (static) otherwise: NaN and the
 * infinities cannot be JSON, but 1e308, strings, null and objects can. */
int hwgate_value(const json_t *v, double *ret, const char **why);
/* v clamped to ±max_speed; *clamped says whether it was. */
double hwgate_clamp(double v, double max_speed, bool *clamped);
/* One ramp step: from `current` toward `target`, by at most max_accel*dt
 * (max_accel 0: straight to target). */
double hwgate_ramp(double current, double target, double max_accel, double dt_s);

struct hwgate_bucket {
        double tokens, cap, per_ms;
        uint64_t last_ms;
};
void hwgate_bucket_init(struct hwgate_bucket *b, double per_s, uint64_t now_ms);
bool hwgate_bucket_take(struct hwgate_bucket *b, uint64_t now_ms);

/* An actuator's motion clock: moving_since is when its value last left 0
 * (0: at rest). Whether it has moved past timeout_ms without a rest. */
bool hwgate_deadman_due(uint64_t moving_since_ms, uint64_t now_ms, uint64_t timeout_ms);

/* proto.c: the driver protocol, one JSON object per line each way.
 *   to the driver:   {"id": N, "op": "set"|"read"|"stop"|"list", "name": s, "value": x}
 *   from the driver: {"id": N, "ok": true, "value": any}
 *                    {"id": N, "ok": false, "error": s}
 * set and stop are not answered (the gate does not wait on motion); read
 * and list are. */
char *hwgate_proto_request(uint64_t id, const char *op, const char *name, const double *value,
                           size_t *ret_len);

struct hwgate_reply {
        json_t *doc; /* owns value */
        uint64_t id;
        bool ok;
        json_t *value;   /* borrowed; NULL when !ok */
        char error[256]; /* when !ok: printable, quote-free */
};
/* One line from the driver (hostile: a driver is a device's code). 0, or
 * -EINVAL with *why (static). */
int hwgate_proto_parse_reply(const char *line, size_t len, struct hwgate_reply *ret,
                             const char **why);
void hwgate_reply_clear(struct hwgate_reply *r);
/* A driver's list answer checked and annotated with the policy:
 * [{"name", "kind": "actuator"|"sensor", "allowed", "maxSpeed"?, ...}];
 * NULL with *why when it is not a list of devices. */
struct policy_hardware;
json_t *hwgate_annotate_list(const struct policy_hardware *h, const json_t *devices,
                             const char **why);

/* driver.c: the connection. */
struct hwgate_driver {
        int fd;    /* -1: gone */
        pid_t pid; /* a started driver, else -1 */
        int pidfd;
        char *out; /* bytes waiting for the driver */
        size_t out_len, out_cap;
        size_t out_line_end; /* end of the line being written: never cut */
};
struct policy;
/* The driver's command (its executable and every argument naming an
 * existing file) must lie outside what the agent can write
 * on the host: it runs with the caller's rights. */
int hwgate_driver_check_reach(const struct policy_hardware *h, const struct policy *p,
                              struct al_error *err);
int hwgate_driver_open(struct hwgate_driver *d, const struct policy_hardware *h,
                       struct al_error *err);
/* Queue a line (dropped, -ENOBUFS, past HWGATE_OUT_MAX) and write what can
 * be written now. */
int hwgate_driver_send(struct hwgate_driver *d, const char *line, size_t len);
/* Write what waits; -errno when the driver is gone. */
int hwgate_driver_flush(struct hwgate_driver *d);
/* Drop every queued line not yet begun (a stop goes first). */
void hwgate_driver_drop_queued(struct hwgate_driver *d);
/* Blocking: write what waits within timeout_ms. */
int hwgate_driver_drain(struct hwgate_driver *d, int timeout_ms);
/* Close; a started driver gets wait_ms to exit, then SIGKILL; reaped. */
void hwgate_driver_close(struct hwgate_driver *d, int wait_ms);
