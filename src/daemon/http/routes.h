/* SPDX-License-Identifier: Apache-2.0 */
#pragma once

#include <event2/http.h>
#include <stdint.h>

#include "daemon.h"
#include "grants.h"
#include "http.h"

/* The router (router.c) and the handlers its table names, one resource
 * file each. A handler gets the request's grant (authenticated before
 * anything else is read), its query, and the path's {id} and {pid}. */

struct route_args {
        struct grant *grant;
        const struct query *query;
        char id[17];   /* {id}: a sandbox; "" when the route has none */
        uint64_t pid;  /* {pid}: a process; 0 when the route has none */
        char name[65]; /* {name}: a volume; "" when the route has none */
};

typedef void (*route_fn)(struct daemon *d, struct evhttp_request *req, const struct route_args *a);

/* Every request of the API: the guard, the grant, then the table. */
void route(struct daemon *d, struct evhttp_request *req);

/* metrics.c */
void route_healthz(struct daemon *d, struct evhttp_request *req, const struct route_args *a);
void route_metrics(struct daemon *d, struct evhttp_request *req, const struct route_args *a);
/* sandboxes.c */
void route_sandbox_create(struct daemon *d, struct evhttp_request *req, const struct route_args *a);
void route_sandbox_list(struct daemon *d, struct evhttp_request *req, const struct route_args *a);
void route_sandbox_get(struct daemon *d, struct evhttp_request *req, const struct route_args *a);
void route_sandbox_delete(struct daemon *d, struct evhttp_request *req, const struct route_args *a);
void route_sandbox_ttl(struct daemon *d, struct evhttp_request *req, const struct route_args *a);
/* exec.c */
void route_exec(struct daemon *d, struct evhttp_request *req, const struct route_args *a);
void route_processes(struct daemon *d, struct evhttp_request *req, const struct route_args *a);
void route_events(struct daemon *d, struct evhttp_request *req, const struct route_args *a);
void route_stdin(struct daemon *d, struct evhttp_request *req, const struct route_args *a);
void route_signal(struct daemon *d, struct evhttp_request *req, const struct route_args *a);
/* A process number in a path: 1 to 2^30 - 1. */
bool parse_pid(const char *s, uint64_t *ret);
/* Stopping: end the exec, attach, stdin and signal calls in flight. */
void exec_shutdown(struct daemon *d);
/* pty.c: a process's terminal (resize, and its WebSocket stream) */
void route_pty(struct daemon *d, struct evhttp_request *req, const struct route_args *a);
void route_resize(struct daemon *d, struct evhttp_request *req, const struct route_args *a);
/* An exec body's "pty" checked into the control request; false with a 400 sent. */
bool pty_exec_option(struct daemon *d, struct evhttp_request *req, json_t *body, json_t *ctl);
void pty_shutdown(struct daemon *d);
/* files.c */
void route_files(struct daemon *d, struct evhttp_request *req, const struct route_args *a);
void route_files_list(struct daemon *d, struct evhttp_request *req, const struct route_args *a);
void route_files_mkdir(struct daemon *d, struct evhttp_request *req, const struct route_args *a);
void route_files_rename(struct daemon *d, struct evhttp_request *req, const struct route_args *a);
void route_files_stat(struct daemon *d, struct evhttp_request *req, const struct route_args *a);
void route_files_exists(struct daemon *d, struct evhttp_request *req, const struct route_args *a);
/* files-tar.c */
void route_files_tar(struct daemon *d, struct evhttp_request *req, const struct route_args *a);
/* files-watch.c */
void route_files_watch(struct daemon *d, struct evhttp_request *req, const struct route_args *a);
/* changes.c */
void route_diff(struct daemon *d, struct evhttp_request *req, const struct route_args *a);
void route_accept(struct daemon *d, struct evhttp_request *req, const struct route_args *a);
void route_discard(struct daemon *d, struct evhttp_request *req, const struct route_args *a);
void route_export(struct daemon *d, struct evhttp_request *req, const struct route_args *a);
void route_push(struct daemon *d, struct evhttp_request *req, const struct route_args *a);
/* volumes.c */
void route_volume_list(struct daemon *d, struct evhttp_request *req, const struct route_args *a);
void route_volume_create(struct daemon *d, struct evhttp_request *req, const struct route_args *a);
void route_volume_get(struct daemon *d, struct evhttp_request *req, const struct route_args *a);
void route_volume_delete(struct daemon *d, struct evhttp_request *req, const struct route_args *a);
/* The "volumes" and "home" of a create (and the volumes its policy
 * names), added to its policy, each one the grant may use; -1 with a 400,
 * 404 or 409 sent. */
int volumes_apply_create(struct daemon *d, struct evhttp_request *req, const struct grant *g,
                         json_t *body, struct policy *p);
/* tools.c */
void route_tools(struct daemon *d, struct evhttp_request *req, const struct route_args *a);
/* audit.c */
void route_audit(struct daemon *d, struct evhttp_request *req, const struct route_args *a);
/* events.c: GET /v1/events, the audit log as Server-Sent Events */
void route_events_stream(struct daemon *d, struct evhttp_request *req, const struct route_args *a);
/* ports.c: GET and POST .../ports, DELETE .../ports/{port} (in a->pid) */
void route_ports(struct daemon *d, struct evhttp_request *req, const struct route_args *a);
void route_port_delete(struct daemon *d, struct evhttp_request *req, const struct route_args *a);
/* estop.c: the hardware's emergency stop (POST /v1/sandboxes/{id}/estop) */
void route_estop(struct daemon *d, struct evhttp_request *req, const struct route_args *a);
/* stop.c: the kill switch (POST /v1/stop) */
void route_stop(struct daemon *d, struct evhttp_request *req, const struct route_args *a);
/* ui.c: the dashboard. ui_serve() answers /ui and /ui/... (assets, login)
 * before any grant is asked for, and says whether it did. */
bool ui_serve(struct daemon *d, struct evhttp_request *req, const char *path);
void route_ui_code(struct daemon *d, struct evhttp_request *req, const struct route_args *a);
void route_ui_session(struct daemon *d, struct evhttp_request *req, const struct route_args *a);
void route_ui_logout(struct daemon *d, struct evhttp_request *req, const struct route_args *a);
void route_ui_audit_verify(struct daemon *d, struct evhttp_request *req,
                           const struct route_args *a);
void route_ui_doctor(struct daemon *d, struct evhttp_request *req, const struct route_args *a);
void route_capabilities(struct daemon *d, struct evhttp_request *req, const struct route_args *a);
void route_approvals_list(struct daemon *d, struct evhttp_request *req, const struct route_args *a);
void route_approval_decide(struct daemon *d, struct evhttp_request *req,
                           const struct route_args *a);
/* runs.c: the host-owned agent loop (POST /v1/runs, GET /v1/runs/{id}) */
void route_runs(struct daemon *d, struct evhttp_request *req, const struct route_args *a);
void route_run_get(struct daemon *d, struct evhttp_request *req, const struct route_args *a);
void route_run_events(struct daemon *d, struct evhttp_request *req, const struct route_args *a);
/* The runs going on (of one grant, or of all with NULL): each is a sandbox. */
size_t runs_live(const char *grant);
/* The kill switch for runs: stop the grant's live run `id`, recorded as
 * run.stopped by `by`. 1 when it ended within the bound, 0 when not,
 * -ENOENT when the grant has no such run. */
int runs_stop(struct daemon *d, const char *grant, const char *id, const char *by);
/* Whether run `id` (16 hex digits) is the grant's: 1 or 0, -ENOENT when
 * there is no such run, -EINVAL for something not a run id. */
int run_owner_is(struct daemon *d, const char *id, const char *grant);
/* The ids of the grant's live runs not being stopped; caller frees. */
size_t runs_of_grant(const char *grant, char ***ret);
