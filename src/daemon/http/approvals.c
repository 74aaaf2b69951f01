/* SPDX-License-Identifier: Apache-2.0 */
/* GET /v1/approvals and POST /v1/approvals/{id}: the asks the gates of a
 * grant's sandboxes hold for the operator (docs/api.md, "Approvals"),
 * allowed by allowSandbox. Each supervisor is asked over its control socket
 * on the daemon's loop (ctl.h): the ops answer from memory at once, and a
 * supervisor that does not (stopped, hung) is given up after its bound
 * without any other request waiting for it. */
#include <errno.h>
#include <string.h>

#include "approvals-client.h"
#include "ctl.h"
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

/* One call's first line: the answer. */
static void keep_first(json_t **slot, json_t *msg)
{
        if (!*slot)
                *slot = json_incref(msg);
}

/* GET /v1/approvals: every own sandbox asked at once; the answer, in the
 * sandboxes' order, when the last has answered or been given up. */
struct listing {
        struct daemon *d;
        struct evhttp_request *req;
        json_t **answers; /* one per sandbox asked */
        size_t n, waiting;
};

struct listing_call {
        struct listing *l;
        size_t i;
};

static void listing_line(struct ctl_call *c, json_t *msg, void *ud)
{
        struct listing_call *lc = ud;
        keep_first(&lc->l->answers[lc->i], msg);
}

static void listing_done(struct ctl_call *c, int error, void *ud)
{
        struct listing_call *lc = ud;
        struct listing *l = lc->l;
        if (error < 0) {
                /* ending, or not answering: nothing it holds is shown */
                json_decref(l->answers[lc->i]);
                l->answers[lc->i] = NULL;
        }
        free(lc);
        if (--l->waiting > 0)
                return;
        json_t *all = json_array();
        for (size_t i = 0; i < l->n; i++) {
                json_t *a = l->answers[i], *list = json_object_get(a, "approvals");
                if (json_is_true(json_object_get(a, "ok")) && json_is_array(list))
                        json_array_extend(all, list);
                json_decref(a);
        }
        reply_json(l->d, l->req, 200, json_pack("{s:o}", "approvals", all));
        free(l->answers);
        free(l);
}

static const struct ctl_call_ops listing_ops = {.line = listing_line, .done = listing_done};

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
        struct listing *l = xcalloc(1, sizeof(*l));
        l->d = d;
        l->req = req;
        for (struct sandbox *sb = d->sandboxes; sb; sb = sb->next)
                l->n++;
        l->answers = xcalloc(l->n ? l->n : 1, sizeof(*l->answers));
        json_t *ask = json_pack("{s:s}", "op", CONTROL_OP_APPROVALS);
        /* One more than the calls until they are all started: none can
         * answer the request before the loop below is done. */
        l->waiting = 1;
        size_t i = 0;
        for (struct sandbox *sb = d->sandboxes; sb && i < l->n; sb = sb->next, i++) {
                if (!own(d, g, sb->id) || (only && !STREQ(only, sb->id)))
                        continue;
                struct listing_call *lc = xcalloc(1, sizeof(*lc));
                lc->l = l;
                lc->i = i;
                struct ctl_call *c = NULL;
                if (ctl_call_start(d->base, sb->control_path, ask, APPROVALS_CALL_TIMEOUT_MS,
                                   &listing_ops, lc, &c) < 0) {
                        free(lc);
                        continue;
                }
                l->waiting++;
        }
        json_decref(ask);
        struct listing_call *last = xcalloc(1, sizeof(*last));
        last->l = l;
        last->i = 0;
        listing_done(NULL, 0, last);
}

/* POST /v1/approvals/{id} */
struct deciding {
        struct daemon *d;
        struct evhttp_request *req;
        char id[17];
        char *name;
        json_t *answer;
};

static void deciding_line(struct ctl_call *c, json_t *msg, void *ud)
{
        struct deciding *dc = ud;
        keep_first(&dc->answer, msg);
}

static void deciding_done(struct ctl_call *c, int error, void *ud)
{
        struct deciding *dc = ud;
        struct daemon *d = dc->d;
        json_t *a = dc->answer;
        const char *e = json_string_value(json_object_get(a, "error"));
        json_t *o = json_object_get(a, "approval");
        if (!a)
                reply_error(d, dc->req, 502, "supervisor_failed",
                            "asking sandbox %s's supervisor: %s", dc->id,
                            strerror(error < 0 ? -error : EPROTO));
        else if (e && (STREQ(e, CONTROL_ERR_UNKNOWN_APPROVAL) || STREQ(e, CONTROL_ERR_BAD_REQUEST)))
                reply_error(d, dc->req, 404, "not_found",
                            "no approval %s is pending (decided, expired or unknown)", dc->name);
        else if (e && STREQ(e, CONTROL_ERR_AUDIT_FAILED))
                reply_error(d, dc->req, 503, "audit_failed",
                            "approval %s: the decision could not be recorded in the audit log, so "
                            "it took no effect (the request was refused)",
                            dc->name);
        else if (e || !json_is_object(o))
                reply_error(d, dc->req, 502, "supervisor_failed",
                            "asking sandbox %s's supervisor: %s", dc->id, strerror(EPROTO));
        else
                reply_json(d, dc->req, 200, json_incref(o));
        json_decref(a);
        free(dc->name);
        free(dc);
}

static const struct ctl_call_ops deciding_ops = {.line = deciding_line, .done = deciding_done};

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
        struct sandbox *sb = own(d, g, id);
        if (!sb) {
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
        json_t *ask = json_pack("{s:s, s:s, s:s, s:s}", "op", CONTROL_OP_APPROVE, "id", a->name,
                                "decision", decision, "by", by);
        json_decref(body);
        struct deciding *dc = xcalloc(1, sizeof(*dc));
        dc->d = d;
        dc->req = req;
        memcpy(dc->id, id, sizeof(dc->id));
        dc->name = xstrdup(a->name);
        struct ctl_call *c = NULL;
        int r = ctl_call_start(d->base, sb->control_path, ask, APPROVALS_CALL_TIMEOUT_MS,
                               &deciding_ops, dc, &c);
        json_decref(ask);
        if (r < 0) {
                reply_error(d, req, 409, "not_running", "sandbox %s is not running", id);
                free(dc->name);
                free(dc);
        }
}
