/* SPDX-License-Identifier: Apache-2.0 */
#include <ctype.h>
#include <fcntl.h>
#include <getopt.h>
#include <inttypes.h>
#include <jansson.h>
#include <limits.h>
#include <netdb.h>
#include <stdarg.h>
#include <stdio.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <time.h>

#include "commands.h"
#include "paths.h"
#include "util.h"

/* airlock create | ls | exec | cp | rm | logs: clients of airlockd's API
 * (docs/api.md), over its unix socket or TCP. One request per connection. */

#define EXIT_FAIL   1
#define EXIT_USAGE  2
#define EXIT_SETUP  125
#define BODY_MAX    (64u << 20) /* a whole response read into memory */
#define LINE_MAX_   (16u << 20) /* one NDJSON line */
#define FILE_MAX    (16u << 20) /* the API's limit per file */
#define STDIN_MAX   (6u << 20)

struct target {
        const char *socket_path; /* NULL: TCP */
        char host[256];
        char port[16];
        const char *token;
};

struct conn {
        int fd;
        char buf[64 * 1024];
        size_t start, end;
        int status;
        bool chunked;
        bool has_length;
        uint64_t remaining; /* of the body, or of the current chunk */
        bool done;
        char content_type[128];
};

static void conn_close(struct conn *c)
{
        if (c->fd >= 0)
                close(c->fd);
        c->fd = -1;
}

static char *default_socket(void)
{
        return paths_daemon_socket(geteuid(), getenv("XDG_RUNTIME_DIR"));
}

static int fail(const char *cmd, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static int fail(const char *cmd, const char *fmt, ...)
{
        va_list ap;
        va_start(ap, fmt);
        fprintf(stderr, "airlock: %s: ", cmd);
        vfprintf(stderr, fmt, ap);
        fputc('\n', stderr);
        va_end(ap);
        return -EIO;
}

static int conn_open(const char *cmd, const struct target *t, struct conn *c)
{
        memset(c, 0, sizeof(*c));
        c->fd = -1;
        if (t->socket_path) {
                struct sockaddr_un sa = {.sun_family = AF_UNIX};
                if (strlen(t->socket_path) >= sizeof(sa.sun_path))
                        return fail(cmd, "socket path %s is too long", t->socket_path);
                memcpy(sa.sun_path, t->socket_path, strlen(t->socket_path) + 1);
                c->fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
                if (c->fd < 0 || connect(c->fd, (struct sockaddr *)&sa, sizeof(sa)) < 0) {
                        int e = errno;
                        conn_close(c);
                        return fail(cmd, "connecting to airlockd at %s: %s", t->socket_path,
                                    strerror(e));
                }
                return 0;
        }
        struct addrinfo hints = {.ai_family = AF_UNSPEC, .ai_socktype = SOCK_STREAM};
        struct addrinfo *res = NULL;
        int g = getaddrinfo(t->host, t->port, &hints, &res);
        if (g != 0)
                return fail(cmd, "%s: %s", t->host, gai_strerror(g));
        int e = ECONNREFUSED;
        for (struct addrinfo *ai = res; ai; ai = ai->ai_next) {
                c->fd = socket(ai->ai_family, SOCK_STREAM | SOCK_CLOEXEC, 0);
                if (c->fd >= 0 && connect(c->fd, ai->ai_addr, ai->ai_addrlen) == 0)
                        break;
                e = errno;
                conn_close(c);
        }
        freeaddrinfo(res);
        if (c->fd < 0)
                return fail(cmd, "connecting to airlockd at %s:%s: %s", t->host, t->port, strerror(e));
        return 0;
}

static int conn_fill(struct conn *c)
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

/* One CRLF-terminated line of the head or of chunk framing. */
static int conn_line(struct conn *c, char *out, size_t size)
{
        for (;;) {
                char *nl = memchr(c->buf + c->start, '\n', c->end - c->start);
                if (nl) {
                        size_t n = (size_t)(nl - (c->buf + c->start));
                        if (n > 0 && c->buf[c->start + n - 1] == '\r')
                                n--;
                        if (n >= size)
                                return -E2BIG;
                        memcpy(out, c->buf + c->start, n);
                        out[n] = '\0';
                        c->start = (size_t)(nl - c->buf) + 1;
                        return 0;
                }
                int r = conn_fill(c);
                if (r <= 0)
                        return r < 0 ? r : -EPROTO;
        }
}

static int send_request(struct conn *c, const struct target *t, const char *method, const char *path,
                        const char *ctype, const void *body, size_t len)
{
        _cleanup_free_ char *auth = t->token ? xasprintf("Authorization: Bearer %s\r\n", t->token)
                                             : xstrdup("");
        _cleanup_free_ char *head = xasprintf(
                "%s %s HTTP/1.1\r\nHost: airlockd\r\n%sConnection: close\r\n"
                "Content-Length: %zu\r\n%s%s%s\r\n",
                method, path, auth, len, ctype ? "Content-Type: " : "", ctype ? ctype : "",
                ctype ? "\r\n" : "");
        int r = write_full(c->fd, head, strlen(head));
        if (r >= 0 && len > 0)
                r = write_full(c->fd, body, len);
        return r;
}

static int read_head(struct conn *c)
{
        char line[8192];
        int r = conn_line(c, line, sizeof(line));
        if (r < 0)
                return r;
        int status = 0;
        if (sscanf(line, "HTTP/1.%*d %d", &status) != 1)
                return -EPROTO;
        c->status = status;
        for (;;) {
                r = conn_line(c, line, sizeof(line));
                if (r < 0)
                        return r;
                if (!line[0])
                        break;
                char *colon = strchr(line, ':');
                if (!colon)
                        continue;
                *colon = '\0';
                char *v = colon + 1;
                while (*v == ' ')
                        v++;
                if (strcasecmp(line, "Content-Length") == 0) {
                        if (safe_atou64(v, &c->remaining) < 0)
                                return -EPROTO;
                        c->has_length = true;
                } else if (strcasecmp(line, "Transfer-Encoding") == 0 && strcasestr(v, "chunked")) {
                        c->chunked = true;
                } else if (strcasecmp(line, "Content-Type") == 0) {
                        snprintf(c->content_type, sizeof(c->content_type), "%s", v);
                }
        }
        if (c->chunked)
                c->remaining = 0;
        return 0;
}

/* Up to `size` bytes of the body; 0 at its end. */
static ssize_t read_body(struct conn *c, char *out, size_t size)
{
        while (!c->done) {
                if (c->chunked && c->remaining == 0) {
                        char line[128];
                        int r = conn_line(c, line, sizeof(line));
                        if (r < 0)
                                return r;
                        if (!line[0])
                                continue; /* the CRLF after a chunk's data */
                        char *end = NULL;
                        errno = 0;
                        unsigned long long n = strtoull(line, &end, 16);
                        if (errno || end == line)
                                return -EPROTO;
                        if (n == 0) {
                                c->done = true;
                                break;
                        }
                        c->remaining = n;
                }
                if (!c->chunked && c->has_length && c->remaining == 0) {
                        c->done = true;
                        break;
                }
                if (c->start == c->end) {
                        int r = conn_fill(c);
                        if (r < 0)
                                return r;
                        if (r == 0) {
                                if (c->chunked || c->has_length)
                                        return -EPROTO;
                                c->done = true;
                                break;
                        }
                }
                size_t n = c->end - c->start;
                if (c->chunked || c->has_length)
                        n = n < c->remaining ? n : (size_t)c->remaining;
                n = n < size ? n : size;
                memcpy(out, c->buf + c->start, n);
                c->start += n;
                if (c->chunked || c->has_length)
                        c->remaining -= n;
                return (ssize_t)n;
        }
        return 0;
}

static int read_all(struct conn *c, char **ret, size_t *ret_len)
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
                ssize_t n = read_body(c, buf + len, cap - len);
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
static void print_api_error(const char *cmd, int status, const char *body)
{
        json_error_t jerr;
        json_t *o = json_loads(body ? body : "", 0, &jerr);
        const char *code = json_string_value(json_object_get(o, "error"));
        const char *msg = json_string_value(json_object_get(o, "message"));
        if (code)
                fprintf(stderr, "airlock: %s: %s: %s\n", cmd, code, msg ? msg : "");
        else
                fprintf(stderr, "airlock: %s: the daemon answered %d\n", cmd, status);
        json_decref(o);
}

/* A request whose whole answer is read. Returns the HTTP status (an API
 * error already printed unless `quiet_errors`), or -errno. */
static int call(const char *cmd, const struct target *t, const char *method, const char *path,
                const char *ctype, const void *body, size_t len, char **ret_body, size_t *ret_len,
                bool print_errors)
{
        struct conn c;
        int r = conn_open(cmd, t, &c);
        if (r < 0)
                return r;
        r = send_request(&c, t, method, path, ctype, body, len);
        if (r >= 0)
                r = read_head(&c);
        char *resp = NULL;
        size_t rlen = 0;
        if (r >= 0)
                r = read_all(&c, &resp, &rlen);
        conn_close(&c);
        if (r < 0) {
                fail(cmd, "talking to airlockd: %s", strerror(-r));
                return r;
        }
        if (c.status >= 400 && print_errors)
                print_api_error(cmd, c.status, resp);
        if (ret_body) {
                *ret_body = resp;
                if (ret_len)
                        *ret_len = rlen;
        } else
                free(resp);
        return c.status;
}

static char *url_escape(const char *s)
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

static bool valid_id(const char *s)
{
        if (strlen(s) != 16)
                return false;
        for (const char *p = s; *p; p++)
                if (!isdigit((unsigned char)*p) && !(*p >= 'a' && *p <= 'f'))
                        return false;
        return true;
}

/* Options every command takes. */
enum { O_SOCKET = 1000, O_URL, O_TOKEN };
#define COMMON_OPTIONS                                                                             \
        {"socket", required_argument, NULL, O_SOCKET}, {"url", required_argument, NULL, O_URL},     \
                {"token", required_argument, NULL, O_TOKEN}, {"help", no_argument, NULL, 'h'}

static const char common_help[] =
        "\n"
        "Reaching the daemon:\n"
        "      --socket PATH   airlockd's unix socket (default: $AIRLOCK_SOCKET, else\n"
        "                      /run/airlock/airlockd.sock for root,\n"
        "                      $XDG_RUNTIME_DIR/airlock/airlockd.sock otherwise)\n"
        "      --url URL       reach it over TCP instead: http://127.0.0.1:7070 ($AIRLOCK_URL)\n"
        "      --token TOKEN   the grant's token (default: $AIRLOCK_TOKEN)\n"
        "  -h, --help          show this help\n";

struct common {
        const char *socket_path;
        const char *url;
        const char *token;
};

static int common_opt(int c, struct common *o)
{
        switch (c) {
        case O_SOCKET:
                o->socket_path = optarg;
                return 1;
        case O_URL:
                o->url = optarg;
                return 1;
        case O_TOKEN:
                o->token = optarg;
                return 1;
        }
        return 0;
}

static char *socket_storage;

static int make_target(const char *cmd, const struct common *o, struct target *t)
{
        memset(t, 0, sizeof(*t));
        t->token = o->token ? o->token : getenv("AIRLOCK_TOKEN");
        const char *url = o->url ? o->url : (o->socket_path ? NULL : getenv("AIRLOCK_URL"));
        if (url) {
                if (strncmp(url, "http://", 7) != 0)
                        return fail(cmd, "--url \"%s\": expected http://HOST:PORT", url);
                const char *hp = url + 7;
                size_t n = strcspn(hp, "/");
                const char *colon = memrchr(hp, ':', n);
                if (!colon || colon == hp || (size_t)(colon - hp) >= sizeof(t->host) ||
                    (size_t)(hp + n - colon - 1) >= sizeof(t->port))
                        return fail(cmd, "--url \"%s\": expected http://HOST:PORT", url);
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
                return fail(cmd, "no socket: give --socket or set XDG_RUNTIME_DIR");
        return 0;
}

static int bad_option(const char *cmd, char **argv)
{
        fprintf(stderr, "airlock: %s: unknown or incomplete option \"%s\" (see 'airlock %s --help')\n",
                cmd, argv[optind - 1], cmd);
        return EXIT_USAGE;
}

/* For the commands that take only the common options. Returns the exit
 * status when the command is done (help, or a bad option), else -1. */
static int common_options_only(const char *cmd, const char *usage, int argc, char **argv,
                               struct common *co)
{
        static const struct option opts[] = {COMMON_OPTIONS, {NULL, 0, NULL, 0}};
        int c;
        optind = 1;
        opterr = 0;
        while ((c = getopt_long(argc, argv, "h", opts, NULL)) != -1) {
                if (common_opt(c, co))
                        continue;
                if (c == 'h') {
                        printf("%s%s", usage, common_help);
                        return 0;
                }
                return bad_option(cmd, argv);
        }
        return -1;
}

/* airlock create */

static const char create_usage[] =
        "Usage: airlock create [OPTIONS]\n"
        "\n"
        "Ask airlockd for a new sandbox and print its id. The sandbox lives until\n"
        "'airlock rm', its TTL or its idle timeout.\n"
        "\n"
        "Options:\n"
        "      --class NAME          small, medium (default), large, xlarge\n"
        "  -p, --policy FILE         a policy document (docs/policy.md)\n"
        "      --meta KEY=VALUE      a metadata entry (repeatable), for 'airlock ls --meta'\n"
        "      --ttl SECONDS         destroy it this long after its creation\n"
        "      --idle-timeout SEC    destroy it after this long without a request\n"
        "  -w, --workspace DIR       an existing host directory as its workspace (the grant\n"
        "                            must allow it); default: a new empty one\n"
        "      --review              mount the workspace copy-on-write; its changes wait\n"
        "                            for POST .../accept (docs/api.md)\n"
        "      --repo URL            the daemon clones URL on the host as the workspace\n"
        "      --rev REV             the branch, tag or commit of --repo to check out\n"
        "      --json                print the whole record\n";

static int parse_seconds(const char *s, double *ret)
{
        uint64_t ms;
        if (parse_duration_ms(s, &ms) < 0)
                return -EINVAL;
        *ret = (double)ms / 1000.0;
        return 0;
}

int cmd_create(int argc, char **argv)
{
        enum { O_CLASS = 1, O_META, O_TTL, O_IDLE, O_JSON, O_REVIEW, O_REPO, O_REV };
        static const struct option opts[] = {
                {"class", required_argument, NULL, O_CLASS},
                {"policy", required_argument, NULL, 'p'},
                {"meta", required_argument, NULL, O_META},
                {"ttl", required_argument, NULL, O_TTL},
                {"idle-timeout", required_argument, NULL, O_IDLE},
                {"workspace", required_argument, NULL, 'w'},
                {"json", no_argument, NULL, O_JSON},
                {"review", no_argument, NULL, O_REVIEW},
                {"repo", required_argument, NULL, O_REPO},
                {"rev", required_argument, NULL, O_REV},
                COMMON_OPTIONS,
                {NULL, 0, NULL, 0},
        };
        struct common co = {0};
        json_t *body = json_object();
        json_t *meta = json_object();
        _cleanup_free_ char *text = NULL, *resp = NULL;
        bool json_out = false;
        int c, ret = EXIT_USAGE;
        optind = 1;
        opterr = 0;
        while ((c = getopt_long(argc, argv, "p:w:h", opts, NULL)) != -1) {
                if (common_opt(c, &co))
                        continue;
                double sec;
                switch (c) {
                case O_CLASS:
                        json_object_set_new(body, "class", json_string(optarg));
                        break;
                case 'p': {
                        _cleanup_free_ char *doc = NULL;
                        int r = read_file_at(AT_FDCWD, optarg, 1 << 20, &doc, NULL);
                        json_error_t jerr;
                        json_t *pol = r < 0 ? NULL : json_loads(doc, 0, &jerr);
                        if (r < 0) {
                                fprintf(stderr, "airlock: create: %s: %s\n", optarg, strerror(-r));
                                goto out;
                        }
                        if (!pol) {
                                fprintf(stderr, "airlock: create: %s:%d:%d: %s\n", optarg, jerr.line,
                                        jerr.column, jerr.text);
                                goto out;
                        }
                        json_object_set_new(body, "policy", pol);
                        break;
                }
                case O_META: {
                        const char *eq = strchr(optarg, '=');
                        if (!eq || eq == optarg) {
                                fprintf(stderr, "airlock: create: --meta \"%s\": expected KEY=VALUE\n",
                                        optarg);
                                goto out;
                        }
                        _cleanup_free_ char *k = xasprintf("%.*s", (int)(eq - optarg), optarg);
                        json_object_set_new(meta, k, json_string(eq + 1));
                        break;
                }
                case O_TTL:
                case O_IDLE:
                        if (parse_seconds(optarg, &sec) < 0) {
                                fprintf(stderr, "airlock: create: \"%s\": expected seconds (30, 5m, 1h)\n",
                                        optarg);
                                goto out;
                        }
                        json_object_set_new(body, c == O_TTL ? "ttl" : "idleTimeout", json_real(sec));
                        break;
                case 'w': {
                        char real[PATH_MAX];
                        if (!realpath(optarg, real)) {
                                fprintf(stderr, "airlock: create: workspace %s: %s\n", optarg,
                                        strerror(errno));
                                goto out;
                        }
                        json_object_set_new(body, "workspace", json_string(real));
                        break;
                }
                case O_JSON:
                        json_out = true;
                        break;
                case O_REVIEW:
                        json_object_set_new(body, "review", json_true());
                        break;
                case O_REPO:
                case O_REV:
                        json_object_set_new(body, c == O_REPO ? "repo" : "rev", json_string(optarg));
                        break;
                case 'h':
                        printf("%s%s", create_usage, common_help);
                        ret = 0;
                        goto out;
                default:
                        ret = bad_option("create", argv);
                        goto out;
                }
        }
        if (optind < argc) {
                fprintf(stderr, "airlock: create: unexpected argument \"%s\"\n", argv[optind]);
                goto out;
        }
        if (json_object_size(meta))
                json_object_set(body, "metadata", meta);
        struct target t;
        ret = EXIT_FAIL;
        if (make_target("create", &co, &t) < 0)
                goto out;
        text = json_dumps(body, JSON_COMPACT);
        int status = call("create", &t, "POST", "/v1/sandboxes", "application/json", text,
                          strlen(text), &resp, NULL, true);
        if (status != 201)
                goto out;
        json_error_t jerr;
        json_t *o = json_loads(resp, 0, &jerr);
        const char *id = json_string_value(json_object_get(o, "id"));
        if (json_out)
                fputs(resp, stdout);
        else if (id)
                printf("%s\n", id);
        json_decref(o);
        ret = id ? 0 : EXIT_FAIL;
out:
        json_decref(meta);
        json_decref(body);
        return ret;
}

/* airlock ls */

static const char ls_usage[] =
        "Usage: airlock ls [OPTIONS]\n"
        "\n"
        "List the daemon's sandboxes, newest first.\n"
        "\n"
        "Options:\n"
        "      --state STATE    only sandboxes in this state (starting, running, stopping,\n"
        "                       destroyed, failed)\n"
        "      --meta KEY=VALUE only sandboxes with this metadata (repeatable)\n"
        "      --json           print the records as JSON\n";

int cmd_ls(int argc, char **argv)
{
        enum { O_STATE = 1, O_META, O_JSON };
        static const struct option opts[] = {
                {"state", required_argument, NULL, O_STATE},
                {"meta", required_argument, NULL, O_META},
                {"json", no_argument, NULL, O_JSON},
                COMMON_OPTIONS,
                {NULL, 0, NULL, 0},
        };
        struct common co = {0};
        _cleanup_free_ char *query = xstrdup("");
        bool json_out = false;
        int c;
        optind = 1;
        opterr = 0;
        while ((c = getopt_long(argc, argv, "h", opts, NULL)) != -1) {
                if (common_opt(c, &co))
                        continue;
                switch (c) {
                case O_STATE:
                case O_META: {
                        _cleanup_free_ char *param = NULL;
                        if (c == O_STATE) {
                                _cleanup_free_ char *v = url_escape(optarg);
                                param = xasprintf("state=%s", v);
                        } else {
                                const char *eq = strchr(optarg, '=');
                                if (!eq || eq == optarg) {
                                        fprintf(stderr, "airlock: ls: --meta \"%s\": expected KEY=VALUE\n",
                                                optarg);
                                        return EXIT_USAGE;
                                }
                                _cleanup_free_ char *k = xasprintf("%.*s", (int)(eq - optarg), optarg);
                                _cleanup_free_ char *ke = url_escape(k), *ve = url_escape(eq + 1);
                                param = xasprintf("metadata.%s=%s", ke, ve);
                        }
                        char *q = xasprintf("%s%s%s", query, query[0] ? "&" : "?", param);
                        free(query);
                        query = q;
                        break;
                }
                case O_JSON:
                        json_out = true;
                        break;
                case 'h':
                        printf("%s%s", ls_usage, common_help);
                        return 0;
                default:
                        return bad_option("ls", argv);
                }
        }
        if (optind < argc) {
                fprintf(stderr, "airlock: ls: unexpected argument \"%s\"\n", argv[optind]);
                return EXIT_USAGE;
        }
        struct target t;
        if (make_target("ls", &co, &t) < 0)
                return EXIT_FAIL;
        _cleanup_free_ char *path = xasprintf("/v1/sandboxes%s", query);
        _cleanup_free_ char *resp = NULL;
        int status = call("ls", &t, "GET", path, NULL, NULL, 0, &resp, NULL, true);
        if (status != 200)
                return EXIT_FAIL;
        json_error_t jerr;
        json_t *o = json_loads(resp, 0, &jerr);
        json_t *arr = json_object_get(o, "sandboxes");
        if (json_out) {
                char *text = json_dumps(arr ? arr : json_array(), JSON_INDENT(2));
                printf("%s\n", text ? text : "[]");
                free(text);
                json_decref(o);
                return 0;
        }
        printf("%-16s  %-9s  %-6s  %-24s  %s\n", "ID", "STATE", "CLASS", "CREATED", "METADATA");
        size_t i;
        json_t *sb;
        json_array_foreach(arr, i, sb) {
                _cleanup_free_ char *meta = json_dumps(json_object_get(sb, "metadata"),
                                                       JSON_COMPACT | JSON_SORT_KEYS);
                printf("%-16s  %-9s  %-6s  %-24s  %s\n", json_string_value(json_object_get(sb, "id")),
                       json_string_value(json_object_get(sb, "state")),
                       json_string_value(json_object_get(sb, "class")) ?: "-",
                       json_string_value(json_object_get(sb, "createdAt")) ?: "-", meta ? meta : "{}");
        }
        json_decref(o);
        return 0;
}

/* A stream of process events: output to ours, the exit code returned. */
struct stream_state {
        int exit_code;
        bool saw_exit;
};

static int handle_event(const char *cmd, json_t *ev, struct stream_state *st)
{
        const char *type = json_string_value(json_object_get(ev, "type"));
        if (!type)
                return 0;
        if (STREQ(type, "stdout") || STREQ(type, "stderr")) {
                const char *data = json_string_value(json_object_get(ev, "data"));
                unsigned char *bytes = NULL;
                size_t len = 0;
                if (data && base64_decode(data, &bytes, &len) == 0) {
                        (void)write_full(STREQ(type, "stdout") ? 1 : 2, bytes, len);
                        free(bytes);
                }
        } else if (STREQ(type, "error")) {
                const char *m = json_string_value(json_object_get(ev, "message"));
                fprintf(stderr, "airlock: %s: %s\n", cmd, m ? m : "error");
        } else if (STREQ(type, "exit")) {
                st->saw_exit = true;
                st->exit_code = (int)json_integer_value(json_object_get(ev, "exitCode"));
                const char *ec = json_string_value(json_object_get(ev, "errorCode"));
                if (ec && !STREQ(ec, "exec_failed"))
                        fprintf(stderr, "airlock: %s: %s\n", cmd, ec);
        }
        return 0;
}

static int stream_events(const char *cmd, const struct target *t, const char *method,
                         const char *path, const char *body)
{
        struct conn c;
        if (conn_open(cmd, t, &c) < 0)
                return EXIT_SETUP;
        int r = send_request(&c, t, method, path, body ? "application/json" : NULL, body,
                             body ? strlen(body) : 0);
        if (r >= 0)
                r = read_head(&c);
        if (r < 0) {
                conn_close(&c);
                fail(cmd, "talking to airlockd: %s", strerror(-r));
                return EXIT_SETUP;
        }
        if (c.status != 200) {
                char *resp = NULL;
                size_t len;
                if (read_all(&c, &resp, &len) < 0)
                        resp = NULL;
                print_api_error(cmd, c.status, resp);
                free(resp);
                conn_close(&c);
                return EXIT_SETUP;
        }
        struct stream_state st = {0};
        size_t cap = 64 * 1024, len = 0;
        char *line = xcalloc(cap, 1);
        char chunk[32 * 1024];
        for (;;) {
                ssize_t n = read_body(&c, chunk, sizeof(chunk));
                if (n < 0) {
                        fail(cmd, "reading from airlockd: %s", strerror((int)-n));
                        break;
                }
                if (n == 0)
                        break;
                for (ssize_t i = 0; i < n; i++) {
                        if (chunk[i] != '\n') {
                                if (len + 1 >= cap) {
                                        if (cap >= LINE_MAX_) {
                                                fail(cmd, "an event line is longer than %u bytes",
                                                     LINE_MAX_);
                                                goto done;
                                        }
                                        cap *= 2;
                                        line = xrealloc(line, cap, 1);
                                }
                                line[len++] = chunk[i];
                                continue;
                        }
                        json_error_t jerr;
                        json_t *ev = json_loadb(line, len, 0, &jerr);
                        len = 0;
                        if (ev)
                                handle_event(cmd, ev, &st);
                        json_decref(ev);
                }
        }
done:
        free(line);
        conn_close(&c);
        if (!st.saw_exit) {
                fprintf(stderr, "airlock: %s: the stream ended before the command did\n", cmd);
                return EXIT_SETUP;
        }
        return st.exit_code;
}

/* airlock exec */

static const char exec_usage[] =
        "Usage: airlock exec [OPTIONS] ID -- COMMAND [ARGS...]\n"
        "\n"
        "Run COMMAND in a sandbox the daemon holds, with the sandbox's confinement, and\n"
        "stream its output. The exit status is the command's (124 on timeout, 128+N when\n"
        "killed by signal N); 125 when the daemon refused or failed.\n"
        "\n"
        "Options:\n"
        "      --env KEY=VALUE  add to the command's environment\n"
        "      --cwd DIR        working directory inside (default: /workspace)\n"
        "      --timeout SEC    kill the command after this long (at most the policy's)\n"
        "  -i, --stdin          send our stdin (up to 6 MiB) to the command\n"
        "      --background     start it, print its process id and return; see\n"
        "                       'airlock logs ID PID'\n";

int cmd_exec(int argc, char **argv)
{
        enum { O_ENV = 1, O_CWD, O_TIMEOUT, O_BG };
        static const struct option opts[] = {
                {"env", required_argument, NULL, O_ENV},
                {"cwd", required_argument, NULL, O_CWD},
                {"timeout", required_argument, NULL, O_TIMEOUT},
                {"stdin", no_argument, NULL, 'i'},
                {"background", no_argument, NULL, O_BG},
                COMMON_OPTIONS,
                {NULL, 0, NULL, 0},
        };
        struct common co = {0};
        json_t *body = json_object();
        json_t *env = json_object();
        _cleanup_free_ char *text = NULL, *path = NULL;
        bool send_stdin = false, background = false;
        int c, ret = EXIT_USAGE;
        optind = 1;
        opterr = 0;
        while ((c = getopt_long(argc, argv, "+ih", opts, NULL)) != -1) {
                if (common_opt(c, &co))
                        continue;
                double sec;
                switch (c) {
                case O_ENV: {
                        const char *eq = strchr(optarg, '=');
                        if (!eq || eq == optarg) {
                                fprintf(stderr, "airlock: exec: --env \"%s\": expected KEY=VALUE\n", optarg);
                                goto out;
                        }
                        _cleanup_free_ char *k = xasprintf("%.*s", (int)(eq - optarg), optarg);
                        json_object_set_new(env, k, json_string(eq + 1));
                        break;
                }
                case O_CWD:
                        json_object_set_new(body, "cwd", json_string(optarg));
                        break;
                case O_TIMEOUT:
                        if (parse_seconds(optarg, &sec) < 0 || sec <= 0) {
                                fprintf(stderr, "airlock: exec: --timeout \"%s\": expected seconds\n", optarg);
                                goto out;
                        }
                        json_object_set_new(body, "timeout", json_real(sec));
                        break;
                case 'i':
                        send_stdin = true;
                        break;
                case O_BG:
                        background = true;
                        break;
                case 'h':
                        printf("%s%s", exec_usage, common_help);
                        ret = 0;
                        goto out;
                default:
                        ret = bad_option("exec", argv);
                        goto out;
                }
        }
        if (optind < argc && STREQ(argv[optind], "--"))
                optind++;
        if (optind >= argc || !valid_id(argv[optind])) {
                fprintf(stderr, "airlock: exec: expected a sandbox ID (16 hex digits) and a command\n");
                goto out;
        }
        const char *id = argv[optind++];
        if (optind < argc && STREQ(argv[optind], "--"))
                optind++;
        if (optind >= argc) {
                fprintf(stderr, "airlock: exec: no command given\n");
                goto out;
        }
        json_t *av = json_array();
        for (int i = optind; i < argc; i++)
                json_array_append_new(av, json_string(argv[i]));
        json_object_set_new(body, "argv", av);
        if (json_object_size(env))
                json_object_set(body, "env", env);
        if (background)
                json_object_set_new(body, "background", json_true());
        if (send_stdin) {
                _cleanup_free_ char *in = NULL;
                size_t len = 0;
                int r = read_file_at(0, "/dev/stdin", STDIN_MAX, &in, &len);
                if (r < 0) {
                        fprintf(stderr, "airlock: exec: reading stdin: %s%s\n", strerror(-r),
                                r == -EFBIG ? " (at most 6 MiB)" : "");
                        ret = EXIT_SETUP;
                        goto out;
                }
                _cleanup_free_ char *enc = base64_encode(in, len);
                json_object_set_new(body, "stdin", json_string(enc));
        }
        struct target t;
        ret = EXIT_SETUP;
        if (make_target("exec", &co, &t) < 0)
                goto out;
        text = json_dumps(body, JSON_COMPACT);
        path = xasprintf("/v1/sandboxes/%s/exec", id);
        if (background) {
                _cleanup_free_ char *resp = NULL;
                int status = call("exec", &t, "POST", path, "application/json", text, strlen(text),
                                  &resp, NULL, true);
                if (status != 201)
                        goto out;
                json_error_t jerr;
                json_t *o = json_loads(resp, 0, &jerr);
                printf("%" JSON_INTEGER_FORMAT "\n", json_integer_value(json_object_get(o, "pid")));
                json_decref(o);
                ret = 0;
                goto out;
        }
        ret = stream_events("exec", &t, "POST", path, text);
out:
        json_decref(env);
        json_decref(body);
        return ret;
}

/* airlock cp */

static const char cp_usage[] =
        "Usage: airlock cp SRC DST\n"
        "\n"
        "Copy one file between the host and a sandbox's workspace. One of SRC and DST\n"
        "is ID:PATH, PATH being relative to the workspace or under /workspace; the\n"
        "other is a local path, or - for stdin or stdout. Files are at most 16 MiB;\n"
        "missing directories in the sandbox are created. Symbolic links are not\n"
        "followed out of the workspace, nor at all when writing.\n";

static bool split_remote(const char *arg, char id[17], const char **path)
{
        const char *colon = strchr(arg, ':');
        if (!colon || colon - arg != 16)
                return false;
        memcpy(id, arg, 16);
        id[16] = '\0';
        if (!valid_id(id))
                return false;
        *path = colon + 1;
        return true;
}

int cmd_cp(int argc, char **argv)
{
        struct common co = {0};
        int done = common_options_only("cp", cp_usage, argc, argv, &co);
        if (done >= 0)
                return done;
        if (argc - optind != 2) {
                fprintf(stderr, "airlock: cp: expected SRC and DST (see 'airlock cp --help')\n");
                return EXIT_USAGE;
        }
        const char *src = argv[optind], *dst = argv[optind + 1];
        char sid[17], did[17];
        const char *spath = NULL, *dpath = NULL;
        bool sremote = split_remote(src, sid, &spath), dremote = split_remote(dst, did, &dpath);
        if (sremote == dremote) {
                fprintf(stderr, "airlock: cp: exactly one of SRC and DST must be ID:PATH\n");
                return EXIT_USAGE;
        }
        struct target t;
        if (make_target("cp", &co, &t) < 0)
                return EXIT_FAIL;
        if (dremote) {
                _cleanup_free_ char *data = NULL;
                size_t len = 0;
                int r = read_file_at(AT_FDCWD, STREQ(src, "-") ? "/dev/stdin" : src, FILE_MAX, &data,
                                     &len);
                if (r < 0) {
                        fprintf(stderr, "airlock: cp: %s: %s%s\n", src, strerror(-r),
                                r == -EFBIG ? " (at most 16 MiB)" : "");
                        return EXIT_FAIL;
                }
                _cleanup_free_ char *q = url_escape(dpath);
                _cleanup_free_ char *path = xasprintf("/v1/sandboxes/%s/files?path=%s", did, q);
                int status = call("cp", &t, "PUT", path, "application/octet-stream", data, len, NULL,
                                  NULL, true);
                return status == 200 ? 0 : EXIT_FAIL;
        }
        _cleanup_free_ char *q = url_escape(spath);
        _cleanup_free_ char *path = xasprintf("/v1/sandboxes/%s/files?path=%s", sid, q);
        _cleanup_free_ char *resp = NULL;
        size_t len = 0;
        int status = call("cp", &t, "GET", path, NULL, NULL, 0, &resp, &len, true);
        if (status != 200)
                return EXIT_FAIL;
        if (STREQ(dst, "-"))
                return write_full(1, resp, len) < 0 ? EXIT_FAIL : 0;
        _cleanup_close_ int fd = open(dst, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
        if (fd < 0 || write_full(fd, resp, len) < 0) {
                fprintf(stderr, "airlock: cp: %s: %s\n", dst, strerror(errno));
                return EXIT_FAIL;
        }
        return 0;
}

/* airlock rm */

static const char rm_usage[] =
        "Usage: airlock rm ID...\n"
        "\n"
        "Destroy sandboxes: their processes are killed, their daemon-made workspaces\n"
        "removed. Copy out what you need first ('airlock cp').\n";

int cmd_rm(int argc, char **argv)
{
        struct common co = {0};
        int done = common_options_only("rm", rm_usage, argc, argv, &co);
        if (done >= 0)
                return done;
        if (optind >= argc) {
                fprintf(stderr, "airlock: rm: expected at least one sandbox ID\n");
                return EXIT_USAGE;
        }
        struct target t;
        if (make_target("rm", &co, &t) < 0)
                return EXIT_FAIL;
        int ret = 0;
        for (int i = optind; i < argc; i++) {
                if (!valid_id(argv[i])) {
                        fprintf(stderr, "airlock: rm: \"%s\" is not a sandbox ID\n", argv[i]);
                        ret = EXIT_FAIL;
                        continue;
                }
                _cleanup_free_ char *path = xasprintf("/v1/sandboxes/%s", argv[i]);
                if (call("rm", &t, "DELETE", path, NULL, NULL, 0, NULL, NULL, true) != 200)
                        ret = EXIT_FAIL;
        }
        return ret;
}

/* airlock logs */

static const char logs_usage[] =
        "Usage: airlock logs ID [PID]\n"
        "\n"
        "Without PID: print the sandbox's lines of the audit log. With PID: print what a\n"
        "background process wrote (what was kept of it, then as it comes) until it ends;\n"
        "the exit status is the process's.\n";

int cmd_logs(int argc, char **argv)
{
        struct common co = {0};
        int done = common_options_only("logs", logs_usage, argc, argv, &co);
        if (done >= 0)
                return done;
        int n = argc - optind;
        if ((n != 1 && n != 2) || !valid_id(argv[optind])) {
                fprintf(stderr, "airlock: logs: expected a sandbox ID and optionally a PID\n");
                return EXIT_USAGE;
        }
        const char *id = argv[optind];
        uint64_t pid = 0;
        if (n == 2 && (safe_atou64(argv[optind + 1], &pid) < 0 || pid == 0)) {
                fprintf(stderr, "airlock: logs: \"%s\" is not a process id\n", argv[optind + 1]);
                return EXIT_USAGE;
        }
        struct target t;
        if (make_target("logs", &co, &t) < 0)
                return EXIT_FAIL;
        if (pid) {
                _cleanup_free_ char *path =
                        xasprintf("/v1/sandboxes/%s/processes/%" PRIu64 "/events", id, pid);
                return stream_events("logs", &t, "GET", path, NULL);
        }
        _cleanup_free_ char *path = xasprintf("/v1/sandboxes/%s/audit", id);
        _cleanup_free_ char *resp = NULL;
        size_t len = 0;
        if (call("logs", &t, "GET", path, NULL, NULL, 0, &resp, &len, true) != 200)
                return EXIT_FAIL;
        return write_full(1, resp, len) < 0 ? EXIT_FAIL : 0;
}
