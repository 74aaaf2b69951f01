/* SPDX-License-Identifier: Apache-2.0 */
#include <errno.h>
#include <getopt.h>
#include <jansson.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "approvals-client.h"
#include "commands.h"
#include "help.h"
#include "paths.h"
#include "stop.h"
#include "util.h"

static const char approvals_usage[] =
    "Usage: airlock approvals [OPTIONS] [--sandbox ID]\n"
    "       airlock approvals allow|deny [OPTIONS] APPROVAL-ID [--remember]\n"
    "\n"
    "The requests the sandboxes' gates hold for the operator (a policy with\n"
    "network.onUnlisted or tools.onUnlisted \"ask\"): list them, or decide one.\n"
    "No daemon needed: each supervisor is asked directly.\n"
    "\n"
    "Examples:\n"
    "  airlock approvals\n"
    "  airlock approvals allow 0123456789abcdef-3\n"
    "  airlock approvals deny 0123456789abcdef-4 --remember\n"
    "\n"
    "Options:\n"
    "      --remember        allow or deny the same host and port (or tool) for the\n"
    "                        rest of this sandbox's life, without asking again\n"
    "      --sandbox ID      list one sandbox's approvals only\n"
    "      --json            list as one JSON object: {\"approvals\": [...]}\n"
    "      --run-dir DIR     the supervisors' run directory (default: airlockd's)\n"
    "\n"
    "Exit status: 0 done; 1 the supervisor could not be asked; 2 bad usage;\n"
    "3 no such approval is pending (decided, expired or unknown).\n";

enum { OPT_REMEMBER = 256, OPT_SANDBOX, OPT_JSON, OPT_RUN_DIR, CALL_TIMEOUT_MS = 5000 };

static void print_one(const json_t *a)
{
        const char *kind = json_string_value(json_object_get(a, "kind"));
        printf("%-36s %-7s ", json_string_value(json_object_get(a, "id")), kind ? kind : "?");
        if (kind && STREQ(kind, "network"))
                printf("%s %s:%lld", json_string_value(json_object_get(a, "protocol")),
                       json_string_value(json_object_get(a, "host")),
                       (long long)json_integer_value(json_object_get(a, "port")));
        else
                printf("%s args %.12s", json_string_value(json_object_get(a, "tool")),
                       json_string_value(json_object_get(a, "argsDigest")));
        printf("  expires %s\n", json_string_value(json_object_get(a, "expires")));
}

static int list(const char *run_dir, const char *only, bool as_json)
{
        char **ids = NULL;
        int n = 0;
        if (only) {
                size_t one = 0;
                ids = strv_append(ids, &one, only);
                n = 1;
        } else {
                n = sv_stop_list(run_dir, 4096, &ids);
                if (n < 0) {
                        fprintf(stderr, "airlock approvals: reading %s: %s\n", run_dir,
                                strerror(-n));
                        return 1;
                }
        }
        json_t *all = json_array();
        int rc = 0;
        for (int i = 0; i < n; i++) {
                json_t *l = NULL;
                int r = sv_approvals_list(run_dir, ids[i], CALL_TIMEOUT_MS, &l);
                if (r < 0) {
                        if (only) {
                                fprintf(stderr, "airlock approvals: sandbox %s: %s\n", ids[i],
                                        r == -ENOENT ? "not running" : strerror(-r));
                                rc = 1;
                        }
                        continue;
                }
                json_array_extend(all, l);
                json_decref(l);
        }
        strv_free(ids);
        if (as_json) {
                json_t *o = json_pack("{s:o}", "approvals", all);
                char *s = json_dumps(o, JSON_COMPACT);
                json_decref(o);
                if (s)
                        puts(s);
                free(s);
                return rc;
        }
        size_t i;
        json_t *a;
        json_array_foreach(all, i, a) print_one(a);
        json_decref(all);
        return rc;
}

static int decide(const char *run_dir, const char *verb, const char *aid, bool remember)
{
        char sb[17];
        if (sv_approvals_sandbox_of(aid, sb) < 0) {
                fprintf(stderr,
                        "airlock approvals: \"%s\" is not an approval id (SANDBOX-N, as "
                        "'airlock approvals' lists them)\n",
                        aid);
                return 2;
        }
        const char *decision = STREQ(verb, "allow") ? (remember ? "allow-sandbox" : "allow-once")
                                                    : (remember ? "deny-sandbox" : "deny");
        char by[64];
        snprintf(by, sizeof(by), "cli:uid=%u", (unsigned)getuid());
        json_t *o = NULL;
        int r = sv_approvals_decide(run_dir, aid, decision, by, CALL_TIMEOUT_MS, &o);
        if (r == -ESRCH) {
                fprintf(stderr,
                        "airlock approvals: %s is not pending (decided, expired or unknown)\n",
                        aid);
                return 3;
        }
        if (r == -EIO) {
                fprintf(stderr,
                        "airlock approvals: %s: the decision could not be recorded in the audit "
                        "log (is its disk full?), so it took no effect: the request was refused\n",
                        aid);
                return 1;
        }
        if (r < 0) {
                fprintf(stderr, "airlock approvals: sandbox %s: %s\n", sb,
                        r == -ENOENT ? "not running" : strerror(-r));
                return 1;
        }
        /* An allow the rules in force now refuse (a deny rule granted while
         * it waited): recorded, but the request was refused. */
        const json_t *refused = json_object_get(o, "refused");
        if (refused) {
                const char *rule = json_string_value(json_object_get(refused, "rule"));
                fprintf(stderr,
                        "airlock approvals: %s: recorded, but the rules in force now refuse the "
                        "request (%s, rule: %s): it was not let through\n",
                        aid, json_string_value(json_object_get(refused, "reason")),
                        rule && rule[0] ? rule : "none");
                json_decref(o);
                return 4;
        }
        printf("%s %s\n", aid, decision);
        json_decref(o);
        return 0;
}

int cmd_approvals(int argc, char **argv)
{
        static const struct option opts[] = {
            {"remember", no_argument, NULL, OPT_REMEMBER},
            {"sandbox", required_argument, NULL, OPT_SANDBOX},
            {"json", no_argument, NULL, OPT_JSON},
            {"run-dir", required_argument, NULL, OPT_RUN_DIR},
            {"help", no_argument, NULL, 'h'},
            {0},
        };
        bool remember = false, as_json = false;
        const char *run_dir_opt = NULL, *only = NULL;
        int c;
        while ((c = getopt_long(argc, argv, "h", opts, NULL)) != -1) {
                switch (c) {
                case OPT_REMEMBER:
                        remember = true;
                        break;
                case OPT_SANDBOX:
                        if (!sv_stop_id_ok(optarg)) {
                                fprintf(stderr,
                                        "airlock approvals: --sandbox %s: not a sandbox id (16 "
                                        "lowercase hex digits)\n",
                                        optarg);
                                return 2;
                        }
                        only = optarg;
                        break;
                case OPT_JSON:
                        as_json = true;
                        break;
                case OPT_RUN_DIR:
                        run_dir_opt = optarg;
                        break;
                case 'h':
                        help_print(stdout, approvals_usage, "approvals");
                        return 0;
                default:
                        fputs("airlock approvals: see 'airlock approvals --help'\n", stderr);
                        return 2;
                }
        }
        const char *xdg = getenv("XDG_RUNTIME_DIR");
        _cleanup_free_ char *run_dir =
            run_dir_opt ? xstrdup(run_dir_opt) : paths_sandbox_run_dir(geteuid(), xdg);
        if (!run_dir) {
                fputs("airlock approvals: XDG_RUNTIME_DIR is not set; give --run-dir\n", stderr);
                return 2;
        }
        int n_args = argc - optind;
        if (n_args == 0) {
                if (remember) {
                        fputs("airlock approvals: --remember goes with allow or deny\n", stderr);
                        return 2;
                }
                return list(run_dir, only, as_json);
        }
        const char *verb = argv[optind];
        if (!STREQ(verb, "allow") && !STREQ(verb, "deny")) {
                fprintf(stderr, "airlock approvals: unknown action \"%s\": use allow or deny\n",
                        verb);
                return 2;
        }
        if (n_args != 2) {
                fprintf(stderr, "airlock approvals: %s takes one approval id\n", verb);
                return 2;
        }
        return decide(run_dir, verb, argv[optind + 1], remember);
}
