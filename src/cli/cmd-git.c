/* SPDX-License-Identifier: Apache-2.0 */
/* The host side of git for a sandbox: the clone for `airlock run --repo`
 * (run_git_*), the deadline every host-side git command runs under, and
 * what `airlock export` and `airlock push` (cmd-export.c) share with it:
 * secrets, credentials, audit records and messages (cmd-git-internal.h). */
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
int git_usage_error(const char *cmd, const char *fmt, ...)
{
        va_list ap;

        fprintf(stderr, "airlock: %s: ", cmd);
        va_start(ap, fmt);
        vfprintf(stderr, fmt, ap);
        va_end(ap);
        fprintf(stderr, " (see 'airlock %s --help')\n", cmd);
        return EXIT_USAGE;
}

int git_load_secrets(const char *file, struct secrets **ret, struct al_error *err)
{
        if (file)
                return secrets_load_file(file, ret, err);
        *ret = secrets_new();
        return 0;
}

struct gitops_creds git_creds_from(const struct secrets *s, const char *url_user)
{
        const char *user = secrets_get(s, "GIT_USERNAME");
        return (struct gitops_creds){
            .token = secrets_get(s, "GIT_TOKEN"),
            .username = user ? user : url_user,
            .helper = true,
            .interactive = isatty(STDIN_FILENO) == 1,
        };
}

int git_audit_event(const char *path, const char *token, const char *id, const char *kind,
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

void git_set_error(json_t *fields, int r, const struct al_error *err)
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

void git_deadline_unlink(const char *path)
{
        snprintf(alarm_unlink, sizeof(alarm_unlink), "%s", path);
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

void git_say(const char *fmt, ...)
{
        char msg[4096];
        va_list ap;
        va_start(ap, fmt);
        vsnprintf(msg, sizeof(msg), fmt, ap);
        va_end(ap);
        _cleanup_free_ char *e = gitops_escape(msg, strlen(msg), false);
        fprintf(stderr, "%s\n", e ? e : "(unprintable)");
}

int git_copy_escaped(FILE *in, FILE *out)
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
        r = git_load_secrets(a->secrets_file, &s, &err);
        if (r < 0) {
                snprintf(msg, msglen, "%s", err.msg);
                rmdir(g->state_dir);
                return r;
        }
        struct gitops_creds creds = git_creds_from(s, user);
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
        git_set_error(fields, r, &err);
        struct al_error aerr = {0};
        int ar = git_audit_event(audit_path, creds.token, g->id, "git.clone", fields, &aerr);
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
                git_say("airlock: sandbox %s: %s", g->id, err.msg);
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
