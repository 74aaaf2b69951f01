/* SPDX-License-Identifier: Apache-2.0 */
/* /v1/sandboxes: create (from the pool, a fresh start, or a clone first),
 * list, get, delete, and a new time to live. */
#include <ctype.h>
#include <errno.h>
#include <event2/buffer.h>
#include <event2/bufferevent.h>
#include <event2/http.h>
#include <event2/keyvalq_struct.h>
#include <inttypes.h>
#include <signal.h>
#include <stdarg.h>
#include <string.h>
#include <sys/stat.h>

#include "trace.h"
#include "sandbox.h"
#include "policy/hardware.h"
#include "policy/repo.h"
#include "pool.h"
#include "changes.h"
#include "daemon.h"
#include "grants.h"
#include "hostws.h"
#include "http.h"
#include "record.h"
#include "routes.h"
#include "util.h"

#define META_KEY_MAX   64
#define META_VALUE_MAX 256
#define TTL_MAX_S      (30.0 * 24 * 3600)

static bool valid_meta_key(const char *k)
{
        size_t n = strlen(k);
        if (n == 0 || n > META_KEY_MAX)
                return false;
        for (size_t i = 0; i < n; i++)
                if (!isalnum((unsigned char)k[i]) && !strchr("_.-", k[i]))
                        return false;
        return true;
}

/* POST /v1/sandboxes */

struct create_ctx {
        struct daemon *d;
        struct evhttp_request *req;
        char *grant;
        json_t *repo; /* {"url", "rev", "base"} of a clone */
        /* While a clone runs: what the start takes then. */
        struct policy *policy;
        json_t *metadata;
        uint64_t ttl_ms, idle_ms;
};

static void create_ctx_free(struct create_ctx *c)
{
        json_decref(c->repo);
        json_decref(c->metadata);
        policy_free(c->policy);
        free(c->grant);
        free(c);
}

static void reply_start_error(struct daemon *d, struct evhttp_request *req, int error,
                              const char *message)
{
        if (daemon_health_get(d, "store") || daemon_health_get(d, "database") || error == -ENOSPC ||
            error == -EDQUOT)
                reply_error(d, req, 503, "store_unavailable", "the sandbox was not created: %s",
                            message);
        else
                reply_error(d, req, error == -ETIMEDOUT ? 504 : 500, "setup_failed",
                            "the sandbox could not be started: %s", message);
}

static void on_created(struct sandbox *sb, int error, const char *message, void *userdata)
{
        struct create_ctx *c = userdata;
        struct daemon *d = c->d;
        if (error < 0 && message && strncmp(message, "audit: ", 7) == 0) {
                /* The supervisor could not write the sandbox's first line. */
                record_audit_failed(d, message + 7);
                reply_audit_failed(d, c->req, message + 7);
        } else if (error < 0) {
                reply_start_error(d, c->req, error, message ? message : strerror(-error));
        } else {
                if (record_audit_durably(d, sb->id, "api.create",
                                         json_pack("{s:s, s:s, s:b}", "grant", c->grant, "class",
                                                   sb->class_name, "pool", false)) < 0) {
                        sandbox_destroy(sb, "audit_failed", NULL, NULL);
                        reply_audit_failed(d, c->req, d->audit_fault);
                        create_ctx_free(c);
                        return;
                }
                d->metrics.creates++;
                if (!evhttp_request_get_connection(c->req)) {
                        /* Nobody will learn the id. */
                        sandbox_destroy(sb, "abandoned", NULL, NULL);
                }
                json_t *rec = live_json(sb);
                if (c->repo)
                        json_object_set(rec, "repo", c->repo);
                reply_json(d, c->req, 201, rec);
        }
        create_ctx_free(c);
}

static void on_cloned(const char *id, const char *workspace, const char *base, int error,
                      const char *message, void *userdata)
{
        struct create_ctx *c = userdata;
        struct daemon *d = c->d;
        if (error < 0) {
                if (error == -ECANCELED)
                        reply_error(d, c->req, 503, "shutting_down", "%s", message);
                else if (error == -EINVAL)
                        reply_error_fields(d, c->req, 400, "bad_request",
                                           json_pack("{s:s}", "field", "repo"), "%s", message);
                else
                        reply_error(d, c->req, 502, "clone_failed", "%s", message);
                d->metrics.create_failures++;
                create_ctx_free(c);
                return;
        }
        json_object_set_new(c->repo, "base", json_string(base));
        struct al_error err = {0};
        /* The clone's .airlock/isolation.json, as a host workspace's is
         * read: the repository's minimumTier holds for a clone too. The
         * refused clone is left to the kept state's pruning (gc.c). */
        int rr = repo_config_apply_workspace(c->policy, workspace, d->home, &err);
        if (rr < 0) {
                reply_error(d, c->req, rr == -EPERM ? 409 : 400,
                            rr == -EPERM ? "repo_config_refused" : "invalid_repo_config", "%s",
                            err.msg);
                d->metrics.create_failures++;
                create_ctx_free(c);
                return;
        }
        struct sandbox_params params = {
            .grant = c->grant,
            .metadata = c->metadata,
            .ttl_ms = c->ttl_ms,
            .idle_timeout_ms = c->idle_ms,
            .workspace = workspace,
            .id = id,
        };
        struct sandbox *sb = NULL;
        int r = sandbox_start(d, TAKE_PTR(c->policy), &params, on_created, c, &sb, &err);
        if (r < 0) {
                reply_start_error(d, c->req, r, err.msg);
                create_ctx_free(c);
        }
}

#define over_limit(d, req, limit, ...)                                                             \
        reply_error_fields(d, req, 403, "limit_exceeded", json_pack("{s:s}", "limit", limit),      \
                           __VA_ARGS__)

/* A pooled sandbox's record as the grant's (record_audit_durably_with). */
static int save_pooled(void *sb)
{
        int r = sandbox_save(sb);
        al_trace_mark("create.saved");
        return r;
}

/* A create past its checks (and its host workspace's answer): how many,
 * then the pool, a clone or a start. */
struct create_req {
        struct daemon *d;
        struct evhttp_request *req;
        char *grant;
        uint64_t max_sandboxes;
        json_t *body;
        struct policy *policy;
        char *ws;
        bool plain;
        double ttl, idle;
};

static void create_req_free(struct create_req *cr)
{
        json_decref(cr->body);
        policy_free(cr->policy);
        free(cr->grant);
        free(cr->ws);
        free(cr);
}

static void create_rest(struct create_req *cr)
{
        struct daemon *d = cr->d;
        struct evhttp_request *req = cr->req;
        json_t *body = cr->body;
        json_t *jmeta = json_object_get(body, "metadata");
        json_t *jrepo = json_object_get(body, "repo");
        json_t *jrev = json_object_get(body, "rev");
        bool repo = json_is_string(jrepo), plain = cr->plain;
        double ttl = cr->ttl, idle = cr->idle;
        struct policy *p = TAKE_PTR(cr->policy);
        const char *cls = p->class_name ? p->class_name : "medium";
        const char *ws = cr->ws;
        struct al_error err = {0};

        /* How many. */
        if (cr->max_sandboxes &&
            sandbox_count(d, cr->grant, false) + runs_live(cr->grant) >= cr->max_sandboxes) {
                char n[32];
                snprintf(n, sizeof(n), "%" PRIu64, cr->max_sandboxes);
                reply_error_fields(d, req, 429, "too_many_sandboxes",
                                   json_pack("{s:s, s:I}", "limit", "grant.maxSandboxes", "max",
                                             (json_int_t)cr->max_sandboxes),
                                   "grant \"%s\" has its maximum of %s live sandboxes", cr->grant,
                                   n);
                goto done;
        }
        struct sandbox *pooled = plain ? pool_take(d, cls) : NULL;
        if (!pooled && d->max_sandboxes &&
            sandbox_count(d, NULL, true) + runs_live(NULL) >= d->max_sandboxes) {
                reply_error_fields(d, req, 429, "too_many_sandboxes",
                                   json_pack("{s:s, s:I}", "limit", "daemon.maxSandboxes", "max",
                                             (json_int_t)d->max_sandboxes),
                                   "the daemon has its maximum of %" PRIu64 " live sandboxes",
                                   d->max_sandboxes);
                goto done;
        }

        uint64_t now = daemon_now_ms();
        if (pooled) {
                al_trace_mark("create.parsed");
                pooled->state = SANDBOX_RUNNING;
                free(pooled->grant);
                pooled->grant = xstrdup(cr->grant);
                json_decref(pooled->metadata);
                pooled->metadata =
                    jmeta && json_is_object(jmeta) ? json_deep_copy(jmeta) : json_object();
                pooled->created_ms = now;
                pooled->last_active_ms = now;
                pooled->expires_ms = ttl > 0 ? now + (uint64_t)(ttl * 1000) : 0;
                pooled->idle_timeout_ms = idle > 0 ? (uint64_t)(idle * 1000) : 0;
                /* The take and api.create are both durable before the
                 * 201: synced side by side, not one after the other. */
                int saved = 0;
                int audited = record_audit_durably_with(
                    d, pooled->id, "api.create",
                    json_pack("{s:s, s:s, s:b}", "grant", cr->grant, "class", cls, "pool", true),
                    save_pooled, pooled, &saved);
                al_trace_mark("create.durable");
                if (audited < 0) {
                        sandbox_destroy(pooled, "audit_failed", NULL, NULL);
                        reply_audit_failed(d, req, d->audit_fault);
                        goto done;
                }
                if (saved < 0) {
                        /* Not recorded as this grant's: not handed out. */
                        sandbox_destroy(pooled, "store_failed", NULL, NULL);
                        reply_start_error(d, req, -EIO, store_last_error(d->store));
                        goto done;
                }
                d->metrics.creates++;
                d->metrics.pool_hits++;
                reply_json(d, req, 201, live_json(pooled));
                al_trace_mark("create.reply");
                pool_refill_later(d);
                goto done;
        }

        struct sandbox_params params = {
            .grant = cr->grant,
            .metadata = jmeta && json_is_object(jmeta) ? jmeta : NULL,
            .ttl_ms = ttl > 0 ? (uint64_t)(ttl * 1000) : 0,
            .idle_timeout_ms = idle > 0 ? (uint64_t)(idle * 1000) : 0,
            .workspace = ws,
        };
        struct create_ctx *c = xcalloc(1, sizeof(*c));
        c->d = d;
        c->req = req;
        c->grant = xstrdup(cr->grant);
        if (repo) {
                /* The host clones first; the sandbox starts on the clone. */
                c->repo = json_pack("{s:O, s:O?}", "url", jrepo, "rev", jrev);
                c->policy = TAKE_PTR(p);
                c->metadata = json_incref(params.metadata);
                c->ttl_ms = params.ttl_ms;
                c->idle_ms = params.idle_timeout_ms;
                if (changes_clone(d, json_string_value(jrepo),
                                  json_is_string(jrev) ? json_string_value(jrev) : NULL, on_cloned,
                                  c, &err) < 0) {
                        create_ctx_free(c);
                        reply_error(d, req, 500, "setup_failed", "%s", err.msg);
                }
                goto done;
        }
        struct sandbox *sb = NULL;
        int r = sandbox_start(d, TAKE_PTR(p), &params, on_created, c, &sb, &err);
        if (r < 0) {
                create_ctx_free(c);
                reply_start_error(d, req, r, err.msg);
        }
done:
        policy_free(p);
        create_req_free(cr);
}

static void on_hostws(struct hostws *h, void *ud)
{
        struct create_req *cr = ud;
        struct daemon *d = cr->d;
        struct evhttp_request *req = cr->req;
        struct al_error err = {0};
        int rr = hostws_apply_answer(h, cr->policy, d->home, &err);
        hostws_free(h);
        if (rr == -ENOTDIR)
                reply_bad_field(d, req, "workspace", "must name an existing directory");
        else if (rr == -EACCES)
                reply_error_fields(d, req, 403, "workspace_unsafe",
                                   json_pack("{s:s}", "field", "workspace"), "%s", err.msg);
        else if (rr == -ETIMEDOUT)
                reply_error_fields(d, req, 504, "workspace_unresponsive",
                                   json_pack("{s:s}", "field", "workspace"),
                                   "%s; name a directory that answers", err.msg);
        else if (rr < 0)
                reply_error(d, req, rr == -EPERM ? 409 : 400,
                            rr == -EPERM ? "repo_config_refused" : "invalid_repo_config", "%s",
                            err.msg);
        else {
                create_rest(cr);
                return;
        }
        create_req_free(cr);
}

static void handle_create(struct daemon *d, struct evhttp_request *req, struct grant *g)
{
        if (!require(d, req, g, g->allow_sandbox, "allowSandbox") || refuse_lost_store(d, req))
                return;
        json_t *body = read_json_body(d, req, true);
        if (!body)
                return;
        static const char *const keys[] = {"policy",    "class",  "metadata", "ttl", "idleTimeout",
                                           "workspace", "review", "repo",     "rev", "volumes",
                                           "home",      "tier",   NULL};
        struct policy *p = NULL;
        if (reject_unknown(d, req, body, keys))
                goto out;

        json_t *jpolicy = json_object_get(body, "policy");
        json_t *jclass = json_object_get(body, "class");
        json_t *jmeta = json_object_get(body, "metadata");
        json_t *jws = json_object_get(body, "workspace");
        json_t *jreview = json_object_get(body, "review");
        json_t *jrepo = json_object_get(body, "repo");
        json_t *jrev = json_object_get(body, "rev");
        double ttl, idle;
        if (jpolicy && !json_is_null(jpolicy) && !json_is_object(jpolicy)) {
                reply_bad_field(d, req, "policy", "must be a policy object (docs/policy.md)");
                goto out;
        }
        if (jclass && !json_is_null(jclass) &&
            (!json_is_string(jclass) || !policy_class_find(json_string_value(jclass)))) {
                reply_bad_field(d, req, "class", "must be one of small, medium, large, xlarge");
                goto out;
        }
        if (jmeta && !json_is_null(jmeta)) {
                if (!json_is_object(jmeta) || json_object_size(jmeta) > STORE_META_MAX) {
                        reply_bad_field(d, req, "metadata",
                                        "must be an object of at most 32 strings");
                        goto out;
                }
                const char *k;
                json_t *v;
                json_object_foreach(jmeta, k, v)
                {
                        if (!valid_meta_key(k)) {
                                reply_bad_field(d, req, "metadata",
                                                "keys must be 1 to 64 of A-Z a-z 0-9 _ . -");
                                goto out;
                        }
                        if (!json_is_string(v) || json_string_length(v) > META_VALUE_MAX) {
                                _cleanup_free_ char *f = xasprintf("metadata.%s", k);
                                reply_bad_field(d, req, f, "must be a string of at most 256 bytes");
                                goto out;
                        }
                }
        }
        if (body_seconds(body, "ttl", TTL_MAX_S, &ttl) < 0) {
                reply_bad_field(d, req, "ttl", "must be a number of seconds from 0 to 2592000");
                goto out;
        }
        if (body_seconds(body, "idleTimeout", TTL_MAX_S, &idle) < 0) {
                reply_bad_field(d, req, "idleTimeout",
                                "must be a number of seconds from 0 to 2592000");
                goto out;
        }
        if (jws && !json_is_null(jws) &&
            (!json_is_string(jws) || json_string_value(jws)[0] != '/')) {
                reply_bad_field(d, req, "workspace", "must be an absolute host path");
                goto out;
        }
        if (jreview && !json_is_boolean(jreview)) {
                reply_bad_field(d, req, "review", "must be true or false");
                goto out;
        }
        if (jrepo && !json_is_null(jrepo) &&
            (!json_is_string(jrepo) || json_string_length(jrepo) == 0 ||
             json_string_length(jrepo) > 4096)) {
                reply_bad_field(d, req, "repo", "must be a repository URL of at most 4096 bytes");
                goto out;
        }
        if (jrev && !json_is_null(jrev) &&
            (!json_is_string(jrev) || json_string_length(jrev) == 0 ||
             json_string_length(jrev) > 256 || json_string_value(jrev)[0] == '-' ||
             strlen(json_string_value(jrev)) != json_string_length(jrev))) {
                reply_bad_field(d, req, "rev",
                                "must be a branch, tag or commit of at most 256 bytes");
                goto out;
        }
        bool repo = json_is_string(jrepo);
        if (json_is_string(jrev) && !repo) {
                reply_bad_field(d, req, "rev", "needs \"repo\"");
                goto out;
        }
        if (repo && !require(d, req, g, g->allow_git, "allowGit"))
                goto out;

        /* The pool serves creates that ask for nothing but a class (not a
         * tier: the pool's are namespace sandboxes, never a weaker stand-in). */
        bool plain =
            !d->hardware_path &&
            (!jpolicy || json_is_null(jpolicy) || json_object_size(jpolicy) == 0) &&
            (!jws || json_is_null(jws)) && !json_is_true(jreview) && !repo &&
            !json_object_get(body, "volumes") && !json_object_get(body, "home") &&
            (!json_object_get(body, "tier") || json_is_null(json_object_get(body, "tier")));
        const char *class_name = json_is_string(jclass) ? json_string_value(jclass) : NULL;

        struct al_error err = {0};
        /* Tools and devices run on, or are reached from, the host: what
         * they are is the operator's to say, never an API client's. */
        if (refuse_host_config(d, req, jpolicy))
                goto out;
        p = policy_new();
        if (jpolicy && json_is_object(jpolicy)) {
                _cleanup_free_ char *text = json_dumps(jpolicy, JSON_COMPACT);
                if (policy_load_string(p, text, "policy", &err) < 0) {
                        reply_error_fields(d, req, 400, "invalid_policy",
                                           json_pack("{s:s}", "field", "policy"), "%s", err.msg);
                        goto out;
                }
        }
        if (volumes_apply_create(d, req, g, body, p) < 0) /* volumes.c */
                goto out;
        /* Secrets and host paths the policy names, before anything of the
         * host is looked at for it. */
        struct grant_policy_refusal why_not;
        if (grant_check_policy(g, p, &why_not) < 0) {
                over_limit(d, req, why_not.limit, "%s", why_not.message);
                goto out;
        }
        if (d->tools_path && policy_tools_load_file(p, d->tools_path, &err) < 0) {
                reply_error(d, req, 500, "internal", "airlockd --tools: %s", err.msg);
                goto out;
        }
        if (d->hardware_path && policy_hardware_load_file(p, d->hardware_path, &err) < 0) {
                reply_error(d, req, 500, "internal", "airlockd --hardware: %s", err.msg);
                goto out;
        }
        if (json_is_true(jreview))
                p->workspace_mode = POLICY_WORKSPACE_OVERLAY;
        json_t *jtier = json_object_get(body, "tier");
        if (jtier && !json_is_null(jtier) &&
            (!json_is_string(jtier) || policy_set_tier(p, json_string_value(jtier), &err) < 0)) {
                reply_bad_field(d, req, "tier", "must be one of " POLICY_TIER_NAMES);
                goto out;
        }
        if (class_name && policy_set_class(p, class_name, &err) < 0) {
                reply_error_fields(d, req, 400, "bad_request", json_pack("{s:s}", "field", "class"),
                                   "%s", err.msg);
                goto out;
        }
        if (policy_finalize(p, "/", d->home, &err) < 0) {
                reply_error_fields(d, req, 400, "invalid_policy",
                                   json_pack("{s:s}", "field", "policy"), "%s", err.msg);
                goto out;
        }

        /* What the grant allows: its classes, and their largest limits. */
        struct grant_policy_refusal over;
        if (grant_check_limits(g, p, &over) < 0) {
                over_limit(d, req, over.limit, "%s", over.message);
                goto out;
        }
        const char *host_ws = json_is_string(jws) ? json_string_value(jws) : p->workspace;
        if (p->workspace_mode == POLICY_WORKSPACE_OVERLAY && !host_ws && !repo) {
                reply_bad_field(
                    d, req, "review",
                    "needs a workspace: the host directory the changes are proposed for");
                goto out;
        }
        if (repo && (host_ws || p->workspace_mode == POLICY_WORKSPACE_OVERLAY)) {
                reply_bad_field(
                    d, req, "repo",
                    host_ws ? "cannot be combined with a workspace: the clone is the workspace"
                            : "cannot be combined with review: the agent's commits are what "
                              "is reviewed (export, push)");
                goto out;
        }
        if (repo) {
                struct changes_refusal why;
                if (changes_check_repo(d, g, json_string_value(jrepo), &why) < 0) {
                        if (why.status == 400)
                                reply_error_fields(d, req, 400, "bad_request",
                                                   json_pack("{s:s}", "field", "repo"), "%s",
                                                   why.message);
                        else if (why.limit)
                                over_limit(d, req, why.limit, "%s", why.message);
                        else
                                reply_error(d, req, why.status, why.code, "%s", why.message);
                        goto out;
                }
        }
        bool host_paths = host_ws || policy_host_mounts(p) > 0 || p->read == POLICY_READ_HOST;
        if (host_paths && !g->allow_host_workspace) {
                over_limit(d, req, "allowHostWorkspace", "%s%s",
                           host_ws                 ? "a host workspace"
                           : policy_host_mounts(p) ? "host mounts"
                                                   : "filesystem.read \"host\"",
                           " needs a grant with allowHostWorkspace");
                goto out;
        }
        struct create_req *cr = xcalloc(1, sizeof(*cr));
        cr->d = d;
        cr->req = req;
        cr->grant = xstrdup(g->name);
        cr->max_sandboxes = g->max_sandboxes;
        cr->body = json_incref(body);
        cr->policy = TAKE_PTR(p);
        cr->plain = plain;
        cr->ttl = ttl;
        cr->idle = idle;
        if (!host_ws) {
                create_rest(cr);
                goto out;
        }
        cr->ws = xstrdup(host_ws);
        /* Whether it is a directory, and its .airlock/isolation.json as
         * airlock run reads it: in a child with a time limit, off the
         * loop, as a path that never answers must stall neither the
         * daemon nor any other request. */
        if (hostws_start(d->base, cr->ws, on_hostws, cr, &err) < 0) {
                reply_error(d, req, 503, "overloaded", "%s", err.msg);
                create_req_free(cr);
        }
out:
        policy_free(p);
        json_decref(body);
}

/* GET /v1/sandboxes */

/* The "next" token of a page: the last sandbox's creation time and id,
 * "<created_ms>-<id>", where the next page starts (after it). */
static int parse_page_token(const char *s, uint64_t *ret_ms, char ret_id[static 17])
{
        const char *dash = strchr(s, '-');
        if (!dash || dash == s || dash - s > 20 || strlen(dash + 1) != 16 ||
            strspn(dash + 1, "0123456789abcdef") != 16)
                return -EINVAL;
        char num[21];
        memcpy(num, s, (size_t)(dash - s));
        num[dash - s] = '\0';
        if (safe_atou64(num, ret_ms) < 0 || *ret_ms > INT64_MAX)
                return -EINVAL;
        memcpy(ret_id, dash + 1, 17);
        return 0;
}

static void handle_list(struct daemon *d, struct evhttp_request *req, const struct query *q)
{
        struct store_filter f = {0};
        char after_id[17];
        for (size_t i = 0; i < q->n; i++) {
                const char *k = q->key[i];
                if (STREQ(k, "state")) {
                        bool known = false;
                        for (size_t s = 0; s < SANDBOX_STATE_COUNT; s++)
                                known = known || (STREQ(q->value[i], sandbox_state_names[s]) &&
                                                  s != SANDBOX_POOLED);
                        if (!known) {
                                reply_bad_field(
                                    d, req, "state",
                                    "must be starting, running, stopping, destroyed or failed");
                                return;
                        }
                        f.state = q->value[i];
                } else if (STREQ(k, "limit")) {
                        uint64_t n;
                        if (safe_atou64(q->value[i], &n) < 0 || n == 0 || n > 10000) {
                                reply_bad_field(d, req, "limit", "must be from 1 to 10000");
                                return;
                        }
                        f.limit = (size_t)n;
                } else if (strncmp(k, "metadata.", 9) == 0 && valid_meta_key(k + 9)) {
                        if (f.n_meta >= STORE_META_MAX) {
                                reply_bad_field(d, req, "metadata", "at most 32 filters");
                                return;
                        }
                        f.meta_key[f.n_meta] = k + 9;
                        f.meta_value[f.n_meta] = q->value[i];
                        f.n_meta++;
                } else if (STREQ(k, "grant")) {
                        f.grant = q->value[i];
                } else if (STREQ(k, "next")) {
                        if (parse_page_token(q->value[i], &f.after_created_ms, after_id) < 0) {
                                reply_bad_field(d, req, "next",
                                                "must be the \"next\" token a previous page gave");
                                return;
                        }
                        f.after_id = after_id;
                } else {
                        reply_error_fields(d, req, 400, "bad_request",
                                           json_pack("{s:s}", "field", k),
                                           "unknown query parameter \"%s\"", k);
                        return;
                }
        }
        struct store_sandbox **v = NULL;
        size_t n = 0;
        /* One more than the page: whether another page follows. */
        size_t page = f.limit ? f.limit : 1000;
        f.limit = page + 1;
        int r = store_sandbox_list(d->store, &f, &v, &n);
        if (r < 0) {
                reply_error(d, req, 500, "internal", "listing sandboxes: %s", strerror(-r));
                return;
        }
        json_t *arr = json_array();
        for (size_t i = 0; i < n && i < page; i++) {
                struct sandbox *live = sandbox_find(d, v[i]->id);
                json_array_append_new(arr, sandbox_record_json(v[i], live));
        }
        json_t *next =
            n > page ? json_sprintf("%" PRIu64 "-%s", v[page - 1]->created_ms, v[page - 1]->id)
                     : json_null();
        store_sandboxes_free(v, n);
        reply_json(d, req, 200, json_pack("{s:o, s:o}", "sandboxes", arr, "next", next));
}

/* GET /v1/sandboxes/{id} */

struct get_ctx {
        struct daemon *d;
        struct evhttp_request *req;
};

static void on_get_status(struct sandbox *sb, int error, const char *message, void *userdata)
{
        struct get_ctx *c = userdata;
        reply_json(c->d, c->req, 200, live_json(sb));
        free(c);
}

static void handle_get(struct daemon *d, struct evhttp_request *req, const char *id)
{
        struct sandbox *sb = sandbox_find(d, id);
        if (sb && sb->state == SANDBOX_RUNNING) {
                struct get_ctx *c = xcalloc(1, sizeof(*c));
                c->d = d;
                c->req = req;
                if (sandbox_refresh_status(sb, on_get_status, c) < 0) {
                        free(c);
                        reply_json(d, req, 200, live_json(sb));
                }
                return;
        }
        if (sb && sb->state != SANDBOX_POOLED) {
                reply_json(d, req, 200, live_json(sb));
                return;
        }
        struct store_sandbox *r = find_recorded(d, req, id);
        if (!r)
                return;
        reply_json(d, req, 200, sandbox_record_json(r, NULL));
        store_sandbox_free(r);
}

/* DELETE /v1/sandboxes/{id} */

static void on_destroyed(struct sandbox *sb, int error, const char *message, void *userdata)
{
        struct get_ctx *c = userdata;
        al_trace_mark("destroy.done");
        reply_json(c->d, c->req, 200, live_json(sb));
        al_trace_mark("destroy.reply");
        free(c);
}

static void handle_delete(struct daemon *d, struct evhttp_request *req, struct grant *g,
                          const char *id)
{
        if (!require(d, req, g, g->allow_sandbox, "allowSandbox"))
                return;
        struct sandbox *sb = sandbox_find(d, id);
        if (!sb || sb->state == SANDBOX_POOLED) {
                handle_get(d, req, id);
                return;
        }
        record_audit(d, id, "api.destroy", json_pack("{s:s}", "grant", g->name));
        al_trace_mark("destroy.audit");
        struct get_ctx *c = xcalloc(1, sizeof(*c));
        c->d = d;
        c->req = req;
        sandbox_destroy(sb, "api", on_destroyed, c);
}

/* POST /v1/sandboxes/{id}/ttl */

static void handle_ttl(struct daemon *d, struct evhttp_request *req, struct grant *g,
                       const char *id)
{
        if (!require(d, req, g, g->allow_sandbox, "allowSandbox") || refuse_lost_store(d, req))
                return;
        json_t *body = read_json_body(d, req, false);
        if (!body)
                return;
        static const char *const keys[] = {"ttl", NULL};
        double ttl;
        struct sandbox *sb;
        if (reject_unknown(d, req, body, keys))
                goto out;
        if (body_seconds(body, "ttl", TTL_MAX_S, &ttl) < 0 || ttl < 0) {
                reply_bad_field(d, req, "ttl", "must be a number of seconds from 0 to 2592000");
                goto out;
        }
        sb = find_running(d, req, id);
        if (!sb)
                goto out;
        uint64_t was = sb->expires_ms;
        sb->expires_ms = ttl > 0 ? daemon_now_ms() + (uint64_t)(ttl * 1000) : 0;
        sandbox_touch(sb);
        if (sandbox_save(sb) < 0) {
                sb->expires_ms = was;
                reply_error(d, req, 503, "store_unavailable", "the TTL was not changed: %s",
                            store_last_error(d->store));
                goto out;
        }
        reply_json(d, req, 200, live_json(sb));
out:
        json_decref(body);
}

/* exec, attach, stdin and signal: one control call each */

void route_sandbox_create(struct daemon *d, struct evhttp_request *req, const struct route_args *a)
{
        handle_create(d, req, a->grant);
}

void route_sandbox_list(struct daemon *d, struct evhttp_request *req, const struct route_args *a)
{
        handle_list(d, req, a->query);
}

void route_sandbox_get(struct daemon *d, struct evhttp_request *req, const struct route_args *a)
{
        handle_get(d, req, a->id);
}

void route_sandbox_delete(struct daemon *d, struct evhttp_request *req, const struct route_args *a)
{
        handle_delete(d, req, a->grant, a->id);
}

void route_sandbox_ttl(struct daemon *d, struct evhttp_request *req, const struct route_args *a)
{
        handle_ttl(d, req, a->grant, a->id);
}
