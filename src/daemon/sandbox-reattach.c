/* SPDX-License-Identifier: Apache-2.0 */
/* A restarted daemon takes its sandboxes back: the records that say a
 * supervisor runs are checked against /proc (a recycled pid is not taken
 * for one), the live ones watched again, the lost ones cleaned up; and
 * supervisors the records do not know are destroyed. */
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <signal.h>
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "ctl.h"
#include "daemon.h"
#include "files.h"
#include "log.h"
#include "record.h"
#include "sandbox-internal.h"
#include "sandbox.h"
#include "util.h"

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
        /* A call cancelled because the daemon stops says nothing about the
         * supervisor: it keeps running, as every sandbox does when the
         * daemon stops, and the next start asks again. */
        if (error >= 0 || error == -ECANCELED || sb->d->shutting_down)
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
                sb->pidfd = sandbox_pidfd_open(sb->pid);
                if (sb->pidfd < 0 || !is_our_supervisor(sb->pid, id)) {
                        sandbox_free(sb);
                        continue;
                }
                sb->class_name = xstrdup("unknown");
                sb->metadata = json_object();
                sb->policy = policy_new();
                _cleanup_free_ char *ppath =
                    xasprintf("%s/sandboxes/%s/policy.json", d->state_dir, id);
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
                daemon_log(d, "sandbox %s: its supervisor (pid %d) has no record; destroying it",
                           id, (int)sb->pid);
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
                                sb->pidfd = sandbox_pidfd_open(sb->pid);
                                alive = sb->pidfd >= 0 && is_our_supervisor(sb->pid, sb->id);
                        }
                        if (!alive) {
                                lost++;
                                sb->state =
                                    STREQ(live[k], "stopping") ? SANDBOX_DESTROYED : SANDBOX_FAILED;
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
                daemon_log(d, "re-attached %zu sandbox(es); %zu had lost their supervisor",
                           attached, lost);
        reattach_unrecorded(d);
        return 0;
}
