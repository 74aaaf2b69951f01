/* SPDX-License-Identifier: Apache-2.0 */
/* A sandbox's life in the daemon: its record, the start of its supervisor
 * (`airlock supervise`) up to the ready line, its destroy, its end. Status
 * calls are sandbox-status.c, the re-attach after a restart
 * sandbox-reattach.c, the cleanup of what a dead supervisor left
 * sandbox-cleanup.c. */
#include <dirent.h>
#include <fcntl.h>
#include <inttypes.h>
#include <linux/magic.h>
#include <linux/sched.h>
#include <signal.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/statfs.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <time.h>

#include "cgroup.h"
#include "sandbox.h"
#include "sandbox-internal.h"
#include "ctl.h"
#include "child.h"
#include "daemon.h"
#include "files.h"
#include "record.h"
#include "jobs.h"
#include "util.h"

extern char **environ;

const char *const sandbox_state_names[SANDBOX_STATE_COUNT] = {
        [SANDBOX_STARTING] = "starting",   [SANDBOX_POOLED] = "pooled",
        [SANDBOX_RUNNING] = "running",     [SANDBOX_STOPPING] = "stopping",
        [SANDBOX_DESTROYED] = "destroyed", [SANDBOX_FAILED] = "failed",
};

#define DESTROY_TIMEOUT_MS 5000
#define KILL_GRACE_MS      10000

struct sandbox_waiter {
        struct sandbox_waiter *next;
        sandbox_cb cb;
        void *userdata;
};

static void finalize(struct sandbox *sb);

static int pidfd_open(pid_t pid)
{
        int fd = (int)syscall(SYS_pidfd_open, pid, 0);
        return fd < 0 ? -errno : fd;
}

int sandbox_pidfd_open(pid_t pid)
{
        return pidfd_open(pid);
}

void pidfd_kill(struct sandbox *sb, int sig)
{
        if (sb->pidfd >= 0)
                (void)syscall(SYS_pidfd_send_signal, sb->pidfd, sig, NULL, 0);
}

struct sandbox *sandbox_find(struct daemon *d, const char *id)
{
        for (struct sandbox *sb = d->sandboxes; sb; sb = sb->next)
                if (STREQ(sb->id, id))
                        return sb;
        return NULL;
}

size_t sandbox_count(struct daemon *d, const char *grant, bool include_pooled)
{
        size_t n = 0;
        for (struct sandbox *sb = d->sandboxes; sb; sb = sb->next) {
                if (sb->state == SANDBOX_FAILED || sb->state == SANDBOX_DESTROYED)
                        continue;
                if (sb->state == SANDBOX_POOLED && !include_pooled)
                        continue;
                if (grant && (!sb->grant || !STREQ(sb->grant, grant)))
                        continue;
                n++;
        }
        return n;
}

static void unlink_live(struct sandbox *sb)
{
        for (struct sandbox **p = &sb->d->sandboxes; *p; p = &(*p)->next)
                if (*p == sb) {
                        *p = sb->next;
                        sb->next = NULL;
                        return;
                }
}

void sandbox_free(struct sandbox *sb)
{
        if (sb->exit_ev)
                event_free(sb->exit_ev);
        if (sb->ready_ev)
                event_free(sb->ready_ev);
        if (sb->destroy_timer)
                event_free(sb->destroy_timer);
        if (sb->ready_fd >= 0)
                close(sb->ready_fd);
        if (sb->pidfd >= 0)
                close(sb->pidfd);
        ctl_call_cancel(sb->destroy_call);
        json_decref(sb->status.doc);
        json_decref(sb->metadata);
        policy_free(sb->policy);
        free(sb->grant);
        free(sb->class_name);
        free(sb->policy_json);
        free(sb->workspace);
        free(sb->dir);
        free(sb->control_path);
        free(sb->end_reason);
        while (sb->waiters) {
                struct sandbox_waiter *w = sb->waiters;
                sb->waiters = w->next;
                free(w);
        }
        free(sb);
}

void sandbox_ref(struct sandbox *sb)
{
        sb->refs++;
}

void sandbox_unref(struct sandbox *sb)
{
        if (--sb->refs == 0 && sb->freed_pending)
                sandbox_free(sb);
}

static void release(struct sandbox *sb)
{
        unlink_live(sb);
        if (sb->refs > 0)
                sb->freed_pending = true;
        else
                sandbox_free(sb);
}

struct sandbox *sandbox_alloc(struct daemon *d, const char *id)
{
        struct sandbox *sb = xcalloc(1, sizeof(*sb));
        sb->d = d;
        snprintf(sb->id, sizeof(sb->id), "%s", id);
        sb->pidfd = -1;
        sb->ready_fd = -1;
        sb->dir = xasprintf("%s/sandboxes/%s", d->state_dir, id);
        sb->control_path = xasprintf("%s/%s/control.sock", d->run_dir, id);
        return sb;
}

void sandbox_as_record(const struct sandbox *sb, char *meta, struct store_sandbox *r)
{
        *r = (struct store_sandbox){
                .state = (char *)sandbox_state_names[sb->state],
                .grant = sb->grant,
                .class_name = sb->class_name,
                .metadata = meta,
                .policy = sb->policy_json,
                .workspace = sb->workspace,
                .workspace_owned = sb->workspace_owned,
                .pid = sb->pid,
                .created_ms = sb->created_ms,
                .ended_ms = sb->ended_ms,
                .expires_ms = sb->expires_ms,
                .idle_timeout_ms = sb->idle_timeout_ms,
                .last_active_ms = sb->last_active_ms,
                .reason = sb->end_reason,
        };
        memcpy(r->id, sb->id, sizeof(r->id));
}

static int save(struct sandbox *sb, bool synced)
{
        _cleanup_free_ char *meta =
                sb->metadata ? json_dumps(sb->metadata, JSON_COMPACT | JSON_SORT_KEYS) : xstrdup("{}");
        struct store_sandbox r;
        sandbox_as_record(sb, meta, &r);
        int k = daemon_store_result(sb->d, synced ? store_sandbox_put(sb->d->store, &r)
                                                  : store_sandbox_put_unsynced(sb->d->store, &r));
        if (k == 0 && !synced)
                daemon_store_sync_soon(sb->d);
        if (k < 0)
                daemon_log(sb->d, "sandbox %s: recording it: %s", sb->id,
                           store_last_error(sb->d->store));
        return k;
}

int sandbox_save(struct sandbox *sb)
{
        return save(sb, true);
}

/* A state no answer reports: written (a full disk still refuses it), synced
 * by the next synced write or within 100 ms (daemon_store_sync_soon). */
static int save_unsynced(struct sandbox *sb)
{
        return save(sb, false);
}

void sandbox_set_reason(struct sandbox *sb, const char *reason)
{
        char *r = xstrdup(reason);
        free(sb->end_reason);
        sb->end_reason = r;
}

void sandbox_touch(struct sandbox *sb)
{
        sb->last_active_ms = daemon_now_ms();
}

static char *log_tail(struct sandbox *sb);

/* Why a start ended without a word on the ready pipe: how the supervisor
 * ended and the last line it logged. */
static char *exited_message(struct sandbox *sb)
{
        _cleanup_free_ char *tail = log_tail(sb);
        return xasprintf("the supervisor exited before the sandbox was ready (%s)%s%s",
                         sb->exit_how[0] ? sb->exit_how : "how is not known", tail ? ": " : "",
                         tail ? tail : "");
}

/* The end of a sandbox: its supervisor is gone. */
static void finalize(struct sandbox *sb)
{
        struct daemon *d = sb->d;
        if (sb->finalized)
                return;
        sb->finalized = true;
        if (sb->exit_ev)
                event_del(sb->exit_ev);
        if (sb->destroy_timer)
                event_del(sb->destroy_timer);
        if (sb->ready_ev)
                event_del(sb->ready_ev);

        /* A supervisor that ended cleanly removed its run directory. */
        _cleanup_free_ char *rundir = xasprintf("%s/%s", d->run_dir, sb->id);
        struct stat st;
        bool unclean = stat(rundir, &st) == 0;
        if (unclean) {
                sandbox_cleanup_leftovers(d, sb->id, sb->pid, sb->workspace, sb->workspace_owned);
        } else if (sb->workspace_owned && sb->workspace)
                remove_tree_async(d, sb->workspace);
        _cleanup_close_ int sdir = open(d->state_dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
        if (sdir >= 0) {
                _cleanup_free_ char *rel = xasprintf("sandboxes/%s", sb->id);
                (void)files_remove_tree(sdir, rel);
        }

        enum sandbox_state was = sb->state;
        sb->ended_ms = daemon_now_ms();
        _cleanup_free_ char *why = NULL;
        if (was == SANDBOX_STARTING) {
                /* Gone before it said ready or not: a failed start, with
                 * what is known of why. */
                why = exited_message(sb);
                _cleanup_free_ char *reason = xasprintf("start_failed: %s", why);
                sb->state = SANDBOX_FAILED;
                sandbox_set_reason(sb, reason);
                d->metrics.create_failures++;
        } else if (was == SANDBOX_STOPPING) {
                sb->state = SANDBOX_DESTROYED;
        } else if (was == SANDBOX_RUNNING || was == SANDBOX_POOLED) {
                sb->state = SANDBOX_DESTROYED;
                sandbox_set_reason(sb, unclean ? "supervisor_died" : "exited");
        }
        if (sb->state == SANDBOX_DESTROYED) {
                if (!(sb->for_pool && !sb->grant))
                        d->metrics.destroys++;
                d->metrics.gate_allowed += sb->status.allowed;
                d->metrics.gate_denied += sb->status.denied;
                d->metrics.gate_bytes_up += sb->status.bytes_up;
                d->metrics.gate_bytes_down += sb->status.bytes_down;
                d->metrics.oom_kills += sb->status.oom_kills;
        }
        /* A pool sandbox nobody took leaves no record. */
        bool unclaimed = sb->for_pool && !sb->grant;
        if (unclaimed)
                (void)store_sandbox_delete(d->store, sb->id);
        else
                sandbox_save(sb);
        if (!unclaimed)
                daemon_log(d, "sandbox %s: %s (%s)", sb->id, sandbox_state_names[sb->state],
                           sb->end_reason ? sb->end_reason : "-");

        sandbox_ref(sb);
        if (sb->start_cb) {
                sandbox_cb cb = sb->start_cb;
                sb->start_cb = NULL;
                cb(sb, -ECHILD, why ? why : "the supervisor exited before the sandbox was ready",
                   sb->start_ud);
        }
        while (sb->waiters) {
                struct sandbox_waiter *w = sb->waiters;
                sb->waiters = w->next;
                if (w->cb)
                        w->cb(sb, 0, NULL, w->userdata);
                free(w);
        }
        release(sb);
        sandbox_unref(sb);
        if (was == SANDBOX_POOLED && d->pool_lost)
                d->pool_lost(d);
}

static void on_ready(evutil_socket_t fd, short what, void *arg);

static void on_exit_event(evutil_socket_t fd, short what, void *arg)
{
        struct sandbox *sb = arg;
        if (sb->exited)
                return;
        sb->exited = true;
        /* Reaped here, after its end was seen: until then its pid stays its
         * own (a supervisor the daemon started sends no SIGCHLD, so the
         * daemon's catch-all reaper leaves it alone). */
        siginfo_t si = {0};
        if (sb->pidfd >= 0 && waitid(P_PIDFD, (id_t)sb->pidfd, &si, WEXITED | WNOHANG | __WALL) == 0 &&
            si.si_pid > 0)
                snprintf(sb->exit_how, sizeof(sb->exit_how),
                         si.si_code == CLD_EXITED ? "exit code %d" : "killed by signal %d",
                         si.si_status);
        else if (sb->pid > 0)
                (void)waitpid(sb->pid, NULL, WNOHANG);
        sandbox_ref(sb);
        /* What the supervisor said on the ready pipe before it went explains
         * a failed start better than its exit does. */
        if (sb->ready_fd >= 0 && sb->start_cb)
                on_ready(sb->ready_fd, EV_READ, sb);
        finalize(sb);
        sandbox_unref(sb);
}

int watch_exit(struct sandbox *sb)
{
        if (sb->pidfd < 0) {
                int fd = pidfd_open(sb->pid);
                if (fd < 0)
                        return fd;
                sb->pidfd = fd;
        }
        sb->exit_ev = event_new(sb->d->base, sb->pidfd, EV_READ, on_exit_event, sb);
        if (!sb->exit_ev)
                return -ENOMEM;
        event_add(sb->exit_ev, NULL);
        return 0;
}

static void on_kill_timer(evutil_socket_t fd, short what, void *arg)
{
        struct sandbox *sb = arg;
        daemon_log(sb->d, "sandbox %s: the supervisor did not end; killing it", sb->id);
        pidfd_kill(sb, SIGKILL);
}

static void arm_kill_timer(struct sandbox *sb, uint64_t ms)
{
        if (!sb->destroy_timer)
                sb->destroy_timer = evtimer_new(sb->d->base, on_kill_timer, sb);
        struct timeval tv = {.tv_sec = (time_t)(ms / 1000), .tv_usec = (suseconds_t)(ms % 1000) * 1000};
        evtimer_add(sb->destroy_timer, &tv);
}

/* start */

static void start_failed(struct sandbox *sb, int error, const char *message)
{
        struct daemon *d = sb->d;
        d->metrics.create_failures++;
        sb->state = SANDBOX_FAILED;
        sb->ended_ms = daemon_now_ms();
        _cleanup_free_ char *reason = xasprintf("start_failed: %s", message);
        sandbox_set_reason(sb, reason);
        sandbox_save(sb);
        daemon_log(d, "sandbox %s: %s", sb->id, reason);
        if (sb->ready_ev)
                event_del(sb->ready_ev);
        if (sb->ready_fd >= 0) {
                close(sb->ready_fd);
                sb->ready_fd = -1;
        }
        sandbox_ref(sb);
        if (sb->start_cb) {
                sandbox_cb cb = sb->start_cb;
                sb->start_cb = NULL;
                cb(sb, error, message, sb->start_ud);
        }
        /* The supervisor cleans up after a failed start and exits; the exit
         * watch finishes the record. */
        if (sb->exited || sb->pidfd < 0)
                finalize(sb);
        else
                arm_kill_timer(sb, DESTROY_TIMEOUT_MS);
        sandbox_unref(sb);
}

/* The record of a starting sandbox could not be written: stop its
 * supervisor (SIGTERM: it tears the sandbox down) and fail the start with
 * the store's reason. */
static void store_failed(struct sandbox *sb, int k)
{
        _cleanup_free_ char *msg = xasprintf("the sandbox's record could not be saved: %s",
                                             store_last_error(sb->d->store));
        pidfd_kill(sb, SIGTERM);
        start_failed(sb, k, msg);
}

static void ready_line(struct sandbox *sb, const char *line)
{
        if (STREQ(line, "ok")) {
                if (sb->ready_ev)
                        event_del(sb->ready_ev);
                close(sb->ready_fd);
                sb->ready_fd = -1;
                sb->state = sb->for_pool ? SANDBOX_POOLED : SANDBOX_RUNNING;
                sandbox_touch(sb);
                /* A running sandbox is reported (201); a pooled one to
                 * nobody until it is taken, which is synced. */
                int k = sb->for_pool ? save_unsynced(sb) : sandbox_save(sb);
                if (k < 0) {
                        /* Not recorded, not reported: undone. */
                        sb->state = SANDBOX_STARTING;
                        store_failed(sb, k);
                        return;
                }
                sandbox_cb cb = sb->start_cb;
                sb->start_cb = NULL;
                if (cb)
                        cb(sb, 0, NULL, sb->start_ud);
                return;
        }
        const char *msg = strncmp(line, "error: ", 7) == 0 ? line + 7 : line;
        start_failed(sb, -EIO, msg);
}

/* The last line of the supervisor's log, for a start that ended without a
 * word on the ready pipe. */
static char *log_tail(struct sandbox *sb)
{
        _cleanup_free_ char *path = xasprintf("%s/supervisor.log", sb->dir);
        _cleanup_close_ int fd = open(path, O_RDONLY | O_CLOEXEC);
        if (fd < 0)
                return NULL;
        char buf[1024];
        off_t size = lseek(fd, 0, SEEK_END);
        off_t from = size > (off_t)sizeof(buf) - 1 ? size - (off_t)sizeof(buf) + 1 : 0;
        ssize_t n = pread(fd, buf, sizeof(buf) - 1, from);
        if (n <= 0)
                return NULL;
        buf[n] = '\0';
        while (n > 0 && buf[n - 1] == '\n')
                buf[--n] = '\0';
        char *nl = strrchr(buf, '\n');
        return xstrdup(nl ? nl + 1 : buf);
}

static void on_ready(evutil_socket_t fd, short what, void *arg)
{
        struct sandbox *sb = arg;
        if (what & EV_TIMEOUT) {
                pidfd_kill(sb, SIGKILL);
                start_failed(sb, -ETIMEDOUT, "the sandbox was not ready in time");
                return;
        }
        ssize_t n = read(fd, sb->ready_buf + sb->ready_len, sizeof(sb->ready_buf) - 1 - sb->ready_len);
        if (n < 0 && (errno == EAGAIN || errno == EINTR))
                return;
        if (n > 0) {
                sb->ready_len += (size_t)n;
                sb->ready_buf[sb->ready_len] = '\0';
                char *nl = strchr(sb->ready_buf, '\n');
                if (nl) {
                        *nl = '\0';
                        ready_line(sb, sb->ready_buf);
                        return;
                }
                if (sb->ready_len < sizeof(sb->ready_buf) - 1)
                        return;
                ready_line(sb, sb->ready_buf);
                return;
        }
        /* The pipe closed without a line. Its end (on_exit_event, then
         * finalize) says how the supervisor went; one that closed the pipe
         * and lives on is killed. */
        if (sb->ready_ev)
                event_del(sb->ready_ev);
        close(sb->ready_fd);
        sb->ready_fd = -1;
        if (!sb->exited && sb->pidfd >= 0) {
                arm_kill_timer(sb, DESTROY_TIMEOUT_MS);
                return;
        }
        _cleanup_free_ char *msg = exited_message(sb);
        start_failed(sb, -ECHILD, msg);
}

static int spawn_supervisor(struct sandbox *sb, struct al_error *err)
{
        struct daemon *d = sb->d;
        _cleanup_free_ char *policy_path = xasprintf("%s/policy.json", sb->dir);
        _cleanup_free_ char *log_path = xasprintf("%s/supervisor.log", sb->dir);
        _cleanup_close_ int pfd =
                open(policy_path, O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0600);
        int r = pfd < 0 ? -errno : write_full(pfd, sb->policy_json, strlen(sb->policy_json));
        if (r < 0)
                return al_error_set(err, r, "writing %s", policy_path);

        int p[2];
        if (pipe2(p, O_CLOEXEC | O_NONBLOCK) < 0)
                return al_error_set(err, errno, "pipe");
        _cleanup_close_ int rd = p[0], wr = p[1];
        if (fcntl(wr, F_SETFL, 0) < 0)
                return al_error_set(err, errno, "fcntl");
        _cleanup_close_ int logfd =
                open(log_path, O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC | O_NOFOLLOW, 0600);
        if (logfd < 0)
                return al_error_set(err, errno, "opening %s", log_path);

        char *argv[20] = {
                d->airlock_bin, "supervise", "--id",      sb->id,     "--policy", policy_path,
                "--run-dir",    d->run_dir,  "--ready-fd", "3",       "--keep-root", d->keep_dir,
        };
        size_t n_argv = 12;
        if (d->audit_path) {
                argv[n_argv++] = "--audit";
                argv[n_argv++] = d->audit_path;
        }
        if (d->audit_path && d->audit_rotate) {
                argv[n_argv++] = "--audit-rotate";
                argv[n_argv++] = d->audit_rotate;
        }
        if (d->secrets_path) {
                argv[n_argv++] = "--secrets";
                argv[n_argv++] = d->secrets_path;
        }
        /* A clean environment: the supervisor needs HOME (the mandatory deny
         * list) and PATH. */
        _cleanup_strv_ char **envp = daemon_child_env(d);

        /* A new session, no exit signal: the daemon's SIGCHLD reaper
         * (waitpid(-1), which does not wait for such children) leaves it to
         * on_exit_event, which learns how it ended; and its pid is not free
         * for another process before the daemon has cleaned up after it. */
        struct child_spawn cs = {.path = d->airlock_bin,
                                 .argv = argv,
                                 .envp = envp,
                                 .fds = {CHILD_FD_NULL, logfd, logfd, wr},
                                 .n_fds = 4,
                                 .cwd = "/",
                                 .setsid = true,
                                 .want_pidfd = true,
                                 .no_exit_signal = true};
        pid_t pid;
        int cpidfd = -1;
        r = child_spawn(&cs, &pid, &cpidfd);
        if (r < 0)
                return al_error_set(err, r, "running %s", d->airlock_bin);
        sb->pid = pid;
        sb->pidfd = cpidfd >= 0 ? cpidfd : pidfd_open(pid);
        sb->ready_fd = TAKE_FD(rd);
        return 0;
}

int sandbox_start(struct daemon *d, struct policy *p, const struct sandbox_params *params,
                  sandbox_cb cb, void *userdata, struct sandbox **ret, struct al_error *err)
{
        char id[17];
        int r;
        if (params->id) {
                snprintf(id, sizeof(id), "%s", params->id);
        } else
                do {
                        r = random_hex(id, 16);
                        if (r < 0) {
                                policy_free(p);
                                return al_error_set(err, r, "picking an id");
                        }
                } while (sandbox_find(d, id));

        struct sandbox *sb = sandbox_alloc(d, id);
        sb->policy = p;
        sb->grant = xstrdup(params->grant);
        sb->class_name = xstrdup(p->class_name ? p->class_name : "medium");
        sb->metadata = params->metadata ? json_deep_copy(params->metadata) : json_object();
        sb->created_ms = daemon_now_ms();
        sb->last_active_ms = sb->created_ms;
        sb->expires_ms = params->ttl_ms ? sb->created_ms + params->ttl_ms : 0;
        sb->idle_timeout_ms = params->idle_timeout_ms;
        sb->start_cb = cb;
        sb->start_ud = userdata;

        if (mkdir(sb->dir, 0700) < 0) {
                r = al_error_set(err, errno, "creating %s", sb->dir);
                goto fail;
        }
        if (params->workspace) {
                sb->workspace = xstrdup(params->workspace);
        } else {
                sb->workspace = xasprintf("%s/workspaces/%s", d->state_dir, id);
                if (mkdir(sb->workspace, 0755) < 0) {
                        r = al_error_set(err, errno, "creating %s", sb->workspace);
                        goto fail_dir;
                }
                sb->workspace_owned = true;
        }
        free(p->workspace);
        p->workspace = xstrdup(sb->workspace);
        sb->policy_json = policy_to_json(p);

        r = spawn_supervisor(sb, err);
        if (r < 0)
                goto fail_ws;
        sb->state = SANDBOX_STARTING;
        sb->for_pool = params->pooled;
        sb->next = d->sandboxes;
        d->sandboxes = sb;
        if (sb->pidfd >= 0)
                (void)watch_exit(sb);
        /* Reported to nobody yet: the ready state's write (or the take's,
         * for the pool) is synced and takes this one with it. */
        r = save_unsynced(sb);
        if (r < 0) {
                /* Unrecorded, a restart would not know it: stop the
                 * supervisor now; its exit finishes the cleanup. The caller
                 * answers the error. */
                al_error_set(err, 0, "recording the sandbox in the state database: %s",
                             store_last_error(d->store));
                d->metrics.create_failures++;
                sb->start_cb = NULL;
                sb->state = SANDBOX_FAILED;
                sandbox_set_reason(sb, err->msg);
                pidfd_kill(sb, SIGTERM);
                if (sb->pidfd < 0)
                        finalize(sb);
                else
                        arm_kill_timer(sb, DESTROY_TIMEOUT_MS);
                return r;
        }

        sb->ready_ev = event_new(d->base, sb->ready_fd, EV_READ | EV_PERSIST, on_ready, sb);
        struct timeval tv = {.tv_sec = (time_t)(d->ready_timeout_ms / 1000),
                             .tv_usec = (suseconds_t)(d->ready_timeout_ms % 1000) * 1000};
        event_add(sb->ready_ev, &tv);
        *ret = sb;
        return 0;

fail_ws:
        if (sb->workspace_owned) {
                _cleanup_close_ int wdir = open(d->state_dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
                _cleanup_free_ char *rel = xasprintf("workspaces/%s", id);
                if (wdir >= 0)
                        (void)files_remove_tree(wdir, rel);
        }
fail_dir:
        {
                _cleanup_close_ int sdir = open(d->state_dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
                _cleanup_free_ char *rel = xasprintf("sandboxes/%s", id);
                if (sdir >= 0)
                        (void)files_remove_tree(sdir, rel);
        }
fail:
        d->metrics.create_failures++;
        if (r == -ENOSPC || r == -EDQUOT) {
                /* The state directory is full: the store could not record
                 * either; gc.c's check says when it has room again. */
                _cleanup_free_ char *why = xasprintf("the state directory is full: %s", err->msg);
                daemon_health_set(d, "store", why);
        }
        sandbox_free(sb);
        return r;
}

/* destroy */

static void on_destroy_done(struct ctl_call *c, int error, void *userdata)
{
        struct sandbox *sb = userdata;
        sb->destroy_call = NULL;
        if (error < 0 && !sb->exited)
                pidfd_kill(sb, SIGTERM);
}

static void on_destroy_line(struct ctl_call *c, json_t *msg, void *userdata)
{
}

static const struct ctl_call_ops destroy_ops = {
        .line = on_destroy_line,
        .done = on_destroy_done,
};

void sandbox_destroy(struct sandbox *sb, const char *reason, sandbox_cb cb, void *userdata)
{
        if (cb) {
                struct sandbox_waiter *w = xcalloc(1, sizeof(*w));
                w->cb = cb;
                w->userdata = userdata;
                w->next = sb->waiters;
                sb->waiters = w;
        }
        if (sb->state == SANDBOX_STOPPING || sb->state == SANDBOX_FAILED ||
            sb->state == SANDBOX_DESTROYED)
                return;
        if (sb->state == SANDBOX_STARTING) {
                /* Not ready yet: the supervisor has no control socket to ask. */
                sandbox_set_reason(sb, reason);
                pidfd_kill(sb, SIGTERM);
                arm_kill_timer(sb, KILL_GRACE_MS);
                return;
        }
        sb->state = SANDBOX_STOPPING;
        sandbox_set_reason(sb, reason);
        /* On the way to "destroyed", which is synced before it is told. */
        save_unsynced(sb);
        arm_kill_timer(sb, KILL_GRACE_MS);
        if (sb->exited) {
                finalize(sb);
                return;
        }
        json_t *req = json_pack("{s:s}", "op", "destroy");
        int r = ctl_call_start(sb->d->base, sb->control_path, req, DESTROY_TIMEOUT_MS, &destroy_ops,
                               sb, &sb->destroy_call);
        json_decref(req);
        if (r < 0) {
                sb->destroy_call = NULL;
                pidfd_kill(sb, SIGTERM);
        }
}

void sandbox_shutdown_all(struct daemon *d)
{
        sandbox_status_cancel_all(d);
        while (d->sandboxes) {
                struct sandbox *sb = d->sandboxes;
                sandbox_ref(sb);
                if (sb->start_cb) {
                        sandbox_cb cb = sb->start_cb;
                        sb->start_cb = NULL;
                        cb(sb, -ECANCELED, "the daemon is stopping", sb->start_ud);
                }
                while (sb->waiters) {
                        struct sandbox_waiter *w = sb->waiters;
                        sb->waiters = w->next;
                        if (w->cb)
                                w->cb(sb, -ECANCELED, "the daemon is stopping", w->userdata);
                        free(w);
                }
                release(sb);
                sandbox_unref(sb);
        }
}

