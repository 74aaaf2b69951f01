/* SPDX-License-Identifier: Apache-2.0 */
#include <event2/listener.h>
#include <fcntl.h>
#include <jansson.h>
#include <signal.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "cgroup.h"
#include "control-internal.h"
#include "opencalls.h"
#include "core.h"
#include "env.h"
#include "events.h"
#include "gates.h"
#include "gitguard.h"
#include "idle.h"
#include "latency.h"
#include "mounts.h"
#include "netgate/netgate.h"
#include "quota.h"
#include "review.h"
#include "util.h"

/* airlock supervise's lifecycle (control.h): start the sandbox on the
 * supervisor core with an idle pid 1, listen on the control socket, serve
 * until the sandbox is destroyed or dies, then clean up everything it made
 * (docs/internals/supervisor.md). The requests themselves are served by
 * control-server.c, control-procs.c and control-review.c. */

/* An event that could not be written: nothing goes on running unrecorded.
 * Running processes are killed, and each new exec tries the log again
 * (control_do_exec) and is refused while it cannot be written. */
static void on_audit_fault(struct sv_core *core, void *driver)
{
        struct control *c = driver;
        for (int i = 0; i < CONTROL_MAX_PROCS; i++) {
                struct proc *p = c->procs[i];
                if (!p || p->exited || p->failed)
                        continue;
                if (!p->error_code)
                        p->error_code = "audit_failed";
                spawn_kill_request(core->sp.sync_fd, p->id, SIGKILL);
        }
}

static void on_net_decision(void *ud, const struct netgate_record *rec)
{
        struct control *c = ud;
        sv_core_record(&c->core, events_net_kind(rec), events_net_decision(rec));
}

static void on_signal(evutil_socket_t sig, short what, void *arg)
{
        control_destroy(arg);
}

void control_destroy(struct control *c)
{
        if (c->destroying)
                return;
        c->destroying = true;
        sv_core_kill(&c->core);
        /* Stop once the queued answers are out (control_client_free), or after a
         * second whatever a client still holds. */
        struct timeval tv = {.tv_sec = 1, .tv_usec = 0};
        event_base_loopexit(c->core.base, c->n_clients > 0 ? &tv : NULL);
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
        _cleanup_free_ char *cg_name = NULL, *state = NULL, *tool_bin = NULL;
        int r;

        sv_core_init(&c.core, p, on_audit_fault, &c);
        c.core.caller_home = cfg->caller_home;
        c.snap_fd = -1;
        signal(SIGPIPE, SIG_IGN);
        /* Its gates and control socket answer promptly beside a sandbox
         * that keeps the CPU busy; the sandbox keeps the defaults (a hint
         * only, latency.h). */
        (void)al_sched_prefer_latency();

        time_t now = time(NULL);
        struct tm tm;
        gmtime_r(&now, &tm);
        strftime(c.started_at, sizeof(c.started_at), "%Y-%m-%dT%H:%M:%SZ", &tm);

        r = sv_core_set_id(&c.core, cfg->id, err);
        if (r < 0)
                goto fail_early;
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
        c.core.open_calls = open_calls_new(c.dir);
        if (!c.core.open_calls) {
                r = al_error_set(err, errno, "opening %s", c.dir);
                goto fail_early;
        }

        const char *home = env_home_for_uid(p->uid);
        r = env_build(p, home, env_user_for_uid(p->uid), NULL, &c.envp, err);
        if (r >= 0)
                r = sv_core_tool_endpoint(&c.core, &c.envp, &tool_bin, err);
        if (r >= 0)
                r = sv_core_gate_env(&c.core, cfg->secrets, &c.envp, err);
        if (r >= 0)
                r = gates_check_routes(p, cfg->secrets, cfg->id, cfg->account, err);
        if (r >= 0 && cfg->audit_path) {
                r = sv_core_open_audit(&c.core, cfg->audit_path, cfg->audit_rotate, cfg->secrets,
                                       err);
                if (r < 0)
                        al_error_wrap(err, "audit");
        }
        if (r < 0)
                goto fail;
        /* The daemon tells "error: audit: …" apart: the audit log, not the
         * sandbox, is what failed. */
        if (sv_core_record_ahead(&c.core, "sandbox.created", events_sandbox_created(p)) < 0) {
                r = al_error_set_message(err, EIO, "%s", c.core.audit_last);
                goto fail;
        }

        /* A workspace the plan refuses as broad (another user's home
         * too) is refused before anything reads or labels it. */
        r = mounts_workspace_quick_check(p, cfg->caller_home, err);
        if (r < 0)
                goto fail;

        struct cgroup_limits lim;
        cg_name = xasprintf("airlock-%s", cfg->id);
        r = cgroup_limits_from_policy(p, &lim, err);
        if (r >= 0)
                r = cgroup_setup(cg_name, &lim, &c.core.cg, err);
        /* A read-write workspace's own size (limits.workspaceDisk). */
        if (r >= 0 && p->limits.workspace_disk && p->workspace)
                r = quota_apply(p->workspace, p->limits.workspace_disk, cfg->id, cfg->keep_root,
                                &c.core.wq, err);
        if (r < 0)
                goto fail;
        sv_core_disk_begin(&c.core);

        struct spawn_config sc = {
            .policy = p,
            .argv = NULL,
            .envp = c.envp,
            .home = home,
            .caller_home = cfg->caller_home,
            .stdin_fd = -1,
            .stdout_fd = -1,
            .stderr_fd = -1,
            .cgroup = c.core.cg,
            .tool_bin = tool_bin,
            .ca_bundle = c.core.ca_bundle,
        };
        /* A copy-on-write workspace's review compares host change times
         * with this. */
        uint64_t started_ns = p->workspace && p->workspace_mode == POLICY_WORKSPACE_OVERLAY
                                  ? review_start_ns()
                                  : now_realtime_us() * 1000;
        gg = gitguard_begin(p);
        r = spawn_sandbox(&sc, &c.core.sp, err);
        if (r < 0)
                goto fail;
        if (c.core.sp.upper_fd >= 0) {
                /* Fail closed: changes with nowhere to be kept are not
                 * worth the agent's work. */
                if (!cfg->keep_root)
                        r = al_error_set(err, 0,
                                         "the copy-on-write workspace needs a place "
                                         "to keep its changes (--keep-root)");
                else
                        r = review_create(cfg->keep_root, cfg->id, p->workspace, started_ns,
                                          &c.review_dir, err);
                if (r < 0)
                        goto fail;
        }

        r = sv_core_loop_new(&c.core, err);
        if (r >= 0)
                r = sv_core_start_gate(&c.core, cfg->secrets, cfg->account, on_net_decision, &c,
                                       err);
        if (r >= 0)
                r = sv_core_start_tools(&c.core, cfg->secrets, cfg->account, err);
        if (r < 0)
                goto fail;

        struct sockaddr_un sun = {.sun_family = AF_UNIX};
        snprintf(sun.sun_path, sizeof(sun.sun_path), "%s", c.sock_path);
        unlink(c.sock_path);
        mode_t old = umask(0177);
        c.listener = evconnlistener_new_bind(c.core.base, control_on_accept, &c,
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

        sv_core_arm(&c.core, control_on_sync, on_signal, &c);

        /* The daemon that started us died before it learnt we are ready: it
         * has no record of this sandbox, and nobody knows its id. */
        if (tell_ready(cfg->ready_fd, NULL) < 0) {
                r = al_error_set(err, EPIPE, "telling the daemon the sandbox is ready");
                goto cleanup;
        }
        release_startup_memory();
        event_base_dispatch(c.core.base);
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
                        control_proc_free(c.procs[i]);
                        c.procs[i] = NULL;
                }
        sv_core_stop(&c.core);
        gitguard_finish(gg, c.core.audit, cfg->id, NULL, NULL);
        control_snap_reap(&c, true);
        if (c.review_dir && c.core.sp.upper_fd >= 0) {
                /* Every process of the sandbox is gone: this copy is final. */
                struct review_summary sum = {0};
                struct al_error re = {0};
                int rr =
                    review_recapture(c.core.sp.upper_fd, c.review_dir, p->limits.disk, &sum, &re);
                if (rr < 0)
                        sv_core_record(&c.core, "review.failed",
                                       events_review_failed(c.review_dir, rr, re.msg));
                else
                        sv_core_record(&c.core, "review.kept",
                                       events_review_kept(c.review_dir, &sum));
        }
        free(c.review_dir);
        sv_core_free(&c.core);
        sv_core_destroyed(&c.core, (now_monotonic_us() - c.core.start_us) / 1000);
        sv_core_close_audit(&c.core);
        strv_free(c.envp);
        state = xasprintf("%s/supervisor.json", c.dir);
        unlink(state);
        rmdir(c.dir);
        return r;

fail_early:
        tell_ready(cfg->ready_fd, err->msg);
        sv_core_caps_free(&c.core);
        return r;
}
