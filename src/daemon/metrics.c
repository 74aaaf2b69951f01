/* SPDX-License-Identifier: Apache-2.0 */
#include <inttypes.h>
#include <stdio.h>

#include "metrics.h"
#include "util.h"

const double metrics_bucket_bounds[METRICS_BUCKETS] = {
        0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60,
};

void histogram_observe(struct histogram *h, double seconds)
{
        if (seconds < 0)
                seconds = 0;
        h->count++;
        h->sum += seconds;
        for (size_t i = 0; i < METRICS_BUCKETS; i++)
                if (seconds <= metrics_bucket_bounds[i]) {
                        h->counts[i]++;
                        return;
                }
}

static void counter(FILE *f, const char *name, const char *help, uint64_t v)
{
        fprintf(f, "# HELP %s %s\n# TYPE %s counter\n%s %" PRIu64 "\n", name, help, name, name, v);
}

static void gauge(FILE *f, const char *name, const char *help, uint64_t v)
{
        fprintf(f, "# HELP %s %s\n# TYPE %s gauge\n%s %" PRIu64 "\n", name, help, name, name, v);
}

static void histogram(FILE *f, const char *name, const char *help, const struct histogram *h)
{
        fprintf(f, "# HELP %s %s\n# TYPE %s histogram\n", name, help, name);
        uint64_t cum = 0;
        for (size_t i = 0; i < METRICS_BUCKETS; i++) {
                cum += h->counts[i];
                fprintf(f, "%s_bucket{le=\"%g\"} %" PRIu64 "\n", name, metrics_bucket_bounds[i], cum);
        }
        fprintf(f, "%s_bucket{le=\"+Inf\"} %" PRIu64 "\n", name, h->count);
        fprintf(f, "%s_sum %.6f\n%s_count %" PRIu64 "\n", name, h->sum, name, h->count);
}

char *metrics_render(const struct metrics *m, const struct metrics_live *live)
{
        char *text = NULL;
        size_t len = 0;
        FILE *f = open_memstream(&text, &len);
        if (!f)
                abort();

        fprintf(f, "# HELP airlock_sandboxes Sandboxes by state.\n# TYPE airlock_sandboxes gauge\n");
        for (size_t i = 0; i < live->n_states; i++)
                fprintf(f, "airlock_sandboxes{state=\"%s\"} %" PRIu64 "\n", live->state_names[i],
                        live->by_state[i]);
        gauge(f, "airlock_sandboxes_max", "The daemon's maximum of live sandboxes (0: none).",
              live->max_sandboxes);
        gauge(f, "airlock_pool_ready", "Warm sandboxes waiting in the pool.", live->pool_ready);
        counter(f, "airlock_sandbox_creates_total", "Sandboxes created through the API.", m->creates);
        counter(f, "airlock_sandbox_create_failures_total", "Sandbox starts that failed.",
                m->create_failures);
        counter(f, "airlock_pool_hits_total", "Creates served from the warm pool.", m->pool_hits);
        counter(f, "airlock_sandbox_destroys_total", "Sandboxes that ended.", m->destroys);
        counter(f, "airlock_exec_total", "Commands started through the API.", m->execs);
        counter(f, "airlock_exec_timeouts_total", "Commands killed at their timeout.",
                m->exec_timeouts);
        counter(f, "airlock_exec_failures_total", "Commands that could not be executed.",
                m->exec_failures);
        histogram(f, "airlock_exec_start_seconds", "From an exec request to the command running.",
                  &m->exec_start);
        histogram(f, "airlock_exec_duration_seconds",
                  "From an exec request to the command's exit (foreground).", &m->exec_duration);
        fprintf(f, "# HELP airlock_gate_decisions_total Network gate decisions by result.\n"
                   "# TYPE airlock_gate_decisions_total counter\n"
                   "airlock_gate_decisions_total{result=\"allowed\"} %" PRIu64 "\n"
                   "airlock_gate_decisions_total{result=\"denied\"} %" PRIu64 "\n",
                m->gate_allowed + live->gate_allowed, m->gate_denied + live->gate_denied);
        fprintf(f, "# HELP airlock_gate_bytes_total Bytes through the network gate.\n"
                   "# TYPE airlock_gate_bytes_total counter\n"
                   "airlock_gate_bytes_total{direction=\"up\"} %" PRIu64 "\n"
                   "airlock_gate_bytes_total{direction=\"down\"} %" PRIu64 "\n",
                m->gate_bytes_up + live->gate_bytes_up, m->gate_bytes_down + live->gate_bytes_down);
        counter(f, "airlock_oom_kills_total", "Processes killed for memory in sandboxes.",
                m->oom_kills + live->oom_kills > m->exec_oom_kills
                        ? m->oom_kills + live->oom_kills
                        : m->exec_oom_kills);
        counter(f, "airlock_http_requests_total", "API requests answered.", m->http_requests);
        counter(f, "airlock_http_errors_total", "API requests answered with a status of 400 or above.",
                m->http_errors);
        counter(f, "airlock_http_refused_heads_total",
                "Request heads refused for ambiguous framing or bytes not allowed.",
                m->http_refused_heads);
        counter(f, "airlock_http_refused_connections_total",
                "Connections refused past the total or per-client maximum.",
                m->http_refused_connections);
        counter(f, "airlock_http_deadline_closes_total",
                "Connections closed for a request that missed its deadline.",
                m->http_deadline_closes);
        counter(f, "airlock_http_accept_pauses_total",
                "Times accepting stopped for a while after accept() failed.",
                m->http_accept_pauses);
        if (fclose(f) != 0)
                abort();
        return text;
}
