/* SPDX-License-Identifier: Apache-2.0 */
#pragma once

#include <stdbool.h>
#include <stdint.h>

/* Per-step timing of a spawn or an exec, for measuring where the time goes.
 *
 * Off unless the process started with AIRLOCK_TRACE set: "1" writes to the
 * process's standard error, any other value names a file the lines are
 * appended to. Each mark is one line, written with one write(2) and nothing
 * that allocates or locks, so it is safe between fork and exec:
 *
 *   airlock-trace pid=123 at=1534us step=cgroup.attach +212us mono=88123456us
 *
 * `at` counts from the first mark of the whole process tree (children
 * inherit the origin across fork and clone), `+` from this process's
 * previous mark, `mono` is CLOCK_MONOTONIC, the same in every process
 * (for spans that cross processes). The trace descriptor is close-on-exec: nothing of it
 * reaches a sandbox. */

/* Whether tracing is on (reads AIRLOCK_TRACE on the first call; call it
 * once before forking so children inherit the decision and the origin). */
bool al_trace_on(void);
/* Record that `step` has just finished. */
void al_trace_mark(const char *step);
/* The trace descriptor, or -1 when tracing is off: code that closes every
 * descriptor but a few (a sandbox's pid 1, a command before execve) keeps
 * it, so that later marks never land in a descriptor that reused its
 * number. It is close-on-exec all the same. */
int al_trace_fd(void);
/* Monotonic nanoseconds, for callers that time a span themselves. */
uint64_t al_trace_now_ns(void);
