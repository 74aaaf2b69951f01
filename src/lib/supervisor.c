/* SPDX-License-Identifier: Apache-2.0 */
#include <event2/event.h>
#include <fcntl.h>
#include <inttypes.h>
#include <jansson.h>
#include <signal.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/syscall.h>
#include <sys/wait.h>

#include "audit.h"
#include "cgroup.h"
#include "env.h"
#include "events.h"
#include "gates.h"
#include "netgate/netgate.h"
#include "quota.h"
#include "review.h"
#include "secrets.h"
#include "spawn.h"
#include "supervisor.h"
#include "util.h"

struct stream {
        struct supervisor *sv;
        int fd;
        int out;
        struct event *ev;
        struct redactor_stream *redact; /* known secrets never reach the host's output */
};

struct supervisor {
        const struct supervisor_config *cfg;
        struct supervisor_result *res;
        struct event_base *base;
        struct spawn_result sp;
        struct stream streams[2];
        struct event *ev_sync;
        struct event *ev_timeout;
        struct event *ev_signals[3];
        bool exited;        /* pid 1 reported, or is gone */
        bool have_status;
        int status;
        bool timed_out;
        bool output_exceeded;
        bool audit_failed;
        char audit_msg[AL_ERROR_MAX];
        int interrupts;
        uint64_t output;
        struct audit *audit;
        struct event *ev_flush;
        int net_log_fd;
        struct netgate *gate;
};

/* An event that cannot be written is not silently lost: the sandbox ends
 * rather than run unrecorded, and the run reports exit 125 audit_failed. The
 * first cause is kept. */
static void audit_fault(struct supervisor *sv, struct al_error *e)
{
        if (!sv->audit_failed) {
                al_error_wrap(e, "audit");
                memcpy(sv->audit_msg, e->msg, sizeof(sv->audit_msg));
        }
        sv->audit_failed = true;
        if (sv->sp.pid > 0)
                kill(sv->sp.pid, SIGKILL);
}

static int record(struct supervisor *sv, const char *kind, json_t *fields)
{
        int r = 0;
        if (!fields)
                return 0;
        if (sv->audit) {
                struct al_error e = {0};
                r = audit_append(sv->audit, sv->res->sandbox, kind, fields, &e);
                if (r < 0)
                        audit_fault(sv, &e);
        }
        json_decref(fields);
        return r;
}

/* Room on disk for this sandbox's end records, before it starts. */
static int reserve(struct supervisor *sv)
{
        if (!sv->audit)
                return 0;
        struct al_error e = {0};
        int r = audit_reserve(sv->audit, &e);
        if (r < 0)
                audit_fault(sv, &e);
        return r;
}

/* Make what was appended durable now. */
static int commit(struct supervisor *sv)
{
        if (!sv->audit)
                return 0;
        int r = audit_flush(sv->audit);
        if (r < 0) {
                struct al_error e = {0};
                al_error_set(&e, r, "syncing the audit log");
                audit_fault(sv, &e);
        }
        return r;
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
        if (sv->sp.pidfd >= 0)
                syscall(SYS_pidfd_send_signal, sv->sp.pidfd, SIGKILL, NULL, 0);
        else if (sv->sp.pid > 0)
                kill(sv->sp.pid, SIGKILL);
}

static void maybe_finish(struct supervisor *sv)
{
        if (sv->exited && sv->streams[0].fd < 0 && sv->streams[1].fd < 0)
                event_base_loopexit(sv->base, NULL);
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

static void on_sync(evutil_socket_t fd, short what, void *arg)
{
        struct supervisor *sv = arg;
        int status;
        if (spawn_read_exit(fd, &status) == 0) {
                sv->status = status;
                sv->have_status = true;
        }
        /* One report, or the end of pid 1: either way the sandbox is over. */
        event_del(sv->ev_sync);
        sv->exited = true;
        maybe_finish(sv);
}

/* libevent's own diagnostics (a name server that failed, say) would land on
 * the host's stderr, mixed into the command's output: they are not for the
 * user, and library code does not print. */
static void drop_event_log(int severity, const char *msg)
{
}

static void on_flush(evutil_socket_t fd, short what, void *arg)
{
        struct supervisor *sv = arg;
        if (sv->audit && audit_needs_flush(sv->audit, now_monotonic_us()))
                commit(sv);
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
        else if (sv->sp.pidfd >= 0)
                syscall(SYS_pidfd_send_signal, sv->sp.pidfd, (int)sig, NULL, 0);
}

static void fill_usage(struct supervisor *sv, struct cgroup *cg, const struct rusage *ru)
{
        struct supervisor_usage *u = &sv->res->usage;
        u->cpu_user_ms = (uint64_t)ru->ru_utime.tv_sec * 1000 + (uint64_t)ru->ru_utime.tv_usec / 1000;
        u->cpu_system_ms =
                (uint64_t)ru->ru_stime.tv_sec * 1000 + (uint64_t)ru->ru_stime.tv_usec / 1000;
        u->max_rss_kb = (uint64_t)ru->ru_maxrss;
        u->output_bytes = sv->output;
        if (cg) {
                struct cgroup_usage cu;
                cg->ops->usage(cg, &cu);
                u->cpu_ms = cu.cpu_usec / 1000;
                u->memory_peak = cu.memory_peak;
                u->io_read_bytes = cu.io_read_bytes;
                u->io_write_bytes = cu.io_write_bytes;
                u->io_measured = cu.io_measured;
        }
}

static void set_failure(struct supervisor_result *res, int exit_code, const char *code,
                        const char *msg)
{
        res->exit_code = exit_code;
        res->error_code = code;
        snprintf(res->message, sizeof(res->message), "%s", msg ? msg : "");
}

int supervisor_run(const struct supervisor_config *cfg, struct supervisor_result *res,
                   struct al_error *err)
{
        const struct policy *p = cfg->policy;
        struct supervisor sv = {.cfg = cfg, .res = res};
        struct cgroup *cg = NULL;
        struct quota *wq = NULL;
        _cleanup_strv_ char **envp = NULL;
        _cleanup_free_ char *cg_name = NULL;
        int out_pipe[2] = {-1, -1}, err_pipe[2] = {-1, -1};
        struct al_error e = {0};
        int r;

        memset(res, 0, sizeof(*res));
        sv.sp.pid = -1;
        sv.sp.pidfd = -1;
        sv.sp.sync_fd = -1;
        sv.sp.upper_fd = -1;
        for (int i = 0; i < SPAWN_LISTEN_MAX; i++)
                sv.sp.listen_fds[i] = -1;
        sv.streams[0].fd = sv.streams[1].fd = -1;
        sv.net_log_fd = -1;

        uint64_t start = now_monotonic_us();
        uint64_t started_ns = now_realtime_us() * 1000;
        if (cfg->sandbox_id) {
                size_t n = strspn(cfg->sandbox_id, "0123456789abcdef");
                if (n != 16 || cfg->sandbox_id[16] != '\0')
                        return al_error_set(err, 0, "sandbox id \"%s\": expected 16 hex digits",
                                            cfg->sandbox_id);
                memcpy(res->sandbox, cfg->sandbox_id, 17);
        } else {
                r = random_hex(res->sandbox, 16);
                if (r < 0)
                        return al_error_set(err, r, "generating a sandbox id");
        }

        const char *home = env_home_for_uid(p->uid);
        r = env_build(p, home, env_user_for_uid(p->uid), cfg->term, &envp, err);
        if (r < 0)
                return r;

        /* A broken pipe on the host's side must not kill the supervisor and
         * orphan the sandbox. */
        signal(SIGPIPE, SIG_IGN);

        struct redactor *redactor = cfg->secrets ? secrets_redactor(cfg->secrets) : NULL;
        r = gates_check_routes(p, cfg->secrets, res->sandbox, cfg->account, err);
        if (r < 0)
                return r;
        if (cfg->audit_path) {
                r = gates_open_audit(cfg->audit_path, cfg->secrets, cfg->audit_rotate, &sv.audit, err);
                if (r < 0)
                        return r;
        }
        if (cfg->net_log_path) {
                sv.net_log_fd = open(cfg->net_log_path,
                                     O_WRONLY | O_APPEND | O_CREAT | O_CLOEXEC | O_NOFOLLOW, 0600);
                if (sv.net_log_fd < 0) {
                        r = al_error_set(err, errno, "net log %s", cfg->net_log_path);
                        sv.audit = audit_close(sv.audit);
                        return r;
                }
        }
        /* Nothing runs before the audit log says the sandbox was created and
         * has room for its end: a full or failing disk refuses the run (exit
         * 125). It is synced within 100 ms (on_flush), and before the
         * result is reported. */
        if (reserve(&sv) < 0 || record(&sv, "sandbox.created", events_sandbox_created(p)) < 0) {
                set_failure(res, 125, "audit_failed", sv.audit_msg);
                goto done;
        }

        struct cgroup_limits lim;
        cg_name = xasprintf("airlock-%s", res->sandbox);
        r = cgroup_limits_from_policy(p, &lim, &e);
        if (r >= 0)
                r = cgroup_open(cg_name, &lim, &cg, &e);
        if (r < 0) {
                set_failure(res, 125, "setup_failed", e.msg);
                goto done;
        }
        /* A read-write workspace's own size (limits.workspaceDisk). */
        if (p->limits.workspace_disk && p->workspace &&
            quota_apply(p->workspace, p->limits.workspace_disk, res->sandbox, &wq, &e) < 0) {
                set_failure(res, 125, "setup_failed", e.msg);
                goto done;
        }

        if (pipe2(out_pipe, O_CLOEXEC) < 0 || pipe2(err_pipe, O_CLOEXEC) < 0) {
                al_error_set(&e, errno, "creating output pipes");
                set_failure(res, 125, "internal", e.msg);
                goto done;
        }

        struct spawn_config sc = {
                .policy = p,
                .argv = cfg->argv,
                .envp = envp,
                .home = home,
                .caller_home = cfg->caller_home,
                .stdin_fd = cfg->stdin_fd,
                .stdout_fd = out_pipe[1],
                .stderr_fd = err_pipe[1],
                .cgroup = cg,
        };
        r = spawn_sandbox(&sc, &sv.sp, &e);
        close(out_pipe[1]);
        close(err_pipe[1]);
        out_pipe[1] = err_pipe[1] = -1;
        sv.streams[0] = (struct stream){.sv = &sv, .fd = out_pipe[0], .out = cfg->stdout_fd};
        sv.streams[1] = (struct stream){.sv = &sv, .fd = err_pipe[0], .out = cfg->stderr_fd};
        if (redactor)
                for (int i = 0; i < 2; i++)
                        sv.streams[i].redact = redactor_stream_new(redactor);
        out_pipe[0] = err_pipe[0] = -1;
        if (r < 0) {
                switch (sv.sp.failure) {
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
        record(&sv, "process.started", events_process_started(cfg->argv));

        event_set_log_callback(drop_event_log);
        sv.base = event_base_new();
        if (!sv.base) {
                kill_sandbox(&sv);
                set_failure(res, 125, "internal", "creating the event loop");
                goto done;
        }

        /* The gate accepts on listeners that live in the sandbox's network
         * namespace; the routes listener stays closed (connections refused)
         * when the policy has no routes. */
        if (gates_start_netgate(sv.base, p, res->sandbox, cfg->secrets, cfg->account,
                                sv.sp.listen_fds, on_net_decision, &sv, &sv.gate, &e) < 0) {
                kill_sandbox(&sv);
                set_failure(res, 125, "setup_failed", e.msg);
                goto done;
        }
        for (int i = 0; i < 2; i++) {
                evutil_make_socket_nonblocking(sv.streams[i].fd);
                sv.streams[i].ev = event_new(sv.base, sv.streams[i].fd, EV_READ | EV_PERSIST,
                                             on_output, &sv.streams[i]);
                event_add(sv.streams[i].ev, NULL);
        }
        sv.ev_sync = event_new(sv.base, sv.sp.sync_fd, EV_READ | EV_PERSIST, on_sync, &sv);
        event_add(sv.ev_sync, NULL);
        if (p->limits.timeout_ms) {
                uint64_t elapsed_ms = (now_monotonic_us() - start) / 1000;
                uint64_t left = p->limits.timeout_ms > elapsed_ms ? p->limits.timeout_ms - elapsed_ms : 0;
                struct timeval tv = {.tv_sec = (time_t)(left / 1000),
                                     .tv_usec = (suseconds_t)(left % 1000) * 1000};
                sv.ev_timeout = evtimer_new(sv.base, on_timeout, &sv);
                evtimer_add(sv.ev_timeout, &tv);
        }
        static const int sigs[] = {SIGINT, SIGTERM, SIGHUP};
        for (size_t i = 0; i < ARRAY_SIZE(sigs); i++) {
                sv.ev_signals[i] = evsignal_new(sv.base, sigs[i], on_signal, &sv);
                event_add(sv.ev_signals[i], NULL);
        }

        if (sv.audit) {
                sv.ev_flush = event_new(sv.base, -1, EV_PERSIST, on_flush, &sv);
                struct timeval tv = {.tv_sec = 0, .tv_usec = 100000};
                event_add(sv.ev_flush, &tv);
        }

        event_base_dispatch(sv.base);
        if (sv.gate) {
                struct netgate_stats ns;
                netgate_get_stats(sv.gate, &ns);
                res->usage.net_sent_bytes = ns.bytes_up;
                res->usage.net_received_bytes = ns.bytes_down;
        }
        /* Connections still open are closed and recorded now. */
        sv.gate = netgate_free(sv.gate);

        struct rusage ru;
        memset(&ru, 0, sizeof(ru));
        int pid1_status = 0;
        while (wait4(sv.sp.pid, &pid1_status, 0, &ru) < 0 && errno == EINTR)
                ;
        sv.sp.pid = -1;

        struct cgroup_usage cu = {0};
        if (cg)
                cg->ops->usage(cg, &cu);

        fill_usage(&sv, cg, &ru);

        int st = sv.have_status ? sv.status : pid1_status;
        if (sv.audit_failed) {
                set_failure(res, 125, "audit_failed", sv.audit_msg);
        } else if (sv.timed_out) {
                snprintf(e.msg, sizeof(e.msg), "the command ran past its %" PRIu64 " ms timeout",
                         p->limits.timeout_ms);
                set_failure(res, 124, "timeout", e.msg);
                res->signal = SIGKILL;
        } else if (cu.oom_kills > 0) {
                set_failure(res, WIFEXITED(st) ? WEXITSTATUS(st) : 137, "oom_killed",
                            "the memory limit was reached and the kernel killed the command");
                if (WIFSIGNALED(st))
                        res->signal = WTERMSIG(st);
                if (!WIFEXITED(st) || WEXITSTATUS(st) == 0)
                        res->exit_code = 137;
        } else if (sv.output_exceeded) {
                snprintf(e.msg, sizeof(e.msg), "the output passed its %" PRIu64 " byte limit",
                         p->limits.output);
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
        if (wq && quota_usage(wq, &res->usage.workspace_added_bytes, &disk_full) >= 0)
                res->usage.workspace_measured = true;
        if (disk_full && !res->error_code) {
                res->error_code = "disk_limit";
                snprintf(res->message, sizeof(res->message),
                         "the workspace reached its %" PRIu64 " byte limit (limits.workspaceDisk)",
                         p->limits.workspace_disk);
        }

        /* The review layer outlives the sandbox through this fd: keep what
         * the agent proposed. */
        if (sv.sp.upper_fd >= 0 && cfg->state_root) {
                _cleanup_free_ char *dir = NULL;
                struct review_summary sum = {0};
                struct al_error re = {0};
                r = review_create(cfg->state_root, res->sandbox, p->workspace, started_ns, &dir, &re);
                if (r >= 0)
                        r = review_capture(sv.sp.upper_fd, dir, p->limits.disk, &sum, &re);
                if (r < 0) {
                        set_failure(res, 125, "internal", re.msg);
                        record(&sv, "review.failed",
                               json_pack("{s:s, s:s, s:s}", "dir", dir ? dir : "", "reason",
                                         r == -EDQUOT ? "disk_limit" : "error", "message", re.msg));
                } else {
                        snprintf(res->review_dir, sizeof(res->review_dir), "%s", dir);
                        res->review_added = sum.added;
                        res->review_modified = sum.modified;
                        res->review_deleted = sum.deleted;
                        record(&sv, "review.kept",
                               json_pack("{s:s, s:I, s:I, s:I}", "dir", dir, "added",
                                         (json_int_t)sum.added, "modified",
                                         (json_int_t)sum.modified, "deleted",
                                         (json_int_t)sum.deleted));
                }
        }

        if (res->error_code && (STREQ(res->error_code, "timeout") ||
                                STREQ(res->error_code, "oom_killed") ||
                                STREQ(res->error_code, "output_limit") ||
                                STREQ(res->error_code, "disk_limit")))
                record(&sv, "limit.hit",
                       json_pack("{s:s, s:s}", "limit",
                                 STREQ(res->error_code, "timeout")      ? "timeout"
                                 : STREQ(res->error_code, "oom_killed") ? "memory"
                                 : STREQ(res->error_code, "disk_limit") ? "disk"
                                                                        : "output",
                                 "message", res->message));
        if (res->signal == SIGSYS)
                record(&sv, "violation",
                       json_pack("{s:s, s:i}", "what", "seccomp", "signal", SIGSYS));

done:
        for (int i = 0; i < 2; i++)
                close_stream(&sv.streams[i]);
        sv.gate = netgate_free(sv.gate);
        if (sv.sp.pid > 0) {
                kill_sandbox(&sv);
                while (waitpid(sv.sp.pid, NULL, 0) < 0 && errno == EINTR)
                        ;
        }
        if (sv.sp.sync_fd >= 0)
                close(sv.sp.sync_fd);
        if (sv.sp.pidfd >= 0)
                close(sv.sp.pidfd);
        if (sv.sp.upper_fd >= 0)
                close(sv.sp.upper_fd);
        for (int i = 0; i < SPAWN_LISTEN_MAX; i++)
                if (sv.sp.listen_fds[i] >= 0)
                        close(sv.sp.listen_fds[i]);
        for (int i = 0; i < 2; i++) {
                if (out_pipe[i] >= 0)
                        close(out_pipe[i]);
                if (err_pipe[i] >= 0)
                        close(err_pipe[i]);
        }
        if (sv.ev_sync)
                event_free(sv.ev_sync);
        if (sv.ev_timeout)
                event_free(sv.ev_timeout);
        if (sv.ev_flush)
                event_free(sv.ev_flush);
        for (size_t i = 0; i < ARRAY_SIZE(sv.ev_signals); i++)
                if (sv.ev_signals[i])
                        event_free(sv.ev_signals[i]);
        if (sv.base)
                event_base_free(sv.base);
        wq = quota_release(wq);
        cgroup_free(cg);
        res->duration_ms = (now_monotonic_us() - start) / 1000;
        res->usage.output_bytes = sv.output;
        record(&sv, "process.ended", events_process_ended(res));
        record(&sv, "sandbox.destroyed", json_pack("{s:I}", "durationMs", (json_int_t)res->duration_ms));
        /* The result is reported only once its record is durable. */
        commit(&sv);
        if (sv.audit_failed && !(res->error_code && STREQ(res->error_code, "audit_failed")))
                set_failure(res, 125, "audit_failed", sv.audit_msg);
        sv.audit = audit_close(sv.audit);
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
        json_object_set_new(u, "workspaceAddedBytes",
                            su->workspace_measured
                                ? json_integer((json_int_t)su->workspace_added_bytes)
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
        char *s = json_dumps(o, JSON_COMPACT | JSON_PRESERVE_ORDER);
        json_decref(o);
        return s;
}
