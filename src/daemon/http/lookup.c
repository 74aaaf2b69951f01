/* SPDX-License-Identifier: Apache-2.0 */
/* The sandbox a request names, as the API may show or act on it. */
#include <stdio.h>
#include <string.h>
#include <time.h>

#include "health-sandbox.h"
#include "sandbox.h"
#include "http.h"
#include "util.h"

/* the sandbox's view */

json_t *live_json(struct sandbox *sb)
{
        _cleanup_free_ char *meta = json_dumps(sb->metadata, JSON_COMPACT | JSON_SORT_KEYS);
        struct store_sandbox r;
        sandbox_as_record(sb, meta, &r);
        return sandbox_record_json(&r, sb);
}

struct store_sandbox *find_recorded(struct daemon *d, struct evhttp_request *req, const char *id)
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
struct sandbox *find_running(struct daemon *d, struct evhttp_request *req, const char *id)
{
        struct sandbox *sb = sandbox_find(d, id);
        if (sb && sb->state == SANDBOX_RUNNING)
                return sb;
        if (!sb || sb->state == SANDBOX_POOLED) {
                struct store_sandbox *r = find_recorded(d, req, id);
                if (!r)
                        return NULL;
                reply_error_fields(d, req, 409, "not_running",
                                   json_pack("{s:s}", "state", r->state), "sandbox %s is %s", id,
                                   r->state);
                store_sandbox_free(r);
                return NULL;
        }
        reply_error_fields(d, req, 409, "not_running",
                           json_pack("{s:s}", "state", sandbox_state_names[sb->state]),
                           "sandbox %s is %s", id, sandbox_state_names[sb->state]);
        return NULL;
}

/* A lost or corrupt database takes no more writes (gc.c notices it): what
 * the daemon would record there would not be there after a restart. Nor
 * does a store whose last write failed, until gc.c's check finds that it
 * takes writes again (each second). */
bool refuse_lost_store(struct daemon *d, struct evhttp_request *req)
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

/* the API's view */

static json_t *time_json(uint64_t ms)
{
        if (!ms)
                return json_null();
        time_t s = (time_t)(ms / 1000);
        struct tm tm;
        gmtime_r(&s, &tm);
        char buf[64], out[80];
        strftime(buf, sizeof(buf), "%Y-%m-%dT%H:%M:%S", &tm);
        snprintf(out, sizeof(out), "%s.%03uZ", buf, (unsigned)(ms % 1000));
        return json_string(out);
}

json_t *sandbox_record_json(const struct store_sandbox *r, const struct sandbox *live)
{
        json_error_t jerr;
        json_t *meta = json_loads(r->metadata ? r->metadata : "{}", 0, &jerr);
        json_t *policy = json_loads(r->policy ? r->policy : "{}", 0, &jerr);
        json_t *limits = json_incref(json_object_get(policy, "limits"));
        json_t *network = json_object_get(policy, "network");
        json_t *o = json_pack(
            "{s:s, s:s, s:s?, s:s?, s:o, s:s?, s:b, s:o, s:o, s:o, s:o?, s:o, s:s?, s:o}", "id",
            r->id, "state", r->state, "class", r->class_name, "grant", r->grant, "metadata",
            meta ? meta : json_object(), "workspace", r->workspace, "workspaceOwned",
            r->workspace_owned, "createdAt", time_json(r->created_ms), "expiresAt",
            time_json(r->expires_ms), "lastActiveAt", time_json(r->last_active_ms), "idleTimeout",
            r->idle_timeout_ms ? json_real((double)r->idle_timeout_ms / 1000.0) : json_null(),
            "endedAt", time_json(r->ended_ms), "reason", r->reason, "limits",
            limits ? limits : json_object());
        json_object_set_new(
            o, "workspaceMode",
            json_incref(json_object_get(json_object_get(policy, "workspace"), "mode"))
                ?: json_string("rw"));
        /* The isolation tier; a policy without one is the namespace tier's. */
        json_object_set_new(o, "tier",
                            json_incref(json_object_get(policy, "tier")) ?: json_string("namespace"));
        json_object_set_new(o, "networkMode",
                            json_incref(json_object_get(network, "mode")) ?: json_null());
        if (live && live->status.valid && live->status.doc) {
                json_t *doc = live->status.doc;
                json_object_set(o, "usage", json_object_get(doc, "usage") ?: json_null());
                json_object_set(o, "network", json_object_get(doc, "network") ?: json_null());
                json_object_set(o, "processes", json_object_get(doc, "processes") ?: json_array());
                json_object_set_new(o, "oomKills",
                                    json_integer((json_int_t)live->status.oom_kills));
                json_object_set_new(o, "statusAt", time_json(live->status.at_ms));
        }
        json_t *health = live ? sandbox_health_json(r->id) : NULL;
        if (health)
                json_object_set_new(o, "health", health);
        json_decref(policy);
        return o;
}
