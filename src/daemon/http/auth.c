/* SPDX-License-Identifier: Apache-2.0 */
/* Who asks: the bearer token of a request to its grant, and the grant's
 * permissions. */
#include <errno.h>
#include <event2/http.h>
#include <string.h>

#include "grants.h"
#include "http.h"
#include "util.h"

/* authorization */

struct grant *authenticate(struct daemon *d, struct evhttp_request *req)
{
        const char *h = evhttp_find_header(evhttp_request_get_input_headers(req), "Authorization");
        const char *token;
        size_t len;
        if (!h) {
                struct grant *g = NULL;
                int r = ui_authenticate(d, req, &g);
                if (r != 0)
                        return g;
                reply_error(d, req, 401, "unauthorized",
                            "an Authorization: Bearer token is required");
                return NULL;
        }
        if (grant_bearer_token(h, &token, &len) < 0) {
                reply_error(d, req, 401, "unauthorized",
                            "the Authorization header is not \"Bearer TOKEN\"");
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
        reply_error_fields(d, req, 403, "authz_denied",
                           json_pack("{s:s}", "permission", permission),
                           "grant \"%s\" does not allow this (%s)", g->name, permission);
        return false;
}
