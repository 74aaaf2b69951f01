/* SPDX-License-Identifier: Apache-2.0 */
/* The host side of git for a sandbox: the clone for `airlock run --repo`
 * (run_git_*), `airlock export` and `airlock push`. About 840 lines, over
 * the 800 the tree keeps to, and kept whole on purpose: some 80 of them are
 * the two commands' help texts, the three share the secrets, credentials,
 * audit records and messages (load_secrets, creds_from, audit_event,
 * set_error, say), and export and push one sandbox lookup and option parser
 * (struct git_cmd, git_fail); a split would publish all of it in a header. */
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
#include "child.h"
#include "commands.h"
#include "jsonout.h"
#include "fs.h"
#include "gitops.h"
#include "review.h"
#include "secrets.h"
#include "util.h"

#define EXIT_BAD   1
#define EXIT_USAGE 2

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

static int usage_error(const char *cmd, const char *fmt, ...) __attribute__((format(printf, 2, 3)));

static int usage_error(const char *cmd, const char *fmt, ...)
{
        va_list ap;

        fprintf(stderr, "airlock: %s: ", cmd);
        va_start(ap, fmt);
        vfprintf(stderr, fmt, ap);
        va_end(ap);
        fprintf(stderr, " (see 'airlock %s --help')\n", cmd);
        return EXIT_USAGE;
}

static int load_secrets(const char *file, struct secrets **ret, struct al_error *err)
{
        if (file)
                return secrets_load_file(file, ret, err);
        *ret = secrets_new();
        return 0;
}

static struct gitops_creds creds_from(const struct secrets *s, const char *url_user)
{
        const char *user = secrets_get(s, "GIT_USERNAME");
        return (struct gitops_creds){
            .token = secrets_get(s, "GIT_TOKEN"),
            .username = user ? user : url_user,
            .helper = true,
            .interactive = isatty(STDIN_FILENO) == 1,
        };
}

/* Append one event to the audit log at path (none when path is NULL). The
 * fields never hold a credential by construction; a token is still redacted
 * should an error message ever quote it. */
static int audit_event(const char *path, const char *token, const char *id, const char *kind,
                       json_t *fields, struct al_error *err)
{
        if (!path)
                return 0;
        struct redactor *red = redactor_new();
        if (token && *token)
                redactor_add(red, token, strlen(token));
        struct audit_options opt = {.redact = redactor_audit_hook, .redact_userdata = red};
        struct audit *a = NULL;
        int r = audit_open(path, &opt, &a, err);
        if (r >= 0)
                r = audit_append(a, id, kind, fields, err);
        audit_close(a);
        redactor_free(red);
        return r;
}

static void set_error(json_t *fields, int r, const struct al_error *err)
{
        json_object_set_new(fields, "ok", json_boolean(r >= 0));
        if (r < 0)
                json_object_set_new(fields, "error",
                                    json_string(err->msg[0] ? err->msg : strerror(-r)));
}

/* ---- deadlines and terminal output ---- */

/* Every host-side git command runs under a deadline: gitops stops between
 * files, objects and transfer steps once it has passed, with a clear
 * error; a call blocked past it (a network read that never returns) is
 * ended by SIGALRM a little later, which says so and exits. */
#define HARD_GRACE_S 15

static char alarm_msg[512];
static volatile sig_atomic_t alarm_fd_for_json;
static size_t alarm_len;
static char alarm_unlink[PATH_MAX];

static void on_alarm(int sig)
{
        if (alarm_unlink[0])
                unlink(alarm_unlink);
        (void)!write(alarm_fd_for_json ? STDOUT_FILENO : STDERR_FILENO, alarm_msg, alarm_len);
        _exit(EXIT_BAD);
}

unsigned git_timeout_seconds(void)
{
        const char *v = secure_getenv("AIRLOCK_GIT_TIMEOUT");
        uint64_t t;
        if (v && *v && safe_atou64(v, &t) >= 0 && t > 0 && t <= 86400)
                return (unsigned)t;
        return GITOPS_TIMEOUT_DEFAULT;
}

void git_deadline_arm(const char *cmd, enum git_deadline_out out)
{
        unsigned t = git_timeout_seconds();
        char what[256];
        snprintf(what, sizeof(what),
                 "the host-side git operation took longer than %u s and was stopped "
                 "(AIRLOCK_GIT_TIMEOUT)",
                 t);
        alarm_fd_for_json = out != GIT_DEADLINE_TEXT;
        if (out == GIT_DEADLINE_JSON_CODE)
                snprintf(alarm_msg, sizeof(alarm_msg),
                         "{\"error\":\"timeout\",\"message\":\"%s\"}\n", what);
        else if (out == GIT_DEADLINE_JSON)
                snprintf(alarm_msg, sizeof(alarm_msg), "{\"error\":\"%s: %s\"}\n", cmd, what);
        else
                snprintf(alarm_msg, sizeof(alarm_msg), "airlock: %s: %s\n", cmd, what);
        alarm_len = strlen(alarm_msg);
        gitops_set_deadline(t);
        struct sigaction sa = {.sa_handler = on_alarm};
        sigemptyset(&sa.sa_mask);
        sigaction(SIGALRM, &sa, NULL);
        alarm(t + HARD_GRACE_S);
}

/* Print one line on stderr with the agent's bytes escaped. */
static void say(const char *fmt, ...) __attribute__((format(printf, 1, 2)));

static void say(const char *fmt, ...)
{
        char msg[4096];
        va_list ap;
        va_start(ap, fmt);
        vsnprintf(msg, sizeof(msg), fmt, ap);
        va_end(ap);
        _cleanup_free_ char *e = gitops_escape(msg, strlen(msg), false);
        fprintf(stderr, "%s\n", e ? e : "(unprintable)");
}

/* The mbox holds the agent's bytes (subjects, file names, messages). On a
 * terminal each line is shown escaped, so that an escape sequence cannot
 * drive the reader's terminal; into a file or a pipe it goes byte-exact,
 * as git am needs it. */
static int copy_escaped(FILE *in, FILE *out)
{
        _cleanup_free_ char *line = NULL;
        size_t cap = 0;
        ssize_t n;
        while ((n = getline(&line, &cap, in)) > 0) {
                _cleanup_free_ char *e = gitops_escape(line, (size_t)n, true);
                if (!e || fputs(e, out) == EOF)
                        return -EIO;
        }
        return ferror(in) ? -EIO : 0;
}

/* ---- airlock run --repo ---- */

static bool sandbox_id_valid(const char *id)
{
        if (strlen(id) != 16)
                return false;
        for (const char *p = id; *p; p++)
                if (!strchr("0123456789abcdef", *p))
                        return false;
        return true;
}

int run_git_clone(struct run_git *g, const struct run_git_args *a, char *msg, size_t msglen)
{
        struct al_error err = {0};
        _cleanup_free_ char *root =
            a->state_root ? xstrdup(a->state_root) : review_state_root(geteuid(), a->home);
        if (!root) {
                snprintf(msg, msglen,
                         "run: --repo: HOME is not an absolute path; the clone "
                         "has nowhere to go");
                return -EINVAL;
        }
        _cleanup_free_ char *clean = NULL, *user = NULL;
        int r = gitops_url_clean(a->repo, &clean, &user, &err);
        if (r < 0) {
                snprintf(msg, msglen, "run: --repo: %s", err.msg);
                return r;
        }
        if (a->id) {
                if (!sandbox_id_valid(a->id)) {
                        snprintf(msg, msglen, "run: sandbox id \"%s\": expected 16 of 0-9 a-f",
                                 a->id);
                        return -EINVAL;
                }
                memcpy(g->id, a->id, sizeof(g->id));
        } else {
                r = random_hex(g->id, 16);
                if (r < 0) {
                        snprintf(msg, msglen, "run: choosing a sandbox id: %s", strerror(-r));
                        return r;
                }
        }
        _cleanup_free_ char *sandboxes = xasprintf("%s/sandboxes", root);
        r = mkdir_p(sandboxes, 0700, 0700);
        if (r < 0) {
                snprintf(msg, msglen, "run: creating %s: %s", sandboxes, strerror(-r));
                return r;
        }
        g->state_dir = xasprintf("%s/%s", sandboxes, g->id);
        /* A given id that is taken is refused here, before anything of that
         * sandbox could be touched, let alone removed on failure. */
        if (mkdir(g->state_dir, 0700) < 0) {
                r = -errno;
                if (r == -EEXIST)
                        snprintf(msg, msglen, "run: sandbox %s exists", g->id);
                else
                        snprintf(msg, msglen, "run: creating %s: %s", g->state_dir, strerror(-r));
                free(g->state_dir);
                g->state_dir = NULL;
                return r;
        }
        g->workspace = xasprintf("%s/repo", g->state_dir);

        struct secrets *s = NULL;
        r = load_secrets(a->secrets_file, &s, &err);
        if (r < 0) {
                snprintf(msg, msglen, "%s", err.msg);
                rmdir(g->state_dir);
                return r;
        }
        struct gitops_creds creds = creds_from(s, user);
        creds.helper = !a->no_helper;
        char base[GITOPS_OID_HEX + 1] = "";
        r = gitops_clone(a->repo, a->rev, g->workspace, &creds, base, &err);
        struct al_error clone_err = err;

        _cleanup_free_ char *audit_path =
            a->audit ? xstrdup(a->audit) : audit_default_path(geteuid(), a->home);
        json_t *fields =
            json_pack("{s:s, s:o, s:s}", "url", clean, "rev",
                      a->rev ? json_string(a->rev) : json_null(), "workspace", g->workspace);
        if (r >= 0)
                json_object_set_new(fields, "base", json_string(base));
        set_error(fields, r, &err);
        struct al_error aerr = {0};
        int ar = audit_event(audit_path, creds.token, g->id, "git.clone", fields, &aerr);
        json_decref(fields);
        secrets_free(s);

        if (r >= 0 && ar >= 0) {
                struct gitops_state st = {.url = clean,
                                          .user = user,
                                          .rev = (char *)a->rev,
                                          .base = base,
                                          .workspace = g->workspace,
                                          .audit = audit_path};
                r = gitops_state_write(g->state_dir, &st, &err);
                if (r < 0)
                        snprintf(msg, msglen, "run: %s", err.msg);
        } else if (r < 0) {
                /* The remote's words may be in it: shown escaped. */
                _cleanup_free_ char *e = gitops_escape(clone_err.msg, strlen(clone_err.msg), false);
                snprintf(msg, msglen, "run: %s", e ? e : "the clone failed");
        } else {
                snprintf(msg, msglen, "run: audit: %s", aerr.msg);
                r = ar;
        }
        if (r < 0) {
                /* The clone is ours and holds nothing of the agent's yet. */
                (void)fs_remove_tree(AT_FDCWD, g->workspace, FS_REMOVE_DEPTH_MAX);
                char path[PATH_MAX];
                snprintf(path, sizeof(path), "%s/%s", g->state_dir, GITOPS_STATE);
                unlink(path);
                rmdir(g->state_dir);
                return r;
        }
        g->base = xstrdup(base);
        return 0;
}

void run_git_report(const struct run_git *g, bool quiet)
{
        if (quiet || !g->workspace)
                return;
        struct al_error err = {0};
        size_t n = 0;
        if (gitops_count(g->workspace, g->base, &n, NULL, &err) < 0)
                say("airlock: sandbox %s: %s", g->id, err.msg);
        else
                fprintf(stderr,
                        "airlock: the sandbox made %zu new commit(s) on top of %.12s in %s\n", n,
                        g->base, g->workspace);
        fprintf(stderr,
                "  export: airlock export %s [-o FILE]\n"
                "  push:   airlock push %s --branch NAME\n",
                g->id, g->id);
}

void run_git_done(struct run_git *g)
{
        free(g->state_dir);
        free(g->workspace);
        free(g->base);
        memset(g, 0, sizeof(*g));
}

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
                say("airlock: %s: %s", c->cmd, msg);
        return status;
}

/* A usage error found after the options: with --json, the error line. */
static int git_usage(const struct git_cmd *c, const char *msg)
{
        if (c->json)
                return git_fail(c, "failed", EXIT_USAGE, "%s", msg);
        return usage_error(c->cmd, "%s", msg);
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
                return usage_error(cmd, "option \"%s\" needs an argument", argv[optind - 1]);
        if (optopt)
                return usage_error(cmd, "unknown option \"-%c\"", optopt);
        return usage_error(cmd, "unknown option \"%s\"", argv[optind - 1]);
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
                return usage_error("export", "expected exactly one sandbox ID");
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
                        snprintf(alarm_unlink, sizeof(alarm_unlink), "%s", of.tmp);
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
                if (copy_escaped(tty_buf, stdout) < 0)
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
        set_error(fields, r, &err);
        _cleanup_free_ char *audit_path = audit_path_for(&c);
        struct al_error aerr = {0};
        int ar = audit_event(audit_path, NULL, c.id, "git.export", fields, &aerr);
        json_decref(fields);

        if (r < 0) {
                say("airlock: export: %s", err.msg[0] ? err.msg : strerror(-r));
                return EXIT_BAD;
        }
        if (ar < 0) {
                say("airlock: export: audit: %s", aerr.msg);
                return EXIT_BAD;
        }
        if (n == 0)
                fprintf(stderr, "airlock: export: sandbox %s made no new commits\n", c.id);
        else if (output)
                say("export: %zu patch(es) written to %s", n, output);
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
        if (load_secrets(secrets_file, &s, &err) < 0)
                return git_fail(&c, "failed", EXIT_USAGE, "%s", err.msg);
        struct gitops_creds creds = creds_from(s, c.st.user);
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
        set_error(fields, r, &err);
        _cleanup_free_ char *audit_path = audit_path_for(&c);
        struct al_error aerr = {0};
        int ar = audit_event(audit_path, creds.token, c.id, "git.push", fields, &aerr);
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
                audit_event(audit_path, NULL, c.id, "git.pr", pf, &aerr);
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
