/* SPDX-License-Identifier: Apache-2.0 */
#pragma once

#include <stdbool.h>
#include <stdint.h>

#include "error.h"

/* The hardware's emergency stop, client side: `airlock estop` and
 * airlockd's POST /v1/sandboxes/{id}/estop. It needs no daemon: the
 * sandbox's supervisor is asked on its control socket
 * (RUN_DIR/ID/control.sock) to stop every actuator now (hwgate_estop).
 * Returns 0 (res filled), or
 * -ENOENT (no such sandbox), -ENODEV (its policy has no hardware),
 * -ETIMEDOUT, or another -errno, with err set. */
struct sv_estop_result {
        bool driver_told;   /* the driver got the stop within 50 ms */
        double received_at; /* when the supervisor took it, seconds since the epoch */
};
int sv_estop(const char *run_dir, const char *id, const char *by, uint64_t timeout_ms,
             struct sv_estop_result *res, struct al_error *err);
