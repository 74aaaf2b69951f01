/* SPDX-License-Identifier: Apache-2.0 */
#include <event2/buffer.h>
#include <event2/bufferevent.h>
#include <event2/event.h>
#include <event2/listener.h>
#include <fcntl.h>
#include <inttypes.h>
#include <jansson.h>
#include <signal.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/un.h>
#include <sys/wait.h>
#include <time.h>

#include "audit.h"
#include "cgroup.h"
#include "control.h"
#include "env.h"
#include "events.h"
#include "gates.h"
#include "gitguard.h"
#include "idle.h"
#include "netgate/netgate.h"
#include "review.h"
#include "quota.h"
#include "secrets.h"
#include "spawn.h"
#include "util.h"

enum {
        CONTROL_MAX_PROCS = 128,
        CONTROL_MAX_CLIENTS = 64,
        CONTROL_LINE_MAX = 4 * 1024 * 1024,
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
        CONTROL_STALL_DEFAULT_MS = 30 * 1000, /* paused this long: abandoned */
        CONTROL_STALL_MAX_MS = 3600 * 1000,
};

struct control;
struct client;

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
        bool done; /* its exit event has gone out */
        const char *error_code;
        int exit_code, signal;
        uint64_t start_us, output, oom_before;
        struct spawn_event end;
};

struct client {
        struct control *ctl;
        struct bufferevent *bev;
        struct proc *streaming;
        bool closing;
};

struct control {
        const struct control_config *cfg;
        const struct policy *policy;
        struct event_base *base;
        struct spawn_result sp;
        struct cgroup *cg;
        struct quota *wq; /* limits.workspaceDisk */
        struct audit *audit;
        struct netgate *gate;
        struct evconnlistener *listener;
        struct event *ev_sync, *ev_flush, *ev_signals[3];
        char **envp; /* the clean environment every process starts from */
        struct proc *procs[CONTROL_MAX_PROCS];
        uint64_t kept_total; /* bytes kept by all processes */
        int next_id;
        int n_clients;
        char dir[4096], sock_path[4200];
        char started_at[64];
        bool destroying;
        char *review_dir;       /* overlay workspace: where its changes are kept */
        pid_t snap_pid;         /* a snapshot of them in progress, or 0 */
        int snap_fd;            /* its report */
        struct event *ev_snap;
        struct evbuffer *snap_out;
        struct client *snap_client; /* who asked for it; NULL once gone */
        char audit_fault[AL_ERROR_MAX]; /* why the last audit write failed */
};

/* An event that could not be written: nothing goes on running unrecorded.
 * Running processes are killed, and each new exec tries the log again
 * (do_exec) and is refused while it cannot be written. */
static void audit_fault(struct control *c, struct al_error *e)
{
        al_error_wrap(e, "audit");
        memcpy(c->audit_fault, e->msg, sizeof(c->audit_fault));
        for (int i = 0; i < CONTROL_MAX_PROCS; i++) {
                struct proc *p = c->procs[i];
                if (!p || p->exited || p->failed)
                        continue;
                if (!p->error_code)
                        p->error_code = "audit_failed";
                spawn_kill_request(c->sp.sync_fd, p->id, SIGKILL);
        }
}

static int record(struct control *c, const char *kind, json_t *fields)
{
        int r = 0;
        if (!fields)
                return 0;
        if (c->audit) {
                struct al_error e = {0};
                r = audit_append(c->audit, c->cfg->id, kind, fields, &e);
                if (r < 0)
                        audit_fault(c, &e);
        }
        json_decref(fields);
        return r;
}

/* Before an action: room for its records, then its first line. A full
 * disk fails here, before anything runs. */
static int record_ahead(struct control *c, const char *kind, json_t *fields)
{
        struct al_error e = {0};
        if (!c->audit) {
                json_decref(fields);
                return 0;
        }
        int r = audit_reserve(c->audit, &e);
        if (r < 0) {
                json_decref(fields);
                audit_fault(c, &e);
                return r;
        }
        return record(c, kind, fields);
}

/* Make what was written durable: before an action is reported. */
static int commit(struct control *c)
{
        int r = c->audit ? audit_flush(c->audit) : 0;
        if (r < 0) {
                struct al_error e = {0};
                al_error_set(&e, r, "syncing the audit log");
                audit_fault(c, &e);
        }
        return r;
}

static void on_net_decision(void *ud, const struct netgate_record *rec)
{
        record(ud, events_net_kind(rec), events_net_decision(rec));
}

static void send_json(struct client *cl, json_t *o)
{
        char *s = json_dumps(o, JSON_COMPACT);
        json_decref(o);
        if (!s || !cl->bev)
                goto out;
        evbuffer_add(bufferevent_get_output(cl->bev), s, strlen(s));
        evbuffer_add(bufferevent_get_output(cl->bev), "\n", 1);
out:
        free(s);
}

static void proc_abandon(struct proc *p, bool discard);
static void proc_maybe_resume(struct proc *p);

static void client_free(struct client *cl)
{
        if (cl->ctl->snap_client == cl)
                cl->ctl->snap_client = NULL;
        struct proc *p = cl->streaming;
        if (p) {
                for (size_t i = 0; i < ARRAY_SIZE(p->attached); i++)
                        if (p->attached[i] == cl)
                                p->attached[i] = NULL;
                cl->streaming = NULL;
                /* The rule (docs/control.md): a foreground command dies with
                 * the client that started it; a background one outlives it. */
                if (p->owner == cl) {
                        p->owner = NULL;
                        if (!p->background && !p->done)
                                proc_abandon(p, false);
                }
                proc_maybe_resume(p);
        }
        if (cl->bev)
                bufferevent_free(cl->bev);
        if (--cl->ctl->n_clients == 0 && cl->ctl->destroying)
                event_base_loopexit(cl->ctl->base, NULL);
        free(cl);
}

/* Close once what is queued has been written. */
static void client_finish(struct client *cl)
{
        cl->closing = true;
        if (evbuffer_get_length(bufferevent_get_output(cl->bev)) == 0)
                client_free(cl);
}

static void send_error(struct client *cl, const char *code, const char *msg)
{
        send_json(cl, json_pack("{s:b, s:s, s:s}", "ok", 0, "error", code, "message", msg));
        client_finish(cl);
}

/* Reading a process's pipes stops and starts with its clients' queues. */
static void proc_pause(struct proc *p)
{
        if (p->paused || p->discard)
                return;
        p->paused = true;
        for (int k = 0; k < 2; k++)
                if (p->ev_out[k])
                        event_del(p->ev_out[k]);
        struct timeval tv = {.tv_sec = (time_t)(p->stall_ms / 1000),
                             .tv_usec = (suseconds_t)(p->stall_ms % 1000) * 1000};
        evtimer_add(p->ev_stall, &tv);
}

static bool proc_queue_full(struct proc *p, size_t max)
{
        for (size_t i = 0; i < ARRAY_SIZE(p->attached); i++)
                if (p->attached[i] && p->attached[i]->bev &&
                    evbuffer_get_length(bufferevent_get_output(p->attached[i]->bev)) > max)
                        return true;
        return false;
}

static void proc_maybe_resume(struct proc *p)
{
        if (!p->paused || (!p->discard && proc_queue_full(p, CONTROL_STREAM_MAX / 2)))
                return;
        p->paused = false;
        evtimer_del(p->ev_stall);
        if (p->started || p->failed)
                for (int k = 0; k < 2; k++)
                        if (p->ev_out[k])
                                event_add(p->ev_out[k], NULL);
}

/* Its client left, or stopped reading for the stall time: kill it and say
 * so in its result. With `discard`, what is still in its pipes is read and
 * dropped, so that its end is seen. */
static void proc_abandon(struct proc *p, bool discard)
{
        if (p->exited || p->failed) {
                if (!discard)
                        return;
        } else {
                if (!p->error_code)
                        p->error_code = "abandoned";
                spawn_kill_request(p->ctl->sp.sync_fd, p->id, SIGKILL);
        }
        if (discard) {
                p->discard = true;
                proc_maybe_resume(p);
        }
}

static void on_proc_stall(evutil_socket_t fd, short what, void *arg)
{
        proc_abandon(arg, true);
}

/* Drop a process's oldest kept event. */
static bool kept_drop_one(struct proc *p)
{
        size_t len;
        char *line = evbuffer_readln(p->kept, &len, EVBUFFER_EOL_LF);
        if (!line)
                return false;
        free(line);
        p->ctl->kept_total -= len + 1 <= p->ctl->kept_total ? len + 1 : p->ctl->kept_total;
        p->kept_first++;
        return true;
}

/* Keep an event line, within the caps. */
static void kept_add(struct proc *p, const char *s, size_t n)
{
        struct control *c = p->ctl;
        evbuffer_add(p->kept, s, n);
        evbuffer_add(p->kept, "\n", 1);
        c->kept_total += n + 1;
        while (evbuffer_get_length(p->kept) > CONTROL_KEPT_MAX && kept_drop_one(p))
                ;
        /* Over the sandbox's cap: the oldest process gives up its oldest
         * events first. */
        for (int i = 0; c->kept_total > CONTROL_KEPT_TOTAL && i < CONTROL_MAX_PROCS;) {
                struct proc *oldest = NULL;
                for (int k = 0; k < CONTROL_MAX_PROCS; k++)
                        if (c->procs[k] && evbuffer_get_length(c->procs[k]->kept) > 0 &&
                            (!oldest || c->procs[k]->id < oldest->id))
                                oldest = c->procs[k];
                if (!oldest)
                        break;
                if (!kept_drop_one(oldest))
                        i++;
        }
}

/* One event of a process: numbered, kept for attach and reconnects, and
 * sent to whoever streams it. */
static void proc_event(struct proc *p, json_t *o)
{
        json_object_set_new(o, "seq", json_integer((json_int_t)++p->seq));
        char *s = json_dumps(o, JSON_COMPACT);
        json_decref(o);
        if (!s)
                return;
        size_t n = strlen(s);
        kept_add(p, s, n);
        for (size_t i = 0; i < ARRAY_SIZE(p->attached); i++)
                if (p->attached[i]) {
                        struct evbuffer *out = bufferevent_get_output(p->attached[i]->bev);
                        evbuffer_add(out, s, n);
                        evbuffer_add(out, "\n", 1);
                }
        free(s);
        if (!p->background) {
                if (proc_queue_full(p, CONTROL_STREAM_MAX))
                        proc_pause(p);
                return;
        }
        /* A background process is not held back by who watches it: a
         * watcher that falls that far behind is let go (what is kept can be
         * attached to again). */
        for (size_t i = 0; i < ARRAY_SIZE(p->attached); i++) {
                struct client *cl = p->attached[i];
                if (cl && evbuffer_get_length(bufferevent_get_output(cl->bev)) > CONTROL_STREAM_MAX) {
                        p->attached[i] = NULL;
                        cl->streaming = NULL;
                        client_free(cl);
                }
        }
}

/* Let every client streaming this process go, once its lines are out. */
static void detach_all(struct proc *p)
{
        for (size_t i = 0; i < ARRAY_SIZE(p->attached); i++)
                if (p->attached[i]) {
                        struct client *cl = p->attached[i];
                        p->attached[i] = NULL;
                        cl->streaming = NULL;
                        client_finish(cl);
                }
}

static void proc_free(struct proc *p)
{
        for (int i = 0; i < 2; i++) {
                if (p->ev_out[i])
                        event_free(p->ev_out[i]);
                if (p->out_fd[i] >= 0)
                        close(p->out_fd[i]);
        }
        if (p->in_fd >= 0)
                close(p->in_fd);
        if (p->ev_timeout)
                event_free(p->ev_timeout);
        if (p->ev_linger)
                event_free(p->ev_linger);
        if (p->ev_stall)
                event_free(p->ev_stall);
        if (p->kept) {
                size_t k = evbuffer_get_length(p->kept);
                p->ctl->kept_total -= k <= p->ctl->kept_total ? k : p->ctl->kept_total;
                evbuffer_free(p->kept);
        }
        json_decref(p->argv);
        free(p);
}

/* The process is over when pid 1 has reported its end and both of its
 * output pipes are drained. */
static void proc_maybe_done(struct proc *p)
{
        struct control *c = p->ctl;
        if (!(p->exited || p->failed) || p->out_fd[0] >= 0 || p->out_fd[1] >= 0)
                return;
        if (p->exited) {
                int st = p->end.status;
                struct cgroup_usage cu = {0};
                if (c->cg)
                        c->cg->ops->usage(c->cg, &cu);
                if (p->error_code) {
                        /* timeout or output_limit, decided when we killed it */
                } else if (cu.oom_kills > p->oom_before && WIFSIGNALED(st) && WTERMSIG(st) == SIGKILL) {
                        p->error_code = "oom_killed";
                }
                if (WIFSIGNALED(st)) {
                        p->signal = WTERMSIG(st);
                        p->exit_code = 128 + p->signal;
                } else
                        p->exit_code = WEXITSTATUS(st);
                if (p->error_code && STREQ(p->error_code, "timeout"))
                        p->exit_code = 124;
        }
        uint64_t dur = (now_monotonic_us() - p->start_us) / 1000;
        json_t *ev = json_pack("{s:s, s:i, s:i, s:o, s:o, s:I, s:{s:I, s:I, s:I, s:I}}",
                               "type", "exit", "pid", p->id, "exitCode", p->exit_code,
                               "signal", p->signal ? json_integer(p->signal) : json_null(),
                               "errorCode", p->error_code ? json_string(p->error_code) : json_null(),
                               "durationMs", (json_int_t)dur,
                               "usage",
                               "cpuUserMs", (json_int_t)p->end.cpu_user_ms,
                               "cpuSystemMs", (json_int_t)p->end.cpu_system_ms,
                               "maxRssKb", (json_int_t)p->end.max_rss_kb,
                               "outputBytes", (json_int_t)p->output);
        record(c, "process.ended", json_pack("{s:i, s:i, s:o, s:o, s:I}", "pid", p->id,
                                             "exitCode", p->exit_code,
                                             "signal", p->signal ? json_integer(p->signal) : json_null(),
                                             "errorCode", p->error_code ? json_string(p->error_code) : json_null(),
                                             "durationMs", (json_int_t)dur));
        if (p->error_code && (STREQ(p->error_code, "timeout") || STREQ(p->error_code, "oom_killed") ||
                              STREQ(p->error_code, "output_limit")))
                record(c, "limit.hit", json_pack("{s:i, s:s}", "pid", p->id, "limit",
                                                 STREQ(p->error_code, "timeout")      ? "timeout"
                                                 : STREQ(p->error_code, "oom_killed") ? "memory"
                                                                                      : "output"));
        if (p->signal == SIGSYS)
                record(c, "violation", json_pack("{s:i, s:s}", "pid", p->id, "what", "seccomp"));
        proc_event(p, ev);
        p->done = true;
        detach_all(p);
        if (p->ev_timeout)
                evtimer_del(p->ev_timeout);
        evtimer_del(p->ev_stall);
        /* A finished process stays listed, with its kept events, for attach
         * and for a client that reconnects, until its slot is needed
         * (do_exec) or the sandbox ends. */
}

static void on_proc_output(evutil_socket_t fd, short what, void *arg)
{
        struct proc *p = arg;
        int which = (fd == p->out_fd[0]) ? 0 : 1;
        char buf[32 * 1024];
        ssize_t n = read(fd, buf, sizeof(buf));
        if (n < 0 && (errno == EAGAIN || errno == EINTR))
                return;
        if (n <= 0) {
                event_free(p->ev_out[which]);
                p->ev_out[which] = NULL;
                close(p->out_fd[which]);
                p->out_fd[which] = -1;
                proc_maybe_done(p);
                return;
        }
        if (p->discard)
                return;
        uint64_t limit = p->ctl->policy->limits.output;
        size_t keep = (size_t)n;
        if (limit && p->output + keep > limit) {
                keep = (size_t)(limit - p->output);
                if (!p->error_code) {
                        p->error_code = "output_limit";
                        spawn_kill_request(p->ctl->sp.sync_fd, p->id, SIGKILL);
                }
        }
        p->output += keep;
        if (keep == 0)
                return;
        _cleanup_free_ char *data = base64_encode(buf, keep);
        proc_event(p, json_pack("{s:s, s:s}", "type", which ? "stderr" : "stdout", "data", data));
}

/* A process that left children behind (`cmd &`) has ended all the same:
 * what they still hold open is read for a moment, then let go. */
static void on_proc_linger(evutil_socket_t fd, short what, void *arg)
{
        struct proc *p = arg;
        if (p->paused) {
                /* Its last output waits for a slow client; the stall timer
                 * bounds the wait. */
                struct timeval tv = {.tv_sec = 0, .tv_usec = 200000};
                evtimer_add(p->ev_linger, &tv);
                return;
        }
        for (int k = 0; k < 2; k++)
                if (p->out_fd[k] >= 0) {
                        event_free(p->ev_out[k]);
                        p->ev_out[k] = NULL;
                        close(p->out_fd[k]);
                        p->out_fd[k] = -1;
                }
        proc_maybe_done(p);
}

static void on_proc_timeout(evutil_socket_t fd, short what, void *arg)
{
        struct proc *p = arg;
        if (!p->error_code)
                p->error_code = "timeout";
        spawn_kill_request(p->ctl->sp.sync_fd, p->id, SIGKILL);
}

static struct proc *find_proc(struct control *c, int id)
{
        if (id <= 0)
                return NULL;
        struct proc *p = c->procs[id % CONTROL_MAX_PROCS];
        return p && p->id == id ? p : NULL;
}

static void destroy(struct control *c);

static void on_sync(evutil_socket_t fd, short what, void *arg)
{
        struct control *c = arg;
        struct spawn_event ev;
        if (spawn_read_event(fd, &ev) < 0) {
                /* pid 1 is gone: the sandbox is over. */
                destroy(c);
                return;
        }
        struct proc *p = find_proc(c, ev.id);
        if (!p)
                return;
        switch (ev.type) {
        case SPAWN_EVENT_STARTED:
                p->started = true;
                if (p->error_code && STREQ(p->error_code, "abandoned"))
                        spawn_kill_request(c->sp.sync_fd, p->id,
                                           SIGKILL); /* left before it started */
                for (int k = 0; k < 2; k++)
                        if (p->ev_out[k] && !p->paused)
                                event_add(p->ev_out[k], NULL);
                proc_event(p, json_pack("{s:s, s:i}", "type", "started", "pid", p->id));
                if (p->background)
                        detach_all(p); /* a background exec answers "started" only */
                break;
        case SPAWN_EVENT_FAILED:
                p->failed = true;
                for (int k = 0; k < 2; k++)
                        if (p->ev_out[k])
                                event_add(p->ev_out[k], NULL);
                p->error_code = "exec_failed";
                p->exit_code = ev.failure == SPAWN_FAILED_EXEC_NOT_FOUND ? 127
                               : ev.failure == SPAWN_FAILED_EXEC       ? 126
                                                                       : 125;
                proc_event(p, json_pack("{s:s, s:s}", "type", "error", "message", ev.message));
                proc_maybe_done(p);
                break;
        case SPAWN_EVENT_EXIT:
                p->exited = true;
                p->end = ev;
                if (p->out_fd[0] >= 0 || p->out_fd[1] >= 0) {
                        struct timeval tv = {.tv_sec = 0, .tv_usec = 200000};
                        p->ev_linger = evtimer_new(c->base, on_proc_linger, p);
                        evtimer_add(p->ev_linger, &tv);
                }
                proc_maybe_done(p);
                break;
        }
}

static int pipe_pair(int fds[2])
{
        return pipe2(fds, O_CLOEXEC) < 0 ? -errno : 0;
}

static void do_exec(struct client *cl, json_t *req)
{
        struct control *c = cl->ctl;
        json_t *argv = json_object_get(req, "argv");
        json_t *env = json_object_get(req, "env");
        json_t *cwd = json_object_get(req, "cwd");
        json_t *stdin_data = json_object_get(req, "stdin");
        json_t *timeout = json_object_get(req, "timeout");
        json_t *stall = json_object_get(req, "stallTimeout");
        bool background = json_is_true(json_object_get(req, "background"));

        if (!json_is_array(argv) || json_array_size(argv) == 0 || json_array_size(argv) > 4096)
                return send_error(cl, "bad_request", "\"argv\" must be a non-empty array of strings");
        if (env && !json_is_null(env) && !json_is_object(env))
                return send_error(cl, "bad_request", "\"env\" must be an object of strings");
        if (cwd && !json_is_null(cwd) && (!json_is_string(cwd) || json_string_value(cwd)[0] != '/'))
                return send_error(cl, "bad_request", "\"cwd\" must be an absolute path");
        if (stdin_data && !json_is_null(stdin_data) && !json_is_string(stdin_data))
                return send_error(cl, "bad_request", "\"stdin\" must be base64 or null");
        if (timeout && !json_is_null(timeout) && (!json_is_number(timeout) || json_number_value(timeout) <= 0))
                return send_error(cl, "bad_request", "\"timeout\" must be a positive number of seconds");
        if (stall && !json_is_null(stall) &&
            (!json_is_number(stall) || json_number_value(stall) <= 0 ||
             json_number_value(stall) * 1000 > CONTROL_STALL_MAX_MS))
                return send_error(
                    cl, "bad_request",
                    "\"stallTimeout\" must be a positive number of seconds, at most 3600");

        int slot = -1, id = 0;
        for (int tries = 0; tries < CONTROL_MAX_PROCS && slot < 0; tries++) {
                id = ++c->next_id;
                struct proc *old = c->procs[id % CONTROL_MAX_PROCS];
                if (old && old->done) {
                        /* The oldest finished process gives its slot up. */
                        detach_all(old);
                        c->procs[id % CONTROL_MAX_PROCS] = NULL;
                        proc_free(old);
                        old = NULL;
                }
                if (!old)
                        slot = id % CONTROL_MAX_PROCS;
        }
        if (slot < 0)
                return send_error(cl, "too_many_processes", "too many processes in this sandbox");

        _cleanup_strv_ char **av = NULL, **ev = NULL;
        size_t n_av = 0, n_ev = 0;
        size_t i;
        json_t *v;
        json_array_foreach(argv, i, v) {
                if (!json_is_string(v))
                        return send_error(cl, "bad_request", "\"argv\" must be a non-empty array of strings");
                av = strv_append(av, &n_av, json_string_value(v));
        }
        for (char **e = c->envp; e && *e; e++)
                ev = strv_append(ev, &n_ev, *e);
        const char *key;
        json_object_foreach(env, key, v) {
                if (!json_is_string(v) || !*key || strchr(key, '='))
                        return send_error(cl, "bad_request", "\"env\" must be an object of strings");
                if (strstr(json_string_value(v), "${secret:"))
                        return send_error(cl, "bad_request",
                                          "env values may not name a secret: secrets never enter the sandbox");
                _cleanup_free_ char *kv = xasprintf("%s=%s", key, json_string_value(v));
                ev = strv_append(ev, &n_ev, kv);
        }
        _cleanup_free_ unsigned char *in = NULL;
        size_t in_len = 0;
        if (json_is_string(stdin_data) &&
            base64_decode(json_string_value(stdin_data), &in, &in_len) < 0)
                return send_error(cl, "bad_request", "\"stdin\" is not valid base64");

        int pin[2] = {-1, -1}, pout[2] = {-1, -1}, perr[2] = {-1, -1};
        if (pipe_pair(pin) < 0 || pipe_pair(pout) < 0 || pipe_pair(perr) < 0) {
                for (int k = 0; k < 2; k++) {
                        if (pin[k] >= 0)
                                close(pin[k]);
                        if (pout[k] >= 0)
                                close(pout[k]);
                        if (perr[k] >= 0)
                                close(perr[k]);
                }
                return send_error(cl, "internal", "creating pipes");
        }
        /* Written ahead: the process starts only once the log says so, and
         * a log that cannot be written refuses the exec. */
        if (record_ahead(c, "process.started", json_pack("{s:i, s:O}", "pid", id, "argv", argv)) < 0) {
                for (int k = 0; k < 2; k++) {
                        close(pin[k]);
                        close(pout[k]);
                        close(perr[k]);
                }
                return send_error(cl, "audit_failed", c->audit_fault);
        }
        struct proc *p = xcalloc(1, sizeof(*p));
        p->ctl = c;
        p->id = id;
        p->argv = json_incref(argv);
        p->background = background;
        p->in_fd = pin[1];
        p->out_fd[0] = pout[0];
        p->out_fd[1] = perr[0];
        p->kept = evbuffer_new();
        p->kept_first = 1;
        p->start_us = now_monotonic_us();
        p->stall_ms = json_is_number(stall) ? (uint64_t)(json_number_value(stall) * 1000)
                                            : CONTROL_STALL_DEFAULT_MS;
        if (p->stall_ms == 0)
                p->stall_ms = 1;
        p->ev_stall = evtimer_new(c->base, on_proc_stall, p);
        if (c->cg) {
                struct cgroup_usage cu;
                c->cg->ops->usage(c->cg, &cu);
                p->oom_before = cu.oom_kills;
        }
        c->procs[slot] = p;

        int fds[3] = {pin[0], pout[1], perr[1]};
        int r = spawn_exec_request(c->sp.sync_fd, id, av, ev,
                                   json_is_string(cwd) ? json_string_value(cwd) : "/workspace", fds);
        close(pin[0]);
        close(pout[1]);
        close(perr[1]);
        if (r < 0) {
                c->procs[slot] = NULL;
                proc_free(p);
                return send_error(cl, r == -E2BIG ? "bad_request" : "internal",
                                  r == -E2BIG ? "argv and env are too large" : "asking pid 1 to start it");
        }
        /* Synced while pid 1 forks, and before "started" is reported; a
         * sync that fails kills the process (audit_fault). */
        commit(c);
        for (int k = 0; k < 2; k++) {
                evutil_make_socket_nonblocking(p->out_fd[k]);
                p->ev_out[k] = event_new(c->base, p->out_fd[k], EV_READ | EV_PERSIST, on_proc_output, p);
                /* Armed once pid 1 says it started (or failed): no output
                 * line may come before "started". */
        }
        if (json_is_number(timeout)) {
                double t = json_number_value(timeout);
                struct timeval tv = {.tv_sec = (time_t)t, .tv_usec = (suseconds_t)((t - (double)(time_t)t) * 1e6)};
                p->ev_timeout = evtimer_new(c->base, on_proc_timeout, p);
                evtimer_add(p->ev_timeout, &tv);
        }
        /* Small stdin goes in at once; the rest of a background process's
         * input comes through "stdin" requests. */
        if (in_len > 0)
                (void)write_full(p->in_fd, in, in_len);
        if (!background) {
                close(p->in_fd);
                p->in_fd = -1;
        }
        p->attached[0] = cl;
        p->owner = cl;
        cl->streaming = p;
}

static void do_attach(struct client *cl, json_t *req)
{
        struct proc *p = find_proc(cl->ctl, (int)json_integer_value(json_object_get(req, "pid")));
        if (!p)
                return send_error(cl, "unknown_process", "no such process");
        json_t *jfrom = json_object_get(req, "from");
        if (jfrom && !json_is_null(jfrom) && (!json_is_integer(jfrom) || json_integer_value(jfrom) < 0))
                return send_error(cl, "bad_request", "\"from\" must be a sequence number");
        uint64_t from = (uint64_t)json_integer_value(jfrom);
        if (from > p->seq + 1)
                from = p->seq + 1;
        if (from > 0 && from < p->kept_first)
                /* What was dropped from the kept events is said, not skipped. */
                send_json(cl, json_pack("{s:s, s:I, s:I}", "type", "gap", "from", (json_int_t)from,
                                        "to", (json_int_t)(p->kept_first - 1)));
        size_t kept = evbuffer_get_length(p->kept);
        const char *text = kept ? (const char *)evbuffer_pullup(p->kept, -1) : NULL;
        size_t off = 0;
        for (uint64_t k = p->kept_first; k < from && off < kept; k++) {
                const char *nl = memchr(text + off, '\n', kept - off);
                off = nl ? (size_t)(nl - text) + 1 : kept;
        }
        if (off < kept)
                evbuffer_add(bufferevent_get_output(cl->bev), text + off, kept - off);
        if (p->done) {
                client_finish(cl);
                return;
        }
        for (size_t i = 0; i < ARRAY_SIZE(p->attached); i++)
                if (!p->attached[i]) {
                        p->attached[i] = cl;
                        cl->streaming = p;
                        return;
                }
        send_error(cl, "internal", "too many clients attached");
}

static void do_stdin(struct client *cl, json_t *req)
{
        struct proc *p = find_proc(cl->ctl, (int)json_integer_value(json_object_get(req, "pid")));
        if (!p)
                return send_error(cl, "unknown_process", "no such process");
        const char *data = json_string_value(json_object_get(req, "data"));
        _cleanup_free_ unsigned char *in = NULL;
        size_t len = 0;
        if (data && base64_decode(data, &in, &len) < 0)
                return send_error(cl, "bad_request", "\"data\" is not valid base64");
        if (p->in_fd < 0)
                return send_error(cl, "bad_request", "the process's stdin is closed");
        if (len > 0 && write_full(p->in_fd, in, len) < 0)
                return send_error(cl, "bad_request", "the process no longer reads its stdin");
        if (json_is_true(json_object_get(req, "eof"))) {
                close(p->in_fd);
                p->in_fd = -1;
        }
        send_json(cl, json_pack("{s:b}", "ok", 1));
        client_finish(cl);
}

static void do_signal(struct client *cl, json_t *req)
{
        struct proc *p = find_proc(cl->ctl, (int)json_integer_value(json_object_get(req, "pid")));
        json_int_t sig = json_integer_value(json_object_get(req, "signal"));
        if (!p)
                return send_error(cl, "unknown_process", "no such process");
        if (sig <= 0 || sig >= NSIG)
                return send_error(cl, "bad_request", "\"signal\" must be a signal number");
        if (json_is_true(json_object_get(req, "abandoned")))
                proc_abandon(p, false); /* its client is gone: say so in its result */
        else if (!p->exited && !p->failed)
                spawn_kill_request(cl->ctl->sp.sync_fd, p->id, (int)sig);
        send_json(cl, json_pack("{s:b}", "ok", 1));
        client_finish(cl);
}

static void do_status(struct client *cl)
{
        struct control *c = cl->ctl;
        struct cgroup_usage cu = {0};
        if (c->cg)
                c->cg->ops->usage(c->cg, &cu);
        struct netgate_stats ns = {0};
        if (c->gate)
                netgate_get_stats(c->gate, &ns);
        uint64_t ws_added = 0;
        bool ws_full = false, ws = c->wq && quota_usage(c->wq, &ws_added, &ws_full) >= 0;
        json_t *procs = json_array();
        for (int i = 0; i < CONTROL_MAX_PROCS; i++)
                if (c->procs[i])
                        json_array_append_new(
                            procs,
                            json_pack("{s:i, s:O, s:b, s:o, s:o, s:I}", "pid", c->procs[i]->id, "argv",
                                      c->procs[i]->argv, "running",
                                      !(c->procs[i]->exited || c->procs[i]->failed), "exitCode",
                                      c->procs[i]->done ? json_integer(c->procs[i]->exit_code)
                                                        : json_null(),
                                      "errorCode",
                                      c->procs[i]->done && c->procs[i]->error_code
                                          ? json_string(c->procs[i]->error_code)
                                          : json_null(),
                                      "seq", (json_int_t)c->procs[i]->seq));
        send_json(cl, json_pack("{s:b, s:s, s:s, s:s, s:{s:I, s:I, s:I, s:I, s:I, s:o}, s:{s:I, s:I, s:I, s:I, s:I}, s:o, s:I}",
                                "ok", 1, "sandbox", c->cfg->id, "state", "running",
                                "startedAt", c->started_at,
                                "usage",
                                "cpuMs", (json_int_t)(cu.cpu_usec / 1000),
                                "memoryPeakBytes", (json_int_t)cu.memory_peak,
                                "pids", (json_int_t)cu.pids_current,
                                "ioReadBytes", (json_int_t)cu.io_read_bytes,
                                "ioWriteBytes", (json_int_t)cu.io_write_bytes,
                                "workspaceAddedBytes",
                                ws ? json_integer((json_int_t)ws_added) : json_null(),
                                "network",
                                "requests", (json_int_t)ns.requests,
                                "allowed", (json_int_t)ns.allowed,
                                "denied", (json_int_t)ns.denied,
                                "bytesUp", (json_int_t)ns.bytes_up,
                                "bytesDown", (json_int_t)ns.bytes_down,
                                "processes", procs,
                                "oomKills", (json_int_t)cu.oom_kills));
        client_finish(cl);
}

/* review: copy the overlay's upper layer, as it is now, over the kept
 * changes. A child process does the copying, so a large layer does not
 * stall the sandbox's other requests and streams. */

static json_t *review_counts(const struct review_summary *sum)
{
        return json_pack("{s:I, s:I, s:I, s:I, s:I}", "added", (json_int_t)sum->added,
                         "modified", (json_int_t)sum->modified, "deleted",
                         (json_int_t)sum->deleted, "bytes", (json_int_t)sum->bytes, "skipped",
                         (json_int_t)sum->skipped);
}

static void snap_reap(struct control *c, bool kill_it)
{
        if (!c->snap_pid)
                return;
        if (kill_it)
                kill(c->snap_pid, SIGKILL);
        while (waitpid(c->snap_pid, NULL, 0) < 0 && errno == EINTR)
                ;
        c->snap_pid = 0;
        if (c->ev_snap)
                event_free(c->ev_snap);
        c->ev_snap = NULL;
        if (c->snap_fd >= 0)
                close(c->snap_fd);
        c->snap_fd = -1;
        if (c->snap_out)
                evbuffer_free(c->snap_out);
        c->snap_out = NULL;
}

static void on_snap(evutil_socket_t fd, short what, void *arg)
{
        struct control *c = arg;
        char buf[4096];
        ssize_t n = read(fd, buf, sizeof(buf));
        if (n < 0 && (errno == EAGAIN || errno == EINTR))
                return;
        if (n > 0) {
                if (evbuffer_get_length(c->snap_out) < 64 * 1024)
                        evbuffer_add(c->snap_out, buf, (size_t)n);
                return;
        }
        size_t len = evbuffer_get_length(c->snap_out);
        json_t *o = json_loadb((const char *)evbuffer_pullup(c->snap_out, -1), len, 0, NULL);
        snap_reap(c, false);
        if (!json_is_object(o)) {
                json_decref(o);
                o = json_pack("{s:b, s:s, s:s}", "ok", 0, "error", "internal", "message",
                              "copying the changes ended without a report");
        } else if (json_is_true(json_object_get(o, "ok")))
                record(c, "review.snapshot", json_deep_copy(json_object_get(o, "changes")));
        struct client *cl = c->snap_client;
        c->snap_client = NULL;
        if (cl) {
                send_json(cl, o);
                client_finish(cl);
        } else
                json_decref(o);
}

static void do_review(struct client *cl)
{
        struct control *c = cl->ctl;
        if (!c->review_dir) {
                send_error(cl, "not_reviewable", "the sandbox's workspace is not copy-on-write");
                return;
        }
        if (c->snap_pid) {
                send_error(cl, "busy", "the changes are being copied for another request");
                return;
        }
        int p[2];
        if (pipe2(p, O_CLOEXEC) < 0) {
                send_error(cl, "internal", strerror(errno));
                return;
        }
        pid_t pid = fork();
        if (pid < 0) {
                close(p[0]);
                close(p[1]);
                send_error(cl, "internal", strerror(errno));
                return;
        }
        if (pid == 0) {
                close(p[0]);
                struct review_summary sum = {0};
                struct al_error e = {0};
                json_t *o;
                if (review_recapture(c->sp.upper_fd, c->review_dir, c->policy->limits.disk, &sum,
                                     &e) < 0)
                        o = json_pack("{s:b, s:s, s:s}", "ok", 0, "error", "internal", "message",
                                      e.msg);
                else
                        o = json_pack("{s:b, s:s, s:o}", "ok", 1, "dir", c->review_dir, "changes",
                                      review_counts(&sum));
                char *text = o ? json_dumps(o, JSON_COMPACT) : NULL;
                _exit(text && write_full(p[1], text, strlen(text)) >= 0 ? 0 : 1);
        }
        close(p[1]);
        c->snap_pid = pid;
        c->snap_fd = p[0];
        c->snap_out = evbuffer_new();
        c->snap_client = cl;
        c->ev_snap = event_new(c->base, p[0], EV_READ | EV_PERSIST, on_snap, c);
        event_add(c->ev_snap, NULL);
}

static void on_client_read(struct bufferevent *bev, void *arg)
{
        struct client *cl = arg;
        if (cl->streaming || cl->closing)
                return; /* one request per connection */
        struct evbuffer *in = bufferevent_get_input(bev);
        size_t len;
        char *line = evbuffer_readln(in, &len, EVBUFFER_EOL_LF);
        if (!line) {
                if (evbuffer_get_length(in) > CONTROL_LINE_MAX)
                        send_error(cl, "bad_request", "request line too long");
                return;
        }
        json_error_t jerr;
        json_t *req = json_loadb(line, len, 0, &jerr);
        free(line);
        const char *op = json_string_value(json_object_get(req, "op"));
        if (!req || !op)
                send_error(cl, "bad_request", "expected a JSON object with \"op\"");
        else if (cl->ctl->destroying)
                send_error(cl, "destroyed", "the sandbox is being destroyed");
        else if (STREQ(op, "status"))
                do_status(cl);
        else if (STREQ(op, "exec"))
                do_exec(cl, req);
        else if (STREQ(op, "attach"))
                do_attach(cl, req);
        else if (STREQ(op, "stdin"))
                do_stdin(cl, req);
        else if (STREQ(op, "signal"))
                do_signal(cl, req);
        else if (STREQ(op, "review"))
                do_review(cl);
        else if (STREQ(op, "destroy")) {
                send_json(cl, json_pack("{s:b}", "ok", 1));
                client_finish(cl);
                destroy(cl->ctl);
        } else
                send_error(cl, "bad_request", "unknown op");
        json_decref(req);
}

static void on_client_write(struct bufferevent *bev, void *arg)
{
        struct client *cl = arg;
        if (cl->closing) {
                if (evbuffer_get_length(bufferevent_get_output(bev)) == 0)
                        client_free(cl);
        } else if (cl->streaming)
                proc_maybe_resume(cl->streaming);
}

static void on_client_event(struct bufferevent *bev, short what, void *arg)
{
        struct client *cl = arg;
        /* A client that leaves, or that has not read for the write timeout,
         * is let go (client_free says what becomes of its command). */
        if (what & (BEV_EVENT_EOF | BEV_EVENT_ERROR | BEV_EVENT_TIMEOUT))
                client_free(cl);
}

static void on_accept(struct evconnlistener *l, evutil_socket_t fd, struct sockaddr *sa, int len,
                      void *arg)
{
        struct control *c = arg;
        if (c->n_clients >= CONTROL_MAX_CLIENTS) {
                close(fd);
                return;
        }
        struct client *cl = xcalloc(1, sizeof(*cl));
        cl->ctl = c;
        cl->bev = bufferevent_socket_new(c->base, fd, BEV_OPT_CLOSE_ON_FREE);
        c->n_clients++;
        bufferevent_setcb(cl->bev, on_client_read, on_client_write, on_client_event, cl);
        bufferevent_setwatermark(cl->bev, EV_READ, 0, CONTROL_LINE_MAX + 1);
        /* Told when a streaming client's queue is half drained, to resume
         * reading its process; one that reads nothing for longer than the
         * longest stall is gone. */
        bufferevent_setwatermark(cl->bev, EV_WRITE, CONTROL_STREAM_MAX / 2, 0);
        struct timeval wtv = {.tv_sec = CONTROL_STALL_MAX_MS / 1000 + 60, .tv_usec = 0};
        bufferevent_set_timeouts(cl->bev, NULL, &wtv);
        bufferevent_enable(cl->bev, EV_READ | EV_WRITE);
}

static void on_flush(evutil_socket_t fd, short what, void *arg)
{
        struct control *c = arg;
        if (c->audit && audit_needs_flush(c->audit, now_monotonic_us())) {
                int r = audit_flush(c->audit);
                if (r < 0) {
                        struct al_error e = {0};
                        al_error_set(&e, r, "syncing the audit log");
                        audit_fault(c, &e);
                }
        }
}

static void on_signal(evutil_socket_t sig, short what, void *arg)
{
        destroy(arg);
}

static void destroy(struct control *c)
{
        if (c->destroying)
                return;
        c->destroying = true;
        if (c->sp.pidfd >= 0)
                syscall(SYS_pidfd_send_signal, c->sp.pidfd, SIGKILL, NULL, 0);
        /* Stop once the queued answers are out (client_free), or after a
         * second whatever a client still holds. */
        struct timeval tv = {.tv_sec = 1, .tv_usec = 0};
        event_base_loopexit(c->base, c->n_clients > 0 ? &tv : NULL);
}

static void drop_event_log(int severity, const char *msg)
{
}

static int write_state(struct control *c, struct al_error *err)
{
        json_t *o = json_pack("{s:s, s:i, s:s, s:s}", "sandbox", c->cfg->id, "pid", (int)getpid(),
                              "startedAt", c->started_at, "controlSocket", c->sock_path);
        char *s = json_dumps(o, JSON_COMPACT);
        json_decref(o);
        _cleanup_free_ char *path = xasprintf("%s/supervisor.json", c->dir);
        _cleanup_free_ char *tmp = xasprintf("%s.tmp", path);
        int fd = open(tmp, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0600);
        int r = fd < 0 ? -errno : write_full(fd, s, strlen(s));
        if (fd >= 0)
                close(fd);
        free(s);
        if (r >= 0 && rename(tmp, path) < 0)
                r = -errno;
        return r < 0 ? al_error_set(err, r, "writing %s", path) : 0;
}

/* 0 once told (or nobody to tell); -EPIPE when whoever started us is gone. */
static int tell_ready(int fd, const char *error)
{
        if (fd < 0)
                return 0;
        char buf[AL_ERROR_MAX + 16];
        snprintf(buf, sizeof(buf), error ? "error: %s\n" : "ok\n", error);
        int r = write_full(fd, buf, strlen(buf));
        close(fd);
        return r;
}

int control_serve(const struct control_config *cfg, struct al_error *err)
{
        const struct policy *p = cfg->policy;
        struct control c = {.cfg = cfg, .policy = p};
        struct gitguard *gg = NULL;
        _cleanup_free_ char *cg_name = NULL, *state = NULL;
        int r;

        c.sp.pid = c.sp.pidfd = c.sp.sync_fd = c.sp.upper_fd = -1;
        c.snap_fd = -1;
        for (int i = 0; i < SPAWN_LISTEN_MAX; i++)
                c.sp.listen_fds[i] = -1;
        signal(SIGPIPE, SIG_IGN);
        event_set_log_callback(drop_event_log);

        time_t now = time(NULL);
        struct tm tm;
        gmtime_r(&now, &tm);
        strftime(c.started_at, sizeof(c.started_at), "%Y-%m-%dT%H:%M:%SZ", &tm);

        if (strspn(cfg->id, "0123456789abcdef") != 16 || cfg->id[16]) {
                r = al_error_set(err, 0, "sandbox id \"%s\": expected 16 hex digits", cfg->id);
                goto fail_early;
        }
        snprintf(c.dir, sizeof(c.dir), "%s/%s", cfg->run_dir, cfg->id);
        snprintf(c.sock_path, sizeof(c.sock_path), "%s/control.sock", c.dir);
        if (strlen(c.sock_path) >= sizeof(((struct sockaddr_un *)0)->sun_path)) {
                r = al_error_set(err, ENAMETOOLONG, "control socket %s", c.sock_path);
                goto fail_early;
        }
        if (mkdir(cfg->run_dir, 0700) < 0 && errno != EEXIST) {
                r = al_error_set(err, errno, "creating %s", cfg->run_dir);
                goto fail_early;
        }
        if (mkdir(c.dir, 0700) < 0) {
                r = al_error_set(err, errno, "creating %s", c.dir);
                goto fail_early;
        }

        const char *home = env_home_for_uid(p->uid);
        r = env_build(p, home, env_user_for_uid(p->uid), NULL, &c.envp, err);
        if (r >= 0)
                r = gates_check_routes(p, cfg->secrets, cfg->id, cfg->account, err);
        if (r >= 0 && cfg->audit_path) {
                r = gates_open_audit(cfg->audit_path, cfg->secrets, cfg->audit_rotate, &c.audit, err);
                if (r < 0)
                        al_error_wrap(err, "audit");
        }
        if (r < 0)
                goto fail;
        /* The daemon tells "error: audit: …" apart: the audit log, not the
         * sandbox, is what failed. */
        if (record_ahead(&c, "sandbox.created", events_sandbox_created(p)) < 0) {
                r = al_error_set_message(err, EIO, "%s", c.audit_fault);
                goto fail;
        }

        struct cgroup_limits lim;
        cg_name = xasprintf("airlock-%s", cfg->id);
        r = cgroup_limits_from_policy(p, &lim, err);
        if (r >= 0)
                r = cgroup_setup(cg_name, &lim, &c.cg, err);
        if (r >= 0 && p->limits.workspace_disk && p->workspace)
                r = quota_apply(p->workspace, p->limits.workspace_disk, cfg->id, &c.wq, err);
        if (r < 0)
                goto fail;

        struct spawn_config sc = {
                .policy = p,
                .argv = NULL,
                .envp = c.envp,
                .home = home,
                .caller_home = cfg->caller_home,
                .stdin_fd = -1,
                .stdout_fd = -1,
                .stderr_fd = -1,
                .cgroup = c.cg,
        };
        uint64_t started_ns = now_realtime_us() * 1000;
        gg = gitguard_begin(p);
        r = spawn_sandbox(&sc, &c.sp, err);
        if (r < 0)
                goto fail;
        if (c.sp.upper_fd >= 0) {
                /* Fail closed: changes with nowhere to be kept are not
                 * worth the agent's work. */
                if (!cfg->keep_root)
                        r = al_error_set(err, 0, "the copy-on-write workspace needs a place "
                                                 "to keep its changes (--keep-root)");
                else
                        r = review_create(cfg->keep_root, cfg->id, p->workspace, started_ns,
                                          &c.review_dir, err);
                if (r < 0)
                        goto fail;
        }

        c.base = event_base_new();
        if (!c.base) {
                r = al_error_set(err, ENOMEM, "creating the event loop");
                goto fail;
        }
        r = gates_start_netgate(c.base, p, cfg->id, cfg->secrets, cfg->account, c.sp.listen_fds,
                                on_net_decision, &c, &c.gate, err);
        if (r < 0)
                goto fail;

        struct sockaddr_un sun = {.sun_family = AF_UNIX};
        snprintf(sun.sun_path, sizeof(sun.sun_path), "%s", c.sock_path);
        unlink(c.sock_path);
        mode_t old = umask(0177);
        c.listener = evconnlistener_new_bind(c.base, on_accept, &c,
                                             LEV_OPT_CLOSE_ON_FREE | LEV_OPT_CLOSE_ON_EXEC, 64,
                                             (struct sockaddr *)&sun, sizeof(sun));
        umask(old);
        if (!c.listener) {
                r = al_error_set(err, errno, "listening on %s", c.sock_path);
                goto fail;
        }
        r = write_state(&c, err);
        if (r < 0)
                goto fail;

        c.ev_sync = event_new(c.base, c.sp.sync_fd, EV_READ | EV_PERSIST, on_sync, &c);
        event_add(c.ev_sync, NULL);
        if (c.audit) {
                c.ev_flush = event_new(c.base, -1, EV_PERSIST, on_flush, &c);
                struct timeval tv = {.tv_sec = 0, .tv_usec = 100000};
                event_add(c.ev_flush, &tv);
        }
        static const int sigs[] = {SIGINT, SIGTERM, SIGHUP};
        for (size_t i = 0; i < ARRAY_SIZE(sigs); i++) {
                c.ev_signals[i] = evsignal_new(c.base, sigs[i], on_signal, &c);
                event_add(c.ev_signals[i], NULL);
        }

        /* The daemon that started us died before it learnt we are ready: it
         * has no record of this sandbox, and nobody knows its id. */
        if (tell_ready(cfg->ready_fd, NULL) < 0) {
                r = al_error_set(err, EPIPE, "telling the daemon the sandbox is ready");
                goto cleanup;
        }
        release_startup_memory();
        event_base_dispatch(c.base);
        r = 0;
        goto cleanup;

fail:
        tell_ready(cfg->ready_fd, err->msg);
cleanup:
        if (c.listener)
                evconnlistener_free(c.listener);
        unlink(c.sock_path);
        for (int i = 0; i < CONTROL_MAX_PROCS; i++)
                if (c.procs[i]) {
                        for (size_t k = 0; k < ARRAY_SIZE(c.procs[i]->attached); k++)
                                if (c.procs[i]->attached[k])
                                        c.procs[i]->attached[k]->streaming = NULL;
                        proc_free(c.procs[i]);
                }
        c.gate = netgate_free(c.gate);
        if (c.sp.pid > 0) {
                if (c.sp.pidfd >= 0)
                        syscall(SYS_pidfd_send_signal, c.sp.pidfd, SIGKILL, NULL, 0);
                while (waitpid(c.sp.pid, NULL, 0) < 0 && errno == EINTR)
                        ;
        }
        gitguard_finish(gg, c.audit, cfg->id, NULL, NULL);
        snap_reap(&c, true);
        if (c.review_dir && c.sp.upper_fd >= 0) {
                /* Every process of the sandbox is gone: this copy is final. */
                struct review_summary sum = {0};
                struct al_error re = {0};
                int rr = review_recapture(c.sp.upper_fd, c.review_dir, p->limits.disk, &sum, &re);
                if (rr < 0)
                        record(&c, "review.failed",
                               json_pack("{s:s, s:s, s:s}", "dir", c.review_dir, "reason",
                                         rr == -EDQUOT ? "disk_limit" : "error", "message", re.msg));
                else {
                        json_t *f = review_counts(&sum);
                        json_object_set_new(f, "dir", json_string(c.review_dir));
                        record(&c, "review.kept", f);
                }
        }
        if (c.sp.upper_fd >= 0)
                close(c.sp.upper_fd);
        free(c.review_dir);
        if (c.ev_sync)
                event_free(c.ev_sync);
        if (c.ev_flush)
                event_free(c.ev_flush);
        for (size_t i = 0; i < ARRAY_SIZE(c.ev_signals); i++)
                if (c.ev_signals[i])
                        event_free(c.ev_signals[i]);
        if (c.base)
                event_base_free(c.base);
        if (c.sp.sync_fd >= 0)
                close(c.sp.sync_fd);
        if (c.sp.pidfd >= 0)
                close(c.sp.pidfd);
        for (int i = 0; i < SPAWN_LISTEN_MAX; i++)
                if (c.sp.listen_fds[i] >= 0)
                        close(c.sp.listen_fds[i]);
        c.wq = quota_release(c.wq);
        c.cg = cgroup_free(c.cg);
        record(&c, "sandbox.destroyed", json_pack("{}"));
        c.audit = audit_close(c.audit);
        strv_free(c.envp);
        state = xasprintf("%s/supervisor.json", c.dir);
        unlink(state);
        rmdir(c.dir);
        return r;

fail_early:
        tell_ready(cfg->ready_fd, err->msg);
        return r;
}
