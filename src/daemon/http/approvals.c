/* SPDX-License-Identifier: Apache-2.0 */
/* GET /v1/approvals and POST /v1/approvals/{id}: the asks the gates of a
 * grant's sandboxes hold for the operator (docs/api.md, "Approvals"),
 * allowed by allowSandbox. Each supervisor is asked over its control socket
 * (supervisor/approvals-client.h); the ops answer from memory at once, and
 * each call is bounded, so the loop waits at most that bound per sandbox. */
#include <errno.h>
#include <string.h>

#include "approvals-client.h"
#include "http.h"
#include "routes.h"
#include "sandbox.h"
#include "util.h"

enum { APPROVALS_CALL_TIMEOUT_MS = 2000 };

/* A running sandbox of this grant's, or NULL. */
static struct sandbox *own(struct daemon *d, const struct grant *g, const char *id)
{
        struct sandbox *sb = sandbox_find(d, id);
        if (!sb || sb->state != SANDBOX_RUNNING || !sb->grant || !STREQ(sb->grant, g->name))
                return NULL;
        return sb;
}

void route_approvals_list(struct daemon *d, struct evhttp_request *req, const struct route_args *a)
{
        struct grant *g = a->grant;
        if (!require(d, req, g, g->allow_sandbox, "allowSandbox"))
                return;
        const char *only = query_get(a->query, "sandbox");
        if (only && !own(d, g, only)) {
                reply_error(d, req, 404, "not_found", "no running sandbox %.64s", only);
                return;
        }
        json_t *all = json_array();
        for (struct sandbox *sb = d->sandboxes; sb; sb = sb->next) {
                if (!own(d, g, sb->id) || (only && !STREQ(only, sb->id)))
                        continue;
                json_t *l = NULL;
                if (sv_approvals_list(d->run_dir, sb->id, APPROVALS_CALL_TIMEOUT_MS, &l) < 0)
                        continue; /* ending, or not answering: nothing it holds is shown */
                json_array_extend(all, l);
                json_decref(l);
        }
        reply_json(d, req, 200, json_pack("{s:o}", "approvals", all));
}

void route_approval_decide(struct daemon *d, struct evhttp_request *req, const struct route_args *a)
{
        struct grant *g = a->grant;
        if (!require(d, req, g, g->allow_sandbox, "allowSandbox"))
                return;
        char id[17];
        if (sv_approvals_sandbox_of(a->name, id) < 0) {
                reply_error(d, req, 404, "not_found",
                            "no approval %.64s (an id is SANDBOX-N, as GET /v1/approvals lists it)",
                            a->name);
                return;
        }
        /* Another grant's sandbox has no approvals, as it has no processes:
         * nothing of the request is judged before that. */
        if (!own(d, g, id)) {
                reply_error(d, req, 404, "not_found", "no approval %s", a->name);
                return;
        }
        json_t *body = read_json_body(d, req, false);
        if (!body)
                return;
        static const char *const keys[] = {"decision", NULL};
        if (reject_unknown(d, req, body, keys)) {
                json_decref(body);
                return;
        }
        const char *decision = json_string_value(json_object_get(body, "decision"));
        if (!decision || (!STREQ(decision, "allow-once") && !STREQ(decision, "allow-sandbox") &&
                          !STREQ(decision, "deny") && !STREQ(decision, "deny-sandbox"))) {
                reply_bad_field(d, req, "decision",
                                "must be \"allow-once\", \"allow-sandbox\", \"deny\" or "
                                "\"deny-sandbox\"");
                json_decref(body);
                return;
        }
        _cleanup_free_ char *by = xasprintf("grant:%s", g->name);
        json_t *o = NULL;
        int r =
            sv_approvals_decide(d->run_dir, a->name, decision, by, APPROVALS_CALL_TIMEOUT_MS, &o);
        json_decref(body);
        if (r == -ESRCH || r == -EINVAL)
                reply_error(d, req, 404, "not_found",
                            "no approval %s is pending (decided, expired or unknown)", a->name);
        else if (r == -ENOENT)
                reply_error(d, req, 409, "not_running", "sandbox %s is not running", id);
        else if (r < 0)
                reply_error(d, req, 502, "supervisor_failed", "asking sandbox %s's supervisor: %s",
                            id, strerror(-r));
        else
                reply_json(d, req, 200, o);
}
