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

struct daemon_options {
        const char *socket_path; /* NULL: the default for the uid */
        const char *listen;      /* "127.0.0.1:7070"; NULL: no TCP */
        const char *state_dir;
        const char *run_dir;
        const char *audit_path;
        const char *audit_rotate; /* SIZE[:KEEP] (audit_parse_rotate); NULL: the defaults */
        const char *airlock_bin;
        const char *secrets_path; /* GIT_TOKEN for clones and pushes; route secrets */
        char **git_hosts;         /* the hosts repositories may be cloned from */
        bool git_helper;          /* ask the git credential helper */
        uint64_t max_sandboxes; /* 0: no daemon-wide maximum */
        uint64_t ready_timeout_ms;
        uint64_t gc_interval_ms;
        uint64_t retain_ms; /* ended records and reviewed changes are kept this long */
        struct pool_spec pools[DAEMON_POOL_CLASSES];
        size_t n_pools;
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
        char **git_hosts;    /* NULL-terminated; NULL: network repositories refused */
        bool git_helper;
        struct job *jobs;    /* children doing host-side work (jobs.h) */
        char *socket_path;
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
        struct event *sig_events[4];
        bool shutting_down;
        struct health health; /* health.h: why /healthz says not ok */
        uint64_t store_checked_ms; /* the last store check (gc.c) */
        uint64_t retain_ms;
        uint64_t pruned_ms; /* the last pruning (gc.c) */
};

/* daemon lifecycle (airlockd.c) */
uint64_t daemon_now_ms(void);
void daemon_log(struct daemon *d, const char *fmt, ...) __attribute__((format(printf, 2, 3)));

/* sandbox.c */
struct sandbox_params {
        const char *grant; /* NULL: for the pool */
        json_t *metadata;  /* borrowed; NULL: {} */
        uint64_t ttl_ms;
        uint64_t idle_timeout_ms;
        const char *workspace; /* host path the grant may name; NULL: make one */
        const char *id;        /* chosen beforehand (a clone waits under it); NULL: pick one */
        bool pooled;
};

/* Start a sandbox for a finalized policy (taken over; its workspace is set
 * here). cb runs once the supervisor said ready, failed, or timed out. */
int sandbox_start(struct daemon *d, struct policy *p, const struct sandbox_params *params,
                  sandbox_cb cb, void *userdata, struct sandbox **ret, struct al_error *err);
/* Ask the supervisor to destroy the sandbox; cb (may be NULL) when it is
 * gone. Several callers may wait on one destroy. */
void sandbox_destroy(struct sandbox *sb, const char *reason, sandbox_cb cb, void *userdata);
struct sandbox *sandbox_find(struct daemon *d, const char *id);
void sandbox_set_reason(struct sandbox *sb, const char *reason);
/* Write the record as it stands. */
int sandbox_save(struct sandbox *sb);
void sandbox_touch(struct sandbox *sb);
/* Hold a live sandbox across asynchronous work; the last unref frees one
 * that ended in between. */
void sandbox_ref(struct sandbox *sb);
void sandbox_unref(struct sandbox *sb);
/* Ask for a fresh status; cb(sb, 0 or -errno, NULL, ud). */
int sandbox_refresh_status(struct sandbox *sb, sandbox_cb cb, void *userdata);
/* Re-attach the sandboxes the records say are alive (start-up). */
int sandbox_reattach_all(struct daemon *d);
/* The record of a sandbox as the API shows it. */
json_t *sandbox_record_json(const struct store_sandbox *r, const struct sandbox *live);
/* Remove what a dead supervisor may have left: cgroups named airlock-ID, the
 * run directory, the daemon-made workspace. */
void sandbox_cleanup_leftovers(struct daemon *d, const char *id, pid_t pid, const char *workspace,
                               bool workspace_owned);
size_t sandbox_count(struct daemon *d, const char *grant, bool include_pooled);
/* Stopping: end what waits (callbacks get -ECANCELED) and free every
 * sandbox; the sandboxes themselves keep running for the next daemon. */
void sandbox_shutdown_all(struct daemon *d);

/* pool.c */
/* A pooled sandbox for this create, or NULL. */
struct sandbox *pool_take(struct daemon *d, const char *class_name);
void pool_refill(struct daemon *d);
void pool_refill_later(struct daemon *d);
size_t pool_ready(struct daemon *d);

/* gc.c */
void gc_start(struct daemon *d);
void gc_run(struct daemon *d);

/* api.c */
int api_setup(struct daemon *d, struct al_error *err);
/* Stopping: answer the requests still waiting on a supervisor. */
void api_shutdown(struct daemon *d);
