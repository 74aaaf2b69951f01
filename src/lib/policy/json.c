/* SPDX-License-Identifier: Apache-2.0 */
/* The policy as canonical JSON. */
#include <jansson.h>

#include "policy-internal.h"

/* Canonical JSON */

static json_t *str_json(const char *s)
{
        return s ? json_string(s) : json_null();
}

static json_t *strv_json(char *const *v, size_t n)
{
        json_t *a = json_array();
        for (size_t i = 0; i < n; i++)
                json_array_append_new(a, str_json(v[i]));
        return a;
}

static json_t *kv_json(const struct policy_kv *kv, size_t n)
{
        json_t *o = json_object();
        for (size_t i = 0; i < n; i++)
                if (kv[i].key)
                        json_object_set_new(o, kv[i].key, str_json(kv[i].value));
        return o;
}

/* Thousandths as a JSON number: an integer when whole. */
static json_t *milli_json(uint64_t v)
{
        if (v % 1000 == 0)
                return json_integer((json_int_t)(v / 1000));
        return json_real((double)v / 1000.0);
}

static const char *enum_name(const char *const *names, size_t n, unsigned v)
{
        return v < n ? names[v] : "invalid";
}

char *policy_to_json(const struct policy *p)
{
        json_t *root = json_object(), *o, *a;

        o = json_object();
        json_object_set_new(o, "path", str_json(p->workspace));
        json_object_set_new(
            o, "mode",
            json_string(enum_name(policy_workspace_modes, ARRAY_SIZE(policy_workspace_modes),
                                  p->workspace_mode)));
        json_object_set_new(o, "protectGit", json_boolean(p->protect_git));
        if (p->allow_broad) /* written only when set, so older digests hold */
                json_object_set_new(o, "allowBroad", json_true());
        json_object_set_new(root, "workspace", o);

        o = json_object();
        json_object_set_new(
            o, "read",
            json_string(enum_name(policy_read_modes, ARRAY_SIZE(policy_read_modes), p->read)));
        json_object_set_new(o, "denyRead", strv_json(p->deny_read, p->n_deny_read));
        json_object_set_new(o, "allowWrite", strv_json(p->allow_write, p->n_allow_write));
        if (p->n_deny_write)
                json_object_set_new(o, "denyWrite", strv_json(p->deny_write, p->n_deny_write));
        if (p->n_allow_read)
                json_object_set_new(o, "allowRead", strv_json(p->allow_read, p->n_allow_read));
        a = json_array();
        for (size_t i = 0; i < p->n_mounts; i++)
                json_array_append_new(
                    a, json_pack("{s:o, s:o, s:b}", p->mounts[i].volume ? "volume" : "source",
                                 str_json(p->mounts[i].volume ? p->mounts[i].volume
                                                              : p->mounts[i].source),
                                 "target", str_json(p->mounts[i].target), "readonly",
                                 p->mounts[i].readonly));
        json_object_set_new(o, "mounts", a);
        json_object_set_new(root, "filesystem", o);

        o = json_object();
        json_object_set_new(
            o, "mode",
            json_string(enum_name(policy_net_modes, ARRAY_SIZE(policy_net_modes), p->net_mode)));
        json_object_set_new(o, "allow", strv_json(p->net_allow, p->n_net_allow));
        json_object_set_new(o, "deny", strv_json(p->net_deny, p->n_net_deny));
        json_object_set_new(o, "allowPrivate",
                            strv_json(p->net_allow_private, p->n_net_allow_private));
        json_object_set_new(o, "hosts", kv_json(p->net_hosts, p->n_net_hosts));
        a = json_array();
        for (size_t i = 0; i < p->n_routes; i++) {
                const struct policy_route *r = &p->routes[i];
                json_t *ro = json_pack(
                    "{s:o, s:o, s:o, s:o, s:o, s:o, s:b}", "name", str_json(r->name), "upstream",
                    str_json(r->upstream), "inject", kv_json(r->inject, r->n_inject), "strip",
                    strv_json(r->strip, r->n_strip), "record", strv_json(r->record, r->n_record),
                    "caFile", str_json(r->ca_file), "hostOnly", r->host_only);
                if (r->terminate)
                        json_object_set_new(ro, "terminate", json_true());
                if (r->cleartext)
                        json_object_set_new(ro, "cleartext", json_true());
                json_array_append_new(a, ro);
        }
        json_object_set_new(o, "routes", a);
        a = json_array();
        for (size_t i = 0; i < p->n_sentinels; i++) {
                const struct policy_sentinel *sn = &p->sentinels[i];
                json_t *so =
                    json_pack("{s:o, s:o, s:o}", "env", str_json(sn->env), "secret",
                              str_json(sn->secret), "hosts", strv_json(sn->hosts, sn->n_hosts));
                if (so && sn->n_cleartext_at)
                        json_object_set_new(so, "cleartext",
                                            strv_json(sn->cleartext_at, sn->n_cleartext_at));
                else if (so && sn->cleartext)
                        json_object_set_new(so, "cleartext", json_true());
                json_array_append_new(a, so);
        }
        if (p->net_direct_path)
                json_object_set_new(o, "directPath", json_true());
        if (p->net_parent_proxy) {
                json_object_set_new(o, "parentProxy", str_json(p->net_parent_proxy));
                json_object_set_new(o, "noProxy", strv_json(p->net_no_proxy, p->n_net_no_proxy));
                if (p->net_parent_send_names)
                        json_object_set_new(o, "parentProxySendNames", json_true());
        }
        /* Only when used: a policy without them reads as it did before. */
        if (p->n_sentinels)
                json_object_set_new(o, "sentinels", a);
        else
                json_decref(a);
        json_object_set_new(
            o, "budget",
            json_pack("{s:I, s:I, s:I, s:I}", "requests", (json_int_t)p->budget.requests, "bytes",
                      (json_int_t)p->budget.bytes, "rate", (json_int_t)p->budget.rate, "refusals",
                      (json_int_t)p->budget.refusals));
        json_t *net_o = o;
        json_object_set_new(root, "network", o);

        o = json_object();
        for (size_t i = 0; i < policy_n_limit_descs; i++) {
                const struct limit_desc *d = &policy_limit_descs[i];
                uint64_t v = *policy_limit_field((struct policy_limits *)&p->limits, d);
                json_object_set_new(o, d->key,
                                    d->kind == KIND_DURATION || d->kind == KIND_CPUS
                                        ? milli_json(v)
                                        : json_integer((json_int_t)v));
        }
        json_t *io = json_object();
        for (size_t i = 0; i < policy_n_io_descs; i++) {
                const struct limit_desc *d = &policy_io_descs[i];
                uint64_t v = *policy_io_field((struct policy_io *)&p->limits.io, d);
                json_object_set_new(io, d->key, json_integer((json_int_t)v));
        }
        json_object_set_new(o, "io", io);
        json_object_set_new(root, "limits", o);

        json_object_set_new(root, "class", str_json(p->class_name));
        /* Written only when not the defaults, so older digests hold. */
        if (p->tier != POLICY_TIER_NAMESPACE)
                json_object_set_new(root, "tier", json_string(policy_tier_name(p->tier)));
        if (p->image)
                json_object_set_new(root, "image", json_string(p->image));
        if (p->trust_repo_config)
                json_object_set_new(root, "trustRepoConfig", json_true());
        json_object_set_new(root, "env", kv_json(p->env, p->n_env));
        o = json_pack("{s:o}", "allow", strv_json(p->tools_allow, p->n_tools_allow));
        json_t *define = policy_tools_define_json(p);
        if (json_object_size(define) > 0) /* written only when set, so older digests hold */
                json_object_set_new(o, "define", define);
        else
                json_decref(define);
        json_object_set_new(root, "tools", o);
        policy_ask_json(p, root, net_o, o);
        json_object_set_new(root, "uid", json_integer(p->uid));
        json_object_set_new(root, "gid", json_integer(p->gid));
        if (p->users) /* written only when set, so older digests hold */
                json_object_set_new(root, "users", json_integer(p->users));
        if (p->hardware_json) {
                json_error_t jerr;
                json_t *hw = json_loads(p->hardware_json, 0, &jerr);
                if (hw)
                        json_object_set_new(root, "hardware", hw);
        }
        json_t *health = policy_health_json(p);
        if (health)
                json_object_set_new(root, "health", health);

        char *s = json_dumps(root, JSON_COMPACT | JSON_SORT_KEYS | JSON_REAL_PRECISION(15));
        json_decref(root);
        return s;
}
