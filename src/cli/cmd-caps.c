/* SPDX-License-Identifier: Apache-2.0 */
#include <errno.h>
#include <getopt.h>
#include <jansson.h>
#include <poll.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <unistd.h>

#include "apiclient.h"
#include "commands.h"
#include "util.h"

/* airlock caps: read and change a running sandbox's capabilities, through
 * airlockd (GET and POST /v1/sandboxes/{id}/capabilities) or straight at an
 * `airlock run --control PATH` socket (the control protocol's caps op). */

static const char caps_usage[] =
    "Usage: airlock caps [OPTIONS] ID\n"
    "       airlock caps [OPTIONS] --control PATH\n"
    "\n"
    "Show what a running sandbox may do now (its network rules and budgets,\n"
    "tools, mounts added at run time, env of later commands), or grant and\n"
    "revoke while it runs. The next connection, tool call, open or command\n"
    "sees the change; each entry is one capability.granted or\n"
    "capability.revoked audit event. A change with any bad entry is refused\n"
    "whole.\n"
    "\n"
    "Examples:\n"
    "  airlock caps 0123456789abcdef\n"
    "  airlock caps 0123456789abcdef --allow api.example.com:443 --tool search\n"
    "  airlock caps 0123456789abcdef --mount /data/set:/workspace/set\n"
    "  airlock caps 0123456789abcdef --revoke-allow api.example.com:443\n"
    "  airlock caps --control /tmp/run.sock --grant '{\"network\": {\"deny\": \"x.com\"}}'\n"
    "\n"
    "Options:\n"
    "      --allow HOST[:PORT]   grant a network allow rule\n"
    "      --deny HOST[:PORT]    grant a network deny rule\n"
    "      --tool NAME           grant a tool defined for the sandbox\n"
    "      --mount SRC:DST[:rw]  mount a host path at DST inside (read-only\n"
    "                            unless :rw)\n"
    "      --env NAME=VALUE      set a variable for later commands\n"
    "      --revoke-allow R, --revoke-deny R, --revoke-tool NAME,\n"
    "      --unmount DST, --unset-env NAME\n"
    "                            the revokes\n"
    "      --grant JSON          one grant entry as docs/api.md has it\n"
    "      --revoke JSON         one revoke entry\n"
    "      --control PATH        an airlock run --control socket, not airlockd\n"
    "      --json                the effective set as compact JSON\n"
    "\n"
    "Exit status: 0 done; 1 the change was refused or failed (nothing of it\n"
    "was applied); 2 bad usage.\n";

enum {
        O_ALLOW = 256,
        O_DENY,
        O_TOOL,
        O_MOUNT,
        O_ENV,
        O_R_ALLOW,
        O_R_DENY,
        O_R_TOOL,
        O_UNMOUNT,
        O_UNSET_ENV,
        O_GRANT,
        O_REVOKE,
        O_CONTROL,
        O_JSON,
};

static int usage_error(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
static int usage_error(const char *fmt, ...)
{
        va_list ap;
        va_start(ap, fmt);
        fputs("airlock: caps: ", stderr);
        vfprintf(stderr, fmt, ap);
        va_end(ap);
        fputs(" (see 'airlock caps --help')\n", stderr);
        return EXIT_USAGE;
}

/* SRC:DST[:rw|:ro] */
static json_t *mount_entry(const char *arg)
{
        const char *c1 = strchr(arg, ':');
        if (!c1 || c1 == arg || !c1[1])
                return NULL;
        const char *c2 = strchr(c1 + 1, ':');
        bool ro = true;
        if (c2) {
                if (STREQ(c2 + 1, "rw"))
                        ro = false;
                else if (!STREQ(c2 + 1, "ro"))
                        return NULL;
        }
        _cleanup_free_ char *src = xasprintf("%.*s", (int)(c1 - arg), arg);
        _cleanup_free_ char *dst =
            c2 ? xasprintf("%.*s", (int)(c2 - c1 - 1), c1 + 1) : xstrdup(c1 + 1);
        return json_pack("{s:{s:s, s:s, s:b}}", "mount", "source", src, "target", dst, "readOnly",
                         ro);
}

/* One request line to a run's control socket; its one answer line. */
static int control_call(const char *path, json_t *req, json_t **ret)
{
        struct sockaddr_un sa = {.sun_family = AF_UNIX};
        if (strlen(path) >= sizeof(sa.sun_path))
                return -ENAMETOOLONG;
        memcpy(sa.sun_path, path, strlen(path) + 1);
        _cleanup_close_ int fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
        if (fd < 0 || connect(fd, (struct sockaddr *)&sa, sizeof(sa)) < 0)
                return -errno;
        _cleanup_free_ char *line = json_dumps(req, JSON_COMPACT);
        size_t len = strlen(line);
        line[len] = '\0';
        if (write(fd, line, len) != (ssize_t)len || write(fd, "\n", 1) != 1)
                return -errno;
        char buf[1 << 16];
        size_t n = 0;
        while (n < sizeof(buf) - 1) {
                struct pollfd p = {.fd = fd, .events = POLLIN};
                if (poll(&p, 1, 30000) <= 0)
                        return -ETIMEDOUT;
                ssize_t k = read(fd, buf + n, sizeof(buf) - 1 - n);
                if (k < 0)
                        return -errno;
                if (k == 0)
                        break;
                n += (size_t)k;
                if (memchr(buf, '\n', n))
                        break;
        }
        buf[n] = '\0';
        json_error_t jerr;
        *ret = json_loads(buf, JSON_DISABLE_EOF_CHECK, &jerr);
        return *ret ? 0 : -EPROTO;
}

static void print_caps(json_t *caps, bool compact)
{
        char *text = json_dumps(caps, compact ? JSON_COMPACT : JSON_INDENT(2));
        printf("%s\n", text ? text : "{}");
        free(text);
}

int cmd_caps(int argc, char **argv)
{
        static const struct option opts[] = {
            {"allow", required_argument, NULL, O_ALLOW},
            {"deny", required_argument, NULL, O_DENY},
            {"tool", required_argument, NULL, O_TOOL},
            {"mount", required_argument, NULL, O_MOUNT},
            {"env", required_argument, NULL, O_ENV},
            {"revoke-allow", required_argument, NULL, O_R_ALLOW},
            {"revoke-deny", required_argument, NULL, O_R_DENY},
            {"revoke-tool", required_argument, NULL, O_R_TOOL},
            {"unmount", required_argument, NULL, O_UNMOUNT},
            {"unset-env", required_argument, NULL, O_UNSET_ENV},
            {"grant", required_argument, NULL, O_GRANT},
            {"revoke", required_argument, NULL, O_REVOKE},
            {"control", required_argument, NULL, O_CONTROL},
            {"json", no_argument, NULL, O_JSON},
            API_COMMON_OPTIONS,
            {NULL, 0, NULL, 0},
        };
        struct api_common co = {0};
        json_t *grant = json_array(), *revoke = json_array();
        const char *control = NULL;
        _cleanup_free_ char *path = NULL, *body = NULL, *resp = NULL;
        bool compact = false;
        int c, rc = EXIT_USAGE;
        optind = 1;
        opterr = 0;
        while ((c = getopt_long(argc, argv, "h", opts, NULL)) != -1) {
                if (api_common_opt(c, &co))
                        continue;
                json_t *e = NULL, **to = &grant;
                switch (c) {
                case O_ALLOW:
                case O_R_ALLOW:
                        e = json_pack("{s:{s:s}}", "network", "allow", optarg);
                        to = c == O_ALLOW ? &grant : &revoke;
                        break;
                case O_DENY:
                case O_R_DENY:
                        e = json_pack("{s:{s:s}}", "network", "deny", optarg);
                        to = c == O_DENY ? &grant : &revoke;
                        break;
                case O_TOOL:
                case O_R_TOOL:
                        e = json_pack("{s:s}", "tool", optarg);
                        to = c == O_TOOL ? &grant : &revoke;
                        break;
                case O_MOUNT:
                        if (!(e = mount_entry(optarg))) {
                                rc = usage_error("--mount \"%s\": expected SRC:DST[:rw]", optarg);
                                goto out;
                        }
                        break;
                case O_UNMOUNT:
                        e = json_pack("{s:s}", "mount", optarg);
                        to = &revoke;
                        break;
                case O_ENV: {
                        const char *eq = strchr(optarg, '=');
                        if (!eq || eq == optarg) {
                                rc = usage_error("--env \"%s\": expected NAME=VALUE", optarg);
                                goto out;
                        }
                        _cleanup_free_ char *k = xasprintf("%.*s", (int)(eq - optarg), optarg);
                        e = json_pack("{s:{s:s, s:s}}", "env", "name", k, "value", eq + 1);
                        break;
                }
                case O_UNSET_ENV:
                        e = json_pack("{s:{s:s}}", "env", "name", optarg);
                        to = &revoke;
                        break;
                case O_GRANT:
                case O_REVOKE: {
                        json_error_t jerr;
                        e = json_loads(optarg, 0, &jerr);
                        if (!json_is_object(e)) {
                                json_decref(e);
                                rc = usage_error(c == O_GRANT
                                                     ? "--grant '%s': expected a JSON object"
                                                     : "--revoke '%s': expected a JSON object",
                                                 optarg);
                                goto out;
                        }
                        to = c == O_GRANT ? &grant : &revoke;
                        break;
                }
                case O_CONTROL:
                        control = optarg;
                        continue;
                case O_JSON:
                        compact = true;
                        continue;
                case 'h':
                        api_print_help(caps_usage, "caps");
                        rc = 0;
                        goto out;
                default:
                        rc = api_bad_option("caps", argv);
                        goto out;
                }
                if (!e) {
                        rc = usage_error("\"%s\": not valid UTF-8", optarg);
                        goto out;
                }
                json_array_append_new(*to, e);
        }
        int n_args = argc - optind;
        if (control ? n_args != 0 : n_args != 1) {
                fputs(control ? "airlock: caps: with --control, name no sandbox\n"
                              : "airlock: caps: name one sandbox (ID; see 'airlock ls')\n",
                      stderr);
                goto out;
        }
        bool change = json_array_size(grant) + json_array_size(revoke) > 0;
        if (control) {
                json_t *req = json_pack("{s:s}", "op", "caps"), *ans = NULL;
                if (change) {
                        json_object_set(req, "grant", grant);
                        json_object_set(req, "revoke", revoke);
                }
                int r = control_call(control, req, &ans);
                json_decref(req);
                if (r < 0) {
                        fprintf(stderr, "airlock: caps: %s: %s\n", control, strerror(-r));
                        rc = EXIT_FAIL;
                        goto out;
                }
                if (!json_is_true(json_object_get(ans, "ok"))) {
                        fprintf(stderr, "airlock: caps: %s: %s\n",
                                json_string_value(json_object_get(ans, "error")) ?: "error",
                                json_string_value(json_object_get(ans, "message")) ?: "");
                        rc = EXIT_FAIL;
                } else {
                        print_caps(json_object_get(ans, "capabilities"), compact);
                        rc = 0;
                }
                json_decref(ans);
                goto out;
        }
        const char *id = argv[optind];
        if (!api_valid_id(id)) {
                rc = usage_error("\"%s\" is not a sandbox id (16 lowercase hex digits)", id);
                goto out;
        }
        struct api_target t;
        if (api_make_target("caps", &co, &t) < 0) {
                rc = EXIT_FAIL;
                goto out;
        }
        path = xasprintf("/v1/sandboxes/%s/capabilities", id);
        if (change) {
                json_t *b = json_pack("{s:O, s:O}", "grant", grant, "revoke", revoke);
                body = json_dumps(b, JSON_COMPACT);
                json_decref(b);
        }
        int status =
            api_call("caps", &t, change ? "POST" : "GET", path, change ? "application/json" : NULL,
                     body, body ? strlen(body) : 0, &resp, NULL, true);
        if (status != 200) {
                rc = EXIT_FAIL;
                goto out;
        }
        json_error_t jerr;
        json_t *caps = json_loads(resp, 0, &jerr);
        print_caps(caps, compact);
        json_decref(caps);
        rc = 0;
out:
        json_decref(grant);
        json_decref(revoke);
        return rc;
}
