/* SPDX-License-Identifier: Apache-2.0 */
/* What an agent proposes, through the API: the changes of a copy-on-write
 * workspace (diff, accept, discard) and the commits of a workspace cloned
 * from a repository (export, push). The work is done by the airlock CLI and
 * airlock-git as child processes (jobs.h), the same code `airlock diff`,
 * `accept`, `export` and `push` run on the host. */
#include <ctype.h>
#include <errno.h>
#include <event2/buffer.h>
#include <event2/http.h>
#include <jansson.h>
#include <string.h>
#include <sys/stat.h>

#include "sandbox.h"
#include "answers.h"
#include "changes.h"
#include "ctl.h"
#include "http.h"
#include "record.h"
#include "routes.h"
#include "jobs.h"
#include "util.h"

#define DIFF_OUT_MAX     (64u << 20) /* a diff or an mbox in one answer */
#define RESULT_OUT_MAX   (1u << 20)  /* a JSON result line */
#define PATHS_MAX        1000
#define SNAPSHOT_WAIT_MS 120000

/* The sandbox an endpoint acts on. */
struct target {
        char id[17];
        struct sandbox *live; /* NULL once it ended */
        bool running;         /* live and handed out (not starting or stopping) */
        bool overlay;         /* workspace.mode overlay */
        char *state;
        char *grant; /* the grant that made it; NULL: none */
};

static void target_done(struct target *t)
{
        free(t->state);
        free(t->grant);
}

static bool policy_is_overlay(const char *policy_json)
{
        json_error_t jerr;
        json_t *p = json_loads(policy_json ? policy_json : "{}", 0, &jerr);
        const char *mode =
            json_string_value(json_object_get(json_object_get(p, "workspace"), "mode"));
        bool r = mode && STREQ(mode, "overlay");
        json_decref(p);
        return r;
}

/* False with a 404 sent when the API shows no such sandbox. */
static bool find_target(struct daemon *d, struct evhttp_request *req, const char *id,
                        struct target *t)
{
        memset(t, 0, sizeof(*t));
        snprintf(t->id, sizeof(t->id), "%s", id);
        struct sandbox *sb = sandbox_find(d, id);
        if (sb && sb->state != SANDBOX_POOLED) {
                t->live = sb;
                t->running = sb->state == SANDBOX_RUNNING;
                t->overlay = policy_is_overlay(sb->policy_json);
                t->state = xstrdup(sandbox_state_names[sb->state]);
                t->grant = xstrdup(sb->grant);
                return true;
        }
        struct store_sandbox *r = find_recorded(d, req, id);
        if (!r)
                return false;
        t->overlay = policy_is_overlay(r->policy);
        t->state = xstrdup(r->state);
        t->grant = xstrdup(r->grant);
        store_sandbox_free(r);
        return true;
}

static char *kept_path(struct daemon *d, const char *id, const char *name)
{
        return xasprintf("%s/sandboxes/%s%s%s", d->keep_dir, id, name ? "/" : "", name ? name : "");
}

static bool exists(const char *path)
{
        struct stat st;
        return lstat(path, &st) == 0;
}

/* A job whose answer goes to one request. */
struct job_ctx {
        struct daemon *d;
        struct evhttp_request *req;
        struct sandbox *sb; /* held while a snapshot is taken; else NULL */
        char id[17];
        char *grant;
        char *what;               /* "diff", "accept", …: the audit kind's tail */
        json_t *audit;            /* fields of the api.* audit event */
        const char *type;         /* a raw answer's content type, or NULL for JSON */
        struct answer_hold *hold; /* the answer's bytes, charged to the grant */
};

static struct job_ctx *job_ctx_new(struct daemon *d, struct evhttp_request *req,
                                   const struct target *t, const struct grant *g, const char *what)
{
        struct job_ctx *c = xcalloc(1, sizeof(*c));
        c->d = d;
        c->req = req;
        snprintf(c->id, sizeof(c->id), "%s", t->id);
        c->grant = xstrdup(g ? g->name : NULL);
        c->what = xstrdup(what);
        c->audit = json_pack("{s:s?}", "grant", c->grant);
        c->hold =
            answer_hold_new(d, c->grant, !t->grant || !c->grant || !STREQ(t->grant, c->grant));
        return c;
}

static void job_ctx_free(struct job_ctx *c)
{
        answer_hold_free(c->hold);
        if (c->sb)
                sandbox_unref(c->sb);
        json_decref(c->audit);
        free(c->grant);
        free(c->what);
        free(c);
}

static void audit_outcome(struct job_ctx *c, int status, const char *error)
{
        json_object_set_new(c->audit, "status", json_integer(status));
        if (error)
                json_object_set_new(c->audit, "error", json_string(error));
        _cleanup_free_ char *kind = xasprintf("api.%s", c->what);
        record_audit(c->d, c->id, kind, json_incref(c->audit));
}

/* A job that answers with its stdout as it is (diff, export). */
static void on_raw_done(const struct job_result *res, void *userdata)
{
        struct job_ctx *c = userdata;
        struct daemon *d = c->d;
        char msg[1024];
        if (res->exit_code < 0) {
                reply_error(d, c->req, 503, "shutting_down", "the daemon is stopping");
        } else if (res->refused < 0) {
                audit_outcome(c, res->refused == -EDQUOT ? 429 : 503, "unread_answers");
                answer_hold_refused(d, c->req, c->hold, res->refused);
        } else if (res->timed_out) {
                audit_outcome(c, 504, "timeout");
                reply_error(d, c->req, 504, "timeout", "sandbox %s: %s", c->id,
                            changes_cli_message(res->err, msg, sizeof(msg)));
        } else if (res->exit_code == 0 && res->out_truncated) {
                audit_outcome(c, 413, "too_large");
                reply_error(d, c->req, 413, "too_large",
                            "the %s is larger than %u bytes; read it on the host with 'airlock "
                            "%s --state-root %s %s'",
                            c->what, DIFF_OUT_MAX, c->what, d->keep_dir, c->id);
        } else if (res->exit_code == 0) {
                audit_outcome(c, 200, NULL);
                answer_hold_reply(c->hold, c->req, 200, c->type, res->out);
                c->hold = NULL;
        } else {
                int status = res->exit_code == 2 ? 404 : 409;
                const char *code = res->exit_code == 2 ? "not_found" : "refused";
                audit_outcome(c, status, code);
                reply_error(d, c->req, status, code, "sandbox %s: %s", c->id,
                            changes_cli_message(res->err, msg, sizeof(msg)));
        }
        job_ctx_free(c);
}

/* HTTP statuses of the CLI's --json error codes. */
static const struct {
        const char *code;
        int status;
} cli_errors[] = {
    {"conflict", 409},    {"already", 409},         {"not_found", 404},      {"bad_path", 400},
    {"bad_branch", 400},  {"nothing_to_push", 409}, {"not_descendant", 409}, {"branch_exists", 409},
    {"auth_failed", 502}, {"remote_refused", 502},  {"timeout", 504},        {"failed", 500},
    {"not_kept", 409},
};

/* A job that answers with the JSON line it prints (accept, discard, push). */
static void on_json_done(const struct job_result *res, void *userdata)
{
        struct job_ctx *c = userdata;
        struct daemon *d = c->d;
        if (res->exit_code < 0) {
                reply_error(d, c->req, 503, "shutting_down", "the daemon is stopping");
                job_ctx_free(c);
                return;
        }
        if (res->refused < 0) {
                audit_outcome(c, res->refused == -EDQUOT ? 429 : 503, "unread_answers");
                answer_hold_refused(d, c->req, c->hold, res->refused);
                job_ctx_free(c);
                return;
        }
        if (res->timed_out) {
                char m[1024];
                audit_outcome(c, 504, "timeout");
                reply_error(d, c->req, 504, "timeout", "sandbox %s: %s", c->id,
                            changes_cli_message(res->err, m, sizeof(m)));
                job_ctx_free(c);
                return;
        }
        size_t len = evbuffer_get_length(res->out);
        json_error_t jerr;
        json_t *o = json_loadb((const char *)evbuffer_pullup(res->out, -1), len, 0, &jerr);
        const char *code = json_string_value(json_object_get(o, "error"));
        char msg[1024];
        if (!json_is_object(o)) {
                audit_outcome(c, 500, "internal");
                reply_error(d, c->req, 500, "internal", "sandbox %s: %s", c->id,
                            changes_cli_message(res->err, msg, sizeof(msg)));
        } else if (!code) {
                /* A push whose forge command failed exits 1 all the same:
                 * the push is done and "pr" says how the command ended. */
                audit_outcome(c, 200, NULL);
                struct evbuffer *buf = evbuffer_new();
                _cleanup_free_ char *text = json_dumps(o, JSON_COMPACT);
                if (text) {
                        evbuffer_add(buf, text, strlen(text));
                        evbuffer_add(buf, "\n", 1);
                }
                answer_hold_reply(c->hold, c->req, 200, "application/json", buf);
                c->hold = NULL;
                evbuffer_free(buf);
        } else {
                int status = 500;
                for (size_t i = 0; i < ARRAY_SIZE(cli_errors); i++)
                        if (code && STREQ(code, cli_errors[i].code))
                                status = cli_errors[i].status;
                const char *m = json_string_value(json_object_get(o, "message"));
                audit_outcome(c, status, code ? code : "failed");
                reply_error(d, c->req, status, code ? code : "failed", "sandbox %s: %s", c->id,
                            m ? m : changes_cli_message(res->err, msg, sizeof(msg)));
        }
        json_decref(o);
        job_ctx_free(c);
}

/* Each piece of a job's output is charged to its grant before it is kept:
 * a grant that leaves its answers unread cannot grow the daemon. */
static int on_charge(void *userdata, size_t n)
{
        struct job_ctx *c = userdata;
        return answer_hold_charge(c->hold, n);
}

static void run(struct job_ctx *c, char *const argv[], size_t out_max, job_done_fn done)
{
        struct al_error err = {0};
        /* An accept, discard or push is recorded with its outcome, after
         * it: the log's reserve is made sure of before it starts. */
        bool reads = STREQ(c->what, "diff") || STREQ(c->what, "export");
        int r = answer_hold_admit(c->hold);
        if (r < 0) {
                answer_hold_refused(c->d, c->req, c->hold, r);
                job_ctx_free(c);
                return;
        }
        if (!reads && !record_audit_room(c->d)) {
                reply_audit_failed(c->d, c->req, c->d->audit_fault);
                job_ctx_free(c);
                return;
        }
        if (job_start_charged(c->d, argv, out_max, on_charge, done, c, &err) < 0) {
                reply_error(c->d, c->req, 500, "internal", "%s", err.msg);
                job_ctx_free(c);
        }
}

static void run_diff(struct job_ctx *c)
{
        char *argv[] = {c->d->airlock_bin, "diff", "--state-root", c->d->keep_dir, c->id, NULL};
        c->type = "text/x-diff; charset=utf-8";
        run(c, argv, DIFF_OUT_MAX, on_raw_done);
}

/* GET /v1/sandboxes/{id}/diff */

static bool check_reviewable(struct daemon *d, struct evhttp_request *req, struct target *t)
{
        if (!t->overlay) {
                reply_error(d, req, 409, "not_reviewable",
                            "sandbox %s works on its workspace directly; create it with "
                            "\"review\": true to review its changes",
                            t->id);
                return false;
        }
        return true;
}

static void on_snapshot_line(struct ctl_call *call, json_t *msg, void *userdata)
{
        struct job_ctx *c = userdata;
        if (json_is_false(json_object_get(msg, "ok"))) {
                const char *m = json_string_value(json_object_get(msg, "message"));
                json_object_set_new(c->audit, "snapshotError", json_string(m ? m : "failed"));
        }
}

static void on_snapshot_done(struct ctl_call *call, int error, void *userdata)
{
        struct job_ctx *c = userdata;
        json_t *e = json_object_get(c->audit, "snapshotError");
        if (error < 0 || e) {
                const char *m = e ? json_string_value(e) : strerror(-error);
                audit_outcome(c, 502, "supervisor_unavailable");
                reply_error(c->d, c->req, 502, "supervisor_unavailable",
                            "the supervisor of sandbox %s could not copy its changes: %s", c->id,
                            m);
                job_ctx_free(c);
                return;
        }
        run_diff(c);
}

static const struct ctl_call_ops snapshot_ops = {
    .line = on_snapshot_line,
    .done = on_snapshot_done,
};

static void changes_diff(struct daemon *d, struct evhttp_request *req, const struct grant *g,
                         const char *id)
{
        struct target t;
        _cleanup_free_ char *dir = kept_path(d, id, NULL);
        if (!find_target(d, req, id, &t))
                return;
        if (!check_reviewable(d, req, &t))
                goto out;
        struct job_ctx *c = job_ctx_new(d, req, &t, g, "diff");
        /* Its bound before the copy, too: a diff waiting for the
         * supervisor's copy (up to SNAPSHOT_WAIT_MS) is held all the same,
         * and a grant's many would push the daemon past its whole. */
        int ar = answer_hold_admit(c->hold);
        if (ar < 0) {
                answer_hold_refused(d, req, c->hold, ar);
                job_ctx_free(c);
                goto out;
        }
        /* Another grant's diff is a read: it shows what was last copied,
         * and never starts a copy (host disk work it could repeat at will,
         * during which the maker's own diff would be refused). */
        bool makers = t.live && t.live->grant && STREQ(t.live->grant, g->name);
        if (t.running && !makers) {
                if (!exists(dir)) {
                        job_ctx_free(c);
                        reply_error(d, req, 409, "not_copied",
                                    "sandbox %s's changes have not been copied yet: they are "
                                    "copied by its maker's diff, and when it ends",
                                    id);
                        goto out;
                }
                run_diff(c);
                goto out;
        }
        if (t.running) {
                /* The changes as they are now: the supervisor copies them
                 * over what an earlier diff copied. */
                json_t *ctl = json_pack("{s:s}", "op", "review");
                c->sb = t.live;
                sandbox_ref(c->sb);
                sandbox_touch(c->sb);
                struct ctl_call *call = NULL;
                int r = ctl_call_start(d->base, t.live->control_path, ctl, SNAPSHOT_WAIT_MS,
                                       &snapshot_ops, c, &call);
                json_decref(ctl);
                if (r < 0) {
                        reply_error(d, req, 502, "supervisor_unavailable",
                                    "the sandbox's supervisor did not answer: %s", strerror(-r));
                        job_ctx_free(c);
                }
                goto out;
        }
        if (t.live) {
                job_ctx_free(c);
                reply_error_fields(d, req, 409, "not_running", json_pack("{s:s}", "state", t.state),
                                   "sandbox %s is %s", id, t.state);
                goto out;
        }
        if (!exists(dir)) {
                job_ctx_free(c);
                reply_error(d, req, 404, "not_found", "sandbox %s kept no changes", id);
                goto out;
        }
        run_diff(c);
out:
        target_done(&t);
}

/* POST /v1/sandboxes/{id}/accept and /discard */

/* Accept and discard act on the final copy, made once the sandbox's last
 * process is gone: until then the agent could still change what is taken. */
static bool check_ended(struct daemon *d, struct evhttp_request *req, struct target *t)
{
        if (!t->live)
                return true;
        reply_error_fields(d, req, 409, "still_running", json_pack("{s:s}", "state", t->state),
                           "sandbox %s is %s: its changes are final once it is destroyed "
                           "(DELETE /v1/sandboxes/%s); GET .../diff shows them as they are now",
                           t->id, t->state, t->id);
        return false;
}

static void changes_decide(struct daemon *d, struct evhttp_request *req, const struct grant *g,
                           const char *id, bool accept)
{
        if (!require(d, req, g, g->allow_exec, "allowExec"))
                return;
        json_t *body = read_json_body(d, req, true);
        if (!body)
                return;
        struct target t;
        _cleanup_free_ char *dir = kept_path(d, id, NULL);
        static const char *const accept_keys[] = {"paths", NULL};
        if (reject_unknown(d, req, body, accept_keys) || !find_target(d, req, id, &t)) {
                json_decref(body);
                return;
        }
        json_t *paths = json_object_get(body, "paths");
        size_t n = json_is_array(paths) ? json_array_size(paths) : 0;
        char **argv = NULL;
        size_t argc = 0;
        if (paths && !json_is_null(paths) && (!json_is_array(paths) || n > PATHS_MAX)) {
                reply_bad_field(d, req, "paths", "must be an array of at most 1000 paths");
                goto out;
        }
        for (size_t i = 0; i < n; i++) {
                json_t *p = json_array_get(paths, i);
                if (!json_is_string(p) || json_string_length(p) == 0 ||
                    json_string_length(p) >= 4096 ||
                    strlen(json_string_value(p)) != json_string_length(p)) {
                        reply_bad_field(d, req, "paths", "must hold paths of 1 to 4095 bytes");
                        goto out;
                }
        }
        if (!check_reviewable(d, req, &t) || !check_ended(d, req, &t))
                goto out;
        if (!exists(dir)) {
                reply_error(d, req, 404, "not_found", "sandbox %s kept no changes", id);
                goto out;
        }
        argv = strv_append(argv, &argc, d->airlock_bin);
        argv = strv_append(argv, &argc, accept ? "accept" : "discard");
        argv = strv_append(argv, &argc, "--json");
        argv = strv_append(argv, &argc, "--state-root");
        argv = strv_append(argv, &argc, d->keep_dir);
        argv = strv_append(argv, &argc, id);
        for (size_t i = 0; i < n; i++)
                argv = strv_append(argv, &argc, json_string_value(json_array_get(paths, i)));
        struct job_ctx *c = job_ctx_new(d, req, &t, g, accept ? "accept" : "discard");
        if (n)
                json_object_set(c->audit, "paths", paths);
        run(c, argv, RESULT_OUT_MAX, on_json_done);
out:
        strv_free(argv);
        target_done(&t);
        json_decref(body);
}

/* POST /v1/sandboxes/{id}/export and /push */

static bool check_repository(struct daemon *d, struct evhttp_request *req, const char *id)
{
        _cleanup_free_ char *state = kept_path(d, id, "git.json");
        if (exists(state))
                return true;
        reply_error(d, req, 409, "no_repository",
                    "sandbox %s was not created from a repository (\"repo\")", id);
        return false;
}

static void changes_export(struct daemon *d, struct evhttp_request *req, const struct grant *g,
                           const char *id)
{
        json_t *body = read_json_body(d, req, true);
        if (!body)
                return;
        static const char *const keys[] = {NULL};
        struct target t = {0};
        if (!reject_unknown(d, req, body, keys) && find_target(d, req, id, &t) &&
            check_repository(d, req, id)) {
                char *argv[] = {d->airlock_bin, "export",   "--state-root",
                                d->keep_dir,    (char *)id, NULL};
                struct job_ctx *c = job_ctx_new(d, req, &t, g, "export");
                c->type = "application/mbox";
                run(c, argv, DIFF_OUT_MAX, on_raw_done);
        }
        target_done(&t);
        json_decref(body);
}

/* A git branch name the remote will take: what check-ref-format allows,
 * more strictly (no control characters, no spaces, no '..', '@{', '\'). */
static bool branch_valid(const char *b)
{
        size_t n = strlen(b);
        if (n == 0 || n > 200 || b[0] == '-' || b[0] == '/' || b[0] == '.' || b[n - 1] == '/' ||
            b[n - 1] == '.' || strstr(b, "..") || strstr(b, "//") || strstr(b, "@{") ||
            strstr(b, "/.") || (n >= 5 && STREQ(b + n - 5, ".lock")))
                return false;
        for (const char *p = b; *p; p++)
                if ((unsigned char)*p <= ' ' || *p == 0x7f || strchr("~^:?*[\\", *p))
                        return false;
        return true;
}

static void changes_push(struct daemon *d, struct evhttp_request *req, const struct grant *g,
                         const char *id)
{
        if (!require(d, req, g, g->allow_git, "allowGit"))
                return;
        json_t *body = read_json_body(d, req, false);
        if (!body)
                return;
        static const char *const keys[] = {"branch", "force", "openPr", NULL};
        struct target t = {0};
        if (reject_unknown(d, req, body, keys))
                goto out;
        json_t *branch = json_object_get(body, "branch");
        json_t *force = json_object_get(body, "force");
        json_t *open_pr = json_object_get(body, "openPr");
        if (!json_is_string(branch) || !branch_valid(json_string_value(branch))) {
                reply_bad_field(d, req, "branch", "must be a branch name such as agent/fix-123");
                goto out;
        }
        if ((force && !json_is_boolean(force)) || (open_pr && !json_is_boolean(open_pr))) {
                reply_bad_field(d, req, force && !json_is_boolean(force) ? "force" : "openPr",
                                "must be true or false");
                goto out;
        }
        if (!find_target(d, req, id, &t) || !check_repository(d, req, id))
                goto out;
        char *argv[20] = {d->airlock_bin,
                          "push",
                          "--json",
                          "--state-root",
                          d->keep_dir,
                          "--branch",
                          (char *)json_string_value(branch)};
        size_t argc = 7;
        if (json_is_true(force))
                argv[argc++] = "--force";
        if (json_is_true(open_pr))
                argv[argc++] = "--open-pr";
        if (d->secrets_path) {
                argv[argc++] = "--secrets";
                argv[argc++] = d->secrets_path;
        }
        if (!d->git_helper)
                argv[argc++] = "--no-helper";
        argv[argc++] = (char *)id;
        struct job_ctx *c = job_ctx_new(d, req, &t, g, "push");
        json_object_set(c->audit, "branch", branch);
        json_object_set_new(c->audit, "force", json_boolean(json_is_true(force)));
        run(c, argv, RESULT_OUT_MAX, on_json_done);
out:
        target_done(&t);
        json_decref(body);
}

void route_diff(struct daemon *d, struct evhttp_request *req, const struct route_args *a)
{
        changes_diff(d, req, a->grant, a->id);
}

void route_accept(struct daemon *d, struct evhttp_request *req, const struct route_args *a)
{
        changes_decide(d, req, a->grant, a->id, true);
}

void route_discard(struct daemon *d, struct evhttp_request *req, const struct route_args *a)
{
        changes_decide(d, req, a->grant, a->id, false);
}

void route_export(struct daemon *d, struct evhttp_request *req, const struct route_args *a)
{
        changes_export(d, req, a->grant, a->id);
}

void route_push(struct daemon *d, struct evhttp_request *req, const struct route_args *a)
{
        changes_push(d, req, a->grant, a->id);
}
