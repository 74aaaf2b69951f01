/* SPDX-License-Identifier: Apache-2.0 */
/* POST /v1/runs and GET /v1/runs/{id}: the host-owned agent loop through the
 * API (docs/agent.md). A run is `airlock agent` as a job of the daemon: the
 * model is called through the policy's route with the daemon's secrets that
 * the grant names, the tool calls run in a new sandbox, the audit lines go
 * to the daemon's audit log. Its state lives in state_dir/runs/ID: the
 * grant that made it, the task, the policy, the transcript and the result. */
#include <errno.h>
#include <event2/buffer.h>
#include <event2/bufferevent.h>
#include <event2/event.h>
#include <event2/http.h>
#include <fcntl.h>
#include <inttypes.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "daemon.h"
#include "grants.h"
#include "http.h"
#include "jobs.h"
#include "policy.h"
#include "record.h"
#include "routes.h"
#include "sandbox.h"
#include "sse.h"
#include "store.h"
#include "util.h"

#define RUN_TASK_MAX       (1u << 20)
#define RUN_TRANSCRIPT_MAX (4u << 20) /* bytes of transcript an answer carries */

static char *run_dir(struct daemon *d, const char *id)
{
        return xasprintf("%s/runs/%s", d->state_dir, id);
}

static int write_file(const char *dir, const char *name, const char *data)
{
        _cleanup_free_ char *path = xasprintf("%s/%s", dir, name);
        _cleanup_close_ int fd =
            open(path, O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0600);
        if (fd < 0)
                return -errno;
        return write_full(fd, data, strlen(data));
}

/* A file of the run's directory, at most `max` bytes; NULL when absent. */
static char *read_file(const char *dir, const char *name, size_t max, bool *ret_cut)
{
        _cleanup_free_ char *path = xasprintf("%s/%s", dir, name);
        _cleanup_close_ int fd = open(path, O_RDONLY | O_NOFOLLOW | O_CLOEXEC);
        if (fd < 0)
                return NULL;
        char *buf = xcalloc(max + 1, 1);
        size_t len = 0;
        ssize_t k;
        while (len < max && (k = read(fd, buf + len, max - len)) > 0)
                len += (size_t)k;
        buf[len] = '\0';
        if (ret_cut) {
                char c;
                *ret_cut = len == max && read(fd, &c, 1) == 1;
        }
        return buf;
}

/* A run going on: each is a sandbox of its grant's (the agent's), counted
 * against the grant's and the daemon's maxSandboxes as the API's own are. */
struct run_job {
        struct daemon *d;
        char *dir;
        char id[17];
        char grant[GRANT_NAME_MAX + 1];
        char grant_hash[GRANT_HASH_HEX + 1]; /* to notice the grant revoked */
        char *stopped;                       /* why it was stopped, or NULL */
        struct run_job *next;
};

static struct run_job *live_runs;
static struct event *revoked_tick; /* looks for revoked grants while runs go on */

#define RUN_STOP_TIMEOUT_MS 5000
#define RUN_REVOKED_TICK_MS 1000

size_t runs_live(const char *grant)
{
        size_t n = 0;
        for (const struct run_job *j = live_runs; j; j = j->next)
                n += !grant || STREQ(j->grant, grant);
        return n;
}

static void run_forget(struct run_job *j)
{
        for (struct run_job **p = &live_runs; *p; p = &(*p)->next)
                if (*p == j) {
                        *p = j->next;
                        return;
                }
}

static void run_done(const struct job_result *res, void *ud)
{
        struct run_job *j = ud;
        /* An agent that died without its result still gets one. */
        _cleanup_free_ char *have = read_file(j->dir, "result.json", 16, NULL);
        if (!have) {
                const char *code = j->stopped ? "stopped" : res->timed_out ? "timeout" : "internal";
                const char *msg = j->stopped                ? j->stopped
                                  : res->err && res->err[0] ? res->err
                                                            : "the agent ended without a result";
                json_t *o = json_pack("{s:b, s:i, s:s, s:s, s:{s:[], s:[]}}", "ok", 0, "exitCode",
                                      res->exit_code, "errorCode", code, "message", msg, "bundle",
                                      "patches", "commitMessages");
                _cleanup_free_ char *s = json_dumps(o, JSON_COMPACT);
                json_decref(o);
                if (s)
                        (void)write_file(j->dir, "result.json", s);
        }
        run_forget(j);
        free(j->stopped);
        free(j->dir);
        free(j);
}

/* Stop a run: recorded first (run.stopped, naming who and why), then its
 * agent is stopped, and with it its sandbox. Whether it ended in the
 * bound. */
static bool run_stop(struct run_job *j, const char *by, const char *reason)
{
        if (j->stopped)
                return true;
        j->stopped = xasprintf("the run was stopped: %s", reason);
        (void)record_audit(
            j->d, j->id, "run.stopped",
            json_pack("{s:s, s:s, s:s}", "grant", j->grant, "by", by, "reason", reason));
        return job_stop(j->d, j, RUN_STOP_TIMEOUT_MS) != 0;
}

int runs_stop(struct daemon *d, const char *grant, const char *id, const char *by)
{
        for (struct run_job *j = live_runs; j; j = j->next)
                if (STREQ(j->grant, grant) && STREQ(j->id, id))
                        return run_stop(j, by, "the kill switch (POST /v1/stop)") ? 1 : 0;
        return -ENOENT;
}

size_t runs_of_grant(const char *grant, char ***ret)
{
        char **v = NULL;
        size_t n = 0;
        for (struct run_job *j = live_runs; j; j = j->next)
                if (STREQ(j->grant, grant) && !j->stopped)
                        v = strv_append(v, &n, j->id);
        *ret = v;
        return n;
}

/* A revoked grant's runs are stopped: the grant no longer stands behind
 * what they do with its secrets and tools. */
static void revoked_check(evutil_socket_t fd, short what, void *arg)
{
        struct daemon *d = arg;
        if (!live_runs) {
                event_del(revoked_tick);
                return;
        }
        /* run_stop does not free a run (that comes from the loop), so the
         * list may be walked on. */
        for (struct run_job *j = live_runs; j; j = j->next) {
                if (j->stopped)
                        continue;
                struct grant *g = NULL;
                int r = store_grant_by_hash(d->store, j->grant_hash, &g);
                grant_free(g);
                if (r == -ENOENT)
                        (void)run_stop(j, "daemon", "its grant was revoked");
        }
}

/* Whether one more sandbox is within the grant's and the daemon's
 * maxSandboxes; else the 429 is sent, as a create's would be. */
static bool room_for_one(struct daemon *d, struct evhttp_request *req, const struct grant *g)
{
        if (g->max_sandboxes &&
            sandbox_count(d, g->name, false) + runs_live(g->name) >= g->max_sandboxes) {
                reply_error_fields(d, req, 429, "too_many_sandboxes",
                                   json_pack("{s:s, s:I}", "limit", "grant.maxSandboxes", "max",
                                             (json_int_t)g->max_sandboxes),
                                   "grant \"%s\" has its maximum of %" PRIu64
                                   " live sandboxes (a run is one)",
                                   g->name, g->max_sandboxes);
                return false;
        }
        if (d->max_sandboxes &&
            sandbox_count(d, NULL, true) + runs_live(NULL) >= d->max_sandboxes) {
                reply_error_fields(d, req, 429, "too_many_sandboxes",
                                   json_pack("{s:s, s:I}", "limit", "daemon.maxSandboxes", "max",
                                             (json_int_t)d->max_sandboxes),
                                   "the daemon has its maximum of %" PRIu64
                                   " live sandboxes (a run is one)",
                                   d->max_sandboxes);
                return false;
        }
        return true;
}

static bool str_field(struct daemon *d, struct evhttp_request *req, json_t *body, const char *key,
                      size_t max, bool required, const char **ret)
{
        json_t *v = json_object_get(body, key);
        *ret = NULL;
        if (!v || json_is_null(v)) {
                if (required)
                        reply_bad_field(d, req, key, "is required");
                return !required;
        }
        if (!json_is_string(v) || json_string_length(v) == 0 || json_string_length(v) > max ||
            strlen(json_string_value(v)) != json_string_length(v)) {
                _cleanup_free_ char *what = xasprintf("must be a string of 1 to %zu bytes", max);
                reply_bad_field(d, req, key, what);
                return false;
        }
        *ret = json_string_value(v);
        return true;
}

static bool uint_field(struct daemon *d, struct evhttp_request *req, json_t *body, const char *key,
                       uint64_t max, uint64_t *ret)
{
        json_t *v = json_object_get(body, key);
        *ret = 0;
        if (!v || json_is_null(v))
                return true;
        if (!json_is_integer(v) || json_integer_value(v) < 1 ||
            (uint64_t)json_integer_value(v) > max) {
                _cleanup_free_ char *what = xasprintf("must be a number from 1 to %" PRIu64, max);
                reply_bad_field(d, req, key, what);
                return false;
        }
        *ret = (uint64_t)json_integer_value(v);
        return true;
}

static bool model_safe(const char *s)
{
        for (; *s; s++)
                if (*s <= 0x20 || *s >= 0x7f)
                        return false;
        return true;
}

static void run_create(struct daemon *d, struct evhttp_request *req, const struct grant *g)
{
        if (!require(d, req, g, g->allow_runs, "allowRuns"))
                return;
        json_t *body = read_json_body(d, req, false);
        if (!body)
                return;
        static const char *const known[] = {"task",   "model",    "provider",  "modelRoute",
                                            "policy", "maxTurns", "maxTokens", "timeout",
                                            "stream", NULL};
        const char *task, *model, *provider, *route;
        uint64_t turns, tokens, timeout;
        struct policy *p = NULL;
        _cleanup_free_ char *ptext = NULL, *runs = NULL, *dir = NULL, *ws = NULL, *task_path = NULL,
                            *policy_path = NULL, *tr_path = NULL, *res_path = NULL;
        json_t *jpolicy = json_object_get(body, "policy");
        json_t *jstream = json_object_get(body, "stream");
        if (reject_unknown(d, req, body, known) ||
            !str_field(d, req, body, "task", RUN_TASK_MAX, true, &task) ||
            !str_field(d, req, body, "model", 256, true, &model) ||
            !str_field(d, req, body, "provider", 16, false, &provider) ||
            !str_field(d, req, body, "modelRoute", 128, false, &route) ||
            !uint_field(d, req, body, "maxTurns", 100000, &turns) ||
            !uint_field(d, req, body, "maxTokens", UINT32_MAX, &tokens) ||
            !uint_field(d, req, body, "timeout", job_timeout_seconds(), &timeout))
                goto out;
        if (!model_safe(model)) {
                reply_bad_field(d, req, "model", "must be printable ASCII without spaces");
                goto out;
        }
        if (provider && !STREQ(provider, "anthropic") && !STREQ(provider, "openai")) {
                reply_bad_field(d, req, "provider", "must be anthropic or openai");
                goto out;
        }
        if (jstream && !json_is_boolean(jstream)) {
                reply_bad_field(d, req, "stream", "must be true or false");
                goto out;
        }
        if (!json_is_object(jpolicy)) {
                reply_bad_field(d, req, "policy",
                                "must be a policy whose network.routes has the model's route");
                goto out;
        }
        /* Tools and devices run on, or are reached from, the host: what
         * they are is the operator's to say, never an API client's. */
        if (refuse_host_config(d, req, jpolicy))
                goto out;
        if (!route)
                route = "model";
        struct al_error err = {0};
        ptext = json_dumps(jpolicy, JSON_COMPACT);
        p = policy_new();
        if (policy_load_string(p, ptext, "policy", &err) < 0) {
                reply_error_fields(d, req, 400, "invalid_policy",
                                   json_pack("{s:s}", "field", "policy"), "%s", err.msg);
                goto out;
        }
        bool have_route = false;
        for (size_t i = 0; i < p->n_routes; i++)
                have_route = have_route || STREQ(p->routes[i].name, route);
        if (!have_route) {
                /* The API has no default route: its key would be a daemon
                 * secret the grant does not name. */
                reply_bad_field(d, req, "policy",
                                "network.routes must have the model's route "
                                "(modelRoute, \"model\" by default)");
                goto out;
        }
        /* Its volumes as a create's: the grant's own (or, with host
         * rights, the host's), not attached elsewhere; another grant's is
         * not found. */
        if (volumes_apply_create(d, req, g, body, p) < 0)
                goto out;
        struct grant_policy_refusal why_not;
        if (grant_check_policy(g, p, &why_not) < 0) {
                reply_error_fields(d, req, 403, "limit_exceeded",
                                   json_pack("{s:s}", "limit", why_not.limit), "%s",
                                   why_not.message);
                goto out;
        }
        /* Its class and limits as a create's are held (finalized on a
         * copy: the file given to the agent is the policy as sent). */
        {
                struct policy *f = policy_new();
                int fr = policy_load_string(f, ptext, "policy", &err);
                if (fr >= 0)
                        fr = policy_finalize(f, "/", d->home, &err);
                if (fr < 0)
                        reply_error_fields(d, req, 400, "invalid_policy",
                                           json_pack("{s:s}", "field", "policy"), "%s", err.msg);
                else if ((fr = grant_check_limits(g, f, &why_not)) < 0)
                        reply_error_fields(d, req, 403, "limit_exceeded",
                                           json_pack("{s:s}", "limit", why_not.limit), "%s",
                                           why_not.message);
                policy_free(f);
                if (fr < 0)
                        goto out;
        }
        if (!room_for_one(d, req, g))
                goto out;

        char id[17];
        if (random_hex(id, 16) < 0) {
                reply_error(d, req, 500, "internal", "picking an id");
                goto out;
        }
        runs = xasprintf("%s/runs", d->state_dir);
        dir = run_dir(d, id);
        ws = xasprintf("%s/workspace", dir);
        if ((mkdir(runs, 0700) < 0 && errno != EEXIST) || mkdir(dir, 0700) < 0 ||
            mkdir(ws, 0755) < 0 || write_file(dir, "grant", g->name) < 0 ||
            write_file(dir, "task.txt", task) < 0 || write_file(dir, "policy.json", ptext) < 0) {
                reply_error(d, req, 500, "internal", "writing the run's state: %s",
                            strerror(errno));
                goto out;
        }
        task_path = xasprintf("%s/task.txt", dir);
        policy_path = xasprintf("%s/policy.json", dir);
        tr_path = xasprintf("%s/transcript.jsonl", dir);
        res_path = xasprintf("%s/result.json", dir);
        char nturns[24], ntokens[24], ntimeout[24];
        snprintf(nturns, sizeof(nturns), "%" PRIu64, turns ? turns : 50);
        snprintf(ntokens, sizeof(ntokens), "%" PRIu64, tokens);
        snprintf(ntimeout, sizeof(ntimeout), "%" PRIu64, timeout ? timeout : job_timeout_seconds());
        char *argv[40] = {d->airlock_bin,
                          "agent",
                          "-q",
                          "--id",
                          id,
                          "--task-file",
                          task_path,
                          "-p",
                          policy_path,
                          "-w",
                          ws,
                          "--model",
                          (char *)model,
                          "--provider",
                          (char *)(provider ? provider : "anthropic"),
                          "--model-route",
                          (char *)route,
                          "--transcript",
                          tr_path,
                          "--result",
                          res_path,
                          "--max-turns",
                          nturns,
                          "--timeout",
                          ntimeout};
        size_t n = 25;
        if (tokens) {
                argv[n++] = "--max-tokens";
                argv[n++] = ntokens;
        }
        if (json_is_false(jstream))
                argv[n++] = "--no-stream";
        if (d->audit_path) {
                argv[n++] = "--audit";
                argv[n++] = d->audit_path;
        }
        if (d->secrets_path) {
                argv[n++] = "--secrets";
                argv[n++] = d->secrets_path;
        }
        if (d->tools_path) {
                argv[n++] = "--tools";
                argv[n++] = d->tools_path;
        }
        argv[n] = NULL;
        struct run_job *j = xcalloc(1, sizeof(*j));
        j->d = d;
        j->dir = xstrdup(dir);
        snprintf(j->id, sizeof(j->id), "%s", id);
        snprintf(j->grant, sizeof(j->grant), "%s", g->name);
        snprintf(j->grant_hash, sizeof(j->grant_hash), "%s", g->token_hash);
        if (job_start(d, argv, 64 * 1024, run_done, j, &err) < 0) {
                free(j->dir);
                free(j);
                reply_error(d, req, 500, "internal", "%s", err.msg);
                goto out;
        }
        j->next = live_runs;
        live_runs = j;
        if (!revoked_tick)
                revoked_tick = event_new(d->base, -1, EV_PERSIST, revoked_check, d);
        if (!event_pending(revoked_tick, EV_TIMEOUT, NULL)) {
                struct timeval tv = {.tv_sec = RUN_REVOKED_TICK_MS / 1000};
                event_add(revoked_tick, &tv);
        }
        reply_json(d, req, 202, json_pack("{s:s, s:s}", "id", id, "state", "running"));
out:
        policy_free(p);
        json_decref(body);
}

void route_runs(struct daemon *d, struct evhttp_request *req, const struct route_args *a)
{
        run_create(d, req, a->grant);
}

void route_run_get(struct daemon *d, struct evhttp_request *req, const struct route_args *a)
{
        _cleanup_free_ char *dir = run_dir(d, a->id);
        _cleanup_free_ char *owner = read_file(dir, "grant", 256, NULL);
        /* Another grant's run is no run to this one. */
        if (!owner || !STREQ(owner, a->grant->name)) {
                reply_error(d, req, 404, "not_found", "no run %s", a->id);
                return;
        }
        _cleanup_free_ char *res = read_file(dir, "result.json", 32u << 20, NULL);
        json_t *result = res ? json_loads(res, 0, NULL) : NULL;
        bool cut = false;
        _cleanup_free_ char *tr = read_file(dir, "transcript.jsonl", RUN_TRANSCRIPT_MAX, &cut);
        json_t *entries = json_array();
        for (char *line = tr, *nl; line && *line; line = nl + 1) {
                nl = strchr(line, '\n');
                if (!nl)
                        break; /* a line still being written */
                json_t *e = json_loadb(line, (size_t)(nl - line), 0, NULL);
                if (e)
                        json_array_append_new(entries, e);
        }
        reply_json(d, req, 200,
                   json_pack("{s:s, s:s, s:o, s:o, s:b}", "id", a->id, "state",
                             result ? "done" : "running", "result", result ? result : json_null(),
                             "transcript", entries, "transcriptTruncated", cut));
}

/* ---- GET /v1/runs/{id}/events: the transcript as server-sent events ---- */

#define RUN_STREAM_TICK_MS 200
#define RUN_LINE_MAX       (8u << 20) /* a transcript line: a tool result is far less */
#define RUN_QUEUE_MAX      (4u << 20) /* output waiting for a slow client */

struct run_stream {
        char *dir;
        uint64_t off;
        struct evbuffer *partial; /* a line not ended yet */
};

static void run_stream_free(void *ctx)
{
        struct run_stream *s = ctx;
        evbuffer_free(s->partial);
        free(s->dir);
        free(s);
}

static void run_stream_tick(struct sse_stream *sse, void *ctx)
{
        struct run_stream *s = ctx;
        if (sse_queued(sse) > RUN_QUEUE_MAX)
                return; /* the client is slow: read on when it has caught up */
        /* Whether the run is over is asked before the transcript is read: the
         * agent writes its result after its last transcript line. */
        _cleanup_free_ char *result = read_file(s->dir, "result.json", 32u << 20, NULL);
        _cleanup_free_ char *path = xasprintf("%s/transcript.jsonl", s->dir);
        _cleanup_close_ int tfd = open(path, O_RDONLY | O_NOFOLLOW | O_CLOEXEC);
        struct evbuffer *out = evbuffer_new();
        char buf[65536];
        ssize_t n = 0;
        while (tfd >= 0 && (n = pread(tfd, buf, sizeof(buf), (off_t)s->off)) > 0) {
                s->off += (uint64_t)n;
                evbuffer_add(s->partial, buf, (size_t)n);
                size_t len;
                char *line;
                while ((line = evbuffer_readln(s->partial, &len, EVBUFFER_EOL_LF))) {
                        if (len && !memchr(line, '\n', len))
                                evbuffer_add_printf(out, "event: transcript\ndata: %s\n\n", line);
                        free(line);
                }
                if (evbuffer_get_length(s->partial) > RUN_LINE_MAX)
                        evbuffer_drain(s->partial, evbuffer_get_length(s->partial));
                if (evbuffer_get_length(out) > RUN_QUEUE_MAX)
                        break;
        }
        sse_send(sse, out);
        evbuffer_free(out);
        if (result && n <= 0) {
                /* The result is one line of JSON: drop any newline in it. */
                for (char *c = result; *c; c++)
                        if (*c == '\n' || *c == '\r')
                                *c = ' ';
                sse_end(sse, "result", result);
        }
}

int run_owner_is(struct daemon *d, const char *id, const char *grant)
{
        for (const char *c = id; *c; c++)
                if (!((*c >= '0' && *c <= '9') || (*c >= 'a' && *c <= 'f')))
                        return -EINVAL;
        if (strlen(id) != 16)
                return -EINVAL;
        _cleanup_free_ char *dir = run_dir(d, id);
        _cleanup_free_ char *owner = read_file(dir, "grant", 256, NULL);
        if (!owner)
                return -ENOENT;
        return STREQ(owner, grant);
}

void route_run_events(struct daemon *d, struct evhttp_request *req, const struct route_args *a)
{
        _cleanup_free_ char *dir = run_dir(d, a->id);
        _cleanup_free_ char *owner = read_file(dir, "grant", 256, NULL);
        if (!owner || !STREQ(owner, a->grant->name)) {
                reply_error(d, req, 404, "not_found", "no run %s", a->id);
                return;
        }
        struct run_stream *s = xcalloc(1, sizeof(*s));
        s->dir = TAKE_PTR(dir);
        s->partial = evbuffer_new();
        static const struct sse_stream_ops ops = {.tick = run_stream_tick,
                                                  .free_ctx = run_stream_free};
        struct sse_stream *sse = sse_start(d, req, a->grant,
                                           &(struct sse_stream_opts){
                                               .kind = SSE_RUNS,
                                               .tick_ms = RUN_STREAM_TICK_MS,
                                               .high = RUN_QUEUE_MAX,
                                               .write_timeout_s = 120,
                                           },
                                           &ops, s);
        if (sse)
                sse_tick_now(sse);
}
