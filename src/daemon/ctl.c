/* SPDX-License-Identifier: Apache-2.0 */
#include <errno.h>
#include <event2/buffer.h>
#include <event2/bufferevent.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/un.h>

#include "ctl.h"
#include "util.h"

struct ctl_call {
        struct bufferevent *bev;
        const struct ctl_call_ops *ops;
        void *userdata;
        bool in_callback;
        bool cancelled;
        bool paused;
        bool eof;
};

static void call_free(struct ctl_call *c)
{
        if (c->bev)
                bufferevent_free(c->bev);
        free(c);
}

/* Deliver the end and free the call. */
static void call_finish(struct ctl_call *c, int error)
{
        bufferevent_disable(c->bev, EV_READ | EV_WRITE);
        if (!c->cancelled && c->ops->done) {
                c->in_callback = true;
                c->ops->done(c, error, c->userdata);
        }
        call_free(c);
}

/* Hand buffered lines to the caller; after the end of the stream, finish.
 * Returns false when the call is gone. */
static bool deliver(struct ctl_call *c)
{
        struct evbuffer *in = bufferevent_get_input(c->bev);
        while (!c->cancelled && !c->paused) {
                size_t len = 0;
                char *line = evbuffer_readln(in, &len, EVBUFFER_EOL_LF);
                if (!line) {
                        if (evbuffer_get_length(in) > CTL_LINE_MAX) {
                                call_finish(c, -EPROTO);
                                return false;
                        }
                        break;
                }
                json_error_t jerr;
                json_t *msg = len > CTL_LINE_MAX ? NULL : json_loadb(line, len, 0, &jerr);
                free(line);
                if (!msg || !json_is_object(msg)) {
                        json_decref(msg);
                        call_finish(c, -EPROTO);
                        return false;
                }
                if (c->ops->line) {
                        c->in_callback = true;
                        c->ops->line(c, msg, c->userdata);
                        c->in_callback = false;
                }
                json_decref(msg);
        }
        if (c->cancelled) {
                call_free(c);
                return false;
        }
        if (c->eof && !c->paused) {
                call_finish(c, evbuffer_get_length(in) > 0 ? -EPROTO : 0);
                return false;
        }
        return true;
}

static void on_read(struct bufferevent *bev, void *arg)
{
        deliver(arg);
}

static void on_event(struct bufferevent *bev, short what, void *arg)
{
        struct ctl_call *c = arg;
        if (what & BEV_EVENT_EOF) {
                c->eof = true;
                deliver(c);
        } else if (what & BEV_EVENT_TIMEOUT) {
                call_finish(c, -ETIMEDOUT);
        } else if (what & BEV_EVENT_ERROR) {
                int e = errno ? errno : EIO;
                call_finish(c, -e);
        }
}

int ctl_call_start(struct event_base *base, const char *socket_path, json_t *req,
                   uint64_t timeout_ms, const struct ctl_call_ops *ops, void *userdata,
                   struct ctl_call **ret)
{
        struct sockaddr_un sa = {.sun_family = AF_UNIX};
        if (strlen(socket_path) >= sizeof(sa.sun_path))
                return -ENAMETOOLONG;
        memcpy(sa.sun_path, socket_path, strlen(socket_path) + 1);

        _cleanup_close_ int fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC | SOCK_NONBLOCK, 0);
        if (fd < 0)
                return -errno;
        if (connect(fd, (struct sockaddr *)&sa, sizeof(sa)) < 0 && errno != EINPROGRESS)
                return -errno;

        _cleanup_free_ char *text = json_dumps(req, JSON_COMPACT);
        if (!text)
                return -ENOMEM;

        struct ctl_call *c = xcalloc(1, sizeof(*c));
        c->ops = ops;
        c->userdata = userdata;
        c->bev = bufferevent_socket_new(base, fd, BEV_OPT_CLOSE_ON_FREE);
        if (!c->bev) {
                free(c);
                return -ENOMEM;
        }
        TAKE_FD(fd);
        bufferevent_setcb(c->bev, on_read, NULL, on_event, c);
        if (timeout_ms) {
                struct timeval tv = {.tv_sec = (time_t)(timeout_ms / 1000),
                                     .tv_usec = (suseconds_t)(timeout_ms % 1000) * 1000};
                bufferevent_set_timeouts(c->bev, &tv, &tv);
        }
        struct evbuffer *out = bufferevent_get_output(c->bev);
        if (evbuffer_add(out, text, strlen(text)) < 0 || evbuffer_add(out, "\n", 1) < 0) {
                call_free(c);
                return -ENOMEM;
        }
        bufferevent_enable(c->bev, EV_READ | EV_WRITE);
        *ret = c;
        return 0;
}

void ctl_call_pause(struct ctl_call *c, bool pause)
{
        if (c->cancelled || c->paused == pause)
                return;
        c->paused = pause;
        if (pause) {
                bufferevent_disable(c->bev, EV_READ);
                return;
        }
        if (!c->eof)
                bufferevent_enable(c->bev, EV_READ);
        /* Lines that arrived before the pause, or the end of the stream, would
         * not wake us again. */
        if (evbuffer_get_length(bufferevent_get_input(c->bev)) > 0 || c->eof)
                bufferevent_trigger(c->bev, EV_READ, BEV_TRIG_IGNORE_WATERMARKS | BEV_TRIG_DEFER_CALLBACKS);
}

void ctl_call_cancel(struct ctl_call *c)
{
        if (!c || c->cancelled)
                return;
        c->cancelled = true;
        if (!c->in_callback)
                call_free(c);
}
