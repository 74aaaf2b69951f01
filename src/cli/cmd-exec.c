/* SPDX-License-Identifier: Apache-2.0 */
/* airlock exec | logs: a command run in a sandbox of airlockd's, and the
 * events of one running there, streamed as NDJSON through its API
 * (apiclient.h). */
#include <errno.h>
#include <fcntl.h>
#include <getopt.h>
#include <inttypes.h>
#include <jansson.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "apiclient.h"
#include "commands.h"
#include "util.h"

#define LINE_MAX_ (16u << 20) /* one NDJSON line */
#define STDIN_MAX (6u << 20)

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

static int stream_events(const char *cmd, const struct api_target *t, const char *method,
                         const char *path, const char *body)
{
        struct api_conn c;
        if (api_conn_open(cmd, t, &c) < 0)
                return EXIT_SETUP;
        int r = api_send_request(&c, t, method, path, body ? "application/json" : NULL, body,
                                 body ? strlen(body) : 0);
        if (r >= 0)
                r = api_read_head(&c);
        if (r < 0) {
                api_conn_close(&c);
                api_fail(cmd, "talking to airlockd: %s", strerror(-r));
                return EXIT_SETUP;
        }
        if (c.status != 200) {
                char *resp = NULL;
                size_t len;
                if (api_read_all(&c, &resp, &len) < 0)
                        resp = NULL;
                api_print_error(cmd, c.status, resp);
                free(resp);
                api_conn_close(&c);
                return EXIT_SETUP;
        }
        struct stream_state st = {0};
        size_t cap = 64 * 1024, len = 0;
        char *line = xcalloc(cap, 1);
        char chunk[32 * 1024];
        for (;;) {
                ssize_t n = api_read_body(&c, chunk, sizeof(chunk));
                if (n < 0) {
                        api_fail(cmd, "reading from airlockd: %s", strerror((int)-n));
                        break;
                }
                if (n == 0)
                        break;
                for (ssize_t i = 0; i < n; i++) {
                        if (chunk[i] != '\n') {
                                if (len + 1 >= cap) {
                                        if (cap >= LINE_MAX_) {
                                                api_fail(cmd,
                                                         "an event line is longer than %u bytes",
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
        api_conn_close(&c);
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
    "Examples:\n"
    "  airlock exec 3f2a -- make test\n"
    "  airlock exec -i 3f2a -- python3 < job.py\n"
    "  airlock exec --background 3f2a -- ./server\n"
    "\n"
    "Options:\n"
    "      --env KEY=VALUE  add to the command's environment\n"
    "      --cwd DIR        working directory inside (default: /workspace)\n"
    "      --uid N          run as user N inside: the sandbox's own, or one of 0 to\n"
    "                       users-1 when its policy has \"users\"\n"
    "      --timeout SEC    kill the command after this long (at most the policy's)\n"
    "  -i, --stdin          send our stdin (up to 6 MiB) to the command\n"
    "      --background     start it, print its process id and return; see\n"
    "                       'airlock logs ID PID'\n";

int cmd_exec(int argc, char **argv)
{
        enum { O_ENV = 1, O_CWD, O_TIMEOUT, O_BG, O_UID };
        static const struct option opts[] = {
            {"env", required_argument, NULL, O_ENV},
            {"cwd", required_argument, NULL, O_CWD},
            {"uid", required_argument, NULL, O_UID},
            {"timeout", required_argument, NULL, O_TIMEOUT},
            {"stdin", no_argument, NULL, 'i'},
            {"background", no_argument, NULL, O_BG},
            API_COMMON_OPTIONS,
            {NULL, 0, NULL, 0},
        };
        struct api_common co = {0};
        json_t *body = json_object();
        json_t *env = json_object();
        _cleanup_free_ char *text = NULL, *path = NULL;
        bool send_stdin = false, background = false;
        int c, ret = EXIT_USAGE;
        optind = 1;
        opterr = 0;
        while ((c = getopt_long(argc, argv, "+ih", opts, NULL)) != -1) {
                if (api_common_opt(c, &co))
                        continue;
                double sec;
                switch (c) {
                case O_ENV: {
                        const char *eq = strchr(optarg, '=');
                        if (!eq || eq == optarg) {
                                fprintf(stderr, "airlock: exec: --env \"%s\": expected KEY=VALUE\n",
                                        optarg);
                                goto out;
                        }
                        _cleanup_free_ char *k = xasprintf("%.*s", (int)(eq - optarg), optarg);
                        json_object_set_new(env, k, json_string(eq + 1));
                        break;
                }
                case O_CWD:
                        json_object_set_new(body, "cwd", json_string(optarg));
                        break;
                case O_UID: {
                        uint64_t uid;
                        if (safe_atou64(optarg, &uid) < 0 || uid > 65535) {
                                fprintf(stderr,
                                        "airlock: exec: --uid \"%s\": expected a number from 0 "
                                        "to 65535\n",
                                        optarg);
                                goto out;
                        }
                        json_object_set_new(body, "uid", json_integer((json_int_t)uid));
                        break;
                }
                case O_TIMEOUT:
                        if (api_parse_seconds(optarg, &sec) < 0 || sec <= 0) {
                                fprintf(stderr,
                                        "airlock: exec: --timeout \"%s\": expected seconds\n",
                                        optarg);
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
                        api_print_help(exec_usage, "exec");
                        ret = 0;
                        goto out;
                default:
                        ret = api_bad_option("exec", argv);
                        goto out;
                }
        }
        if (optind < argc && STREQ(argv[optind], "--"))
                optind++;
        if (optind >= argc || !api_valid_id(argv[optind])) {
                fprintf(stderr,
                        "airlock: exec: expected a sandbox ID (16 hex digits) and a command\n");
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
        struct api_target t;
        ret = EXIT_SETUP;
        if (api_make_target("exec", &co, &t) < 0)
                goto out;
        text = json_dumps(body, JSON_COMPACT);
        path = xasprintf("/v1/sandboxes/%s/exec", id);
        if (background) {
                _cleanup_free_ char *resp = NULL;
                int status = api_call("exec", &t, "POST", path, "application/json", text,
                                      strlen(text), &resp, NULL, true);
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

static const char logs_usage[] =
    "Usage: airlock logs ID [PID]\n"
    "\n"
    "Without PID: print the sandbox's lines of the audit log. With PID: print what a\n"
    "background process wrote (what was kept of it, then as it comes) until it ends;\n"
    "the exit status is the process's.\n"
    "\n"
    "Examples:\n"
    "  airlock logs 3f2a\n"
    "  airlock logs 3f2a 2\n"
    "  airlock exec --background 3f2a -- ./job && airlock logs 3f2a 1\n";

int cmd_logs(int argc, char **argv)
{
        struct api_common co = {0};
        int done = api_common_options_only("logs", logs_usage, argc, argv, &co);
        if (done >= 0)
                return done;
        int n = argc - optind;
        if ((n != 1 && n != 2) || !api_valid_id(argv[optind])) {
                fprintf(stderr, "airlock: logs: expected a sandbox ID and optionally a PID\n");
                return EXIT_USAGE;
        }
        const char *id = argv[optind];
        uint64_t pid = 0;
        if (n == 2 && (safe_atou64(argv[optind + 1], &pid) < 0 || pid == 0)) {
                fprintf(stderr, "airlock: logs: \"%s\" is not a process id\n", argv[optind + 1]);
                return EXIT_USAGE;
        }
        struct api_target t;
        if (api_make_target("logs", &co, &t) < 0)
                return EXIT_FAIL;
        if (pid) {
                _cleanup_free_ char *path =
                    xasprintf("/v1/sandboxes/%s/processes/%" PRIu64 "/events", id, pid);
                return stream_events("logs", &t, "GET", path, NULL);
        }
        _cleanup_free_ char *path = xasprintf("/v1/sandboxes/%s/audit", id);
        _cleanup_free_ char *resp = NULL;
        size_t len = 0;
        if (api_call("logs", &t, "GET", path, NULL, NULL, 0, &resp, &len, true) != 200)
                return EXIT_FAIL;
        return write_full(1, resp, len) < 0 ? EXIT_FAIL : 0;
}
