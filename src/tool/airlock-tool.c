/* SPDX-License-Identifier: Apache-2.0 */
/* airlock-tool: list and call the host tools the sandbox's policy allows,
 * through the tool gateway (docs/tools.md), or serve them over MCP. */
#include <errno.h>
#include <signal.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <unistd.h>

#include "tool.h"

static const char usage_text[] =
    "Usage: airlock-tool ls|call|hw|mcp|connect [ARGS...]\n"
    "\n"
    "Ask the host for a tool through Airlock's tool gateway: only the tools the\n"
    "sandbox's policy allows, each checked, limited and audited on the host.\n"
    "\n"
    "Commands:\n"
    "  ls [--json]        the allowed tools and their arguments (--json: the list\n"
    "                     with each tool's JSON Schema)\n"
    "  call TOOL ARGS...  call TOOL and print its value (a string as it is, else\n"
    "                     JSON); ARGS are one JSON object (--json '{\"n\": 3}'), or\n"
    "                     KEY=VALUE pairs (a string, or a number or boolean where\n"
    "                     the tool's schema says so) and KEY:=JSON pairs\n"
    "  hw ...             the host's device through the hardware gate\n"
    "                     (airlock-tool hw --help)\n"
    "  mcp                serve the allowed tools as an MCP server on stdin and\n"
    "                     stdout (JSON-RPC 2.0, one message a line)\n"
    "  connect HOST PORT  a byte pipe from stdin and stdout to HOST:PORT through\n"
    "                     the network gate (ssh's ProxyCommand, GIT_SSH_COMMAND)\n"
    "\n"
    "Examples:\n"
    "  airlock-tool ls\n"
    "  airlock-tool call core.time\n"
    "  airlock-tool call forge.prs repo=airlock/airlock limit=5\n"
    "  airlock-tool call forge.prs --json '{\"repo\": \"airlock/airlock\"}'\n"
    "\n"
    "Exit status of call:\n"
    "  0    the tool answered; its value is printed\n"
    "  1    no tool gateway here, or it broke the protocol\n"
    "  2    usage error\n"
    "  3    policy_denied: the policy does not allow the tool\n"
    "  4    bad_args: the arguments do not fit the tool's schema\n"
    "  5    rate_limited: too many calls; try again later\n"
    "  6    timeout: the tool ran past its time\n"
    "  7    tool_failed: the tool failed or printed too much\n"
    "  8    run_mismatch: AIRLOCK_RUN_ID is not this sandbox's\n"
    "  9    internal: the gateway failed\n"
    "  10   audit_failed: the host could not record the call; it was not run\n"
    "\n"
    "Environment:\n"
    "  AIRLOCK_TOOL_SOCKET  the gateway's socket (/run/airlock/tool.sock)\n"
    "  AIRLOCK_RUN_ID       this run's id; both are set by Airlock in a sandbox\n"
    "                       whose policy allows a tool\n";

int tool_exit_code(const char *code)
{
        static const struct {
                const char *name;
                int exit;
        } codes[] = {
            {"policy_denied", TOOL_EXIT_POLICY_DENIED}, {"bad_args", TOOL_EXIT_BAD_ARGS},
            {"rate_limited", TOOL_EXIT_RATE_LIMITED},   {"timeout", TOOL_EXIT_TIMEOUT},
            {"tool_failed", TOOL_EXIT_TOOL_FAILED},     {"run_mismatch", TOOL_EXIT_RUN_MISMATCH},
            {"internal", TOOL_EXIT_INTERNAL},           {"audit_failed", TOOL_EXIT_AUDIT_FAILED},
        };
        for (size_t i = 0; code && i < sizeof(codes) / sizeof(codes[0]); i++)
                if (strcmp(code, codes[i].name) == 0)
                        return codes[i].exit;
        return TOOL_EXIT_INTERNAL;
}

int tool_client_open(struct tool_client *c, char *err, size_t errlen)
{
        memset(c, 0, sizeof(*c));
        c->fd = -1;
        const char *path = getenv("AIRLOCK_TOOL_SOCKET");
        c->run_id = getenv("AIRLOCK_RUN_ID");
        if (!path || !*path || !c->run_id || !*c->run_id) {
                snprintf(err, errlen,
                         "no tool gateway here: AIRLOCK_TOOL_SOCKET and AIRLOCK_RUN_ID are "
                         "set only in a sandbox whose policy allows a tool (tools.allow, "
                         "airlock run --tool NAME)");
                return -1;
        }
        struct sockaddr_un sa = {.sun_family = AF_UNIX};
        if (strlen(path) >= sizeof(sa.sun_path)) {
                snprintf(err, errlen, "AIRLOCK_TOOL_SOCKET is too long");
                return -1;
        }
        memcpy(sa.sun_path, path, strlen(path) + 1);
        c->fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
        if (c->fd < 0 || connect(c->fd, (struct sockaddr *)&sa, sizeof(sa)) < 0) {
                snprintf(err, errlen, "connecting to the tool gateway at %s: %s", path,
                         strerror(errno));
                if (c->fd >= 0)
                        close(c->fd);
                c->fd = -1;
                return -1;
        }
        return 0;
}

void tool_client_close(struct tool_client *c)
{
        if (c->fd >= 0)
                close(c->fd);
        c->fd = -1;
        free(c->buf);
        c->buf = NULL;
        c->len = c->cap = 0;
}

static int write_all(int fd, const char *p, size_t n)
{
        while (n > 0) {
                ssize_t k = send(fd, p, n, MSG_NOSIGNAL);
                if (k < 0 && errno == EINTR)
                        continue;
                if (k <= 0)
                        return -1;
                p += k;
                n -= (size_t)k;
        }
        return 0;
}

/* The next line from the gateway (NUL-terminated, without its newline; the
 * caller frees), or NULL at the end, on an error or past the limit. */
static char *read_line(struct tool_client *c, char *err, size_t errlen)
{
        for (;;) {
                char *nl = c->len ? memchr(c->buf, '\n', c->len) : NULL;
                if (nl) {
                        size_t n = (size_t)(nl - c->buf);
                        char *line = malloc(n + 1);
                        if (!line) {
                                snprintf(err, errlen, "out of memory");
                                return NULL;
                        }
                        memcpy(line, c->buf, n);
                        line[n] = '\0';
                        memmove(c->buf, nl + 1, c->len - n - 1);
                        c->len -= n + 1;
                        return line;
                }
                if (c->len >= TOOL_RESPONSE_MAX) {
                        snprintf(err, errlen, "the gateway's answer is over %u bytes",
                                 TOOL_RESPONSE_MAX);
                        return NULL;
                }
                if (c->cap - c->len < 65536) {
                        size_t cap = c->cap ? c->cap * 2 : 65536;
                        char *b = realloc(c->buf, cap);
                        if (!b) {
                                snprintf(err, errlen, "out of memory");
                                return NULL;
                        }
                        c->buf = b;
                        c->cap = cap;
                }
                ssize_t k = read(c->fd, c->buf + c->len, c->cap - c->len);
                if (k < 0 && errno == EINTR)
                        continue;
                if (k <= 0) {
                        snprintf(err, errlen, "the tool gateway closed the connection%s%s",
                                 k < 0 ? ": " : "", k < 0 ? strerror(errno) : "");
                        return NULL;
                }
                c->len += (size_t)k;
        }
}

json_t *tool_client_request(struct tool_client *c, json_t *req, char *err, size_t errlen)
{
        if (c->fd < 0) {
                unsigned long next = c->next_call;
                if (tool_client_open(c, err, errlen) < 0) {
                        json_decref(req);
                        return NULL;
                }
                c->next_call = next;
        }
        char call_id[32];
        snprintf(call_id, sizeof(call_id), "c%lu", ++c->next_call);
        json_object_set_new(req, "runId", json_string(c->run_id));
        json_object_set_new(req, "callId", json_string(call_id));
        char *line = json_dumps(req, JSON_COMPACT);
        json_decref(req);
        if (!line) {
                snprintf(err, errlen, "encoding the request");
                return NULL;
        }
        /* A line is one request: jansson escapes every newline in strings. */
        size_t n = strlen(line);
        int r = write_all(c->fd, line, n);
        if (r == 0)
                r = write_all(c->fd, "\n", 1);
        free(line);
        if (r < 0) {
                snprintf(err, errlen, "sending to the tool gateway: %s", strerror(errno));
                tool_client_close(c);
                return NULL;
        }
        for (;;) {
                char *resp = read_line(c, err, errlen);
                if (!resp) {
                        /* The stream is out of step or gone: a later
                         * request opens a new connection. */
                        tool_client_close(c);
                        return NULL;
                }
                json_error_t je;
                json_t *o = json_loads(resp, JSON_REJECT_DUPLICATES, &je);
                free(resp);
                if (!json_is_object(o) || !json_is_boolean(json_object_get(o, "ok"))) {
                        json_decref(o);
                        snprintf(err, errlen,
                                 "the tool gateway sent an answer that is not a "
                                 "response object");
                        return NULL;
                }
                const char *id = json_string_value(json_object_get(o, "callId"));
                if (id && strcmp(id, call_id) == 0)
                        return o;
                /* An answer to an earlier call this client gave up on, or
                 * one the gateway sends without a call id (a line it could
                 * not read): the latter ends this call too. */
                if (!id)
                        return o;
                json_decref(o);
        }
}

/* {"ok": false, ...} as one line on stderr; the exit code for it. */
static int report_error(const char *what, const json_t *resp)
{
        const char *code = json_string_value(json_object_get(resp, "errorCode"));
        const char *msg = json_string_value(json_object_get(resp, "safeMessage"));
        fprintf(stderr, "airlock-tool: %s: %s%s%s\n", what, code ? code : "error", msg ? ": " : "",
                msg ? msg : "");
        return tool_exit_code(code);
}

static json_t *list_tools(struct tool_client *c, int *ret_exit)
{
        char err[512];
        json_t *resp = tool_client_request(c, json_pack("{s:s}", "op", "list"), err, sizeof(err));
        if (!resp) {
                fprintf(stderr, "airlock-tool: %s\n", err);
                *ret_exit = TOOL_EXIT_CLIENT;
                return NULL;
        }
        if (!json_is_true(json_object_get(resp, "ok"))) {
                *ret_exit = report_error("ls", resp);
                json_decref(resp);
                return NULL;
        }
        json_t *v = json_incref(json_object_get(resp, "value"));
        json_decref(resp);
        if (!json_is_array(v)) {
                json_decref(v);
                fprintf(stderr, "airlock-tool: the tool gateway's list is not an array\n");
                *ret_exit = TOOL_EXIT_CLIENT;
                return NULL;
        }
        return v;
}

static int cmd_ls(int argc, char **argv)
{
        bool as_json = false;
        for (int i = 0; i < argc; i++) {
                if (strcmp(argv[i], "--json") == 0)
                        as_json = true;
                else {
                        fprintf(stderr, "airlock-tool: ls: unknown argument \"%s\"\n", argv[i]);
                        return TOOL_EXIT_USAGE;
                }
        }
        struct tool_client c;
        char err[512];
        if (tool_client_open(&c, err, sizeof(err)) < 0) {
                fprintf(stderr, "airlock-tool: %s\n", err);
                return TOOL_EXIT_CLIENT;
        }
        int ex = 0;
        json_t *tools = list_tools(&c, &ex);
        tool_client_close(&c);
        if (!tools)
                return ex;
        if (as_json) {
                json_dumpf(tools, stdout, JSON_INDENT(2) | JSON_PRESERVE_ORDER);
                putchar('\n');
                json_decref(tools);
                return 0;
        }
        size_t i;
        json_t *t;
        json_array_foreach(tools, i, t)
        {
                const char *name = json_string_value(json_object_get(t, "name"));
                const char *desc = json_string_value(json_object_get(t, "description"));
                printf("%s%s%s\n", name ? name : "?", desc && *desc ? "  " : "", desc ? desc : "");
                json_t *schema = json_object_get(t, "inputSchema");
                json_t *props = json_object_get(schema, "properties");
                json_t *req = json_object_get(schema, "required");
                const char *k;
                json_t *pv;
                json_object_foreach(props, k, pv)
                {
                        bool required = false;
                        size_t j;
                        json_t *rn;
                        json_array_foreach(req, j, rn) required =
                            required ||
                            (json_is_string(rn) && strcmp(json_string_value(rn), k) == 0);
                        const char *type = json_string_value(json_object_get(pv, "type"));
                        const char *d = json_string_value(json_object_get(pv, "description"));
                        printf("    %s (%s%s)%s%s\n", k, type ? type : "any",
                               required ? ", required" : "", d ? "  " : "", d ? d : "");
                }
        }
        json_decref(tools);
        return 0;
}

/* KEY=VALUE as the tool's schema types KEY: an integer, number or boolean
 * where it says so and VALUE reads as one, else the string itself (the
 * gateway then names what is wrong). */
static json_t *typed_value(const json_t *schema, const char *key, const char *value)
{
        json_t *prop = json_object_get(json_object_get(schema, "properties"), key);
        const char *type = json_string_value(json_object_get(prop, "type"));
        if (type && (strcmp(type, "integer") == 0 || strcmp(type, "number") == 0 ||
                     strcmp(type, "boolean") == 0)) {
                json_error_t je;
                json_t *v = json_loads(value, JSON_DECODE_ANY, &je);
                bool fits = (strcmp(type, "integer") == 0 && json_is_integer(v)) ||
                            (strcmp(type, "number") == 0 && json_is_number(v)) ||
                            (strcmp(type, "boolean") == 0 && json_is_boolean(v));
                if (fits)
                        return v;
                json_decref(v);
        }
        return json_string(value);
}

static int cmd_call(int argc, char **argv)
{
        if (argc < 1 || argv[0][0] == '-') {
                fprintf(stderr, "airlock-tool: call: name a tool (airlock-tool ls lists them)\n");
                return TOOL_EXIT_USAGE;
        }
        const char *tool = argv[0];
        json_t *args = NULL;
        bool typed = false; /* KEY=VALUE pairs wait for the schema */
        for (int i = 1; i < argc; i++)
                if (strcmp(argv[i], "--json") != 0 && !strstr(argv[i], ":=") &&
                    strchr(argv[i], '='))
                        typed = true;

        struct tool_client c;
        char err[512];
        if (tool_client_open(&c, err, sizeof(err)) < 0) {
                fprintf(stderr, "airlock-tool: %s\n", err);
                return TOOL_EXIT_CLIENT;
        }
        json_t *schema = NULL, *tools = NULL;
        int ex = 0;
        if (typed) {
                tools = list_tools(&c, &ex);
                if (!tools) {
                        tool_client_close(&c);
                        return ex;
                }
                size_t i;
                json_t *t;
                json_array_foreach(tools, i, t)
                {
                        const char *n = json_string_value(json_object_get(t, "name"));
                        if (n && strcmp(n, tool) == 0)
                                schema = json_object_get(t, "inputSchema");
                }
        }
        for (int i = 1; i < argc && ex == 0; i++) {
                if (strcmp(argv[i], "--json") == 0) {
                        json_error_t je;
                        if (i + 1 >= argc || args) {
                                fprintf(stderr, "airlock-tool: call: --json takes one JSON "
                                                "object, given once\n");
                                ex = TOOL_EXIT_USAGE;
                                break;
                        }
                        args = json_loads(argv[++i], JSON_REJECT_DUPLICATES, &je);
                        if (!json_is_object(args)) {
                                fprintf(stderr,
                                        "airlock-tool: call: --json: not a JSON object (%s)\n",
                                        args ? "another JSON value" : je.text);
                                ex = TOOL_EXIT_USAGE;
                        }
                        continue;
                }
                char *eq = strchr(argv[i], '=');
                if (!eq || eq == argv[i] || (eq == argv[i] + 1 && argv[i][0] == ':')) {
                        fprintf(stderr,
                                "airlock-tool: call: \"%s\": expected KEY=VALUE, KEY:=JSON or "
                                "--json OBJECT\n",
                                argv[i]);
                        ex = TOOL_EXIT_USAGE;
                        break;
                }
                bool raw = eq[-1] == ':';
                size_t klen = (size_t)(eq - argv[i]) - (raw ? 1 : 0);
                char *key = strndup(argv[i], klen);
                json_t *v;
                if (raw) {
                        json_error_t je;
                        v = json_loads(eq + 1, JSON_DECODE_ANY | JSON_REJECT_DUPLICATES, &je);
                        if (!v) {
                                fprintf(stderr, "airlock-tool: call: %s:=: not JSON (%s)\n", key,
                                        je.text);
                                ex = TOOL_EXIT_USAGE;
                                free(key);
                                break;
                        }
                } else
                        v = typed_value(schema, key, eq + 1);
                if (!args)
                        args = json_object();
                if (json_object_get(args, key)) {
                        fprintf(stderr, "airlock-tool: call: %s is given twice\n", key);
                        ex = TOOL_EXIT_USAGE;
                }
                json_object_set_new(args, key, v);
                free(key);
        }
        json_decref(tools);
        if (ex) {
                json_decref(args);
                tool_client_close(&c);
                return ex;
        }
        json_t *req = json_pack("{s:s, s:o}", "tool", tool, "args", args ? args : json_object());
        json_t *resp = tool_client_request(&c, req, err, sizeof(err));
        tool_client_close(&c);
        if (!resp) {
                fprintf(stderr, "airlock-tool: %s\n", err);
                return TOOL_EXIT_CLIENT;
        }
        if (!json_is_true(json_object_get(resp, "ok"))) {
                ex = report_error(tool, resp);
                json_decref(resp);
                return ex;
        }
        json_t *v = json_object_get(resp, "value");
        if (json_is_string(v)) {
                size_t n = json_string_length(v);
                fwrite(json_string_value(v), 1, n, stdout);
                if (n == 0 || json_string_value(v)[n - 1] != '\n')
                        putchar('\n');
        } else if (v) {
                json_dumpf(v, stdout, JSON_COMPACT | JSON_ENCODE_ANY | JSON_PRESERVE_ORDER);
                putchar('\n');
        }
        json_decref(resp);
        return fflush(stdout) == 0 ? 0 : TOOL_EXIT_CLIENT;
}

int main(int argc, char **argv)
{
        signal(SIGPIPE, SIG_IGN);
        if (argc < 2) {
                fputs(usage_text, stderr);
                return TOOL_EXIT_USAGE;
        }
        if (strcmp(argv[1], "--help") == 0 || strcmp(argv[1], "-h") == 0 ||
            strcmp(argv[1], "help") == 0) {
                fputs(usage_text, stdout);
                return 0;
        }
        if (strcmp(argv[1], "--version") == 0) {
                printf("airlock-tool " TOOL_VERSION "\n");
                return 0;
        }
        if (strcmp(argv[1], "ls") == 0)
                return cmd_ls(argc - 2, argv + 2);
        if (strcmp(argv[1], "call") == 0)
                return cmd_call(argc - 2, argv + 2);
        if (strcmp(argv[1], "connect") == 0)
                return tool_connect_main(argc - 2, argv + 2);
        if (strcmp(argv[1], "hw") == 0)
                return tool_hw_main(argc - 2, argv + 2);
        if (strcmp(argv[1], "mcp") == 0) {
                if (argc > 2) {
                        fprintf(stderr, "airlock-tool: mcp takes no arguments\n");
                        return TOOL_EXIT_USAGE;
                }
                return tool_mcp_main();
        }
        fprintf(stderr, "airlock-tool: unknown command \"%s\" (see airlock-tool --help)\n",
                argv[1]);
        return TOOL_EXIT_USAGE;
}
