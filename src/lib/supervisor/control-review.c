/* SPDX-License-Identifier: Apache-2.0 */
#include <event2/buffer.h>
#include <event2/event.h>
#include <fcntl.h>
#include <jansson.h>
#include <signal.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include "control-internal.h"
#include "core.h"
#include "review.h"
#include "util.h"

/* review: copy the overlay's upper layer, as it is now, over the kept
 * changes. A child process does the copying, so a large layer does not
 * stall the sandbox's other requests and streams. */

void control_snap_reap(struct control *c, bool kill_it)
{
        if (!c->snap_pid)
                return;
        if (kill_it)
                kill(c->snap_pid, SIGKILL);
        while (waitpid(c->snap_pid, NULL, 0) < 0 && errno == EINTR)
                ;
        c->snap_pid = 0;
        if (c->ev_snap)
                event_free(c->ev_snap);
        c->ev_snap = NULL;
        if (c->snap_fd >= 0)
                close(c->snap_fd);
        c->snap_fd = -1;
        if (c->snap_out)
                evbuffer_free(c->snap_out);
        c->snap_out = NULL;
}

static void on_snap(evutil_socket_t fd, short what, void *arg)
{
        struct control *c = arg;
        char buf[4096];
        ssize_t n = read(fd, buf, sizeof(buf));
        if (n < 0 && (errno == EAGAIN || errno == EINTR))
                return;
        if (n > 0) {
                if (evbuffer_get_length(c->snap_out) < 64 * 1024)
                        evbuffer_add(c->snap_out, buf, (size_t)n);
                return;
        }
        size_t len = evbuffer_get_length(c->snap_out);
        json_t *o = json_loadb((const char *)evbuffer_pullup(c->snap_out, -1), len, 0, NULL);
        control_snap_reap(c, false);
        if (!json_is_object(o)) {
                json_decref(o);
                o = json_pack("{s:b, s:s, s:s}", "ok", 0, "error", "internal", "message",
                              "copying the changes ended without a report");
        } else if (json_is_true(json_object_get(o, "ok")))
                sv_core_record(&c->core, "review.snapshot",
                               json_deep_copy(json_object_get(o, "changes")));
        struct client *cl = c->snap_client;
        c->snap_client = NULL;
        if (cl) {
                control_send_json(cl, o);
                control_client_finish(cl);
        } else
                json_decref(o);
}

void control_do_review(struct client *cl)
{
        struct control *c = cl->ctl;
        if (!c->review_dir) {
                control_send_error(cl, "not_reviewable",
                                   "the sandbox's workspace is not copy-on-write");
                return;
        }
        if (c->snap_pid) {
                control_send_error(cl, "busy", "the changes are being copied for another request");
                return;
        }
        int p[2];
        if (pipe2(p, O_CLOEXEC) < 0) {
                control_send_error(cl, "internal", strerror(errno));
                return;
        }
        pid_t pid = fork();
        if (pid < 0) {
                close(p[0]);
                close(p[1]);
                control_send_error(cl, "internal", strerror(errno));
                return;
        }
        if (pid == 0) {
                close(p[0]);
                struct review_summary sum = {0};
                struct al_error e = {0};
                json_t *o;
                if (review_recapture(c->core.sp.upper_fd, c->review_dir, c->policy->limits.disk,
                                     &sum, &e) < 0)
                        o = json_pack("{s:b, s:s, s:s}", "ok", 0, "error", "internal", "message",
                                      e.msg);
                else
                        o = json_pack("{s:b, s:s, s:o}", "ok", 1, "dir", c->review_dir, "changes",
                                      events_review_counts(&sum));
                char *text = o ? json_dumps(o, JSON_COMPACT) : NULL;
                _exit(text && write_full(p[1], text, strlen(text)) >= 0 ? 0 : 1);
        }
        close(p[1]);
        c->snap_pid = pid;
        c->snap_fd = p[0];
        c->snap_out = evbuffer_new();
        c->snap_client = cl;
        c->ev_snap = event_new(c->core.base, p[0], EV_READ | EV_PERSIST, on_snap, c);
        event_add(c->ev_snap, NULL);
}
