/* SPDX-License-Identifier: Apache-2.0 */
/* airlock attach ID PID: the user's terminal joined to the terminal of a
 * process in one of airlockd's sandboxes, over the API's WebSocket stream
 * (docs/api.md, "Terminals"): raw mode while attached, the window size
 * passed on at the start and on SIGWINCH, the mode restored on every way
 * out. Ctrl-] detaches and leaves the process running. */
#include <errno.h>
#include <getopt.h>
#include <inttypes.h>
#include <jansson.h>
#include <poll.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/random.h>
#include <sys/signalfd.h>
#include <unistd.h>

#include "apiclient.h"
#include "commands.h"
#include "term.h"
#include "util.h"
#include "ws.h"

#define DETACH_KEY 0x1d       /* Ctrl-] */
#define FRAME_MAX  (4u << 20) /* the largest frame taken from airlockd */
#define FRAME_BUF  (FRAME_MAX + 64)

static const char attach_usage[] =
    "Usage: airlock attach [OPTIONS] ID PID\n"
    "\n"
    "Join this terminal to the terminal of process PID in sandbox ID (a process\n"
    "started with a terminal: exec with \"pty\"). Keys go to it as typed, its window\n"
    "follows this one's size. Ctrl-] detaches; the process runs on.\n"
    "\n"
    "Options:\n"
    "      --offset N       start from output byte N (default 0: all that is kept)\n";

static int resize(const struct api_target *t, const char *id, uint64_t pid, int fd)
{
        uint16_t rows, cols;
        if (term_size(fd, &rows, &cols) < 0)
                return 0;
        _cleanup_free_ char *path =
            xasprintf("/v1/sandboxes/%s/processes/%" PRIu64 "/resize", id, pid);
        _cleanup_free_ char *body = xasprintf("{\"rows\":%u,\"cols\":%u}", rows, cols);
        char *ans = NULL;
        size_t n = 0;
        int st = api_call("attach", t, "POST", path, "application/json", body, strlen(body), &ans,
                          &n, false);
        free(ans);
        return st;
}

static int send_frame(int fd, uint8_t op, const void *data, size_t len)
{
        uint8_t mask[4], hdr[14];
        if (getrandom(mask, sizeof(mask), 0) != sizeof(mask))
                return -EIO;
        size_t hl = ws_client_header(hdr, op, len, mask);
        _cleanup_free_ uint8_t *buf = xcalloc(1, hl + len + 1);
        memcpy(buf, hdr, hl);
        if (len)
                memcpy(buf + hl, data, len);
        ws_unmask(buf + hl, len, mask, 0);
        return write_full(fd, buf, hl + len);
}

/* The handshake; what came after the 101's head is left in c->buf. */
static int handshake(const struct api_target *t, struct api_conn *c, const char *id, uint64_t pid,
                     uint64_t offset)
{
        uint8_t raw[16];
        char accept[29];
        if (getrandom(raw, sizeof(raw), 0) != sizeof(raw))
                return api_fail("attach", "no random bytes for the handshake");
        _cleanup_free_ char *key = base64_encode(raw, sizeof(raw));
        if (ws_accept_key(key, accept) < 0)
                return api_fail("attach", "making the handshake's key");
        _cleanup_free_ char *auth =
            t->token ? xasprintf("Authorization: Bearer %s\r\n", t->token) : xstrdup("");
        _cleanup_free_ char *head = xasprintf(
            "GET /v1/sandboxes/%s/processes/%" PRIu64 "/pty?offset=%" PRIu64 " HTTP/1.1\r\n"
            "Host: airlockd\r\n%sUpgrade: websocket\r\nConnection: Upgrade\r\n"
            "Sec-WebSocket-Version: 13\r\nSec-WebSocket-Key: %s\r\n\r\n",
            id, pid, offset, auth, key);
        if (write_full(c->fd, head, strlen(head)) < 0)
                return api_fail("attach", "writing to airlockd: %s", strerror(errno));
        if (api_read_head(c) < 0)
                return api_fail("attach", "airlockd's answer is not HTTP/1.1");
        if (c->status != 101) {
                _cleanup_free_ char *body = NULL;
                size_t n = 0;
                (void)api_read_all(c, &body, &n);
                api_print_error("attach", c->status, body);
                return -EIO;
        }
        const struct netgate_http_head *h = &c->parser.head;
        for (size_t i = 0; i < h->n_fields; i++)
                if (h->fields[i].name_len == 20 &&
                    strncasecmp(h->fields[i].name, "Sec-WebSocket-Accept", 20) == 0 &&
                    h->fields[i].value_len == 28 && memcmp(h->fields[i].value, accept, 28) == 0)
                        return 0;
        return api_fail("attach", "airlockd's handshake answer has the wrong Sec-WebSocket-Accept");
}

struct session {
        int fd;
        uint8_t *buf;
        size_t len;
        bool closed;
        bool have_exit;
        int exit_code;
        char close_reason[128];
        uint16_t close_code;
};

/* The frames received so far: output to stdout, events noted, pings
 * answered. Returns -EPROTO on a frame that breaks the protocol. */
static int take_frames(struct session *s)
{
        size_t off = 0;
        while (!s->closed) {
                struct ws_frame f;
                int r = ws_parse_server_frame(s->buf + off, s->len - off, FRAME_MAX, &f);
                if (r == 0)
                        break;
                if (r < 0)
                        return -EPROTO;
                const uint8_t *p = s->buf + off + f.header_len;
                size_t n = (size_t)f.len;
                if (f.opcode == WS_BINARY || f.opcode == WS_CONT) {
                        (void)write_full(1, p, n);
                } else if (f.opcode == WS_TEXT) {
                        json_t *ev = json_loadb((const char *)p, n, 0, NULL);
                        const char *type = json_string_value(json_object_get(ev, "type"));
                        if (type && STREQ(type, "exit")) {
                                s->have_exit = true;
                                s->exit_code =
                                    (int)json_integer_value(json_object_get(ev, "exitCode"));
                        }
                        json_decref(ev);
                } else if (f.opcode == WS_PING) {
                        (void)send_frame(s->fd, WS_PONG, p, n);
                } else if (f.opcode == WS_CLOSE) {
                        s->closed = true;
                        if (n >= 2) {
                                s->close_code = (uint16_t)(p[0] << 8 | p[1]);
                                snprintf(s->close_reason, sizeof(s->close_reason), "%.*s",
                                         (int)(n - 2), (const char *)p + 2);
                        }
                        (void)send_frame(s->fd, WS_CLOSE, p, n >= 2 ? 2 : 0);
                }
                off += f.header_len + n;
        }
        memmove(s->buf, s->buf + off, s->len - off);
        s->len -= off;
        return 0;
}

static int relay(const struct api_target *t, const char *id, uint64_t pid, struct session *s,
                 int sfd, bool *detached, int *ret_signal)
{
        for (;;) {
                struct pollfd pfd[3] = {{.fd = s->fd, .events = POLLIN},
                                        {.fd = 0, .events = POLLIN},
                                        {.fd = sfd, .events = POLLIN}};
                if (poll(pfd, sfd >= 0 ? 3 : 2, -1) < 0) {
                        if (errno == EINTR)
                                continue;
                        return -errno;
                }
                if (pfd[2].revents & POLLIN) {
                        struct signalfd_siginfo si;
                        bool winch = false;
                        while (read(sfd, &si, sizeof(si)) == (ssize_t)sizeof(si)) {
                                if (si.ssi_signo != SIGWINCH) {
                                        /* Ended from outside: the terminal
                                         * is put back before we go. */
                                        *ret_signal = (int)si.ssi_signo;
                                        return 0;
                                }
                                winch = true;
                        }
                        if (winch)
                                (void)resize(t, id, pid, 0);
                }
                if (pfd[0].revents & (POLLIN | POLLHUP | POLLERR)) {
                        if (s->len == FRAME_BUF)
                                return -EPROTO;
                        ssize_t n = read(s->fd, s->buf + s->len, FRAME_BUF - s->len);
                        if (n < 0 && errno == EINTR)
                                continue;
                        if (n <= 0)
                                return 0; /* airlockd closed */
                        s->len += (size_t)n;
                        if (take_frames(s) < 0)
                                return -EPROTO;
                        if (s->closed)
                                return 0;
                }
                if (pfd[1].revents & (POLLIN | POLLHUP)) {
                        uint8_t in[4096];
                        ssize_t n = read(0, in, sizeof(in));
                        if (n < 0 && errno == EINTR)
                                continue;
                        if (n <= 0) {
                                /* No more input: the end of it, as typed. */
                                (void)send_frame(s->fd, WS_BINARY, "\x04", 1);
                                pfd[1].fd = -1;
                                continue;
                        }
                        uint8_t *dk = memchr(in, DETACH_KEY, (size_t)n);
                        size_t keep = dk ? (size_t)(dk - in) : (size_t)n;
                        if (keep && send_frame(s->fd, WS_BINARY, in, keep) < 0)
                                return -EIO;
                        if (dk) {
                                uint8_t code[2] = {WS_CLOSE_NORMAL >> 8, WS_CLOSE_NORMAL & 0xff};
                                (void)send_frame(s->fd, WS_CLOSE, code, 2);
                                *detached = true;
                                return 0;
                        }
                }
        }
}

int cmd_attach(int argc, char **argv)
{
        static const struct option opts[] = {
            {"offset", required_argument, NULL, 'o'},
            API_COMMON_OPTIONS,
            {NULL, 0, NULL, 0},
        };
        struct api_common co = {0};
        uint64_t offset = 0, pid = 0;
        int c;
        optind = 1;
        opterr = 0;
        while ((c = getopt_long(argc, argv, "+h", opts, NULL)) != -1) {
                if (api_common_opt(c, &co))
                        continue;
                if (c == 'h') {
                        api_print_help(attach_usage, "attach");
                        return 0;
                }
                if (c == 'o' && safe_atou64(optarg, &offset) == 0)
                        continue;
                if (c == 'o') {
                        fprintf(stderr,
                                "airlock: attach: --offset \"%s\": expected a number of bytes\n",
                                optarg);
                        return EXIT_USAGE;
                }
                return api_bad_option("attach", argv);
        }
        if (argc - optind != 2 || !api_valid_id(argv[optind]) ||
            safe_atou64(argv[optind + 1], &pid) < 0 || pid == 0) {
                fprintf(stderr, "airlock: attach: expected a sandbox ID (16 hex digits) and a "
                                "process number (see 'airlock attach --help')\n");
                return EXIT_USAGE;
        }
        const char *id = argv[optind];
        struct api_target t;
        if (api_make_target("attach", &co, &t) < 0)
                return EXIT_FAIL;

        struct api_conn conn;
        if (api_conn_open("attach", &t, &conn) < 0)
                return EXIT_FAIL;
        if (handshake(&t, &conn, id, pid, offset) < 0) {
                api_conn_close(&conn);
                return EXIT_FAIL;
        }
        struct session s = {.fd = conn.fd, .buf = xcalloc(1, FRAME_BUF)};
        s.len = conn.end - conn.start;
        memcpy(s.buf, conn.buf + conn.start, s.len);

        /* With the terminal raw, a SIGTERM, a hang-up or a ^\ from
         * outside must not end us before its mode is restored: they are
         * read from the signalfd too. */
        sigset_t winch;
        sigemptyset(&winch);
        sigaddset(&winch, SIGWINCH);
        if (isatty(0)) {
                sigaddset(&winch, SIGTERM);
                sigaddset(&winch, SIGHUP);
                sigaddset(&winch, SIGINT);
                sigaddset(&winch, SIGQUIT);
        }
        sigprocmask(SIG_BLOCK, &winch, NULL);
        int sfd = isatty(0) ? signalfd(-1, &winch, SFD_CLOEXEC | SFD_NONBLOCK) : -1;
        /* From here every way out goes through term_restore. */
        struct term_saved saved = {.fd = -1};
        if (isatty(0)) {
                if (term_raw(0, &saved) == 0)
                        term_restore_on_fatal_signals(&saved); /* the others */
                (void)resize(&t, id, pid, 0);
        }
        bool detached = false;
        int sig = 0;
        int r = take_frames(&s);
        if (r >= 0 && !s.closed)
                r = relay(&t, id, pid, &s, sfd, &detached, &sig);
        term_restore(&saved);
        if (sfd >= 0)
                close(sfd);
        api_conn_close(&conn);
        free(s.buf);

        if (sig) {
                fprintf(stderr, "\nairlock: attach: ended by %s; process %" PRIu64 " runs on\n",
                        strsignal(sig), pid);
                return 128 + sig;
        }
        if (r < 0) {
                fprintf(stderr, "\nairlock: attach: the terminal stream broke: %s\n", strerror(-r));
                return EXIT_FAIL;
        }
        if (detached) {
                fprintf(stderr,
                        "\nairlock: attach: detached; process %" PRIu64
                        " runs on ('airlock attach %s %" PRIu64 "' to come back)\n",
                        pid, id, pid);
                return 0;
        }
        if (s.have_exit)
                return s.exit_code;
        if (s.close_code && s.close_code != WS_CLOSE_NORMAL)
                fprintf(stderr, "\nairlock: attach: the stream ended (%u%s%s)\n", s.close_code,
                        s.close_reason[0] ? ": " : "", s.close_reason);
        return EXIT_FAIL;
}
