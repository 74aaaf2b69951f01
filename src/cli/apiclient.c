/* SPDX-License-Identifier: Apache-2.0 */
/* airlockd's API client (apiclient.h). */
#include <ctype.h>
#include <errno.h>
#include <jansson.h>
#include <netdb.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <unistd.h>

#include "apiclient.h"
#include "gitops.h"
#include "help.h"
#include "paths.h"
#include "util.h"

#define BODY_MAX (64u << 20) /* a whole response read into memory */

static int conn_fill(struct api_conn *c)
{
        if (c->start > 0) {
                memmove(c->buf, c->buf + c->start, c->end - c->start);
                c->end -= c->start;
                c->start = 0;
        }
        if (c->end == sizeof(c->buf))
                return -ENOBUFS;
        ssize_t n;
        do
                n = read(c->fd, c->buf + c->end, sizeof(c->buf) - c->end);
        while (n < 0 && errno == EINTR);
        if (n < 0)
                return -errno;
        c->end += (size_t)n;
        return (int)n;
}

void api_conn_close(struct api_conn *c)
{
        if (c->fd >= 0)
                close(c->fd);
        c->fd = -1;
}

static char *default_socket(void)
{
        return paths_daemon_socket(geteuid(), getenv("XDG_RUNTIME_DIR"));
}

int api_fail(const char *cmd, const char *fmt, ...)
{
        va_list ap;
        va_start(ap, fmt);
        fprintf(stderr, "airlock: %s: ", cmd);
        vfprintf(stderr, fmt, ap);
        fputc('\n', stderr);
        va_end(ap);
        return -EIO;
}

int api_conn_open(const char *cmd, const struct api_target *t, struct api_conn *c)
{
        memset(c, 0, sizeof(*c));
        c->fd = -1;
        if (t->socket_path) {
                struct sockaddr_un sa = {.sun_family = AF_UNIX};
                if (strlen(t->socket_path) >= sizeof(sa.sun_path))
                        return api_fail(cmd, "socket path %s is too long", t->socket_path);
                memcpy(sa.sun_path, t->socket_path, strlen(t->socket_path) + 1);
                c->fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
                if (c->fd < 0 || connect(c->fd, (struct sockaddr *)&sa, sizeof(sa)) < 0) {
                        int e = errno;
                        api_conn_close(c);
                        return api_fail(cmd, "connecting to airlockd at %s: %s", t->socket_path,
                                        strerror(e));
                }
                return 0;
        }
        struct addrinfo hints = {.ai_family = AF_UNSPEC, .ai_socktype = SOCK_STREAM};
        struct addrinfo *res = NULL;
        int g = getaddrinfo(t->host, t->port, &hints, &res);
        if (g != 0)
                return api_fail(cmd, "%s: %s", t->host, gai_strerror(g));
        int e = ECONNREFUSED;
        for (struct addrinfo *ai = res; ai; ai = ai->ai_next) {
                c->fd = socket(ai->ai_family, SOCK_STREAM | SOCK_CLOEXEC, 0);
                if (c->fd >= 0 && connect(c->fd, ai->ai_addr, ai->ai_addrlen) == 0)
                        break;
                e = errno;
                api_conn_close(c);
        }
        freeaddrinfo(res);
        if (c->fd < 0)
                return api_fail(cmd, "connecting to airlockd at %s:%s: %s", t->host, t->port,
                                strerror(e));
        return 0;
}

int api_send_request(struct api_conn *c, const struct api_target *t, const char *method,
                     const char *path, const char *ctype, const void *body, size_t len)
{
        _cleanup_free_ char *auth =
            t->token ? xasprintf("Authorization: Bearer %s\r\n", t->token) : xstrdup("");
        _cleanup_free_ char *head =
            xasprintf("%s %s HTTP/1.1\r\nHost: airlockd\r\n%sConnection: close\r\n"
                      "Content-Length: %zu\r\n%s%s%s\r\n",
                      method, path, auth, len, ctype ? "Content-Type: " : "", ctype ? ctype : "",
                      ctype ? "\r\n" : "");
        int r = write_full(c->fd, head, strlen(head));
        if (r >= 0 && len > 0)
                r = write_full(c->fd, body, len);
        return r;
}

/* The head, read by the strict parser; what follows it in the buffer is
 * the body's first bytes. */
int api_read_head(struct api_conn *c)
{
        netgate_http_parser_init(&c->parser, NETGATE_HTTP_RESPONSE);
        for (;;) {
                size_t used = 0;
                int r = netgate_http_parser_feed(&c->parser, c->buf + c->start, c->end - c->start,
                                                 &used);
                if (r < 0)
                        return -EPROTO;
                c->start += used;
                if (r == 1)
                        break;
                r = conn_fill(c);
                if (r <= 0)
                        return r < 0 ? r : -EPROTO;
        }
        const struct netgate_http_head *h = &c->parser.head;
        c->status = h->status;
        netgate_http_body_init(&c->body, h->framing, h->length);
        return 0;
}

ssize_t api_read_body(struct api_conn *c, char *out, size_t size)
{
        while (!c->done) {
                size_t used = 0, off = 0, run = 0;
                int r = netgate_http_body_feed(&c->body, c->buf + c->start, c->end - c->start, size,
                                               &used, &off, &run);
                if (r < 0)
                        return -EPROTO;
                memcpy(out, c->buf + c->start + off, run);
                c->start += used;
                if (r == 1)
                        c->done = true;
                if (run > 0)
                        return (ssize_t)run;
                if (c->done || used > 0)
                        continue;
                r = conn_fill(c);
                if (r < 0)
                        return r;
                if (r == 0) {
                        /* The end of a body framed by the connection's end
                         * only; any other is cut short. */
                        if (c->body.framing != NETGATE_HTTP_BODY_CLOSE)
                                return -EPROTO;
                        c->done = true;
                }
        }
        return 0;
}

int api_read_all(struct api_conn *c, char **ret, size_t *ret_len)
{
        size_t cap = 8192, len = 0;
        char *buf = xcalloc(cap + 1, 1);
        for (;;) {
                if (len == cap) {
                        if (cap >= BODY_MAX) {
                                free(buf);
                                return -EFBIG;
                        }
                        cap *= 2;
                        buf = xrealloc(buf, cap + 1, 1);
                }
                ssize_t n = api_read_body(c, buf + len, cap - len);
                if (n < 0) {
                        free(buf);
                        return (int)n;
                }
                if (n == 0)
                        break;
                len += (size_t)n;
        }
        buf[len] = '\0';
        *ret = buf;
        *ret_len = len;
        return 0;
}

/* The API's one-line error. */
void api_print_error(const char *cmd, int status, const char *body)
{
        json_error_t jerr;
        json_t *o = json_loads(body ? body : "", 0, &jerr);
        const char *code = json_string_value(json_object_get(o, "error"));
        const char *msg = json_string_value(json_object_get(o, "message"));
        /* The message may quote what an agent named (a path it made): shown
         * escaped, on one line, as every agent byte that reaches a terminal. */
        if (code) {
                _cleanup_free_ char *ec = gitops_escape(code, strlen(code), false);
                _cleanup_free_ char *em =
                    gitops_escape(msg ? msg : "", msg ? strlen(msg) : 0, false);
                fprintf(stderr, "airlock: %s: %s: %s\n", cmd, ec, em);
        } else
                fprintf(stderr, "airlock: %s: the daemon answered %d\n", cmd, status);
        json_decref(o);
}

/* A request whose whole answer is read. Returns the HTTP status (an API
 * error already printed unless `quiet_errors`), or -errno. */
int api_call(const char *cmd, const struct api_target *t, const char *method, const char *path,
             const char *ctype, const void *body, size_t len, char **ret_body, size_t *ret_len,
             bool print_errors)
{
        struct api_conn c;
        int r = api_conn_open(cmd, t, &c);
        if (r < 0)
                return r;
        r = api_send_request(&c, t, method, path, ctype, body, len);
        if (r >= 0)
                r = api_read_head(&c);
        char *resp = NULL;
        size_t rlen = 0;
        if (r >= 0)
                r = api_read_all(&c, &resp, &rlen);
        api_conn_close(&c);
        if (r < 0) {
                api_fail(cmd, "talking to airlockd: %s", strerror(-r));
                return r;
        }
        if (c.status >= 400 && print_errors)
                api_print_error(cmd, c.status, resp);
        if (ret_body) {
                *ret_body = resp;
                if (ret_len)
                        *ret_len = rlen;
        } else
                free(resp);
        return c.status;
}

char *api_url_escape(const char *s)
{
        size_t n = strlen(s);
        char *out = xcalloc(n * 3 + 1, 1);
        size_t o = 0;
        for (size_t i = 0; i < n; i++) {
                unsigned char ch = (unsigned char)s[i];
                if (isalnum(ch) || strchr("-._~/", ch))
                        out[o++] = (char)ch;
                else
                        o += (size_t)snprintf(out + o, 4, "%%%02X", ch);
        }
        out[o] = '\0';
        return out;
}

bool api_valid_id(const char *s)
{
        if (strlen(s) != 16)
                return false;
        for (const char *p = s; *p; p++)
                if (!isdigit((unsigned char)*p) && !(*p >= 'a' && *p <= 'f'))
                        return false;
        return true;
}

const char api_common_help[] =
    "\n"
    "More options, to reach the daemon:\n"
    "      --socket PATH   airlockd's unix socket (default: $AIRLOCK_SOCKET, else\n"
    "                      /run/airlock/airlockd.sock for root,\n"
    "                      $XDG_RUNTIME_DIR/airlock/airlockd.sock otherwise)\n"
    "      --url URL       reach it over TCP instead: http://127.0.0.1:7070 ($AIRLOCK_URL)\n"
    "      --token TOKEN   the grant's token (default: $AIRLOCK_TOKEN)\n"
    "  -h, --help          show this help\n";

int api_common_opt(int c, struct api_common *o)
{
        switch (c) {
        case API_O_SOCKET:
                o->socket_path = optarg;
                return 1;
        case API_O_URL:
                o->url = optarg;
                return 1;
        case API_O_TOKEN:
                o->token = optarg;
                return 1;
        }
        return 0;
}

static char *socket_storage;

int api_make_target(const char *cmd, const struct api_common *o, struct api_target *t)
{
        memset(t, 0, sizeof(*t));
        t->token = o->token ? o->token : getenv("AIRLOCK_TOKEN");
        const char *url = o->url ? o->url : (o->socket_path ? NULL : getenv("AIRLOCK_URL"));
        if (url) {
                if (strncmp(url, "http://", 7) != 0)
                        return api_fail(cmd, "--url \"%s\": expected http://HOST:PORT", url);
                const char *hp = url + 7;
                size_t n = strcspn(hp, "/");
                const char *colon = memrchr(hp, ':', n);
                if (!colon || colon == hp || (size_t)(colon - hp) >= sizeof(t->host) ||
                    (size_t)(hp + n - colon - 1) >= sizeof(t->port))
                        return api_fail(cmd, "--url \"%s\": expected http://HOST:PORT", url);
                memcpy(t->host, hp, (size_t)(colon - hp));
                memcpy(t->port, colon + 1, (size_t)(hp + n - colon - 1));
                if (t->host[0] == '[' && t->host[strlen(t->host) - 1] == ']') {
                        memmove(t->host, t->host + 1, strlen(t->host));
                        t->host[strlen(t->host) - 1] = '\0';
                }
                return 0;
        }
        t->socket_path = o->socket_path ? o->socket_path : getenv("AIRLOCK_SOCKET");
        if (!t->socket_path) {
                free(socket_storage);
                socket_storage = default_socket();
                t->socket_path = socket_storage;
        }
        if (!t->socket_path)
                return api_fail(cmd, "no socket: give --socket or set XDG_RUNTIME_DIR");
        return 0;
}

int api_bad_option(const char *cmd, char **argv)
{
        fprintf(stderr,
                "airlock: %s: unknown or incomplete option \"%s\" (see 'airlock %s --help')\n", cmd,
                argv[optind - 1], cmd);
        return EXIT_USAGE;
}

void api_print_help(const char *usage, const char *cmd)
{
        _cleanup_free_ char *t = xasprintf("%s%s", usage, api_common_help);
        help_print(stdout, t, cmd);
}

/* For the commands that take only the common options. Returns the exit
 * status when the command is done (help, or a bad option), else -1. */
int api_common_options_only(const char *cmd, const char *usage, int argc, char **argv,
                            struct api_common *co)
{
        static const struct option opts[] = {API_COMMON_OPTIONS, {NULL, 0, NULL, 0}};
        int c;
        optind = 1;
        opterr = 0;
        while ((c = getopt_long(argc, argv, "h", opts, NULL)) != -1) {
                if (api_common_opt(c, co))
                        continue;
                if (c == 'h') {
                        api_print_help(usage, cmd);
                        return 0;
                }
                return api_bad_option(cmd, argv);
        }
        return -1;
}

int api_parse_seconds(const char *s, double *ret)
{
        uint64_t ms;
        if (parse_duration_ms(s, &ms) < 0)
                return -EINVAL;
        *ret = (double)ms / 1000.0;
        return 0;
}
