/* SPDX-License-Identifier: Apache-2.0 */
#pragma once

#include <event2/event.h>
#include <event2/http.h>
#include <jansson.h>
#include <stdbool.h>
#include <stdint.h>
#include <sys/types.h>

#include "error.h"
#include "health.h"
#include "log.h"
#include "metrics.h"
#include "policy.h"
#include "store.h"

/* airlockd: one process, one libevent loop, no threads. Each sandbox is
 * owned by its own supervisor (`airlock supervise`), which the daemon starts
 * and then talks to over the sandbox's control socket; the daemon keeps the
 * records (SQLite), the grants, the warm pool and the HTTP API. */

#define DAEMON_POOL_CLASSES 4
#define AUDIT_BATCH_MS      100

struct pool_spec {
        char class_name[16];
        unsigned size;
};

enum sandbox_state {
        SANDBOX_STARTING = 0,
        SANDBOX_POOLED,
        SANDBOX_RUNNING,
        SANDBOX_STOPPING,
        SANDBOX_DESTROYED,
        SANDBOX_FAILED,
        SANDBOX_STATE_COUNT,
};

extern const char *const sandbox_state_names[SANDBOX_STATE_COUNT];

struct sandbox;
struct sandbox_waiter;
struct status_req;
struct call_ctx;
struct audit;

/* Called once a start or a destroy is over. `error` is 0 or -errno, with a
 * message. After a failed start or any destroy the sandbox is freed when the
 * callback returns. */
typedef void (*sandbox_cb)(struct sandbox *sb, int error, const char *message, void *userdata);

/* The last status a supervisor gave. */
struct sandbox_status {
        bool valid;
        uint64_t at_ms;
        json_t *doc; /* the whole answer, for GET /v1/sandboxes/{id} */
        uint64_t allowed, denied, bytes_up, bytes_down, oom_kills;
        bool busy; /* a process is running */
};

struct sandbox {
        struct daemon *d;
        struct sandbox *next;
        char id[17];
        enum sandbox_state state;
        char *grant;
        char *class_name;
        json_t *metadata;
        char *policy_json;
        struct policy *policy; /* finalized */
        char *workspace;
        bool workspace_owned;
        char *dir;          /* state_dir/sandboxes/ID */
        char *control_path; /* run_dir/ID/control.sock */

        pid_t pid;
        int pidfd;
        struct event *exit_ev;
        bool exited;
        char exit_how[48]; /* "exit code 125", "signal 9"; "" when not known */

        int ready_fd;
        struct event *ready_ev;
        char ready_buf[AL_ERROR_MAX + 32];
        size_t ready_len;
        sandbox_cb start_cb;
        void *start_ud;

        uint64_t created_ms;
        uint64_t expires_ms;
        uint64_t idle_timeout_ms;
        uint64_t last_active_ms;
        uint64_t ended_ms;
        unsigned streams; /* execs and attaches in progress */

        struct sandbox_status status;

        struct ctl_call *destroy_call;
        struct event *destroy_timer;
        char *end_reason;
        bool for_pool;
        bool finalized;
        struct sandbox_waiter *waiters;
        unsigned refs; /* API requests holding the struct across callbacks */
        bool freed_pending;
};

struct daemon {
        struct event_base *base;
        struct evhttp *http;
        struct store *store;
        char *state_dir;
        char *run_dir;
        char *audit_path;
        struct audit *audit; /* the daemon's own writer; supervisors have theirs */
        struct event *audit_timer;
        char audit_fault[AL_ERROR_MAX]; /* why the audit log last failed; "" when it works */
        char *audit_rotate;             /* passed on to supervisors; NULL: the defaults */
        char *airlock_bin;
        char *git_bin;       /* airlock-git, beside airlock */
        char *keep_dir;      /* state_dir/kept: reviewed changes and clones */
        char *secrets_path;  /* NULL: none */
        char *tools_path;    /* tool definitions (airlockd --tools) for every sandbox; NULL: none */
        char *hardware_path; /* airlockd --hardware: every sandbox's device; NULL: none */
        char **git_hosts;    /* NULL-terminated; NULL: network repositories refused */
        bool git_helper;
        struct job *jobs;    /* children doing host-side work (jobs.h) */
        char *socket_path;
        const char *listen_addr; /* --listen HOST:PORT; NULL: no TCP */
        char *home;
        uint64_t max_sandboxes;
        uint64_t ready_timeout_ms;
        uint64_t gc_interval_ms;
        struct pool_spec pools[DAEMON_POOL_CLASSES];
        size_t n_pools;

        struct sandbox *sandboxes; /* live: starting, pooled, running, stopping */
        struct status_req *status_reqs; /* status calls in flight */
        struct call_ctx *calls;         /* exec, attach, stdin, signal calls in flight */
        struct metrics metrics;
        struct event *gc_timer;
        struct event *pool_timer;
        struct event *store_sync_timer; /* health.c: unsynced writes synced */
        struct event *sig_events[4];
        bool shutting_down;
        struct health health; /* health.h: why /healthz says not ok */
        uint64_t store_checked_ms; /* the last store check (gc.c) */
        uint64_t retain_ms;
        uint64_t pruned_ms; /* the last pruning (gc.c) */
        /* A pooled sandbox ended: the pool refills (airlockd.c sets
         * pool_refill; sandbox.c only says so, the pool is above it). */
        void (*pool_lost)(struct daemon *d);
};
