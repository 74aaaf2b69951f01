/* SPDX-License-Identifier: Apache-2.0 */
#pragma once

#include <stddef.h>
#include <stdint.h>

/* Counters and histograms the daemon keeps, and their Prometheus text form. */

#define METRICS_BUCKETS 15

struct histogram {
        uint64_t counts[METRICS_BUCKETS]; /* per bucket, not cumulative */
        uint64_t count;
        double sum;
};

struct metrics {
        uint64_t creates;         /* sandboxes handed to clients */
        uint64_t create_failures; /* starts that failed */
        uint64_t pool_hits;       /* creates served from the warm pool */
        uint64_t destroys;
        uint64_t execs;
        uint64_t exec_timeouts;
        uint64_t exec_oom_kills;
        uint64_t exec_failures; /* exec_failed: not found, not executable */
        struct histogram exec_start;    /* request to "started" */
        struct histogram exec_duration; /* request to "exit" */
        uint64_t http_requests;
        uint64_t http_errors; /* answers of 400 and above */
        /* The connections' guard (httpguard.c). */
        uint64_t http_refused_heads;       /* heads that broke the framing rules */
        uint64_t http_refused_connections; /* past --max-connections or the per-peer cap */
        uint64_t http_deadline_closes;     /* requests that missed --request-timeout */
        uint64_t http_accept_pauses;       /* accept() failed (out of descriptors) */
        /* Totals of sandboxes that have ended, from their last status; the
         * live ones are added when rendering. */
        uint64_t gate_allowed, gate_denied, gate_bytes_up, gate_bytes_down, oom_kills;
};

/* What the daemon knows right now, for one rendering. */
struct metrics_live {
        uint64_t by_state[6]; /* indexed like sandbox_state_names */
        const char *const *state_names;
        size_t n_states;
        uint64_t gate_allowed, gate_denied, gate_bytes_up, gate_bytes_down, oom_kills;
        uint64_t pool_ready;
        uint64_t max_sandboxes;
};

void histogram_observe(struct histogram *h, double seconds);
extern const double metrics_bucket_bounds[METRICS_BUCKETS];

/* The exposition text (version 0.0.4); caller frees. */
char *metrics_render(const struct metrics *m, const struct metrics_live *live);
