/* SPDX-License-Identifier: Apache-2.0 */
#include <getopt.h>
#include <inttypes.h>
#include <jansson.h>
#include <pwd.h>
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>

#include "help.h"
#include "commands.h"
#include "grants.h"
#include "store.h"
#include "paths.h"
#include "util.h"

#define EXIT_FAIL  1
#define EXIT_USAGE 2

static const char grant_usage[] =
        "Usage: airlock grant COMMAND ...\n"
        "\n"
        "Manage the bearer tokens that airlockd's API accepts (docs/api.md). The grants\n"
        "live in the daemon's database, which this command opens directly: run it as\n"
        "the user the daemon runs as.\n"
        "\n"
        "Examples:\n"
        "  airlock grant create --name ci --allow-sandbox --allow-exec\n"
        "  airlock grant ls\n"
        "  airlock grant revoke ci\n"
        "\n"
        "Commands:\n"
        "  create --name NAME [OPTIONS]   make a grant and print its token, once\n"
        "  revoke NAME                    stop accepting a grant's token at once\n"
        "  ls                             list the grants\n"
        "\n"
        "Options of every command:\n"
        "      --state-dir DIR   the daemon's state directory (default: /var/lib/airlock/daemon\n"
        "                        for root, ~/.local/state/airlock/daemon otherwise)\n"
        "\n"
        "More options, of create:\n"
        "      --allow-sandbox          create and destroy sandboxes, set their TTL\n"
        "      --allow-exec             run commands in sandboxes, write and delete their files\n"
        "      --allow-host-workspace   name host paths: an existing workspace, mounts,\n"
        "                               filesystem.read \"host\"\n"
        "      --allow-git              create sandboxes from a repository, which the daemon\n"
        "                               clones with its own git credentials, and push\n"
        "                               their commits\n"
        "      --allow-capabilities     read and change what its running sandboxes may do\n"
        "                               (network rules, tools, mounts, env: airlock caps)\n"
        "      --allow-runs             start agent runs (POST /v1/runs, docs/agent.md)\n"
        "      --max-sandboxes N        live sandboxes this grant may hold (default: no own\n"
        "                               maximum; the daemon's applies)\n"
        "      --classes LIST           allowed classes, e.g. small,medium (default: all); a\n"
        "                               policy may not exceed the largest of them\n"
        "      --secret NAME            a daemon secret (from airlockd --secrets) that this\n"
        "                               grant's policies may inject in routes as\n"
        "                               ${secret:NAME}; repeat for more (default: none; the\n"
        "                               git credentials GIT_TOKEN and GIT_USERNAME never)\n"
        "      --tool NAME              a host tool (built in, or defined by airlockd\n"
        "                               --tools) that this grant's sandboxes may be given in\n"
        "                               tools.allow; repeat for more (default: none)\n";

static char *default_state_dir(void)
{
        const char *home = getenv("HOME");
        if (geteuid() != 0 && (!home || home[0] != '/')) {
                struct passwd *pw = getpwuid(geteuid());
                home = pw ? pw->pw_dir : NULL;
        }
        return paths_daemon_state_dir(geteuid(), home);
}

static int open_store(const char *state_dir, bool create, struct store **ret)
{
        _cleanup_free_ char *dflt = state_dir ? NULL : default_state_dir();
        const char *dir = state_dir ? state_dir : dflt;
        if (!dir) {
                fprintf(stderr, "airlock: grant: no home directory; give --state-dir\n");
                return -EINVAL;
        }
        _cleanup_free_ char *db = xasprintf("%s/%s", dir, STORE_FILE);
        if (!create && access(db, F_OK) < 0) {
                fprintf(stderr, "airlock: grant: %s: no daemon database (%s)\n", db, strerror(errno));
                return -ENOENT;
        }
        if (create) {
                int r = mkdir_p(dir, 0755, 0700);
                if (r < 0) {
                        fprintf(stderr, "airlock: grant: creating %s: %s\n", dir, strerror(-r));
                        return r;
                }
        }
        struct al_error err = {0};
        int r = store_open(db, ret, &err);
        if (r < 0)
                fprintf(stderr, "airlock: grant: %s\n", err.msg);
        return r;
}

static int grant_create(int argc, char **argv)
{
        enum { O_NAME = 256, O_SANDBOX, O_EXEC, O_HOST, O_GIT, O_RUNS, O_MAX, O_CLASSES, O_STATE, O_SECRET, O_TOOL, O_CAPS };
        static const struct option opts[] = {
                {"name", required_argument, NULL, O_NAME},
                {"allow-sandbox", no_argument, NULL, O_SANDBOX},
                {"allow-exec", no_argument, NULL, O_EXEC},
                {"allow-host-workspace", no_argument, NULL, O_HOST},
                {"allow-git", no_argument, NULL, O_GIT},
                {"allow-capabilities", no_argument, NULL, O_CAPS},
                {"allow-runs", no_argument, NULL, O_RUNS},
                {"max-sandboxes", required_argument, NULL, O_MAX},
                {"classes", required_argument, NULL, O_CLASSES},
                {"secret", required_argument, NULL, O_SECRET},
                {"tool", required_argument, NULL, O_TOOL},
                {"state-dir", required_argument, NULL, O_STATE},
                {"help", no_argument, NULL, 'h'},
                {NULL, 0, NULL, 0},
        };
        struct grant g = {0};
        const char *state_dir = NULL;
        _cleanup_strv_ char **classes = NULL;
        _cleanup_strv_ char **secrets = NULL;
        _cleanup_strv_ char **tools = NULL;
        struct al_error err = {0};
        int c;
        optind = 1;
        opterr = 0;
        while ((c = getopt_long(argc, argv, "h", opts, NULL)) != -1) {
                switch (c) {
                case O_NAME:
                        g.name = optarg;
                        break;
                case O_SANDBOX:
                        g.allow_sandbox = true;
                        break;
                case O_EXEC:
                        g.allow_exec = true;
                        break;
                case O_HOST:
                        g.allow_host_workspace = true;
                        break;
                case O_GIT:
                        g.allow_git = true;
                        break;
                case O_CAPS:
                        g.allow_capabilities = true;
                        break;
                case O_RUNS:
                        g.allow_runs = true;
                        break;
                case O_MAX:
                        if (safe_atou64(optarg, &g.max_sandboxes) < 0 || g.max_sandboxes == 0) {
                                fprintf(stderr, "airlock: grant create: --max-sandboxes \"%s\": expected a "
                                                "positive number\n",
                                        optarg);
                                return EXIT_USAGE;
                        }
                        break;
                case O_CLASSES:
                        strv_free(classes);
                        classes = NULL;
                        if (grant_parse_classes(optarg, &classes, &g.n_classes, &err) < 0) {
                                fprintf(stderr, "airlock: grant create: --%s\n", err.msg);
                                return EXIT_USAGE;
                        }
                        break;
                case O_SECRET:
                        if (grant_add_secret(&secrets, &g.n_secrets, optarg, &err) < 0) {
                                fprintf(stderr, "airlock: grant create: --%s\n", err.msg);
                                return EXIT_USAGE;
                        }
                        break;
                case O_TOOL:
                        if (grant_add_tool(&tools, &g.n_tools, optarg, &err) < 0) {
                                fprintf(stderr, "airlock: grant create: --%s\n", err.msg);
                                return EXIT_USAGE;
                        }
                        break;
                case O_STATE:
                        state_dir = optarg;
                        break;
                case 'h':
                        help_print(stdout, grant_usage, "grant");
                        return 0;
                default:
                        fprintf(stderr, "airlock: grant create: unknown or incomplete option \"%s\" "
                                        "(see --help)\n",
                                argv[optind - 1]);
                        return EXIT_USAGE;
                }
        }
        if (optind < argc) {
                fprintf(stderr, "airlock: grant create: unexpected argument \"%s\"\n", argv[optind]);
                return EXIT_USAGE;
        }
        if (!g.name) {
                fprintf(stderr, "airlock: grant create: --name is required\n");
                return EXIT_USAGE;
        }
        if (!grant_name_valid(g.name)) {
                fprintf(stderr, "airlock: grant create: name \"%s\": expected 1 to 64 of A-Z a-z 0-9 . _ -\n",
                        g.name);
                return EXIT_USAGE;
        }
        g.classes = classes;
        g.secrets = secrets;
        g.tools = tools;

        char token[GRANT_TOKEN_LEN + 1];
        int r = grant_token_new(token);
        if (r < 0) {
                fprintf(stderr, "airlock: grant create: random token: %s\n", strerror(-r));
                return EXIT_FAIL;
        }
        grant_token_hash(token, strlen(token), g.token_hash);
        g.created_ms = now_realtime_us() / 1000;

        struct store *s = NULL;
        if (open_store(state_dir, true, &s) < 0)
                return EXIT_FAIL;
        r = store_grant_add(s, &g, &err);
        store_close(s);
        if (r < 0) {
                fprintf(stderr, "airlock: grant create: %s\n", err.msg);
                return EXIT_FAIL;
        }
        printf("%s\n", token);
        explicit_bzero(token, sizeof(token));
        return 0;
}

static int parse_common(int argc, char **argv, const char *cmd, const char **state_dir, bool *json)
{
        enum { O_STATE = 256, O_JSON };
        static const struct option opts[] = {
                {"state-dir", required_argument, NULL, O_STATE},
                {"json", no_argument, NULL, O_JSON},
                {"help", no_argument, NULL, 'h'},
                {NULL, 0, NULL, 0},
        };
        int c;
        optind = 1;
        opterr = 0;
        while ((c = getopt_long(argc, argv, "h", opts, NULL)) != -1) {
                switch (c) {
                case O_STATE:
                        *state_dir = optarg;
                        break;
                case O_JSON:
                        if (!json)
                                goto bad;
                        *json = true;
                        break;
                case 'h':
                        help_print(stdout, grant_usage, "grant");
                        return 0;
                default:
                        goto bad;
                }
        }
        return 1;
bad:
        fprintf(stderr, "airlock: grant %s: unknown or incomplete option \"%s\" (see --help)\n", cmd,
                argv[optind - 1]);
        return -EXIT_USAGE;
}

static int grant_revoke(int argc, char **argv)
{
        const char *state_dir = NULL;
        int r = parse_common(argc, argv, "revoke", &state_dir, NULL);
        if (r <= 0)
                return -r;
        if (optind + 1 != argc) {
                fprintf(stderr, "airlock: grant revoke: expected one NAME\n");
                return EXIT_USAGE;
        }
        const char *name = argv[optind];
        struct store *s = NULL;
        if (open_store(state_dir, false, &s) < 0)
                return EXIT_FAIL;
        r = store_grant_revoke(s, name, now_realtime_us() / 1000);
        store_close(s);
        if (r == -ENOENT) {
                fprintf(stderr, "airlock: grant revoke: no grant in force named \"%s\"\n", name);
                return EXIT_FAIL;
        }
        if (r < 0) {
                fprintf(stderr, "airlock: grant revoke: %s: %s\n", name, strerror(-r));
                return EXIT_FAIL;
        }
        return 0;
}

static void format_time(uint64_t ms, char *buf, size_t size)
{
        time_t t = (time_t)(ms / 1000);
        struct tm tm;
        gmtime_r(&t, &tm);
        strftime(buf, size, "%Y-%m-%dT%H:%M:%SZ", &tm);
}

static int grant_ls(int argc, char **argv)
{
        const char *state_dir = NULL;
        bool json = false;
        int r = parse_common(argc, argv, "ls", &state_dir, &json);
        if (r <= 0)
                return -r;
        if (optind != argc) {
                fprintf(stderr, "airlock: grant ls: unexpected argument \"%s\"\n", argv[optind]);
                return EXIT_USAGE;
        }
        struct store *s = NULL;
        if (open_store(state_dir, false, &s) < 0)
                return EXIT_FAIL;
        struct grant **v = NULL;
        size_t n = 0;
        r = store_grant_list(s, &v, &n);
        store_close(s);
        if (r < 0) {
                fprintf(stderr, "airlock: grant ls: %s\n", strerror(-r));
                return EXIT_FAIL;
        }
        if (!json)
                printf("%-24s %-8s %-32s %-6s %-16s %-20s %s\n", "NAME", "STATE", "ALLOWS", "MAX",
                       "CLASSES", "CREATED", "SECRETS");
        json_t *arr = json ? json_array() : NULL;
        for (size_t i = 0; i < n; i++) {
                struct grant *g = v[i];
                _cleanup_free_ char *classes = grant_classes_string(g);
                _cleanup_free_ char *secrets_csv = grant_secrets_string(g);
                char created[32], allows[96] = "", max[24];
                format_time(g->created_ms, created, sizeof(created));
                snprintf(allows, sizeof(allows), "%s%s%s%s%s%s", g->allow_sandbox ? "sandbox," : "",
                         g->allow_exec ? "exec," : "",
                         g->allow_host_workspace ? "host-workspace," : "", g->allow_git ? "git," : "",
                         g->allow_capabilities ? "capabilities," : "", g->allow_runs ? "runs," : "");
                if (allows[0])
                        allows[strlen(allows) - 1] = '\0';
                snprintf(max, sizeof(max), "%" PRIu64, g->max_sandboxes);
                if (json) {
                        json_t *sec = json_array();
                        for (size_t k = 0; k < g->n_secrets; k++)
                                json_array_append_new(sec, json_string(g->secrets[k]));
                        json_t *tl = json_array();
                        for (size_t k = 0; k < g->n_tools; k++)
                                json_array_append_new(tl, json_string(g->tools[k]));
                        json_array_append_new(
                                arr, json_pack("{s:s, s:b, s:b, s:b, s:b, s:b, s:I, s:s, s:s, s:o}",
                                               "name", g->name, "revoked", g->revoked_ms != 0,
                                               "allowSandbox", g->allow_sandbox, "allowExec",
                                               g->allow_exec, "allowHostWorkspace",
                                               g->allow_host_workspace, "allowGit", g->allow_git,
                                               "maxSandboxes", (json_int_t)g->max_sandboxes,
                                               "classes", classes, "createdAt", created,
                                               "secrets", sec));
                        json_object_set_new(json_array_get(arr, json_array_size(arr) - 1),
                                            "tools", tl);
                        json_object_set_new(json_array_get(arr, json_array_size(arr) - 1),
                                            "allowCapabilities",
                                            json_boolean(g->allow_capabilities));
                        json_object_set_new(json_array_get(arr, json_array_size(arr) - 1),
                                            "allowRuns", json_boolean(g->allow_runs));
                        continue;
                }
                printf("%-24s %-8s %-32s %-6s %-16s %-20s %s\n", g->name,
                       g->revoked_ms ? "revoked" : "active", allows[0] ? allows : "-",
                       g->max_sandboxes ? max : "-", classes[0] ? classes : "any", created,
                       secrets_csv[0] ? secrets_csv : "-");
        }
        store_grants_free(v, n);
        if (json) {
                char *text = json_dumps(arr, JSON_INDENT(2));
                json_decref(arr);
                printf("%s\n", text ? text : "[]");
                free(text);
        }
        return 0;
}

int cmd_grant(int argc, char **argv)
{
        if (argc < 2) {
                help_print(stderr, grant_usage, "grant");
                return EXIT_USAGE;
        }
        const char *sub = argv[1];
        if (STREQ(sub, "--help") || STREQ(sub, "-h") || STREQ(sub, "help")) {
                help_print(stdout, grant_usage, "grant");
                return 0;
        }
        if (STREQ(sub, "create"))
                return grant_create(argc - 1, argv + 1);
        if (STREQ(sub, "revoke"))
                return grant_revoke(argc - 1, argv + 1);
        if (STREQ(sub, "ls") || STREQ(sub, "list"))
                return grant_ls(argc - 1, argv + 1);
        fprintf(stderr, "airlock: grant: unknown command \"%s\" (see 'airlock grant --help')\n", sub);
        return EXIT_USAGE;
}
