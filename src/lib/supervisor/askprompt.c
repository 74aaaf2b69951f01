/* SPDX-License-Identifier: Apache-2.0 */
/* The terminal prompt of `airlock run --ask` (askprompt.h). */
#include <errno.h>
#include <event2/buffer.h>
#include <event2/event.h>
#include <jansson.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

#include "approvals.h"
#include "askprompt.h"
#include "core.h"
#include "ptyio.h"
#include "util.h"

struct ask_prompt {
        struct sv_core *core;
        int fd;
        struct ptyio *pty;
        struct event *ev;
        json_t *queue; /* [{"id", "request"}], the first one shown */
        bool showing;
        /* -T with the terminal as stdin: the prompt is the terminal's one
         * reader, and what is typed while no prompt is up goes on to the
         * command's stdin through this pipe (so no second reader races the
         * prompt for an answer). -1: none. */
        int fwd_fd;
        struct evbuffer *fwd;
        struct event *ev_fwd;
};

#define ASK_FWD_MAX (64u << 10) /* typed ahead and not yet taken by the command */

static void fwd_flush(struct ask_prompt *a);

/* The user's input is the prompt's while it is up. */
static void hold_input(struct ask_prompt *a, bool up)
{
        ptyio_pause(a->pty, up);
}

static void say(struct ask_prompt *a, const char *s)
{
        (void)write_full(a->fd, s, strlen(s));
}

/* Printable: what the sandbox named (a host, a tool) is echoed. */
static void clean(const char *s, char *out, size_t size)
{
        size_t j = 0;
        for (size_t i = 0; s && s[i] && j + 1 < size; i++)
                out[j++] = (s[i] >= 0x20 && s[i] < 0x7f) ? s[i] : '?';
        out[j] = '\0';
}

static bool still_pending(struct ask_prompt *a, const char *id)
{
        json_t *l = sv_core_approvals_list(a->core);
        bool found = false;
        size_t i;
        json_t *e;
        json_array_foreach(l, i, e) if (STREQ(json_string_value(json_object_get(e, "id")), id))
            found = true;
        json_decref(l);
        return found;
}

static void show_next(struct ask_prompt *a)
{
        while (json_array_size(a->queue) > 0) {
                json_t *q = json_array_get(a->queue, 0);
                const char *id = json_string_value(json_object_get(q, "id"));
                if (!id || !still_pending(a, id)) {
                        json_array_remove(a->queue, 0);
                        continue;
                }
                json_t *r = json_object_get(q, "request");
                const char *kind = json_string_value(json_object_get(r, "kind"));
                char what[512], name[300];
                if (kind && STREQ(kind, "tool")) {
                        clean(json_string_value(json_object_get(r, "tool")), name, sizeof(name));
                        snprintf(what, sizeof(what), "call the host tool %s", name);
                } else {
                        clean(json_string_value(json_object_get(r, "host")), name, sizeof(name));
                        char proto[16];
                        clean(json_string_value(json_object_get(r, "protocol")), proto,
                              sizeof(proto));
                        snprintf(what, sizeof(what), "connect to %s:%lld (%s)", name,
                                 (long long)json_integer_value(json_object_get(r, "port")), proto);
                }
                char line[1024];
                snprintf(line, sizeof(line),
                         "\r\n[airlock] the sandbox asks to %s\r\n"
                         "[airlock] allow it? [o]nce / [a]lways / [d]eny / [n]ever "
                         "(denied in %llu s): ",
                         what, (unsigned long long)(a->core->policy->ask_timeout_ms / 1000));
                /* The input is the prompt's before the prompt shows: an
                 * answer typed at once is not the command's. */
                a->showing = true;
                hold_input(a, true);
                say(a, line);
                event_add(a->ev, NULL);
                return;
        }
        a->showing = false;
        if (a->fwd_fd >= 0)
                fwd_flush(a); /* the terminal is read on, for the command */
        else
                event_del(a->ev);
        hold_input(a, false);
}

static void fwd_close(struct ask_prompt *a)
{
        if (a->fwd_fd >= 0)
                close(a->fwd_fd);
        a->fwd_fd = -1;
        if (a->ev_fwd)
                event_del(a->ev_fwd);
}

static void fwd_flush(struct ask_prompt *a)
{
        if (a->fwd_fd < 0)
                return;
        if (evbuffer_get_length(a->fwd) > 0) {
                int n = evbuffer_write(a->fwd, a->fwd_fd);
                if (n < 0 && errno != EAGAIN && errno != EINTR) {
                        evbuffer_drain(a->fwd, evbuffer_get_length(a->fwd));
                        fwd_close(a);
                        return;
                }
        }
        if (evbuffer_get_length(a->fwd) > 0)
                event_add(a->ev_fwd, NULL);
        else
                event_del(a->ev_fwd);
        /* Reading the terminal waits while the command has not taken what
         * was typed ahead: the buffer stays bounded. */
        if (evbuffer_get_length(a->fwd) >= ASK_FWD_MAX && !a->showing)
                event_del(a->ev);
        else
                event_add(a->ev, NULL);
}

static void on_fwd_writable(evutil_socket_t fd, short what, void *arg)
{
        fwd_flush(arg);
}

static void on_answer(evutil_socket_t fd, short what, void *arg)
{
        struct ask_prompt *a = arg;
        char buf[256];
        ssize_t n = read(a->fd, buf, sizeof(buf));
        if (n < 0 && (errno == EINTR || errno == EAGAIN))
                return;
        if (n == 0 && a->fwd_fd >= 0 && !a->showing) {
                /* End of input (^D): the command's stdin ends with it. */
                fwd_close(a);
                event_del(a->ev);
                return;
        }
        if (n <= 0) {
                /* The terminal is gone: nobody will answer; the asks time out. */
                event_del(a->ev);
                hold_input(a, false);
                return;
        }
        if (!a->showing) {
                if (a->fwd_fd >= 0) {
                        evbuffer_add(a->fwd, buf, (size_t)n);
                        fwd_flush(a);
                }
                return;
        }
        const char *decision = NULL;
        for (ssize_t i = 0; i < n && !decision; i++)
                switch (buf[i]) {
                case 'o':
                case 'O':
                case 'y':
                case 'Y':
                        decision = "allow-once";
                        break;
                case 'a':
                case 'A':
                        decision = "allow-sandbox";
                        break;
                case 'd':
                case 'D':
                        decision = "deny";
                        break;
                case 'n':
                case 'N':
                        decision = "deny-sandbox";
                        break;
                default:
                        break;
                }
        if (!decision) {
                say(a, "\r\n[airlock] answer o, a, d or n: ");
                return;
        }
        json_t *q = json_array_get(a->queue, 0);
        const char *id = json_string_value(json_object_get(q, "id"));
        json_t *o = NULL;
        int r = id ? sv_core_approvals_decide(a->core, id, decision, "terminal", &o) : -ENOENT;
        json_decref(o);
        say(a, r < 0 ? "\r\n[airlock] too late: it was denied (timeout)\r\n"
               : (STREQ(decision, "allow-once") || STREQ(decision, "allow-sandbox"))
                   ? "\r\n[airlock] allowed\r\n"
                   : "\r\n[airlock] denied\r\n");
        json_array_remove(a->queue, 0);
        show_next(a);
}

static void on_ask(void *ud, const json_t *fields)
{
        struct ask_prompt *a = ud;
        if (json_array_size(a->queue) >= APPROVALS_PENDING_MAX)
                return; /* the bound is the approvals' own; this never grows past it */
        json_array_append_new(a->queue, json_deep_copy(fields));
        if (!a->showing)
                show_next(a);
}

struct ask_prompt *ask_prompt_start(struct sv_core *core, int tty_fd, struct ptyio *pty, int fwd_fd)
{
        struct ask_prompt *a = xcalloc(1, sizeof(*a));
        a->fwd_fd = fwd_fd;
        a->fwd = evbuffer_new();
        a->core = core;
        a->fd = tty_fd;
        a->pty = pty;
        a->queue = json_array();
        evutil_make_socket_nonblocking(tty_fd);
        a->ev = event_new(core->base, tty_fd, EV_READ | EV_PERSIST, on_answer, a);
        core->on_ask = on_ask;
        core->on_ask_ud = a;
        if (fwd_fd >= 0) {
                evutil_make_socket_nonblocking(fwd_fd);
                a->ev_fwd = event_new(core->base, fwd_fd, EV_WRITE, on_fwd_writable, a);
                event_add(a->ev, NULL);
        }
        return a;
}

struct ask_prompt *ask_prompt_free(struct ask_prompt *a)
{
        if (!a)
                return NULL;
        if (a->core->on_ask_ud == a) {
                a->core->on_ask = NULL;
                a->core->on_ask_ud = NULL;
        }
        if (a->ev)
                event_free(a->ev);
        if (a->ev_fwd)
                event_free(a->ev_fwd);
        if (a->fwd_fd >= 0)
                close(a->fwd_fd);
        if (a->fwd)
                evbuffer_free(a->fwd);
        if (a->showing)
                hold_input(a, false);
        json_decref(a->queue);
        free(a);
        return NULL;
}
