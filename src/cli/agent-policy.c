/* SPDX-License-Identifier: Apache-2.0 */
#include <errno.h>
#include <stdio.h>
#include <string.h>

#include "agent-policy.h"
#include "policy.h"
#include "util.h"

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
