/* SPDX-License-Identifier: Apache-2.0 */
#include <fcntl.h>
#include <getopt.h>
#include <limits.h>
#include <poll.h>
#include <signal.h>
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include "agent-out.h"
#include "agent-policy.h"
#include "agent-sandbox.h"
#include "agent/agent.h"
#include "audit.h"
#include "child.h"
#include "commands.h"
#include "control-proto.h"
#include "githelper.h"
#include "help.h"
#include "paths.h"
#include "policy.h"
#include "policyflags.h"
#include "repo.h"
#include "review.h"
#include "util.h"

/* airlock agent: the host-owned agent loop (docs/agent.md). This command
 * starts the sandbox's supervisor (`airlock supervise`), runs the loop of
 * src/lib/agent against its control socket, collects what the agent
 * produced, and, when asked, pushes it from the host. */

#define EXIT_TASK_FAILED 1
#define EXIT_USAGE       2
#define EXIT_BUDGET      3
#define EXIT_INTERNAL    70
#define EXIT_TIMEOUT     124
#define EXIT_SETUP       125

static const char agent_usage[] =
    "Usage: airlock agent --task TEXT | --task-file FILE --model NAME [OPTIONS]\n"
    "\n"
    "Run a task with the model on the host and the sandbox as its hands: the host calls\n"
    "the model through a route (its key never enters the sandbox), the model's tool calls\n"
    "run inside the sandbox, and the result is a diff, patches or a branch (docs/agent.md).\n"
    "\n"
    "Examples:\n"
    "  airlock agent --task 'make the tests pass' -w . --review --model M --secrets s.env\n"
    "  airlock agent --task-file t.md --repo URL --rev SHA --push agent/fix --model M\n"
    "  airlock agent --task T --provider openai --model M --max-turns 20 --secrets s.env\n"
    "\n"
    "Options:\n"
    "  -w, --workspace DIR      the workspace (default: .)\n"
    "      --repo URL --rev REV clone URL at REV on the host and work on the clone\n"
    "      --provider NAME      anthropic (Messages API, default) or openai (Chat Completions)\n"
    "      --max-turns N        model calls at most (default 50); --max-tokens N: tokens\n"
    "      --timeout SECONDS    the whole run's wall time (default 1800)\n"
    "      --review             copy-on-write workspace; the diff waits for 'airlock accept'\n"
    "      --push BRANCH        with --repo: push the agent's commits from the host\n"
    "\n"
    "More options:\n"
    "      --task TEXT          the task\n"
    "      --task-file FILE     the task, read from FILE\n"
    "      --model NAME         the model (required)\n"
    "      --max-tokens N       input + output tokens, as the model reports them, at most\n"
    "      --model-route NAME   the route the model is called through (default: model;\n"
    "                           made for the provider when the policy has none)\n"
    "      --no-stream          ask for whole answers instead of server-sent events\n"
    "      --cmd-timeout SECONDS  one bash call's time at most (default 120)\n"
    "      --output-cap BYTES   a tool result's size given to the model (default 32768)\n"
    "      --retries N          model calls retried after an API error (default 3)\n"
    "      --backoff-ms MS      the first retry's wait, doubled each time (default 500)\n"
    "      --open-pr            with --push: run AIRLOCK_FORGE_COMMAND (docs/git.md)\n"
    "      --transcript FILE    keep the transcript as JSON lines in FILE\n"
    "      --result FILE        write the result JSON to FILE as well as to stdout\n"
    "      --id ID              the run's id (16 hex digits; not with --repo)\n"
    "  -q, --quiet              do not stream the transcript to stderr\n"
    "  -p, --policy FILE        load a JSON policy (docs/policy.md); flags override it\n"
    "      --route NAME=URL     a route (docs/routes.md)\n"
    "      --inject NAME:HEADER=VALUE  add HEADER to requests through route NAME\n"
    "      --secrets FILE       host-side secrets (JSON or KEY=VALUE, mode 0600)\n"
    "      --account ID         the account that ${account} stands for\n"
    "      --audit FILE         the audit log\n"
    "      --allow HOST         allow a destination through the network gate\n"
    "      --allow-private CIDR let the gate reach a private range\n"
    "      --deny HOST          deny a destination\n"
    "      --host NAME=IP       answer NAME with IP without DNS\n"
    "      --tool NAME          allow a host tool (offered to the model as host_tool)\n"
    "      --tools FILE         host tool definitions (docs/tools.md)\n"
    "      --env KEY=VALUE      set a variable in the sandbox's clean environment\n"
    "      --memory SIZE        memory limit, no swap, e.g. 512M\n"
    "      --class NAME         resource class: small, medium, large, xlarge\n"
    "      --state-root DIR     where a review sandbox's changes are kept\n"
    "      --pids N, --cpus N   process limit, cpu quota\n"
    "      --ro SRC[:DST], --rw SRC[:DST]  bind SRC read-only / read-write at DST\n"
    "      --deny-read PATH     hide PATH inside the sandbox\n"
    "      --read system|host   show the system directories (default) or all of /\n"
    "      --uid N              uid inside (default 1000; 0 is a fake root)\n"
    "      --io-read-bps SIZE, --io-write-bps SIZE, --io-read-iops N, --io-write-iops N\n"
    "                           block I/O limits (limits.io)\n"
    "      --home NAME          keep $HOME in volume NAME across runs ('airlock volume')\n"
    "      --volume NAME:/PATH[:ro]  mount volume NAME at PATH\n"
    "      --allow-broad-workspace  allow /, a system directory or a whole home as the workspace\n"
    "      --audit-rotate SIZE[:KEEP]  rotate the audit log (default 64M:8; never: no rotation)\n"
    "  run's --net is not offered (the model is called through the sandbox's network gate;\n"
    "  with no --allow nothing else gets out), nor -P, --port-bind, --net-log, --tier,\n"
    "  --image, --ask, --control, -t: nobody is at a terminal, no port is served, and the\n"
    "  network decisions are in the audit log (docs/cli.md).\n"
    "  -h, --help               show this help\n"
    "\n"
    "Exit status: 0 done; 1 task_failed; 3 budget_exhausted; 124 timeout; 70 internal;\n"
    "125 the sandbox could not be set up; 2 usage.\n";

enum {
        OPT_TASK = 256,
        OPT_TASK_FILE,
        OPT_REPO,
        OPT_REV,
        OPT_PROVIDER,
        OPT_MODEL,
        OPT_MODEL_ROUTE,
        OPT_NO_STREAM,
        OPT_MAX_TURNS,
        OPT_MAX_TOKENS,
        OPT_TIMEOUT,
        OPT_CMD_TIMEOUT,
        OPT_OUTPUT_CAP,
        OPT_RETRIES,
        OPT_BACKOFF_MS,
        OPT_REVIEW,
        OPT_PUSH,
        OPT_OPEN_PR,
        OPT_TRANSCRIPT,
        OPT_RESULT,
        OPT_ROUTE,
        OPT_INJECT,
        OPT_SECRETS,
        OPT_ACCOUNT,
        OPT_AUDIT,
        OPT_STATE_ROOT,
        OPT_ID,
        OPT_AUDIT_ROTATE,
};

static const struct option agent_options[] = {
    {"task", required_argument, NULL, OPT_TASK},
    {"task-file", required_argument, NULL, OPT_TASK_FILE},
    {"workspace", required_argument, NULL, 'w'},
    {"policy", required_argument, NULL, 'p'},
    {"repo", required_argument, NULL, OPT_REPO},
    {"rev", required_argument, NULL, OPT_REV},
    {"provider", required_argument, NULL, OPT_PROVIDER},
    {"model", required_argument, NULL, OPT_MODEL},
    {"model-route", required_argument, NULL, OPT_MODEL_ROUTE},
    {"no-stream", no_argument, NULL, OPT_NO_STREAM},
    {"max-turns", required_argument, NULL, OPT_MAX_TURNS},
    {"max-tokens", required_argument, NULL, OPT_MAX_TOKENS},
    {"timeout", required_argument, NULL, OPT_TIMEOUT},
    {"cmd-timeout", required_argument, NULL, OPT_CMD_TIMEOUT},
    {"output-cap", required_argument, NULL, OPT_OUTPUT_CAP},
    {"retries", required_argument, NULL, OPT_RETRIES},
    {"backoff-ms", required_argument, NULL, OPT_BACKOFF_MS},
    {"review", no_argument, NULL, OPT_REVIEW},
    {"push", required_argument, NULL, OPT_PUSH},
    {"open-pr", no_argument, NULL, OPT_OPEN_PR},
    {"transcript", required_argument, NULL, OPT_TRANSCRIPT},
    {"result", required_argument, NULL, OPT_RESULT},
    {"route", required_argument, NULL, OPT_ROUTE},
    {"inject", required_argument, NULL, OPT_INJECT},
    {"secrets", required_argument, NULL, OPT_SECRETS},
    {"account", required_argument, NULL, OPT_ACCOUNT},
    {"audit", required_argument, NULL, OPT_AUDIT},
    {"state-root", required_argument, NULL, OPT_STATE_ROOT},
    {"id", required_argument, NULL, OPT_ID},
    {"audit-rotate", required_argument, NULL, OPT_AUDIT_ROTATE},
    POLICYFLAGS_OPTIONS,
    {"quiet", no_argument, NULL, 'q'},
    {"help", no_argument, NULL, 'h'},
    {NULL, 0, NULL, 0},
};

struct agent_args {
        const char *task, *task_file, *workspace, *policy_file, *repo, *rev, *model;
        const char *model_route, *push, *transcript, *result, *secrets, *account, *audit;
        const char *state_root;
        const char *audit_rotate; /* --audit-rotate, checked here, applied by the supervisor */
        const char *id;           /* --id: the run's (and its sandbox's) id, chosen by the caller */
        enum agent_provider provider;
        bool stream, review, open_pr, quiet;
        struct agent_budget budget;
        char **routes, **injects;
        size_t n_routes, n_injects;
};

static int parse_uint(const char *opt, const char *s, uint64_t max, uint64_t *ret, char *msg,
                      size_t msglen)
{
        if (safe_atou64(s, ret) < 0 || *ret > max) {
                snprintf(msg, msglen, "agent: --%s \"%s\": expected a number from 0 to %llu", opt,
                         s, (unsigned long long)max);
                return -EINVAL;
        }
        return 0;
}

static int read_task_file(const char *path, char **ret, char *msg, size_t msglen)
{
        _cleanup_close_ int fd = open(path, O_RDONLY | O_CLOEXEC | O_NOCTTY);
        struct stat st;
        if (fd < 0 || fstat(fd, &st) < 0 || !S_ISREG(st.st_mode) || st.st_size > (1 << 20)) {
                snprintf(msg, msglen, "agent: --task-file %s: %s", path,
                         fd < 0 ? strerror(errno) : "not a regular file of at most 1 MiB");
                return -EINVAL;
        }
        char *buf = xcalloc((size_t)st.st_size + 1, 1);
        ssize_t k = read(fd, buf, (size_t)st.st_size);
        if (k < 0) {
                free(buf);
                snprintf(msg, msglen, "agent: --task-file %s: %s", path, strerror(errno));
                return -EIO;
        }
        buf[k] = '\0';
        *ret = buf;
        return 0;
}

/* The supervisor is in this command's process group, so a terminal's
 * Ctrl-C and a job's group kill reach it as well; a signal sent to this
 * process alone is passed on, so that its sandbox never outlives the run. */
static volatile pid_t supervisor_pid;
static struct sandbox_proc *signal_sandbox;

static void on_fatal_signal(int sig)
{
        /* kill, waitpid, unlink and rmdir are async-signal-safe; the paths
         * were made before the handler was set. */
        if (supervisor_pid > 0) {
                kill(supervisor_pid, SIGTERM);
                while (waitpid(supervisor_pid, NULL, 0) < 0 && errno == EINTR)
                        ;
        }
        if (signal_sandbox) {
                unlink(signal_sandbox->policy_path);
                rmdir(signal_sandbox->run_dir);
                rmdir(signal_sandbox->dir);
        }
        _exit(128 + sig);
}

static void policy_freep(struct policy **p)
{
        policy_free(*p);
}

static int exit_for(const char *code)
{
        if (!code)
                return 0;
        if (STREQ(code, "task_failed"))
                return EXIT_TASK_FAILED;
        if (STREQ(code, "budget_exhausted"))
                return EXIT_BUDGET;
        if (STREQ(code, "timeout"))
                return EXIT_TIMEOUT;
        return EXIT_INTERNAL;
}

static void write_result(const char *path, const char *json)
{
        _cleanup_free_ char *tmp = xasprintf("%s.tmp.%d", path, (int)getpid());
        _cleanup_close_ int fd = open(tmp, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0644);
        if (fd < 0 || write_full(fd, json, strlen(json)) < 0 || write_full(fd, "\n", 1) < 0 ||
            rename(tmp, path) < 0) {
                fprintf(stderr, "airlock: agent: writing %s: %s\n", path, strerror(errno));
                unlink(tmp);
        }
}

/* A result for a run that never got to the loop. */
static int setup_failed(const struct agent_args *a, int code, const char *msg)
{
        fprintf(stderr, "airlock: %s\n", msg);
        json_t *o =
            json_pack("{s:b, s:i, s:s, s:s, s:{s:[], s:[]}, s:{}, s:n}", "ok", 0, "exitCode", code,
                      "errorCode", code == EXIT_SETUP ? "setup_failed" : "usage", "message", msg,
                      "bundle", "patches", "commitMessages", "usage", "runId");
        _cleanup_free_ char *s = json_dumps(o, JSON_COMPACT);
        json_decref(o);
        if (s && a->result)
                write_result(a->result, s);
        return code;
}

int cmd_agent(int argc, char **argv)
{
        struct agent_args a = {
            .provider = AGENT_PROVIDER_ANTHROPIC,
            .model_route = "model",
            .stream = true,
            .budget = {.max_turns = 50,
                       .timeout_ms = 1800 * 1000,
                       .cmd_timeout = 120,
                       .output_cap = 32768,
                       .retries = 3,
                       .backoff_ms = 500},
        };
        char msg[AL_ERROR_MAX] = "";
        struct al_error err = {0};
        _cleanup_(policy_freep) struct policy *p = policy_new();
        struct policyflags pf = {0};
        uint64_t v;
        int c, r = 0;
        char cwd[PATH_MAX];
        if (!getcwd(cwd, sizeof(cwd)))
                return setup_failed(&a, EXIT_SETUP, "agent: the current directory is gone");

        for (int i = 1; i < argc; i++)
                if ((STREQ(argv[i], "-p") || STREQ(argv[i], "--policy")) && i + 1 < argc)
                        a.policy_file = argv[i + 1];
                else if (STREQ(argv[i], "--result") && i + 1 < argc)
                        a.result = argv[i + 1];
        if (a.policy_file && policy_load_file(p, a.policy_file, &err) < 0)
                return setup_failed(&a, EXIT_USAGE, err.msg);

        optind = 1;
        opterr = 0;
        while (r >= 0 && (c = getopt_long(argc, argv, "p:w:qh", agent_options, NULL)) != -1) {
                switch (c) {
                case 'p':
                case OPT_RESULT:
                        break;
                case OPT_TASK:
                        a.task = optarg;
                        break;
                case OPT_TASK_FILE:
                        a.task_file = optarg;
                        break;
                case 'w':
                        a.workspace = optarg;
                        break;
                case OPT_REPO:
                        a.repo = optarg;
                        break;
                case OPT_REV:
                        a.rev = optarg;
                        break;
                case OPT_PROVIDER:
                        if (agent_provider_parse(optarg, &a.provider) < 0) {
                                snprintf(msg, sizeof(msg),
                                         "agent: --provider \"%s\": expected anthropic or openai",
                                         optarg);
                                r = -EINVAL;
                        }
                        break;
                case OPT_MODEL:
                        a.model = optarg;
                        break;
                case OPT_MODEL_ROUTE:
                        a.model_route = optarg;
                        break;
                case OPT_NO_STREAM:
                        a.stream = false;
                        break;
                case OPT_MAX_TURNS:
                        r = parse_uint("max-turns", optarg, 100000, &v, msg, sizeof(msg));
                        a.budget.max_turns = (unsigned)v;
                        break;
                case OPT_MAX_TOKENS:
                        r = parse_uint("max-tokens", optarg, UINT64_MAX / 2, &v, msg, sizeof(msg));
                        a.budget.max_tokens = v;
                        break;
                case OPT_TIMEOUT:
                        r = parse_uint("timeout", optarg, 7 * 86400, &v, msg, sizeof(msg));
                        a.budget.timeout_ms = v * 1000;
                        break;
                case OPT_CMD_TIMEOUT:
                        r = parse_uint("cmd-timeout", optarg, 86400, &v, msg, sizeof(msg));
                        if (r >= 0 && v == 0) {
                                snprintf(msg, sizeof(msg), "agent: --cmd-timeout: at least 1");
                                r = -EINVAL;
                        }
                        a.budget.cmd_timeout = (unsigned)v;
                        break;
                case OPT_OUTPUT_CAP:
                        r = parse_uint("output-cap", optarg, 1u << 20, &v, msg, sizeof(msg));
                        if (r >= 0 && v < 256) {
                                snprintf(msg, sizeof(msg), "agent: --output-cap: at least 256");
                                r = -EINVAL;
                        }
                        a.budget.output_cap = (size_t)v;
                        break;
                case OPT_RETRIES:
                        r = parse_uint("retries", optarg, 10, &v, msg, sizeof(msg));
                        a.budget.retries = (unsigned)v;
                        break;
                case OPT_BACKOFF_MS:
                        r = parse_uint("backoff-ms", optarg, 60000, &v, msg, sizeof(msg));
                        a.budget.backoff_ms = (unsigned)v;
                        break;
                case OPT_REVIEW:
                        a.review = true;
                        p->workspace_mode = POLICY_WORKSPACE_OVERLAY;
                        break;
                case OPT_PUSH:
                        a.push = optarg;
                        break;
                case OPT_OPEN_PR:
                        a.open_pr = true;
                        break;
                case OPT_TRANSCRIPT:
                        a.transcript = optarg;
                        break;
                case OPT_ROUTE:
                        a.routes = strv_append(a.routes, &a.n_routes, optarg);
                        break;
                case OPT_INJECT:
                        a.injects = strv_append(a.injects, &a.n_injects, optarg);
                        break;
                case OPT_SECRETS:
                        a.secrets = optarg;
                        break;
                case OPT_ACCOUNT:
                        a.account = optarg;
                        break;
                case OPT_AUDIT:
                        a.audit = optarg;
                        break;
                case OPT_STATE_ROOT:
                        a.state_root = optarg;
                        break;
                case OPT_AUDIT_ROTATE: {
                        struct audit_options ao = {0};
                        a.audit_rotate = optarg;
                        if (audit_parse_rotate(optarg, &ao) < 0) {
                                snprintf(msg, sizeof(msg),
                                         "--audit-rotate \"%s\": expected SIZE[:KEEP], e.g. 64M:8, "
                                         "or never",
                                         optarg);
                                r = -EINVAL;
                        }
                        break;
                }
                case OPT_ID:
                        a.id = optarg;
                        if (strlen(optarg) != 16 || strspn(optarg, "0123456789abcdef") != 16) {
                                snprintf(msg, sizeof(msg),
                                         "agent: --id \"%s\": expected 16 lowercase hex digits",
                                         optarg);
                                r = -EINVAL;
                        }
                        break;
                case 'q':
                        a.quiet = true;
                        break;
                case 'h':
                        help_print(stdout, agent_usage, "agent");
                        strv_free(a.routes);
                        strv_free(a.injects);
                        return 0;
                default:
                        if (policyflags_is(c)) {
                                msg[0] = '\0';
                                r = policyflags_apply(p, &pf, c, optarg, cwd, msg, sizeof(msg),
                                                      &err);
                                break;
                        }
                        snprintf(msg, sizeof(msg),
                                 "agent: unknown option or missing value \"%s\" (see 'airlock "
                                 "agent --help')",
                                 argv[optind - 1]);
                        r = -EINVAL;
                }
        }
        _cleanup_free_ char *task_buf = NULL;
        if (r >= 0 && optind < argc) {
                snprintf(msg, sizeof(msg), "agent: unexpected argument \"%s\"", argv[optind]);
                r = -EINVAL;
        }
        if (r >= 0 && !a.task == !a.task_file) {
                snprintf(msg, sizeof(msg),
                         "agent: give the task with --task TEXT or --task-file FILE");
                r = -EINVAL;
        }
        if (r >= 0 && a.task_file &&
            (r = read_task_file(a.task_file, &task_buf, msg, sizeof(msg))) >= 0)
                a.task = task_buf;
        if (r >= 0 && !a.model) {
                snprintf(msg, sizeof(msg), "agent: give the model with --model NAME");
                r = -EINVAL;
        }
        if (r >= 0 && (a.repo || a.rev) && (!a.repo || !a.rev || a.workspace || a.review)) {
                snprintf(msg, sizeof(msg),
                         "agent: --repo needs --rev (a commit, branch or tag) and cannot be "
                         "combined with -w or --review");
                r = -EINVAL;
        }
        if (r >= 0 && (a.push || a.open_pr) && (!a.repo || (a.open_pr && !a.push))) {
                snprintf(msg, sizeof(msg), "agent: --push needs --repo; --open-pr needs --push");
                r = -EINVAL;
        }
        if (r >= 0 && a.id && a.repo) {
                snprintf(msg, sizeof(msg), "agent: --id cannot be combined with --repo");
                r = -EINVAL;
        }
        if (r >= 0 && a.state_root && (a.state_root[0] != '/' || a.repo)) {
                snprintf(msg, sizeof(msg),
                         "agent: --state-root: an absolute path, and not with --repo");
                r = -EINVAL;
        }
        if (r >= 0)
                r = agent_policy_routes(p, a.routes, a.n_routes, a.injects, a.n_injects,
                                        a.model_route, a.provider, msg, sizeof(msg));
        strv_free(a.routes);
        strv_free(a.injects);
        a.routes = a.injects = NULL;
        if (r < 0)
                return setup_failed(&a, EXIT_USAGE, msg[0] ? msg : err.msg);

        /* From here on the run is real: clone, sandbox, loop. */
        _cleanup_(githelper_clone_done) struct githelper_clone git = {0};
        const char *home = getenv("HOME");
        _cleanup_free_ char *audit_path =
            a.audit ? xstrdup(a.audit) : audit_default_path(geteuid(), home);
        if (a.repo) {
                if (githelper_clone(a.repo, a.rev, a.secrets, audit_path, &git, msg, sizeof(msg)) <
                    0)
                        return setup_failed(&a, EXIT_SETUP, msg);
                a.workspace = git.workspace;
        }
        free(p->workspace);
        p->workspace = a.workspace ? (a.workspace[0] == '/' ? xstrdup(a.workspace)
                                                            : xasprintf("%s/%s", cwd, a.workspace))
                                   : xstrdup(cwd);
        if (a.secrets)
                policy_add_deny_read(p, a.secrets);
        policyflags_finish(p, &pf);
        if (policy_finalize(p, cwd, home ? home : "/", &err) < 0)
                return setup_failed(&a, EXIT_SETUP, err.msg);
        /* The workspace's .airlock/isolation.json, as airlock run reads it:
         * the agent works on a repository it did not write, whose
         * minimumTier holds here too (what widens needs the policy's
         * trustRepoConfig). */
        if (repo_config_apply_workspace(p, p->workspace, home ? home : "/", &err) < 0)
                return setup_failed(&a, EXIT_SETUP, err.msg);

        struct sandbox_proc sb = {0};
        if (a.repo)
                memcpy(sb.id, git.id, sizeof(sb.id));
        else if (a.id)
                memcpy(sb.id, a.id, sizeof(sb.id));
        else if (random_hex(sb.id, 16) < 0)
                return setup_failed(&a, EXIT_SETUP, "agent: picking an id");
        _cleanup_fclose_ FILE *tf = NULL;
        if (a.transcript) {
                int tfd = open(a.transcript, O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC | O_NOFOLLOW,
                               0600);
                tf = tfd >= 0 ? fdopen(tfd, "a") : NULL;
                if (!tf) {
                        snprintf(msg, sizeof(msg), "agent: --transcript %s: %s", a.transcript,
                                 strerror(errno));
                        return setup_failed(&a, EXIT_SETUP, msg);
                }
        }
        uint64_t t0 = now_monotonic_us();
        r = agent_sandbox_start(&sb,
                                &(struct agent_sandbox_opts){.secrets = a.secrets,
                                                             .account = a.account,
                                                             .state_root = a.state_root,
                                                             .audit_rotate = a.audit_rotate},
                                p, audit_path, msg, sizeof(msg));
        if (r < 0) {
                if (sb.pid > 0)
                        child_wait(sb.pid);
                agent_sandbox_remove_dir(&sb);
                return setup_failed(&a, EXIT_SETUP, msg);
        }
        supervisor_pid = sb.pid;
        signal_sandbox = &sb;
        struct sigaction sa = {.sa_handler = on_fatal_signal};
        sigemptyset(&sa.sa_mask);
        sigaction(SIGINT, &sa, NULL);
        sigaction(SIGTERM, &sa, NULL);
        sigaction(SIGHUP, &sa, NULL);
        if (!a.quiet)
                fprintf(stderr, "airlock: agent: sandbox %s, model %s through route \"%s\"\n",
                        sb.id, a.model, a.model_route);

        struct transcript tr = {.f = tf, .quiet = a.quiet};
        _cleanup_free_ char *tool_list = xstrdup("");
        for (size_t i = 0; i < p->n_tools_allow; i++) {
                char *t = xasprintf("%s%s%s", tool_list, i ? ", " : "", p->tools_allow[i]);
                free(tool_list);
                tool_list = t;
        }
        _cleanup_free_ char *system = xasprintf(
            "You are a coding agent working in a sandbox. The repository is at /workspace. Use the "
            "tools to inspect, change and test it; commit with git when the task asks for it. "
            "When the task is done, answer with a short summary and no tool call.%s%s",
            p->n_tools_allow ? " Host tools you may call with host_tool: " : "", tool_list);
        struct agent_config cfg = {
            .control_socket = sb.sock,
            .provider = a.provider,
            .route = a.model_route,
            .model = a.model,
            .system = system,
            .task = a.task,
            .stream = a.stream,
            .reply_tokens = 4096,
            .host_tools = p->n_tools_allow > 0,
            .budget = a.budget,
            .transcript = agent_out_entry,
            .ud = &tr,
        };
        struct agent_outcome o = {0};
        r = agent_run(&cfg, &o, &err);
        if (r < 0) {
                o.error_code = "internal";
                snprintf(o.message, sizeof(o.message), "%s", err.msg);
        }

        /* What the agent produced. In a plain workspace, the sandbox's own
         * git says what changed (its output is data here, never run). */
        json_t *patches = json_array(), *messages = json_array(), *extra = json_object();
        if (!a.repo && !a.review) {
                char *argv_diff[] = {"/bin/sh", "-c",
                                     "git -C /workspace diff HEAD 2>/dev/null || true", NULL};
                struct agent_exec_result er = {0};
                if (agent_exec(sb.sock, argv_diff, NULL, 0, 60, 8u << 20, &er, &err) >= 0 &&
                    er.out_len) {
                        _cleanup_free_ char *d =
                            agent_text_for_model(er.out, er.out_len, er.out_total, 8u << 20);
                        json_array_append_new(patches, json_string(d));
                }
                agent_exec_result_clear(&er);
        }
        supervisor_pid = 0;
        agent_sandbox_stop(&sb);
        agent_sandbox_remove_dir(&sb);

        int status = 0;
        _cleanup_free_ char *out = NULL;
        if (a.repo) {
                char *args[] = {"export", sb.id, NULL};
                if (githelper_capture("airlock-git", args, 16u << 20, true, &out, &status) >= 0 &&
                    WIFEXITED(status) && WEXITSTATUS(status) == 0)
                        agent_out_split_mbox(out, patches, messages);
                if (a.push && !o.error_code) {
                        free(out);
                        out = NULL;
                        char *pargs[8] = {"push", sb.id, "--branch", (char *)a.push, "--json"};
                        size_t n = 5;
                        if (a.open_pr)
                                pargs[n++] = "--open-pr";
                        if (a.secrets) {
                                pargs[n++] = "--secrets";
                                pargs[n++] = (char *)a.secrets;
                        }
                        pargs[n] = NULL;
                        json_t *pj = NULL;
                        if (githelper_capture("airlock-git", pargs, 16u << 20, true, &out,
                                              &status) >= 0)
                                pj = json_loads(out, 0, NULL);
                        json_object_set_new(extra, "push",
                                            pj ? pj : json_pack("{s:s}", "error", "push failed"));
                        if (!WIFEXITED(status) || WEXITSTATUS(status) != 0) {
                                o.error_code = "task_failed";
                                snprintf(o.message, sizeof(o.message),
                                         "the push of branch %s failed", a.push);
                        }
                }
        } else if (a.review) {
                char *args[] = {"diff", "--state-root", NULL, sb.id, NULL};
                _cleanup_free_ char *root =
                    a.state_root ? xstrdup(a.state_root) : review_state_root(geteuid(), home);
                args[2] = root;
                if (githelper_capture("airlock", args, 16u << 20, true, &out, &status) >= 0 &&
                    out && out[0]) {
                        _cleanup_free_ char *d =
                            agent_text_for_model(out, strlen(out), strlen(out), 8u << 20);
                        json_array_append_new(patches, json_string(d));
                }
                json_object_set_new(extra, "review",
                                    json_pack("{s:s, s:s}", "accept", "airlock accept ID",
                                              "discard", "airlock discard ID"));
                if (!a.quiet)
                        fprintf(stderr,
                                "airlock: agent: the changes wait for review:\n"
                                "  review:  airlock diff %s\n  accept:  airlock accept %s\n"
                                "  discard: airlock discard %s\n",
                                sb.id, sb.id, sb.id);
        }

        int code = exit_for(o.error_code);
        json_t *res = json_pack(
            "{s:b, s:i, s:o, s:s, s:{s:o, s:o}, s:{s:i, s:i, s:i, s:I, s:I, s:I}, s:s, s:o}", "ok",
            o.error_code == NULL, "exitCode", code, "errorCode",
            o.error_code ? json_string(o.error_code) : json_null(), "message", o.message, "bundle",
            "patches", patches, "commitMessages", messages, "usage", "turns", o.turns, "toolCalls",
            o.tool_calls, "modelCalls", o.model_calls, "inputTokens", (json_int_t)o.input_tokens,
            "outputTokens", (json_int_t)o.output_tokens, "durationMs",
            (json_int_t)((now_monotonic_us() - t0) / 1000), "runId", sb.id, "summary",
            o.final_text ? json_string(o.final_text) : json_null());
        json_object_update(res, extra);
        json_decref(extra);
        if (a.review)
                json_object_set_new(json_object_get(res, "review"), "sandbox", json_string(sb.id));
        _cleanup_free_ char *s = json_dumps(res, JSON_COMPACT);
        json_decref(res);
        if (s) {
                printf("%s\n", s);
                if (a.result)
                        write_result(a.result, s);
        }
        agent_outcome_clear(&o);
        return code;
}
