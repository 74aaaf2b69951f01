/* SPDX-License-Identifier: Apache-2.0 */
#include <getopt.h>
#include <limits.h>
#include <stdio.h>
#include <string.h>

#include "help.h"
#include "commands.h"
#include "audit.h"
#include "control.h"
#include "orphans.h"
#include "policy.h"
#include "review.h"
#include "secrets.h"
#include "util.h"

static const char supervise_usage[] =
        "Usage: airlock supervise --id ID --policy FILE --run-dir DIR [OPTIONS]\n"
        "\n"
        "Start a long-lived sandbox and serve its control socket (docs/control.md)\n"
        "until it is destroyed. The daemon runs this once per sandbox.\n"
        "\n"
        "Examples:\n"
        "  airlock supervise --id 0123456789abcdef --policy p.json --run-dir run\n"
        "  airlock supervise ... --ready-fd 3 3>ready\n"
        "  airlockd (which runs this for each sandbox)\n"
        "\n"
        "Options:\n"
        "      --id ID            16 lowercase hex digits\n"
        "      --policy FILE      the sandbox's policy; its workspace must be set\n"
        "      --run-dir DIR      the socket and state go to DIR/ID/\n"
        "      --audit FILE       the audit log\n"
        "      --ready-fd N       write \"ok\" or \"error: ...\" to fd N once started\n"
        "\n"
        "More options:\n"
        "      --audit-rotate SIZE[:KEEP]  its rotation (default 64M:8)\n"
        "      --secrets FILE     host-side secrets (mode 0600)\n"
        "      --account ID       what ${account} stands for in route templates\n"
        "      --keep-root DIR    a copy-on-write workspace's changes are kept in\n"
        "                         DIR/sandboxes/ID/ (default: /var/lib/airlock as root,\n"
        "                         else ~/.local/state/airlock)\n";

int cmd_supervise(int argc, char **argv)
{
        static const struct option opts[] = {
                {"id", required_argument, NULL, 'i'},
                {"policy", required_argument, NULL, 'p'},
                {"run-dir", required_argument, NULL, 'r'},
                {"audit", required_argument, NULL, 'a'},
                {"audit-rotate", required_argument, NULL, 'R'},
                {"secrets", required_argument, NULL, 's'},
                {"account", required_argument, NULL, 'c'},
                {"ready-fd", required_argument, NULL, 'f'},
                {"keep-root", required_argument, NULL, 'k'},
                {"help", no_argument, NULL, 'h'},
                {NULL, 0, NULL, 0},
        };
        struct control_config cfg = {.ready_fd = -1};
        struct audit_options rotate = {0};
        const char *policy_file = NULL, *secrets_file = NULL;
        struct al_error err = {0};
        int c;

        optind = 1;
        opterr = 0;
        while ((c = getopt_long(argc, argv, "h", opts, NULL)) != -1) {
                switch (c) {
                case 'i':
                        cfg.id = optarg;
                        break;
                case 'p':
                        policy_file = optarg;
                        break;
                case 'r':
                        cfg.run_dir = optarg;
                        break;
                case 'a':
                        cfg.audit_path = optarg;
                        break;
                case 'R':
                        if (audit_parse_rotate(optarg, &rotate) < 0) {
                                fprintf(stderr, "airlock: supervise: --audit-rotate \"%s\": expected SIZE[:KEEP], e.g. 64M:8, or never\n", optarg);
                                return 2;
                        }
                        cfg.audit_rotate = &rotate;
                        break;
                case 's':
                        secrets_file = optarg;
                        break;
                case 'c':
                        cfg.account = optarg;
                        break;
                case 'k':
                        if (optarg[0] != '/') {
                                fprintf(stderr, "airlock: supervise: --keep-root \"%s\": expected an absolute path\n", optarg);
                                return 2;
                        }
                        cfg.keep_root = optarg;
                        break;
                case 'f':
                        if (safe_atoi(optarg, &cfg.ready_fd) < 0 || cfg.ready_fd < 3) {
                                fprintf(stderr, "airlock: supervise: --ready-fd \"%s\": expected a descriptor above 2\n", optarg);
                                return 2;
                        }
                        break;
                case 'h':
                        help_print(stdout, supervise_usage, "supervise");
                        return 0;
                default:
                        fprintf(stderr, "airlock: supervise: unknown or incomplete option \"%s\" (see --help)\n",
                                argv[optind - 1]);
                        return 2;
                }
        }
        if (!cfg.id || !policy_file || !cfg.run_dir) {
                fprintf(stderr, "airlock: supervise: --id, --policy and --run-dir are required\n");
                return 2;
        }

        char cwd[PATH_MAX];
        const char *home = getenv("HOME");
        struct policy *p = policy_new();
        struct secrets *secrets = NULL;
        int r = getcwd(cwd, sizeof(cwd)) ? 0 : al_error_set(&err, errno, "current directory");
        if (r >= 0)
                r = policy_load_file(p, policy_file, &err);
        if (r >= 0 && secrets_file)
                policy_add_deny_read(p, secrets_file); /* never shown inside */
        if (r >= 0)
                r = policy_finalize(p, cwd, home ? home : "/", &err);
        if (r >= 0 && !p->workspace)
                r = al_error_set(&err, 0, "%s: the policy sets no workspace", policy_file);
        if (r >= 0)
                r = secrets_file ? secrets_load_file(secrets_file, &secrets, &err)
                                 : (secrets = secrets_new(), 0);
        _cleanup_free_ char *keep_root = NULL;
        if (r >= 0 && !cfg.keep_root)
                cfg.keep_root = keep_root = review_state_root(geteuid(), home);
        if (r >= 0) {
                cfg.policy = p;
                cfg.secrets = secrets;
                cfg.caller_home = home;
                r = orphans_serve(&cfg, &err);
        } else if (cfg.ready_fd >= 0) {
                dprintf(cfg.ready_fd, "error: %s\n", err.msg);
                close(cfg.ready_fd);
        }
        if (r < 0)
                fprintf(stderr, "airlock: supervise: %s\n", err.msg);
        secrets_free(secrets);
        policy_free(p);
        return r < 0 ? 125 : 0;
}
