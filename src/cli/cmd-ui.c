/* SPDX-License-Identifier: Apache-2.0 */
/* airlock ui: a one-time login address for airlockd's dashboard
 * (docs/dashboard.md), made with the caller's grant token. */
#include <fcntl.h>
#include <getopt.h>
#include <jansson.h>
#include <spawn.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include "apiclient.h"
#include "commands.h"
#include "util.h"

extern char **environ;

static const char ui_usage[] =
    "Usage: airlock ui [OPTIONS]\n"
    "\n"
    "Print a one-time address that logs a browser into airlockd's dashboard as\n"
    "the grant of the token used, and open it when a display is there. The\n"
    "code in it works once, within 60 seconds; the browser then holds a\n"
    "session cookie (8 hours at most, 1 hour idle), never the token.\n"
    "The daemon must serve TCP (airlockd --listen 127.0.0.1:7070).\n"
    "\n"
    "Examples:\n"
    "  airlock ui\n"
    "  airlock ui --no-open --url http://127.0.0.1:7070\n"
    "  AIRLOCK_TOKEN=alk_... airlock ui --socket /run/airlock/airlockd.sock\n"
    "\n"
    "Options:\n"
    "      --no-open             print the address only\n";

enum { OPT_NO_OPEN = 256 };

static void open_browser(const char *url)
{
        if (!getenv("DISPLAY") && !getenv("WAYLAND_DISPLAY"))
                return;
        posix_spawn_file_actions_t fa;
        if (posix_spawn_file_actions_init(&fa) != 0)
                return;
        posix_spawn_file_actions_addopen(&fa, 1, "/dev/null", O_WRONLY | O_CLOEXEC, 0);
        posix_spawn_file_actions_addopen(&fa, 2, "/dev/null", O_WRONLY | O_CLOEXEC, 0);
        char *argv[] = {(char *)"xdg-open", (char *)url, NULL};
        pid_t pid;
        if (posix_spawnp(&pid, "xdg-open", &fa, NULL, argv, environ) == 0)
                waitpid(pid, NULL, 0);
        posix_spawn_file_actions_destroy(&fa);
}

int cmd_ui(int argc, char **argv)
{
        static const struct option opts[] = {
            API_COMMON_OPTIONS,
            {"no-open", no_argument, NULL, OPT_NO_OPEN},
            {NULL, 0, NULL, 0},
        };
        struct api_common co = {0};
        bool no_open = false;
        int c;
        optind = 1;
        opterr = 0;
        while ((c = getopt_long(argc, argv, "h", opts, NULL)) != -1) {
                if (api_common_opt(c, &co))
                        continue;
                if (c == 'h') {
                        api_print_help(ui_usage, "ui");
                        return 0;
                }
                if (c == OPT_NO_OPEN) {
                        no_open = true;
                        continue;
                }
                return api_bad_option("ui", argv);
        }
        if (optind < argc) {
                fprintf(stderr, "airlock: ui: unexpected argument \"%s\"\n", argv[optind]);
                return EXIT_USAGE;
        }
        struct api_target t;
        if (api_make_target("ui", &co, &t) < 0)
                return EXIT_FAIL;
        _cleanup_free_ char *body = NULL;
        size_t len = 0;
        int st = api_call("ui", &t, "POST", "/v1/ui/codes", NULL, NULL, 0, &body, &len, true);
        if (st != 201)
                return EXIT_FAIL;
        json_error_t jerr;
        json_t *o = json_loads(body, 0, &jerr);
        const char *url = json_string_value(json_object_get(o, "url"));
        const char *path = json_string_value(json_object_get(o, "path"));
        _cleanup_free_ char *made = NULL;
        if (!url && path && !t.socket_path)
                url = made = xasprintf("http://%s:%s%s", t.host, t.port, path);
        if (!url) {
                fprintf(stderr, "airlock: ui: airlockd serves no TCP address a browser could "
                                "reach: start it with --listen 127.0.0.1:7070\n");
                json_decref(o);
                return EXIT_FAIL;
        }
        printf("%s\n", url);
        fflush(stdout);
        if (!no_open)
                open_browser(url);
        json_decref(o);
        return 0;
}
