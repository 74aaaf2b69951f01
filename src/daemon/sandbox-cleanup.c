/* SPDX-License-Identifier: Apache-2.0 */
/* What a dead supervisor left: the host tool calls it started and never
 * ended (closed on the audit log), its cgroups (reclaimed on a timer while
 * cgroup.kill takes effect, never sleeping on the loop), its run directory,
 * and a workspace Airlock owned (removed in a child process). */
#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdio.h>
#include <string.h>
#include <sys/syscall.h>
#include <unistd.h>

#include "cgroup.h"
#include "daemon.h"
#include "files.h"
#include "opencalls.h"
#include "record.h"
#include "sandbox-internal.h"
#include "sandbox.h"
#include "util.h"

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
void remove_tree_async(struct daemon *d, const char *path)
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

/* Each tool call it started (tool.started is on the log) and never ended
 * gets its tool.call line here, with errorCode "supervisor_died": every
 * started call has an end. The tool itself died with the supervisor (its
 * process group is killed with it). */
static void close_open_calls(struct daemon *d, const char *id)
{
        _cleanup_free_ char *dir = xasprintf("%s/%s", d->run_dir, id);
        json_t *calls = NULL;
        int r = open_calls_closing(dir, d->audit_path, id, now_realtime_us() / 1000, "airlockd",
                                   &calls);
        if (r < 0) {
                daemon_log(d, "sandbox %s: reading the tool calls its supervisor left (%s/%s): %s",
                           id, dir, OPEN_CALLS_FILE, strerror(-r));
                return;
        }
        size_t i;
        json_t *f;
        json_array_foreach(calls, i, f)(void) record_audit(d, id, "tool.call", json_incref(f));
        if (json_array_size(calls))
                daemon_log(d, "sandbox %s: %zu tool call(s) ended with the supervisor", id,
                           json_array_size(calls));
        json_decref(calls);
}

void sandbox_cleanup_leftovers(struct daemon *d, const char *id, pid_t pid, const char *workspace,
                               bool workspace_owned)
{
        close_open_calls(d, id);
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
