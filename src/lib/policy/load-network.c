/* SPDX-License-Identifier: Apache-2.0 */
/* Loading the "network" section (load.c reads the rest): the mode, the
 * lists, routes, sentinels, the parent proxy and the budget. */
#include <jansson.h>
#include <string.h>

#include "policy-internal.h"

/* network */

static int net_mode(struct ctx *c, void *t, json_t *v)
{
        struct policy *p = t;
        int m;
        int r = policy_get_enum(c, v, policy_net_modes, ARRAY_SIZE(policy_net_modes), &m);
        if (r >= 0) {
                p->net_mode = (enum policy_net_mode)m;
                p->net_mode_set = true;
        }
        return r;
}

static int net_allow(struct ctx *c, void *t, json_t *v)
{
        struct policy *p = t;
        return policy_get_strv(c, v, &p->net_allow, &p->n_net_allow);
}

static int net_deny(struct ctx *c, void *t, json_t *v)
{
        struct policy *p = t;
        return policy_get_strv(c, v, &p->net_deny, &p->n_net_deny);
}

static int net_allow_private(struct ctx *c, void *t, json_t *v)
{
        struct policy *p = t;
        return policy_get_strv(c, v, &p->net_allow_private, &p->n_net_allow_private);
}

static int net_hosts(struct ctx *c, void *t, json_t *v)
{
        struct policy *p = t;
        return policy_get_kv(c, v, &p->net_hosts, &p->n_net_hosts);
}

static int route_name(struct ctx *c, void *t, json_t *v)
{
        return policy_get_string(c, v, &((struct policy_route *)t)->name);
}

static int route_upstream(struct ctx *c, void *t, json_t *v)
{
        return policy_get_string(c, v, &((struct policy_route *)t)->upstream);
}

static int route_inject(struct ctx *c, void *t, json_t *v)
{
        struct policy_route *r = t;
        return policy_get_kv(c, v, &r->inject, &r->n_inject);
}

static int route_strip(struct ctx *c, void *t, json_t *v)
{
        struct policy_route *r = t;
        return policy_get_strv(c, v, &r->strip, &r->n_strip);
}

static int route_record(struct ctx *c, void *t, json_t *v)
{
        struct policy_route *r = t;
        return policy_get_strv(c, v, &r->record, &r->n_record);
}

static int route_ca_file(struct ctx *c, void *t, json_t *v)
{
        return policy_get_string_or_null(c, v, &((struct policy_route *)t)->ca_file);
}

static int route_host_only(struct ctx *c, void *t, json_t *v)
{
        return policy_get_bool(c, v, &((struct policy_route *)t)->host_only);
}

static int route_terminate(struct ctx *c, void *t, json_t *v)
{
        return policy_get_bool(c, v, &((struct policy_route *)t)->terminate);
}

static int route_cleartext(struct ctx *c, void *t, json_t *v)
{
        return policy_get_bool(c, v, &((struct policy_route *)t)->cleartext);
}

static const struct policy_field route_fields[] = {
    {"name", route_name},           {"upstream", route_upstream},  {"inject", route_inject},
    {"strip", route_strip},         {"record", route_record},      {"caFile", route_ca_file},
    {"terminate", route_terminate}, {"hostOnly", route_host_only}, {"cleartext", route_cleartext},
};

static int net_routes(struct ctx *c, void *t, json_t *v)
{
        struct policy *p = t;
        size_t i;
        json_t *e;

        if (!json_is_array(v))
                return policy_fail(c, "\"%s\" must be an array", c->path);
        policy_routes_free_n(p->routes, p->n_routes);
        p->n_routes = json_array_size(v);
        p->routes = xcalloc(p->n_routes, sizeof(*p->routes));
        json_array_foreach(v, i, e)
        {
                size_t mark = policy_path_push_index(c, i);
                int r = policy_parse_fields(c, &p->routes[i], e, route_fields,
                                            ARRAY_SIZE(route_fields));
                if (r < 0)
                        return r;
                policy_path_pop(c, mark);
        }
        return 0;
}

static int sentinel_env(struct ctx *c, void *t, json_t *v)
{
        return policy_get_string(c, v, &((struct policy_sentinel *)t)->env);
}

static int sentinel_secret(struct ctx *c, void *t, json_t *v)
{
        return policy_get_string(c, v, &((struct policy_sentinel *)t)->secret);
}

static int sentinel_hosts(struct ctx *c, void *t, json_t *v)
{
        struct policy_sentinel *s = t;
        return policy_get_strv(c, v, &s->hosts, &s->n_hosts);
}

/* true, false, or the "HOST:PORT" list plain HTTP may carry the value to. */
static int sentinel_cleartext(struct ctx *c, void *t, json_t *v)
{
        struct policy_sentinel *s = t;
        if (json_is_array(v)) {
                s->cleartext = false;
                return policy_get_strv(c, v, &s->cleartext_at, &s->n_cleartext_at);
        }
        if (!json_is_boolean(v))
                return policy_fail(c, "\"%s\" must be true, false or an array of \"HOST:PORT\"",
                                   c->path);
        strv_free_n(s->cleartext_at, s->n_cleartext_at);
        s->cleartext_at = NULL;
        s->n_cleartext_at = 0;
        return policy_get_bool(c, v, &s->cleartext);
}

static const struct policy_field sentinel_fields[] = {
    {"env", sentinel_env},
    {"secret", sentinel_secret},
    {"hosts", sentinel_hosts},
    {"cleartext", sentinel_cleartext},
};

static int net_sentinels(struct ctx *c, void *t, json_t *v)
{
        struct policy *p = t;
        size_t i;
        json_t *e;

        if (!json_is_array(v))
                return policy_fail(c, "\"%s\" must be an array", c->path);
        policy_sentinels_free_n(p->sentinels, p->n_sentinels);
        p->n_sentinels = json_array_size(v);
        p->sentinels = xcalloc(p->n_sentinels, sizeof(*p->sentinels));
        json_array_foreach(v, i, e)
        {
                size_t mark = policy_path_push_index(c, i);
                int r = policy_parse_fields(c, &p->sentinels[i], e, sentinel_fields,
                                            ARRAY_SIZE(sentinel_fields));
                if (r < 0)
                        return r;
                policy_path_pop(c, mark);
        }
        return 0;
}

static int net_parent_proxy(struct ctx *c, void *t, json_t *v)
{
        return policy_get_string_or_null(c, v, &((struct policy *)t)->net_parent_proxy);
}

static int net_no_proxy(struct ctx *c, void *t, json_t *v)
{
        struct policy *p = t;
        return policy_get_strv(c, v, &p->net_no_proxy, &p->n_net_no_proxy);
}

static int net_parent_send_names(struct ctx *c, void *t, json_t *v)
{
        return policy_get_bool(c, v, &((struct policy *)t)->net_parent_send_names);
}

static int budget_requests(struct ctx *c, void *t, json_t *v)
{
        return policy_parse_json_value(c, v, KIND_COUNT, 0, INT64_MAX,
                                       &((struct policy *)t)->budget.requests);
}

static int budget_bytes(struct ctx *c, void *t, json_t *v)
{
        return policy_parse_json_value(c, v, KIND_SIZE, 0, INT64_MAX,
                                       &((struct policy *)t)->budget.bytes);
}

static int budget_rate(struct ctx *c, void *t, json_t *v)
{
        struct policy *p = t;
        int r = policy_parse_json_value(c, v, KIND_SIZE, 0, INT64_MAX, &p->budget.rate);
        if (r >= 0)
                p->budget.rate_set = true;
        return r;
}

static int budget_refusals(struct ctx *c, void *t, json_t *v)
{
        return policy_parse_json_value(c, v, KIND_COUNT, 0, INT64_MAX,
                                       &((struct policy *)t)->budget.refusals);
}

static const struct policy_field budget_fields[] = {
    {"requests", budget_requests},
    {"bytes", budget_bytes},
    {"rate", budget_rate},
    {"refusals", budget_refusals},
};

static int net_direct_path(struct ctx *c, void *t, json_t *v)
{
        return policy_get_bool(c, v, &((struct policy *)t)->net_direct_path);
}

static int net_budget(struct ctx *c, void *t, json_t *v)
{
        return policy_parse_fields(c, t, v, budget_fields, ARRAY_SIZE(budget_fields));
}

static const struct policy_field network_fields[] = {
    {"mode", net_mode},
    {"allow", net_allow},
    {"deny", net_deny},
    {"allowPrivate", net_allow_private},
    {"hosts", net_hosts},
    {"routes", net_routes},
    {"budget", net_budget},
    {"sentinels", net_sentinels},
    {"parentProxy", net_parent_proxy},
    {"noProxy", net_no_proxy},
    {"parentProxySendNames", net_parent_send_names},
    {"onUnlisted", policy_net_on_unlisted_parse},
    {"denyReasons", policy_deny_reasons_parse},
    {"directPath", net_direct_path},
};

int policy_network_parse(struct ctx *c, void *t, json_t *v)
{
        return policy_parse_fields(c, t, v, network_fields, ARRAY_SIZE(network_fields));
}
