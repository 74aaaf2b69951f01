/* SPDX-License-Identifier: Apache-2.0 */
#include <ctype.h>
#include <event2/buffer.h>
#include <event2/bufferevent.h>
#include <event2/http.h>
#include <event2/keyvalq_struct.h>
#include <inttypes.h>
#include <signal.h>
#include <stdarg.h>
#include <string.h>
#include <sys/stat.h>

#include "audit.h"
#include "changes.h"
#include "ctl.h"
#include "daemon.h"
#include "files.h"
#include "grants.h"
#include "http.h"
#include "util.h"

#define JSON_BODY_MAX    (1u << 20)   /* a JSON request body */
#define STDIN_MAX        (8u << 20)   /* base64 text of stdin in one request */
#define STREAM_HIGH      (1u << 20)   /* bytes queued to a client before reading pauses */
#define STREAM_STALL_MS  (30u * 1000) /* a stream's client reads nothing this long: gone */
#define AUDIT_OUT_MAX    (16u << 20)  /* bytes of audit lines in one answer */
#define META_KEY_MAX     64
#define META_VALUE_MAX   256
#define TTL_MAX_S        (30.0 * 24 * 3600)
#define QUERY_MAX_PARAMS 40

/* answers */

static void count_reply(struct daemon *d, int code)
{
        d->metrics.http_requests++;
        if (code >= 400)
                d->metrics.http_errors++;
}

void reply_json(struct daemon *d, struct evhttp_request *req, int code, json_t *body)
{
        struct evbuffer *buf = evbuffer_new();
        char *text = body ? json_dumps(body, JSON_COMPACT) : NULL;
        json_decref(body);
        if (text) {
                evbuffer_add(buf, text, strlen(text));
                evbuffer_add(buf, "\n", 1);
                free(text);
        }
        reply_body(d, req, code, "application/json", buf);
        evbuffer_free(buf);
}

void reply_body(struct daemon *d, struct evhttp_request *req, int code, const char *type,
                struct evbuffer *body)
{
        evhttp_add_header(evhttp_request_get_output_headers(req), "Content-Type", type);
        count_reply(d, code);
        evhttp_send_reply(req, code, NULL, body);
}

void reply_error_fields(struct daemon *d, struct evhttp_request *req, int code, const char *error,
                        json_t *extra, const char *fmt, ...)
{
        char msg[AL_ERROR_MAX + 256];
        va_list ap;
        va_start(ap, fmt);
        vsnprintf(msg, sizeof(msg), fmt, ap);
        va_end(ap);
        json_t *o = json_pack("{s:s}", "error", error);
        json_t *m = json_string(msg);
        json_object_set_new(o, "message", m ? m : json_string("(message not UTF-8)"));
        if (extra) {
                json_object_update(o, extra);
                json_decref(extra);
        }
        if (code == 401)
                evhttp_add_header(evhttp_request_get_output_headers(req), "WWW-Authenticate",
                                  "Bearer");
        reply_json(d, req, code, o);
}

void reply_bad_field(struct daemon *d, struct evhttp_request *req, const char *field,
                            const char *what)
{
        reply_error_fields(d, req, 400, "bad_request", json_pack("{s:s}", "field", field),
                           "\"%s\" %s", field, what);
}

/* requests */

struct query {
        char *key[QUERY_MAX_PARAMS];
        char *value[QUERY_MAX_PARAMS];
        size_t n;
};

static void query_free(struct query *q)
{
        for (size_t i = 0; i < q->n; i++) {
                free(q->key[i]);
                free(q->value[i]);
        }
        q->n = 0;
}

/* Split and percent-decode a query string; a decoded NUL is an error rather
 * than a place to cut a path short. On failure nothing is left allocated:
 * the parameters decoded so far are freed here, not by the caller. */
static int query_parse(const char *s, struct query *q)
{
        q->n = 0;
        if (!s)
                return 0;
        while (*s) {
                size_t n = strcspn(s, "&");
                if (n > 0) {
                        if (q->n >= QUERY_MAX_PARAMS) {
                                query_free(q);
                                return -E2BIG;
                        }
                        _cleanup_free_ char *part = xasprintf("%.*s", (int)n, s);
                        char *eq = strchr(part, '=');
                        if (eq)
                                *eq = '\0';
                        size_t klen = 0, vlen = 0;
                        char *k = evhttp_uridecode(part, 1, &klen);
                        char *v = evhttp_uridecode(eq ? eq + 1 : "", 1, &vlen);
                        if (!k || !v || strlen(k) != klen || strlen(v) != vlen) {
                                free(k);
                                free(v);
                                query_free(q);
                                return -EINVAL;
                        }
                        q->key[q->n] = k;
                        q->value[q->n] = v;
                        q->n++;
                }
                s += n;
                if (*s == '&')
                        s++;
        }
        return 0;
}

static const char *query_get(const struct query *q, const char *key)
{
        for (size_t i = 0; i < q->n; i++)
                if (STREQ(q->key[i], key))
                        return q->value[i];
        return NULL;
}

static int query_bool(const struct query *q, const char *key, bool dflt, bool *ret)
{
        const char *v = query_get(q, key);
        if (!v) {
                *ret = dflt;
                return 0;
        }
        if (STREQ(v, "1") || STREQ(v, "true") || STREQ(v, "yes")) {
                *ret = true;
                return 0;
        }
        if (STREQ(v, "0") || STREQ(v, "false") || STREQ(v, "no")) {
                *ret = false;
                return 0;
        }
        return -EINVAL;
}

json_t *read_json_body(struct daemon *d, struct evhttp_request *req, bool allow_empty)
{
        struct evbuffer *in = evhttp_request_get_input_buffer(req);
        size_t len = evbuffer_get_length(in);
        if (len > JSON_BODY_MAX) {
                reply_error(d, req, 413, "too_large", "the request body is larger than %u bytes",
                            JSON_BODY_MAX);
                return NULL;
        }
        if (len == 0 && allow_empty)
                return json_object();
        json_error_t jerr;
        json_t *o = json_loadb((const char *)evbuffer_pullup(in, -1), len, JSON_REJECT_DUPLICATES,
                               &jerr);
        if (!o) {
                reply_error_fields(d, req, 400, "bad_request", json_pack("{s:s}", "field", "body"),
                                   "the body is not JSON: %s (line %d, column %d)", jerr.text,
                                   jerr.line, jerr.column);
                return NULL;
        }
        if (!json_is_object(o)) {
                json_decref(o);
                reply_bad_field(d, req, "body", "must be a JSON object");
                return NULL;
        }
        return o;
}

/* The first key of `o` not in `allowed`, or NULL. */
static const char *unknown_key(json_t *o, const char *const *allowed)
{
        const char *key;
        json_t *v;
        json_object_foreach(o, key, v) {
                bool ok = false;
                for (const char *const *a = allowed; *a; a++)
                        ok = ok || STREQ(*a, key);
                if (!ok)
                        return key;
        }
        return NULL;
}

bool reject_unknown(struct daemon *d, struct evhttp_request *req, json_t *o,
                           const char *const *allowed)
{
        const char *k = unknown_key(o, allowed);
        if (!k)
                return false;
        reply_error_fields(d, req, 400, "bad_request", json_pack("{s:s}", "field", k),
                           "unknown field \"%s\"", k);
        return true;
}

/* A duration in seconds from a JSON number: -1 when absent or null. */
static int get_seconds(json_t *o, const char *key, double max, double *ret)
{
        json_t *v = json_object_get(o, key);
        if (!v || json_is_null(v)) {
                *ret = -1;
                return 0;
        }
        if (!json_is_number(v))
                return -EINVAL;
        double s = json_number_value(v);
        if (!(s >= 0) || s > max)
                return -ERANGE;
        *ret = s;
        return 0;
}

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

static bool valid_env_name(const char *k)
{
        if (!*k || isdigit((unsigned char)*k) || strlen(k) > 256)
                return false;
        for (const char *p = k; *p; p++)
                if (!isalnum((unsigned char)*p) && *p != '_')
                        return false;
        return true;
}

/* authorization */

static struct grant *authenticate(struct daemon *d, struct evhttp_request *req)
{
        const char *h = evhttp_find_header(evhttp_request_get_input_headers(req), "Authorization");
        const char *token;
        size_t len;
        if (!h) {
                reply_error(d, req, 401, "unauthorized", "an Authorization: Bearer token is required");
                return NULL;
        }
        if (grant_bearer_token(h, &token, &len) < 0) {
                reply_error(d, req, 401, "unauthorized", "the Authorization header is not \"Bearer TOKEN\"");
                return NULL;
        }
        char hash[GRANT_HASH_HEX + 1];
        grant_token_hash(token, len, hash);
        struct grant *g = NULL;
        int r = store_grant_by_hash(d->store, hash, &g);
        if (r == -ENOENT) {
                reply_error(d, req, 401, "unauthorized", "the token matches no grant in force");
                return NULL;
        }
        if (r < 0) {
                reply_error(d, req, 500, "internal", "looking up the grant: %s", strerror(-r));
                return NULL;
        }
        return g;
}

bool require(struct daemon *d, struct evhttp_request *req, const struct grant *g, bool allowed,
                    const char *permission)
{
        if (allowed)
                return true;
        reply_error_fields(d, req, 403, "authz_denied", json_pack("{s:s}", "permission", permission),
                           "grant \"%s\" does not allow this (%s)", g->name, permission);
        return false;
}

/* The audit log failed: say so in /healthz, and in the daemon's log once
 * per cause rather than once per request. */
static void audit_failed(struct daemon *d, const char *msg)
{
        if (!STREQ(d->audit_fault, msg))
                daemon_log(d, "audit: %s", msg);
        snprintf(d->audit_fault, sizeof(d->audit_fault), "%s", msg);
}

static void on_audit_flush(evutil_socket_t fd, short what, void *arg)
{
        struct daemon *d = arg;
        int r = d->audit ? audit_flush(d->audit) : 0;
        if (r < 0) {
                _cleanup_free_ char *m = xasprintf("syncing the audit log: %s", strerror(-r));
                audit_failed(d, m);
        }
}

/* Who asked for what, next to the supervisors' own events. Synced in
 * batches (AUDIT_BATCH_MS): an fdatasync per request would double the time
 * of an exec (an exec is made durable by its supervisor's process.started,
 * written after this line to the same file). Returns -errno, with
 * d->audit_fault saying why, when the line could not be written: the
 * action must then be refused. */
int record_audit(struct daemon *d, const char *sandbox, const char *kind, json_t *fields)
{
        struct al_error e = {0};
        int r = 0;
        if (d->audit && (r = audit_append(d->audit, sandbox, kind, fields, &e)) < 0)
                audit_failed(d, e.msg);
        json_decref(fields);
        if (!d->audit || !audit_flush_deadline(d->audit))
                return r;
        if (!d->audit_timer)
                d->audit_timer = evtimer_new(d->base, on_audit_flush, d);
        if (d->audit_timer && !evtimer_pending(d->audit_timer, NULL)) {
                struct timeval tv = {.tv_sec = 0, .tv_usec = AUDIT_BATCH_MS * 1000};
                evtimer_add(d->audit_timer, &tv);
        }
        return r;
}

/* As record_audit(), and durable before returning. */
static int record_audit_durably(struct daemon *d, const char *sandbox, const char *kind,
                                json_t *fields)
{
        int r = record_audit(d, sandbox, kind, fields);
        if (r < 0 || !d->audit)
                return r;
        r = audit_flush(d->audit);
        if (r < 0) {
                _cleanup_free_ char *m = xasprintf("syncing the audit log: %s", strerror(-r));
                audit_failed(d, m);
        }
        return r;
}

static void reply_audit_failed(struct daemon *d, struct evhttp_request *req, const char *why)
{
        evhttp_add_header(evhttp_request_get_output_headers(req), "Retry-After", "10");
        reply_error(d, req, 503, "audit_failed",
                    "refused: the audit log cannot be written (%s); nothing was done", why);
}

/* /healthz's view of the audit log: room for the records to come. */
static bool audit_healthy(struct daemon *d)
{
        struct al_error e = {0};
        if (!d->audit)
                return true;
        if (audit_reserve(d->audit, &e) < 0) {
                audit_failed(d, e.msg);
                return false;
        }
        int r = audit_flush(d->audit);
        if (r < 0) {
                _cleanup_free_ char *m = xasprintf("syncing the audit log: %s", strerror(-r));
                audit_failed(d, m);
                return false;
        }
        d->audit_fault[0] = '\0';
        return true;
}

/* the sandbox's view */

json_t *live_json(struct sandbox *sb)
{
        _cleanup_free_ char *meta = json_dumps(sb->metadata, JSON_COMPACT | JSON_SORT_KEYS);
        struct store_sandbox r = {
                .state = (char *)sandbox_state_names[sb->state],
                .grant = sb->grant,
                .class_name = sb->class_name,
                .metadata = meta,
                .policy = sb->policy_json,
                .workspace = sb->workspace,
                .workspace_owned = sb->workspace_owned,
                .pid = sb->pid,
                .created_ms = sb->created_ms,
                .expires_ms = sb->expires_ms,
                .idle_timeout_ms = sb->idle_timeout_ms,
                .last_active_ms = sb->last_active_ms,
                .ended_ms = sb->ended_ms,
                .reason = sb->end_reason,
        };
        memcpy(r.id, sb->id, sizeof(r.id));
        return sandbox_record_json(&r, sb);
}

struct store_sandbox *find_recorded(struct daemon *d, struct evhttp_request *req,
                                           const char *id)
{
        struct store_sandbox *r = NULL;
        if (store_sandbox_get(d->store, id, &r) < 0 || STREQ(r->state, "pooled")) {
                store_sandbox_free(r);
                reply_error(d, req, 404, "not_found", "no sandbox %s", id);
                return NULL;
        }
        return r;
}

/* A sandbox the API may act on: live and handed out (not pooled). NULL with
 * a 404 or 409 sent. */
static struct sandbox *find_running(struct daemon *d, struct evhttp_request *req, const char *id)
{
        struct sandbox *sb = sandbox_find(d, id);
        if (sb && sb->state == SANDBOX_RUNNING)
                return sb;
        if (!sb || sb->state == SANDBOX_POOLED) {
                struct store_sandbox *r = find_recorded(d, req, id);
                if (!r)
                        return NULL;
                reply_error_fields(d, req, 409, "not_running", json_pack("{s:s}", "state", r->state),
                                   "sandbox %s is %s", id, r->state);
                store_sandbox_free(r);
                return NULL;
        }
        reply_error_fields(d, req, 409, "not_running",
                           json_pack("{s:s}", "state", sandbox_state_names[sb->state]),
                           "sandbox %s is %s", id, sandbox_state_names[sb->state]);
        return NULL;
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

/* A lost or corrupt database takes no more writes (gc.c notices it): what
 * the daemon would record there would not be there after a restart. Nor
 * does a store whose last write failed, until gc.c's check finds that it
 * takes writes again (each second). */
static bool refuse_lost_store(struct daemon *d, struct evhttp_request *req)
{
        const char *why = daemon_health_get(d, "database");
        if (!why)
                why = daemon_health_get(d, "store");
        if (!why)
                return false;
        evhttp_add_header(evhttp_request_get_output_headers(req), "Retry-After", "60");
        reply_error(d, req, 503, "store_unavailable", "%s", why);
        return true;
}

/* A start that failed because its record could not be written is the
 * daemon's trouble, not the request's: 503, and /healthz says why. */
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
                audit_failed(d, message + 7);
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
        struct sandbox_params params = {
                .grant = c->grant,
                .metadata = c->metadata,
                .ttl_ms = c->ttl_ms,
                .idle_timeout_ms = c->idle_ms,
                .workspace = workspace,
                .id = id,
        };
        struct al_error err = {0};
        struct sandbox *sb = NULL;
        int r = sandbox_start(d, TAKE_PTR(c->policy), &params, on_created, c, &sb, &err);
        if (r < 0) {
                reply_start_error(d, c->req, r, err.msg);
                create_ctx_free(c);
        }
}

/* The largest limits of the classes a grant allows. */
static void class_ceiling(const struct grant *g, uint64_t *mem, uint64_t *cpus, uint64_t *timeout)
{
        *mem = *cpus = *timeout = 0;
        for (size_t i = 0; i < g->n_classes; i++) {
                const struct policy_class *c = policy_class_find(g->classes[i]);
                if (!c)
                        continue;
                *mem = c->memory > *mem ? c->memory : *mem;
                *cpus = c->cpus_milli > *cpus ? c->cpus_milli : *cpus;
                *timeout = c->timeout_ms > *timeout ? c->timeout_ms : *timeout;
        }
}

#define over_limit(d, req, limit, ...)                                                             \
        reply_error_fields(d, req, 403, "limit_exceeded", json_pack("{s:s}", "limit", limit),      \
                           __VA_ARGS__)

static void handle_create(struct daemon *d, struct evhttp_request *req, struct grant *g)
{
        if (!require(d, req, g, g->allow_sandbox, "allowSandbox") || refuse_lost_store(d, req))
                return;
        json_t *body = read_json_body(d, req, true);
        if (!body)
                return;
        static const char *const keys[] = {"policy", "class",     "metadata", "ttl", "idleTimeout",
                                           "workspace", "review", "repo", "rev", NULL};
        struct policy *p = NULL;
        _cleanup_free_ char *ws = NULL;
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
                        reply_bad_field(d, req, "metadata", "must be an object of at most 32 strings");
                        goto out;
                }
                const char *k;
                json_t *v;
                json_object_foreach(jmeta, k, v) {
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
        if (get_seconds(body, "ttl", TTL_MAX_S, &ttl) < 0) {
                reply_bad_field(d, req, "ttl", "must be a number of seconds from 0 to 2592000");
                goto out;
        }
        if (get_seconds(body, "idleTimeout", TTL_MAX_S, &idle) < 0) {
                reply_bad_field(d, req, "idleTimeout", "must be a number of seconds from 0 to 2592000");
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
                reply_bad_field(d, req, "rev", "must be a branch, tag or commit of at most 256 bytes");
                goto out;
        }
        bool repo = json_is_string(jrepo);
        if (json_is_string(jrev) && !repo) {
                reply_bad_field(d, req, "rev", "needs \"repo\"");
                goto out;
        }
        if (repo && !require(d, req, g, g->allow_git, "allowGit"))
                goto out;

        /* The pool serves creates that ask for nothing but a class. */
        bool plain = (!jpolicy || json_is_null(jpolicy) || json_object_size(jpolicy) == 0) &&
                     (!jws || json_is_null(jws)) && !json_is_true(jreview) && !repo;
        const char *class_name = json_is_string(jclass) ? json_string_value(jclass) : NULL;

        struct al_error err = {0};
        p = policy_new();
        if (jpolicy && json_is_object(jpolicy)) {
                _cleanup_free_ char *text = json_dumps(jpolicy, JSON_COMPACT);
                if (policy_load_string(p, text, "policy", &err) < 0) {
                        reply_error_fields(d, req, 400, "invalid_policy",
                                           json_pack("{s:s}", "field", "policy"), "%s", err.msg);
                        goto out;
                }
        }
        /* Secrets and host paths the policy names, before anything of the
         * host is looked at for it. */
        struct grant_policy_refusal why_not;
        if (grant_check_policy(g, p, &why_not) < 0) {
                over_limit(d, req, why_not.limit, "%s", why_not.message);
                goto out;
        }
        if (json_is_true(jreview))
                p->workspace_mode = POLICY_WORKSPACE_OVERLAY;
        if (class_name && policy_set_class(p, class_name, &err) < 0) {
                reply_error_fields(d, req, 400, "bad_request", json_pack("{s:s}", "field", "class"),
                                   "%s", err.msg);
                goto out;
        }
        if (policy_finalize(p, "/", d->home, &err) < 0) {
                reply_error_fields(d, req, 400, "invalid_policy", json_pack("{s:s}", "field", "policy"),
                                   "%s", err.msg);
                goto out;
        }
        const char *cls = p->class_name ? p->class_name : "medium";

        /* What the grant allows. */
        if (!grant_allows_class(g, cls)) {
                _cleanup_free_ char *allowed = grant_classes_string(g);
                over_limit(d, req, "classes", "class \"%s\" is beyond the grant's classes (%s)", cls,
                           allowed);
                goto out;
        }
        if (g->classes) {
                uint64_t mem, cpus, timeout;
                class_ceiling(g, &mem, &cpus, &timeout);
                char a[64], b[64];
                if (p->limits.memory > mem) {
                        snprintf(a, sizeof(a), "%" PRIu64, p->limits.memory);
                        snprintf(b, sizeof(b), "%" PRIu64, mem);
                        over_limit(d, req, "limits.memory",
                                   "limits.memory %s is beyond the grant's classes (at most %s)", a, b);
                        goto out;
                }
                if (p->limits.cpus_milli > cpus) {
                        snprintf(a, sizeof(a), "%.3f", (double)p->limits.cpus_milli / 1000);
                        snprintf(b, sizeof(b), "%.3f", (double)cpus / 1000);
                        over_limit(d, req, "limits.cpus",
                                   "limits.cpus %s is beyond the grant's classes (at most %s)", a, b);
                        goto out;
                }
                if (p->limits.timeout_ms == 0 || p->limits.timeout_ms > timeout) {
                        snprintf(a, sizeof(a), "%.3f", (double)p->limits.timeout_ms / 1000);
                        snprintf(b, sizeof(b), "%.3f", (double)timeout / 1000);
                        over_limit(d, req, "limits.timeout",
                                   "limits.timeout %s s is beyond the grant's classes (at most %s s)",
                                   p->limits.timeout_ms ? a : "none", b);
                        goto out;
                }
        }
        const char *host_ws = json_is_string(jws) ? json_string_value(jws) : p->workspace;
        if (p->workspace_mode == POLICY_WORKSPACE_OVERLAY && !host_ws && !repo) {
                reply_bad_field(d, req, "review",
                                "needs a workspace: the host directory the changes are proposed for");
                goto out;
        }
        if (repo && (host_ws || p->workspace_mode == POLICY_WORKSPACE_OVERLAY)) {
                reply_bad_field(d, req, "repo",
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
        bool host_paths = host_ws || p->n_mounts > 0 || p->read == POLICY_READ_HOST;
        if (host_paths && !g->allow_host_workspace) {
                over_limit(d, req, "allowHostWorkspace", "%s%s",
                           host_ws ? "a host workspace"
                                   : p->n_mounts ? "host mounts" : "filesystem.read \"host\"",
                           " needs a grant with allowHostWorkspace");
                goto out;
        }
        if (host_ws) {
                struct stat st;
                ws = xstrdup(host_ws);
                if (stat(ws, &st) < 0 || !S_ISDIR(st.st_mode)) {
                        reply_bad_field(d, req, "workspace", "must name an existing directory");
                        goto out;
                }
        }

        /* How many. */
        if (g->max_sandboxes && sandbox_count(d, g->name, false) >= g->max_sandboxes) {
                char n[32];
                snprintf(n, sizeof(n), "%" PRIu64, g->max_sandboxes);
                reply_error_fields(d, req, 429, "too_many_sandboxes",
                                   json_pack("{s:s, s:I}", "limit", "grant.maxSandboxes", "max",
                                             (json_int_t)g->max_sandboxes),
                                   "grant \"%s\" has its maximum of %s live sandboxes", g->name, n);
                goto out;
        }
        struct sandbox *pooled = plain ? pool_take(d, cls) : NULL;
        if (!pooled && d->max_sandboxes && sandbox_count(d, NULL, true) >= d->max_sandboxes) {
                reply_error_fields(d, req, 429, "too_many_sandboxes",
                                   json_pack("{s:s, s:I}", "limit", "daemon.maxSandboxes", "max",
                                             (json_int_t)d->max_sandboxes),
                                   "the daemon has its maximum of %" PRIu64 " live sandboxes",
                                   d->max_sandboxes);
                goto out;
        }

        uint64_t now = daemon_now_ms();
        if (pooled) {
                pooled->state = SANDBOX_RUNNING;
                free(pooled->grant);
                pooled->grant = xstrdup(g->name);
                json_decref(pooled->metadata);
                pooled->metadata = jmeta && json_is_object(jmeta) ? json_deep_copy(jmeta) : json_object();
                pooled->created_ms = now;
                pooled->last_active_ms = now;
                pooled->expires_ms = ttl > 0 ? now + (uint64_t)(ttl * 1000) : 0;
                pooled->idle_timeout_ms = idle > 0 ? (uint64_t)(idle * 1000) : 0;
                if (sandbox_save(pooled) < 0) {
                        /* Not recorded as this grant's: not handed out. */
                        sandbox_destroy(pooled, "store_failed", NULL, NULL);
                        reply_start_error(d, req, -EIO, store_last_error(d->store));
                        goto out;
                }
                if (record_audit_durably(d, pooled->id, "api.create",
                                         json_pack("{s:s, s:s, s:b}", "grant", g->name, "class",
                                                   cls, "pool", true)) < 0) {
                        sandbox_destroy(pooled, "audit_failed", NULL, NULL);
                        reply_audit_failed(d, req, d->audit_fault);
                        goto out;
                }
                d->metrics.creates++;
                d->metrics.pool_hits++;
                reply_json(d, req, 201, live_json(pooled));
                pool_refill_later(d);
                goto out;
        }

        struct sandbox_params params = {
                .grant = g->name,
                .metadata = jmeta && json_is_object(jmeta) ? jmeta : NULL,
                .ttl_ms = ttl > 0 ? (uint64_t)(ttl * 1000) : 0,
                .idle_timeout_ms = idle > 0 ? (uint64_t)(idle * 1000) : 0,
                .workspace = ws,
        };
        struct create_ctx *c = xcalloc(1, sizeof(*c));
        c->d = d;
        c->req = req;
        c->grant = xstrdup(g->name);
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
                goto out;
        }
        struct sandbox *sb = NULL;
        int r = sandbox_start(d, TAKE_PTR(p), &params, on_created, c, &sb, &err);
        if (r < 0) {
                create_ctx_free(c);
                reply_start_error(d, req, r, err.msg);
        }
out:
        policy_free(p);
        json_decref(body);
}

/* GET /v1/sandboxes */

static void handle_list(struct daemon *d, struct evhttp_request *req, const struct query *q)
{
        struct store_filter f = {0};
        for (size_t i = 0; i < q->n; i++) {
                const char *k = q->key[i];
                if (STREQ(k, "state")) {
                        bool known = false;
                        for (size_t s = 0; s < SANDBOX_STATE_COUNT; s++)
                                known = known || (STREQ(q->value[i], sandbox_state_names[s]) &&
                                                  s != SANDBOX_POOLED);
                        if (!known) {
                                reply_bad_field(d, req, "state",
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
                } else {
                        reply_error_fields(d, req, 400, "bad_request", json_pack("{s:s}", "field", k),
                                           "unknown query parameter \"%s\"", k);
                        return;
                }
        }
        struct store_sandbox **v = NULL;
        size_t n = 0;
        int r = store_sandbox_list(d->store, &f, &v, &n);
        if (r < 0) {
                reply_error(d, req, 500, "internal", "listing sandboxes: %s", strerror(-r));
                return;
        }
        json_t *arr = json_array();
        for (size_t i = 0; i < n; i++) {
                struct sandbox *live = sandbox_find(d, v[i]->id);
                json_array_append_new(arr, sandbox_record_json(v[i], live));
        }
        store_sandboxes_free(v, n);
        reply_json(d, req, 200, json_pack("{s:o}", "sandboxes", arr));
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
        reply_json(c->d, c->req, 200, live_json(sb));
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
        struct get_ctx *c = xcalloc(1, sizeof(*c));
        c->d = d;
        c->req = req;
        sandbox_destroy(sb, "api", on_destroyed, c);
}

/* POST /v1/sandboxes/{id}/ttl */

static void handle_ttl(struct daemon *d, struct evhttp_request *req, struct grant *g, const char *id)
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
        if (get_seconds(body, "ttl", TTL_MAX_S, &ttl) < 0 || ttl < 0) {
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

enum call_kind { CALL_EXEC, CALL_ATTACH, CALL_SIMPLE };

struct call_ctx {
        struct call_ctx *prev, *next;
        struct daemon *d;
        struct evhttp_request *req;
        struct evhttp_connection *conn;
        struct sandbox *sb;
        struct ctl_call *call;
        enum call_kind kind;
        bool background;
        bool replied;   /* the status line went out */
        bool streaming; /* a chunked NDJSON body is open */
        bool gone;      /* the client went away */
        bool saw_exit;
        bool saw_started;
        bool counted;
        bool utf8; /* ?encoding=utf8: output that is UTF-8 goes as "text" */
        uint64_t t0_us;
        uint64_t pid;
        uint64_t stall_ms; /* a client that reads nothing this long is gone */
        json_t *argv;
        char *grant;
        /* A command's output may overtake its "started" line on the way
         * from the supervisor; it waits here so that clients see started
         * first. */
        json_t *held;
        size_t held_bytes;
};

#define HELD_MAX_BYTES (1u << 20)

/* Before the last word to the client: the connection may carry the client's
 * next request, whose close callback is not ours to clear later. */
static void detach_conn(struct call_ctx *c)
{
        if (c->conn)
                evhttp_connection_set_closecb(c->conn, NULL, NULL);
        c->conn = NULL;
}

static void call_ctx_free(struct call_ctx *c)
{
        if (c->prev)
                c->prev->next = c->next;
        else if (c->d->calls == c)
                c->d->calls = c->next;
        if (c->next)
                c->next->prev = c->prev;
        detach_conn(c);
        if (c->sb) {
                if (c->kind != CALL_SIMPLE && c->sb->streams > 0)
                        c->sb->streams--;
                sandbox_touch(c->sb);
                sandbox_unref(c->sb);
        }
        json_decref(c->argv);
        json_decref(c->held);
        free(c->grant);
        free(c);
}

static int control_http_status(const char *code)
{
        if (!code)
                return 502;
        if (STREQ(code, "bad_request") || STREQ(code, "exec_failed"))
                return 400;
        if (STREQ(code, "unknown_process"))
                return 404;
        if (STREQ(code, "too_many_processes"))
                return 429;
        if (STREQ(code, "audit_failed"))
                return 503;
        if (STREQ(code, "destroyed"))
                return 409;
        return 500;
}

static void send_line(struct call_ctx *c, json_t *o);

static void on_client_drained(struct evhttp_connection *conn, void *arg)
{
        struct call_ctx *c = arg;
        if (c->call)
                ctl_call_pause(c->call, false);
}

/* ?encoding=utf8 (or base64, the default): 1, 0, or -1 for another value. */
static int query_utf8(struct evhttp_request *req)
{
        const char *q = evhttp_uri_get_query(evhttp_request_get_evhttp_uri(req));
        struct evkeyvalq params = {0};
        if (!q || evhttp_parse_query_str(q, &params) < 0) {
                evhttp_clear_headers(&params);
                return q ? -1 : 0;
        }
        const char *v = evhttp_find_header(&params, "encoding");
        int r = !v || STREQ(v, "base64") ? 0 : STREQ(v, "utf8") ? 1 : -1;
        evhttp_clear_headers(&params);
        return r;
}

/* Output whose bytes are valid UTF-8 as "text" in place of base64 "data". */
static json_t *as_text(json_t *o)
{
        const char *data = json_string_value(json_object_get(o, "data"));
        _cleanup_free_ unsigned char *bytes = NULL;
        size_t n = 0;
        json_t *text;
        if (!data || base64_decode(data, &bytes, &n) < 0 ||
            !(text = json_stringn((const char *)bytes, n)))
                return json_incref(o);
        json_t *copy = json_copy(o);
        json_object_del(copy, "data");
        json_object_set_new(copy, "text", text);
        return copy;
}

static void send_line(struct call_ctx *c, json_t *o)
{
        json_t *conv = c->utf8 ? as_text(o) : NULL;
        char *text = json_dumps(conv ? conv : o, JSON_COMPACT);
        json_decref(conv);
        if (!text)
                return;
        struct evbuffer *buf = evbuffer_new();
        evbuffer_add(buf, text, strlen(text));
        evbuffer_add(buf, "\n", 1);
        free(text);
        struct evhttp_connection *conn = evhttp_request_get_connection(c->req);
        if (!conn || c->gone) {
                evbuffer_free(buf);
                return;
        }
        evhttp_send_reply_chunk_with_cb(c->req, buf, on_client_drained, c);
        evbuffer_free(buf);
        struct bufferevent *bev = evhttp_connection_get_bufferevent(conn);
        if (bev && evbuffer_get_length(bufferevent_get_output(bev)) > STREAM_HIGH && c->call)
                ctl_call_pause(c->call, true);
}

static int record_process(struct call_ctx *c, json_t *exit)
{
        struct store *st = c->d->store;
        uint64_t now = daemon_now_ms();
        if (exit) {
                int64_t code = json_integer_value(json_object_get(exit, "exitCode"));
                const char *ec = json_string_value(json_object_get(exit, "errorCode"));
                int r = daemon_store_result(c->d, store_process_end(st, c->sb->id, c->pid, code,
                                                                    ec, now));
                if (r != -ENOENT) {
                        if (r < 0)
                                daemon_log(c->d, "sandbox %s: recording the end of process %" PRIu64
                                                 ": %s",
                                           c->sb->id, c->pid, store_last_error(st));
                        return r;
                }
        }
        /* Its start, or an end whose start was never seen (exec failed). */
        _cleanup_free_ char *argv = c->argv ? json_dumps(c->argv, JSON_COMPACT) : NULL;
        struct store_process p = {
                .pid = c->pid,
                .argv = argv,
                .background = c->background,
                .state = exit ? "exited" : "running",
                .exit_code = exit ? json_integer_value(json_object_get(exit, "exitCode")) : -1,
                .error_code = (char *)(exit ? json_string_value(json_object_get(exit, "errorCode"))
                                            : NULL),
                .started_ms = now,
                .ended_ms = exit ? now : 0,
        };
        memcpy(p.sandbox, c->sb->id, sizeof(p.sandbox));
        int r = daemon_store_result(c->d, store_process_put(st, &p));
        if (r < 0)
                daemon_log(c->d, "sandbox %s: recording process %" PRIu64 ": %s", c->sb->id, c->pid,
                           store_last_error(st));
        return r;
}

static void start_stream(struct call_ctx *c)
{
        c->replied = true;
        c->streaming = true;
        evhttp_add_header(evhttp_request_get_output_headers(c->req), "Content-Type",
                          "application/x-ndjson");
        evhttp_add_header(evhttp_request_get_output_headers(c->req), "Cache-Control", "no-store");
        count_reply(c->d, 200);
        evhttp_send_reply_start(c->req, 200, NULL);
        /* A command may be silent for longer than the request timeout; a
         * write timeout counts only while output waits, so it is the stall
         * bound: a client that takes nothing of it for that long is gone
         * (on_client_close), like the supervisor's own (docs/api.md). */
        struct evhttp_connection *conn = evhttp_request_get_connection(c->req);
        struct bufferevent *bev = conn ? evhttp_connection_get_bufferevent(conn) : NULL;
        if (bev) {
                uint64_t ms = c->stall_ms ? c->stall_ms : STREAM_STALL_MS;
                struct timeval wtv = {.tv_sec = (time_t)(ms / 1000),
                                      .tv_usec = (suseconds_t)(ms % 1000) * 1000};
                bufferevent_set_timeouts(bev, NULL, &wtv);
        }
}

static void kill_orphan(struct sandbox *sb, uint64_t pid, bool abandoned);

/* One event to the client, with the accounting of its end. */
static void relay(struct call_ctx *c, json_t *msg)
{
        struct daemon *d = c->d;
        const char *type = json_string_value(json_object_get(msg, "type"));
        if (type && STREQ(type, "exit")) {
                c->saw_exit = true;
                const char *ec = json_string_value(json_object_get(msg, "errorCode"));
                if (c->kind == CALL_EXEC) {
                        histogram_observe(&d->metrics.exec_duration,
                                          (double)(now_monotonic_us() - c->t0_us) / 1e6);
                        if (ec && STREQ(ec, "timeout"))
                                d->metrics.exec_timeouts++;
                        else if (ec && STREQ(ec, "oom_killed"))
                                d->metrics.exec_oom_kills++;
                        else if (ec && STREQ(ec, "exec_failed"))
                                d->metrics.exec_failures++;
                }
                if (!c->pid)
                        c->pid = (uint64_t)json_integer_value(json_object_get(msg, "pid"));
                if (c->pid && c->kind == CALL_EXEC)
                        record_process(c, msg);
                else if (c->pid && c->kind == CALL_ATTACH)
                        /* A watcher sees the end the daemon may have missed
                         * (it was down): written down if still open. */
                        (void)daemon_store_result(
                            d, store_process_end(d->store, c->sb->id, c->pid,
                                                 json_integer_value(json_object_get(msg, "exitCode")),
                                                 json_string_value(json_object_get(msg, "errorCode")),
                                                 daemon_now_ms()));
        }
        json_t *out = json_deep_copy(msg);
        json_object_del(out, "ok");
        send_line(c, out);
        json_decref(out);
}

static void flush_held(struct call_ctx *c)
{
        if (!c->held)
                return;
        json_t *held = c->held;
        c->held = NULL;
        c->held_bytes = 0;
        size_t i;
        json_t *m;
        json_array_foreach(held, i, m)
                relay(c, m);
        json_decref(held);
}

/* false: its record could not be written, and it has been killed. */
static bool on_started(struct call_ctx *c, json_t *msg)
{
        struct daemon *d = c->d;
        c->saw_started = true;
        c->pid = (uint64_t)json_integer_value(json_object_get(msg, "pid"));
        histogram_observe(&d->metrics.exec_start, (double)(now_monotonic_us() - c->t0_us) / 1e6);
        if (record_process(c, NULL) < 0) {
                /* Not recorded, not run: what a restart would not know of
                 * must not go on. */
                kill_orphan(c->sb, c->pid, false);
                return false;
        }
        /* Its client left before it started. */
        if (c->gone && !c->background)
                kill_orphan(c->sb, c->pid, true);
        return true;
}

static void on_call_line(struct ctl_call *call, json_t *msg, void *userdata)
{
        struct call_ctx *c = userdata;
        struct daemon *d = c->d;
        json_t *ok = json_object_get(msg, "ok");
        const char *type = json_string_value(json_object_get(msg, "type"));

        if (!c->replied && json_is_false(ok)) {
                const char *code = json_string_value(json_object_get(msg, "error"));
                const char *m = json_string_value(json_object_get(msg, "message"));
                c->replied = true;
                detach_conn(c);
                if (code && STREQ(code, "unknown_process"))
                        reply_error(d, c->req, 404, "not_found", "%s", m ? m : "no such process");
                else
                        reply_error(d, c->req, control_http_status(code), code ? code : "internal",
                                    "%s", m ? m : "the supervisor refused");
                return;
        }
        if (c->kind == CALL_SIMPLE) {
                if (!c->replied) {
                        c->replied = true;
                        detach_conn(c);
                        reply_json(d, c->req, 200, json_pack("{s:b}", "ok", 1));
                }
                return;
        }
        if (c->kind == CALL_EXEC && !c->counted) {
                c->counted = true;
                d->metrics.execs++;
        }
        if (c->kind == CALL_EXEC && !c->saw_started) {
                if (type && STREQ(type, "started")) {
                        if (!on_started(c, msg)) {
                                c->replied = true;
                                detach_conn(c);
                                reply_error(d, c->req, 503, "store_unavailable",
                                            "the command was stopped: its record could not be saved: %s",
                                            store_last_error(d->store));
                                return;
                        }
                        if (c->background) {
                                c->replied = true;
                                detach_conn(c);
                                reply_json(d, c->req, 201, json_pack("{s:I}", "pid", (json_int_t)c->pid));
                                return;
                        }
                        start_stream(c);
                        relay(c, msg);
                        flush_held(c);
                        return;
                }
                if (c->background) {
                        if (!c->replied && type && STREQ(type, "error")) {
                                const char *m = json_string_value(json_object_get(msg, "message"));
                                d->metrics.exec_failures++;
                                c->replied = true;
                                detach_conn(c);
                                reply_error(d, c->req, 400, "exec_failed", "%s", m ? m : "exec failed");
                        }
                        /* Output before "started" is kept by the supervisor
                         * for whoever attaches. */
                        return;
                }
                bool final = type && (STREQ(type, "error") || STREQ(type, "exit"));
                if (!final) {
                        _cleanup_free_ char *text = json_dumps(msg, JSON_COMPACT);
                        size_t n = text ? strlen(text) : 0;
                        if (c->held_bytes + n <= HELD_MAX_BYTES) {
                                if (!c->held)
                                        c->held = json_array();
                                json_array_append(c->held, msg);
                                c->held_bytes += n;
                                return;
                        }
                }
                /* It never started (exec failed), or "started" is late. */
                if (!c->replied)
                        start_stream(c);
                flush_held(c);
                relay(c, msg);
                return;
        }
        if (!c->replied)
                start_stream(c);
        if (c->streaming)
                relay(c, msg);
}

static void on_call_done(struct ctl_call *call, int error, void *userdata)
{
        struct call_ctx *c = userdata;
        struct daemon *d = c->d;
        c->call = NULL;
        if (!c->replied && c->held)
                start_stream(c);
        if (!c->replied) {
                if (c->kind == CALL_ATTACH && error == 0) {
                        /* Nothing kept and nothing running. */
                        start_stream(c);
                } else {
                        detach_conn(c);
                        reply_error(d, c->req, 502, "supervisor_unavailable",
                                    "the sandbox's supervisor did not answer%s%s",
                                    error < 0 ? ": " : "", error < 0 ? strerror(-error) : "");
                        call_ctx_free(c);
                        return;
                }
        }
        if (c->streaming)
                flush_held(c);
        if (c->streaming) {
                if (!c->saw_exit && c->kind == CALL_EXEC && !c->gone) {
                        json_t *o = json_pack("{s:s, s:s, s:s}", "type", "error", "error",
                                              "supervisor_gone", "message",
                                              "the sandbox ended before the command did");
                        send_line(c, o);
                        json_decref(o);
                }
                detach_conn(c);
                evhttp_send_reply_end(c->req);
        }
        call_ctx_free(c);
}

static const struct ctl_call_ops call_ops = {
        .line = on_call_line,
        .done = on_call_done,
};

static void kill_orphan(struct sandbox *sb, uint64_t pid, bool abandoned)
{
        json_t *req = json_pack("{s:s, s:I, s:i, s:b}", "op", "signal", "pid", (json_int_t)pid,
                                "signal", SIGKILL, "abandoned", abandoned);
        struct ctl_call *k = NULL;
        static const struct ctl_call_ops none = {0};
        (void)ctl_call_start(sb->d->base, sb->control_path, req, 5000, &none, NULL, &k);
        json_decref(req);
}

static void on_client_close(struct evhttp_connection *conn, void *arg)
{
        struct call_ctx *c = arg;
        c->gone = true;
        c->conn = NULL;
        if (c->kind == CALL_ATTACH) {
                /* Watching a process does not own it: let both ends go. */
                ctl_call_cancel(c->call);
                c->call = NULL;
                evhttp_send_reply_end(c->req); /* frees the detached request */
                call_ctx_free(c);
                return;
        }
        /* A foreground command dies with the client that waits for it
         * (on_started, when it has not started yet); what it still says is
         * read and dropped, so that its end is recorded. */
        if (c->kind == CALL_EXEC && !c->background && c->pid && !c->saw_exit && c->sb)
                kill_orphan(c->sb, c->pid, true);
        if (c->call)
                ctl_call_pause(c->call, false);
}

static void start_call(struct daemon *d, struct evhttp_request *req, struct sandbox *sb,
                       enum call_kind kind, json_t *ctl_req, struct call_ctx *c)
{
        c->d = d;
        c->req = req;
        c->sb = sb;
        c->kind = kind;
        c->t0_us = now_monotonic_us();
        sandbox_ref(sb);
        if (kind != CALL_SIMPLE)
                sb->streams++;
        sandbox_touch(sb);
        c->next = d->calls;
        if (c->next)
                c->next->prev = c;
        d->calls = c;
        int r = ctl_call_start(d->base, sb->control_path, ctl_req,
                               kind == CALL_SIMPLE ? 10000 : 0, &call_ops, c, &c->call);
        if (r < 0) {
                reply_error(d, req, 502, "supervisor_unavailable",
                            "the sandbox's supervisor did not answer: %s", strerror(-r));
                call_ctx_free(c);
                return;
        }
        c->conn = evhttp_request_get_connection(req);
        if (c->conn)
                evhttp_connection_set_closecb(c->conn, on_client_close, c);
}

static void handle_exec(struct daemon *d, struct evhttp_request *req, struct grant *g, const char *id)
{
        if (!require(d, req, g, g->allow_exec, "allowExec") || refuse_lost_store(d, req))
                return;
        json_t *body = read_json_body(d, req, false);
        if (!body)
                return;
        static const char *const keys[] = {"argv",    "env",          "cwd",        "stdin",
                                           "timeout", "stallTimeout", "background", NULL};
        json_t *ctl = NULL;
        if (reject_unknown(d, req, body, keys))
                goto out;
        if (query_utf8(req) < 0) {
                reply_bad_field(d, req, "encoding", "must be utf8 or base64");
                goto out;
        }
        json_t *argv = json_object_get(body, "argv");
        json_t *env = json_object_get(body, "env");
        json_t *cwd = json_object_get(body, "cwd");
        json_t *in = json_object_get(body, "stdin");
        json_t *bg = json_object_get(body, "background");
        double timeout, stall;
        size_t i;
        json_t *v;
        if (!json_is_array(argv) || json_array_size(argv) == 0 || json_array_size(argv) > 4096) {
                reply_bad_field(d, req, "argv", "must be a non-empty array of strings");
                goto out;
        }
        json_array_foreach(argv, i, v) {
                if (!json_is_string(v) || strlen(json_string_value(v)) != json_string_length(v)) {
                        _cleanup_free_ char *f = xasprintf("argv[%zu]", i);
                        reply_bad_field(d, req, f, "must be a string without NUL");
                        goto out;
                }
        }
        if (env && !json_is_null(env)) {
                const char *k;
                if (!json_is_object(env) || json_object_size(env) > 1024) {
                        reply_bad_field(d, req, "env", "must be an object of strings");
                        goto out;
                }
                json_object_foreach(env, k, v) {
                        if (!valid_env_name(k) || !json_is_string(v) ||
                            strlen(json_string_value(v)) != json_string_length(v)) {
                                _cleanup_free_ char *f = xasprintf("env.%s", k);
                                reply_bad_field(d, req, f,
                                                "must be a string, under a name of letters, digits and _");
                                goto out;
                        }
                }
        }
        if (cwd && !json_is_null(cwd) &&
            (!json_is_string(cwd) || json_string_value(cwd)[0] != '/' ||
             strlen(json_string_value(cwd)) != json_string_length(cwd))) {
                reply_bad_field(d, req, "cwd", "must be an absolute path inside the sandbox");
                goto out;
        }
        if (in && !json_is_null(in) && (!json_is_string(in) || json_string_length(in) > STDIN_MAX)) {
                reply_bad_field(d, req, "stdin", "must be base64 text of at most 6 MiB of data");
                goto out;
        }
        if (bg && !json_is_boolean(bg)) {
                reply_bad_field(d, req, "background", "must be true or false");
                goto out;
        }
        if (get_seconds(body, "timeout", 7 * 24 * 3600.0, &timeout) < 0 || timeout == 0) {
                reply_bad_field(d, req, "timeout", "must be a positive number of seconds");
                goto out;
        }
        if (get_seconds(body, "stallTimeout", 3600.0, &stall) < 0 || stall == 0) {
                reply_bad_field(d, req, "stallTimeout",
                                "must be a positive number of seconds, at most 3600");
                goto out;
        }
        struct sandbox *sb = find_running(d, req, id);
        if (!sb)
                goto out;
        /* The policy's wall clock bounds every command. */
        double cap = (double)sb->policy->limits.timeout_ms / 1000.0;
        if (cap > 0 && (timeout < 0 || timeout > cap))
                timeout = cap;

        ctl = json_pack("{s:s, s:O, s:b}", "op", "exec", "argv", argv, "background",
                        json_is_true(bg));
        if (env && json_is_object(env))
                json_object_set(ctl, "env", env);
        if (json_is_string(cwd))
                json_object_set(ctl, "cwd", cwd);
        if (json_is_string(in))
                json_object_set(ctl, "stdin", in);
        if (timeout > 0)
                json_object_set_new(ctl, "timeout", json_real(timeout));
        if (stall > 0)
                json_object_set_new(ctl, "stallTimeout", json_real(stall));
        if (record_audit(d, id, "api.exec", json_pack("{s:s, s:O, s:b}", "grant", g->name, "argv", argv,
                                                      "background", json_is_true(bg))) < 0) {
                reply_audit_failed(d, req, d->audit_fault);
                goto out;
        }
        struct call_ctx *c = xcalloc(1, sizeof(*c));
        c->utf8 = query_utf8(req) > 0;
        c->background = json_is_true(bg);
        c->stall_ms = stall > 0 ? (uint64_t)(stall * 1000) : 0;
        c->argv = json_incref(argv);
        c->grant = xstrdup(g->name);
        start_call(d, req, sb, CALL_EXEC, ctl, c);
out:
        json_decref(ctl);
        json_decref(body);
}

static bool parse_pid(const char *s, uint64_t *ret)
{
        return safe_atou64(s, ret) == 0 && *ret > 0 && *ret < (1u << 30);
}

/* ?from=N: the first event's sequence number a reconnecting client wants. */
static int events_from(struct evhttp_request *req, uint64_t *ret)
{
        *ret = 0;
        const char *q = evhttp_uri_get_query(evhttp_request_get_evhttp_uri(req));
        if (!q)
                return 0;
        struct evkeyvalq params = {0};
        if (evhttp_parse_query_str(q, &params) < 0) {
                evhttp_clear_headers(&params);
                return -EINVAL;
        }
        int r = 0;
        const char *v = evhttp_find_header(&params, "from");
        if (v && (safe_atou64(v, ret) < 0 || *ret > (1ull << 53)))
                r = -EINVAL;
        evhttp_clear_headers(&params);
        return r;
}

static void handle_events(struct daemon *d, struct evhttp_request *req, const char *id, uint64_t pid)
{
        uint64_t from = 0;
        if (events_from(req, &from) < 0) {
                reply_bad_field(d, req, "from", "must be an event's sequence number");
                return;
        }
        if (query_utf8(req) < 0) {
                reply_bad_field(d, req, "encoding", "must be utf8 or base64");
                return;
        }
        struct sandbox *sb = find_running(d, req, id);
        if (!sb)
                return;
        json_t *ctl = json_pack("{s:s, s:I}", "op", "attach", "pid", (json_int_t)pid);
        if (from > 0)
                json_object_set_new(ctl, "from", json_integer((json_int_t)from));
        struct call_ctx *c = xcalloc(1, sizeof(*c));
        c->pid = pid;
        c->utf8 = query_utf8(req) > 0;
        start_call(d, req, sb, CALL_ATTACH, ctl, c);
        json_decref(ctl);
}

static int parse_signal(json_t *v)
{
        static const struct {
                const char *name;
                int sig;
        } names[] = {
                {"HUP", SIGHUP},   {"INT", SIGINT},   {"QUIT", SIGQUIT}, {"KILL", SIGKILL},
                {"USR1", SIGUSR1}, {"USR2", SIGUSR2}, {"TERM", SIGTERM}, {"CONT", SIGCONT},
                {"STOP", SIGSTOP}, {"ALRM", SIGALRM}, {"WINCH", SIGWINCH},
        };
        if (json_is_integer(v)) {
                json_int_t n = json_integer_value(v);
                return n > 0 && n < 65 ? (int)n : -1;
        }
        if (!json_is_string(v))
                return -1;
        const char *s = json_string_value(v);
        if (strncmp(s, "SIG", 3) == 0)
                s += 3;
        for (size_t i = 0; i < ARRAY_SIZE(names); i++)
                if (STREQ(s, names[i].name))
                        return names[i].sig;
        return -1;
}

static void handle_stdin_or_signal(struct daemon *d, struct evhttp_request *req, struct grant *g,
                                   const char *id, uint64_t pid, bool is_signal)
{
        if (!require(d, req, g, g->allow_exec, "allowExec"))
                return;
        json_t *body = read_json_body(d, req, false);
        if (!body)
                return;
        static const char *const stdin_keys[] = {"data", "eof", NULL};
        static const char *const signal_keys[] = {"signal", NULL};
        json_t *ctl = NULL;
        if (reject_unknown(d, req, body, is_signal ? signal_keys : stdin_keys))
                goto out;
        if (is_signal) {
                int sig = parse_signal(json_object_get(body, "signal"));
                if (sig < 0) {
                        reply_bad_field(d, req, "signal", "must be a signal number or name (\"TERM\")");
                        goto out;
                }
                ctl = json_pack("{s:s, s:I, s:i}", "op", "signal", "pid", (json_int_t)pid, "signal", sig);
        } else {
                json_t *data = json_object_get(body, "data");
                json_t *eof = json_object_get(body, "eof");
                if (data && !json_is_null(data) &&
                    (!json_is_string(data) || json_string_length(data) > STDIN_MAX)) {
                        reply_bad_field(d, req, "data", "must be base64 text");
                        goto out;
                }
                if (eof && !json_is_boolean(eof)) {
                        reply_bad_field(d, req, "eof", "must be true or false");
                        goto out;
                }
                ctl = json_pack("{s:s, s:I, s:s, s:b}", "op", "stdin", "pid", (json_int_t)pid, "data",
                                json_is_string(data) ? json_string_value(data) : "", "eof",
                                json_is_true(eof));
        }
        struct sandbox *sb = find_running(d, req, id);
        if (!sb)
                goto out;
        struct call_ctx *c = xcalloc(1, sizeof(*c));
        c->pid = pid;
        start_call(d, req, sb, CALL_SIMPLE, ctl, c);
out:
        json_decref(ctl);
        json_decref(body);
}

static void handle_processes(struct daemon *d, struct evhttp_request *req, const char *id)
{
        struct store_sandbox *r = find_recorded(d, req, id);
        if (!r)
                return;
        store_sandbox_free(r);
        struct store_process **v = NULL;
        size_t n = 0;
        if (store_process_list(d->store, id, 1000, &v, &n) < 0) {
                reply_error(d, req, 500, "internal", "listing processes");
                return;
        }
        json_t *arr = json_array();
        for (size_t i = 0; i < n; i++) {
                json_error_t jerr;
                json_t *argv = json_loads(v[i]->argv ? v[i]->argv : "[]", 0, &jerr);
                json_array_append_new(
                        arr, json_pack("{s:I, s:o, s:b, s:s, s:o, s:s?}", "pid", (json_int_t)v[i]->pid,
                                       "argv", argv ? argv : json_array(), "background",
                                       v[i]->background, "state", v[i]->state ? v[i]->state : "",
                                       "exitCode",
                                       v[i]->exit_code >= 0 ? json_integer(v[i]->exit_code) : json_null(),
                                       "errorCode", v[i]->error_code));
        }
        store_processes_free(v, n);
        reply_json(d, req, 200, json_pack("{s:o}", "processes", arr));
}

/* files */

static int errno_status(int e, const char **code)
{
        switch (e) {
        case ENOENT:
                *code = "not_found";
                return 404;
        case EXDEV:
        case ELOOP:
                *code = "path_refused";
                return 403;
        case EACCES:
        case EPERM:
                *code = "permission_denied";
                return 403;
        case EFBIG:
                *code = "too_large";
                return 413;
        case ENOTEMPTY:
        case EEXIST:
                *code = "conflict";
                return 409;
        case EISDIR:
        case ENOTDIR:
        case EINVAL:
        case ENAMETOOLONG:
                *code = "bad_request";
                return 400;
        default:
                *code = "internal";
                return 500;
        }
}

static void reply_errno(struct daemon *d, struct evhttp_request *req, const struct al_error *err)
{
        const char *code;
        int status = errno_status(err->code, &code);
        reply_error_fields(d, req, status, code, json_pack("{s:s}", "field", "path"), "%s", err->msg);
}

static void free_reference(const void *data, size_t len, void *extra)
{
        free((void *)data);
}

static void handle_files(struct daemon *d, struct evhttp_request *req, struct grant *g,
                         const char *id, const struct query *q, bool list)
{
        enum evhttp_cmd_type cmd = evhttp_request_get_command(req);
        bool write = !list && (cmd == EVHTTP_REQ_PUT || cmd == EVHTTP_REQ_DELETE);
        if (write && !require(d, req, g, g->allow_exec, "allowExec"))
                return;
        struct al_error err = {0};
        const char *path = query_get(q, "path");
        if (!path && list)
                path = ".";
        if (!path) {
                reply_bad_field(d, req, "path", "is required");
                return;
        }
        _cleanup_free_ char *rel = NULL;
        if (files_clean_path(path, list || cmd == EVHTTP_REQ_GET, &rel, &err) < 0) {
                reply_errno(d, req, &err);
                return;
        }
        bool parents = true, recursive = false;
        if (query_bool(q, "parents", true, &parents) < 0 ||
            query_bool(q, "recursive", false, &recursive) < 0) {
                reply_bad_field(d, req, query_get(q, "parents") ? "parents" : "recursive",
                                "must be true or false");
                return;
        }
        struct sandbox *sb = find_running(d, req, id);
        if (!sb)
                return;
        if (sb->policy && sb->policy->workspace_mode == POLICY_WORKSPACE_OVERLAY) {
                /* These endpoints work on the host's directory: they would
                 * neither see the agent's changes nor go through review. */
                reply_error(d, req, 409, "review_workspace",
                            "the workspace of sandbox %s is copy-on-write: the files endpoints "
                            "would bypass review; use exec (cat, tee) inside it, and GET "
                            ".../diff for its changes",
                            id);
                return;
        }
        _cleanup_close_ int root = -1;
        if (files_open_root(sb->workspace, &root, &err) < 0) {
                reply_error(d, req, 500, "internal", "%s", err.msg);
                return;
        }
        sandbox_touch(sb);

        if (list) {
                json_t *o = NULL;
                if (files_list(root, rel, FILES_LIST_MAX, &o, &err) < 0)
                        reply_errno(d, req, &err);
                else
                        reply_json(d, req, 200, o);
                return;
        }
        if (cmd == EVHTTP_REQ_GET) {
                char *data = NULL;
                size_t len = 0;
                if (files_read(root, rel, FILES_MAX_SIZE, &data, &len, &err) < 0) {
                        reply_errno(d, req, &err);
                        return;
                }
                struct evbuffer *buf = evbuffer_new();
                evbuffer_add_reference(buf, data, len, free_reference, NULL);
                reply_body(d, req, 200, "application/octet-stream", buf);
                evbuffer_free(buf);
                return;
        }
        if (cmd == EVHTTP_REQ_PUT) {
                struct evbuffer *in = evhttp_request_get_input_buffer(req);
                size_t len = evbuffer_get_length(in);
                if (len > FILES_MAX_SIZE) {
                        reply_error(d, req, 413, "too_large", "a file may have at most %u bytes",
                                    FILES_MAX_SIZE);
                        return;
                }
                const void *data = len ? (const void *)evbuffer_pullup(in, -1) : (const void *)"";
                if (files_write(root, rel, data, len, parents, &err) < 0) {
                        reply_errno(d, req, &err);
                        return;
                }
                record_audit(d, id, "api.file_written",
                             json_pack("{s:s, s:s, s:I}", "grant", g->name, "path", rel, "bytes",
                                       (json_int_t)len));
                reply_json(d, req, 200, json_pack("{s:s, s:I}", "path", rel, "size", (json_int_t)len));
                return;
        }
        if (cmd == EVHTTP_REQ_DELETE) {
                if (files_delete(root, rel, recursive, &err) < 0) {
                        reply_errno(d, req, &err);
                        return;
                }
                record_audit(d, id, "api.file_deleted",
                             json_pack("{s:s, s:s}", "grant", g->name, "path", rel));
                reply_json(d, req, 200, json_pack("{s:s}", "deleted", rel));
                return;
        }
        reply_error(d, req, 405, "method_not_allowed", "use GET, PUT or DELETE");
}

/* GET /v1/sandboxes/{id}/audit */

struct audit_scan {
        const char *id;
        struct evbuffer *out;
        bool truncated;
};

static int audit_line(const char *line, size_t len, uint64_t lineno, bool complete, void *userdata)
{
        struct audit_scan *s = userdata;
        if (!complete)
                return 0;
        /* Cheap test first; the parse decides. */
        if (!memmem(line, len, s->id, strlen(s->id)))
                return 0;
        json_error_t jerr;
        json_t *o = json_loadb(line, len, 0, &jerr);
        const char *sb = json_string_value(json_object_get(o, "sandbox"));
        if (sb && STREQ(sb, s->id)) {
                if (evbuffer_get_length(s->out) + len + 1 > AUDIT_OUT_MAX) {
                        s->truncated = true;
                        json_decref(o);
                        return -E2BIG;
                }
                evbuffer_add(s->out, line, len);
                evbuffer_add(s->out, "\n", 1);
        }
        json_decref(o);
        return 0;
}

static void handle_audit(struct daemon *d, struct evhttp_request *req, const char *id)
{
        struct store_sandbox *r = find_recorded(d, req, id);
        if (!r)
                return;
        store_sandbox_free(r);
        struct evbuffer *out = evbuffer_new();
        struct audit_scan s = {.id = id, .out = out};
        if (d->audit_path) {
                char **paths = NULL;
                size_t n = 0;
                if (audit_rotated_paths(d->audit_path, &paths, &n) >= 0) {
                        for (size_t i = 0; i < n && !s.truncated; i++) {
                                struct al_error e = {0};
                                (void)audit_foreach_line(paths[i], audit_line, &s, &e);
                        }
                        strv_free(paths);
                }
        }
        struct evkeyvalq *h = evhttp_request_get_output_headers(req);
        evhttp_add_header(h, "Content-Type", "application/x-ndjson");
        if (s.truncated)
                evhttp_add_header(h, "X-Airlock-Truncated", "1");
        count_reply(d, 200);
        evhttp_send_reply(req, 200, NULL, out);
        evbuffer_free(out);
}

/* /healthz and /metrics */

static void handle_metrics(struct daemon *d, struct evhttp_request *req)
{
        struct metrics_live live = {
                .state_names = sandbox_state_names,
                .n_states = SANDBOX_STATE_COUNT,
                .max_sandboxes = d->max_sandboxes,
                .pool_ready = pool_ready(d),
        };
        for (struct sandbox *sb = d->sandboxes; sb; sb = sb->next) {
                if (sb->state < SANDBOX_DESTROYED)
                        live.by_state[sb->state]++;
                live.gate_allowed += sb->status.allowed;
                live.gate_denied += sb->status.denied;
                live.gate_bytes_up += sb->status.bytes_up;
                live.gate_bytes_down += sb->status.bytes_down;
                live.oom_kills += sb->status.oom_kills;
        }
        uint64_t destroyed = 0, failed = 0;
        (void)store_sandbox_count_state(d->store, "destroyed", &destroyed);
        (void)store_sandbox_count_state(d->store, "failed", &failed);
        live.by_state[SANDBOX_DESTROYED] = destroyed;
        live.by_state[SANDBOX_FAILED] = failed;
        char *text = metrics_render(&d->metrics, &live);
        struct evbuffer *buf = evbuffer_new();
        evbuffer_add(buf, text, strlen(text));
        free(text);
        reply_body(d, req, 200, "text/plain; version=0.0.4", buf);
        evbuffer_free(buf);
}

/* routing */

static bool valid_id(const char *s, size_t n)
{
        if (n != 16)
                return false;
        for (size_t i = 0; i < n; i++)
                if (!isdigit((unsigned char)s[i]) && !(s[i] >= 'a' && s[i] <= 'f'))
                        return false;
        return true;
}

static bool method_is(struct daemon *d, struct evhttp_request *req, enum evhttp_cmd_type want,
                      const char *allow)
{
        if (evhttp_request_get_command(req) == want)
                return true;
        evhttp_add_header(evhttp_request_get_output_headers(req), "Allow", allow);
        reply_error(d, req, 405, "method_not_allowed", "use %s", allow);
        return false;
}

static void route(struct daemon *d, struct evhttp_request *req)
{
        const struct evhttp_uri *uri = evhttp_request_get_evhttp_uri(req);
        const char *path = uri ? evhttp_uri_get_path(uri) : NULL;
        enum evhttp_cmd_type cmd = evhttp_request_get_command(req);
        if (http_guard_refused(d, req))
                return;
        if (!path) {
                reply_error(d, req, 400, "bad_request", "no path");
                return;
        }
        /* Who asks comes first: nothing of a request is parsed or kept
         * for a client that has not shown a grant. */
        _cleanup_grant_ struct grant *g = authenticate(d, req);
        if (!g)
                return;
        struct query q = {0};
        if (query_parse(evhttp_uri_get_query(uri), &q) < 0) {
                reply_error(d, req, 400, "bad_request", "the query string is malformed");
                return;
        }

        if (STREQ(path, "/healthz")) {
                if (method_is(d, req, EVHTTP_REQ_GET, "GET")) {
                        _cleanup_free_ char *why =
                            audit_healthy(d) ? NULL : xasprintf("audit log: %s", d->audit_fault);
                        daemon_health_set(d, "audit", why);
                        json_t *h = json_pack("{s:b, s:s, s:I}", "ok", 1, "version", "0.1.0",
                                              "sandboxes", (json_int_t)sandbox_count(d, NULL, false));
                        daemon_health_fill(d, h); /* health.c: "ok" and its reasons */
                        reply_json(d, req, daemon_health_ok(d) ? 200 : 503, h);
                }
                goto out;
        }
        if (STREQ(path, "/metrics")) {
                if (method_is(d, req, EVHTTP_REQ_GET, "GET"))
                        handle_metrics(d, req);
                goto out;
        }
        if (STREQ(path, "/v1/sandboxes") || STREQ(path, "/v1/sandboxes/")) {
                if (cmd == EVHTTP_REQ_POST)
                        handle_create(d, req, g);
                else if (method_is(d, req, EVHTTP_REQ_GET, "GET, POST"))
                        handle_list(d, req, &q);
                goto out;
        }
        if (strncmp(path, "/v1/sandboxes/", 14) != 0) {
                reply_error(d, req, 404, "not_found", "no such endpoint: %s", path);
                goto out;
        }
        const char *rest = path + 14;
        size_t idlen = strcspn(rest, "/");
        if (!valid_id(rest, idlen)) {
                reply_error(d, req, 404, "not_found", "no sandbox %.*s", (int)(idlen > 64 ? 64 : idlen),
                            rest);
                goto out;
        }
        char id[17];
        memcpy(id, rest, 16);
        id[16] = '\0';
        rest += idlen;

        if (!*rest) {
                if (cmd == EVHTTP_REQ_DELETE)
                        handle_delete(d, req, g, id);
                else if (method_is(d, req, EVHTTP_REQ_GET, "GET, DELETE"))
                        handle_get(d, req, id);
        } else if (STREQ(rest, "/ttl")) {
                if (method_is(d, req, EVHTTP_REQ_POST, "POST"))
                        handle_ttl(d, req, g, id);
        } else if (STREQ(rest, "/exec")) {
                if (method_is(d, req, EVHTTP_REQ_POST, "POST"))
                        handle_exec(d, req, g, id);
        } else if (STREQ(rest, "/files")) {
                if (cmd == EVHTTP_REQ_GET || cmd == EVHTTP_REQ_PUT || cmd == EVHTTP_REQ_DELETE)
                        handle_files(d, req, g, id, &q, false);
                else
                        method_is(d, req, EVHTTP_REQ_GET, "GET, PUT, DELETE");
        } else if (STREQ(rest, "/files/list")) {
                if (method_is(d, req, EVHTTP_REQ_GET, "GET"))
                        handle_files(d, req, g, id, &q, true);
        } else if (STREQ(rest, "/diff")) {
                if (method_is(d, req, EVHTTP_REQ_GET, "GET"))
                        changes_diff(d, req, g, id);
        } else if (STREQ(rest, "/accept") || STREQ(rest, "/discard")) {
                if (method_is(d, req, EVHTTP_REQ_POST, "POST"))
                        changes_decide(d, req, g, id, STREQ(rest, "/accept"));
        } else if (STREQ(rest, "/export")) {
                if (method_is(d, req, EVHTTP_REQ_POST, "POST"))
                        changes_export(d, req, g, id);
        } else if (STREQ(rest, "/push")) {
                if (method_is(d, req, EVHTTP_REQ_POST, "POST"))
                        changes_push(d, req, g, id);
        } else if (STREQ(rest, "/audit")) {
                if (method_is(d, req, EVHTTP_REQ_GET, "GET"))
                        handle_audit(d, req, id);
        } else if (STREQ(rest, "/processes")) {
                if (method_is(d, req, EVHTTP_REQ_GET, "GET"))
                        handle_processes(d, req, id);
        } else if (strncmp(rest, "/processes/", 11) == 0) {
                const char *p = rest + 11;
                size_t n = strcspn(p, "/");
                _cleanup_free_ char *num = xasprintf("%.*s", (int)n, p);
                uint64_t pid;
                const char *tail = p + n;
                if (!parse_pid(num, &pid))
                        reply_error(d, req, 404, "not_found", "no process %s", num);
                else if (STREQ(tail, "/events")) {
                        if (method_is(d, req, EVHTTP_REQ_GET, "GET"))
                                handle_events(d, req, id, pid);
                } else if (STREQ(tail, "/stdin")) {
                        if (method_is(d, req, EVHTTP_REQ_POST, "POST"))
                                handle_stdin_or_signal(d, req, g, id, pid, false);
                } else if (STREQ(tail, "/signal")) {
                        if (method_is(d, req, EVHTTP_REQ_POST, "POST"))
                                handle_stdin_or_signal(d, req, g, id, pid, true);
                } else
                        reply_error(d, req, 404, "not_found", "no such endpoint: %s", path);
        } else {
                reply_error(d, req, 404, "not_found", "no such endpoint: %s", path);
        }
out:
        query_free(&q);
}

static void on_request(struct evhttp_request *req, void *arg)
{
        route(arg, req);
}

void api_shutdown(struct daemon *d)
{
        while (d->calls) {
                struct call_ctx *c = d->calls;
                ctl_call_cancel(c->call);
                c->call = NULL;
                if (c->streaming) {
                        json_t *o = json_pack("{s:s, s:s, s:s}", "type", "error", "error",
                                              "shutting_down", "message", "the daemon is stopping");
                        send_line(c, o);
                        json_decref(o);
                        detach_conn(c);
                        evhttp_send_reply_end(c->req);
                } else if (!c->replied) {
                        detach_conn(c);
                        reply_error(d, c->req, 503, "shutting_down", "the daemon is stopping");
                }
                call_ctx_free(c);
        }
}

int api_setup(struct daemon *d, struct al_error *err)
{
        d->http = evhttp_new(d->base);
        if (!d->http)
                return al_error_set(err, ENOMEM, "creating the HTTP server");
        evhttp_set_gencb(d->http, on_request, d);
        evhttp_set_max_headers_size(d->http, 32 * 1024);
        evhttp_set_max_body_size(d->http, FILES_MAX_SIZE + 64 * 1024);
        evhttp_set_timeout(d->http, 60);
        evhttp_set_allowed_methods(d->http, EVHTTP_REQ_GET | EVHTTP_REQ_POST | EVHTTP_REQ_PUT |
                                                    EVHTTP_REQ_DELETE);
        return 0;
}
