/* SPDX-License-Identifier: Apache-2.0 */
#pragma once

/* airlock supervise's insides, shared by its files (docs/internals/control.md):
 *   control.c         the lifecycle: start the sandbox, serve, clean up
 *   control-server.c  the control socket: clients, one request each, status
 *   control-procs.c   the process table: exec, output streams, kept events
 *   control-review.c  review snapshots, copied in a child process
 *   control-ports.c   the ports op: port forwards into the sandbox (ports.h)
 *   control-stop.c    the stop op: the kill switch
 *   control-proto.c   the protocol's pure parsing (control-proto.h)
 * Not for other modules: they use control.h. */

#include <event2/bufferevent.h>
#include <event2/event.h>
#include <event2/listener.h>
#include <jansson.h>
#include <stdbool.h>
#include <stdint.h>

#include "control.h"
#include "core.h"
#include "spawn.h"

enum {
        CONTROL_MAX_PROCS = 128,
        CONTROL_MAX_CLIENTS = 64,
        /* Of those, watchers (other grants reading): the rest stay for
         * the sandbox's own clients. */
        CONTROL_MAX_WATCHERS = 16,
        /* Each process's last events, for attach and for a client that
         * reconnects (from a sequence number): at most this much per
         * process, and this much for all processes of the sandbox, the
         * oldest events of the oldest processes dropped first. */
        CONTROL_KEPT_MAX = 2 * 1024 * 1024,
        CONTROL_KEPT_TOTAL = 16 * 1024 * 1024,
        /* Output queued to one streaming client. Past it the process's pipes
         * are no longer read, so the command blocks on its next write
         * (backpressure); the queue is host memory outside the sandbox's
         * limits, so it must stay small. */
        CONTROL_STREAM_MAX = 1024 * 1024,
};

struct control;
struct client;
struct fetch_ticket;

/* Of a process's attached[] places, those watchers never take. */
#define CONTROL_HOLDER_SLOTS 2

struct proc {
        struct control *ctl;
        int id;
        json_t *argv;
        int in_fd;     /* our end of its stdin, -1 when closed */
        int out_fd[2]; /* our ends of its stdout and stderr */
        struct event *ev_out[2];
        struct event *ev_timeout;
        struct event *ev_linger;
        struct event *ev_stall; /* armed while paused */
        struct evbuffer *kept;  /* the event lines, for attach */
        uint64_t seq;           /* the last event's sequence number */
        uint64_t kept_first;    /* the first kept line's */
        struct client *attached[8];
        struct client *owner; /* the client that started a foreground process */
        uint64_t stall_ms;
        bool paused;  /* a client's queue is full: the pipes are not read */
        bool discard; /* abandoned: what is still in the pipes is dropped */
        bool started, exited, failed, background;
        bool pty;  /* a terminal: out_fd[0] is its master (from "started" on),
                    * in_fd a copy of it */
        bool done; /* its exit event has gone out */
        const char *error_code;
        int exit_code, signal;
        uint64_t start_us, output, oom_before;
        bool oom_known;       /* oom_before has been read */
        struct event *ev_oom; /* reads it in the turn after "started" */
        uint64_t timeout_ms;  /* the exec's own timeout; 0: none */
        struct spawn_event end;
};

struct client {
        struct control *ctl;
        struct bufferevent *bev;
        struct proc *streaming;
        /* Attached as a watcher ("watch": true): never holds its process
         * back; let go when it falls behind (another grant reading). */
        bool watcher;
        struct fetch_ticket *fetch; /* a fetch op in flight (control-fetch.c) */
        bool closing;
};

/* airlock supervise's driver of the supervisor core (core.h): many
 * processes, started and watched through the control socket. */
struct control {
        struct sv_core core;
        const struct control_config *cfg;
        const struct policy *policy;
        struct evconnlistener *listener;
        char **envp; /* the clean environment every process starts from */
        struct proc *procs[CONTROL_MAX_PROCS];
        uint64_t kept_total; /* bytes kept by all processes */
        int next_id;
        int n_clients;
        int n_watchers;
        char dir[4096], sock_path[4200];
        char started_at[64];
        bool destroying;
        char *review_dir; /* overlay workspace: where its changes are kept */
        pid_t snap_pid;   /* a snapshot of them in progress, or 0 */
        int snap_fd;      /* its report */
        struct event *ev_snap;
        struct evbuffer *snap_out;
        struct client *snap_client; /* who asked for it; NULL once gone */
};

/* control-server.c */
/* Queue one answer line (o taken over). */
void control_send_json(struct client *cl, json_t *o);
/* {"ok": false, "error": code, "message": msg}, then close. */
void control_send_error(struct client *cl, const char *code, const char *msg);
/* Close once what is queued has been written. */
void control_client_finish(struct client *cl);
/* Let a client go now; a foreground process it started is abandoned. */
void control_client_free(struct client *cl);
void control_on_accept(struct evconnlistener *l, evutil_socket_t fd, struct sockaddr *sa, int len,
                       void *arg);
void control_do_status(struct client *cl);

/* control-procs.c */
/* Kill a process whose client left or stalled; `discard` drops its pending output. */
void control_proc_abandon(struct proc *p, bool discard);
/* Read its pipes again once its clients' queues have room. */
void control_proc_maybe_resume(struct proc *p);
void control_proc_free(struct proc *p);
/* pid 1 reported a process started, failed or ended; EOF: the sandbox is over. */
void control_on_sync(evutil_socket_t fd, short what, void *arg);
void control_do_exec(struct client *cl, json_t *req);
void control_do_attach(struct client *cl, json_t *req);
void control_do_stdin(struct client *cl, json_t *req);
void control_do_signal(struct client *cl, json_t *req);
void control_do_resize(struct client *cl, json_t *req);

/* control-review.c */
/* Wait for (or kill) a review copy in progress and free what it used. */
void control_snap_reap(struct control *c, bool kill_it);
void control_do_review(struct client *cl);

/* control-ports.c: open, close and list port forwards (ports.h) */
void control_do_ports(struct client *cl, json_t *req);

/* control-stop.c: the kill switch (freeze, close the gates, record, kill) */
void control_do_stop(struct client *cl, json_t *req);
void control_do_estop(struct client *cl, json_t *req);

/* control-approvals.c: list and decide the pending asks */
void control_do_approvals(struct client *cl);
void control_do_approve(struct client *cl, json_t *req);

/* control-fetch.c: the host's own request through a route */
void control_do_fetch(struct client *cl, json_t *req);
/* Its client is gone: the fetch runs out (bounded by its timeout) unanswered. */
void control_fetch_orphan(struct client *cl);

/* control.c */
/* Kill the sandbox and stop serving once the queued answers are out. */
void control_destroy(struct control *c);
