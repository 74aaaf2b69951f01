/* SPDX-License-Identifier: Apache-2.0 */
#include <event2/event.h>
#include <fcntl.h>
#include <inttypes.h>
#include <jansson.h>
#include <pthread.h>
#include <signal.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/syscall.h>
#include <sys/wait.h>

#include "audit.h"
#include "cgroup.h"
#include "caps.h"
#include "caps-socket.h"
#include "core.h"
#include "env.h"
#include "events.h"
#include "gates.h"
#include "netgate/netgate.h"
#include "ports.h"
#include "askprompt.h"
#include "ptyio.h"
#include "quota.h"
#include "review.h"
#include "secrets.h"
#include "opencalls.h"
#include "spawn.h"
#include "supervisor.h"
#include "term.h"
#include "trace.h"
#include "util.h"

struct stream {
        struct supervisor *sv;
        int fd;
        int out;
        struct event *ev;
        struct redactor_stream *redact; /* known secrets never reach the host's output */
};

/* airlock run's driver of the supervisor core (core.h): one command, its
 * output to the host's stdio, the wall clock and the output limit. */
struct supervisor {
        struct sv_core core;
        const struct supervisor_config *cfg;
        struct supervisor_result *res;
        struct stream streams[2];
        struct event *ev_timeout;
        bool exited;        /* pid 1 reported, or is gone */
        bool have_status;
        int status;
        bool timed_out;
        bool output_exceeded;
        int interrupts;
        uint64_t output;
        int net_log_fd;
        int pty_fd;          /* -t: the terminal's master, for input and resizes */
        struct ptyio *ptyio; /* the user's input and size into it */
        struct caps_socket *control; /* --control PATH: the caps op (caps-socket.h) */
        struct ask_prompt *askp; /* --ask: the asks put to the user (askprompt.h) */
};

/* An event that cannot be written is not silently lost: the sandbox ends
 * rather than run unrecorded, and the run reports exit 125 audit_failed
 * (with the first cause). */
static void on_audit_fault(struct sv_core *c, void *driver)
{
        sv_core_kill(c);
}

static int record(struct supervisor *sv, const char *kind, json_t *fields)
{
        return sv_core_record(&sv->core, kind, fields);
}

static void on_net_decision(void *ud, const struct netgate_record *rec)
{
        struct supervisor *sv = ud;
        json_t *ev = events_net_decision(rec);
        if (sv->net_log_fd >= 0 && ev) {
                json_t *line = json_deep_copy(ev);
                json_object_set_new(line, "sandbox", json_string(rec->sandbox));
                char *s = json_dumps(line, JSON_COMPACT | JSON_PRESERVE_ORDER);
                if (s) {
                        size_t n = strlen(s);
                        s[n] = '\n';
                        (void)write_full(sv->net_log_fd, s, n + 1);
                        free(s);
                }
                json_decref(line);
        }
        record(sv, events_net_kind(rec), ev);
}

static void kill_sandbox(struct supervisor *sv)
{
        sv_core_kill(&sv->core);
}

static void maybe_finish(struct supervisor *sv)
{
        if (sv->exited && sv->streams[0].fd < 0 && sv->streams[1].fd < 0)
                event_base_loopexit(sv->core.base, NULL);
}

static void close_stream(struct stream *s)
{
        if (s->ev) {
                event_free(s->ev);
                s->ev = NULL;
        }
        if (s->fd >= 0) {
                close(s->fd);
                s->fd = -1;
        }
        if (s->redact) {
                char *tail = NULL;
                size_t tlen = 0;
                if (redactor_stream_finish(s->redact, &tail, &tlen) >= 0 && tlen && s->out >= 0)
                        (void)write_full(s->out, tail, tlen);
                free(tail);
                s->redact = redactor_stream_free(s->redact);
        }
}

static void forward(struct stream *s, const char *buf, size_t len)
{
        if (s->out < 0 || len == 0)
                return;
        if (!s->redact) {
                (void)write_full(s->out, buf, len);
                return;
        }
        char *clean = NULL;
        size_t clen = 0;
        if (redactor_stream_feed(s->redact, buf, len, &clean, &clen) >= 0 && clen)
                (void)write_full(s->out, clean, clen);
        free(clean);
}

static void on_output(evutil_socket_t fd, short what, void *arg)
{
        struct stream *s = arg;
        struct supervisor *sv = s->sv;
        char buf[64 * 1024];
        ssize_t n = read(fd, buf, sizeof(buf));
        if (n < 0 && (errno == EAGAIN || errno == EINTR))
                return;
        if (n <= 0) {
                close_stream(s);
                maybe_finish(sv);
                return;
        }
        uint64_t limit = sv->cfg->policy->limits.output;
        size_t keep = (size_t)n;
        if (limit && sv->output + keep > limit) {
                keep = (size_t)(limit - sv->output);
                if (!sv->output_exceeded) {
                        sv->output_exceeded = true;
                        kill_sandbox(sv);
                }
        }
        sv->output += keep;
        forward(s, buf, keep);
}

/* While an --ask prompt is up, the sandbox's output waits in its pipes
 * (askprompt.h). */
static void hold_output(void *ud, bool hold)
{
        struct supervisor *sv = ud;
        for (int i = 0; i < 2; i++)
                if (sv->streams[i].ev) {
                        if (hold)
                                event_del(sv->streams[i].ev);
                        else
                                event_add(sv->streams[i].ev, NULL);
                }
}

static void on_sync(evutil_socket_t fd, short what, void *arg)
{
        struct supervisor *sv = arg;
        int status;
        if (spawn_read_exit(fd, &status) == 0) {
                sv->status = status;
                sv->have_status = true;
        }
        /* One report, or the end of pid 1: either way the sandbox is over. */
        event_del(sv->core.ev_sync);
        sv->exited = true;
        maybe_finish(sv);
}

static void on_timeout(evutil_socket_t fd, short what, void *arg)
{
        struct supervisor *sv = arg;
        sv->timed_out = true;
        kill_sandbox(sv);
}

static void on_signal(evutil_socket_t sig, short what, void *arg)
{
        struct supervisor *sv = arg;
        /* The first interrupt goes to the command through pid 1; the next
         * ends the sandbox. */
        if (sv->interrupts++ > 0)
                kill_sandbox(sv);
        else if (sv->core.sp.pidfd >= 0)
                syscall(SYS_pidfd_send_signal, sv->core.sp.pidfd, (int)sig, NULL, 0);
}

static void fill_usage(struct supervisor *sv, const struct cgroup_usage *cu,
                       const struct rusage *ru)
{
        struct supervisor_usage *u = &sv->res->usage;
        u->cpu_user_ms = (uint64_t)ru->ru_utime.tv_sec * 1000 + (uint64_t)ru->ru_utime.tv_usec / 1000;
        u->cpu_system_ms =
                (uint64_t)ru->ru_stime.tv_sec * 1000 + (uint64_t)ru->ru_stime.tv_usec / 1000;
        u->max_rss_kb = (uint64_t)ru->ru_maxrss;
        u->output_bytes = sv->output;
        if (cu) {
                u->cpu_ms = cu->cpu_usec / 1000;
                u->memory_peak = cu->memory_peak;
                u->io_read_bytes = cu->io_read_bytes;
                u->io_write_bytes = cu->io_write_bytes;
                u->io_measured = cu->io_measured;
        }
}

static void set_failure(struct supervisor_result *res, int exit_code, const char *code,
                        const char *msg)
{
        res->exit_code = exit_code;
        res->error_code = code;
        snprintf(res->message, sizeof(res->message), "%s", msg ? msg : "");
}

/* The command is the sandbox's first and only process: pid 1 in the audit
 * log's numbering, as `airlock supervise`'s first exec. */
static struct events_end run_end(const struct supervisor_result *res)
{
        return (struct events_end){
                .pid = 1,
                .exit_code = res->exit_code,
                .signal = res->signal,
                .error_code = res->error_code,
                .message = res->message,
                .duration_ms = res->duration_ms,
                .cpu_ms = res->usage.cpu_ms,
                .memory_peak = res->usage.memory_peak,
                .cpu_user_ms = res->usage.cpu_user_ms,
                .cpu_system_ms = res->usage.cpu_system_ms,
                .max_rss_kb = res->usage.max_rss_kb,
                .output_bytes = res->usage.output_bytes,
                .io_measured = res->usage.io_measured,
                .io_read_bytes = res->usage.io_read_bytes,
                .io_write_bytes = res->usage.io_write_bytes,
                .net_sent_bytes = res->usage.net_sent_bytes,
                .net_received_bytes = res->usage.net_received_bytes,
                .workspace_measured = res->usage.workspace_measured,
                .workspace_added_bytes = res->usage.workspace_added_bytes,
                .disk_measured = res->usage.disk_measured,
                .disk_peak_bytes = res->usage.disk_peak_bytes,
        };
}

/* -P: each forward's host listener, before the sandbox's output is read. */
static int open_ports(struct supervisor *sv, struct al_error *err)
{
        const struct supervisor_config *cfg = sv->cfg;
        sv->core.ports = sv_ports_new(&sv->core);
        for (size_t i = 0; i < cfg->n_ports; i++) {
                json_t *d = NULL;
                int r = sv_ports_open(sv->core.ports, &cfg->ports[i], &d, err);
                if (r < 0)
                        return r;
                if (cfg->on_port)
                        cfg->on_port(cfg->on_port_ud, cfg->ports[i].port,
                                     (unsigned)json_integer_value(json_object_get(d, "hostPort")),
                                     json_string_value(json_object_get(d, "bind")));
                json_decref(d);
        }
        return 0;
}

static void *cgroup_free_main(void *cg)
{
        cgroup_free(cg);
        return NULL;
}

/* cgroup_free(cg) on a thread of its own, which takes no signal; false
 * when none could be started (the caller frees it then). Only once the
 * sandbox is gone: a thread must never be alive while one is cloned
 * (cgroup-warm.c says why). */
static bool start_cgroup_free(struct cgroup *cg, pthread_t *ret)
{
        sigset_t all, old;
        sigfillset(&all);
        pthread_sigmask(SIG_SETMASK, &all, &old);
        bool ok = pthread_create(ret, NULL, cgroup_free_main, cg) == 0;
        pthread_sigmask(SIG_SETMASK, &old, NULL);
        return ok;
}

int supervisor_run(const struct supervisor_config *cfg, struct supervisor_result *res,
                   struct al_error *err)
{
        const struct policy *p = cfg->policy;
        struct supervisor sv = {.cfg = cfg, .res = res};
        _cleanup_strv_ char **envp = NULL;
        _cleanup_free_ char *cg_name = NULL, *tool_bin = NULL;
        int out_pipe[2] = {-1, -1}, err_pipe[2] = {-1, -1};
        struct al_error e = {0};
        int r;

        memset(res, 0, sizeof(*res));
        sv_core_init(&sv.core, p, on_audit_fault, &sv);
        struct sv_core *core = &sv.core;
        /* The capabilities the core made are freed on every way out, the
         * early failures included (sv_core_free frees them too; twice is
         * fine). */
        _cleanup_(sv_core_caps_freep) struct sv_core *caps_owner = core;
        core->caller_home = cfg->caller_home;
        core->caps->one_command = true;
        sv.streams[0].fd = sv.streams[1].fd = -1;
        sv.net_log_fd = -1;
        sv.pty_fd = -1;

        uint64_t start = core->start_us;
        /* A copy-on-write workspace's review compares host change times
         * with this. */
        uint64_t started_ns = p->workspace && p->workspace_mode == POLICY_WORKSPACE_OVERLAY
                                  ? review_start_ns()
                                  : now_realtime_us() * 1000;
        /* Which directory the workspace is now: accept writes there or
         * nowhere, whatever its path names by then. */
        struct review_ws_id ws_pin = {0};
        if (p->workspace && p->workspace_mode == POLICY_WORKSPACE_OVERLAY)
                (void)review_ws_pin(p->workspace, &ws_pin);
        r = sv_core_set_id(core, cfg->sandbox_id, err);
        if (r < 0)
                return r;
        memcpy(res->sandbox, core->id, sizeof(core->id));
        res->tier = policy_tier_name(p->tier);

        const char *home = env_home_for_uid(p->uid);
        r = env_build(p, home, env_user_for_uid(p->uid), cfg->term, &envp, err);
        if (r < 0)
                return r;
        r = sv_core_tool_endpoint(core, &envp, &tool_bin, err);
        if (r >= 0)
                r = sv_core_gate_env(core, cfg->secrets, &envp, err);
        if (r < 0)
                return r;
        al_trace_mark("sv.env");

        /* A broken pipe on the host's side must not kill the supervisor and
         * orphan the sandbox. */
        signal(SIGPIPE, SIG_IGN);

        struct redactor *redactor = cfg->secrets ? secrets_redactor(cfg->secrets) : NULL;
        r = gates_check_routes(p, cfg->secrets, res->sandbox, cfg->account, err);
        if (r >= 0 && cfg->audit_path)
                r = sv_core_open_audit(core, cfg->audit_path, cfg->audit_rotate, cfg->secrets, err);
        if (r < 0) {
                sv_core_gate_env_release(core);
                return r;
        }
        al_trace_mark("audit.open");
        if (cfg->net_log_path) {
                sv.net_log_fd = open(cfg->net_log_path,
                                     O_WRONLY | O_APPEND | O_CREAT | O_CLOEXEC | O_NOFOLLOW, 0600);
                if (sv.net_log_fd < 0) {
                        r = al_error_set(err, errno, "net log %s", cfg->net_log_path);
                        sv_core_close_audit(core);
                        sv_core_gate_env_release(core);
                        return r;
                }
        }
        /* Nothing runs before the audit log says the sandbox was created and
         * has room for its end: a full or failing disk refuses the run (exit
         * 125). It is synced within 100 ms (on_flush), and before the
         * result is reported. */
        if (sv_core_record_ahead(core, "sandbox.created", events_sandbox_created(p)) < 0) {
                set_failure(res, 125, "audit_failed", core->audit_first);
                goto done;
        }
        al_trace_mark("audit.created");

        struct cgroup_limits lim;
        cg_name = xasprintf("airlock-%s", res->sandbox);
        r = cgroup_limits_from_policy(p, &lim, &e);
        if (r >= 0)
                r = cgroup_open(cg_name, &lim, &core->cg, &e);
        if (r < 0) {
                set_failure(res, 125, "setup_failed", e.msg);
                goto done;
        }
        al_trace_mark("cgroup.open");
        /* A read-write workspace's own size (limits.workspaceDisk). */
        if (p->limits.workspace_disk && p->workspace &&
            quota_apply(p->workspace, p->limits.workspace_disk, res->sandbox, cfg->state_root,
                        &core->wq, &e) < 0) {
                set_failure(res, 125, "setup_failed", e.msg);
                goto done;
        }

        /* -t: one terminal instead of the three fds; its output is the
         * stdout stream (counted against limits.output and redacted as
         * stdout is), and stderr has no stream of its own. */
        if (!cfg->tty && (pipe2(out_pipe, O_CLOEXEC) < 0 || pipe2(err_pipe, O_CLOEXEC) < 0)) {
                al_error_set(&e, errno, "creating output pipes");
                set_failure(res, 125, "internal", e.msg);
                goto done;
        }

        sv_core_disk_begin(core);

        struct spawn_config sc = {
                .policy = p,
                .argv = cfg->argv,
                .envp = envp,
                .home = home,
                .caller_home = cfg->caller_home,
                .stdin_fd = cfg->tty ? -1 : cfg->stdin_fd,
                .stdout_fd = out_pipe[1],
                .stderr_fd = err_pipe[1],
                .cgroup = core->cg,
                .pty = {.on = cfg->tty},
                .tool_bin = tool_bin,
                .ca_bundle = core->ca_bundle,
        };
        if (cfg->tty && cfg->tty_fd >= 0)
                (void)term_size(cfg->tty_fd, &sc.pty.rows, &sc.pty.cols);
        r = spawn_sandbox(&sc, &core->sp, &e);
        res->sandbox_made = core->sp.cloned;
        al_trace_mark("spawn.done");
        if (out_pipe[1] >= 0)
                close(out_pipe[1]);
        if (err_pipe[1] >= 0)
                close(err_pipe[1]);
        out_pipe[1] = err_pipe[1] = -1;
        if (cfg->tty && r >= 0) {
                out_pipe[0] = TAKE_FD(core->sp.pty_fd);
                sv.pty_fd = fcntl(out_pipe[0], F_DUPFD_CLOEXEC, 3);
                if (sv.pty_fd < 0) {
                        kill_sandbox(&sv);
                        al_error_set(&e, errno, "duplicating the terminal");
                        set_failure(res, 125, "internal", e.msg);
                        close(out_pipe[0]);
                        out_pipe[0] = -1;
                        goto done;
                }
        }
        sv.streams[0] = (struct stream){.sv = &sv, .fd = out_pipe[0], .out = cfg->stdout_fd};
        sv.streams[1] = (struct stream){.sv = &sv, .fd = err_pipe[0], .out = cfg->stderr_fd};
        if (redactor)
                for (int i = 0; i < 2; i++)
                        sv.streams[i].redact = redactor_stream_new(redactor);
        out_pipe[0] = err_pipe[0] = -1;
        if (r < 0) {
                switch (core->sp.failure) {
                case SPAWN_FAILED_EXEC_NOT_FOUND:
                        set_failure(res, 127, "exec_failed", e.msg);
                        break;
                case SPAWN_FAILED_EXEC:
                        set_failure(res, 126, "exec_failed", e.msg);
                        break;
                default:
                        set_failure(res, 125, "setup_failed", e.msg);
                }
                /* Whatever the command printed before failing still counts. */
                for (int i = 0; i < 2; i++) {
                        char buf[4096];
                        ssize_t n;
                        while ((n = read(sv.streams[i].fd, buf, sizeof(buf))) > 0)
                                forward(&sv.streams[i], buf, (size_t)n);
                }
                goto done;
        }
        record(&sv, "process.started", events_process_started(1, events_argv(cfg->argv)));

        if (sv_core_loop_new(core, &e) < 0) {
                kill_sandbox(&sv);
                set_failure(res, 125, "internal", "creating the event loop");
                goto done;
        }

        /* The tool calls under way, kept before any call can start:
         * whoever sweeps this run after its owner died closes them
         * (orphans.c). */
        if (cfg->open_calls_dir)
                core->open_calls = open_calls_new_lazy(cfg->open_calls_dir);
        /* The gate accepts on listeners that live in the sandbox's network
         * namespace; the routes listener stays closed (connections refused)
         * when the policy has no routes. */
        if (sv_core_start_gate(core, cfg->secrets, cfg->account, on_net_decision, &sv, &e) < 0 ||
            sv_core_start_tools(core, cfg->secrets, cfg->account, &e) < 0) {
                kill_sandbox(&sv);
                set_failure(res, 125, "setup_failed", e.msg);
                goto done;
        }
        if (cfg->control_path && caps_socket_open(core, cfg->control_path, &sv.control, &e) < 0) {
                kill_sandbox(&sv);
                set_failure(res, 125, "setup_failed", e.msg);
                goto done;
        }
        if (cfg->n_ports && open_ports(&sv, &e) < 0) {
                kill_sandbox(&sv);
                set_failure(res, 125, "setup_failed", e.msg);
                goto done;
        }
        for (int i = 0; i < 2; i++) {
                if (sv.streams[i].fd < 0)
                        continue;
                evutil_make_socket_nonblocking(sv.streams[i].fd);
                sv.streams[i].ev = event_new(core->base, sv.streams[i].fd, EV_READ | EV_PERSIST,
                                             on_output, &sv.streams[i]);
                event_add(sv.streams[i].ev, NULL);
        }
        if (sv.pty_fd >= 0)
                sv.ptyio = ptyio_start(core->base, cfg->stdin_fd, sv.pty_fd, cfg->tty_fd);
        if (cfg->ask_tty_fd > 0) { /* 0: a config that did not say */
                sv.askp = ask_prompt_start(core, cfg->ask_tty_fd, sv.ptyio, cfg->ask_stdin_fd);
                ask_prompt_hold_output(sv.askp, hold_output, &sv);
        }
        sv_core_arm(core, on_sync, on_signal, &sv);
        if (p->limits.timeout_ms) {
                uint64_t elapsed_ms = (now_monotonic_us() - start) / 1000;
                uint64_t left = p->limits.timeout_ms > elapsed_ms ? p->limits.timeout_ms - elapsed_ms : 0;
                struct timeval tv = {.tv_sec = (time_t)(left / 1000),
                                     .tv_usec = (suseconds_t)(left % 1000) * 1000};
                sv.ev_timeout = evtimer_new(core->base, on_timeout, &sv);
                evtimer_add(sv.ev_timeout, &tv);
        }

        al_trace_mark("sv.armed");
        event_base_dispatch(core->base);
        al_trace_mark("pid1.exit");
        /* pid 1's end closed every socket of the sandbox: one pass of the
         * loop takes in what is already there to read (a client's close),
         * so a connection the client ended is recorded as ended, not as cut
         * by the shutdown. No timeout or caps op runs in it. */
        sv.control = caps_socket_free(sv.control);
        if (sv.ev_timeout)
                evtimer_del(sv.ev_timeout);
        if (core->gate)
                (void)event_base_loop(core->base, EVLOOP_NONBLOCK);
        if (core->gate) {
                struct netgate_stats ns;
                netgate_get_stats(core->gate, &ns);
                res->usage.net_sent_bytes = ns.bytes_up;
                res->usage.net_received_bytes = ns.bytes_down;
        }
        /* Connections and tool calls still open are closed and recorded now. */
        sv_core_close_gates(core);
        res->usage.tool_calls = core->tool_calls;

        struct rusage ru;
        memset(&ru, 0, sizeof(ru));
        int pid1_status = 0;
        while (wait4(core->sp.pid, &pid1_status, 0, &ru) < 0 && errno == EINTR)
                ;
        core->sp.pid = -1;
        al_trace_mark("teardown.reap");

        struct cgroup_usage cu = {0};
        if (core->cg)
                core->cg->ops->usage(core->cg, &cu);

        /* Read once: the same figures fill the result and the OOM check. */
        fill_usage(&sv, core->cg ? &cu : NULL, &ru);
        al_trace_mark("teardown.usage");

        int st = sv.have_status ? sv.status : pid1_status;
        if (core->audit_failed) {
                set_failure(res, 125, "audit_failed", core->audit_first);
        } else if (sv.timed_out) {
                events_limit_message("timeout", p->limits.timeout_ms, e.msg, sizeof(e.msg));
                set_failure(res, 124, "timeout", e.msg);
                res->signal = SIGKILL;
        } else if (cu.oom_kills > 0) {
                events_limit_message("oom_killed", 0, e.msg, sizeof(e.msg));
                set_failure(res, WIFEXITED(st) ? WEXITSTATUS(st) : 137, "oom_killed", e.msg);
                if (WIFSIGNALED(st))
                        res->signal = WTERMSIG(st);
                if (!WIFEXITED(st) || WEXITSTATUS(st) == 0)
                        res->exit_code = 137;
        } else if (sv.output_exceeded) {
                events_limit_message("output_limit", p->limits.output, e.msg, sizeof(e.msg));
                set_failure(res, 128 + SIGKILL, "output_limit", e.msg);
                res->signal = SIGKILL;
        } else if (!sv.have_status) {
                set_failure(res, 125, "internal", "the sandbox's init ended without a report");
        } else if (WIFSIGNALED(st)) {
                res->signal = WTERMSIG(st);
                res->exit_code = 128 + res->signal;
        } else {
                res->exit_code = WEXITSTATUS(st);
        }

        bool disk_full = false;
        if (core->wq &&
            quota_usage(core->wq, &res->usage.workspace_added_bytes, &disk_full) >= 0)
                res->usage.workspace_measured = true;
        uint64_t disk_last = 0;
        res->usage.disk_measured =
            sv_core_disk_usage(core, &res->usage.disk_peak_bytes, &disk_last);
        if (res->usage.disk_measured && !res->usage.workspace_measured) {
                res->usage.workspace_added_bytes = disk_last;
                res->usage.workspace_measured = true;
        }
        if (disk_full && !res->error_code) {
                events_limit_message("disk_limit", p->limits.workspace_disk, e.msg, sizeof(e.msg));
                set_failure(res, res->exit_code, "disk_limit", e.msg);
        }

        /* The review layer outlives the sandbox through this fd: keep what
         * the agent proposed. */
        if (core->sp.upper_fd >= 0 && cfg->state_root) {
                _cleanup_free_ char *dir = NULL;
                struct review_summary sum = {0};
                struct al_error re = {0};
                r = review_create_pinned(cfg->state_root, res->sandbox, p->workspace, started_ns,
                                         &ws_pin, &dir, &re);
                if (r >= 0)
                        r = review_capture(core->sp.upper_fd, dir, p->limits.disk, &sum, &re);
                if (r < 0) {
                        set_failure(res, 125, "internal", re.msg);
                        record(&sv, "review.failed", events_review_failed(dir, r, re.msg));
                } else {
                        snprintf(res->review_dir, sizeof(res->review_dir), "%s", dir);
                        res->review_added = sum.added;
                        res->review_modified = sum.modified;
                        res->review_deleted = sum.deleted;
                        record(&sv, "review.kept", events_review_kept(dir, &sum));
                }
        }


done:
        sv.askp = ask_prompt_free(sv.askp);
        sv.ptyio = ptyio_free(sv.ptyio);
        if (sv.pty_fd >= 0)
                close(sv.pty_fd);
        for (int i = 0; i < 2; i++)
                close_stream(&sv.streams[i]);
        sv_core_stop(core);
        for (int i = 0; i < 2; i++) {
                if (out_pipe[i] >= 0)
                        close(out_pipe[i]);
                if (err_pipe[i] >= 0)
                        close(err_pipe[i]);
        }
        if (sv.ev_timeout)
                event_free(sv.ev_timeout);
        al_trace_mark("teardown.stop");
        /* Every process of the sandbox is gone (pid 1 is reaped): its
         * cgroup is emptied and removed beside the end's records and their
         * sync, and both are done before the result is reported. */
        pthread_t cg_thread;
        bool cg_threaded = core->cg && start_cgroup_free(core->cg, &cg_thread);
        if (cg_threaded)
                core->cg = NULL;
        sv_core_free(core);
        res->duration_ms = (now_monotonic_us() - start) / 1000;
        res->usage.output_bytes = sv.output;
        struct events_end end = run_end(res);
        sv_core_process_ended(core, &end);
        /* The result is reported only once its record is durable. */
        sv_core_destroyed(core, res->duration_ms);
        al_trace_mark("audit.destroyed");
        if (cg_threaded)
                pthread_join(cg_thread, NULL);
        al_trace_mark("teardown.free");
        if (core->audit_failed && !(res->error_code && STREQ(res->error_code, "audit_failed")))
                set_failure(res, 125, "audit_failed", core->audit_first);
        sv_core_close_audit(core);
        if (sv.net_log_fd >= 0)
                close(sv.net_log_fd);
        return 0;
}

char *supervisor_result_json(const struct supervisor_result *r)
{
        json_t *u = json_pack("{s:I, s:I, s:I, s:I, s:I, s:I}",
                              "cpuMs", (json_int_t)r->usage.cpu_ms,
                              "cpuUserMs", (json_int_t)r->usage.cpu_user_ms,
                              "cpuSystemMs", (json_int_t)r->usage.cpu_system_ms,
                              "memoryPeakBytes", (json_int_t)r->usage.memory_peak,
                              "maxRssKb", (json_int_t)r->usage.max_rss_kb,
                              "outputBytes", (json_int_t)r->usage.output_bytes);
        /* null: not measured (no blkio controller, no workspace quota). */
        const struct supervisor_usage *su = &r->usage;
        json_object_set_new(u, "ioReadBytes",
                            su->io_measured ? json_integer((json_int_t)su->io_read_bytes)
                                            : json_null());
        json_object_set_new(u, "ioWriteBytes",
                            su->io_measured ? json_integer((json_int_t)su->io_write_bytes)
                                            : json_null());
        json_object_set_new(u, "netSentBytes", json_integer((json_int_t)su->net_sent_bytes));
        json_object_set_new(u, "netReceivedBytes",
                            json_integer((json_int_t)su->net_received_bytes));
        json_object_set_new(u, "toolCalls", json_integer((json_int_t)su->tool_calls));
        json_object_set_new(u, "workspaceAddedBytes",
                            su->workspace_measured
                                ? json_integer((json_int_t)su->workspace_added_bytes)
                                : json_null());
        json_object_set_new(u, "diskPeakBytes",
                            su->disk_measured ? json_integer((json_int_t)su->disk_peak_bytes)
                                              : json_null());
        json_t *o = json_pack("{s:b, s:i, s:o, s:o, s:I, s:o, s:s}",
                              "ok", r->exit_code == 0 && !r->error_code,
                              "exitCode", r->exit_code,
                              "signal", r->signal ? json_integer(r->signal) : json_null(),
                              "errorCode", r->error_code ? json_string(r->error_code) : json_null(),
                              "durationMs", (json_int_t)r->duration_ms,
                              "usage", u,
                              "sandbox", r->sandbox);
        if (!o)
                return NULL;
        if (r->message[0])
                json_object_set_new(o, "message", json_string(r->message));
        if (r->tier)
                json_object_set_new(o, "tier", json_string(r->tier));
        char *s = json_dumps(o, JSON_COMPACT | JSON_PRESERVE_ORDER);
        json_decref(o);
        return s;
}
