/* SPDX-License-Identifier: Apache-2.0 */
#pragma once

#include <event2/http.h>
#include <jansson.h>
#include <stdbool.h>
#include <stdint.h>

#include "daemon.h"
#include "grants.h"
#include "store.h"

/* The API server (src/daemon/http/, docs/internals/daemon.md): what its
 * files share. Answers and request reading (http.c), permissions (auth.c),
 * the sandbox a request names (lookup.c). */

/* Counted for /metrics: every reply goes through here. */
void count_reply(struct daemon *d, int code);

void reply_json(struct daemon *d, struct evhttp_request *req, int code, json_t *body);
/* {"error": CODE, "message": ..., and the extra fields}: `extra` is stolen. */
void reply_error_fields(struct daemon *d, struct evhttp_request *req, int code, const char *error,
                        json_t *extra, const char *fmt, ...) __attribute__((format(printf, 6, 7)));
#define reply_error(d, req, code, error, ...)                                                      \
        reply_error_fields(d, req, code, error, NULL, __VA_ARGS__)
void reply_bad_field(struct daemon *d, struct evhttp_request *req, const char *field,
                     const char *what);
/* A policy from an API client may not hold host configuration: tool
 * definitions (what runs on the host) or a hardware section (a driver the
 * host runs or reaches). true, with the 400 sent, when it does. */
bool refuse_host_config(struct daemon *d, struct evhttp_request *req, const json_t *jpolicy);
/* A body of bytes with its content type; `body` is drained. */
void reply_body(struct daemon *d, struct evhttp_request *req, int code, const char *type,
                struct evbuffer *body);

/* A 200 whose body is pulled from `src` one chunk at a time (stream.c):
 * pull adds the next chunk to `out` and answers > 0, or 0 at the end, or
 * < 0 on a read error (the client sees a short body). free_src is called
 * once, at the end or when the client goes away. Set the headers first. */
typedef int (*stream_pull_fn)(void *src, struct evbuffer *out);
typedef void (*stream_free_fn)(void *src);
void reply_stream(struct daemon *d, struct evhttp_request *req, stream_pull_fn pull,
                  stream_free_fn free_src, void *src);

/* 503 audit_failed: the action was refused because the log failed. */
void reply_audit_failed(struct daemon *d, struct evhttp_request *req, const char *why);

#define QUERY_MAX_PARAMS 40
/* The query string, percent-decoded. */
struct query {
        char *key[QUERY_MAX_PARAMS];
        char *value[QUERY_MAX_PARAMS];
        size_t n;
};
/* -E2BIG past QUERY_MAX_PARAMS, -EINVAL malformed (a decoded NUL). */
int query_parse(const char *s, struct query *q);
void query_free(struct query *q);
const char *query_get(const struct query *q, const char *key);
/* 1/true/yes, 0/false/no; dflt when absent; -EINVAL otherwise. */
int query_bool(const struct query *q, const char *key, bool dflt, bool *ret);

/* The body as JSON: NULL with a 400 or 413 already sent. */
json_t *read_json_body(struct daemon *d, struct evhttp_request *req, bool allow_empty);
/* True (with a 400 sent) when `o` has a key not in `allowed`. */
bool reject_unknown(struct daemon *d, struct evhttp_request *req, json_t *o,
                    const char *const *allowed);
/* A duration in seconds from a JSON number: -1 when absent or null;
 * -EINVAL not a number, -ERANGE negative or over max. */
int body_seconds(json_t *o, const char *key, double max, double *ret);

/* The grant of the request's bearer token; NULL with a 401 or 500 sent. */
struct grant *authenticate(struct daemon *d, struct evhttp_request *req);
/* ui.c: the grant of a dashboard session's cookie, under its CSRF rules:
 * 1 with *ret set, 0 when the request carries no session cookie, -1 with a
 * 401 or 403 sent. */
int ui_authenticate(struct daemon *d, struct evhttp_request *req, struct grant **ret);
/* False (with a 403 sent) when !allowed. */
bool require(struct daemon *d, struct evhttp_request *req, const struct grant *g, bool allowed,
             const char *permission);

/* The record of a sandbox as the API shows it; live: NULL once it ended. */
json_t *sandbox_record_json(const struct store_sandbox *r, const struct sandbox *live);
json_t *live_json(struct sandbox *sb);
/* The store's record of a sandbox the API shows (not pooled), for the caller
 * to free; NULL with a 404 sent. */
struct store_sandbox *find_recorded(struct daemon *d, struct evhttp_request *req, const char *id);
/* A sandbox the API may act on: live and handed out (not pooled). NULL with
 * a 404 or 409 sent. */
struct sandbox *find_running(struct daemon *d, struct evhttp_request *req, const char *id);
/* True, with a 503 sent, while the state database takes no writes. */
bool refuse_lost_store(struct daemon *d, struct evhttp_request *req);
