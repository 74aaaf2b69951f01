/* SPDX-License-Identifier: Apache-2.0 */
#include <errno.h>
#include <jansson.h>
#include <string.h>

#include "control-internal.h"
#include "control-proto.h"
#include "netgate/netgate.h"
#include "util.h"

/* fetch: the host's own request through one of the sandbox's routes
 * (netgate_route_fetch): the route's inject, strip and record rules, its
 * budgets and its route.call record apply exactly as to the sandbox's own
 * requests. The host-owned agent loop (airlock agent) calls its model this
 * way, so the key stays in this process and never reaches the sandbox. The
 * control socket is the host's (mode 0600 in a 0700 directory): nothing in
 * the sandbox can send this op. */

#define FETCH_HEADERS_MAX  32
#define FETCH_TIMEOUT_MAX  (600u * 1000u)
#define FETCH_RESPONSE_MAX (16u << 20)

/* The fetch's link to its client. The gate may cancel a fetch without a
 * callback (when it closes), so the client never cancels through a pointer
 * that may be stale: a client that leaves only unhooks itself, and the
 * callback, if it comes, frees the ticket. */
struct fetch_ticket {
        struct client *cl;
};

void control_fetch_orphan(struct client *cl)
{
        if (cl->fetch)
                cl->fetch->cl = NULL;
        cl->fetch = NULL;
}

static void fetched(void *ud, int err, const struct netgate_fetch_response *resp)
{
        struct fetch_ticket *t = ud;
        struct client *cl = t->cl;
        free(t);
        if (!cl)
                return;
        cl->fetch = NULL;
        if (err < 0) {
                char msg[256];
                snprintf(msg, sizeof(msg), "the request through the route failed: %s",
                         err == -ETIMEDOUT ? "timed out"
                         : err == -EFBIG   ? "the answer is over responseMax"
                                           : strerror(-err));
                control_send_error(cl, CONTROL_ERR_FETCH_FAILED, msg);
                return;
        }
        json_t *headers = json_array();
        for (size_t i = 0; i < resp->n_headers; i++)
                json_array_append_new(
                    headers, json_pack("[s, s]", resp->headers[i].name, resp->headers[i].value));
        _cleanup_free_ char *body = base64_encode(resp->body, resp->body_len);
        control_send_json(
            cl, json_pack("{s:b, s:i, s:o, s:s, s:o}", "ok", 1, "status", resp->status, "headers",
                          headers, "body", body, "gateReason",
                          resp->gate_reason ? json_string(resp->gate_reason) : json_null()));
        control_client_finish(cl);
}

void control_do_fetch(struct client *cl, json_t *req)
{
        struct control *c = cl->ctl;
        const char *route = json_string_value(json_object_get(req, "route"));
        const char *method = json_string_value(json_object_get(req, "method"));
        const char *path = json_string_value(json_object_get(req, "path"));
        const char *body64 = json_string_value(json_object_get(req, "body"));
        const char *tool = json_string_value(json_object_get(req, "tool"));
        json_t *jh = json_object_get(req, "headers");
        json_t *jt = json_object_get(req, "timeoutMs");
        json_t *jm = json_object_get(req, "responseMax");
        if (!route || !method || (json_object_get(req, "path") && !path) ||
            (json_object_get(req, "body") && !json_is_null(json_object_get(req, "body")) &&
             !body64) ||
            (jh && !json_is_object(jh)) || !json_is_integer(jt) || json_integer_value(jt) < 1 ||
            json_integer_value(jt) > FETCH_TIMEOUT_MAX || (jm && !json_is_integer(jm)) ||
            (jm && (json_integer_value(jm) < 1 || json_integer_value(jm) > FETCH_RESPONSE_MAX))) {
                control_send_error(cl, CONTROL_ERR_BAD_REQUEST,
                                   "fetch: expected \"route\", \"method\", \"timeoutMs\" (1 to "
                                   "600000), optional \"path\", \"headers\" (an object of "
                                   "strings), \"body\" (base64) and \"responseMax\" (at most "
                                   "16 MiB)");
                return;
        }
        if (!c->core.gate) {
                control_send_error(cl, CONTROL_ERR_FETCH_FAILED,
                                   "fetch: the sandbox has no network gate (network mode none)");
                return;
        }
        struct netgate_header hs[FETCH_HEADERS_MAX];
        size_t n = 0;
        const char *k;
        json_t *v;
        json_object_foreach(jh, k, v)
        {
                if (n == FETCH_HEADERS_MAX || !json_is_string(v)) {
                        control_send_error(cl, CONTROL_ERR_BAD_REQUEST,
                                           "fetch: at most 32 headers, each a string");
                        return;
                }
                hs[n].name = k;
                hs[n].value = json_string_value(v);
                n++;
        }
        _cleanup_free_ unsigned char *body = NULL;
        size_t body_len = 0;
        if (body64 && base64_decode(body64, &body, &body_len) < 0) {
                control_send_error(cl, CONTROL_ERR_BAD_REQUEST, "fetch: \"body\" is not base64");
                return;
        }
        struct netgate_fetch_request fr = {
            .route = route,
            .method = method,
            .path = path ? path : "",
            .body = body,
            .body_len = body_len,
            .headers = hs,
            .n_headers = n,
            .response_max = jm ? (uint64_t)json_integer_value(jm) : FETCH_RESPONSE_MAX,
            .timeout_ms = (uint32_t)json_integer_value(jt),
            .tool = tool,
        };
        struct al_error err = {0};
        struct netgate_fetch *f = NULL;
        struct fetch_ticket *t = xcalloc(1, sizeof(*t));
        t->cl = cl;
        int r = netgate_route_fetch(c->core.gate, &fr, fetched, t, &f, &err);
        if (r >= 0)
                cl->fetch = t;
        else
                free(t);
        if (r < 0)
                control_send_error(cl,
                                   r == -EINVAL || r == -EMSGSIZE ? CONTROL_ERR_BAD_REQUEST
                                                                  : CONTROL_ERR_FETCH_FAILED,
                                   err.msg[0] ? err.msg : "fetch: the gate serves no routes");
}
