/* SPDX-License-Identifier: Apache-2.0 */
/* Loading: a JSON document overlaid on a policy, one handler per key and a
 * table per object; unknown keys are errors naming their path. */
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <jansson.h>
#include <math.h>
#include <string.h>

#include "hardware.h"
#include "policy-internal.h"

#define POLICY_MAX_SIZE (1024 * 1024)

int policy_parse_json_value(struct ctx *c, json_t *v, enum value_kind kind, uint64_t min,
                            uint64_t max, uint64_t *ret)
{
        const char *what = policy_kind_what(kind, min);
        bool duration = kind == KIND_DURATION || kind == KIND_SECONDS;
        uint64_t x;

        if (json_is_integer(v)) {
                json_int_t i = json_integer_value(v);
                if (i < 0)
                        return policy_fail(c, "\"%s\" must be %s", c->path, what);
                x = (uint64_t)i;
                if (duration || kind == KIND_CPUS) {
                        if (x > INT64_MAX / 1000)
                                return policy_check_range(c, c->path, kind, UINT64_MAX, min, max);
                        x *= 1000;
                }
        } else if (json_is_real(v) && (duration || kind == KIND_CPUS)) {
                double d = json_real_value(v);
                if (!isfinite(d) || d < 0)
                        return policy_fail(c, "\"%s\" must be %s", c->path, what);
                if (d > 9e15)
                        return policy_check_range(c, c->path, kind, UINT64_MAX, min, max);
                x = (uint64_t)(d * 1000.0 + 0.5);
                if (x == 0 && d > 0 && duration)
                        return policy_fail(c, "\"%s\" must be 0 or at least 1ms", c->path);
        } else if (json_is_string(v) && (duration || kind == KIND_SIZE)) {
                const char *s = json_string_value(v);
                int r = policy_parse_text(s, kind, &x);
                if (r == -ERANGE)
                        return policy_fail(c, "\"%s\" is too large", c->path);
                if (r == -EDOM)
                        return policy_fail(c, "\"%s\" must be 0 or at least 1ms (got \"%s\")",
                                           c->path, SHOWN(s));
                if (r < 0)
                        return policy_fail(c, "\"%s\" must be %s (got \"%s\")", c->path, what,
                                           SHOWN(s));
        } else
                return policy_fail(c, "\"%s\" must be %s", c->path, what);

        int r = policy_check_range(c, c->path, kind, x, min, max);
        if (r < 0)
                return r;
        *ret = x;
        return 0;
}

/* Loading: one handler per key, tables per object (policy-internal.h). */

int policy_parse_fields(struct ctx *c, void *target, json_t *obj, const struct policy_field *fields,
                        size_t n_fields)
{
        const char *key;
        json_t *v;

        if (!json_is_object(obj))
                return policy_fail(c, "\"%s\" must be an object", c->path);
        json_object_foreach(obj, key, v)
        {
                const struct policy_field *f = NULL;
                size_t mark = policy_path_push(c, key);
                for (size_t i = 0; i < n_fields && !f; i++)
                        if (STREQ(fields[i].name, key))
                                f = &fields[i];
                if (!f)
                        return policy_fail(c, "unknown key \"%s\"", c->path);
                int r = f->parse(c, target, v);
                if (r < 0)
                        return r;
                policy_path_pop(c, mark);
        }
        return 0;
}

int policy_get_string(struct ctx *c, json_t *v, char **field)
{
        if (!json_is_string(v))
                return policy_fail(c, "\"%s\" must be a string", c->path);
        free(*field);
        *field = xstrdup(json_string_value(v));
        return 0;
}

int policy_get_string_or_null(struct ctx *c, json_t *v, char **field)
{
        if (json_is_null(v)) {
                free(*field);
                *field = NULL;
                return 0;
        }
        if (!json_is_string(v))
                return policy_fail(c, "\"%s\" must be a string or null", c->path);
        return policy_get_string(c, v, field);
}

int policy_get_bool(struct ctx *c, json_t *v, bool *field)
{
        if (!json_is_boolean(v))
                return policy_fail(c, "\"%s\" must be true or false", c->path);
        *field = json_is_true(v);
        return 0;
}

int policy_get_enum(struct ctx *c, json_t *v, const char *const *names, size_t n, int *ret)
{
        char list[128] = "";

        for (size_t i = 0; i < n; i++) {
                size_t len = strlen(list);
                snprintf(list + len, sizeof(list) - len, "%s%s", i ? ", " : "", names[i]);
        }
        if (!json_is_string(v))
                return policy_fail(c, "\"%s\" must be one of %s", c->path, list);
        for (size_t i = 0; i < n; i++)
                if (STREQ(names[i], json_string_value(v))) {
                        *ret = (int)i;
                        return 0;
                }
        char why[160];
        snprintf(why, sizeof(why), "must be one of %s", list);
        return policy_fail_value(c, c->path, why, json_string_value(v));
}

/* An array of strings replaces the list it is read into. */
int policy_get_strv(struct ctx *c, json_t *v, char ***field, size_t *n)
{
        size_t i;
        json_t *e;

        if (!json_is_array(v))
                return policy_fail(c, "\"%s\" must be an array of strings", c->path);
        strv_free_n(*field, *n);
        *field = NULL;
        *n = 0;
        json_array_foreach(v, i, e)
        {
                if (!json_is_string(e)) {
                        policy_path_push_index(c, i);
                        return policy_fail(c, "\"%s\" must be a string", c->path);
                }
                *field = strv_append(*field, n, json_string_value(e));
        }
        return 0;
}

/* An object of strings replaces the map it is read into. */
int policy_get_kv(struct ctx *c, json_t *v, struct policy_kv **field, size_t *n)
{
        const char *key;
        json_t *e;

        if (!json_is_object(v))
                return policy_fail(c, "\"%s\" must be an object", c->path);
        policy_kv_free_n(*field, *n);
        *field = xcalloc(json_object_size(v), sizeof(**field));
        *n = 0;
        json_object_foreach(v, key, e)
        {
                if (!json_is_string(e)) {
                        policy_path_push(c, key);
                        return policy_fail(c, "\"%s\" must be a string", c->path);
                }
                (*field)[*n].key = xstrdup(key);
                (*field)[*n].value = xstrdup(json_string_value(e));
                (*n)++;
        }
        return 0;
}

/* workspace */

static int ws_path(struct ctx *c, void *t, json_t *v)
{
        return policy_get_string_or_null(c, v, &((struct policy *)t)->workspace);
}

static int ws_mode(struct ctx *c, void *t, json_t *v)
{
        int m;
        int r =
            policy_get_enum(c, v, policy_workspace_modes, ARRAY_SIZE(policy_workspace_modes), &m);
        if (r >= 0)
                ((struct policy *)t)->workspace_mode = (enum policy_workspace_mode)m;
        return r;
}

static int ws_protect_git(struct ctx *c, void *t, json_t *v)
{
        return policy_get_bool(c, v, &((struct policy *)t)->protect_git);
}

static int ws_allow_broad(struct ctx *c, void *t, json_t *v)
{
        return policy_get_bool(c, v, &((struct policy *)t)->allow_broad);
}

static const struct policy_field workspace_fields[] = {
    {"path", ws_path},
    {"mode", ws_mode},
    {"protectGit", ws_protect_git},
    {"allowBroad", ws_allow_broad},
};

/* filesystem */

static int fs_read(struct ctx *c, void *t, json_t *v)
{
        int m;
        int r = policy_get_enum(c, v, policy_read_modes, ARRAY_SIZE(policy_read_modes), &m);
        if (r >= 0)
                ((struct policy *)t)->read = (enum policy_read_mode)m;
        return r;
}

static int fs_deny_read(struct ctx *c, void *t, json_t *v)
{
        struct policy *p = t;
        return policy_get_strv(c, v, &p->deny_read, &p->n_deny_read);
}

static int fs_allow_write(struct ctx *c, void *t, json_t *v)
{
        struct policy *p = t;
        return policy_get_strv(c, v, &p->allow_write, &p->n_allow_write);
}

static int fs_deny_write(struct ctx *c, void *t, json_t *v)
{
        struct policy *p = t;
        return policy_get_strv(c, v, &p->deny_write, &p->n_deny_write);
}

static int fs_allow_read(struct ctx *c, void *t, json_t *v)
{
        struct policy *p = t;
        return policy_get_strv(c, v, &p->allow_read, &p->n_allow_read);
}

static int mount_source(struct ctx *c, void *t, json_t *v)
{
        return policy_get_string(c, v, &((struct policy_mount *)t)->source);
}

static int mount_volume(struct ctx *c, void *t, json_t *v)
{
        return policy_get_string(c, v, &((struct policy_mount *)t)->volume);
}

static int mount_target(struct ctx *c, void *t, json_t *v)
{
        return policy_get_string(c, v, &((struct policy_mount *)t)->target);
}

static int mount_readonly(struct ctx *c, void *t, json_t *v)
{
        return policy_get_bool(c, v, &((struct policy_mount *)t)->readonly);
}

static const struct policy_field mount_fields[] = {
    {"source", mount_source},
    {"volume", mount_volume},
    {"target", mount_target},
    {"readonly", mount_readonly},
};

static int fs_mounts(struct ctx *c, void *t, json_t *v)
{
        struct policy *p = t;
        size_t i;
        json_t *e;

        if (!json_is_array(v))
                return policy_fail(c, "\"%s\" must be an array", c->path);
        mounts_free_n(p->mounts, p->n_mounts);
        p->n_mounts = json_array_size(v);
        p->mounts = xcalloc(p->n_mounts, sizeof(*p->mounts));
        json_array_foreach(v, i, e)
        {
                size_t mark = policy_path_push_index(c, i);
                p->mounts[i].readonly = true;
                int r = policy_parse_fields(c, &p->mounts[i], e, mount_fields,
                                            ARRAY_SIZE(mount_fields));
                if (r < 0)
                        return r;
                policy_path_pop(c, mark);
        }
        return 0;
}

static const struct policy_field filesystem_fields[] = {
    {"read", fs_read},
    {"denyRead", fs_deny_read},
    {"allowWrite", fs_allow_write},
    {"denyWrite", fs_deny_write},
    {"allowRead", fs_allow_read},
    {"mounts", fs_mounts},
};

/* limits.io: keys and handling come from policy_io_descs. */
static int parse_io(struct ctx *c, struct policy *p, json_t *obj)
{
        const char *key;
        json_t *v;

        if (!json_is_object(obj))
                return policy_fail(c, "\"%s\" must be an object", c->path);
        json_object_foreach(obj, key, v)
        {
                size_t mark = policy_path_push(c, key);
                const struct limit_desc *d = policy_io_desc_find(key);
                if (!d)
                        return policy_fail(c, "unknown key \"%s\"", c->path);
                int r = policy_parse_json_value(c, v, d->kind, d->min, d->max,
                                                policy_io_field(&p->limits.io, d));
                if (r < 0)
                        return r;
                p->limits_set |= d->bit;
                policy_path_pop(c, mark);
        }
        return 0;
}

/* limits: keys and handling come from policy_limit_descs. */

static int parse_limits(struct ctx *c, struct policy *p, json_t *obj)
{
        const char *key;
        json_t *v;

        if (!json_is_object(obj))
                return policy_fail(c, "\"%s\" must be an object", c->path);
        json_object_foreach(obj, key, v)
        {
                size_t mark = policy_path_push(c, key);
                if (STREQ(key, "io")) {
                        int r = parse_io(c, p, v);
                        if (r < 0)
                                return r;
                        policy_path_pop(c, mark);
                        continue;
                }
                const struct limit_desc *d = policy_limit_desc_find(key);
                uint64_t x;
                if (!d)
                        return policy_fail(c, "unknown key \"%s\"", c->path);
                int r = policy_parse_json_value(c, v, d->kind, d->min, d->max, &x);
                if (r < 0)
                        return r;
                policy_limit_store(p, d, x);
                policy_path_pop(c, mark);
        }
        return 0;
}

/* top level */

static int top_workspace(struct ctx *c, void *t, json_t *v)
{
        return policy_parse_fields(c, t, v, workspace_fields, ARRAY_SIZE(workspace_fields));
}

static int top_filesystem(struct ctx *c, void *t, json_t *v)
{
        return policy_parse_fields(c, t, v, filesystem_fields, ARRAY_SIZE(filesystem_fields));
}

static int top_limits(struct ctx *c, void *t, json_t *v)
{
        return parse_limits(c, t, v);
}

static int top_class(struct ctx *c, void *t, json_t *v)
{
        return policy_get_string(c, v, &((struct policy *)t)->class_name);
}

static int top_tier(struct ctx *c, void *t, json_t *v)
{
        int i;
        int r = policy_get_enum(c, v, policy_tier_names_v, POLICY_TIER_COUNT_, &i);
        if (r < 0)
                return r;
        ((struct policy *)t)->tier = (enum policy_tier)i;
        return 0;
}

static int top_image(struct ctx *c, void *t, json_t *v)
{
        return policy_get_string_or_null(c, v, &((struct policy *)t)->image);
}

static int top_trust_repo(struct ctx *c, void *t, json_t *v)
{
        return policy_get_bool(c, v, &((struct policy *)t)->trust_repo_config);
}

static int top_env(struct ctx *c, void *t, json_t *v)
{
        struct policy *p = t;
        return policy_get_kv(c, v, &p->env, &p->n_env);
}

static int tools_allow(struct ctx *c, void *t, json_t *v)
{
        struct policy *p = t;
        return policy_get_strv(c, v, &p->tools_allow, &p->n_tools_allow);
}

static int tools_define(struct ctx *c, void *t, json_t *v)
{
        return policy_tools_parse_define(c, t, v);
}

static const struct policy_field tools_fields[] = {
    {"allow", tools_allow},
    {"define", tools_define},
    {"onUnlisted", policy_tools_on_unlisted_parse},
};

static int top_tools(struct ctx *c, void *t, json_t *v)
{
        return policy_parse_fields(c, t, v, tools_fields, ARRAY_SIZE(tools_fields));
}

static int get_id(struct ctx *c, json_t *v, uint32_t *field)
{
        if (!json_is_integer(v) || json_integer_value(v) < 0 ||
            json_integer_value(v) > UID_MAX_INSIDE)
                return policy_fail(c, "\"%s\" must be an integer from 0 to %d", c->path,
                                   UID_MAX_INSIDE);
        *field = (uint32_t)json_integer_value(v);
        return 0;
}

static int top_uid(struct ctx *c, void *t, json_t *v)
{
        return get_id(c, v, &((struct policy *)t)->uid);
}

static int top_gid(struct ctx *c, void *t, json_t *v)
{
        return get_id(c, v, &((struct policy *)t)->gid);
}

static int top_users(struct ctx *c, void *t, json_t *v)
{
        if (!json_is_integer(v) || json_integer_value(v) < 0 ||
            json_integer_value(v) > UID_MAX_INSIDE + 1)
                return policy_fail(c, "\"users\" must be an integer from 0 to %d",
                                   UID_MAX_INSIDE + 1);
        ((struct policy *)t)->users = (uint32_t)json_integer_value(v);
        return 0;
}

/* Checked whole here (hardware.c); kept as canonical text. */
static int top_hardware(struct ctx *c, void *t, json_t *v)
{
        struct policy *p = t;
        struct policy_hardware h;
        struct al_error e = {0};
        if (policy_hardware_parse(v, "hardware", &h, &e) < 0)
                return policy_fail(c, "%s", e.msg);
        policy_hardware_clear(&h);
        char *s = json_dumps(v, JSON_COMPACT | JSON_SORT_KEYS | JSON_REAL_PRECISION(17));
        if (!s)
                return policy_fail(c, "\"%s\" could not be encoded", c->path);
        free(p->hardware_json);
        p->hardware_json = s;
        return 0;
}

static const struct policy_field top_fields[] = {
    {"workspace", top_workspace},
    {"filesystem", top_filesystem},
    {"network", policy_network_parse},
    {"limits", top_limits},
    {"class", top_class},
    {"tier", top_tier},
    {"image", top_image},
    {"trustRepoConfig", top_trust_repo},
    {"env", top_env},
    {"tools", top_tools},
    {"uid", top_uid},
    {"gid", top_gid},
    {"users", top_users},
    {"health", policy_health_parse},
    {"hardware", top_hardware},
    {"ask", policy_ask_parse},
};
/* Loading */

static int too_large(struct al_error *err, const char *origin)
{
        al_error_set(err, 0, "%s: larger than 1 MiB, refused", origin);
        if (err)
                err->code = EFBIG;
        return -EFBIG;
}

static int load_json(struct policy *p, const char *text, size_t len, const char *origin,
                     struct al_error *err)
{
        struct ctx c = {.origin = origin ? origin : "policy", .err = err};
        json_error_t jerr;
        int r;

        if (len > POLICY_MAX_SIZE)
                return too_large(err, c.origin);
        json_t *doc = json_loadb(text, len, JSON_REJECT_DUPLICATES, &jerr);
        if (!doc)
                return al_error_set(err, 0, "%s:%d:%d: %s", c.origin, jerr.line, jerr.column,
                                    jerr.text);
        if (!json_is_object(doc)) {
                json_decref(doc);
                return policy_fail(&c, "the document must be a JSON object");
        }

        _cleanup_(policy_freep) struct policy *t = policy_dup(p);
        r = policy_parse_fields(&c, t, doc, top_fields, ARRAY_SIZE(top_fields));
        if (r >= 0 && json_object_get(doc, "uid") && !json_object_get(doc, "gid"))
                t->gid = t->uid;
        json_decref(doc);
        if (r < 0)
                return r;
        r = policy_validate(&c, t);
        if (r < 0)
                return r;
        policy_commit(p, TAKE_PTR(t));
        return 0;
}

int policy_load_string(struct policy *p, const char *json, const char *origin, struct al_error *err)
{
        if (!json)
                return al_error_set(err, 0, "%s: no policy text", origin ? origin : "policy");
        return load_json(p, json, strnlen(json, POLICY_MAX_SIZE + 1), origin, err);
}

int policy_load_file(struct policy *p, const char *path, struct al_error *err)
{
        _cleanup_free_ char *text = NULL;
        size_t len = 0;

        /* read_file_at() refuses a file of exactly `max` bytes, so ask for one
         * more and check the length here. */
        int r = read_file_at(AT_FDCWD, path, POLICY_MAX_SIZE + 1, &text, &len);
        if (r == -EFBIG || (r >= 0 && len > POLICY_MAX_SIZE))
                return too_large(err, path);
        if (r < 0)
                return al_error_set(err, r, "reading policy \"%s\"", path);
        return load_json(p, text, len, path, err);
}
