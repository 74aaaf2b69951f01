/* SPDX-License-Identifier: Apache-2.0 */
/* /v1/sandboxes/{id}/capabilities: what a running sandbox may do now, and
 * grants and revokes while it runs (docs/api.md). The supervisor holds the
 * effective set (src/lib/supervisor/caps.c) and checks every entry; the
 * daemon passes one control request on ("op": "caps") with the grant's
 * name as "by", after the grant's own limits: a tool only if the grant may
 * give it, a mount only with allowHostWorkspace. */
#include <errno.h>
#include <event2/http.h>
#include <jansson.h>
#include <string.h>

#include "ctl.h"
#include "grants.h"
#include "routes.h"
#include "sandbox.h"
#include "util.h"

#define CAPS_CALL_TIMEOUT_MS 30000

struct caps_call {
        struct daemon *d;
        struct evhttp_request *req;
        struct sandbox *sb;
        json_t *answer;
        bool names_only; /* asked by a grant other than the sandbox's own */
};

/* The set as a grant other than the sandbox's own sees it: the names of
 * the environment and the targets of the mounts, never their values or
 * host sources, which may carry the owning grant's secrets. */
static json_t *names_only(json_t *caps)
{
        json_t *o = json_deep_copy(caps);
        json_t *env = json_object_get(o, "env"), *mounts = json_object_get(o, "mounts");
        const char *k;
        json_t *v;
        json_object_foreach(env, k, v) json_object_set_new(env, k, json_null());
        size_t i;
        json_array_foreach(mounts, i, v) json_object_del(v, "source");
        return o;
}

static void on_line(struct ctl_call *c, json_t *msg, void *userdata)
{
        struct caps_call *cc = userdata;
        if (!cc->answer)
                cc->answer = json_incref(msg);
}

static int error_status(const char *code)
{
        if (!code)
                return 502;
        if (STREQ(code, CONTROL_ERR_BAD_REQUEST))
                return 400;
        if (STREQ(code, CONTROL_ERR_REFUSED))
                return 422;
        if (STREQ(code, CONTROL_ERR_DESTROYED))
                return 409;
        if (STREQ(code, CONTROL_ERR_AUDIT_FAILED))
                return 503;
        return 502;
}

static void on_done(struct ctl_call *c, int error, void *userdata)
{
        struct caps_call *cc = userdata;
        json_t *a = cc->answer;
        if (error < 0 || !a) {
                reply_error(cc->d, cc->req, 502, "supervisor_unavailable",
                            "the sandbox's supervisor did not answer%s%s", error < 0 ? ": " : "",
                            error < 0 ? strerror(-error) : "");
        } else if (!json_is_true(json_object_get(a, "ok"))) {
                const char *code = json_string_value(json_object_get(a, "error"));
                const char *msg = json_string_value(json_object_get(a, "message"));
                reply_error(cc->d, cc->req, error_status(code), code ? code : "internal", "%s",
                            msg ? msg : "the supervisor refused");
        } else if (json_is_object(json_object_get(a, "capabilities"))) {
                json_t *caps = json_object_get(a, "capabilities");
                reply_json(cc->d, cc->req, 200,
                           cc->names_only ? names_only(caps) : json_incref(caps));
        } else {
                reply_error(cc->d, cc->req, 502, "supervisor_unavailable",
                            "the sandbox's supervisor does not know capabilities (started by an "
                            "older Airlock)");
        }
        json_decref(a);
        sandbox_unref(cc->sb);
        free(cc);
}

static const struct ctl_call_ops caps_ops = {
    .line = on_line,
    .done = on_done,
};

static void call(struct daemon *d, struct evhttp_request *req, struct sandbox *sb, json_t *ctl,
                 bool names)
{
        struct caps_call *cc = xcalloc(1, sizeof(*cc));
        cc->names_only = names;
        cc->d = d;
        cc->req = req;
        cc->sb = sb;
        sandbox_ref(sb);
        sandbox_touch(sb);
        struct ctl_call *c = NULL;
        int r =
            ctl_call_start(d->base, sb->control_path, ctl, CAPS_CALL_TIMEOUT_MS, &caps_ops, cc, &c);
        if (r < 0) {
                sandbox_unref(sb);
                free(cc);
                reply_error(d, req, 502, "supervisor_unavailable",
                            "the sandbox's supervisor did not answer: %s", strerror(-r));
        }
}

/* The grant's own limits on what it may hand a sandbox: true when the
 * request is within them, else the 403 is sent. The entries' shape is the
 * supervisor's to check. */
static bool within_grant(struct daemon *d, struct evhttp_request *req, const struct grant *g,
                         const json_t *list)
{
        size_t i;
        json_t *e;
        json_array_foreach(list, i, e)
        {
                const char *tool = json_string_value(json_object_get(e, "tool"));
                if (tool && !grant_allows_tool(g, tool)) {
                        reply_error_fields(d, req, 403, "authz_denied",
                                           json_pack("{s:s}", "permission", "tools"),
                                           "grant \"%s\" may not give its sandboxes the tool "
                                           "\"%s\" (airlock grant create --tool %s)",
                                           g->name, tool, tool);
                        return false;
                }
                if (json_object_get(e, "mount") &&
                    !require(d, req, g, g->allow_host_workspace, "allowHostWorkspace"))
                        return false;
        }
        return true;
}

/* GET and POST /v1/sandboxes/{id}/capabilities */
void route_capabilities(struct daemon *d, struct evhttp_request *req, const struct route_args *a)
{
        const struct grant *g = a->grant;
        if (!require(d, req, g, g->allow_capabilities, "allowCapabilities"))
                return;
        if (evhttp_request_get_command(req) == EVHTTP_REQ_GET) {
                struct sandbox *sb = find_running(d, req, a->id);
                if (!sb)
                        return;
                json_t *ctl = json_pack("{s:s}", "op", CONTROL_OP_CAPS);
                /* Open to any grant with the flag, values to its owner only
                 * (a sandbox of the pool has none). */
                call(d, req, sb, ctl, sb->grant && !STREQ(sb->grant, g->name));
                json_decref(ctl);
                return;
        }
        json_t *body = read_json_body(d, req, false);
        if (!body)
                return;
        static const char *const keys[] = {"grant", "revoke", NULL};
        json_t *ctl = NULL;
        _cleanup_free_ char *by = NULL;
        if (reject_unknown(d, req, body, keys))
                goto out;
        json_t *grant = json_object_get(body, "grant"), *revoke = json_object_get(body, "revoke");
        if (grant && !json_is_array(grant)) {
                reply_bad_field(d, req, "grant", "must be an array of entries");
                goto out;
        }
        if (revoke && !json_is_array(revoke)) {
                reply_bad_field(d, req, "revoke", "must be an array of entries");
                goto out;
        }
        if (!within_grant(d, req, g, grant))
                goto out;
        struct sandbox *sb = find_running(d, req, a->id);
        if (!sb)
                goto out;
        by = xasprintf("grant:%s", g->name);
        ctl = json_pack("{s:s, s:s}", "op", CONTROL_OP_CAPS, "by", by);
        json_object_set_new(ctl, "grant", grant ? json_incref(grant) : json_array());
        json_object_set_new(ctl, "revoke", revoke ? json_incref(revoke) : json_array());
        call(d, req, sb, ctl, sb->grant && !STREQ(sb->grant, g->name));
out:
        json_decref(ctl);
        json_decref(body);
}
