/* SPDX-License-Identifier: Apache-2.0 */
#include <inttypes.h>
#include <stdarg.h>
#include <stdio.h>
#include <time.h>

#include "log.h"
#include "util.h"

static bool quiet_logs;

void daemon_log_quiet(bool quiet)
{
        quiet_logs = quiet;
}

uint64_t daemon_now_ms(void)
{
        return now_realtime_us() / 1000;
}

static void log_v(const char *fmt, va_list ap) __attribute__((format(printf, 1, 0)));
static void log_v(const char *fmt, va_list ap)
{
        if (quiet_logs)
                return;
        char ts[64];
        time_t now = time(NULL);
        struct tm tm;
        gmtime_r(&now, &tm);
        strftime(ts, sizeof(ts), "%Y-%m-%dT%H:%M:%SZ", &tm);
        fprintf(stderr, "%s airlockd: ", ts);
        vfprintf(stderr, fmt, ap);
        fputc('\n', stderr);
}

void daemon_log(struct daemon *d, const char *fmt, ...)
{
        va_list ap;
        va_start(ap, fmt);
        log_v(fmt, ap);
        va_end(ap);
}

void daemon_log_limited(struct daemon *d, struct log_limit *l, uint64_t interval_ms,
                        const char *fmt, ...)
{
        uint64_t now = now_monotonic_us() / 1000;
        if (l->start_ms && now - l->start_ms < interval_ms) {
                l->suppressed++;
                return;
        }
        if (l->suppressed)
                daemon_log(d, "(%" PRIu64 " more like the next in the last %" PRIu64 " s)",
                           l->suppressed, (now - l->start_ms) / 1000);
        l->start_ms = now ? now : 1;
        l->suppressed = 0;
        va_list ap;
        va_start(ap, fmt);
        log_v(fmt, ap);
        va_end(ap);
}
