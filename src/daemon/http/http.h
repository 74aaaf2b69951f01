/* SPDX-License-Identifier: Apache-2.0 */
#pragma once

#include <event2/http.h>
#include <jansson.h>
#include <stdbool.h>
#include <stdint.h>

#include "daemon.h"
#include "grants.h"
#include "store.h"

/* The pieces of the API (api.c) that its other handlers (changes.c) share:
 * answers, request bodies, permissions and the sandbox lookups. */

void reply_json(struct daemon *d, struct evhttp_request *req, int code, json_t *body);
/* {"error": CODE, "message": ..., and the extra fields}: `extra` is stolen. */
void reply_error_fields(struct daemon *d, struct evhttp_request *req, int code, const char *error,
                        json_t *extra, const char *fmt, ...) __attribute__((format(printf, 6, 7)));
#define reply_error(d, req, code, error, ...) reply_error_fields(d, req, code, error, NULL, __VA_ARGS__)
void reply_bad_field(struct daemon *d, struct evhttp_request *req, const char *field,
                     const char *what);
/* A body of bytes with its content type; `body` is drained. */
void reply_body(struct daemon *d, struct evhttp_request *req, int code, const char *type,
                struct evbuffer *body);

/* The body as JSON: NULL with a 400 or 413 already sent. */
json_t *read_json_body(struct daemon *d, struct evhttp_request *req, bool allow_empty);
/* True (with a 400 sent) when `o` has a key not in `allowed`. */
bool reject_unknown(struct daemon *d, struct evhttp_request *req, json_t *o,
                    const char *const *allowed);
/* False (with a 403 sent) when !allowed. */
bool require(struct daemon *d, struct evhttp_request *req, const struct grant *g, bool allowed,
             const char *permission);

int record_audit(struct daemon *d, const char *sandbox, const char *kind, json_t *fields);
json_t *live_json(struct sandbox *sb);
/* The store's record of a sandbox the API shows (not pooled), for the caller
 * to free; NULL with a 404 sent. */
struct store_sandbox *find_recorded(struct daemon *d, struct evhttp_request *req, const char *id);

struct evconnlistener;

/* The connections of the API (httpguard.c): every byte of a request head is
 * read by a strict HTTP/1.1 parser before libevent's, which sees only heads
 * that passed (a refused one becomes a request answered with the reason);
 * a request has a deadline from its first byte to the end of its body;
 * connections are capped in total and per peer; accept() backs off when
 * the daemon is out of file descriptors. */
struct http_limits {
        uint64_t request_timeout_ms;   /* head and body, from the first byte */
        uint64_t max_connections;      /* open at once; 0: no maximum */
        uint64_t max_peer_connections; /* per uid on the unix socket, per address on TCP */
};
#define HTTP_REQUEST_TIMEOUT_MS   30000
#define HTTP_MAX_CONNECTIONS      4096
#define HTTP_MAX_PEER_CONNECTIONS 512

int http_guard_setup(struct daemon *d, const struct http_limits *lim, struct al_error *err);
/* Back off on this listener's accept() errors instead of spinning. */
void http_guard_listener(struct evconnlistener *lev);
/* True, with the answer sent, when the connection of `req` is refused: a
 * head that broke the rules, or a connection past a cap. */
bool http_guard_refused(struct daemon *d, struct evhttp_request *req);
void http_guard_shutdown(void);
