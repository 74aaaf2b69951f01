/* SPDX-License-Identifier: Apache-2.0 */
/* The hardware gate's rules, pure: what a value may be, the speed clamp,
 * the acceleration ramp, the action rate and the deadman. */
#include <errno.h>
#include <math.h>

#include "hardware.h"
#include "hwgate-internal.h"

int hwgate_value(const json_t *v, double *ret, const char **why)
{
        if (!v) {
                *why = "\"value\" is missing: give a number";
                return -EINVAL;
        }
        if (!json_is_number(v)) {
                *why = "\"value\" must be a number";
                return -EINVAL;
        }
        double x = json_number_value(v);
        if (!isfinite(x)) {
                *why = "\"value\" must be a finite number";
                return -EINVAL;
        }
        if (fabs(x) > POLICY_HW_SPEED_MAX) {
                *why = "\"value\" is out of range (at most 1e6 either way)";
                return -EINVAL;
        }
        *ret = x == 0 ? 0.0 : x; /* no -0 */
        return 0;
}

double hwgate_clamp(double v, double max_speed, bool *clamped)
{
        *clamped = false;
        if (v > max_speed) {
                *clamped = true;
                return max_speed;
        }
        if (v < -max_speed) {
                *clamped = true;
                return -max_speed;
        }
        return v;
}

double hwgate_ramp(double current, double target, double max_accel, double dt_s)
{
        if (!(max_accel > 0))
                return target;
        if (!(dt_s > 0))
                return current;
        double step = max_accel * dt_s;
        if (target > current + step)
                return current + step;
        if (target < current - step)
                return current - step;
        return target;
}

void hwgate_bucket_init(struct hwgate_bucket *b, double per_s, uint64_t now_ms)
{
        b->cap = per_s < 1.0 ? 1.0 : per_s; /* a burst of one second's worth */
        b->tokens = b->cap;
        b->per_ms = per_s / 1000.0;
        b->last_ms = now_ms;
}

bool hwgate_bucket_take(struct hwgate_bucket *b, uint64_t now_ms)
{
        if (now_ms > b->last_ms) {
                b->tokens += (double)(now_ms - b->last_ms) * b->per_ms;
                if (b->tokens > b->cap)
                        b->tokens = b->cap;
                b->last_ms = now_ms;
        }
        if (b->tokens < 1.0)
                return false;
        b->tokens -= 1.0;
        return true;
}

bool hwgate_deadman_due(uint64_t moving_since_ms, uint64_t now_ms, uint64_t timeout_ms)
{
        return moving_since_ms != 0 && now_ms >= moving_since_ms &&
               now_ms - moving_since_ms >= timeout_ms;
}
