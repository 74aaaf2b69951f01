/* SPDX-License-Identifier: Apache-2.0 */
/* Records per second through the audit log's writer, one process, batch sync
 * (the network gate's case): audit_append() one record at a time (the
 * reference) against audit_append_many() BATCH records at a time, 5
 * interleaved rounds, medians and their ratio.
 *
 *   bench-audit-append [N [DIR [BATCH]]]   (defaults 50000, /tmp, 16)
 *
 * Figures, never judgements: exit 1 only when an append fails. */
#include <stdio.h>
#include <stdlib.h>
#include <unistd.h>

#include "audit.h"
#include "util.h"

#define ROUNDS    5
#define BATCH_MAX 256

static int cmp_double(const void *x, const void *y)
{
        double a = *(const double *)x, b = *(const double *)y;
        return a < b ? -1 : a > b;
}

/* records/s for n records, batch at a time (1: audit_append()). */
static double one_round(const char *base, unsigned long n, unsigned long batch, json_t *f)
{
        char dir[256], path[300];
        snprintf(dir, sizeof(dir), "%s/airlock-bench-audit-XXXXXX", base);
        if (!mkdtemp(dir))
                return -1;
        snprintf(path, sizeof(path), "%s/audit.jsonl", dir);

        struct audit_options opt = {.sync = AUDIT_SYNC_BATCH, .rotate_size = AUDIT_ROTATE_NEVER};
        struct al_error err = {0};
        struct audit *a = NULL;
        if (audit_open(path, &opt, &a, &err) < 0) {
                fprintf(stderr, "%s\n", err.msg);
                return -1;
        }
        struct audit_record recs[BATCH_MAX];
        for (unsigned long k = 0; k < batch; k++)
                recs[k] = (struct audit_record){"0123456789abcdef", "net.request", f};
        uint64_t t0 = now_monotonic_us();
        for (unsigned long i = 0; i < n; i += batch) {
                int r = batch == 1 ? audit_append(a, recs[0].sandbox, recs[0].kind, f, &err)
                                   : audit_append_many(a, recs, batch, &err);
                if (r < 0) {
                        fprintf(stderr, "%s\n", err.msg);
                        return -1;
                }
        }
        uint64_t t1 = now_monotonic_us();
        audit_close(a);
        unlink(path);
        rmdir(dir);
        return (double)n / ((double)(t1 - t0 + 1) / 1e6);
}

int main(int argc, char **argv)
{
        unsigned long n = argc > 1 ? strtoul(argv[1], NULL, 10) : 50000;
        const char *base = argc > 2 ? argv[2] : "/tmp";
        unsigned long batch = argc > 3 ? strtoul(argv[3], NULL, 10) : 16;
        if (n == 0 || batch < 2 || batch > BATCH_MAX) {
                fprintf(stderr, "usage: bench-audit-append [N [DIR [BATCH (2-%d)]]]\n", BATCH_MAX);
                return 2;
        }
        json_t *f = json_pack("{s:s, s:s, s:i, s:s, s:i}", "decision", "allow", "host",
                              "api.example.com", "port", 443, "method", "GET", "status", 200);
        double one[ROUNDS], many[ROUNDS];
        for (int i = 0; i < ROUNDS; i++) {
                one[i] = one_round(base, n, 1, f);
                many[i] = one_round(base, n, batch, f);
                if (one[i] < 0 || many[i] < 0)
                        return 1;
        }
        json_decref(f);
        qsort(one, ROUNDS, sizeof(double), cmp_double);
        qsort(many, ROUNDS, sizeof(double), cmp_double);
        double m1 = one[ROUNDS / 2], mb = many[ROUNDS / 2];
        printf("audit: audit_append %.0f records/s (%.2f us each), audit_append_many x%lu %.0f "
               "records/s (%.2f us each), ratio %.2fx; %lu records, median of %d interleaved\n",
               m1, 1e6 / m1, batch, mb, 1e6 / mb, mb / m1, n, ROUNDS);
        return 0;
}
