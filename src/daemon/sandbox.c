/* SPDX-License-Identifier: Apache-2.0 */
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
#include "ctl.h"
#include "child.h"
#include "daemon.h"
#include "files.h"
#include "http.h"
#include "jobs.h"
#include "util.h"

extern char **environ;

const char *const sandbox_state_names[SANDBOX_STATE_COUNT] = {
        [SANDBOX_STARTING] = "starting",   [SANDBOX_POOLED] = "pooled",
        [SANDBOX_RUNNING] = "running",     [SANDBOX_STOPPING] = "stopping",
        [SANDBOX_DESTROYED] = "destroyed", [SANDBOX_FAILED] = "failed",
};

#define STATUS_TIMEOUT_MS  5000
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

static void pidfd_kill(struct sandbox *sb, int sig)
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

static void sandbox_free(struct sandbox *sb)
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

static struct sandbox *sandbox_alloc(struct daemon *d, const char *id)
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

int sandbox_save(struct sandbox *sb)
{
        _cleanup_free_ char *meta = json_dumps(sb->metadata ? sb->metadata : json_object(),
                                               JSON_COMPACT | JSON_SORT_KEYS);
        struct store_sandbox r = {
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
        memcpy(r.id, sb->id, sizeof(r.id));
        int k = daemon_store_result(sb->d, store_sandbox_put(sb->d->store, &r));
        if (k < 0)
                daemon_log(sb->d, "sandbox %s: recording it: %s", sb->id,
                           store_last_error(sb->d->store));
        return k;
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

/* cgroups a dead supervisor left: one pass now, and while some still hold
 * processes (cgroup.kill takes a moment) another pass every 2 ms, on a
 * timer, up to 50 in all: the loop never sleeps. The names wait in a fixed
 * table, so nothing is left to free if the daemon ends first. */

#define CG_RETRY_SLOTS 256
#define CG_RETRY_TRIES 50

static struct cg_retry {
        struct daemon *d;
        char name[64]; /* "" when free */
        int tries;
} cg_retries[CG_RETRY_SLOTS];

static void on_cg_retry(evutil_socket_t fd, short what, void *arg);

static void cg_retry_arm(struct cg_retry *c)
{
        struct timeval tv = {.tv_sec = 0, .tv_usec = 2000};
        if (event_base_once(c->d->base, -1, EV_TIMEOUT, on_cg_retry, c, &tv) < 0)
                c->name[0] = '\0';
}

static void on_cg_retry(evutil_socket_t fd, short what, void *arg)
{
        struct cg_retry *c = arg;
        (void)fd;
        (void)what;
        if (cgroup_reclaim_named(c->name) == -EBUSY && ++c->tries < CG_RETRY_TRIES)
                cg_retry_arm(c);
        else
                c->name[0] = '\0';
}

static void cgroups_remove_named(struct daemon *d, const char *name)
{
        if (cgroup_reclaim_named(name) != -EBUSY)
                return;
        for (size_t i = 0; i < CG_RETRY_SLOTS; i++) {
                struct cg_retry *c = &cg_retries[i];
                if (c->name[0])
                        continue;
                if (snprintf(c->name, sizeof(c->name), "%s", name) >= (int)sizeof(c->name)) {
                        c->name[0] = '\0';
                        return;
                }
                c->d = d;
                c->tries = 1;
                cg_retry_arm(c);
                return;
        }
}

/* Remove a tree in a child process, so that a large workspace does not hold
 * up the loop: the directory is first renamed out of the way. */
static void remove_tree_async(struct daemon *d, const char *path)
{
        _cleanup_free_ char *parent = xstrdup(path);
        char *slash = strrchr(parent, '/');
        if (!slash || slash == parent)
                return;
        *slash = '\0';
        const char *name = slash + 1;
        _cleanup_close_ int pfd = open(parent, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
        if (pfd < 0)
                return;
        char hex[13] = "";
        (void)random_hex(hex, 12);
        _cleanup_free_ char *trash = xasprintf(".trash-%s-%s", name, hex);
        if (renameat(pfd, name, pfd, trash) < 0) {
                if (errno != ENOENT)
                        (void)files_remove_tree(pfd, name);
                return;
        }
        /* The child is a copy of the daemon: it must not act on the
         * daemon's signals (its handler would tell the daemon's loop) nor
         * hold the daemon's sockets and pipes while it works. */
        sigset_t all, old;
        sigfillset(&all);
        sigprocmask(SIG_SETMASK, &all, &old);
        pid_t pid = fork();
        if (pid == 0) {
                for (int sig = 1; sig < NSIG; sig++)
                        signal(sig, SIG_DFL);
                sigset_t none;
                sigemptyset(&none);
                sigprocmask(SIG_SETMASK, &none, NULL);
                if (pfd > 3)
                        (void)syscall(SYS_close_range, 3, (unsigned)pfd - 1, 0);
                (void)syscall(SYS_close_range, (unsigned)pfd + 1, ~0U, 0);
                (void)files_remove_tree(pfd, trash);
                _exit(0);
        }
        sigprocmask(SIG_SETMASK, &old, NULL);
        if (pid < 0)
                (void)files_remove_tree(pfd, trash);
}

void sandbox_cleanup_leftovers(struct daemon *d, const char *id, pid_t pid, const char *workspace,
                               bool workspace_owned)
{
        _cleanup_free_ char *cg = xasprintf("airlock-%s", id);
        cgroups_remove_named(d, cg);
        if (pid > 0) {
                _cleanup_free_ char *leaf = xasprintf("airlock-supervisor-%d", (int)pid);
                cgroups_remove_named(d, leaf);
        }
        _cleanup_close_ int run = open(d->run_dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
        if (run >= 0)
                (void)files_remove_tree(run, id);
        if (workspace_owned && workspace)
                remove_tree_async(d, workspace);
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
        if (was == SANDBOX_POOLED)
                pool_refill(d);
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

static int watch_exit(struct sandbox *sb)
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
                int k = sandbox_save(sb);
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
        r = sandbox_save(sb);
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
        sandbox_save(sb);
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

/* status */

struct status_req {
        struct status_req *prev, *next;
        struct ctl_call *call;
        struct sandbox *sb;
        sandbox_cb cb;
        void *userdata;
        json_t *answer;
};

static uint64_t get_u64(json_t *o, const char *a, const char *b)
{
        json_t *v = json_object_get(o, a);
        if (b)
                v = json_object_get(v, b);
        json_int_t n = json_integer_value(v);
        return n > 0 ? (uint64_t)n : 0;
}

static void on_status_line(struct ctl_call *c, json_t *msg, void *userdata)
{
        struct status_req *s = userdata;
        if (!s->answer)
                s->answer = json_incref(msg);
}

static void status_req_unlink(struct daemon *d, struct status_req *s)
{
        if (s->prev)
                s->prev->next = s->next;
        else if (d->status_reqs == s)
                d->status_reqs = s->next;
        if (s->next)
                s->next->prev = s->prev;
        s->prev = s->next = NULL;
}

/* Process records that still say "running" while the supervisor says the
 * process has ended (its end was not seen by the daemon: it was down, or
 * the stream was cut): the supervisor's word is written down. A process the
 * supervisor no longer lists although it lists a later one has ended too,
 * how is not known. */
static void reconcile_processes(struct sandbox *sb, json_t *status)
{
        struct store_process **v = NULL;
        size_t n = 0;
        if (store_process_list(sb->d->store, sb->id, 1000, &v, &n) < 0)
                return;
        json_t *procs = json_object_get(status, "processes");
        json_int_t newest = 0;
        size_t i;
        json_t *e;
        json_array_foreach(procs, i, e) if (json_integer_value(json_object_get(e, "pid")) > newest)
                newest = json_integer_value(json_object_get(e, "pid"));
        uint64_t now = daemon_now_ms();
        for (size_t k = 0; k < n; k++) {
                if (!v[k]->state || !STREQ(v[k]->state, "running"))
                        continue;
                json_t *found = NULL;
                json_array_foreach(procs, i, e) if ((uint64_t)json_integer_value(json_object_get(e, "pid")) ==
                                                    v[k]->pid) found = e;
                int r = 0;
                if (found && !json_is_true(json_object_get(found, "running")) &&
                    json_is_integer(json_object_get(found, "exitCode")))
                        r = store_process_end(sb->d->store, sb->id, v[k]->pid,
                                              json_integer_value(json_object_get(found, "exitCode")),
                                              json_string_value(json_object_get(found, "errorCode")), now);
                else if (!found && (json_int_t)v[k]->pid < newest)
                        r = store_process_end(sb->d->store, sb->id, v[k]->pid, -1, "lost", now);
                if (daemon_store_result(sb->d, r) < 0)
                        break;
        }
        store_processes_free(v, n);
}

static void on_status_done(struct ctl_call *c, int error, void *userdata)
{
        struct status_req *s = userdata;
        struct sandbox *sb = s->sb;
        status_req_unlink(sb->d, s);
        json_t *a = s->answer;
        if (error >= 0 && (!a || !json_is_true(json_object_get(a, "ok"))))
                error = -EPROTO;
        if (error >= 0) {
                json_decref(sb->status.doc);
                sb->status.doc = json_incref(a);
                sb->status.valid = true;
                sb->status.at_ms = daemon_now_ms();
                sb->status.allowed = get_u64(a, "network", "allowed");
                sb->status.denied = get_u64(a, "network", "denied");
                sb->status.bytes_up = get_u64(a, "network", "bytesUp");
                sb->status.bytes_down = get_u64(a, "network", "bytesDown");
                sb->status.oom_kills = get_u64(a, "oomKills", NULL);
                bool busy = false;
                size_t i;
                json_t *p;
                json_array_foreach(json_object_get(a, "processes"), i, p)
                        busy = busy || json_is_true(json_object_get(p, "running"));
                sb->status.busy = busy;
                reconcile_processes(sb, a);
        }
        json_decref(a);
        if (s->cb)
                s->cb(sb, error, NULL, s->userdata);
        sandbox_unref(sb);
        free(s);
}

static const struct ctl_call_ops status_ops = {
        .line = on_status_line,
        .done = on_status_done,
};

int sandbox_refresh_status(struct sandbox *sb, sandbox_cb cb, void *userdata)
{
        if (sb->state != SANDBOX_RUNNING && sb->state != SANDBOX_POOLED)
                return -ESRCH;
        struct status_req *s = xcalloc(1, sizeof(*s));
        s->sb = sb;
        s->cb = cb;
        s->userdata = userdata;
        json_t *req = json_pack("{s:s}", "op", "status");
        struct ctl_call *c = NULL;
        int r = ctl_call_start(sb->d->base, sb->control_path, req, STATUS_TIMEOUT_MS, &status_ops, s,
                               &c);
        json_decref(req);
        if (r < 0) {
                free(s);
                return r;
        }
        s->call = c;
        s->next = sb->d->status_reqs;
        if (s->next)
                s->next->prev = s;
        sb->d->status_reqs = s;
        sandbox_ref(sb);
        return 0;
}

void sandbox_shutdown_all(struct daemon *d)
{
        while (d->status_reqs) {
                struct status_req *s = d->status_reqs;
                status_req_unlink(d, s);
                ctl_call_cancel(s->call);
                json_decref(s->answer);
                if (s->cb)
                        s->cb(s->sb, -ECANCELED, "the daemon is stopping", s->userdata);
                sandbox_unref(s->sb);
                free(s);
        }
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

/* re-attach after a restart */

/* Whether pid is the supervisor of this sandbox: its command line names the
 * id, so a recycled pid is not taken for it. */
static bool is_our_supervisor(pid_t pid, const char *id)
{
        _cleanup_free_ char *path = xasprintf("/proc/%d/cmdline", (int)pid);
        _cleanup_free_ char *cmd = NULL;
        size_t len = 0;
        if (pid <= 0 || read_file_at(AT_FDCWD, path, 64 * 1024, &cmd, &len) < 0)
                return false;
        bool supervise = false, idarg = false;
        for (size_t off = 0; off < len;) {
                const char *a = cmd + off;
                size_t n = strnlen(a, len - off);
                if (STREQ(a, "supervise"))
                        supervise = true;
                if (STREQ(a, "--id") && off + n + 1 < len && STREQ(a + n + 1, id))
                        idarg = true;
                off += n + 1;
        }
        return supervise && idarg;
}

struct reattach {
        struct daemon *d;
        struct sandbox *sb;
};

static void on_reattach_status(struct sandbox *sb, int error, const char *message, void *userdata)
{
        if (error >= 0)
                return;
        /* Alive by its pid but not answering: end it. */
        daemon_log(sb->d, "sandbox %s: the supervisor does not answer (%s); destroying it", sb->id,
                   strerror(-error));
        pidfd_kill(sb, SIGKILL);
        if (sb->state == SANDBOX_RUNNING || sb->state == SANDBOX_POOLED) {
                sb->state = SANDBOX_STOPPING;
                sandbox_set_reason(sb, "supervisor_lost");
        }
}

static struct sandbox *from_record(struct daemon *d, const struct store_sandbox *r)
{
        struct sandbox *sb = sandbox_alloc(d, r->id);
        sb->grant = xstrdup(r->grant);
        sb->class_name = xstrdup(r->class_name);
        json_error_t jerr;
        sb->metadata = json_loads(r->metadata ? r->metadata : "{}", 0, &jerr);
        if (!sb->metadata)
                sb->metadata = json_object();
        sb->policy_json = xstrdup(r->policy);
        sb->policy = policy_new();
        struct al_error e = {0};
        if (policy_load_string(sb->policy, r->policy ? r->policy : "{}", "policy", &e) < 0 ||
            policy_finalize(sb->policy, "/", d->home, &e) < 0) {
                /* Kept only for its limits; the supervisor has its own copy. */
                sb->policy = policy_free(sb->policy);
                sb->policy = policy_new();
        }
        sb->workspace = xstrdup(r->workspace);
        sb->workspace_owned = r->workspace_owned;
        sb->pid = (pid_t)r->pid;
        sb->created_ms = r->created_ms;
        sb->expires_ms = r->expires_ms;
        sb->idle_timeout_ms = r->idle_timeout_ms;
        sb->last_active_ms = r->last_active_ms;
        return sb;
}

/* Supervisors the records do not know (the database was lost or restored
 * from an older copy, or the daemon died between starting one and recording
 * it): found by their state in the run directory, and destroyed cleanly,
 * with a record that says so. No client holds their id, and a sandbox
 * nobody can reach must not run on. */
static void reattach_unrecorded(struct daemon *d)
{
        _cleanup_(closedirp) DIR *dir = opendir(d->run_dir);
        if (!dir)
                return;
        struct dirent *de;
        size_t found = 0;
        while ((de = readdir(dir))) {
                const char *id = de->d_name;
                if (strlen(id) != 16 || strspn(id, "0123456789abcdef") != 16 || sandbox_find(d, id))
                        continue;
                _cleanup_free_ char *state = NULL;
                _cleanup_free_ char *path = xasprintf("%s/supervisor.json", id);
                if (read_file_at(dirfd(dir), path, 64 * 1024, &state, NULL) < 0)
                        continue;
                json_error_t jerr;
                json_t *o = json_loads(state, 0, &jerr);
                json_int_t pid = json_integer_value(json_object_get(o, "pid"));
                json_decref(o);
                if (pid <= 0 || pid > INT32_MAX || !is_our_supervisor((pid_t)pid, id))
                        continue;
                struct sandbox *sb = sandbox_alloc(d, id);
                sb->pid = (pid_t)pid;
                sb->pidfd = pidfd_open(sb->pid);
                if (sb->pidfd < 0 || !is_our_supervisor(sb->pid, id)) {
                        sandbox_free(sb);
                        continue;
                }
                sb->class_name = xstrdup("unknown");
                sb->metadata = json_object();
                sb->policy = policy_new();
                _cleanup_free_ char *ppath = xasprintf("%s/sandboxes/%s/policy.json", d->state_dir, id);
                if (read_file_at(AT_FDCWD, ppath, 1 << 20, &sb->policy_json, NULL) < 0)
                        sb->policy_json = xstrdup("{}");
                sb->created_ms = sb->last_active_ms = daemon_now_ms();
                /* A workspace the daemon made is where it makes them. */
                _cleanup_free_ char *ws = xasprintf("%s/workspaces/%s", d->state_dir, id);
                struct stat st;
                if (stat(ws, &st) == 0 && S_ISDIR(st.st_mode)) {
                        sb->workspace = TAKE_PTR(ws);
                        sb->workspace_owned = true;
                }
                sb->next = d->sandboxes;
                d->sandboxes = sb;
                if (watch_exit(sb) < 0) {
                        pidfd_kill(sb, SIGKILL);
                        continue;
                }
                found++;
                daemon_log(d, "sandbox %s: its supervisor (pid %d) has no record; destroying it", id,
                           (int)sb->pid);
                record_audit(d, id, "sandbox.unrecorded",
                             json_pack("{s:i, s:s}", "pid", (int)sb->pid, "action", "destroy"));
                sb->state = SANDBOX_RUNNING;
                sandbox_destroy(sb, "unrecorded", NULL, NULL);
        }
        if (found)
                daemon_log(d, "destroyed %zu sandbox(es) the records did not know", found);
}

int sandbox_reattach_all(struct daemon *d)
{
        static const char *const live[] = {"starting", "pooled", "running", "stopping"};
        size_t attached = 0, lost = 0;
        for (size_t k = 0; k < ARRAY_SIZE(live); k++) {
                struct store_filter f = {.state = live[k], .limit = 1000000};
                struct store_sandbox **v = NULL;
                size_t n = 0;
                int r = store_sandbox_list(d->store, &f, &v, &n);
                if (r < 0)
                        return r;
                for (size_t i = 0; i < n; i++) {
                        struct store_sandbox *rec = v[i];
                        /* A destroy begun above has moved it to "stopping". */
                        if (sandbox_find(d, rec->id))
                                continue;
                        struct sandbox *sb = from_record(d, rec);
                        bool alive = is_our_supervisor(sb->pid, sb->id);
                        if (alive) {
                                sb->pidfd = pidfd_open(sb->pid);
                                alive = sb->pidfd >= 0 && is_our_supervisor(sb->pid, sb->id);
                        }
                        if (!alive) {
                                lost++;
                                sb->state = STREQ(live[k], "stopping") ? SANDBOX_DESTROYED
                                                                        : SANDBOX_FAILED;
                                sandbox_set_reason(sb, STREQ(live[k], "stopping") && rec->reason
                                                               ? rec->reason
                                                               : "supervisor_lost");
                                daemon_log(d, "sandbox %s: the supervisor is gone; cleaning up",
                                           sb->id);
                                sandbox_cleanup_leftovers(d, sb->id, sb->pid, sb->workspace,
                                                          sb->workspace_owned);
                                _cleanup_close_ int sdir =
                                        open(d->state_dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
                                _cleanup_free_ char *rel = xasprintf("sandboxes/%s", sb->id);
                                if (sdir >= 0)
                                        (void)files_remove_tree(sdir, rel);
                                if (STREQ(live[k], "pooled"))
                                        (void)store_sandbox_delete(d->store, sb->id);
                                else
                                        sandbox_save(sb);
                                sandbox_free(sb);
                                continue;
                        }
                        sb->next = d->sandboxes;
                        d->sandboxes = sb;
                        if (watch_exit(sb) < 0) {
                                pidfd_kill(sb, SIGKILL);
                                continue;
                        }
                        if (STREQ(live[k], "starting")) {
                                /* Whoever asked for it never learnt its id. */
                                sb->state = SANDBOX_RUNNING;
                                sandbox_destroy(sb, "daemon_restart", NULL, NULL);
                                continue;
                        }
                        if (STREQ(live[k], "stopping")) {
                                sb->state = SANDBOX_RUNNING;
                                sandbox_destroy(sb, rec->reason ? rec->reason : "destroy", NULL,
                                                NULL);
                                continue;
                        }
                        sb->state = STREQ(live[k], "pooled") ? SANDBOX_POOLED : SANDBOX_RUNNING;
                        sb->for_pool = sb->state == SANDBOX_POOLED;
                        attached++;
                        if (sandbox_refresh_status(sb, on_reattach_status, NULL) < 0)
                                on_reattach_status(sb, -ECONNREFUSED, NULL, NULL);
                }
                store_sandboxes_free(v, n);
        }
        if (attached || lost)
                daemon_log(d, "re-attached %zu sandbox(es); %zu had lost their supervisor", attached,
                           lost);
        reattach_unrecorded(d);
        return 0;
}

/* the API's view */

static json_t *time_json(uint64_t ms)
{
        if (!ms)
                return json_null();
        time_t s = (time_t)(ms / 1000);
        struct tm tm;
        gmtime_r(&s, &tm);
        char buf[64], out[80];
        strftime(buf, sizeof(buf), "%Y-%m-%dT%H:%M:%S", &tm);
        snprintf(out, sizeof(out), "%s.%03uZ", buf, (unsigned)(ms % 1000));
        return json_string(out);
}

json_t *sandbox_record_json(const struct store_sandbox *r, const struct sandbox *live)
{
        json_error_t jerr;
        json_t *meta = json_loads(r->metadata ? r->metadata : "{}", 0, &jerr);
        json_t *policy = json_loads(r->policy ? r->policy : "{}", 0, &jerr);
        json_t *limits = json_incref(json_object_get(policy, "limits"));
        json_t *network = json_object_get(policy, "network");
        json_t *o = json_pack(
                "{s:s, s:s, s:s?, s:s?, s:o, s:s?, s:b, s:o, s:o, s:o, s:o?, s:o, s:s?, s:o}",
                "id", r->id, "state", r->state, "class", r->class_name, "grant", r->grant,
                "metadata", meta ? meta : json_object(), "workspace", r->workspace,
                "workspaceOwned", r->workspace_owned, "createdAt", time_json(r->created_ms),
                "expiresAt", time_json(r->expires_ms), "lastActiveAt",
                time_json(r->last_active_ms), "idleTimeout",
                r->idle_timeout_ms ? json_real((double)r->idle_timeout_ms / 1000.0) : json_null(),
                "endedAt", time_json(r->ended_ms), "reason", r->reason, "limits",
                limits ? limits : json_object());
        json_object_set_new(o, "workspaceMode",
                            json_incref(json_object_get(json_object_get(policy, "workspace"),
                                                        "mode")) ?: json_string("rw"));
        json_object_set_new(o, "networkMode",
                            json_incref(json_object_get(network, "mode")) ?: json_null());
        if (live && live->status.valid && live->status.doc) {
                json_t *doc = live->status.doc;
                json_object_set(o, "usage", json_object_get(doc, "usage") ?: json_null());
                json_object_set(o, "network", json_object_get(doc, "network") ?: json_null());
                json_object_set(o, "processes", json_object_get(doc, "processes") ?: json_array());
                json_object_set_new(o, "oomKills",
                                    json_integer((json_int_t)live->status.oom_kills));
                json_object_set_new(o, "statusAt", time_json(live->status.at_ms));
        }
        json_decref(policy);
        return o;
}
