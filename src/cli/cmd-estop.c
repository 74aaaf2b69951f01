/* SPDX-License-Identifier: Apache-2.0 */
#include <errno.h>
#include <getopt.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "commands.h"
#include "estop.h"
#include "help.h"
#include "paths.h"
#include "stop.h"
#include "util.h"

static const char estop_usage[] =
    "Usage: airlock estop [OPTIONS] ID\n"
    "\n"
    "The hardware's emergency stop: every actuator of the sandbox's device is\n"
    "stopped now, and the sandbox may move nothing more until it ends (the\n"
    "sandbox itself goes on running). No daemon needed: the sandbox's\n"
    "supervisor is asked directly. Recorded as a hw.command with rule estop.\n"
    "\n"
    "Examples:\n"
    "  airlock estop 0123456789abcdef\n"
    "  airlock estop --json 0123456789abcdef\n"
    "  airlock estop --run-dir /run/airlock/sandboxes 0123456789abcdef\n"
    "\n"
    "Options:\n"
    "      --json            one JSON object: {\"id\", \"stopped\", \"driverTold\",\n"
    "                        \"receivedAt\"}\n"
    "      --run-dir DIR     the supervisors' run directory (default: airlockd's,\n"
    "                        /run/airlock/sandboxes for root,\n"
    "                        $XDG_RUNTIME_DIR/airlock/sandboxes otherwise)\n"
    "\n"
    "Exit status: 0 stopped; 1 the supervisor could not be asked or did not\n"
    "answer; 2 bad usage; 3 no such sandbox; 4 the sandbox has no hardware.\n";

enum { OPT_JSON = 256, OPT_RUN_DIR };

int cmd_estop(int argc, char **argv)
{
        static const struct option opts[] = {
            {"json", no_argument, NULL, OPT_JSON},
            {"run-dir", required_argument, NULL, OPT_RUN_DIR},
            {"help", no_argument, NULL, 'h'},
            {0},
        };
        bool as_json = false;
        const char *run_dir_opt = NULL;
        int c;
        while ((c = getopt_long(argc, argv, "h", opts, NULL)) != -1) {
                switch (c) {
                case OPT_JSON:
                        as_json = true;
                        break;
                case OPT_RUN_DIR:
                        run_dir_opt = optarg;
                        break;
                case 'h':
                        help_print(stdout, estop_usage, "estop");
                        return 0;
                default:
                        fputs("airlock estop: see 'airlock estop --help'\n", stderr);
                        return 2;
                }
        }
        if (argc - optind != 1) {
                fputs("airlock estop: name one sandbox (ID)\n", stderr);
                return 2;
        }
        const char *id = argv[optind];
        if (!sv_stop_id_ok(id)) {
                fprintf(stderr,
                        "airlock estop: \"%s\" is not a sandbox id (16 lowercase hex digits; see "
                        "'airlock ls')\n",
                        id);
                return 2;
        }
        const char *xdg = getenv("XDG_RUNTIME_DIR");
        _cleanup_free_ char *run_dir =
            run_dir_opt ? xstrdup(run_dir_opt) : paths_sandbox_run_dir(geteuid(), xdg);
        if (!run_dir) {
                fputs("airlock estop: XDG_RUNTIME_DIR is not set; give --run-dir\n", stderr);
                return 2;
        }
        char by[64];
        snprintf(by, sizeof(by), "cli:uid=%u", (unsigned)getuid());
        struct al_error err = {0};
        struct sv_estop_result res;
        int r = sv_estop(run_dir, id, by, 5000, &res, &err);
        bool told = res.driver_told;
        if (r < 0) {
                fprintf(stderr, "airlock estop: %s\n", err.msg);
                return r == -ENOENT ? 3 : r == -ENODEV ? 4 : 1;
        }
        if (as_json)
                printf("{\"id\":\"%s\",\"stopped\":true,\"driverTold\":%s,"
                       "\"receivedAt\":%.6f}\n",
                       id, told ? "true" : "false", res.received_at);
        else
                printf("%s: actuators stopped%s\n", id,
                       told ? "" : " (the driver was not reachable: it stops on connection loss)");
        return fflush(stdout) == 0 ? 0 : 1;
}
