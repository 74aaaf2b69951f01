/* SPDX-License-Identifier: Apache-2.0 */
#include <fcntl.h>
#include <getopt.h>
#include <limits.h>
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>

#include "commands.h"
#include "policy.h"
#include "supervisor.h"
#include "util.h"

#define EXIT_SETUP 125

static const char run_usage[] =
        "Usage: airlock run [OPTIONS] -- COMMAND [ARGS...]\n"
        "\n"
        "Run COMMAND in a new sandbox: fresh user, mount, pid, net, ipc, uts and cgroup\n"
        "namespaces, a root built from read-only system directories, the workspace at\n"
        "/workspace, seccomp, Landlock, no capabilities, and resource limits.\n"
        "\n"
        "Options:\n"
        "  -p, --policy FILE        load a JSON policy (docs/policy.md); flags override it\n"
        "  -w, --workspace DIR      the workspace, mounted read-write at /workspace (default: .)\n"
        "      --ro SRC[:DST]       bind SRC read-only at DST (default DST: SRC)\n"
        "      --rw SRC[:DST]       bind SRC read-write at DST\n"
        "      --deny-read PATH     hide PATH (file or directory) inside the sandbox\n"
        "      --read system|host   show the system directories (default) or all of /\n"
        "      --timeout SECONDS    wall-clock limit; the whole tree dies (exit 124)\n"
        "      --memory SIZE        memory limit, no swap, e.g. 512M (exit 137, oom_killed)\n"
        "      --pids N             process limit\n"
        "      --cpus N             cpu quota, e.g. 0.5\n"
        "      --class NAME         resource class: small, medium, large, xlarge\n"
        "      --env KEY=VALUE      set a variable in the sandbox's clean environment\n"
        "      --uid N              uid inside (default 1000; 0 is a fake root)\n"
        "      --net none|gated     network mode\n"
        "      --allow HOST[:PORT]  allow a destination through the network gate\n"
        "      --deny HOST          deny a destination\n"
        "      --allow-private CIDR let the gate reach a private range\n"
        "      --host NAME=IP       answer NAME with IP without DNS\n"
        "      --result FILE        write the result JSON to FILE\n"
        "  -q, --quiet              print nothing of Airlock's own but errors\n"
        "  -h, --help               show this help\n"
        "\n"
        "Exit status: the command's own; 128+N when killed by signal N; 124 on timeout;\n"
        "137 with oom_killed; 125 when the sandbox could not be set up; 126 when the\n"
        "command cannot be executed; 127 when it is not found.\n";

enum {
        OPT_RO = 256,
        OPT_RW,
        OPT_DENY_READ,
        OPT_READ,
        OPT_TIMEOUT,
        OPT_MEMORY,
        OPT_PIDS,
        OPT_CPUS,
        OPT_CLASS,
        OPT_ENV,
        OPT_UID,
        OPT_NET,
        OPT_ALLOW,
        OPT_DENY,
        OPT_ALLOW_PRIVATE,
        OPT_HOST,
        OPT_RESULT,
};

static const struct option run_options[] = {
        {"policy", required_argument, NULL, 'p'},
        {"workspace", required_argument, NULL, 'w'},
        {"ro", required_argument, NULL, OPT_RO},
        {"rw", required_argument, NULL, OPT_RW},
        {"deny-read", required_argument, NULL, OPT_DENY_READ},
        {"read", required_argument, NULL, OPT_READ},
        {"timeout", required_argument, NULL, OPT_TIMEOUT},
        {"memory", required_argument, NULL, OPT_MEMORY},
        {"pids", required_argument, NULL, OPT_PIDS},
        {"cpus", required_argument, NULL, OPT_CPUS},
        {"class", required_argument, NULL, OPT_CLASS},
        {"env", required_argument, NULL, OPT_ENV},
        {"uid", required_argument, NULL, OPT_UID},
        {"net", required_argument, NULL, OPT_NET},
        {"allow", required_argument, NULL, OPT_ALLOW},
        {"deny", required_argument, NULL, OPT_DENY},
        {"allow-private", required_argument, NULL, OPT_ALLOW_PRIVATE},
        {"host", required_argument, NULL, OPT_HOST},
        {"result", required_argument, NULL, OPT_RESULT},
        {"quiet", no_argument, NULL, 'q'},
        {"help", no_argument, NULL, 'h'},
        {NULL, 0, NULL, 0},
};

struct run_args {
        const char *policy_file;
        const char *result_file;
        bool quiet;
};

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

static int fail_setup(const struct run_args *a, const char *msg)
{
        fprintf(stderr, "airlock: %s\n", msg);
        if (a->result_file) {
                struct supervisor_result res = {.exit_code = EXIT_SETUP, .error_code = "setup_failed"};
                snprintf(res.message, sizeof(res.message), "%s", msg);
                _cleanup_free_ char *json = supervisor_result_json(&res);
                if (json && write_result(a->result_file, json) < 0)
                        fprintf(stderr, "airlock: writing %s: %s\n", a->result_file, strerror(errno));
        }
        return EXIT_SETUP;
}

static int parse_mount_arg(struct policy *p, const char *arg, bool readonly, const char *cwd,
                           char *msg, size_t msglen)
{
        _cleanup_free_ char *src = xstrdup(arg);
        char *colon = strchr(src, ':');
        const char *dst = NULL;
        if (colon) {
                *colon = '\0';
                dst = colon + 1;
        }
        if (!*src || (dst && !*dst)) {
                snprintf(msg, msglen, "--%s \"%s\": expected SRC[:DST]", readonly ? "ro" : "rw", arg);
                return -EINVAL;
        }
        _cleanup_free_ char *abs = src[0] == '/' ? xstrdup(src) : xasprintf("%s/%s", cwd, src);
        policy_add_mount(p, abs, dst ? dst : abs, readonly);
        return 0;
}

static void push(char ***v, size_t *n, const char *s)
{
        *v = strv_append(*v, n, s);
}

int cmd_run(int argc, char **argv)
{
        struct run_args a = {0};
        struct al_error err = {0};
        char msg[AL_ERROR_MAX];
        char cwd[PATH_MAX];
        struct policy *p = policy_new();
        int c, r;

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

        const char *workspace = NULL;
        optind = 1;
        opterr = 0;
        while ((c = getopt_long(argc, argv, "+p:w:qh", run_options, NULL)) != -1) {
                r = 0;
                msg[0] = '\0';
                switch (c) {
                case 'p':
                        break;
                case 'w':
                        workspace = optarg;
                        break;
                case OPT_RO:
                case OPT_RW:
                        r = parse_mount_arg(p, optarg, c == OPT_RO, cwd, msg, sizeof(msg));
                        break;
                case OPT_DENY_READ:
                        policy_add_deny_read(p, optarg);
                        break;
                case OPT_READ:
                        if (STREQ(optarg, "system"))
                                p->read = POLICY_READ_SYSTEM;
                        else if (STREQ(optarg, "host"))
                                p->read = POLICY_READ_HOST;
                        else {
                                snprintf(msg, sizeof(msg), "--read \"%s\": expected system or host", optarg);
                                r = -EINVAL;
                        }
                        break;
                case OPT_TIMEOUT:
                        r = policy_set_limit(p, "timeout", optarg, &err);
                        break;
                case OPT_MEMORY:
                        r = policy_set_limit(p, "memory", optarg, &err);
                        break;
                case OPT_PIDS:
                        r = policy_set_limit(p, "pids", optarg, &err);
                        break;
                case OPT_CPUS:
                        r = policy_set_limit(p, "cpus", optarg, &err);
                        break;
                case OPT_CLASS:
                        r = policy_set_class(p, optarg, &err);
                        break;
                case OPT_ENV: {
                        _cleanup_free_ char *kv = xstrdup(optarg);
                        char *eq = strchr(kv, '=');
                        if (!eq || eq == kv) {
                                snprintf(msg, sizeof(msg), "--env \"%s\": expected KEY=VALUE", optarg);
                                r = -EINVAL;
                                break;
                        }
                        *eq = '\0';
                        policy_add_env(p, kv, eq + 1);
                        break;
                }
                case OPT_UID: {
                        int uid;
                        if (safe_atoi(optarg, &uid) < 0 || uid < 0 || uid > 65534) {
                                snprintf(msg, sizeof(msg), "--uid \"%s\": expected a number from 0 to 65534", optarg);
                                r = -EINVAL;
                                break;
                        }
                        p->uid = p->gid = (uint32_t)uid;
                        break;
                }
                case OPT_NET:
                        if (STREQ(optarg, "none"))
                                p->net_mode = POLICY_NET_NONE;
                        else if (STREQ(optarg, "gated"))
                                p->net_mode = POLICY_NET_GATED;
                        else {
                                snprintf(msg, sizeof(msg), "--net \"%s\": expected none or gated", optarg);
                                r = -EINVAL;
                                break;
                        }
                        p->net_mode_set = true;
                        break;
                case OPT_ALLOW:
                        push(&p->net_allow, &p->n_net_allow, optarg);
                        break;
                case OPT_DENY:
                        push(&p->net_deny, &p->n_net_deny, optarg);
                        break;
                case OPT_ALLOW_PRIVATE:
                        push(&p->net_allow_private, &p->n_net_allow_private, optarg);
                        break;
                case OPT_HOST: {
                        _cleanup_free_ char *kv = xstrdup(optarg);
                        char *eq = strchr(kv, '=');
                        if (!eq || eq == kv || !eq[1]) {
                                snprintf(msg, sizeof(msg), "--host \"%s\": expected NAME=IP", optarg);
                                r = -EINVAL;
                                break;
                        }
                        *eq = '\0';
                        p->net_hosts = xrealloc(p->net_hosts, p->n_net_hosts + 1, sizeof(*p->net_hosts));
                        p->net_hosts[p->n_net_hosts].key = xstrdup(kv);
                        p->net_hosts[p->n_net_hosts].value = xstrdup(eq + 1);
                        p->n_net_hosts++;
                        break;
                }
                case OPT_RESULT:
                        a.result_file = optarg;
                        break;
                case 'q':
                        a.quiet = true;
                        break;
                case 'h':
                        fputs(run_usage, stdout);
                        policy_free(p);
                        return 0;
                default:
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
        if (optind >= argc) {
                policy_free(p);
                return fail_setup(&a, "run: no command given (usage: airlock run [OPTIONS] -- COMMAND [ARGS...])");
        }

        if (workspace) {
                free(p->workspace);
                p->workspace = xstrdup(workspace);
        } else if (!p->workspace)
                p->workspace = xstrdup(".");

        const char *home = getenv("HOME");
        r = policy_finalize(p, cwd, home ? home : "/", &err);
        if (r < 0) {
                policy_free(p);
                return fail_setup(&a, err.msg);
        }

        struct supervisor_config cfg = {
                .policy = p,
                .argv = argv + optind,
                .caller_home = home,
                .term = getenv("TERM"),
                .stdin_fd = 0,
                .stdout_fd = 1,
                .stderr_fd = 2,
        };
        struct supervisor_result res;
        r = supervisor_run(&cfg, &res, &err);
        if (r < 0) {
                policy_free(p);
                return fail_setup(&a, err.msg);
        }

        if (res.error_code && (!a.quiet || res.exit_code == EXIT_SETUP || res.exit_code == 126 ||
                               res.exit_code == 127))
                fprintf(stderr, "airlock: %s%s%s\n", res.error_code, res.message[0] ? ": " : "",
                        res.message);

        if (a.result_file) {
                _cleanup_free_ char *json = supervisor_result_json(&res);
                if (!json || write_result(a.result_file, json) < 0)
                        fprintf(stderr, "airlock: writing %s: %s\n", a.result_file, strerror(errno));
        }
        policy_free(p);
        return res.exit_code;
}
