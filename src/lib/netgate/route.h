/* SPDX-License-Identifier: Apache-2.0 */
#pragma once

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "error.h"
#include "netgate/addr.h"
#include "netgate/http.h"

/* Routes: `http://127.0.0.1:8080/<name>/<path>` inside the sandbox goes to
 * the route's upstream + "/" + path over HTTP or HTTPS. The client's
 * credentials, hop-by-hop fields and the fields the route strips are removed,
 * the route's inject fields are added with their templates expanded on the
 * host, and bodies stream both ways through bounded buffers. The upstream is
 * host configuration: the allow-list does not apply to it, the private
 * address check does. Each call is one record with protocol "route". */

struct evbuffer;
struct policy_route;
struct secrets;
struct secrets_vars;

/* ---- one route ---- */

struct netgate_route;

/* Check and copy a policy route: its upstream URL, and its CA file when TLS.
 * Errors name the route. */
int netgate_route_new(const struct policy_route *pr, struct netgate_route **ret,
                      struct al_error *err);
struct netgate_route *netgate_route_free(struct netgate_route *rt);

/* A strip pattern against a field name: case-insensitive, a trailing "*"
 * matches any rest (so "*" alone matches every name). */
bool netgate_route_strip_match(const char *pattern, const char *name, size_t len);

/* Whether a client field is kept off the upstream request: hop-by-hop,
 * Proxy-*, Host and framing fields, Authorization and x-api-key always, the
 * route's strip patterns, and the names the route injects. */
bool netgate_route_field_dropped(const struct netgate_route *rt, const struct netgate_http_head *h,
                                 const char *name, size_t len);

/* Whether the route's requests may carry a secret (an injected field, or a
 * sentinel listed for the route's host): the answer is then asked for
 * unencoded, scrubbed of the secrets' values, and refused when it comes
 * encoded anyway, since no scrubber can see into a compressed body. */
bool netgate_route_carries_secrets(const struct netgate_route *rt);

/* NULL when `rest` (the target below the route: "", "/..." or "?...") may
 * go upstream, else what in its path is refused: a "." or ".." segment
 * (also percent-encoded, also followed by ";params"), an encoded "/" or
 * "\", a backslash, an encoded NUL, a double encoding ("%25"), or a "%"
 * without two hex digits. */
const char *netgate_route_path_problem(const char *rest, size_t len);

/* Append the upstream request head for `req` (an origin-form request head
 * whose target, below the route, is `rest`: "", "/..." or "?...") to `out`.
 * Returns 0, or on failure leaves `out` as it was and returns
 *   -EBADMSG  an injected value holds CR, LF or another control character
 *             after expansion; *ret_field names the field
 *   other     the template could not be expanded; *ret_field names the field
 * Nothing of a value reaches `err`'s message or *ret_field. */
int netgate_route_write_head(const struct netgate_route *rt, const struct netgate_http_head *req,
                             const char *rest, size_t rest_len, bool close, const struct secrets *s,
                             const struct secrets_vars *vars, struct evbuffer *out,
                             const char **ret_field);
