/* SPDX-License-Identifier: Apache-2.0 */
#include <event2/buffer.h>
#include <event2/bufferevent.h>
#include <event2/listener.h>
#include <jansson.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "trace.h"
#include "cgroup.h"
#include "control-internal.h"
#include "control-proto.h"
#include "netgate/netgate.h"
#include "diskuse.h"
#include "quota.h"
#include "util.h"

/* The control socket: one client per connection, one request line each
 * (control-proto.h), its answer, and the status op. */

void control_send_json(struct client *cl, json_t *o)
{
        char *s = json_dumps(o, JSON_COMPACT);
        json_decref(o);
        if (!s || !cl->bev)
                goto out;
        evbuffer_add(bufferevent_get_output(cl->bev), s, strlen(s));
        evbuffer_add(bufferevent_get_output(cl->bev), "\n", 1);
out:
        free(s);
}

void control_client_free(struct client *cl)
{
        if (cl->ctl->snap_client == cl)
                cl->ctl->snap_client = NULL;
        control_fetch_orphan(cl);
        struct proc *p = cl->streaming;
        if (p) {
                for (size_t i = 0; i < ARRAY_SIZE(p->attached); i++)
                        if (p->attached[i] == cl)
                                p->attached[i] = NULL;
                cl->streaming = NULL;
                /* The rule (docs/control.md): a foreground command dies with
                 * the client that started it; a background one outlives it. */
                if (p->owner == cl) {
                        p->owner = NULL;
                        if (!p->background && !p->done)
                                control_proc_abandon(p, false);
                }
                control_proc_maybe_resume(p);
        }
        if (cl->watcher)
                cl->ctl->n_watchers--;
        if (cl->bev)
                bufferevent_free(cl->bev);
        if (--cl->ctl->n_clients == 0 && cl->ctl->destroying)
                event_base_loopexit(cl->ctl->core.base, NULL);
        free(cl);
}

/* Close once what is queued has been written. */
void control_client_finish(struct client *cl)
{
        cl->closing = true;
        if (evbuffer_get_length(bufferevent_get_output(cl->bev)) == 0)
                control_client_free(cl);
}

void control_send_error(struct client *cl, const char *code, const char *msg)
{
        control_send_json(cl, json_pack("{s:b, s:s, s:s}", "ok", 0, "error", code, "message", msg));
        control_client_finish(cl);
}

void control_do_status(struct client *cl)
{
        struct control *c = cl->ctl;
        struct cgroup_usage cu = {0};
        if (c->core.cg)
                c->core.cg->ops->usage(c->core.cg, &cu);
        struct netgate_stats ns = {0};
        if (c->core.gate)
                netgate_get_stats(c->core.gate, &ns);
        uint64_t ws_added = 0;
        bool ws_full = false, ws = c->core.wq && quota_usage(c->core.wq, &ws_added, &ws_full) >= 0;
        json_t *procs = json_array();
        for (int i = 0; i < CONTROL_MAX_PROCS; i++)
                if (c->procs[i])
                        json_array_append_new(
                            procs,
                            json_pack("{s:i, s:O, s:b, s:o, s:o, s:I}", "pid", c->procs[i]->id,
                                      "argv", c->procs[i]->argv, "running",
                                      !(c->procs[i]->exited || c->procs[i]->failed), "exitCode",
                                      c->procs[i]->done ? json_integer(c->procs[i]->exit_code)
                                                        : json_null(),
                                      "errorCode",
                                      c->procs[i]->done && c->procs[i]->error_code
                                          ? json_string(c->procs[i]->error_code)
                                          : json_null(),
                                      "seq", (json_int_t)c->procs[i]->seq));
        json_t *st = json_pack(
            "{s:b, s:s, s:s, s:s, s:{s:I, s:I, s:I, s:o, s:o, s:o}, s:{s:I, s:I, s:I, s:I, "
            "s:I}, s:o, s:I}",
            "ok", 1, "sandbox", c->cfg->id, "state", "running", "startedAt", c->started_at, "usage",
            "cpuMs", (json_int_t)(cu.cpu_usec / 1000), "memoryPeakBytes",
            (json_int_t)cu.memory_peak, "pids", (json_int_t)cu.pids_current, "ioReadBytes",
            cu.io_measured ? json_integer((json_int_t)cu.io_read_bytes) : json_null(),
            "ioWriteBytes",
            cu.io_measured ? json_integer((json_int_t)cu.io_write_bytes) : json_null(),
            "workspaceAddedBytes", ws ? json_integer((json_int_t)ws_added) : json_null(), "network",
            "requests", (json_int_t)ns.requests, "allowed", (json_int_t)ns.allowed, "denied",
            (json_int_t)ns.denied, "bytesUp", (json_int_t)ns.bytes_up, "bytesDown",
            (json_int_t)ns.bytes_down, "processes", procs, "oomKills", (json_int_t)cu.oom_kills);
        /* The workspace's peak growth so far (diskuse.h; the tick's last
         * sample, no walk on request). */
        uint64_t peak = 0, last = 0;
        if (st && json_object_get(st, "usage"))
                json_object_set_new(json_object_get(st, "usage"), "diskPeakBytes",
                                    disk_meter_result(c->core.dm, &peak, &last)
                                        ? json_integer((json_int_t)peak)
                                        : json_null());
        control_send_json(cl, st);
        control_client_finish(cl);
}

static void on_client_read(struct bufferevent *bev, void *arg)
{
        struct client *cl = arg;
        if (cl->streaming || cl->closing || cl->fetch)
                return; /* one request per connection */
        struct evbuffer *in = bufferevent_get_input(bev);
        size_t len;
        char *line = evbuffer_readln(in, &len, EVBUFFER_EOL_LF);
        if (!line) {
                if (evbuffer_get_length(in) > CONTROL_LINE_MAX)
                        control_send_error(cl, "bad_request", "request line too long");
                return;
        }
        json_t *req = NULL;
        al_trace_mark("sv.request");
        int op = control_parse_request(line, len, &req);
        free(line);
        if (op < 0)
                control_send_error(cl, "bad_request", "expected a JSON object with \"op\"");
        else if (cl->ctl->destroying)
                control_send_error(cl, "destroyed", "the sandbox is being destroyed");
        else
                switch ((enum control_req)op) {
                case CONTROL_REQ_STATUS:
                        control_do_status(cl);
                        break;
                case CONTROL_REQ_EXEC:
                        control_do_exec(cl, req);
                        break;
                case CONTROL_REQ_ATTACH:
                        control_do_attach(cl, req);
                        break;
                case CONTROL_REQ_STDIN:
                        control_do_stdin(cl, req);
                        break;
                case CONTROL_REQ_SIGNAL:
                        control_do_signal(cl, req);
                        break;
                case CONTROL_REQ_RESIZE:
                        control_do_resize(cl, req);
                        break;
                case CONTROL_REQ_REVIEW:
                        control_do_review(cl);
                        break;
                case CONTROL_REQ_DESTROY:
                        control_send_json(cl, json_pack("{s:b}", "ok", 1));
                        control_client_finish(cl);
                        control_destroy(cl->ctl);
                        break;
                case CONTROL_REQ_PORTS:
                        control_do_ports(cl, req);
                        break;
                case CONTROL_REQ_STOP:
                        control_do_stop(cl, req);
                        break;
                case CONTROL_REQ_CAPS:
                        control_send_json(
                            cl, sv_core_caps_request(&cl->ctl->core, req, "control-socket"));
                        control_client_finish(cl);
                        break;
                case CONTROL_REQ_ESTOP:
                        control_do_estop(cl, req);
                        break;
                case CONTROL_REQ_APPROVALS:
                        control_do_approvals(cl);
                        break;
                case CONTROL_REQ_APPROVE:
                        control_do_approve(cl, req);
                        break;
                case CONTROL_REQ_FETCH:
                        control_do_fetch(cl, req);
                        break;
                case CONTROL_REQ_UNKNOWN:
                        control_send_error(cl, "bad_request", "unknown op");
                        break;
                }
        json_decref(req);
}

static void on_client_write(struct bufferevent *bev, void *arg)
{
        struct client *cl = arg;
        if (cl->closing) {
                if (evbuffer_get_length(bufferevent_get_output(bev)) == 0)
                        control_client_free(cl);
        } else if (cl->streaming)
                control_proc_maybe_resume(cl->streaming);
}

static void on_client_event(struct bufferevent *bev, short what, void *arg)
{
        struct client *cl = arg;
        /* A client that leaves, or that has not read for the write timeout,
         * is let go (control_client_free says what becomes of its command). */
        if (what & (BEV_EVENT_EOF | BEV_EVENT_ERROR | BEV_EVENT_TIMEOUT))
                control_client_free(cl);
}

void control_on_accept(struct evconnlistener *l, evutil_socket_t fd, struct sockaddr *sa, int len,
                       void *arg)
{
        struct control *c = arg;
        if (c->n_clients >= CONTROL_MAX_CLIENTS) {
                close(fd);
                return;
        }
        struct client *cl = xcalloc(1, sizeof(*cl));
        cl->ctl = c;
        cl->bev = bufferevent_socket_new(c->core.base, fd, BEV_OPT_CLOSE_ON_FREE);
        c->n_clients++;
        bufferevent_setcb(cl->bev, on_client_read, on_client_write, on_client_event, cl);
        bufferevent_setwatermark(cl->bev, EV_READ, 0, CONTROL_LINE_MAX + 1);
        /* Told when a streaming client's queue is half drained, to resume
         * reading its process; one that reads nothing for longer than the
         * longest stall is gone. */
        bufferevent_setwatermark(cl->bev, EV_WRITE, CONTROL_STREAM_MAX / 2, 0);
        struct timeval wtv = {.tv_sec = CONTROL_STALL_MAX_MS / 1000 + 60, .tv_usec = 0};
        bufferevent_set_timeouts(cl->bev, NULL, &wtv);
        bufferevent_enable(cl->bev, EV_READ | EV_WRITE);
}
