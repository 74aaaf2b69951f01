/* SPDX-License-Identifier: Apache-2.0 */
/* The sandbox a request names, as the API may show or act on it. */
#include <string.h>

#include "sandbox.h"
#include "http.h"
#include "util.h"

/* the sandbox's view */

json_t *live_json(struct sandbox *sb)
{
        _cleanup_free_ char *meta = json_dumps(sb->metadata, JSON_COMPACT | JSON_SORT_KEYS);
        struct store_sandbox r = {
            .state = (char *)sandbox_state_names[sb->state],
            .grant = sb->grant,
            .class_name = sb->class_name,
            .metadata = meta,
            .policy = sb->policy_json,
            .workspace = sb->workspace,
            .workspace_owned = sb->workspace_owned,
            .pid = sb->pid,
            .created_ms = sb->created_ms,
            .expires_ms = sb->expires_ms,
            .idle_timeout_ms = sb->idle_timeout_ms,
            .last_active_ms = sb->last_active_ms,
            .ended_ms = sb->ended_ms,
            .reason = sb->end_reason,
        };
        memcpy(r.id, sb->id, sizeof(r.id));
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
