/* SPDX-License-Identifier: Apache-2.0 */
/* POST /v1/stop: the kill switch over the API (docs/api.md). The body names
 * the sandboxes, {"ids": [...]}, or {"all": true}; a grant with
 * allowSandbox stops only the sandboxes it created (another's id is
 * answered as not found). Each supervisor is asked at once (supervisor/
 * stop.h): freeze, close the gates, record sandbox.stopped naming the
 * grant, kill; one that does not answer within the bound is stopped from
 * outside. This blocks the daemon's loop for at most that bound: the kill
 * switch takes precedence over everything else the daemon does. */
#include <errno.h>
#include <string.h>

#include "http.h"
#include "record.h"
#include "routes.h"
#include "sandbox.h"
#include "stop.h"
#include "util.h"

enum { STOP_API_MAX = 4096, STOP_API_TIMEOUT_MS = 5000 };

/* A live sandbox of this grant's, or NULL. */
static struct sandbox *own(struct daemon *d, const struct grant *g, const char *id)
{
        struct sandbox *sb = sandbox_find(d, id);
        if (!sb || sb->state == SANDBOX_POOLED || !sb->grant || !STREQ(sb->grant, g->name))
                return NULL;
        return sb;
}

void route_stop(struct daemon *d, struct evhttp_request *req, const struct route_args *a)
{
        struct grant *g = a->grant;
        /* A grant stops what it may start: its sandboxes, its runs. */
        if (!require(d, req, g, g->allow_sandbox || g->allow_runs, "allowSandbox"))
                return;
        json_t *body = read_json_body(d, req, false);
        if (!body)
                return;
        static const char *const keys[] = {"ids", "all", NULL};
        char **ids = NULL, **mine = NULL, *by = NULL;
        size_t n = 0, n_mine = 0;
        struct sv_stop_result *res = NULL;
        int *run_res = NULL;
        if (reject_unknown(d, req, body, keys))
                goto out;
        json_t *jids = json_object_get(body, "ids"), *jall = json_object_get(body, "all");
        if (jall && !json_is_boolean(jall)) {
                reply_bad_field(d, req, "all", "must be true or false");
                goto out;
        }
        bool all = json_is_true(jall);
        if (all == (jids != NULL)) {
                reply_error(d, req, 400, "bad_request",
                            "give \"ids\" (an array of sandbox ids) or \"all\": true, not both");
                goto out;
        }
        if (all) {
                for (struct sandbox *sb = d->sandboxes; sb && n < STOP_API_MAX; sb = sb->next)
                        if (own(d, g, sb->id))
                                ids = strv_append(ids, &n, sb->id);
                _cleanup_strv_ char **runs = NULL;
                size_t n_runs = runs_of_grant(g->name, &runs);
                for (size_t i = 0; i < n_runs && n < STOP_API_MAX; i++)
                        ids = strv_append(ids, &n, runs[i]);
        } else {
                if (!json_is_array(jids) || json_array_size(jids) == 0 ||
                    json_array_size(jids) > STOP_API_MAX) {
                        reply_bad_field(d, req, "ids", "must be an array of 1 to 4096 sandbox ids");
                        goto out;
                }
                size_t i;
                json_t *v;
                json_array_foreach(jids, i, v)
                {
                        if (!json_is_string(v) || !sv_stop_id_ok(json_string_value(v))) {
                                reply_bad_field(d, req, "ids",
                                                "each must be a sandbox id (16 lowercase hex "
                                                "digits)");
                                goto out;
                        }
                        ids = strv_append(ids, &n, json_string_value(v));
                }
        }

        /* Another grant's sandbox is not found, and not touched. */
        for (size_t i = 0; i < n; i++)
                if (own(d, g, ids[i]))
                        mine = strv_append(mine, &n_mine, ids[i]);
        for (size_t i = 0; i < n_mine; i++)
                record_audit(d, mine[i], "api.stop", json_pack("{s:s}", "grant", g->name));
        res = xcalloc(n_mine ? n_mine : 1, sizeof(*res));
        by = xasprintf("grant:%s", g->name);
        (void)sv_stop_many(d->run_dir, mine, n_mine, by, STOP_API_TIMEOUT_MS, res);
        /* The grant's host-owned agent runs (POST /v1/runs): each agent is
         * stopped, and stops its sandbox (run.stopped is recorded). */
        run_res = xcalloc(n ? n : 1, sizeof(*run_res));
        for (size_t i = 0; i < n; i++)
                run_res[i] = own(d, g, ids[i]) ? -ENOENT : runs_stop(d, g->name, ids[i], by);

        json_t *arr = json_array();
        size_t k = 0;
        for (size_t i = 0; i < n; i++) {
                struct sv_stop_result *s = NULL;
                if (k < n_mine && STREQ(mine[k], ids[i]))
                        s = &res[k++];
                if (!s && run_res[i] >= 0) {
                        json_t *o =
                            json_pack("{s:s, s:s, s:b, s:b, s:n}", "id", ids[i], "how", "run",
                                      "stopped", run_res[i] == 1, "frozen", 0, "frozenAt");
                        json_object_set_new(o, "message",
                                            run_res[i] == 1
                                                ? json_null()
                                                : json_string("the run's agent did not end "
                                                              "within the bound"));
                        json_array_append_new(arr, o);
                        continue;
                }
                json_t *o =
                    json_pack("{s:s, s:s, s:b, s:b}", "id", ids[i], "how",
                              sv_stop_how_name(s ? s->how : SV_STOP_NOT_FOUND), "stopped",
                              s && (s->how == SV_STOP_SUPERVISOR || s->how == SV_STOP_CGROUP),
                              "frozen", s && s->frozen);
                json_object_set_new(o, "frozenAt",
                                    s && s->frozen_at[0] ? json_string(s->frozen_at) : json_null());
                json_object_set_new(o, "message",
                                    s && s->message[0] ? json_string(s->message) : json_null());
                json_array_append_new(arr, o);
                /* The daemon's record follows: destroyed, because stopped. */
                struct sandbox *sb = s && s->how != SV_STOP_NOT_FOUND ? own(d, g, ids[i]) : NULL;
                if (sb && sb->state != SANDBOX_STOPPING) {
                        sandbox_set_reason(sb, "stopped");
                        sandbox_destroy(sb, "stopped", NULL, NULL);
                }
        }
        reply_json(d, req, 200, json_pack("{s:o}", "stopped", arr));
out:
        free(run_res);
        strv_free(mine);
        free(by);
        free(res);
        strv_free(ids);
        json_decref(body);
}
