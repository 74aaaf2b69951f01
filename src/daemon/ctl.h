/* SPDX-License-Identifier: Apache-2.0 */
#pragma once

#include <event2/event.h>
#include <jansson.h>
#include <stdbool.h>
#include <stdint.h>

#include "control-proto.h"

/* One request to a sandbox's supervisor over its control socket
 * (docs/control.md): connect, write one JSON line, read JSON lines until the
 * supervisor closes. Everything is asynchronous on the daemon's loop. */

#define CTL_LINE_MAX CONTROL_LINE_MAX /* longest line read from a supervisor */

struct ctl_call;

struct ctl_call_ops {
        /* One line from the supervisor (borrowed). */
        void (*line)(struct ctl_call *c, json_t *msg, void *userdata);
        /* The end: 0 after a clean end of stream, -errno otherwise (-ETIMEDOUT
         * past the deadline, -EPROTO for a line that is not JSON or too long).
         * The call is freed after this returns. */
        void (*done)(struct ctl_call *c, int error, void *userdata);
};

/* Start a call; `req` is borrowed. timeout_ms bounds each wait for the
 * supervisor to read or answer (0: none), not the whole call.
 * A failure to connect is returned here, without callbacks. */
int ctl_call_start(struct event_base *base, const char *socket_path, json_t *req,
                   uint64_t timeout_ms, const struct ctl_call_ops *ops, void *userdata,
                   struct ctl_call **ret);

/* Stop reading (to let a slow consumer catch up) or start again. */
void ctl_call_pause(struct ctl_call *c, bool pause);

/* End the call now, without calling `done`. Safe inside a callback. */
void ctl_call_cancel(struct ctl_call *c);
