/* SPDX-License-Identifier: Apache-2.0 */
/* /v1/volumes: the daemon's named volumes (volume.h), and the "volumes" and
 * "home" of a sandbox create. */
#include <errno.h>
#include <string.h>

#include "env.h"
#include "http.h"
#include "log.h"
#include "record.h"
#include "routes.h"
#include "util.h"
#include "volume.h"

/* Volumes belong to no sandbox: their audit lines name the daemon. */
#define VOLUME_AUDIT_SANDBOX "airlockd"

static void reply_volume_error(struct daemon *d, struct evhttp_request *req,
                               const struct al_error *err)
{
        switch (err->code) {
        case ENOENT:
                reply_error(d, req, 404, "not_found", "%s", err->msg);
                return;
        case EBUSY:
                reply_error(d, req, 409, "volume_attached", "%s", err->msg);
                return;
        case EEXIST:
                reply_error(d, req, 409, "conflict", "%s", err->msg);
                return;
        case EINVAL:
        case ERANGE:
                reply_error(d, req, 400, "bad_request", "%s", err->msg);
                return;
        case EPERM:
                reply_error(d, req, 501, "volumes_unavailable", "%s", err->msg);
                return;
        default:
                reply_error(d, req, 500, "internal", "%s", err->msg);
        }
}

/* A volume made through the API belongs to its grant; one made on the
 * host (`airlock volume create`) is the host's, and only a grant that may
 * name host paths may use it. Another grant's volume is, to a grant, one
 * that does not exist: a home holds an agent's sessions and logins. */
static bool may_use(const struct grant *g, json_t *info)
{
        const char *owner = json_string_value(json_object_get(info, "owner"));
        return owner ? STREQ(owner, g->name) : g->allow_host_workspace;
}

/* The volume `name` as the grant may see it; NULL with a 404 (or other
 * error) sent. */
static json_t *find_volume(struct daemon *d, struct evhttp_request *req, const struct grant *g,
                           const char *name)
{
        struct al_error err = {0};
        json_t *info = NULL;
        if (volume_info(name, &info, &err) < 0) {
                reply_volume_error(d, req, &err);
                return NULL;
        }
        if (!may_use(g, info)) {
                json_decref(info);
                reply_error(d, req, 404, "not_found", "no volume \"%s\"", name);
                return NULL;
        }
        return info;
}

void route_volume_list(struct daemon *d, struct evhttp_request *req, const struct route_args *a)
{
        struct al_error err = {0};
        json_t *list = NULL;
        if (volume_list(&list, &err) < 0) {
                reply_volume_error(d, req, &err);
                return;
        }
        json_t *mine = json_array();
        size_t i;
        json_t *v;
        json_array_foreach(list, i, v) if (may_use(a->grant, v)) json_array_append(mine, v);
        json_decref(list);
        reply_json(d, req, 200, json_pack("{s:o}", "volumes", mine));
}

void route_volume_create(struct daemon *d, struct evhttp_request *req, const struct route_args *a)
{
        if (!require(d, req, a->grant, a->grant->allow_sandbox, "allowSandbox"))
                return;
        json_t *body = read_json_body(d, req, false);
        if (!body)
                return;
        static const char *const keys[] = {"name", "size", NULL};
        if (reject_unknown(d, req, body, keys)) {
                json_decref(body);
                return;
        }
        json_t *jname = json_object_get(body, "name");
        json_t *jsize = json_object_get(body, "size");
        uint64_t size = 0;
        const char *why = json_is_string(jname) ? volume_name_check(json_string_value(jname))
                                                : "must be a string";
        if (why) {
                reply_bad_field(d, req, "name", why);
                json_decref(body);
                return;
        }
        if (json_is_integer(jsize) && json_integer_value(jsize) > 0)
                size = (uint64_t)json_integer_value(jsize);
        else if (!json_is_string(jsize) || parse_size(json_string_value(jsize), &size) < 0) {
                reply_bad_field(d, req, "size", "must be a size such as \"1G\" or a byte count");
                json_decref(body);
                return;
        }
        struct al_error err = {0};
        const char *name = json_string_value(jname);
        json_t *info = NULL;
        /* Its line names a volume that exists, so it comes after: the
         * log's reserve is made sure of first, and a volume whose line
         * still could not be written is taken back. */
        if (!record_audit_room(d)) {
                reply_audit_failed(d, req, d->audit_fault);
                json_decref(body);
                return;
        }
        if (volume_create(name, size, a->grant->name, &err) < 0 ||
            volume_info(name, &info, &err) < 0) {
                reply_volume_error(d, req, &err);
                json_decref(body);
                return;
        }
        if (record_audit(d, VOLUME_AUDIT_SANDBOX, "api.volume_created",
                         json_pack("{s:s, s:s, s:I}", "grant", a->grant->name, "volume", name,
                                   "size", (json_int_t)size)) < 0) {
                json_decref(info);
                struct al_error rm = {0};
                if (volume_remove(name, &rm) < 0)
                        daemon_log(d,
                                   "volume %s: made without its audit line, and removing it "
                                   "failed: %s",
                                   name, rm.msg);
                reply_audit_failed(d, req, d->audit_fault);
        } else
                reply_json(d, req, 201, info);
        json_decref(body);
}

void route_volume_get(struct daemon *d, struct evhttp_request *req, const struct route_args *a)
{
        json_t *info = find_volume(d, req, a->grant, a->name);
        if (info)
                reply_json(d, req, 200, info);
}

void route_volume_delete(struct daemon *d, struct evhttp_request *req, const struct route_args *a)
{
        if (!require(d, req, a->grant, a->grant->allow_sandbox, "allowSandbox"))
                return;
        json_t *info = find_volume(d, req, a->grant, a->name);
        if (!info)
                return;
        json_decref(info);
        struct al_error err = {0};
        /* The line first: a removal that cannot be recorded is not made
         * (the line may name a removal that then fails, as a file's). */
        if (record_audit(d, VOLUME_AUDIT_SANDBOX, "api.volume_removed",
                         json_pack("{s:s, s:s}", "grant", a->grant->name, "volume", a->name)) < 0) {
                reply_audit_failed(d, req, d->audit_fault);
                return;
        }
        if (volume_remove(a->name, &err) < 0) {
                reply_volume_error(d, req, &err);
                return;
        }
        reply_json(d, req, 200, json_pack("{s:s}", "deleted", a->name));
}

int volumes_apply_create(struct daemon *d, struct evhttp_request *req, const struct grant *g,
                         json_t *body, struct policy *p)
{
        json_t *jvols = json_object_get(body, "volumes");
        json_t *jhome = json_object_get(body, "home");
        if (jvols && !json_is_null(jvols)) {
                if (!json_is_array(jvols) || json_array_size(jvols) > 16) {
                        reply_bad_field(d, req, "volumes",
                                        "must be an array of at most 16 {\"name\", \"target\", "
                                        "\"readonly\"}");
                        return -1;
                }
                size_t i;
                json_t *v;
                json_array_foreach(jvols, i, v)
                {
                        _cleanup_free_ char *field = xasprintf("volumes[%zu]", i);
                        json_t *n = json_object_get(v, "name");
                        json_t *t = json_object_get(v, "target");
                        json_t *ro = json_object_get(v, "readonly");
                        if (!json_is_object(v) || json_object_size(v) > 3 || !json_is_string(n) ||
                            !json_is_string(t) || json_string_value(t)[0] != '/' ||
                            (ro && !json_is_boolean(ro))) {
                                reply_bad_field(d, req, field,
                                                "must be {\"name\", \"target\" (an absolute "
                                                "path), \"readonly\" (optional)}");
                                return -1;
                        }
                        policy_add_volume(p, json_string_value(n), json_string_value(t),
                                          json_is_true(ro));
                }
        }
        if (jhome && !json_is_null(jhome)) {
                if (!json_is_string(jhome)) {
                        reply_bad_field(d, req, "home", "must be a volume name");
                        return -1;
                }
                policy_add_volume(p, json_string_value(jhome), env_home_for_uid(p->uid), false);
        }
        /* A missing or busy volume is named now, with its own status; the
         * lock taken at start is what decides. */
        for (size_t i = 0; i < p->n_mounts; i++) {
                const struct policy_mount *m = &p->mounts[i];
                if (!m->volume || volume_name_check(m->volume))
                        continue;
                json_t *info = find_volume(d, req, g, m->volume);
                if (!info)
                        return -1;
                const char *how = json_string_value(json_object_get(info, "attached"));
                bool rw = how && STREQ(how, "rw");
                bool busy = how && (!m->readonly || rw);
                json_decref(info); /* how goes with it */
                if (busy) {
                        reply_error(d, req, 409, "volume_attached",
                                    "volume %s is attached %s to another sandbox", m->volume,
                                    rw ? "read-write" : "read-only");
                        return -1;
                }
        }
        return 0;
}
