/* SPDX-License-Identifier: Apache-2.0 */
/* The API's answers and what it reads of a request: JSON and error
 * replies (counted for /metrics), the query string, a JSON body. */
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

#include "http.h"
#include "util.h"

#define JSON_BODY_MAX (1u << 20) /* a JSON request body */

/* answers */

void count_reply(struct daemon *d, int code)
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

bool refuse_host_config(struct daemon *d, struct evhttp_request *req, const json_t *jpolicy)
{
        if (json_object_get(json_object_get(jpolicy, "tools"), "define")) {
                reply_error_fields(d, req, 400, "invalid_policy",
                                   json_pack("{s:s}", "field", "policy.tools.define"),
                                   "tool definitions are host configuration: give them to "
                                   "airlockd with --tools FILE");
                return true;
        }
        if (json_object_get(jpolicy, "hardware")) {
                reply_error_fields(d, req, 400, "invalid_policy",
                                   json_pack("{s:s}", "field", "policy.hardware"),
                                   "the hardware section is host configuration: give it to "
                                   "airlockd with --hardware FILE");
                return true;
        }
        return false;
}

/* requests */

void reply_audit_failed(struct daemon *d, struct evhttp_request *req, const char *why)
{
        evhttp_add_header(evhttp_request_get_output_headers(req), "Retry-After", "10");
        reply_error(d, req, 503, "audit_failed",
                    "refused: the audit log cannot be written (%s); nothing was done", why);
}

void query_free(struct query *q)
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
int query_parse(const char *s, struct query *q)
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

const char *query_get(const struct query *q, const char *key)
{
        for (size_t i = 0; i < q->n; i++)
                if (STREQ(q->key[i], key))
                        return q->value[i];
        return NULL;
}

int query_bool(const struct query *q, const char *key, bool dflt, bool *ret)
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
        json_t *o =
            json_loadb((const char *)evbuffer_pullup(in, -1), len, JSON_REJECT_DUPLICATES, &jerr);
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
        json_object_foreach(o, key, v)
        {
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
int body_seconds(json_t *o, const char *key, double max, double *ret)
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
