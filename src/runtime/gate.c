/* SPDX-License-Identifier: Apache-2.0 */
/* The gates of a container whose policy (airlock.io/policy) allows hosts,
 * routes or tools: the same network gate as `airlock run`'s
 * (gates_start_netgate, its routes included) and the same tool gateway
 * (toolgate_new), served by a child of the keeper on the listeners the
 * sandbox made inside its own network namespace and the tool socket its
 * pid 1 bound at /run/airlock/tool.sock, each decision and call in the
 * audit log. The keeper uses no event loop, so the gates get a process of
 * their own; it dies with the keeper (parent-death signal), and the keeper
 * kills it at the end. */
#include <errno.h>
#include <fcntl.h>
#include <string.h>
#include <event2/event.h>
#include <signal.h>
#include <sys/prctl.h>
#include <sys/wait.h>
#include <unistd.h>

#include "audit.h"
#include "events.h"
#include "gates.h"
#include "gate.h"
#include "podnet.h"
#include "opencalls.h"
#include "toolgate/toolgate.h"
#include "util.h"

static void on_decision(void *ud, const struct netgate_record *rec)
{
        struct rt_audit *ra = ud;
        json_t *f = events_net_decision(rec);
        if (f)
                (void)rt_audit_fields(ra, events_net_kind(rec), f);
}

/* The tool gateway's records, in the gates' process: the log, and the
 * calls under way kept for the keeper (opencalls.h). */
static struct {
        struct rt_audit *audit;
        struct open_calls *calls;
} tool_log;

static void on_tool_call(void *ud, const struct toolgate_record *rec)
{
        json_t *f = toolgate_record_json(rec);
        if (!f)
                return;
        /* The audit line names the container itself. */
        json_object_del(f, "sandbox");
        if (tool_log.calls)
                open_calls_ending(tool_log.calls, rec->seq);
        (void)rt_audit_fields(tool_log.audit, "tool.call", f);
        if (tool_log.calls)
                open_calls_end(tool_log.calls, rec->seq);
}

/* Before a host tool runs: its record on the log first, or no run; kept
 * as under way before that, so that a kill after the line leaves what its
 * end needs. */
static int on_tool_started(void *ud, const struct toolgate_record *rec)
{
        json_t *f = toolgate_started_json(rec);
        if (!f)
                return -ENOMEM;
        json_object_del(f, "sandbox");
        if (tool_log.calls) {
                int r = open_calls_start(tool_log.calls, rec->seq, rec->call_id, rec->tool, rec->args_digest,
                                         rec->rule, now_realtime_us() / 1000);
                if (r < 0) {
                        json_decref(f);
                        return r;
                }
        }
        return rt_audit_fields(tool_log.audit, "tool.started", f);
}

void rt_gate_close_calls(pid_t gate_pid, const char *state_dir, struct rt_audit *audit)
{
        if (gate_pid <= 0 || !state_dir)
                return;
        /* Dead first: it writes nothing after the lines below. */
        (void)kill(gate_pid, SIGKILL);
        while (waitpid(gate_pid, NULL, 0) < 0 && errno == EINTR)
                ;
        json_t *calls = NULL;
        if (open_calls_closing(state_dir, audit_file_path(audit->a), audit->sandbox,
                               now_realtime_us() / 1000, "airlock-runtime", &calls) < 0)
                return;
        size_t i;
        json_t *f;
        json_array_foreach(calls, i, f)(void) rt_audit_fields(audit, "tool.call", json_incref(f));
        json_decref(calls);
        _cleanup_free_ char *file = xasprintf("%s/%s", state_dir, OPEN_CALLS_FILE);
        (void)unlink(file);
}

/* In the gates' process: the network gate and its routes, transparent
 * mode, then the tool gateway (whose HTTP tools use the network gate). */
static int serve(struct event_base *base, const struct rt_gate_config *c, struct spawn_result *sp,
                 struct al_error *e)
{
        struct netgate *g = NULL;
        struct sv_connect_notify *cn = NULL;
        int r = gates_start_netgate(base, c->policy, c->sandbox, c->secrets, NULL, c->ca,
                                    sp->listen_fds, on_decision, c->audit, &g, e);
        if (r >= 0 && g)
                r = gates_start_transparent(base, g, &sp->dns_fd, &sp->relay_fd, &sp->notify_fd,
                                            &cn, e);
        if (r < 0 || sp->tool_fd < 0)
                return r;
        tool_log.audit = c->audit;
        if (c->state_dir) {
                tool_log.calls = open_calls_new(c->state_dir);
                if (!tool_log.calls)
                        return al_error_set(e, errno, "gate: opening %s", c->state_dir);
        }
        struct toolgate_config tc = {
            .policy = c->policy,
            .sandbox = c->sandbox,
            .run_id = c->run_id,
            .secrets = c->secrets,
            .netgate = g,
            .recorder = on_tool_call,
            .ahead = on_tool_started,
            .ud = c->audit,
        };
        struct toolgate *t = toolgate_new(base, &tc, e);
        if (!t)
                return -EINVAL;
        r = toolgate_add_listener(t, sp->tool_fd, e);
        sp->tool_fd = -1; /* taken, even on failure */
        return r;
}

int rt_gate_start(const struct rt_gate_config *c, struct spawn_result *sp, const int *close_fds,
                  size_t n_close, pid_t *ret_pid, struct al_error *err)
{
        int *listen_fds = sp->listen_fds;
        *ret_pid = -1;
        if (listen_fds[SPAWN_LISTEN_HTTP] < 0 && sp->tool_fd < 0)
                return 0;
        pid_t keeper = getpid();
        int pipefd[2];
        if (pipe2(pipefd, O_CLOEXEC) < 0)
                return al_error_set(err, errno, "gate: pipe");
        pid_t pid = fork();
        if (pid < 0)
                return al_error_set(err, errno, "gate: fork");
        if (pid == 0) {
                close(pipefd[0]);
                (void)prctl(PR_SET_PDEATHSIG, SIGKILL);
                if (getppid() != keeper)
                        _exit(1);
                for (size_t i = 0; i < n_close; i++)
                        if (close_fds[i] >= 0)
                                close(close_fds[i]);
                int null = open("/dev/null", O_RDWR | O_CLOEXEC);
                for (int fd = 0; fd < 3 && null >= 0; fd++)
                        (void)dup3(null, fd, 0);
                sigset_t none;
                sigemptyset(&none);
                sigprocmask(SIG_SETMASK, &none, NULL);
                signal(SIGPIPE, SIG_IGN);
                struct al_error e = {0};
                int r =
                    c->pod_netns_fd >= 0 ? rt_podnet_enter(c->pod_netns_fd, c->pod_resolv, &e) : 0;
                struct event_base *base = r >= 0 ? event_base_new() : NULL;
                if (r >= 0)
                        r = base ? serve(base, c, sp, &e)
                                 : al_error_set(&e, ENOMEM, "gate: event base");
                if (r < 0) {
                        (void)write_full(pipefd[1], e.msg, strlen(e.msg));
                        _exit(1);
                }
                (void)write_full(pipefd[1], "", 1);
                close(pipefd[1]);
                event_base_dispatch(base);
                _exit(0);
        }
        close(pipefd[1]);
        char msg[AL_ERROR_MAX];
        size_t got = 0;
        ssize_t n;
        while (got < sizeof(msg) - 1 && (n = read(pipefd[0], msg + got, sizeof(msg) - 1 - got)) > 0)
                got += (size_t)n;
        close(pipefd[0]);
        msg[got] = '\0';
        if (got == 0 || msg[0] != '\0') {
                kill(pid, SIGKILL);
                return al_error_set_message(err, EINVAL, "gates: %s",
                                            got ? msg : "they ended before they started");
        }
        /* The gates hold the listeners, transparent mode's fds and the
         * tool socket now. */
        int *held[SPAWN_LISTEN_MAX + 4] = {&sp->dns_fd, &sp->relay_fd, &sp->notify_fd,
                                           &sp->tool_fd};
        for (int i = 0; i < SPAWN_LISTEN_MAX; i++)
                held[4 + i] = &listen_fds[i];
        for (size_t i = 0; i < ARRAY_SIZE(held); i++)
                if (*held[i] >= 0) {
                        close(*held[i]);
                        *held[i] = -1;
                }
        *ret_pid = pid;
        return 0;
}
