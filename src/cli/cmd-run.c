/* SPDX-License-Identifier: Apache-2.0 */
#include <fcntl.h>
#include <inttypes.h>
#include <getopt.h>
#include <limits.h>
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>

#include "help.h"
#include "cgroup.h"
#include "commands.h"
#include "gitguard.h"
#include "mounts.h"
#include "audit.h"
#include "env.h"
#include "githelper.h"
#include "policy.h"
#include "policyflags.h"
#include "repo.h"
#include "ports.h"
#include "review.h"
#include "secrets.h"
#include "orphans.h"
#include "supervisor.h"
#include "term.h"
#include "trace.h"
#include "util.h"

#define EXIT_SETUP 125
/* As root, a workspace another user could swap (mounts_workspace_trusted). */
#define EXIT_UNSAFE_PATH 123

static const char run_usage[] =
        "Usage: airlock run [OPTIONS] -- COMMAND [ARGS...]\n"
        "\n"
        "Run COMMAND in a new sandbox: its own namespaces, read-only system directories,\n"
        "the workspace at /workspace, seccomp, Landlock, no capabilities, resource limits.\n"
        "\n"
        "Examples:\n"
        "  airlock run -w ~/src/project -- ./agent.sh\n"
        "  airlock run --review -w . --memory 2G --timeout 600 -- ./agent.sh\n"
        "  airlock run -w . --allow api.example.com -- python3 agent.py\n"
        "\n"
        "Options:\n"
        "  -p, --policy FILE        load a JSON policy (docs/policy.md); flags override it\n"
        "  -w, --workspace DIR      the workspace, mounted read-write at /workspace (default: .)\n"
        "      --review             mount the workspace copy-on-write; changes wait for\n"
        "                           'airlock accept ID' (or 'airlock discard ID')\n"
        "      --timeout SECONDS    wall-clock limit; the whole tree dies (exit 124)\n"
        "      --memory SIZE        memory limit, no swap, e.g. 512M (exit 137, oom_killed)\n"
        "      --allow HOST[:PORT]  allow a destination through the network gate\n"
        "      --route NAME=URL     a route: http://127.0.0.1:8080/NAME/... goes to URL\n"
        "  -q, --quiet              print nothing of Airlock's own but errors\n"
        "  -t, --tty                give the command a terminal of its own (the default when\n"
        "                           stdin and stdout are terminals); -T, --no-tty: pipes\n"

        "\n"
        "More options:\n"
        "      --ask                ask on this terminal before a host or tool the policy\n"
        "                           does not list is reached: [o]nce, [a]lways, [d]eny,\n"
        "                           [n]ever (network.onUnlisted and tools.onUnlisted \"ask\")\n"
        "      --allow-broad-workspace  allow /, a system directory or a whole home as the\n"
        "                           workspace (refused otherwise; the deny list still applies)\n"
        "      --state-root DIR     keep a review sandbox's changes under DIR/sandboxes/ID\n"
        "                           (default: /var/lib/airlock, or ~/.local/state/airlock);\n"
        "                           give the same to diff, accept, discard and gc\n"
        "      --repo URL           clone URL on the host and use the clone as the workspace;\n"
        "                           then 'airlock export ID' or 'airlock push ID' (docs/git.md)\n"
        "      --rev REV            the branch, tag or commit to check out (default: the\n"
        "                           remote's default branch)\n"
        "      --ro SRC[:DST]       bind SRC read-only at DST (default DST: SRC)\n"
        "      --rw SRC[:DST]       bind SRC read-write at DST\n"
        "      --home NAME          keep $HOME in volume NAME across runs ('airlock volume')\n"
        "      --volume NAME:/PATH[:ro]  mount volume NAME at PATH (read-write by one sandbox\n"
        "                           at a time; :ro by many)\n"
        "      --deny-read PATH     hide PATH (file or directory) inside the sandbox\n"
        "      --read system|host   show the system directories (default) or all of /\n"
        "      --pids N             process limit\n"
        "      --cpus N             cpu quota, e.g. 0.5\n"
        "      --io-read-bps SIZE, --io-write-bps SIZE\n"
        "                           block I/O bytes per second, e.g. 5M, on the disks behind\n"
        "                           the workspace and mounts (limits.io)\n"
        "      --io-read-iops N, --io-write-iops N\n"
        "                           block I/O operations per second (limits.io)\n"
        "      --class NAME         resource class: small, medium, large, xlarge\n"
        "      --tier NAME          isolation tier: namespace (default), container,\n"
        "                           gvisor, microvm (docs/tiers.md; 'airlock doctor')\n"
        "      --image NAME         the container tier's image ('airlock image ls')\n"
        "      --trust-repo-config  let the workspace's .airlock/isolation.json add network\n"
        "                           rules, read-only mounts and env (policy: trustRepoConfig)\n"
        "      --env KEY=VALUE      set a variable in the sandbox's clean environment\n"
        "      --uid N              uid inside (default 1000; 0 is a fake root)\n"
        "      --users N            users 0 to N-1 exist inside, each its own host id (for\n"
        "                           exec --uid); needs /etc/subuid when not root\n"
        "      --net none|gated     network mode\n"
        "      --deny HOST          deny a destination\n"
        "      --allow-private CIDR let the gate reach a private range\n"
        "      --host NAME=IP       answer NAME with IP without DNS\n"
        "  -P, --port PORT[:HOSTPORT]  serve the sandbox's 127.0.0.1:PORT on the host's\n"
        "                           127.0.0.1:HOSTPORT (default: the same; 0: any free\n"
        "                           port), network mode none included (repeatable)\n"
        "      --port-bind ADDR     the host address -P listens on (default 127.0.0.1)\n"
        "      --control PATH       a unix socket (0600) where a host program changes the\n"
        "                           run's capabilities while it runs (airlock caps --socket)\n"
        "      --net-log FILE       append every network decision to FILE as JSON lines\n"
        "      --tool NAME          allow a host tool through the tool gateway (tools.allow;\n"
        "                           inside: airlock-tool call NAME, docs/tools.md)\n"
        "      --tools FILE         host tool definitions, {\"define\": {...}} (docs/tools.md)\n"
        "      --inject NAME:HEADER=VALUE  add HEADER to requests through route NAME\n"
        "                           (VALUE may use ${secret:KEY}, ${sandbox.id}, ${account})\n"
        "      --secrets FILE       host-side secrets (JSON or KEY=VALUE, mode 0600)\n"
        "      --account ID         the account that ${account} stands for\n"
        "      --audit FILE         the audit log (default: /var/lib/airlock/audit/audit.jsonl\n"
        "                           for root, ~/.local/state/airlock/audit/audit.jsonl otherwise)\n"
        "      --audit-rotate SIZE[:KEEP]\n"
        "                           rotate the audit log at SIZE keeping KEEP older files\n"
        "                           (default 64M:8; \"never\": no rotation)\n"
        "      --result FILE        write the result JSON to FILE\n"
        "  -h, --help               show this help\n"
        "\n"
        "Exit status: the command's own; 128+N when killed by signal N; 124 on timeout;\n"
        "137 with oom_killed; 125 when the sandbox could not be set up; 126 when the\n"
        "command cannot be executed; 127 when it is not found.\n";

enum {
        OPT_TIMEOUT = 256,
        OPT_RESULT,
        OPT_NET_LOG,
        OPT_ROUTE,
        OPT_INJECT,
        OPT_SECRETS,
        OPT_ACCOUNT,
        OPT_AUDIT,
        OPT_AUDIT_ROTATE,
        OPT_REVIEW,
        OPT_REPO,
        OPT_REV,
        OPT_STATE_ROOT,
        OPT_PORT_BIND,
        OPT_CONTROL,
        OPT_TIER,
        OPT_IMAGE,
        OPT_TRUST_REPO,
        OPT_ASK,
};

static const struct option run_options[] = {
        {"policy", required_argument, NULL, 'p'},
        {"workspace", required_argument, NULL, 'w'},
        {"timeout", required_argument, NULL, OPT_TIMEOUT},
        {"result", required_argument, NULL, OPT_RESULT},
        {"net-log", required_argument, NULL, OPT_NET_LOG},
        {"route", required_argument, NULL, OPT_ROUTE},
        {"inject", required_argument, NULL, OPT_INJECT},
        {"secrets", required_argument, NULL, OPT_SECRETS},
        {"account", required_argument, NULL, OPT_ACCOUNT},
        {"audit", required_argument, NULL, OPT_AUDIT},
        {"audit-rotate", required_argument, NULL, OPT_AUDIT_ROTATE},
        {"review", no_argument, NULL, OPT_REVIEW},
        {"repo", required_argument, NULL, OPT_REPO},
        {"rev", required_argument, NULL, OPT_REV},
        {"state-root", required_argument, NULL, OPT_STATE_ROOT},
        {"port", required_argument, NULL, 'P'},
        {"port-bind", required_argument, NULL, OPT_PORT_BIND},
        {"control", required_argument, NULL, OPT_CONTROL},
        {"tier", required_argument, NULL, OPT_TIER},
        {"image", required_argument, NULL, OPT_IMAGE},
        {"trust-repo-config", no_argument, NULL, OPT_TRUST_REPO},
        {"quiet", no_argument, NULL, 'q'},
        {"tty", no_argument, NULL, 't'},
        {"ask", no_argument, NULL, OPT_ASK},
        {"no-tty", no_argument, NULL, 'T'},
        {"help", no_argument, NULL, 'h'},
        POLICYFLAGS_OPTIONS,
        POLICYFLAGS_NET_OPTION,
        {NULL, 0, NULL, 0},
};

struct run_args {
        const char *policy_file;
        const char *result_file;
        const char *net_log;
        const char *secrets_file;
        const char *account;
        const char *audit;
        struct audit_options audit_rotate;
        const char *repo;
        const char *rev;
        const char *state_root;
        struct policyflags pf;
        bool quiet;
        struct sv_port_req ports[SV_PORTS_MAX];
        size_t n_ports;
        const char *port_bind;
        const char *control; /* --control PATH: the caps op's socket */
        int tty; /* -1: by default (stdin and stdout terminals), 0: -T, 1: -t */
        bool ask; /* --ask: prompt on the user's terminal */
};

/* -P: where a forward listens, said once (not under -q). */
static void print_port(void *ud, unsigned port, unsigned host_port, const char *bind)
{
        const struct run_args *a = ud;
        if (!a->quiet)
                fprintf(stderr, "airlock: sandbox port %u is served at %s%s%s:%u\n", port,
                        strchr(bind, ':') ? "[" : "", bind, strchr(bind, ':') ? "]" : "",
                        host_port);
}

/* -P PORT[:HOSTPORT] */
static int add_port(struct run_args *a, const char *arg, char *msg, size_t msglen)
{
        const char *why = NULL;
        if (a->n_ports >= SV_PORTS_MAX) {
                snprintf(msg, msglen, "run: -P \"%s\": at most %d ports", arg, SV_PORTS_MAX);
                return -EINVAL;
        }
        if (sv_ports_parse_spec(arg, &a->ports[a->n_ports], &why) < 0) {
                snprintf(msg, msglen, "run: -P \"%s\": %s", arg, why);
                return -EINVAL;
        }
        for (size_t i = 0; i < a->n_ports; i++)
                if (a->ports[i].port == a->ports[a->n_ports].port) {
                        snprintf(msg, msglen, "run: -P \"%s\": port %u is given twice", arg,
                                 a->ports[i].port);
                        return -EINVAL;
                }
        a->n_ports++;
        return 0;
}

static struct policy_route *find_route(struct policy *p, const char *name)
{
        for (size_t i = 0; i < p->n_routes; i++)
                if (STREQ(p->routes[i].name, name))
                        return &p->routes[i];
        return NULL;
}

/* --route NAME=URL */
static int add_route(struct policy *p, const char *arg, char *msg, size_t msglen)
{
        const char *eq = strchr(arg, '=');
        if (!eq || eq == arg || !eq[1]) {
                snprintf(msg, msglen, "--route \"%s\": expected NAME=URL", arg);
                return -EINVAL;
        }
        _cleanup_free_ char *name = strndup(arg, (size_t)(eq - arg));
        struct policy_route *r = find_route(p, name);
        if (!r) {
                p->routes = xrealloc(p->routes, p->n_routes + 1, sizeof(*p->routes));
                r = &p->routes[p->n_routes++];
                memset(r, 0, sizeof(*r));
                r->name = xstrdup(name);
        }
        free(r->upstream);
        r->upstream = xstrdup(eq + 1);
        return 0;
}

/* --inject NAME:HEADER=VALUE */
static int add_inject(struct policy *p, const char *arg, char *msg, size_t msglen)
{
        const char *colon = strchr(arg, ':');
        const char *eq = colon ? strchr(colon, '=') : NULL;
        if (!colon || colon == arg || !eq || eq == colon + 1) {
                snprintf(msg, msglen, "--inject \"%s\": expected ROUTE:HEADER=VALUE", arg);
                return -EINVAL;
        }
        const char *value = eq + 1;
        size_t vlen = strlen(value);
        if (vlen == 0 || value[vlen - 1] == ' ') {
                snprintf(
                    msg, msglen,
                    "--inject \"%s\": the value is empty or ends in a space; a ${secret:KEY} in "
                    "double quotes is expanded to nothing by the shell: put the value in single "
                    "quotes, e.g. --inject '%.*s${secret:KEY}'",
                    arg, (int)(eq + 1 - arg), arg);
                return -EINVAL;
        }
        _cleanup_free_ char *name = strndup(arg, (size_t)(colon - arg));
        struct policy_route *r = find_route(p, name);
        if (!r) {
                snprintf(msg, msglen,
                         "--inject \"%s\": no route \"%s\" (give --route %s=URL, or a route of "
                         "that name in the policy)",
                         arg, name, name);
                return -EINVAL;
        }
        r->inject = xrealloc(r->inject, r->n_inject + 1, sizeof(*r->inject));
        r->inject[r->n_inject].key = strndup(colon + 1, (size_t)(eq - colon - 1));
        r->inject[r->n_inject].value = xstrdup(eq + 1);
        r->n_inject++;
        return 0;
}

/* Write the result file whole or not at all. */
static int write_result(const char *path, const char *json)
{
        _cleanup_free_ char *tmp = xasprintf("%s.tmp.%d", path, (int)getpid());
        _cleanup_close_ int fd = open(tmp, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0644);
        if (fd < 0)
                return -errno;
        int r = write_full(fd, json, strlen(json));
        if (r >= 0)
                r = write_full(fd, "\n", 1);
        if (r >= 0 && rename(tmp, path) < 0)
                r = -errno;
        if (r < 0)
                unlink(tmp);
        return r;
}

static int fail_with(const struct run_args *a, int code, const char *error_code, const char *msg)
{
        fprintf(stderr, "airlock: %s\n", msg);
        if (a->result_file) {
                struct supervisor_result res = {.exit_code = code, .error_code = error_code};
                snprintf(res.message, sizeof(res.message), "%s", msg);
                _cleanup_free_ char *json = supervisor_result_json(&res);
                if (json && write_result(a->result_file, json) < 0)
                        fprintf(stderr, "airlock: writing %s: %s\n", a->result_file, strerror(errno));
        }
        return code;
}

static int fail_setup(const struct run_args *a, const char *msg)
{
        return fail_with(a, EXIT_SETUP, "setup_failed", msg);
}

/* The workspace's .airlock/isolation.json (repo.h): its minimumTier always,
 * the rest as the policy lets it; what it applied goes to the audit log
 * with the sandbox's creation, and the user hears what was not applied. */
static int apply_repo_config(struct policy *p, const char *cwd, const char *home, bool quiet,
                             struct al_error *err)
{
        struct repo_config *rc = NULL;
        int r = repo_config_load(p->workspace, &rc, err);
        if (r < 0 || !rc)
                return r;
        json_t *applied = NULL;
        r = repo_config_apply(rc, p, cwd, home, &applied, err);
        if (r >= 0) {
                free(p->repo_applied);
                p->repo_applied = json_dumps(applied, JSON_COMPACT | JSON_SORT_KEYS);
                json_t *nt = json_object_get(applied, "notTrusted");
                if (nt && !quiet) {
                        char *s = json_dumps(nt, JSON_COMPACT | JSON_SORT_KEYS);
                        fprintf(stderr,
                                "airlock: .airlock/isolation.json asks for %s; not applied: the "
                                "policy does not trust repository config (--trust-repo-config "
                                "or \"trustRepoConfig\": true)\n",
                                s ? s : "more");
                        free(s);
                }
                if (rc->has_recommended && p->tier < rc->recommended && !quiet)
                        fprintf(stderr,
                                "airlock: .airlock/isolation.json recommends tier %s (this run: "
                                "%s)\n",
                                policy_tier_name(rc->recommended), policy_tier_name(p->tier));
        }
        json_decref(applied);
        repo_config_free(rc);
        return r;
}

static void warn_line(const char *line, void *userdata)
{
        fprintf(stderr, "%s\n", line);
}

int cmd_run(int argc, char **argv)
{
        struct run_args a = {.tty = -1};
        struct al_error err = {0};
        char msg[AL_ERROR_MAX];
        char cwd[PATH_MAX];
        struct policy *p = policy_new();
        _cleanup_strv_ char **injects = NULL;
        size_t n_injects = 0;
        int c, r;

        /* Before anything forks: children inherit the decision and the
         * origin (trace.h). */
        al_trace_on();
        al_trace_mark("cli.start");
        if (!getcwd(cwd, sizeof(cwd))) {
                snprintf(msg, sizeof(msg), "current directory: %s", strerror(errno));
                policy_free(p);
                return fail_setup(&a, msg);
        }

        /* The policy file goes first so that flags override it wherever they
         * stand on the command line. */
        for (int i = 1; i < argc && strcmp(argv[i], "--") != 0; i++) {
                if ((STREQ(argv[i], "-p") || STREQ(argv[i], "--policy")) && i + 1 < argc)
                        a.policy_file = argv[i + 1];
                else if (strncmp(argv[i], "--policy=", 9) == 0)
                        a.policy_file = argv[i] + 9;
                else if (STREQ(argv[i], "--result") && i + 1 < argc)
                        a.result_file = argv[i + 1];
        }
        if (a.policy_file && policy_load_file(p, a.policy_file, &err) < 0) {
                policy_free(p);
                return fail_setup(&a, err.msg);
        }
        al_trace_mark("cli.policy_file");

        const char *workspace = NULL;
        optind = 1;
        opterr = 0;
        while ((c = getopt_long(argc, argv, "+p:w:P:qhtT", run_options, NULL)) != -1) {
                r = 0;
                msg[0] = '\0';
                switch (c) {
                case 'p':
                        break;
                case 'w':
                        workspace = optarg;
                        break;
                case OPT_TIMEOUT:
                        r = policy_set_limit(p, "timeout", optarg, &err);
                        break;
                case OPT_TIER:
                        r = policy_set_tier(p, optarg, &err);
                        break;
                case OPT_IMAGE:
                        free(p->image);
                        p->image = xstrdup(optarg);
                        break;
                case OPT_TRUST_REPO:
                        p->trust_repo_config = true;
                        break;
                case OPT_RESULT:
                        a.result_file = optarg;
                        break;
                case OPT_NET_LOG:
                        a.net_log = optarg;
                        break;
                case OPT_ROUTE:
                        r = add_route(p, optarg, msg, sizeof(msg));
                        break;
                case OPT_INJECT: /* after every --route: applied below */
                        injects = strv_append(injects, &n_injects, optarg);
                        break;
                case OPT_SECRETS:
                        a.secrets_file = optarg;
                        break;
                case OPT_ACCOUNT:
                        a.account = optarg;
                        break;
                case OPT_AUDIT:
                        a.audit = optarg;
                        break;
                case OPT_AUDIT_ROTATE:
                        if (audit_parse_rotate(optarg, &a.audit_rotate) < 0) {
                                snprintf(msg, sizeof(msg),
                                         "--audit-rotate \"%s\": expected SIZE[:KEEP], e.g. 64M:8, "
                                         "or never",
                                         optarg);
                                r = -EINVAL;
                        }
                        break;
                case OPT_REVIEW:
                        p->workspace_mode = POLICY_WORKSPACE_OVERLAY;
                        break;
                case OPT_REPO:
                        a.repo = optarg;
                        break;
                case OPT_STATE_ROOT:
                        a.state_root = optarg;
                        break;
                case OPT_REV:
                        a.rev = optarg;
                        break;
                case 'P':
                        r = add_port(&a, optarg, msg, sizeof(msg));
                        break;
                case OPT_PORT_BIND:
                        if (sv_ports_check_bind(optarg) < 0) {
                                snprintf(msg, sizeof(msg),
                                         "run: --port-bind \"%s\": expected an IP address, "
                                         "e.g. 127.0.0.1 or ::1",
                                         optarg);
                                r = -EINVAL;
                        }
                        a.port_bind = optarg;
                        break;
                case OPT_CONTROL:
                        a.control = optarg;
                        break;
                case 'q':
                        a.quiet = true;
                        break;
                case 't':
                case 'T':
                        a.tty = c == 't';
                        break;
                case OPT_ASK:
                        a.ask = true;
                        break;
                case 'h':
                        help_print(stdout, run_usage, "run");
                        policy_free(p);
                        return 0;
                default:
                        if (policyflags_is(c)) {
                                r = policyflags_apply(p, &a.pf, c, optarg, cwd, msg, sizeof(msg), &err);
                                break;
                        }
                        if (optopt)
                                snprintf(msg, sizeof(msg), "run: option -%c needs a value or is unknown (see 'airlock run --help')", optopt);
                        else
                                snprintf(msg, sizeof(msg), "run: unknown option \"%s\" (see 'airlock run --help')", argv[optind - 1]);
                        r = -EINVAL;
                }
                if (r < 0) {
                        policy_free(p);
                        return fail_setup(&a, msg[0] ? msg : err.msg);
                }
        }
        for (size_t i = 0; i < n_injects; i++)
                if (add_inject(p, injects[i], msg, sizeof(msg)) < 0) {
                        policy_free(p);
                        return fail_setup(&a, msg);
                }
        if (optind >= argc) {
                policy_free(p);
                return fail_setup(&a, "run: no command given (usage: airlock run [OPTIONS] -- COMMAND [ARGS...])");
        }
        /* cgroup v1: the grace period the sandbox's move into its cgroup
         * waits for starts now, beside the setup (cgroup.h). */
        cgroup_warm();
        al_trace_mark("cgroup.warm");

        _cleanup_(githelper_clone_done) struct githelper_clone git = {0};
        if (a.state_root && (a.state_root[0] != '/' || a.repo)) {
                policy_free(p);
                return fail_setup(&a, a.repo ? "run: --state-root cannot be combined with --repo "
                                               "(the clone is kept under the default state root)"
                                             : "run: --state-root: expected an absolute path");
        }
        if (a.repo || a.rev) {
                if (!a.repo || workspace || p->workspace_mode == POLICY_WORKSPACE_OVERLAY) {
                        policy_free(p);
                        return fail_setup(&a, a.repo ? "run: --repo cannot be combined with -w "
                                                       "or --review"
                                                     : "run: --rev needs --repo");
                }
                if (githelper_clone(a.repo, a.rev, a.secrets_file, a.audit, &git, msg,
                                    sizeof(msg)) < 0) {
                        policy_free(p);
                        return fail_setup(&a, msg);
                }
                workspace = git.workspace;
        }

        if (workspace) {
                free(p->workspace);
                p->workspace = xstrdup(workspace);
        } else if (!p->workspace)
                p->workspace = xstrdup(".");

        /* The secrets file never shows inside, whatever the read mode. */
        if (a.secrets_file)
                policy_add_deny_read(p, a.secrets_file);

        /* After every flag: --uid decides where $HOME is. */
        policyflags_finish(p, &a.pf);

        const char *home = getenv("HOME");
        r = policy_finalize(p, cwd, home ? home : "/", &err);
        if (r < 0) {
                policy_free(p);
                return fail_setup(&a, err.msg);
        }
        al_trace_mark("cli.policy");
        /* As root, a workspace with a directory on its path another user
         * could change is refused before anything reads it (its
         * .airlock/isolation.json first): they could swap it for another
         * tree between here and the mount. */
        r = mounts_workspace_trusted(p, &err);
        if (r < 0) {
                policy_free(p);
                return fail_with(&a, EXIT_UNSAFE_PATH, "workspace_unsafe", err.msg);
        }
        r = apply_repo_config(p, cwd, home ? home : "/", a.quiet, &err);
        if (r < 0) {
                policy_free(p);
                return fail_setup(&a, err.msg);
        }
        al_trace_mark("cli.repo_config");

        /* --ask: the asks are put to the user on their terminal, as sudo
         * asks; with no terminal nobody could answer. */
        _cleanup_close_ int ask_fd = -1;
        if (a.ask) {
                if (!isatty(0) && !isatty(2)) {
                        policy_free(p);
                        return fail_setup(&a, "--ask needs a terminal to ask on (stdin or "
                                              "stderr); without one nobody could answer: leave "
                                              "--ask out and list the hosts with --allow");
                }
                ask_fd = open("/dev/tty", O_RDWR | O_CLOEXEC | O_NOCTTY);
                if (ask_fd < 0) {
                        policy_free(p);
                        return fail_setup(&a, "--ask: opening /dev/tty, the terminal to ask on");
                }
                p->net_ask = true;
                p->tools_ask = true;
                /* The gate is what asks: on, unless the policy or a flag
                 * said "none" (then nothing is asked about). */
                if (!p->net_mode_set)
                        p->net_mode = POLICY_NET_GATED;
        }

        struct secrets *secrets = NULL;
        if (a.secrets_file)
                r = secrets_load_file(a.secrets_file, &secrets, &err);
        else {
                secrets = secrets_new();
                r = 0;
        }
        if (r < 0) {
                policy_free(p);
                return fail_setup(&a, err.msg);
        }
        _cleanup_free_ char *audit_path = a.audit ? xstrdup(a.audit) : audit_default_path(geteuid(), home);

        _cleanup_free_ char *state_root =
                a.state_root ? xstrdup(a.state_root) : review_state_root(geteuid(), home);
        struct supervisor_config cfg = {
                .policy = p,
                .state_root = state_root,
                .audit_path = audit_path,
                .audit_rotate = &a.audit_rotate,
                .sandbox_id = a.repo ? git.id : NULL,
                .net_log_path = a.net_log,
                .secrets = secrets,
                .account = a.account,
                .argv = argv + optind,
                .caller_home = home,
                .term = getenv("TERM"),
                .stdin_fd = 0,
                .stdout_fd = 1,
                .stderr_fd = 2,
                .ports = a.ports,
                .n_ports = a.n_ports,
                .on_port = print_port,
                .on_port_ud = &a,
                .tty = a.tty == 1 || (a.tty < 0 && isatty(0) && isatty(1)),
                .tty_fd = isatty(0) ? 0 : isatty(1) ? 1 : -1,
                .control_path = a.control,
                .ask_tty_fd = ask_fd,
        };
        for (size_t i = 0; a.port_bind && i < a.n_ports; i++)
                snprintf(a.ports[i].bind, sizeof(a.ports[i].bind), "%s", a.port_bind);
        /* Without a terminal of its own the command reads the user's
         * through a pipe, never the terminal itself (term.h says why). */
        pid_t relay = -1;
        int relay_fd = -1;
        cfg.ask_stdin_fd = -1;
        if (ask_fd >= 0 && !cfg.tty && isatty(0)) {
                /* The prompt is the terminal's one reader and feeds the
                 * command's stdin itself (askprompt.h). */
                int sp[2];
                if (pipe2(sp, O_CLOEXEC) < 0) {
                        secrets_free(secrets);
                        policy_free(p);
                        return fail_setup(&a, "--ask: making the command's stdin pipe");
                }
                relay_fd = sp[0];
                cfg.stdin_fd = sp[0];
                cfg.ask_stdin_fd = sp[1];
        } else if (!cfg.tty && isatty(0)) {
                int rr = term_stdin_relay(0, &relay_fd, &relay);
                if (rr < 0) {
                        secrets_free(secrets);
                        policy_free(p);
                        return fail_setup(&a, "relaying the terminal to the command's stdin");
                }
                cfg.stdin_fd = relay_fd;
        }
        struct supervisor_result res = {0};
        al_trace_mark("cli.ready");
        /* A workspace the plan refuses as broad is refused before gitguard
         * reads its files (seconds over /). */
        if (mounts_workspace_quick_check(p, home, &err) < 0) {
                if (relay_fd >= 0)
                        close(relay_fd);
                term_stdin_relay_end(relay);
                secrets_free(secrets);
                policy_free(p);
                return fail_setup(&a, err.msg);
        }
        /* The deny list under every home, resolved on a thread while the
         * git snapshot, the run record and the audit log are made; the
         * plan takes it (mounts.h). */
        mounts_deny_ahead(p, home);
        struct gitguard *gg = gitguard_begin(p);
        /* The user's terminal passes keys through untouched while the
         * command's own terminal is attached, and gets its mode back on
         * every way out of the run: the supervisor returns from each
         * (timeouts, kills, signals, audit failures). */
        struct term_saved saved = {.fd = -1};
        if (cfg.tty && isatty(0) && term_raw(0, &saved) == 0)
                term_restore_on_fatal_signals(&saved);
        al_trace_mark("cli.gitguard");
        r = orphans_run(&cfg, &res, &err);
        mounts_deny_ahead_end();
        cgroup_warm_done();
        if (relay_fd >= 0)
                close(relay_fd);
        term_stdin_relay_end(relay);
        term_restore(&saved);
        if (res.sandbox_made)
                gitguard_finish_logged(gg, audit_path, &a.audit_rotate, res.sandbox, warn_line,
                                       NULL);
        else
                gitguard_discard(gg);
        al_trace_mark("cli.gitguard_done");
        if (r < 0) {
                secrets_free(secrets);
                policy_free(p);
                return fail_setup(&a, err.msg);
        }

        /* The one line naming why Airlock ended the run (errorCode) is an
         * error, printed under -q too. */
        if (res.error_code)
                fprintf(stderr, "airlock: %s%s%s\n", res.error_code, res.message[0] ? ": " : "",
                        res.message);

        if (res.review_dir[0]) {
                _cleanup_free_ char *root_arg =
                        a.state_root ? xasprintf("--state-root %s ", a.state_root) : xstrdup("");
                fprintf(stderr,
                        "airlock: the workspace is unchanged; the sandbox proposed %" PRIu64
                        " added, %" PRIu64 " modified and %" PRIu64 " deleted file(s).\n"
                        "  review:  airlock diff %s%s\n"
                        "  accept:  airlock accept %s%s [PATH...]\n"
                        "  discard: airlock discard %s%s\n",
                        res.review_added, res.review_modified, res.review_deleted, root_arg,
                        res.sandbox, root_arg, res.sandbox, root_arg, res.sandbox);
        }
        if (a.repo)
                githelper_report(git.id, a.quiet);

        if (a.result_file) {
                _cleanup_free_ char *json = supervisor_result_json(&res);
                if (!json || write_result(a.result_file, json) < 0)
                        fprintf(stderr, "airlock: writing %s: %s\n", a.result_file, strerror(errno));
        }
        secrets_free(secrets);
        policy_free(p);
        al_trace_mark("cli.exit");
        return res.exit_code;
}
