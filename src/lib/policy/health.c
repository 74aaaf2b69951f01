/* SPDX-License-Identifier: Apache-2.0 */
/* The policy's "health" section: the thresholds past which the daemon
 * calls a running sandbox unhealthy (docs/policy.md, "health").
 *
 *   "health": {"maxDenialRate": 0.5, "window": 60, "minDecisions": 10,
 *              "maxMemoryFraction": 0.9}
 */
#include <math.h>
#include <string.h>

#include "policy-internal.h"
#include "util.h"

static int get_fraction(struct ctx *c, json_t *v, double *ret)
{
        double x = json_is_number(v) ? json_number_value(v) : NAN;
        if (!(x > 0.0 && x <= 1.0))
                return policy_fail(c, "\"%s\" must be a number above 0 and at most 1 (a fraction)",
                                   c->path);
        *ret = x;
        return 0;
}

static int get_count(struct ctx *c, json_t *v, uint64_t min, uint64_t max, const char *unit,
                     uint64_t *ret)
{
        json_int_t x = json_is_integer(v) ? json_integer_value(v) : -1;
        if (x < (json_int_t)min || x > (json_int_t)max)
                return policy_fail(c, "\"%s\" must be an integer from %llu to %llu%s", c->path,
                                   (unsigned long long)min, (unsigned long long)max, unit);
        *ret = (uint64_t)x;
        return 0;
}

int policy_health_parse(struct ctx *c, void *target, json_t *obj)
{
        struct policy_health *h = &((struct policy *)target)->health;
        const char *key;
        json_t *v;

        if (!json_is_object(obj))
                return policy_fail(c, "\"%s\" must be an object", c->path);
        json_object_foreach(obj, key, v)
        {
                size_t mark = policy_path_push(c, key);
                int r;
                uint64_t n = 0;
                if (STREQ(key, "maxDenialRate"))
                        r = get_fraction(c, v, &h->max_denial_rate);
                else if (STREQ(key, "maxMemoryFraction"))
                        r = get_fraction(c, v, &h->max_memory_fraction);
                else if (STREQ(key, "window")) {
                        r = get_count(c, v, 1, POLICY_HEALTH_WINDOW_MAX_MS / 1000, " seconds", &n);
                        h->window_ms = n * 1000;
                } else if (STREQ(key, "minDecisions"))
                        r = get_count(c, v, 1, POLICY_HEALTH_MIN_DECISIONS_MAX, "",
                                      &h->min_decisions);
                else
                        r = policy_fail(c,
                                        "unknown key \"%s\" (health has maxDenialRate, window, "
                                        "minDecisions and maxMemoryFraction)",
                                        c->path);
                if (r < 0)
                        return r;
                policy_path_pop(c, mark);
        }
        return 0;
}

json_t *policy_health_json(const struct policy *p)
{
        const struct policy_health *h = &p->health;
        if (!h->max_denial_rate && !h->window_ms && !h->min_decisions && !h->max_memory_fraction)
                return NULL;
        json_t *o = json_object();
        if (h->max_denial_rate)
                json_object_set_new(o, "maxDenialRate", json_real(h->max_denial_rate));
        if (h->window_ms)
                json_object_set_new(o, "window", json_integer((json_int_t)(h->window_ms / 1000)));
        if (h->min_decisions)
                json_object_set_new(o, "minDecisions", json_integer((json_int_t)h->min_decisions));
        if (h->max_memory_fraction)
                json_object_set_new(o, "maxMemoryFraction", json_real(h->max_memory_fraction));
        return o;
}
