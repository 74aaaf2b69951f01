/* SPDX-License-Identifier: Apache-2.0 */
#include <errno.h>
#include <stdio.h>
#include <string.h>

#include "agent-policy.h"
#include "policy.h"
#include "util.h"

static int mount_flag(struct policy *p, const char *arg, bool readonly, const char *cwd, char *msg,
                      size_t msglen)
{
        _cleanup_free_ char *src = xstrdup(arg);
        char *colon = strchr(src, ':');
        const char *dst = NULL;
        if (colon) {
                *colon = '\0';
                dst = colon + 1;
        }
        if (!*src || (dst && !*dst)) {
                snprintf(msg, msglen, "agent: --%s \"%s\": expected SRC[:DST]",
                         readonly ? "ro" : "rw", arg);
                return -EINVAL;
        }
        _cleanup_free_ char *abs = src[0] == '/' ? xstrdup(src) : xasprintf("%s/%s", cwd, src);
        policy_add_mount(p, abs, dst ? dst : abs, readonly);
        return 0;
}

static int pair(const char *flag, const char *arg, char **ret_key, const char **ret_value,
                char *msg, size_t msglen, const char *what)
{
        const char *eq = strchr(arg, '=');
        if (!eq || eq == arg) {
                snprintf(msg, msglen, "agent: --%s \"%s\": expected %s", flag, arg, what);
                return -EINVAL;
        }
        *ret_key = strndup(arg, (size_t)(eq - arg));
        *ret_value = eq + 1;
        return 0;
}

int agent_policy_flag(struct policy *p, int c, const char *arg, const char *cwd, char *msg,
                      size_t msglen, struct al_error *err)
{
        char *key = NULL;
        const char *value;
        int r = 0;
        switch (c) {
        case AGENT_OPT_ALLOW:
                p->net_allow = strv_append(p->net_allow, &p->n_net_allow, arg);
                break;
        case AGENT_OPT_DENY:
                p->net_deny = strv_append(p->net_deny, &p->n_net_deny, arg);
                break;
        case AGENT_OPT_ALLOW_PRIVATE:
                p->net_allow_private =
                    strv_append(p->net_allow_private, &p->n_net_allow_private, arg);
                break;
        case AGENT_OPT_HOST:
                r = pair("host", arg, &key, &value, msg, msglen, "NAME=IP");
                if (r >= 0 && !value[0]) {
                        snprintf(msg, msglen, "agent: --host \"%s\": expected NAME=IP", arg);
                        r = -EINVAL;
                }
                if (r >= 0) {
                        p->net_hosts =
                            xrealloc(p->net_hosts, p->n_net_hosts + 1, sizeof(*p->net_hosts));
                        p->net_hosts[p->n_net_hosts].key = TAKE_PTR(key);
                        p->net_hosts[p->n_net_hosts].value = xstrdup(value);
                        p->n_net_hosts++;
                }
                break;
        case AGENT_OPT_TOOL:
                p->tools_allow = strv_append(p->tools_allow, &p->n_tools_allow, arg);
                break;
        case AGENT_OPT_TOOLS:
                r = policy_tools_load_file(p, arg, err);
                break;
        case AGENT_OPT_ENV:
                r = pair("env", arg, &key, &value, msg, msglen, "KEY=VALUE");
                if (r >= 0)
                        policy_add_env(p, key, value);
                break;
        case AGENT_OPT_MEMORY:
                r = policy_set_limit(p, "memory", arg, err);
                break;
        case AGENT_OPT_PIDS:
                r = policy_set_limit(p, "pids", arg, err);
                break;
        case AGENT_OPT_CPUS:
                r = policy_set_limit(p, "cpus", arg, err);
                break;
        case AGENT_OPT_CLASS:
                r = policy_set_class(p, arg, err);
                break;
        case AGENT_OPT_RO:
        case AGENT_OPT_RW:
                r = mount_flag(p, arg, c == AGENT_OPT_RO, cwd, msg, msglen);
                break;
        case AGENT_OPT_DENY_READ:
                policy_add_deny_read(p, arg);
                break;
        case AGENT_OPT_READ:
                if (STREQ(arg, "system"))
                        p->read = POLICY_READ_SYSTEM;
                else if (STREQ(arg, "host"))
                        p->read = POLICY_READ_HOST;
                else {
                        snprintf(msg, msglen, "agent: --read \"%s\": expected system or host", arg);
                        r = -EINVAL;
                }
                break;
        default:
                snprintf(msg, msglen, "agent: unknown option");
                r = -EINVAL;
        }
        free(key);
        return r;
}

static struct policy_route *find_route(struct policy *p, const char *name)
{
        for (size_t i = 0; i < p->n_routes; i++)
                if (STREQ(p->routes[i].name, name))
                        return &p->routes[i];
        return NULL;
}

static struct policy_route *route_upsert(struct policy *p, const char *name, const char *url)
{
        struct policy_route *r = find_route(p, name);
        if (!r) {
                p->routes = xrealloc(p->routes, p->n_routes + 1, sizeof(*p->routes));
                r = &p->routes[p->n_routes++];
                memset(r, 0, sizeof(*r));
                r->name = xstrdup(name);
        }
        free(r->upstream);
        r->upstream = xstrdup(url);
        return r;
}

static void route_inject(struct policy_route *r, const char *key, const char *value)
{
        r->inject = xrealloc(r->inject, r->n_inject + 1, sizeof(*r->inject));
        r->inject[r->n_inject].key = xstrdup(key);
        r->inject[r->n_inject].value = xstrdup(value);
        r->n_inject++;
}

int agent_policy_routes(struct policy *p, char *const *routes, size_t n_routes,
                        char *const *injects, size_t n_injects, const char *model_route,
                        enum agent_provider provider, char *msg, size_t msglen)
{
        for (size_t i = 0; i < n_routes; i++) {
                const char *eq = strchr(routes[i], '=');
                if (!eq || eq == routes[i] || !eq[1]) {
                        snprintf(msg, msglen, "agent: --route \"%s\": expected NAME=URL",
                                 routes[i]);
                        return -EINVAL;
                }
                _cleanup_free_ char *name = strndup(routes[i], (size_t)(eq - routes[i]));
                route_upsert(p, name, eq + 1);
        }
        for (size_t i = 0; i < n_injects; i++) {
                const char *arg = injects[i];
                const char *colon = strchr(arg, ':');
                const char *eq = colon ? strchr(colon, '=') : NULL;
                if (!colon || colon == arg || !eq || eq == colon + 1 || !eq[1]) {
                        snprintf(msg, msglen,
                                 "agent: --inject \"%s\": expected ROUTE:HEADER=VALUE (VALUE in "
                                 "single quotes)",
                                 arg);
                        return -EINVAL;
                }
                _cleanup_free_ char *name = strndup(arg, (size_t)(colon - arg));
                _cleanup_free_ char *key = strndup(colon + 1, (size_t)(eq - colon - 1));
                struct policy_route *r = find_route(p, name);
                if (!r) {
                        snprintf(msg, msglen, "agent: --inject \"%s\": no route \"%s\"", arg, name);
                        return -EINVAL;
                }
                route_inject(r, key, eq + 1);
        }
        /* The model's route, made for the provider's public API when the
         * policy and the flags name none; its key comes from the secrets. */
        if (!find_route(p, model_route)) {
                struct policy_route *r;
                if (provider == AGENT_PROVIDER_ANTHROPIC) {
                        r = route_upsert(p, model_route, "https://api.anthropic.com");
                        route_inject(r, "x-api-key", "${secret:ANTHROPIC_API_KEY}");
                } else {
                        r = route_upsert(p, model_route, "https://api.openai.com");
                        route_inject(r, "authorization", "Bearer ${secret:OPENAI_API_KEY}");
                }
        }
        /* The model's route is the host's alone: a request of the sandbox
         * through it would carry the key (and spend it). */
        find_route(p, model_route)->host_only = true;
        return 0;
}
