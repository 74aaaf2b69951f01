/* SPDX-License-Identifier: Apache-2.0 */
#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "caps.h"
#include "env.h"
#include "util.h"

/* The effective capabilities of a running sandbox, as a pure model
 * (caps.h). Every check a change needs that does not touch the host is
 * here, so that the unit tests see all of it. */

static const char *const kind_names[] = {
    [CAPS_NET_ALLOW] = "network.allow",
    [CAPS_NET_DENY] = "network.deny",
    [CAPS_NET_BUDGET] = "network.budget",
    [CAPS_TOOL] = "tool",
    [CAPS_MOUNT] = "mount",
    [CAPS_ENV] = "env",
};

const char *caps_kind_name(enum caps_kind k)
{
        return kind_names[k];
}

static char **strv_copy(char *const *v, size_t n)
{
        char **r = NULL;
        size_t m = 0;
        for (size_t i = 0; i < n; i++)
                r = strv_append(r, &m, v[i]);
        return r;
}

static ssize_t strv_find(char *const *v, size_t n, const char *s)
{
        for (size_t i = 0; i < n; i++)
                if (STREQ(v[i], s))
                        return (ssize_t)i;
        return -1;
}

static void strv_remove(char **v, size_t *n, size_t i)
{
        free(v[i]);
        memmove(&v[i], &v[i + 1], (*n - i) * sizeof(*v)); /* moves the NULL too */
        (*n)--;
}

struct caps *caps_new(const struct policy *p)
{
        struct caps *c = xcalloc(1, sizeof(*c));
        c->policy = p;
        c->allow = strv_copy(p->net_allow, p->n_net_allow);
        c->n_allow = p->n_net_allow;
        c->deny = strv_copy(p->net_deny, p->n_net_deny);
        c->n_deny = p->n_net_deny;
        c->budget = p->budget;
        return c;
}

struct caps *caps_free(struct caps *c)
{
        if (!c)
                return NULL;
        strv_free(c->allow);
        strv_free(c->deny);
        strv_free(c->tools_on);
        strv_free(c->tools_off);
        strv_free(c->env);
        strv_free(c->env_off);
        for (size_t i = 0; i < c->n_mounts; i++) {
                free(c->mounts[i].source);
                free(c->mounts[i].target);
        }
        free(c->mounts);
        free(c);
        return NULL;
}

struct caps *caps_dup(const struct caps *c)
{
        struct caps *d = xcalloc(1, sizeof(*d));
        d->policy = c->policy;
        d->allow = strv_copy(c->allow, c->n_allow);
        d->n_allow = c->n_allow;
        d->deny = strv_copy(c->deny, c->n_deny);
        d->n_deny = c->n_deny;
        d->budget = c->budget;
        d->tools_on = strv_copy(c->tools_on, c->n_tools_on);
        d->n_tools_on = c->n_tools_on;
        d->tools_off = strv_copy(c->tools_off, c->n_tools_off);
        d->n_tools_off = c->n_tools_off;
        d->env = strv_copy(c->env, c->n_env);
        d->n_env = c->n_env;
        d->env_off = strv_copy(c->env_off, c->n_env_off);
        d->n_env_off = c->n_env_off;
        d->mounts = xcalloc(CAPS_MOUNTS_MAX, sizeof(*d->mounts));
        for (size_t i = 0; i < c->n_mounts; i++) {
                d->mounts[i].source = xstrdup(c->mounts[i].source);
                d->mounts[i].target = xstrdup(c->mounts[i].target);
                d->mounts[i].readonly = c->mounts[i].readonly;
        }
        d->n_mounts = c->n_mounts;
        d->one_command = c->one_command;
        return d;
}

/* ---- parsing a change ---- */

static int fail(char *why, size_t n, const char *fmt, ...) __attribute__((format(printf, 3, 4)));
static int fail(char *why, size_t n, const char *fmt, ...)
{
        va_list ap;
        va_start(ap, fmt);
        vsnprintf(why, n, fmt, ap);
        va_end(ap);
        return -EINVAL;
}

/* A JSON string without NUL bytes, valid UTF-8 (jansson checks it). */
static const char *plain_string(const json_t *v)
{
        if (!json_is_string(v) || strlen(json_string_value(v)) != json_string_length(v))
                return NULL;
        return json_string_value(v);
}

static bool only_keys(const json_t *o, const char *const *keys, const char **ret_bad)
{
        const char *k;
        json_t *v;
        json_object_foreach((json_t *)o, k, v)
        {
                bool known = false;
                for (size_t i = 0; keys[i]; i++)
                        known = known || STREQ(k, keys[i]);
                if (!known) {
                        *ret_bad = k;
                        return false;
                }
        }
        return true;
}

static bool is_tool_name(const char *s)
{
        size_t n = strlen(s);
        if (n == 0 || n > 64 || s[0] == '.' || s[0] == '-')
                return false;
        return strspn(s, "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789._-") == n;
}

static int parse_budget(const json_t *b, struct caps_entry *e, const char *at, char *why, size_t n)
{
        if (!json_is_object(b) || json_object_size(b) == 0)
                return fail(why, n,
                            "%s.network.budget: must be an object of \"requests\", \"bytes\" "
                            "and \"refusals\"",
                            at);
        const char *k;
        json_t *v;
        json_object_foreach((json_t *)b, k, v)
        {
                uint64_t *dst;
                bool *has;
                if (STREQ(k, "requests"))
                        dst = &e->requests, has = &e->has_requests;
                else if (STREQ(k, "bytes"))
                        dst = &e->bytes, has = &e->has_bytes;
                else if (STREQ(k, "refusals"))
                        dst = &e->refusals, has = &e->has_refusals;
                else if (STREQ(k, "rate"))
                        return fail(why, n,
                                    "%s.network.budget.rate: the rate is fixed when the sandbox "
                                    "starts; change requests, bytes or refusals",
                                    at);
                else
                        return fail(why, n,
                                    "%s.network.budget: unknown key \"%s\" (requests, bytes, "
                                    "refusals)",
                                    at, k);
                if (!json_is_integer(v) || json_integer_value(v) < 0)
                        return fail(why, n,
                                    "%s.network.budget.%s: must be a whole number, 0 for "
                                    "unlimited",
                                    at, k);
                *dst = (uint64_t)json_integer_value(v);
                *has = true;
        }
        return 0;
}

static int parse_network(const json_t *v, struct caps_entry *e, const char *at, char *why, size_t n)
{
        if (!json_is_object(v) || json_object_size(v) != 1)
                return fail(why, n,
                            "%s.network: must be an object with one of \"allow\", \"deny\" or "
                            "\"budget\"",
                            at);
        const char *k = json_object_iter_key(json_object_iter((json_t *)v));
        const json_t *x = json_object_get(v, k);
        if (STREQ(k, "budget")) {
                if (!e->grant)
                        return fail(why, n,
                                    "%s.network.budget: a budget is not revoked; grant its new "
                                    "value (0: unlimited)",
                                    at);
                e->kind = CAPS_NET_BUDGET;
                return parse_budget(x, e, at, why, n);
        }
        if (!STREQ(k, "allow") && !STREQ(k, "deny"))
                return fail(why, n, "%s.network: unknown key \"%s\" (allow, deny, budget)", at, k);
        e->kind = STREQ(k, "allow") ? CAPS_NET_ALLOW : CAPS_NET_DENY;
        const char *s = plain_string(x), *bad;
        if (!s)
                return fail(why, n, "%s.network.%s: must be a string (\"host\" or \"host:port\")",
                            at, k);
        if ((bad = policy_check_net_rule(s)))
                return fail(why, n, "%s.network.%s \"%.300s\": %s", at, k, s, bad);
        e->a = xstrdup(s);
        return 0;
}

static int parse_mount(const json_t *v, struct caps_entry *e, const char *at, char *why, size_t n)
{
        static const char *const keys[] = {"source", "target", "readOnly", NULL};
        const char *bad = NULL;
        if (json_is_string(v) && !e->grant)
                v = NULL; /* a revoke may name the target alone */
        if (v && !json_is_object(v))
                return fail(why, n,
                            "%s.mount: must be an object {\"source\", \"target\", \"readOnly\"}",
                            at);
        if (v && !only_keys(v, keys, &bad))
                return fail(why, n, "%s.mount: unknown key \"%s\" (source, target, readOnly)", at,
                            bad);
        const json_t *tj = v ? json_object_get(v, "target") : NULL;
        const char *t = plain_string(v ? tj : NULL);
        if (!v)
                t = plain_string(json_object_get(e->json, "mount"));
        if (!t)
                return fail(why, n, "%s.mount.target: must be a path inside the sandbox", at);
        if ((bad = policy_check_mount_target(t)))
                return fail(why, n, "%s.mount.target \"%.300s\": %s", at, t, bad);
        e->kind = CAPS_MOUNT;
        e->a = xstrdup(t);
        e->readonly = true;
        if (!e->grant)
                return 0;
        const char *s = plain_string(json_object_get(v, "source"));
        if (!s || s[0] != '/' || strlen(s) >= 4096)
                return fail(why, n, "%s.mount.source: must be an absolute host path", at);
        e->b = xstrdup(s);
        const json_t *ro = json_object_get(v, "readOnly");
        if (ro && !json_is_boolean(ro))
                return fail(why, n, "%s.mount.readOnly: must be true or false", at);
        if (ro)
                e->readonly = json_is_true(ro);
        return 0;
}

static int parse_env(const json_t *v, struct caps_entry *e, const char *at, char *why, size_t n)
{
        static const char *const keys[] = {"name", "value", NULL};
        const char *bad = NULL;
        if (!json_is_object(v))
                return fail(why, n, "%s.env: must be an object {\"name\", \"value\"}", at);
        if (!only_keys(v, keys, &bad))
                return fail(why, n, "%s.env: unknown key \"%s\" (name, value)", at, bad);
        const char *name = plain_string(json_object_get(v, "name"));
        const json_t *vj = json_object_get(v, "value");
        const char *value = plain_string(vj);
        if (!name || strlen(name) > 256)
                return fail(why, n, "%s.env.name: must be a variable name", at);
        if (e->grant && !value)
                return fail(why, n, "%s.env.value: must be a string", at);
        if (!e->grant && vj)
                return fail(why, n, "%s.env: a revoke names the variable only", at);
        if (value && strlen(value) > CAPS_ENV_VALUE_MAX)
                return fail(why, n, "%s.env.value: longer than %d bytes", at, CAPS_ENV_VALUE_MAX);
        if ((bad = policy_check_env(name, value ? value : "")))
                return fail(why, n, "%s.env \"%.256s\": %s", at, name, bad);
        if (value && strstr(value, "${secret:"))
                return fail(why, n,
                            "%s.env \"%s\": names a secret, and secrets never enter the sandbox; "
                            "inject it through a network route instead",
                            at, name);
        if (strncmp(name, "AIRLOCK_", 8) == 0)
                return fail(why, n, "%s.env \"%s\": AIRLOCK_ names are Airlock's own", at, name);
        e->kind = CAPS_ENV;
        e->a = xstrdup(name);
        e->b = value ? xstrdup(value) : NULL;
        return 0;
}

static int parse_entry(const json_t *o, struct caps_entry *e, const char *at, char *why, size_t n)
{
        if (!json_is_object(o) || json_object_size(o) != 1)
                return fail(why, n,
                            "%s: must be an object with one key: \"network\", \"tool\", "
                            "\"mount\" or \"env\"",
                            at);
        e->json = json_deep_copy(o);
        const char *k = json_object_iter_key(json_object_iter((json_t *)o));
        const json_t *v = json_object_get(o, k);
        if (STREQ(k, "network"))
                return parse_network(v, e, at, why, n);
        if (STREQ(k, "mount"))
                return parse_mount(v, e, at, why, n);
        if (STREQ(k, "env"))
                return parse_env(v, e, at, why, n);
        if (STREQ(k, "tool")) {
                const char *name = plain_string(v);
                if (!name && json_is_object(v))
                        return fail(why, n,
                                    "%s.tool: a tool is granted by the name it has in the "
                                    "policy's tools.define (or the operator's tools file); new "
                                    "definitions are not taken at run time",
                                    at);
                if (!name || !is_tool_name(name))
                        return fail(why, n,
                                    "%s.tool: must be a tool name (1 to 64 of A-Z a-z 0-9 . _ -)",
                                    at);
                e->kind = CAPS_TOOL;
                e->a = xstrdup(name);
                return 0;
        }
        return fail(why, n, "%s: unknown key \"%s\" (network, tool, mount, env)", at, k);
}

void caps_change_clear(struct caps_change *ch)
{
        for (size_t i = 0; i < ch->n; i++) {
                free(ch->e[i].a);
                free(ch->e[i].b);
                json_decref(ch->e[i].json);
        }
        free(ch->e);
        ch->e = NULL;
        ch->n = 0;
}

int caps_parse_change(const json_t *grant, const json_t *revoke, struct caps_change *ret, char *why,
                      size_t why_size)
{
        struct caps_change ch = {0};
        const json_t *lists[2] = {grant, revoke};
        const char *names[2] = {"grant", "revoke"};
        size_t total = 0;
        for (int l = 0; l < 2; l++) {
                if (lists[l] && !json_is_null(lists[l]) && !json_is_array(lists[l]))
                        return fail(why, why_size, "\"%s\" must be an array of entries", names[l]);
                total += json_array_size(lists[l]);
        }
        if (total > CAPS_ENTRIES_MAX)
                return fail(why, why_size, "at most %d entries in one change", CAPS_ENTRIES_MAX);
        ch.e = xcalloc(total ? total : 1, sizeof(*ch.e));
        for (int l = 0; l < 2; l++) {
                size_t i;
                json_t *o;
                json_array_foreach(lists[l], i, o)
                {
                        char at[32];
                        snprintf(at, sizeof(at), "%s[%zu]", names[l], i);
                        struct caps_entry *e = &ch.e[ch.n++];
                        e->grant = l == 0;
                        if (parse_entry(o, e, at, why, why_size) < 0) {
                                caps_change_clear(&ch);
                                return -EINVAL;
                        }
                }
        }
        *ret = ch;
        return 0;
}

/* ---- applying one ---- */

static bool path_under(const char *path, const char *dir)
{
        size_t n = strlen(dir);
        if (STREQ(dir, "/"))
                return true;
        return strncmp(path, dir, n) == 0 && (path[n] == '\0' || path[n] == '/');
}

static int apply_net(struct caps *c, const struct caps_entry *e, char *why, size_t n)
{
        if (c->policy->net_mode != POLICY_NET_GATED)
                return fail(why, n,
                            "%s: this sandbox has no network gate (it started with network "
                            "mode none); network rules can change only for a sandbox started "
                            "with one",
                            caps_kind_name(e->kind));
        if (e->kind == CAPS_NET_BUDGET) {
                if (e->has_requests)
                        c->budget.requests = e->requests;
                if (e->has_bytes)
                        c->budget.bytes = e->bytes;
                if (e->has_refusals)
                        c->budget.refusals = e->refusals;
                return 0;
        }
        char ***v = e->kind == CAPS_NET_ALLOW ? &c->allow : &c->deny;
        size_t *nv = e->kind == CAPS_NET_ALLOW ? &c->n_allow : &c->n_deny;
        ssize_t at = strv_find(*v, *nv, e->a);
        if (!e->grant) {
                if (at < 0)
                        return fail(why, n, "revoke %s \"%s\": not in the effective rules",
                                    caps_kind_name(e->kind), e->a);
                strv_remove(*v, nv, (size_t)at);
                return 0;
        }
        if (at < 0) {
                if (*nv >= CAPS_RULES_MAX)
                        return fail(why, n, "%s: at most %d rules", caps_kind_name(e->kind),
                                    CAPS_RULES_MAX);
                *v = strv_append(*v, nv, e->a);
        }
        /* Deny beats allow: an allow granted for a host a deny rule names
         * word for word takes that deny rule away, or it would not work. */
        if (e->kind == CAPS_NET_ALLOW) {
                char host[300];
                snprintf(host, sizeof(host), "%s", e->a);
                char *colon = host[0] == '[' ? strstr(host, "]:") : strrchr(host, ':');
                if (colon && host[0] == '[')
                        colon[1] = '\0';
                else if (colon && strchr(host, ':') == colon)
                        *colon = '\0';
                for (size_t i = c->n_deny; i-- > 0;)
                        if (STREQ(c->deny[i], e->a) || STREQ(c->deny[i], host))
                                strv_remove(c->deny, &c->n_deny, i);
        } else {
                ssize_t a = strv_find(c->allow, c->n_allow, e->a);
                if (a >= 0)
                        strv_remove(c->allow, &c->n_allow, (size_t)a);
        }
        return 0;
}

static int apply_tool(struct caps *c, const struct caps_entry *e, char *why, size_t n)
{
        if (e->grant && !policy_tool_find(c->policy, e->a))
                return fail(why, n,
                            "tool \"%s\": no such tool is defined for this sandbox; define it "
                            "in the policy's tools.define (or the operator's tools file) first",
                            e->a);
        if (e->grant && c->policy->n_tools_allow == 0)
                return fail(why, n,
                            "tool \"%s\": this sandbox started without the tool gateway (its "
                            "policy allows no tool), so no tool can be granted to it",
                            e->a);
        if (!e->grant && !caps_tool_allowed(c, e->a))
                return fail(why, n, "revoke tool \"%s\": the sandbox may not call it now", e->a);
        char ***add = e->grant ? &c->tools_on : &c->tools_off;
        size_t *n_add = e->grant ? &c->n_tools_on : &c->n_tools_off;
        char **del = e->grant ? c->tools_off : c->tools_on;
        size_t *n_del = e->grant ? &c->n_tools_off : &c->n_tools_on;
        ssize_t at = strv_find(del, *n_del, e->a);
        if (at >= 0)
                strv_remove(del, n_del, (size_t)at);
        if (strv_find(*add, *n_add, e->a) < 0 && *n_add < CAPS_RULES_MAX)
                *add = strv_append(*add, n_add, e->a);
        return 0;
}

static ssize_t env_find(char *const *v, size_t n, const char *name)
{
        size_t len = strlen(name);
        for (size_t i = 0; i < n; i++)
                if (strncmp(v[i], name, len) == 0 && v[i][len] == '=')
                        return (ssize_t)i;
        return -1;
}

static bool policy_env_has(const struct policy *p, const char *name)
{
        for (size_t i = 0; i < p->n_env; i++)
                if (STREQ(p->env[i].key, name))
                        return true;
        return false;
}

static int apply_env(struct caps *c, const struct caps_entry *e, char *why, size_t n)
{
        if (c->one_command)
                return fail(why, n,
                            "env \"%s\": this sandbox runs one command (airlock run), and env "
                            "reaches only later commands, which a long-lived sandbox has",
                            e->a);
        ssize_t at = env_find(c->env, c->n_env, e->a);
        ssize_t off = strv_find(c->env_off, c->n_env_off, e->a);
        if (!e->grant) {
                bool has = at >= 0 || (off < 0 && policy_env_has(c->policy, e->a));
                if (!has)
                        return fail(why, n, "revoke env \"%s\": not set for this sandbox", e->a);
                if (at >= 0)
                        strv_remove(c->env, &c->n_env, (size_t)at);
                if (off < 0)
                        c->env_off = strv_append(c->env_off, &c->n_env_off, e->a);
                return 0;
        }
        if (at < 0 && c->n_env >= CAPS_ENV_MAX)
                return fail(why, n, "env: at most %d variables granted", CAPS_ENV_MAX);
        if (off >= 0)
                strv_remove(c->env_off, &c->n_env_off, (size_t)off);
        _cleanup_free_ char *kv = xasprintf("%s=%s", e->a, e->b);
        if (at >= 0) {
                free(c->env[at]);
                c->env[at] = TAKE_PTR(kv);
        } else
                c->env = strv_append(c->env, &c->n_env, kv);
        return 0;
}

static int apply_mount(struct caps *c, const struct caps_entry *e, char *why, size_t n)
{
        ssize_t at = -1;
        for (size_t i = 0; i < c->n_mounts; i++)
                if (STREQ(c->mounts[i].target, e->a))
                        at = (ssize_t)i;
        if (!e->grant) {
                if (at < 0)
                        return fail(why, n,
                                    "revoke mount \"%s\": nothing was mounted there at run time",
                                    e->a);
                free(c->mounts[at].source);
                free(c->mounts[at].target);
                memmove(&c->mounts[at], &c->mounts[at + 1],
                        (c->n_mounts - (size_t)at - 1) * sizeof(*c->mounts));
                c->n_mounts--;
                return 0;
        }
        for (size_t i = 0; i < c->n_mounts; i++)
                if (path_under(e->a, c->mounts[i].target) || path_under(c->mounts[i].target, e->a))
                        return fail(why, n,
                                    "mount at %s: overlaps the run-time mount at %s; revoke it "
                                    "first",
                                    e->a, c->mounts[i].target);
        const char *home = env_home_for_uid(c->policy->uid);
        const char *const kept[] = {home, "/tmp", "/workspace", "/run/airlock"};
        for (size_t i = 0; i < ARRAY_SIZE(kept); i++)
                if (kept[i] && path_under(kept[i], e->a))
                        return fail(why, n, "mount at %s would hide %s; mount beneath it instead",
                                    e->a, kept[i]);
        if (c->n_mounts >= CAPS_MOUNTS_MAX)
                return fail(why, n, "mount: at most %d mounts added at run time", CAPS_MOUNTS_MAX);
        if (!c->mounts)
                c->mounts = xcalloc(CAPS_MOUNTS_MAX, sizeof(*c->mounts));
        c->mounts[c->n_mounts++] = (struct caps_mount){
            .source = xstrdup(e->b), .target = xstrdup(e->a), .readonly = e->readonly};
        return 0;
}

int caps_apply(struct caps *c, const struct caps_change *ch, char *why, size_t why_size)
{
        for (size_t i = 0; i < ch->n; i++) {
                const struct caps_entry *e = &ch->e[i];
                int r;
                switch (e->kind) {
                case CAPS_NET_ALLOW:
                case CAPS_NET_DENY:
                case CAPS_NET_BUDGET:
                        r = apply_net(c, e, why, why_size);
                        break;
                case CAPS_TOOL:
                        r = apply_tool(c, e, why, why_size);
                        break;
                case CAPS_ENV:
                        r = apply_env(c, e, why, why_size);
                        break;
                case CAPS_MOUNT:
                        r = apply_mount(c, e, why, why_size);
                        break;
                default:
                        r = fail(why, why_size, "unknown entry");
                }
                if (r < 0)
                        return r;
        }
        return 0;
}

bool caps_tool_allowed(const struct caps *c, const char *name)
{
        if (strv_find(c->tools_off, c->n_tools_off, name) >= 0)
                return false;
        if (!policy_tool_find(c->policy, name))
                return false;
        return strv_find(c->tools_on, c->n_tools_on, name) >= 0 ||
               policy_tool_allowed(c->policy, name);
}

char **caps_env(const struct caps *c, char *const *base)
{
        char **r = NULL;
        size_t n = 0;
        if (!c)
                return strv_copy(base, strv_length(base));
        for (char *const *e = base; e && *e; e++) {
                size_t len = strcspn(*e, "=");
                bool drop = false;
                for (size_t i = 0; i < c->n_env_off && !drop; i++)
                        drop = strlen(c->env_off[i]) == len && strncmp(*e, c->env_off[i], len) == 0;
                for (size_t i = 0; i < c->n_env && !drop; i++)
                        drop = strncmp(*e, c->env[i], len + 1) == 0;
                if (!drop)
                        r = strv_append(r, &n, *e);
        }
        for (size_t i = 0; i < c->n_env; i++)
                r = strv_append(r, &n, c->env[i]);
        return r;
}

static json_t *strv_json(char *const *v, size_t n)
{
        json_t *a = json_array();
        for (size_t i = 0; i < n; i++)
                json_array_append_new(a, json_string(v[i]));
        return a;
}

json_t *caps_json(const struct caps *c)
{
        const struct policy *p = c->policy;
        json_t *tools = json_array();
        for (size_t i = 0; i < p->n_tools; i++)
                if (caps_tool_allowed(c, p->tools[i].name))
                        json_array_append_new(tools, json_string(p->tools[i].name));
        json_t *mounts = json_array();
        for (size_t i = 0; i < c->n_mounts; i++)
                json_array_append_new(
                    mounts, json_pack("{s:s, s:s, s:b}", "source", c->mounts[i].source, "target",
                                      c->mounts[i].target, "readOnly", c->mounts[i].readonly));
        json_t *env = json_object();
        for (size_t i = 0; i < p->n_env; i++)
                if (strv_find(c->env_off, c->n_env_off, p->env[i].key) < 0)
                        json_object_set_new(env, p->env[i].key, json_string(p->env[i].value));
        for (size_t i = 0; i < c->n_env; i++) {
                size_t len = strcspn(c->env[i], "=");
                _cleanup_free_ char *k = xasprintf("%.*s", (int)len, c->env[i]);
                json_object_set_new(env, k, json_string(c->env[i] + len + 1));
        }
        return json_pack("{s:{s:b, s:o, s:o, s:{s:I, s:I, s:I}}, s:o, s:o, s:o}", "network",
                         "gated", p->net_mode == POLICY_NET_GATED, "allow",
                         strv_json(c->allow, c->n_allow), "deny", strv_json(c->deny, c->n_deny),
                         "budget", "requests", (json_int_t)c->budget.requests, "bytes",
                         (json_int_t)c->budget.bytes, "refusals", (json_int_t)c->budget.refusals,
                         "tools", tools, "mounts", mounts, "env", env);
}
