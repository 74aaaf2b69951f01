/* SPDX-License-Identifier: Apache-2.0 */
#include <getopt.h>
#include <jansson.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "commands.h"
#include "help.h"
#include "paths.h"
#include "stop.h"
#include "util.h"

static const char stop_usage[] =
    "Usage: airlock stop [OPTIONS] ID... | --all\n"
    "\n"
    "The kill switch: freeze every process of the sandboxes, so that nothing\n"
    "more crosses a gate, then close their gates, record sandbox.stopped, kill\n"
    "and destroy them. No daemon needed: each supervisor is asked directly.\n"
    "\n"
    "Examples:\n"
    "  airlock stop 0123456789abcdef\n"
    "  airlock stop --all\n"
    "  airlock stop --all --json --run-dir /run/airlock/sandboxes\n"
    "\n"
    "Options:\n"
    "      --all             every sandbox in the run directory\n"
    "      --json            one JSON object: {\"stopped\": [...]}\n"
    "      --run-dir DIR     the supervisors' run directory (default: airlockd's,\n"
    "                        /run/airlock/sandboxes for root,\n"
    "                        $XDG_RUNTIME_DIR/airlock/sandboxes otherwise)\n"
    "\n"
    "More options:\n"
    "      --timeout SECS    how long a supervisor has to answer (default: 5); one\n"
    "                        that does not is stopped from outside: its cgroup\n"
    "                        frozen and killed, its supervisor killed (not in the\n"
    "                        audit log)\n"
    "\n"
    "Exit status: 0 every sandbox named was stopped; 1 some could not be\n"
    "stopped; 2 bad usage; 3 a named sandbox was not found (the others were\n"
    "stopped).\n";

enum { OPT_ALL = 256, OPT_JSON, OPT_RUN_DIR, OPT_TIMEOUT, STOP_MAX = 4096 };

int cmd_stop(int argc, char **argv)
{
        static const struct option opts[] = {
            {"all", no_argument, NULL, OPT_ALL},
            {"json", no_argument, NULL, OPT_JSON},
            {"run-dir", required_argument, NULL, OPT_RUN_DIR},
            {"timeout", required_argument, NULL, OPT_TIMEOUT},
            {"help", no_argument, NULL, 'h'},
            {0},
        };
        bool all = false, as_json = false;
        const char *run_dir_opt = NULL;
        uint64_t timeout_ms = 5000;
        int c;
        while ((c = getopt_long(argc, argv, "h", opts, NULL)) != -1) {
                switch (c) {
                case OPT_ALL:
                        all = true;
                        break;
                case OPT_JSON:
                        as_json = true;
                        break;
                case OPT_RUN_DIR:
                        run_dir_opt = optarg;
                        break;
                case OPT_TIMEOUT: {
                        uint64_t v;
                        if (safe_atou64(optarg, &v) < 0 || v == 0 || v > 600) {
                                fprintf(stderr,
                                        "airlock stop: --timeout %s: give a whole number "
                                        "of seconds, 1 to 600\n",
                                        optarg);
                                return 2;
                        }
                        timeout_ms = v * 1000;
                        break;
                }
                case 'h':
                        help_print(stdout, stop_usage, "stop");
                        return 0;
                default:
                        fputs("airlock stop: see 'airlock stop --help'\n", stderr);
                        return 2;
                }
        }
        size_t n_args = (size_t)(argc - optind);
        if (all == (n_args > 0)) {
                fputs("airlock stop: name the sandboxes (ID...) or give --all, not both\n", stderr);
                return 2;
        }
        for (size_t i = 0; i < n_args; i++)
                if (!sv_stop_id_ok(argv[optind + i])) {
                        fprintf(stderr,
                                "airlock stop: \"%s\" is not a sandbox id (16 lowercase hex "
                                "digits; see 'airlock ls')\n",
                                argv[optind + i]);
                        return 2;
                }
        if (n_args > STOP_MAX) {
                fprintf(stderr, "airlock stop: at most %d sandboxes at once\n", STOP_MAX);
                return 2;
        }

        const char *xdg = getenv("XDG_RUNTIME_DIR");
        _cleanup_free_ char *run_dir =
            run_dir_opt ? xstrdup(run_dir_opt) : paths_sandbox_run_dir(geteuid(), xdg);
        if (!run_dir) {
                fputs("airlock stop: XDG_RUNTIME_DIR is not set; give --run-dir\n", stderr);
                return 2;
        }

        char **ids = NULL;
        size_t n = 0;
        if (all) {
                int r = sv_stop_list(run_dir, STOP_MAX, &ids);
                if (r < 0) {
                        fprintf(stderr, "airlock stop: reading %s: %s\n", run_dir, strerror(-r));
                        return 1;
                }
                n = (size_t)r;
        } else
                for (size_t i = 0; i < n_args; i++)
                        ids = strv_append(ids, &n, argv[optind + i]);

        char by[64];
        snprintf(by, sizeof(by), "cli:uid=%u", (unsigned)getuid());
        struct sv_stop_result *res = xcalloc(n ? n : 1, sizeof(*res));
        int failed = sv_stop_many(run_dir, ids, n, by, timeout_ms, res);
        int rc = failed ? 1 : 0;

        json_t *arr = json_array();
        for (size_t i = 0; i < n; i++) {
                struct sv_stop_result *s = &res[i];
                if (s->how == SV_STOP_NOT_FOUND && rc == 0)
                        rc = 3;
                if (as_json) {
                        json_t *o = json_pack(
                            "{s:s, s:s, s:b, s:b}", "id", s->id, "how", sv_stop_how_name(s->how),
                            "stopped", s->how == SV_STOP_SUPERVISOR || s->how == SV_STOP_CGROUP,
                            "frozen", s->frozen);
                        json_object_set_new(o, "frozenAt",
                                            s->frozen_at[0] ? json_string(s->frozen_at)
                                                            : json_null());
                        json_object_set_new(o, "message",
                                            s->message[0] ? json_string(s->message) : json_null());
                        json_array_append_new(arr, o);
                } else if (s->how == SV_STOP_NOT_FOUND)
                        fprintf(stderr, "airlock stop: %s: no such sandbox in %s\n", s->id,
                                run_dir);
                else if (s->how == SV_STOP_FAILED)
                        fprintf(stderr, "airlock stop: %s: not stopped: %s\n", s->id, s->message);
                else if (s->frozen && s->frozen_at[0])
                        printf("%s stopped (frozen at %s)\n", s->id, s->frozen_at);
                else
                        printf("%s stopped (%s)\n", s->id, s->frozen ? "frozen" : "not frozen");
        }
        if (as_json) {
                json_t *o = json_pack("{s:o}", "stopped", arr);
                char *s = json_dumps(o, JSON_COMPACT);
                json_decref(o);
                if (s)
                        puts(s);
                free(s);
        } else
                json_decref(arr);
        for (size_t i = 0; i < n; i++)
                if (!as_json && res[i].how != SV_STOP_FAILED && res[i].message[0] &&
                    res[i].how != SV_STOP_NOT_FOUND)
                        fprintf(stderr, "airlock stop: %s: %s\n", res[i].id, res[i].message);
        free(res);
        strv_free(ids);
        return rc;
}
