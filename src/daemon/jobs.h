/* SPDX-License-Identifier: Apache-2.0 */
#pragma once

#include <event2/buffer.h>
#include <stdbool.h>
#include <stddef.h>
#include <sys/types.h>

#include "error.h"

/* Host-side work the daemon hands to a child process: a diff, an accept, a
 * clone, a push. Each can take long (a large workspace, a slow remote), and
 * the daemon's one loop must keep serving everyone else meanwhile. The child
 * is the airlock CLI or airlock-git, started with a clean environment, its
 * stdin on /dev/null; its stdout and stderr are collected here. */

struct daemon;
struct job;

struct job_result {
        int exit_code;        /* its exit status, 128+N for signal N */
        struct evbuffer *out; /* stdout, up to out_max bytes */
        bool out_truncated;   /* there was more */
        const char *err;      /* stderr (up to 64 KiB), NUL-terminated */
        bool timed_out;       /* it ran past job_timeout_seconds() and was killed */
        int refused;          /* < 0: the charge refused room for stdout, and it was killed */
};

/* Called once, when the child has exited and both pipes are drained. The
 * result is freed after it returns; `out` may be taken with
 * evbuffer_add_buffer. */
typedef void (*job_done_fn)(const struct job_result *res, void *userdata);

/* Every job runs in a process group of its own and is killed, with the
 * group, after AIRLOCK_JOB_TIMEOUT seconds of the daemon's environment (1
 * to 86400; 900 by default): the callback then gets timed_out. */
unsigned job_timeout_seconds(void);

/* Start argv[0] (an absolute path) with argv. */
int job_start(struct daemon *d, char *const argv[], size_t out_max, job_done_fn done,
              void *userdata, struct al_error *err);

/* Asked for room before each piece of stdout is kept: < 0 refuses it, and
 * the job is killed then, its callback told (job_result.refused). */
typedef int (*job_charge_fn)(void *userdata, size_t n);
/* job_start, with each piece of stdout charged first. */
int job_start_charged(struct daemon *d, char *const argv[], size_t out_max, job_charge_fn charge,
                      job_done_fn done, void *userdata, struct al_error *err);

/* The environment children of the daemon start with: PATH, HOME, and the
 * sanitizer settings of a test build. Caller frees (strv_free). */
char **daemon_child_env(const struct daemon *d);

/* SIGCHLD: collect the exit status of the jobs that ended, and reap every
 * other child of the daemon that ended (a job's status is never lost). */
void jobs_reap(struct daemon *d);

/* Stop the running job started with this userdata: SIGTERM, so that it
 * stops what it started (airlock agent stops its sandbox), then SIGKILL to
 * its process group, and to it too when it has not ended within timeout_ms.
 * The loop blocks meanwhile. Its callback comes later, from the loop, as
 * for any end. 1 when it ended, 0 when it outlived even the SIGKILL's
 * second, -ENOENT when no such job runs. */
int job_stop(struct daemon *d, void *userdata, unsigned timeout_ms);

/* Stopping: kill every job and call its callback with exit code -1. */
void jobs_shutdown(struct daemon *d);
