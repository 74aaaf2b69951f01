/* SPDX-License-Identifier: Apache-2.0 */
/* A sandbox's status, asked of its supervisor over the control socket: the
 * counters the API and /metrics show, whether a process runs (the idle
 * timeout), and process records the supervisor no longer knows. */
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
#include "sandbox-internal.h"
#include "sandbox.h"
#include "util.h"

#define STATUS_TIMEOUT_MS 5000

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
                json_array_foreach(procs, i, e) if ((uint64_t)json_integer_value(json_object_get(
                                                        e, "pid")) == v[k]->pid) found = e;
                int r = 0;
                if (found && !json_is_true(json_object_get(found, "running")) &&
                    json_is_integer(json_object_get(found, "exitCode")))
                        r = store_process_end(
                            sb->d->store, sb->id, v[k]->pid,
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
                json_array_foreach(json_object_get(a, "processes"), i, p) busy =
                    busy || json_is_true(json_object_get(p, "running"));
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
        int r = ctl_call_start(sb->d->base, sb->control_path, req, STATUS_TIMEOUT_MS, &status_ops,
                               s, &c);
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

/* Stopping: the status calls in flight end with -ECANCELED. */
void sandbox_status_cancel_all(struct daemon *d)
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
}
