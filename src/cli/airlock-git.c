/* SPDX-License-Identifier: Apache-2.0 */
/* airlock-git: the commands that need libgit2, run by `airlock` (see
 * githelper.h). Not meant to be called by hand. */
#include <getopt.h>
#include <jansson.h>
#include <stdio.h>
#include <string.h>

#include "cmd-git.h"
#include "commands.h"
#include "gitops.h"
#include "review.h"
#include "util.h"

/* git-clone --repo URL [--rev REV] [--secrets FILE] [--audit FILE]
 *           [--state-root DIR] [--id ID] [--no-helper]:
 * one JSON line on stdout, {"id", "workspace", "base"} or {"error"}.
 * --state-root and --id put the clone at DIR/sandboxes/ID/repo (ID: 16 of
 * 0-9 a-f, not taken); --no-helper never asks the git credential helper.
 * airlockd passes them; `airlock run --repo` does not. */
static int git_clone(int argc, char **argv)
{
        enum { OPT_STATE_ROOT = 256, OPT_ID, OPT_NO_HELPER };
        static const struct option opts[] = {
            {"repo", required_argument, NULL, 'r'},
            {"rev", required_argument, NULL, 'v'},
            {"secrets", required_argument, NULL, 's'},
            {"audit", required_argument, NULL, 'a'},
            {"state-root", required_argument, NULL, OPT_STATE_ROOT},
            {"id", required_argument, NULL, OPT_ID},
            {"no-helper", no_argument, NULL, OPT_NO_HELPER},
            {NULL, 0, NULL, 0},
        };
        struct run_git_args ga = {.home = getenv("HOME")};
        int c;
        optind = 1;
        opterr = 0;
        while ((c = getopt_long(argc, argv, "", opts, NULL)) != -1) {
                switch (c) {
                case 'r':
                        ga.repo = optarg;
                        break;
                case 'v':
                        ga.rev = optarg;
                        break;
                case 's':
                        ga.secrets_file = optarg;
                        break;
                case 'a':
                        ga.audit = optarg;
                        break;
                case OPT_STATE_ROOT:
                        ga.state_root = optarg;
                        break;
                case OPT_ID:
                        ga.id = optarg;
                        break;
                case OPT_NO_HELPER:
                        ga.no_helper = true;
                        break;
                default:
                        printf("{\"error\": \"git-clone: bad arguments\"}\n");
                        return 2;
                }
        }
        if (!ga.repo || optind != argc) {
                printf("{\"error\": \"git-clone: --repo is required, and nothing else\"}\n");
                return 2;
        }
        if (ga.state_root && ga.state_root[0] != '/') {
                printf("{\"error\": \"git-clone: --state-root must be an absolute path\"}\n");
                return 2;
        }
        git_deadline_arm("git-clone", GIT_DEADLINE_JSON);
        struct run_git g = {0};
        char msg[1024];
        json_t *o;
        int rc = 0;
        if (run_git_clone(&g, &ga, msg, sizeof(msg)) < 0) {
                o = json_pack("{s:s}", "error", msg);
                rc = 1;
        } else
                o = json_pack("{s:s, s:s, s:s}", "id", g.id, "workspace", g.workspace, "base",
                              g.base);
        char *s = json_dumps(o, JSON_COMPACT);
        printf("%s\n", s ? s : "{}");
        free(s);
        json_decref(o);
        run_git_done(&g);
        return rc;
}

/* git-report ID: after the run, what the agent committed and what next. */
static int git_report(int argc, char **argv)
{
        if (argc != 2)
                return 2;
        struct al_error err = {0};
        _cleanup_free_ char *root = review_state_root(geteuid(), getenv("HOME"));
        if (!root)
                return 2;
        _cleanup_free_ char *dir = xasprintf("%s/sandboxes/%s", root, argv[1]);
        struct gitops_state st = {0};
        if (gitops_state_read(dir, &st, &err) < 0) {
                fprintf(stderr, "airlock: sandbox %s: %s\n", argv[1], err.msg);
                return 1;
        }
        git_deadline_arm("run", GIT_DEADLINE_TEXT);
        struct run_git g = {.state_dir = dir, .workspace = st.workspace, .base = st.base};
        snprintf(g.id, sizeof(g.id), "%s", argv[1]);
        run_git_report(&g, false);
        gitops_state_clear(&st);
        return 0;
}

int main(int argc, char **argv)
{
        if (argc < 2) {
                fprintf(stderr, "airlock-git: run by airlock; see 'airlock --help'\n");
                return 2;
        }
        if (STREQ(argv[1], "export"))
                return cmd_export(argc - 1, argv + 1);
        if (STREQ(argv[1], "push"))
                return cmd_push(argc - 1, argv + 1);
        if (STREQ(argv[1], "git-clone"))
                return git_clone(argc - 1, argv + 1);
        if (STREQ(argv[1], "git-report"))
                return git_report(argc - 1, argv + 1);
        fprintf(stderr, "airlock-git: unknown command \"%s\"\n", argv[1]);
        return 2;
}
