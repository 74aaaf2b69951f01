/* SPDX-License-Identifier: Apache-2.0 */
/* `airlock export` and `airlock push`: the commits the agent of a sandbox
 * made on top of its cloned base (airlock run --repo), written as an mbox
 * or pushed from the host to a new branch. They share one sandbox lookup
 * and option parser (struct git_cmd, git_fail). */
#include <fcntl.h>
#include <signal.h>
#include <getopt.h>
#include <jansson.h>
#include <limits.h>
#include <stdarg.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include "help.h"
#include "audit.h"
#include "cmd-git.h"
#include "cmd-git-internal.h"
#include "child.h"
#include "commands.h"
#include "jsonout.h"
#include "fs.h"
#include "gitops.h"
#include "review.h"
#include "secrets.h"
#include "util.h"

extern char **environ;
static const char export_usage[] =
    "Usage: airlock export [OPTIONS] ID\n"
    "\n"
    "Write the commits the agent of sandbox ID made on top of the cloned base\n"
    "(airlock run --repo) as patches in one mbox, oldest first, as\n"
    "format-patch does; 'git am' applies them. ID may be a unique prefix of at\n"
    "least 4 characters.\n"
    "\n"
    "Examples:\n"
    "  airlock export 3f2a > agent.mbox\n"
    "  airlock export -o agent.mbox 3f2a\n"
    "  airlock export 3f2a | git am\n"
    "\n"
    "Options:\n"
    "  -o, --output FILE      write to FILE (whole, by rename) instead of stdout\n"
    "      --audit FILE       the audit log (default: the one the run used)\n";

static const char push_usage[] =
    "Usage: airlock push [OPTIONS] ID --branch NAME\n"
    "\n"
    "Push the commits the agent of sandbox ID made on top of the cloned base\n"
    "(airlock run --repo) from the host to a new branch NAME of the repository\n"
    "it was cloned from, and nothing else. The workspace's HEAD must descend\n"
    "from the base. A branch that exists on the remote is refused unless\n"
    "--force is given.\n"
    "\n"
    "Examples:\n"
    "  airlock push 3f2a --branch agent/fix\n"
    "  airlock push 3f2a -b agent/fix --force\n"
    "  airlock push --secrets ~/.config/airlock/git.env 3f2a -b agent/fix\n"
    "\n"
    "Options:\n"
    "  -b, --branch NAME      the branch to create (required)\n"
    "      --force            replace the branch if it exists\n"
    "      --secrets FILE     host-side secrets: GIT_TOKEN (HTTP password) and\n"
    "                         GIT_USERNAME; without a token the git credential\n"
    "                         helper is asked\n"
    "\n"
    "More options:\n"
    "      --open-pr          then run the command in AIRLOCK_FORGE_COMMAND with\n"
    "                         /bin/sh -c, with AIRLOCK_BRANCH, AIRLOCK_REPO,\n"
    "                         AIRLOCK_SANDBOX, AIRLOCK_BASE and AIRLOCK_HEAD set\n"
    "      --no-helper        never ask the git credential helper\n"
    "      --audit FILE       the audit log (default: the one the run used)\n"
    "      --json             print one JSON line on stdout: {\"sandbox\", \"branch\",\n"
    "                         \"url\", \"base\", \"head\", \"commits\", \"replaced\", \"pr\"},\n"
    "                         or on failure {\"error\", \"message\"} (docs/git.md);\n"
    "                         the forge command's output goes to stderr\n";

static const char common_help[] =
    "      --state-root DIR   where sandboxes are kept (default: /var/lib/airlock\n"
    "                         as root, else ~/.local/state/airlock)\n"
    "  -h, --help             show this help\n"
    "\n"
    "Exit status: 0 on success, 1 when refused or failed, 2 on usage errors or an\n"
    "unknown ID.\n";

/* ---- airlock export / push ---- */

struct git_cmd {
        const char *cmd;
        char *root;
        char *dir;
        const char *id;
        struct gitops_state st;
        const char *audit;
        bool json; /* push --json: the outcome as one JSON line on stdout */
};

static void git_cmd_done(struct git_cmd *c)
{
        free(c->root);
        free(c->dir);
        gitops_state_clear(&c->st);
}

/* Report a failure: with --json {"error": code, "message"} on stdout, else
 * "airlock: CMD: message" on stderr. Returns status. */
static int git_fail(const struct git_cmd *c, const char *code, int status, const char *fmt, ...)
    __attribute__((format(printf, 4, 5)));

static int git_fail(const struct git_cmd *c, const char *code, int status, const char *fmt, ...)
{
        char msg[2048];
        va_list ap;
        va_start(ap, fmt);
        vsnprintf(msg, sizeof(msg), fmt, ap);
        va_end(ap);
        if (c->json)
                json_line(json_pack("{s:s, s:o}", "error", code, "message", json_text(msg)));
        else
                git_say("airlock: %s: %s", c->cmd, msg);
        return status;
}

/* A usage error found after the options: with --json, the error line. */
static int git_usage(const struct git_cmd *c, const char *msg)
{
        if (c->json)
                return git_fail(c, "failed", EXIT_USAGE, "%s", msg);
        return git_usage_error(c->cmd, "%s", msg);
}

/* Resolve ID to its state and git.json. Returns 0 or an exit code. */
static int git_cmd_load(struct git_cmd *c, const char *id)
{
        struct al_error err = {0};
        if (!c->root) {
                c->root = review_state_root(geteuid(), getenv("HOME"));
                if (!c->root)
                        return git_usage(c, "HOME is not set; give --state-root");
        }
        if (review_find(c->root, id, &c->dir, &err) < 0)
                return git_fail(c, "not_found", EXIT_USAGE, "%s", err.msg);
        const char *slash = strrchr(c->dir, '/');
        c->id = slash ? slash + 1 : c->dir;
        int r = gitops_state_read(c->dir, &c->st, &err);
        if (r == -ENOENT)
                return git_fail(c, "not_found", EXIT_USAGE,
                                "sandbox %s was not started with --repo", c->id);
        if (r < 0)
                return git_fail(c, "failed", EXIT_BAD, "%s", err.msg);
        return 0;
}

static char *audit_path_for(const struct git_cmd *c)
{
        if (c->audit)
                return xstrdup(c->audit);
        if (c->st.audit)
                return xstrdup(c->st.audit);
        return audit_default_path(geteuid(), getenv("HOME"));
}

enum {
        OPT_STATE_ROOT = 256,
        OPT_AUDIT,
        OPT_FORCE,
        OPT_OPEN_PR,
        OPT_SECRETS,
        OPT_JSON,
        OPT_NO_HELPER,
};

static int bad_option(const char *cmd, int c, char **argv)
{
        if (c == ':')
                return git_usage_error(cmd, "option \"%s\" needs an argument", argv[optind - 1]);
        if (optopt)
                return git_usage_error(cmd, "unknown option \"-%c\"", optopt);
        return git_usage_error(cmd, "unknown option \"%s\"", argv[optind - 1]);
}

/* The options export and push share: --audit, --state-root, --help; anything
 * else is a bad option. Returns the exit status when the command is done,
 * else -1. */
static int git_cmd_opt(struct git_cmd *c, int opt, const char *usage, char **argv)
{
        switch (opt) {
        case OPT_AUDIT:
                c->audit = optarg;
                return -1;
        case OPT_STATE_ROOT:
                free(c->root);
                c->root = xstrdup(optarg);
                return -1;
        case 'h': {
                _cleanup_free_ char *t = xasprintf("%s%s", usage, common_help);
                help_print(stdout, t, usage == export_usage ? "export" : "push");
        }
                return 0;
        default:
                return bad_option(c->cmd, opt, argv);
        }
}

/* Write to a temporary name beside path, renamed into place by commit. */
struct out_file {
        char *path;
        char *tmp;
        FILE *f;
};

static int out_open(struct out_file *o, const char *path)
{
        o->path = xstrdup(path);
        o->tmp = xasprintf("%s.tmp.%d", path, (int)getpid());
        int fd = open(o->tmp, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC | O_NOFOLLOW, 0644);
        if (fd < 0)
                return -errno;
        o->f = fdopen(fd, "w");
        if (!o->f) {
                int e = errno;
                close(fd);
                unlink(o->tmp);
                return -e;
        }
        return 0;
}

static int out_close(struct out_file *o, bool keep)
{
        int r = 0;
        if (o->f) {
                if (fflush(o->f) != 0 || fsync(fileno(o->f)) < 0)
                        r = -errno;
                if (fclose(o->f) != 0 && r >= 0)
                        r = -errno;
                o->f = NULL;
                if (keep && r >= 0 && rename(o->tmp, o->path) < 0)
                        r = -errno;
                if (!keep || r < 0)
                        unlink(o->tmp);
        }
        free(o->path);
        free(o->tmp);
        return r;
}

int cmd_export(int argc, char **argv)
{
        static const struct option options[] = {
            {"output", required_argument, NULL, 'o'},
            {"audit", required_argument, NULL, OPT_AUDIT},
            {"state-root", required_argument, NULL, OPT_STATE_ROOT},
            {"help", no_argument, NULL, 'h'},
            {},
        };
        _cleanup_(git_cmd_done) struct git_cmd c = {.cmd = "export"};
        const char *output = NULL;
        int opt;

        optind = 0;
        while ((opt = getopt_long(argc, argv, ":o:h", options, NULL)) != -1) {
                switch (opt) {
                case 'o':
                        output = optarg;
                        break;
                default: {
                        int done = git_cmd_opt(&c, opt, export_usage, argv);
                        if (done >= 0)
                                return done;
                        break;
                }
                }
        }
        if (argc - optind != 1)
                return git_usage_error("export", "expected exactly one sandbox ID");
        int r = git_cmd_load(&c, argv[optind]);
        if (r)
                return r;
        git_deadline_arm("export", GIT_DEADLINE_TEXT);

        struct al_error err = {0};
        size_t n = 0;
        char head[GITOPS_OID_HEX + 1] = "";
        struct out_file of = {0};
        FILE *out = stdout;
        r = gitops_count(c.st.workspace, c.st.base, &n, head, &err);
        if (r >= 0 && output) {
                r = out_open(&of, output);
                if (r < 0)
                        al_error_set(&err, r, "%s", output);
                else
                        git_deadline_unlink(of.tmp);
                out = of.f;
        }
        _cleanup_fclose_ FILE *tty_buf = NULL;
        if (r >= 0 && !output && isatty(STDOUT_FILENO) == 1) {
                tty_buf = tmpfile();
                if (!tty_buf)
                        r = al_error_set(&err, errno, "a temporary file for the patches");
                out = tty_buf;
        }
        if (r >= 0)
                r = gitops_export(c.st.workspace, c.st.base, out, &n, &err);
        if (r >= 0 && tty_buf) {
                rewind(tty_buf);
                if (git_copy_escaped(tty_buf, stdout) < 0)
                        r = al_error_set(&err, EIO, "writing the patches");
        }
        if (output && of.path) {
                int cr = out_close(&of, r >= 0);
                if (cr < 0 && r >= 0)
                        r = al_error_set(&err, cr, "writing %s", output);
        } else if (fflush(stdout) != 0 && r >= 0)
                r = al_error_set(&err, errno, "writing the patches");

        json_t *fields = json_pack("{s:s, s:s, s:I, s:s}", "url", c.st.url, "base", c.st.base,
                                   "commits", (json_int_t)n, "output", output ? output : "-");
        if (head[0])
                json_object_set_new(fields, "head", json_string(head));
        git_set_error(fields, r, &err);
        _cleanup_free_ char *audit_path = audit_path_for(&c);
        struct al_error aerr = {0};
        int ar = git_audit_event(audit_path, NULL, c.id, "git.export", fields, &aerr);
        json_decref(fields);

        if (r < 0) {
                git_say("airlock: export: %s", err.msg[0] ? err.msg : strerror(-r));
                return EXIT_BAD;
        }
        if (ar < 0) {
                git_say("airlock: export: audit: %s", aerr.msg);
                return EXIT_BAD;
        }
        if (n == 0)
                fprintf(stderr, "airlock: export: sandbox %s made no new commits\n", c.id);
        else if (output)
                git_say("export: %zu patch(es) written to %s", n, output);
        return 0;
}

/* Run the forge command with the push's facts in its environment. With
 * --json its stdout goes to stderr: stdout holds the one JSON line. */
static int open_pr(const char *command, const struct git_cmd *c, const char *branch,
                   const char *head)
{
        _cleanup_strv_ char **env = NULL;
        size_t n = 0;
        static const char *const ours[] = {"AIRLOCK_BRANCH=", "AIRLOCK_REPO=", "AIRLOCK_SANDBOX=",
                                           "AIRLOCK_BASE=", "AIRLOCK_HEAD="};
        for (char **e = environ; e && *e; e++) {
                bool keep = true;
                for (size_t i = 0; i < ARRAY_SIZE(ours); i++)
                        if (strncmp(*e, ours[i], strlen(ours[i])) == 0)
                                keep = false;
                if (keep)
                        env = strv_append(env, &n, *e);
        }
        const char *vals[] = {branch, c->st.url, c->id, c->st.base, head};
        for (size_t i = 0; i < ARRAY_SIZE(ours); i++) {
                _cleanup_free_ char *kv = xasprintf("%s%s", ours[i], vals[i]);
                env = strv_append(env, &n, kv);
        }
        fflush(NULL);
        char *argv[] = {(char *)"sh", (char *)"-c", (char *)command, NULL};
        struct child_spawn cs = {
            .path = "/bin/sh",
            .argv = argv,
            .envp = env,
            .fds = {CHILD_FD_INHERIT, c->json ? STDERR_FILENO : CHILD_FD_INHERIT, CHILD_FD_INHERIT},
            .n_fds = 3};
        pid_t pid;
        int r = child_spawn(&cs, &pid, NULL);
        if (r < 0)
                return r;
        int status = child_wait(pid);
        if (status < 0)
                return status;
        if (WIFEXITED(status))
                return WEXITSTATUS(status);
        return 128 + WTERMSIG(status);
}

/* The push --json error code of gitops_count's and gitops_push's errors. */
static const char *push_error_code(int r)
{
        switch (r) {
        case -EINVAL:
                return "bad_branch";
        case -ENODATA:
                return "nothing_to_push";
        case -EPERM:
                return "not_descendant";
        case -EEXIST:
                return "branch_exists";
        case -EACCES:
                return "auth_failed";
        case -EREMOTEIO:
                return "remote_refused";
        case -ETIMEDOUT:
                return "timeout";
        default:
                return "failed";
        }
}

int cmd_push(int argc, char **argv)
{
        static const struct option options[] = {
            {"branch", required_argument, NULL, 'b'},
            {"force", no_argument, NULL, OPT_FORCE},
            {"open-pr", no_argument, NULL, OPT_OPEN_PR},
            {"secrets", required_argument, NULL, OPT_SECRETS},
            {"audit", required_argument, NULL, OPT_AUDIT},
            {"state-root", required_argument, NULL, OPT_STATE_ROOT},
            {"json", no_argument, NULL, OPT_JSON},
            {"no-helper", no_argument, NULL, OPT_NO_HELPER},
            {"help", no_argument, NULL, 'h'},
            {},
        };
        _cleanup_(git_cmd_done) struct git_cmd c = {.cmd = "push"};
        const char *branch = NULL, *secrets_file = NULL;
        bool force = false, pr = false, no_helper = false;
        int opt;

        optind = 0;
        while ((opt = getopt_long(argc, argv, ":b:h", options, NULL)) != -1) {
                switch (opt) {
                case 'b':
                        branch = optarg;
                        break;
                case OPT_FORCE:
                        force = true;
                        break;
                case OPT_OPEN_PR:
                        pr = true;
                        break;
                case OPT_SECRETS:
                        secrets_file = optarg;
                        break;
                case OPT_JSON:
                        c.json = true;
                        break;
                case OPT_NO_HELPER:
                        no_helper = true;
                        break;
                default: {
                        int done = git_cmd_opt(&c, opt, push_usage, argv);
                        if (done >= 0)
                                return done;
                        break;
                }
                }
        }
        if (argc - optind != 1)
                return git_usage(&c, "expected exactly one sandbox ID");
        if (!branch)
                return git_usage(&c, "no --branch given");
        const char *forge = getenv("AIRLOCK_FORGE_COMMAND");
        if (pr && (!forge || !*forge))
                return git_usage(&c, "--open-pr needs AIRLOCK_FORGE_COMMAND set to the "
                                     "command that opens it");
        int r = git_cmd_load(&c, argv[optind]);
        if (r)
                return r;
        git_deadline_arm("push", c.json ? GIT_DEADLINE_JSON_CODE : GIT_DEADLINE_TEXT);

        struct al_error err = {0};
        struct secrets *s = NULL;
        if (git_load_secrets(secrets_file, &s, &err) < 0)
                return git_fail(&c, "failed", EXIT_USAGE, "%s", err.msg);
        struct gitops_creds creds = git_creds_from(s, c.st.user);
        creds.helper = !no_helper;
        struct gitops_push_result res = {0};
        size_t n = 0;
        char head[GITOPS_OID_HEX + 1] = "";
        r = gitops_count(c.st.workspace, c.st.base, &n, head, &err);
        if (r >= 0)
                r = gitops_push(c.st.workspace, c.st.url, c.st.base, branch, force, &creds, &res,
                                &err);

        json_t *fields =
            json_pack("{s:s, s:s, s:s, s:I, s:b}", "url", c.st.url, "branch", branch, "base",
                      c.st.base, "commits", (json_int_t)(r >= 0 ? res.commits : n), "force", force);
        if (head[0])
                json_object_set_new(fields, "head", json_string(r >= 0 ? res.head : head));
        if (r >= 0)
                json_object_set_new(fields, "replaced", json_boolean(res.replaced));
        git_set_error(fields, r, &err);
        _cleanup_free_ char *audit_path = audit_path_for(&c);
        struct al_error aerr = {0};
        int ar = git_audit_event(audit_path, creds.token, c.id, "git.push", fields, &aerr);
        json_decref(fields);
        secrets_free(s);

        if (r < 0) {
                const char *m = err.msg[0] ? err.msg : strerror(-r);
                int status = r == -EINVAL ? EXIT_USAGE : EXIT_BAD;
                if (r == -EEXIST && !c.json)
                        return git_fail(&c, "branch_exists", status,
                                        "%s; give --force to replace it", m);
                return git_fail(&c, push_error_code(r), status, "%s", m);
        }
        if (ar < 0)
                return git_fail(&c, "failed", EXIT_BAD,
                                "the branch was pushed, but the audit log failed: %s", aerr.msg);
        if (!c.json)
                printf("push: %zu commit(s) to branch %s at %s (%.12s)%s\n", res.commits, branch,
                       c.st.url, res.head, res.replaced ? ", replacing it" : "");

        int code = 0;
        if (pr) {
                alarm(0);
                code = open_pr(forge, &c, branch, res.head);
                json_t *pf = json_pack("{s:s, s:s, s:i}", "url", c.st.url, "branch", branch,
                                       "exitCode", code < 0 ? -1 : code);
                git_audit_event(audit_path, NULL, c.id, "git.pr", pf, &aerr);
                json_decref(pf);
                if (code < 0)
                        fprintf(stderr, "airlock: push: running the forge command: %s\n",
                                strerror(-code));
                else if (code > 0)
                        fprintf(stderr,
                                "airlock: push: the forge command (AIRLOCK_FORGE_COMMAND) "
                                "failed with status %d\n",
                                code);
        }
        /* The push happened even when the forge command failed: the line
         * says so, with that command's status, and the exit status is 1. */
        if (c.json)
                json_line(json_pack(
                    "{s:s, s:o, s:o, s:s, s:s, s:I, s:b, s:o}", "sandbox", c.id, "branch",
                    json_text(branch), "url", json_text(c.st.url), "base", c.st.base, "head",
                    res.head, "commits", (json_int_t)res.commits, "replaced", res.replaced, "pr",
                    pr ? json_pack("{s:i}", "exitCode", code < 0 ? -1 : code) : json_null()));
        return code != 0 ? EXIT_BAD : 0;
}
