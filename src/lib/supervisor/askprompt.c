/* SPDX-License-Identifier: Apache-2.0 */
/* The terminal prompt of `airlock run --ask` (askprompt.h). */
#include <errno.h>
#include <event2/buffer.h>
#include <event2/event.h>
#include <jansson.h>
#include <stdio.h>
#include <string.h>
#include <termios.h>
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
        /* The sandbox's output is held while a prompt is up (the sandbox
         * can neither overwrite the prompt nor draw beside it). */
        void (*hold_output)(void *ud, bool hold);
        void *hold_ud;
        /* The run's word: on the user's terminal at the start and in every
         * prompt, never in the sandbox, so a prompt the sandbox prints
         * cannot carry it. */
        char word[16];
        uint64_t shown_us; /* when the prompt was drawn */
        /* Where the terminal's input stands in an escape sequence (an arrow
         * key, a focus or mouse report, a reply to a query): none of its
         * bytes is an answer. Kept across reads that come close together. */
        int in_state;
        unsigned in_left;      /* raw bytes of an X10 mouse report still to come */
        unsigned in_len;       /* bytes of the control sequence so far */
        unsigned in_param;     /* its number so far (200 and 201: paste) */
        int in_paste_at;       /* in a paste: bytes of ESC [ 2 0 1 ~ matched */
        bool in_paste;         /* between ESC [ 200 ~ and ESC [ 201 ~ */
        uint64_t in_at_us;     /* the last read */
        struct event *ev_gone; /* an ask denied by its timeout or elsewhere */
};

#define ASK_FWD_MAX (64u << 10) /* typed ahead and not yet taken by the command */
/* Keys that come sooner than this after a prompt is drawn were typed
 * before anyone could read it (an answer to something else, perhaps to a
 * prompt the sandbox printed): they never count. */
#define ASK_SETTLE_MS 500
#define ASK_GONE_MS   500
/* Before a prompt: end any string (OSC, DCS) or sequence the sandbox left
 * open, which would swallow the prompt (ST, CAN), the ASCII character set
 * (SI, G0 = B), plain attributes (no concealed or same-colour text), a
 * visible cursor, and a line of its own. */
#define ASK_CLEAN "\033\\\030\017\033(B\033[0m\033[?25h\r\n"

static void fwd_flush(struct ask_prompt *a);

/* The terminal's input, byte by byte: a key typed on its own is in
 * IN_GROUND; everything from an ESC (or a C1 introducer: the 8-bit
 * controls a sandbox can switch the terminal to) to the sequence's end is
 * not. */
enum {
        IN_GROUND,
        IN_ESC, /* ESC, and its intermediates */
        IN_CSI, /* ESC [ or 0x9b: parameters until a final byte */
        IN_SS3, /* ESC O or 0x8f: one more byte (application keys) */
        IN_STR, /* OSC, DCS, SOS, PM, APC: until BEL or ST */
        IN_STR_ESC,
        IN_MOUSE, /* ESC [ M and three raw bytes */
};

/* Bracketed paste (CSI ? 2004 h, which the sandbox can switch on): what
 * is pasted comes between ESC [ 200 ~ and ESC [ 201 ~, and none of it is
 * a key typed to answer, however long it takes to arrive. */
static const char PASTE_END[] = "\033[201~";
#define PASTE_MAX_MS 5000 /* a paste whose end never came is over */

/* A sequence left open longer than this is dropped: a terminal sends one
 * at once, and the next key is the user's. */
#define ASK_SEQ_GAP_MS 100

static const char *key_decision(char c)
{
        switch (c) {
        case 'o':
        case 'O':
        case 'y':
        case 'Y':
                return "allow-once";
        case 'a':
        case 'A':
                return "allow-sandbox";
        case 'd':
        case 'D':
                return "deny";
        case 'n':
        case 'N':
                return "deny-sandbox";
        default:
                return NULL;
        }
}

/* The first answer typed on its own in buf, or NULL; the state goes on to
 * the next read. */
static const char *scan_answer(struct ask_prompt *a, const char *buf, size_t n)
{
        uint64_t now = now_monotonic_us();
        if (!a->in_paste && now - a->in_at_us > (uint64_t)ASK_SEQ_GAP_MS * 1000)
                a->in_state = IN_GROUND;
        if (a->in_paste && now - a->in_at_us > (uint64_t)PASTE_MAX_MS * 1000) {
                a->in_paste = false;
                a->in_state = IN_GROUND;
        }
        a->in_at_us = now;
        const char *decision = NULL;
        for (size_t i = 0; i < n; i++) {
                unsigned char c = (unsigned char)buf[i];
                if (a->in_paste) {
                        /* Only the end marker leaves a paste; no byte of it
                         * is an answer. */
                        if (c == (unsigned char)PASTE_END[a->in_paste_at])
                                a->in_paste_at++;
                        else
                                a->in_paste_at = c == 0x1b ? 1 : 0;
                        if (PASTE_END[a->in_paste_at] == '\0') {
                                a->in_paste = false;
                                a->in_state = IN_GROUND;
                        }
                        continue;
                }
                switch (a->in_state) {
                case IN_GROUND:
                        if (c == 0x1b)
                                a->in_state = IN_ESC;
                        else if (c == 0x9b) {
                                a->in_state = IN_CSI;
                                a->in_len = 0;
                        } else if (c == 0x8f)
                                a->in_state = IN_SS3;
                        else if (c == 0x90 || c == 0x98 || c == 0x9d || c == 0x9e || c == 0x9f)
                                a->in_state = IN_STR;
                        else if (!decision)
                                decision = key_decision((char)c);
                        break;
                case IN_ESC:
                        if (c == '[') {
                                a->in_state = IN_CSI;
                                a->in_len = 0;
                                a->in_param = 0;
                        } else if (c == 'O')
                                a->in_state = IN_SS3;
                        else if (c == ']' || c == 'P' || c == 'X' || c == '^' || c == '_')
                                a->in_state = IN_STR;
                        else if (c == 0x1b)
                                a->in_state = IN_ESC;
                        else if (c < 0x20 || c > 0x2f)   /* an intermediate stays */
                                a->in_state = IN_GROUND; /* Alt and a key: not an answer */
                        break;
                case IN_CSI:
                        if (c == 'M' && a->in_len == 0) {
                                a->in_state = IN_MOUSE;
                                a->in_left = 3;
                        } else if (c == 0x1b)
                                a->in_state = IN_ESC;
                        else if (c >= '0' && c <= '9') {
                                if (a->in_param < 100000)
                                        a->in_param = a->in_param * 10 + (unsigned)(c - '0');
                        } else if (c == '~' && a->in_param == 200 && a->in_len == 3) {
                                a->in_paste = true;
                                a->in_paste_at = 0;
                                a->in_state = IN_GROUND;
                        } else if (c == 0x18 || c == 0x1a || (c >= 0x40 && c <= 0x7e))
                                a->in_state = IN_GROUND;
                        a->in_len++;
                        break;
                case IN_SS3:
                        a->in_state = IN_GROUND;
                        break;
                case IN_STR:
                        if (c == 0x07 || c == 0x9c || c == 0x18 || c == 0x1a)
                                a->in_state = IN_GROUND;
                        else if (c == 0x1b)
                                a->in_state = IN_STR_ESC;
                        break;
                case IN_STR_ESC:
                        a->in_state = c == '\\' ? IN_GROUND : IN_STR;
                        break;
                case IN_MOUSE:
                default:
                        if (a->in_left <= 1)
                                a->in_state = IN_GROUND;
                        else
                                a->in_left--;
                        break;
                }
        }
        return decision;
}

/* The user's input is the prompt's while it is up, and the terminal's
 * output too. */
static void hold_input(struct ask_prompt *a, bool up)
{
        ptyio_pause(a->pty, up);
        if (a->hold_output)
                a->hold_output(a->hold_ud, up);
        if (up)
                event_add(a->ev_gone, &(struct timeval){.tv_usec = ASK_GONE_MS * 1000});
        else
                event_del(a->ev_gone);
}

/* A word of four syllables, such as "baku-tome" (14 consonants, 5 vowels:
 * about 24 bits), from the kernel's random bytes: not guessable by the
 * sandbox, which never sees it. */
static unsigned nibble(char h)
{
        return h >= 'a' ? (unsigned)(h - 'a' + 10) : (unsigned)(h - '0');
}

static int make_word(char out[static 16])
{
        char hex[17];
        int r = random_hex(hex, 16);
        if (r < 0)
                return r;
        static const char cons[] = "bdfgklmnprstvz";
        static const char vow[] = "aeiou";
        size_t j = 0;
        for (size_t i = 0; i < 4; i++) {
                unsigned c = nibble(hex[4 * i]) << 4 | nibble(hex[4 * i + 1]);
                unsigned v = nibble(hex[4 * i + 2]) << 4 | nibble(hex[4 * i + 3]);
                if (i == 2)
                        out[j++] = '-';
                out[j++] = cons[c % (sizeof(cons) - 1)];
                out[j++] = vow[v % (sizeof(vow) - 1)];
        }
        out[j] = '\0';
        return 0;
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
                char line[1200];
                snprintf(line, sizeof(line),
                         ASK_CLEAN "[airlock %s] the sandbox asks to %s\r\n"
                                   "[airlock %s] allow it? [o]nce / [a]lways / [d]eny / [n]ever "
                                   "(denied in %llu s): ",
                         a->word, what, a->word,
                         (unsigned long long)(a->core->policy->ask_timeout_ms / 1000));
                /* The input is the prompt's before the prompt shows: an
                 * answer typed at once is not the command's. What waits
                 * in the terminal was typed before the prompt: dropped. */
                a->showing = true;
                hold_input(a, true);
                (void)tcflush(a->fd, TCIFLUSH);
                a->in_state = IN_GROUND;
                say(a, line);
                a->shown_us = now_monotonic_us();
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
        /* Keys only: an escape sequence is a key that is no letter, or
         * the terminal speaking (a report the sandbox asked for). */
        const char *decision = scan_answer(a, buf, (size_t)n);
        if (now_monotonic_us() - a->shown_us < (uint64_t)ASK_SETTLE_MS * 1000) {
                char msg[160];
                snprintf(msg, sizeof(msg),
                         ASK_CLEAN "[airlock %s] typed before this prompt could be read: "
                                   "ignored; answer o, a, d or n: ",
                         a->word);
                say(a, msg);
                a->shown_us = now_monotonic_us();
                return;
        }
        if (!decision) {
                char msg[96];
                snprintf(msg, sizeof(msg), ASK_CLEAN "[airlock %s] answer o, a, d or n: ", a->word);
                say(a, msg);
                return;
        }
        json_t *q = json_array_get(a->queue, 0);
        const char *id = json_string_value(json_object_get(q, "id"));
        json_t *o = NULL;
        int r = id ? sv_core_approvals_decide(a->core, id, decision, "terminal", &o) : -ENOENT;
        /* An allow the rules in force now refuse (a deny rule granted while
         * it waited) is said so, not "allowed". */
        const json_t *refused = r == 0 ? json_object_get(o, "refused") : NULL;
        char rmsg[400], rule[256], why[64];
        if (refused) {
                clean(json_string_value(json_object_get(refused, "rule")), rule, sizeof(rule));
                clean(json_string_value(json_object_get(refused, "reason")), why, sizeof(why));
                snprintf(rmsg, sizeof(rmsg),
                         "\r\n[airlock] refused by the rules in force now (%s, rule: %s)\r\n", why,
                         rule[0] ? rule : "none");
        }
        json_decref(o);
        say(a, r == -EIO ? "\r\n[airlock] not recorded (audit log): it was denied\r\n"
               : r < 0   ? "\r\n[airlock] too late: it was denied (timeout)\r\n"
               : refused ? rmsg
               : (STREQ(decision, "allow-once") || STREQ(decision, "allow-sandbox"))
                   ? "\r\n[airlock] allowed\r\n"
                   : "\r\n[airlock] denied\r\n");
        json_array_remove(a->queue, 0);
        show_next(a);
}

/* The ask shown is no longer pending (its timeout denied it, or `airlock
 * approvals` decided it): the prompt comes down, and the sandbox's output
 * flows again. */
static void on_gone(evutil_socket_t fd, short what, void *arg)
{
        struct ask_prompt *a = arg;
        json_t *q = json_array_get(a->queue, 0);
        const char *id = json_string_value(json_object_get(q, "id"));
        if (!a->showing || (id && still_pending(a, id))) {
                if (a->showing)
                        event_add(a->ev_gone, &(struct timeval){.tv_usec = ASK_GONE_MS * 1000});
                return;
        }
        say(a, "\r\n[airlock] no longer asked: it was denied (timeout) or decided elsewhere\r\n");
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
        a->ev_gone = evtimer_new(core->base, on_gone, a);
        /* Without its word a prompt could be forged: then nobody is asked,
         * and every ask is denied by its timeout. */
        if (make_word(a->word) < 0)
                return ask_prompt_free(a);
        char banner[300];
        snprintf(banner, sizeof(banner),
                 ASK_CLEAN "[airlock] --ask: this run's prompts begin \"[airlock %s]\"; a prompt "
                           "without that word is not Airlock's, whatever it says (this line "
                           "comes once, before anything the sandbox prints)\r\n",
                 a->word);
        say(a, banner);
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
        if (a->ev_gone)
                event_free(a->ev_gone);
        if (a->fwd_fd >= 0)
                close(a->fwd_fd);
        if (a->fwd)
                evbuffer_free(a->fwd);
        if (a->showing)
                ptyio_pause(a->pty, false);
        json_decref(a->queue);
        free(a);
        return NULL;
}

void ask_prompt_hold_output(struct ask_prompt *a, void (*hold)(void *ud, bool hold), void *ud)
{
        if (!a)
                return;
        a->hold_output = hold;
        a->hold_ud = ud;
}
