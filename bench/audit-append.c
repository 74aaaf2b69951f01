/* SPDX-License-Identifier: Apache-2.0 */
/* Records per second through audit_append(), one writer, batch sync (the
 * network gate's case): bench-audit-append [N] [DIR] [BATCH]. With BATCH > 1
 * the records go through audit_append_many() BATCH at a time. Prints
 * records/s and µs per record; run it beside the reference build to compare. */
#include <stdio.h>
#include <stdlib.h>
#include <unistd.h>

#include "audit.h"
#include "util.h"

int main(int argc, char **argv)
{
        unsigned long n = argc > 1 ? strtoul(argv[1], NULL, 10) : 100000;
        const char *base = argc > 2 ? argv[2] : "/tmp";
        char dir[256], path[300];
        snprintf(dir, sizeof(dir), "%s/airlock-bench-audit-XXXXXX", base);
        if (!mkdtemp(dir))
                return 1;
        snprintf(path, sizeof(path), "%s/audit.jsonl", dir);

        struct audit_options opt = {.sync = AUDIT_SYNC_BATCH, .rotate_size = AUDIT_ROTATE_NEVER};
        struct al_error err = {0};
        struct audit *a = NULL;
        if (audit_open(path, &opt, &a, &err) < 0) {
                fprintf(stderr, "%s\n", err.msg);
                return 1;
        }
        json_t *f = json_pack("{s:s, s:s, s:i, s:s, s:i}", "decision", "allow", "host",
                              "api.example.com", "port", 443, "method", "GET", "status", 200);
        uint64_t t0 = now_monotonic_us();
#ifdef BENCH_BATCH
        unsigned long batch = argc > 3 ? strtoul(argv[3], NULL, 10) : 1;
        struct audit_record recs[256];
        if (batch < 1 || batch > 256)
                return 2;
        for (unsigned long k = 0; k < batch; k++)
                recs[k] = (struct audit_record){"0123456789abcdef", "net.request", f};
        for (unsigned long i = 0; i < n; i += batch)
                if (audit_append_many(a, recs, batch, &err) < 0) {
                        fprintf(stderr, "%s\n", err.msg);
                        return 1;
                }
#else
        for (unsigned long i = 0; i < n; i++)
                if (audit_append(a, "0123456789abcdef", "net.request", f, &err) < 0) {
                        fprintf(stderr, "%s\n", err.msg);
                        return 1;
                }
#endif
        uint64_t t1 = now_monotonic_us();
        audit_close(a);
        json_decref(f);
        unlink(path);
        rmdir(dir);
        double us = (double)(t1 - t0);
        printf("records %lu  %.0f records/s  %.2f us/record\n", n, n / (us / 1e6), us / n);
        return 0;
}
