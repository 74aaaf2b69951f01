/* SPDX-License-Identifier: Apache-2.0 */
#include <event2/buffer.h>
#include <event2/bufferevent.h>
#include <event2/event.h>
#include <fcntl.h>
#include <poll.h>
#include <sys/ioctl.h>
#include <termios.h>
#include <jansson.h>
#include <signal.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include "trace.h"
#include "caps.h"
#include "cgroup.h"
#include "control-internal.h"
#include "control-proto.h"
#include "idrange.h"
#include "events.h"
#include "spawn.h"
#include "util.h"

/* The process table: exec asks pid 1 to start a process; its output is
 * read into numbered events, kept for attach and reconnects, and streamed
 * to its clients, with backpressure; its end is recorded (core.h). */

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
                if (p->attached[i] && !p->attached[i]->watcher && p->attached[i]->bev &&
                    evbuffer_get_length(bufferevent_get_output(p->attached[i]->bev)) > max)
                        return true;
        return false;
}

void control_proc_maybe_resume(struct proc *p)
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
void control_proc_abandon(struct proc *p, bool discard)
{
        if (p->exited || p->failed) {
                if (!discard)
                        return;
        } else {
                if (!p->error_code)
                        p->error_code = "abandoned";
                spawn_kill_request(p->ctl->core.sp.sync_fd, p->id, SIGKILL);
        }
        if (discard) {
                p->discard = true;
                control_proc_maybe_resume(p);
        }
}

static void on_proc_stall(evutil_socket_t fd, short what, void *arg)
{
        control_proc_abandon(arg, true);
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
        if (!p->background && proc_queue_full(p, CONTROL_STREAM_MAX))
                proc_pause(p);
        /* A background process is not held back by who watches it, nor any
         * process by a watcher (another grant reading it): one that falls
         * that far behind is let go (what is kept can be attached to
         * again). */
        for (size_t i = 0; i < ARRAY_SIZE(p->attached); i++) {
                struct client *cl = p->attached[i];
                if (cl && (p->background || cl->watcher) &&
                    evbuffer_get_length(bufferevent_get_output(cl->bev)) > CONTROL_STREAM_MAX) {
                        p->attached[i] = NULL;
                        cl->streaming = NULL;
                        control_client_free(cl);
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
                        control_client_finish(cl);
                }
}

void control_proc_free(struct proc *p)
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
        if (p->ev_oom)
                event_free(p->ev_oom);
        if (p->kept) {
                size_t k = evbuffer_get_length(p->kept);
                p->ctl->kept_total -= k <= p->ctl->kept_total ? k : p->ctl->kept_total;
                evbuffer_free(p->kept);
        }
        json_decref(p->argv);
        free(p);
}

/* The sandbox's OOM kills before the process ran, once: an exit whose
 * count is higher and whose signal is SIGKILL is "oom_killed". Read just
 * after "started" (or, at the latest, when the exit comes); one killed by
 * the OOM killer within that first moment is reported as SIGKILL without
 * "oom_killed". */
static void proc_oom_before(struct proc *p)
{
        struct control *c = p->ctl;
        if (p->oom_known || !c->core.cg)
                return;
        if (p->ev_oom)
                evtimer_del(p->ev_oom);
        struct cgroup_usage cu;
        c->core.cg->ops->usage(c->core.cg, &cu);
        p->oom_before = cu.oom_kills;
        p->oom_known = true;
}

static void on_proc_oom_before(evutil_socket_t fd, short what, void *arg)
{
        proc_oom_before(arg);
}

/* The process is over when pid 1 has reported its end and both of its
 * output pipes are drained. */
static void proc_maybe_done(struct proc *p)
{
        struct control *c = p->ctl;
        /* Once: the linger timer may still fire after the output closed. */
        if (p->done || !(p->exited || p->failed) || p->out_fd[0] >= 0 || p->out_fd[1] >= 0)
                return;
        struct cgroup_usage cu = {0};
        if (c->core.cg)
                c->core.cg->ops->usage(c->core.cg, &cu);
        al_trace_mark("sv.end_usage");
        if (p->exited) {
                int st = p->end.status;
                if (p->error_code) {
                        /* timeout or output_limit, decided when we killed it */
                } else if (cu.oom_kills > p->oom_before && WIFSIGNALED(st) &&
                           WTERMSIG(st) == SIGKILL) {
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
        json_t *ev = json_pack(
            "{s:s, s:i, s:i, s:o, s:o, s:I, s:{s:I, s:I, s:I, s:I}}", "type", "exit", "pid", p->id,
            "exitCode", p->exit_code, "signal", p->signal ? json_integer(p->signal) : json_null(),
            "errorCode", p->error_code ? json_string(p->error_code) : json_null(), "durationMs",
            (json_int_t)dur, "usage", "cpuUserMs", (json_int_t)p->end.cpu_user_ms, "cpuSystemMs",
            (json_int_t)p->end.cpu_system_ms, "maxRssKb", (json_int_t)p->end.max_rss_kb,
            "outputBytes", (json_int_t)p->output);
        char msg[256];
        events_limit_message(p->error_code,
                             p->error_code && STREQ(p->error_code, "timeout")
                                 ? p->timeout_ms
                                 : c->policy->limits.output,
                             msg, sizeof(msg));
        struct events_end end = {
            .pid = p->id,
            .exit_code = p->exit_code,
            .signal = p->signal,
            .error_code = p->error_code,
            .message = msg,
            .duration_ms = dur,
            .cpu_ms = cu.cpu_usec / 1000,
            .memory_peak = cu.memory_peak,
            .cpu_user_ms = p->end.cpu_user_ms,
            .cpu_system_ms = p->end.cpu_system_ms,
            .max_rss_kb = p->end.max_rss_kb,
            .output_bytes = p->output,
        };
        sv_core_process_ended(&c->core, &end);
        al_trace_mark("sv.ended_recorded");
        proc_event(p, ev);
        p->done = true;
        detach_all(p);
        if (p->ev_timeout)
                evtimer_del(p->ev_timeout);
        if (p->ev_linger)
                evtimer_del(p->ev_linger);
        evtimer_del(p->ev_stall);
        /* A finished process stays listed, with its kept events, for attach
         * and for a client that reconnects, until its slot is needed
         * (control_do_exec) or the sandbox ends. */
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
                        spawn_kill_request(p->ctl->core.sp.sync_fd, p->id, SIGKILL);
                }
        }
        uint64_t offset = p->output;
        if (offset == 0)
                al_trace_mark("sv.first_output");
        p->output += keep;
        if (keep == 0)
                return;
        _cleanup_free_ char *data = base64_encode(buf, keep);
        json_t *ev = json_pack("{s:s, s:s}", "type", which ? "stderr" : "stdout", "data", data);
        /* A terminal's output carries its byte offset: a client that
         * reconnects asks for what follows the last byte it has. */
        if (p->pty)
                json_object_set_new(ev, "offset", json_integer((json_int_t)offset));
        proc_event(p, ev);
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
        spawn_kill_request(p->ctl->core.sp.sync_fd, p->id, SIGKILL);
}

static struct proc *find_proc(struct control *c, int id)
{
        if (id <= 0)
                return NULL;
        struct proc *p = c->procs[id % CONTROL_MAX_PROCS];
        return p && p->id == id ? p : NULL;
}

void control_on_sync(evutil_socket_t fd, short what, void *arg)
{
        struct control *c = arg;
        struct spawn_event ev;
        if (spawn_read_event(fd, &ev) < 0) {
                /* pid 1 is gone: the sandbox is over. */
                control_destroy(c);
                return;
        }
        struct proc *p = find_proc(c, ev.id);
        if (!p)
                return;
        switch (ev.type) {
        case SPAWN_EVENT_STARTED:
                al_trace_mark("sv.started");
                p->started = true;
                if (ev.pty_fd >= 0 && (!p->pty || p->out_fd[0] >= 0)) {
                        close(ev.pty_fd);
                } else if (ev.pty_fd >= 0) {
                        p->out_fd[0] = ev.pty_fd;
                        p->in_fd = fcntl(ev.pty_fd, F_DUPFD_CLOEXEC, 3);
                        evutil_make_socket_nonblocking(ev.pty_fd);
                        p->ev_out[0] = event_new(c->core.base, ev.pty_fd, EV_READ | EV_PERSIST,
                                                 on_proc_output, p);
                }
                if (p->error_code && STREQ(p->error_code, "abandoned"))
                        spawn_kill_request(c->core.sp.sync_fd, p->id,
                                           SIGKILL); /* left before it started */
                for (int k = 0; k < 2; k++)
                        if (p->ev_out[k] && !p->paused)
                                event_add(p->ev_out[k], NULL);
                json_t *started = json_pack("{s:s, s:i}", "type", "started", "pid", p->id);
                if (p->pty)
                        json_object_set_new(started, "pty", json_true());
                proc_event(p, started);
                /* The sandbox's OOM kills so far: read in the loop's next
                 * turn, after "started" has been written to the client
                 * (its write waits for that turn too), so that the
                 * cgroup's files, which cost more than the rest of a
                 * start, are off the path to pid 1 and to the client. */
                if (c->core.cg && !p->ev_oom) {
                        static const struct timeval now = {0, 0};
                        p->ev_oom = evtimer_new(c->core.base, on_proc_oom_before, p);
                        if (!p->ev_oom || evtimer_add(p->ev_oom, &now) < 0)
                                proc_oom_before(p);
                }
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
                               : ev.failure == SPAWN_FAILED_EXEC         ? 126
                                                                         : 125;
                proc_event(p, json_pack("{s:s, s:s}", "type", "error", "message", ev.message));
                proc_maybe_done(p);
                break;
        case SPAWN_EVENT_EXIT:
                al_trace_mark("sv.exited");
                proc_oom_before(p); /* if its turn has not come yet */
                p->exited = true;
                p->end = ev;
                if (p->out_fd[0] >= 0 || p->out_fd[1] >= 0) {
                        struct timeval tv = {.tv_sec = 0, .tv_usec = 200000};
                        p->ev_linger = evtimer_new(c->core.base, on_proc_linger, p);
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

void control_do_exec(struct client *cl, json_t *req)
{
        struct control *c = cl->ctl;
        json_t *argv = json_object_get(req, "argv");
        bool background;
        _cleanup_(control_exec_clear) struct control_exec x = {0};
        const char *why = NULL;
        if (control_parse_exec(req, &x, &why) < 0)
                return control_send_error(cl, "bad_request", why);
        background = x.background;
        char why_uid[256];
        if (idrange_check_uid(c->policy, x.uid, why_uid, sizeof(why_uid))) {
                _cleanup_free_ char *m = xasprintf("\"uid\" %s", why_uid);
                return control_send_error(cl, "bad_request", m);
        }

        int slot = -1, id = 0;
        for (int tries = 0; tries < CONTROL_MAX_PROCS && slot < 0; tries++) {
                id = ++c->next_id;
                struct proc *old = c->procs[id % CONTROL_MAX_PROCS];
                if (old && old->done) {
                        /* The oldest finished process gives its slot up. */
                        detach_all(old);
                        c->procs[id % CONTROL_MAX_PROCS] = NULL;
                        control_proc_free(old);
                        old = NULL;
                }
                if (!old)
                        slot = id % CONTROL_MAX_PROCS;
        }
        if (slot < 0)
                return control_send_error(cl, "too_many_processes",
                                          "too many processes in this sandbox");

        _cleanup_strv_ char **ev = NULL;
        size_t n_ev = 0;
        /* The clean environment as the live capabilities have it now
         * (caps.h: env granted and revoked at run time). */
        _cleanup_strv_ char **base = caps_env(c->core.caps, c->envp);
        for (char **e = base; e && *e; e++)
                ev = strv_append(ev, &n_ev, *e);
        for (char **e = x.env; e && *e; e++)
                ev = strv_append(ev, &n_ev, *e);

        int pin[2] = {-1, -1}, pout[2] = {-1, -1}, perr[2] = {-1, -1};
        /* A terminal comes from pid 1 with the "started" report instead. */
        if (!x.pty && (pipe_pair(pin) < 0 || pipe_pair(pout) < 0 || pipe_pair(perr) < 0)) {
                for (int k = 0; k < 2; k++) {
                        if (pin[k] >= 0)
                                close(pin[k]);
                        if (pout[k] >= 0)
                                close(pout[k]);
                        if (perr[k] >= 0)
                                close(perr[k]);
                }
                return control_send_error(cl, "internal", "creating pipes");
        }
        /* Written ahead: the process starts only once the log says so, and
         * a log that cannot be written refuses the exec. */
        if (sv_core_record_ahead(&c->core, "process.started",
                                 events_process_started(id, json_incref(argv))) < 0) {
                for (int k = 0; k < 2; k++)
                        if (!x.pty) {
                                close(pin[k]);
                                close(pout[k]);
                                close(perr[k]);
                        }
                return control_send_error(cl, "audit_failed", c->core.audit_last);
        }
        al_trace_mark("sv.audit_ahead");
        struct proc *p = xcalloc(1, sizeof(*p));
        p->ctl = c;
        p->id = id;
        p->argv = json_incref(argv);
        p->background = background;
        p->pty = x.pty;
        p->in_fd = pin[1];
        p->out_fd[0] = pout[0];
        p->out_fd[1] = perr[0];
        p->kept = evbuffer_new();
        p->kept_first = 1;
        p->start_us = now_monotonic_us();
        p->stall_ms = x.stall_ms;
        p->ev_stall = evtimer_new(c->core.base, on_proc_stall, p);
        c->procs[slot] = p;

        int fds[3] = {pin[0], pout[1], perr[1]};
        struct spawn_pty tty = {.on = true, .rows = x.rows, .cols = x.cols};
        int r = spawn_exec_request_as(c->core.sp.sync_fd, id, x.argv, ev, x.cwd, x.pty ? NULL : fds,
                                      x.pty ? &tty : NULL,
                                      x.uid == (long)c->policy->uid ? SPAWN_EXEC_OWN_USER : x.uid);
        if (!x.pty) {
                close(pin[0]);
                close(pout[1]);
                close(perr[1]);
        }
        if (r < 0) {
                c->procs[slot] = NULL;
                control_proc_free(p);
                return control_send_error(cl, r == -E2BIG ? "bad_request" : "internal",
                                          r == -E2BIG ? "argv and env are too large"
                                                      : "asking pid 1 to start it");
        }
        al_trace_mark("sv.pid1_asked");
        /* Synced while pid 1 forks, and before "started" is reported; a
         * sync that fails kills the process (audit_fault). */
        sv_core_commit(&c->core);
        al_trace_mark("sv.audit_commit");
        for (int k = 0; k < 2 && !x.pty; k++) {
                evutil_make_socket_nonblocking(p->out_fd[k]);
                p->ev_out[k] =
                    event_new(c->core.base, p->out_fd[k], EV_READ | EV_PERSIST, on_proc_output, p);
                /* Armed once pid 1 says it started (or failed): no output
                 * line may come before "started". */
        }
        if (x.timeout_s > 0) {
                double t = x.timeout_s;
                p->timeout_ms = (uint64_t)(t * 1000);
                struct timeval tv = {.tv_sec = (time_t)t,
                                     .tv_usec = (suseconds_t)((t - (double)(time_t)t) * 1e6)};
                p->ev_timeout = evtimer_new(c->core.base, on_proc_timeout, p);
                evtimer_add(p->ev_timeout, &tv);
        }
        /* Small stdin goes in at once; the rest of a background process's
         * input comes through "stdin" requests. */
        if (x.stdin_len > 0)
                (void)write_full(p->in_fd, x.stdin_data, x.stdin_len);
        if (!background && !x.pty) {
                close(p->in_fd);
                p->in_fd = -1;
        }
        p->attached[0] = cl;
        p->owner = cl;
        cl->streaming = p;
}

void control_do_attach(struct client *cl, json_t *req)
{
        struct proc *p = find_proc(cl->ctl, (int)json_integer_value(json_object_get(req, "pid")));
        if (!p)
                return control_send_error(cl, "unknown_process", "no such process");
        json_t *jfrom = json_object_get(req, "from");
        if (jfrom && !json_is_null(jfrom) &&
            (!json_is_integer(jfrom) || json_integer_value(jfrom) < 0))
                return control_send_error(cl, "bad_request", "\"from\" must be a sequence number");
        json_t *jwatch = json_object_get(req, "watch");
        if (jwatch && !json_is_boolean(jwatch))
                return control_send_error(cl, "bad_request", "\"watch\" must be a boolean");
        bool watch = json_is_true(jwatch);
        /* Watchers take at most all but CONTROL_HOLDER_SLOTS places: the
         * process's own clients can always attach again. */
        size_t watchers = 0, free_slots = 0;
        for (size_t i = 0; i < ARRAY_SIZE(p->attached); i++) {
                watchers += p->attached[i] && p->attached[i]->watcher;
                free_slots += !p->attached[i];
        }
        if (!p->done && (free_slots == 0 ||
                         (watch && watchers >= ARRAY_SIZE(p->attached) - CONTROL_HOLDER_SLOTS)))
                return control_send_error(cl, "too_many_attached", "too many clients attached");
        if (watch && !cl->watcher) {
                if (cl->ctl->n_watchers >= CONTROL_MAX_WATCHERS)
                        return control_send_error(cl, "too_many_attached",
                                                  "too many clients attached");
                cl->ctl->n_watchers++;
        }
        cl->watcher = cl->watcher || watch;
        uint64_t from = (uint64_t)json_integer_value(jfrom);
        if (from > p->seq + 1)
                from = p->seq + 1;
        if (from > 0 && from < p->kept_first)
                /* What was dropped from the kept events is said, not skipped. */
                control_send_json(cl, json_pack("{s:s, s:I, s:I}", "type", "gap", "from",
                                                (json_int_t)from, "to",
                                                (json_int_t)(p->kept_first - 1)));
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
                control_client_finish(cl);
                return;
        }
        for (size_t i = 0; i < ARRAY_SIZE(p->attached); i++)
                if (!p->attached[i]) {
                        p->attached[i] = cl;
                        cl->streaming = p;
                        return;
                }
        control_send_error(cl, "internal", "too many clients attached");
}

/* Input for a process: a pipe blocks; a terminal's master is
 * non-blocking (shared with its output), so a full input queue is waited
 * on, briefly: a terminal that reads nothing for 5 s refuses the rest. */
static int pty_write(struct proc *p, const unsigned char *buf, size_t len)
{
        if (!p->pty)
                return write_full(p->in_fd, buf, len);
        uint64_t deadline = now_monotonic_us() + 5000000;
        size_t off = 0;
        while (off < len) {
                ssize_t n = write(p->in_fd, buf + off, len - off);
                if (n > 0) {
                        off += (size_t)n;
                        continue;
                }
                if (n < 0 && errno == EINTR)
                        continue;
                if (n < 0 && errno == EAGAIN && now_monotonic_us() < deadline) {
                        struct pollfd pfd = {.fd = p->in_fd, .events = POLLOUT};
                        (void)poll(&pfd, 1, 100);
                        continue;
                }
                return n < 0 ? -errno : -EIO;
        }
        return 0;
}

void control_do_stdin(struct client *cl, json_t *req)
{
        struct proc *p = find_proc(cl->ctl, (int)json_integer_value(json_object_get(req, "pid")));
        if (!p)
                return control_send_error(cl, "unknown_process", "no such process");
        const char *data = json_string_value(json_object_get(req, "data"));
        _cleanup_free_ unsigned char *in = NULL;
        size_t len = 0;
        if (data && base64_decode(data, &in, &len) < 0)
                return control_send_error(cl, "bad_request", "\"data\" is not valid base64");
        if (p->in_fd < 0)
                return control_send_error(cl, "bad_request", "the process's stdin is closed");
        if (len > 0 && pty_write(p, in, len) < 0)
                return control_send_error(cl, "bad_request",
                                          "the process no longer reads its stdin");
        if (p->pty && json_is_true(json_object_get(req, "eof"))) {
                /* A terminal has no end of input but the one typed. */
                (void)pty_write(p, (const unsigned char *)"\x04", 1);
        } else if (json_is_true(json_object_get(req, "eof"))) {
                close(p->in_fd);
                p->in_fd = -1;
        }
        control_send_json(cl, json_pack("{s:b}", "ok", 1));
        control_client_finish(cl);
}

void control_do_signal(struct client *cl, json_t *req)
{
        struct proc *p = find_proc(cl->ctl, (int)json_integer_value(json_object_get(req, "pid")));
        json_int_t sig = json_integer_value(json_object_get(req, "signal"));
        if (!p)
                return control_send_error(cl, "unknown_process", "no such process");
        if (sig <= 0 || sig >= NSIG)
                return control_send_error(cl, "bad_request", "\"signal\" must be a signal number");
        if (json_is_true(json_object_get(req, "abandoned")))
                control_proc_abandon(p, false); /* its client is gone: say so in its result */
        else if (!p->exited && !p->failed)
                spawn_kill_request(cl->ctl->core.sp.sync_fd, p->id, (int)sig);
        control_send_json(cl, json_pack("{s:b}", "ok", 1));
        control_client_finish(cl);
}

/* A terminal's new size: the kernel tells its foreground job (SIGWINCH). */
void control_do_resize(struct client *cl, json_t *req)
{
        struct proc *p = find_proc(cl->ctl, (int)json_integer_value(json_object_get(req, "pid")));
        uint16_t rows, cols;
        if (!p)
                return control_send_error(cl, "unknown_process", "no such process");
        if (control_parse_size(req, &rows, &cols) < 0)
                return control_send_error(cl, "bad_request",
                                          "\"rows\" and \"cols\" must be numbers from 1 to 4096");
        if (!p->pty)
                return control_send_error(cl, "bad_request", "the process has no terminal");
        if (p->in_fd >= 0 && !p->exited && !p->failed) {
                struct winsize ws = {.ws_row = rows, .ws_col = cols};
                if (ioctl(p->in_fd, TIOCSWINSZ, &ws) < 0)
                        return control_send_error(cl, "internal", "resizing the terminal");
        }
        control_send_json(cl, json_pack("{s:b}", "ok", 1));
        control_client_finish(cl);
}
