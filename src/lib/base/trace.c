/* SPDX-License-Identifier: Apache-2.0 */
#include "trace.h"

#include <fcntl.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

enum { TRACE_UNKNOWN, TRACE_OFF, TRACE_ON };

static int trace_state = TRACE_UNKNOWN;
static int trace_fd = -1;
static uint64_t trace_origin_ns;
static uint64_t trace_last_ns;

uint64_t al_trace_now_ns(void)
{
        struct timespec ts;

        clock_gettime(CLOCK_MONOTONIC, &ts);
        return (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec;
}

bool al_trace_on(void)
{
        if (trace_state != TRACE_UNKNOWN)
                return trace_state == TRACE_ON;
        trace_state = TRACE_OFF;
        const char *v = getenv("AIRLOCK_TRACE");
        if (!v || !*v || strcmp(v, "0") == 0)
                return false;
        if (strcmp(v, "1") == 0)
                trace_fd = fcntl(STDERR_FILENO, F_DUPFD_CLOEXEC, 3);
        else
                trace_fd = open(v, O_WRONLY | O_APPEND | O_CREAT | O_CLOEXEC | O_NOCTTY, 0600);
        if (trace_fd >= 0 && trace_fd < 3) {
                /* Started with stdio closed: never one of 0-2, which a
                 * sandbox's command gets as its own. */
                int fd = fcntl(trace_fd, F_DUPFD_CLOEXEC, 3);
                close(trace_fd);
                trace_fd = fd;
        }
        if (trace_fd < 0)
                return false;
        trace_origin_ns = trace_last_ns = al_trace_now_ns();
        trace_state = TRACE_ON;
        return true;
}

int al_trace_fd(void)
{
        return trace_state == TRACE_ON ? trace_fd : -1;
}

/* Append the decimal digits of v at *p (bounded by end). */
static char *put_u64(char *p, char *end, uint64_t v)
{
        char tmp[24];
        size_t n = 0;

        do {
                tmp[n++] = (char)('0' + v % 10);
                v /= 10;
        } while (v && n < sizeof tmp);
        while (n && p < end)
                *p++ = tmp[--n];
        return p;
}

static char *put_str(char *p, char *end, const char *s)
{
        while (*s && p < end)
                *p++ = *s++;
        return p;
}

void al_trace_mark(const char *step)
{
        if (!al_trace_on())
                return;
        uint64_t now = al_trace_now_ns();
        pid_t pid = getpid();
        char line[256];
        char *p = line, *end = line + sizeof line - 1;
        p = put_str(p, end, "airlock-trace pid=");
        p = put_u64(p, end, (uint64_t)pid);
        p = put_str(p, end, " at=");
        p = put_u64(p, end, (now - trace_origin_ns) / 1000);
        p = put_str(p, end, "us step=");
        p = put_str(p, end, step ? step : "?");
        p = put_str(p, end, " +");
        p = put_u64(p, end, (now - trace_last_ns) / 1000);
        /* The monotonic clock itself, shared by every process: spans that
         * cross processes (daemon -> supervisor -> pid 1) are read from it. */
        p = put_str(p, end, "us mono=");
        p = put_u64(p, end, now / 1000);
        p = put_str(p, end, "us\n");
        if (p == end)
                *(p - 1) = '\n';
        trace_last_ns = now;
        ssize_t r = write(trace_fd, line, (size_t)(p - line));
        (void)r;
}
