/* SPDX-License-Identifier: Apache-2.0 */
#pragma once

#include <stdbool.h>
#include <stdint.h>

/* airlockd's clock and its log: one line on stderr per event, with the UTC
 * time in front. Every module of the daemon logs through here. */

struct daemon;

uint64_t daemon_now_ms(void);
void daemon_log(struct daemon *d, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
/* --quiet: no log lines at all. */
void daemon_log_quiet(bool quiet);

/* A warning that may repeat (out of descriptors, libevent's own): the first
 * in each interval is logged, the rest are counted and summed up in one
 * line with the next one logged. */
struct log_limit {
        uint64_t start_ms;
        uint64_t suppressed;
};
void daemon_log_limited(struct daemon *d, struct log_limit *l, uint64_t interval_ms,
                        const char *fmt, ...) __attribute__((format(printf, 4, 5)));
