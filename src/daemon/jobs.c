/* SPDX-License-Identifier: Apache-2.0 */
#include <errno.h>
#include <event2/event.h>
#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <string.h>
#include <sys/syscall.h>
#include <time.h>
#include <sys/wait.h>
#include <unistd.h>

#include "daemon.h"
#include "child.h"
#include "jobs.h"
#include "util.h"

#define JOB_ERR_MAX (64u * 1024)
/* Longer than the CLI's own deadline for git work (AIRLOCK_GIT_TIMEOUT,
 * 600 s by default, plus its grace), so that its clearer message usually
 * comes first; this one stops whatever else hangs. */
#define JOB_TIMEOUT_S 900

extern char **environ;

struct job {
        struct job *next;
        struct daemon *d;
        pid_t pid;
        int pidfd;
        int fd[2]; /* stdout, stderr; -1 once drained */
        struct event *ev[2];
        struct event *ev_exit;
        struct event *ev_timeout;
        unsigned timeout_s;
        bool timed_out;
        struct evbuffer *out, *err;
        size_t out_max;
        bool truncated;
        job_charge_fn charge; /* NULL: stdout is not charged */
        int refused;          /* what charge() answered when it refused */
        bool exited;
        int status;
        job_done_fn done;
        void *userdata;
};

char **daemon_child_env(const struct daemon *d)
{
        char **envp = NULL;
        size_t n = 0;
        envp = strv_append(envp, &n,
                           "PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin");
        _cleanup_free_ char *home = xasprintf("HOME=%s", d->home);
        envp = strv_append(envp, &n, home);
        static const char *const kept[] = {
            "ASAN_OPTIONS=",          "UBSAN_OPTIONS=",       "LSAN_OPTIONS=",
            "AIRLOCK_FORGE_COMMAND=", "AIRLOCK_GIT_TIMEOUT=", "AIRLOCK_MICROVM_ACCEL=",
            "AIRLOCK_TRACE="};
        for (char **e = environ; e && *e; e++)
                for (size_t i = 0; i < ARRAY_SIZE(kept); i++)
                        if (strncmp(*e, kept[i], strlen(kept[i])) == 0)
                                envp = strv_append(envp, &n, *e);
        return envp;
}

static void job_unlink(struct job *j)
{
        for (struct job **p = &j->d->jobs; *p; p = &(*p)->next)
                if (*p == j) {
                        *p = j->next;
                        return;
                }
}

static void job_free(struct job *j)
{
        for (int i = 0; i < 2; i++) {
                if (j->ev[i])
                        event_free(j->ev[i]);
                if (j->fd[i] >= 0)
                        close(j->fd[i]);
        }
        if (j->ev_exit)
                event_free(j->ev_exit);
        if (j->ev_timeout)
                event_free(j->ev_timeout);
        if (j->pidfd >= 0)
                close(j->pidfd);
        evbuffer_free(j->out);
        evbuffer_free(j->err);
        free(j);
}

static void finish(struct job *j, int exit_code)
{
        job_unlink(j);
        evbuffer_add(j->err, "", 1);
        struct job_result res = {
            .exit_code = exit_code,
            .refused = j->refused,
            .out = j->out,
            .out_truncated = j->truncated,
            .err = (const char *)evbuffer_pullup(j->err, -1),
            .timed_out = j->timed_out,
        };
        j->done(&res, j->userdata);
        job_free(j);
}

static void maybe_done(struct job *j)
{
        if (!j->exited || j->fd[0] >= 0 || j->fd[1] >= 0)
                return;
        int st = j->status;
        finish(j, WIFEXITED(st) ? WEXITSTATUS(st) : 128 + WTERMSIG(st));
}

static void collect(struct job *j)
{
        if (j->exited)
                return;
        int st;
        pid_t r = waitpid(j->pid, &st, WNOHANG);
        if (r == j->pid) {
                j->exited = true;
                j->status = st;
        } else if (r < 0 && errno == ECHILD) {
                /* Reaped elsewhere: the status is lost, so it failed. */
                j->exited = true;
                j->status = 125 << 8;
        }
}

static void close_output(struct job *j, int k)
{
        if (j->ev[k]) {
                event_free(j->ev[k]);
                j->ev[k] = NULL;
        }
        if (j->fd[k] >= 0) {
                close(j->fd[k]);
                j->fd[k] = -1;
        }
}

static void kill_now(struct job *j);

static void on_output(evutil_socket_t fd, short what, void *arg)
{
        struct job *j = arg;
        int k = fd == j->fd[0] ? 0 : 1;
        char buf[64 * 1024];
        ssize_t n = read(fd, buf, sizeof(buf));
        if (n < 0 && (errno == EAGAIN || errno == EINTR))
                return;
        if (n <= 0) {
                close_output(j, k);
                maybe_done(j);
                return;
        }
        struct evbuffer *b = k == 0 ? j->out : j->err;
        size_t max = k == 0 ? j->out_max : JOB_ERR_MAX;
        size_t have = evbuffer_get_length(b);
        size_t keep = have >= max ? 0 : (size_t)n > max - have ? max - have : (size_t)n;
        if (keep < (size_t)n && k == 0)
                j->truncated = true;
        if (k == 0 && keep && j->charge) {
                int r = j->charge(j->userdata, keep);
                if (r < 0) {
                        /* Refused room for more: it ends now, and its answer
                         * is the refusal. */
                        j->refused = r;
                        kill_now(j);
                        maybe_done(j);
                        return;
                }
        }
        evbuffer_add(b, buf, keep);
}

/* Its whole process group is killed (a credential helper or a forge
 * command it started included), and what it left in the pipes is not
 * waited for, since a descendant that escaped the group could hold them
 * open for ever. */
static void kill_now(struct job *j)
{
        kill(-j->pid, SIGKILL);
        if (j->pidfd >= 0)
                syscall(SYS_pidfd_send_signal, j->pidfd, SIGKILL, NULL, 0);
        close_output(j, 0);
        close_output(j, 1);
        collect(j);
}

/* The job ran past its time. */
static void on_timeout(evutil_socket_t fd, short what, void *arg)
{
        struct job *j = arg;
        if (j->exited)
                return;
        j->timed_out = true;
        char msg[160];
        int n = snprintf(msg, sizeof(msg),
                         "airlock: the job took longer than %u s (AIRLOCK_JOB_TIMEOUT) and was "
                         "stopped\n",
                         j->timeout_s);
        evbuffer_prepend(j->err, msg, (size_t)n);
        kill_now(j);
        maybe_done(j);
}

static void on_exit_ready(evutil_socket_t fd, short what, void *arg)
{
        struct job *j = arg;
        collect(j);
        maybe_done(j);
}

void jobs_reap(struct daemon *d)
{
        for (struct job *j = d->jobs; j; j = j->next)
                collect(j);
        /* Then every other child that ended (the workers that remove
         * workspaces; supervisors have no exit signal and are not taken).
         * A job that ended since its check above is reaped here too: its
         * status is handed to it, not dropped (it then found no child and
         * failed with 125, and a diff that had succeeded answered 409). */
        int st;
        pid_t pid;
        while ((pid = waitpid(-1, &st, WNOHANG)) > 0)
                for (struct job *j = d->jobs; j; j = j->next)
                        if (j->pid == pid && !j->exited) {
                                j->exited = true;
                                j->status = st;
                                break;
                        }
        /* A job whose pipes were drained first ends here; a callback may
         * start another job, so look again from the top after each. */
        bool again = true;
        while (again) {
                again = false;
                for (struct job *j = d->jobs; j; j = j->next)
                        if (j->exited && j->fd[0] < 0 && j->fd[1] < 0) {
                                maybe_done(j);
                                again = true;
                                break;
                        }
        }
}

unsigned job_timeout_seconds(void)
{
        const char *v = secure_getenv("AIRLOCK_JOB_TIMEOUT");
        uint64_t t;
        if (v && *v && safe_atou64(v, &t) >= 0 && t > 0 && t <= 86400)
                return (unsigned)t;
        return JOB_TIMEOUT_S;
}

int job_start(struct daemon *d, char *const argv[], size_t out_max, job_done_fn done,
              void *userdata, struct al_error *err)
{
        return job_start_charged(d, argv, out_max, NULL, done, userdata, err);
}

int job_start_charged(struct daemon *d, char *const argv[], size_t out_max, job_charge_fn charge,
                      job_done_fn done, void *userdata, struct al_error *err)
{
        int out[2] = {-1, -1}, errp[2] = {-1, -1};
        /* Only our ends are non-blocking: the child's would make its
         * writes fail with EAGAIN whenever the daemon is behind (a diff
         * of a few MiB then ended "writing the diff: Input/output
         * error"). */
        if (pipe2(out, O_CLOEXEC) < 0 || pipe2(errp, O_CLOEXEC) < 0 ||
            fcntl(out[0], F_SETFL, O_NONBLOCK) < 0 || fcntl(errp[0], F_SETFL, O_NONBLOCK) < 0) {
                int e = errno;
                for (int i = 0; i < 2; i++) {
                        if (out[i] >= 0)
                                close(out[i]);
                        if (errp[i] >= 0)
                                close(errp[i]);
                }
                return al_error_set(err, e, "pipe");
        }
        _cleanup_strv_ char **envp = daemon_child_env(d);
        struct child_spawn cs = {.path = argv[0],
                                 .argv = argv,
                                 .envp = envp,
                                 .fds = {CHILD_FD_NULL, out[1], errp[1]},
                                 .n_fds = 3,
                                 .cwd = "/",
                                 .setpgid = true};
        pid_t pid;
        int r = child_spawn(&cs, &pid, NULL);
        close(out[1]);
        close(errp[1]);
        if (r < 0) {
                close(out[0]);
                close(errp[0]);
                return al_error_set(err, r, "running %s", argv[0]);
        }

        struct job *j = xcalloc(1, sizeof(*j));
        j->d = d;
        j->pid = pid;
        j->fd[0] = out[0];
        j->fd[1] = errp[0];
        j->out = evbuffer_new();
        j->err = evbuffer_new();
        j->out_max = out_max;
        j->charge = charge;
        j->done = done;
        j->userdata = userdata;
        j->pidfd = (int)syscall(SYS_pidfd_open, pid, 0);
        for (int i = 0; i < 2; i++) {
                j->ev[i] = event_new(d->base, j->fd[i], EV_READ | EV_PERSIST, on_output, j);
                event_add(j->ev[i], NULL);
        }
        /* Without a pidfd the SIGCHLD handler's jobs_reap sees the end, and
         * the pipes' EOF comes with it or after it. */
        if (j->pidfd >= 0) {
                j->ev_exit = event_new(d->base, j->pidfd, EV_READ, on_exit_ready, j);
                event_add(j->ev_exit, NULL);
        }
        j->timeout_s = job_timeout_seconds();
        j->ev_timeout = evtimer_new(d->base, on_timeout, j);
        struct timeval tv = {.tv_sec = j->timeout_s};
        evtimer_add(j->ev_timeout, &tv);
        j->next = d->jobs;
        d->jobs = j;
        return 0;
}

/* Whether the job's process has ended, waiting up to timeout_ms; it is not
 * reaped here (collect() does that, from the loop). */
static bool job_wait_exit(struct job *j, unsigned timeout_ms)
{
        if (j->pidfd >= 0) {
                struct pollfd p = {.fd = j->pidfd, .events = POLLIN};
                int r;
                while ((r = poll(&p, 1, (int)timeout_ms)) < 0 && errno == EINTR)
                        ;
                return r > 0;
        }
        for (unsigned waited = 0;; waited += 10) {
                siginfo_t si = {0};
                if (waitid(P_PID, (id_t)j->pid, &si, WEXITED | WNOHANG | WNOWAIT) < 0 ||
                    si.si_pid == j->pid)
                        return true;
                if (waited >= timeout_ms)
                        return false;
                nanosleep(&(struct timespec){.tv_nsec = 10 * 1000 * 1000}, NULL);
        }
}

int job_stop(struct daemon *d, void *userdata, unsigned timeout_ms)
{
        struct job *j = d->jobs;
        while (j && (j->userdata != userdata || j->exited))
                j = j->next;
        if (!j)
                return -ENOENT;
        if (j->pidfd >= 0)
                syscall(SYS_pidfd_send_signal, j->pidfd, SIGTERM, NULL, 0);
        else
                kill(j->pid, SIGTERM);
        bool ended = job_wait_exit(j, timeout_ms);
        /* Whatever it started and left behind, and the job itself when it
         * did not end in time. */
        kill(-j->pid, SIGKILL);
        if (!ended) {
                if (j->pidfd >= 0)
                        syscall(SYS_pidfd_send_signal, j->pidfd, SIGKILL, NULL, 0);
                ended = job_wait_exit(j, 1000);
        }
        /* A descendant that escaped the group could hold the pipes open. */
        close_output(j, 0);
        close_output(j, 1);
        return ended ? 1 : 0;
}

void jobs_shutdown(struct daemon *d)
{
        while (d->jobs) {
                struct job *j = d->jobs;
                /* A job already reaped holds its pid no more: the number (and
                 * its group's) may be another process's by now. */
                if (!j->exited) {
                        kill(-j->pid, SIGKILL);
                        kill(j->pid, SIGKILL);
                        while (waitpid(j->pid, NULL, 0) < 0 && errno == EINTR)
                                ;
                }
                finish(j, -1);
        }
}
