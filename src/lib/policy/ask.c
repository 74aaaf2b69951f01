/* SPDX-License-Identifier: Apache-2.0 */
/* Asking the operator, and refusals the agent can act on (docs/policy.md):
 *
 *   "network": {"onUnlisted": "ask", "denyReasons": {"*.corp.example": "…"}}
 *   "tools":   {"onUnlisted": "ask"}
 *   "ask":     {"timeout": 30}
 *
 * "deny" is the default: a request the lists do not name is refused. With
 * "ask" it is held and the operator decides (supervisor/approvals.c). */
#include <string.h>

#include "netgate/rules.h"
#include "policy-internal.h"
#include "util.h"

static int on_unlisted(struct ctx *c, json_t *v, bool *ret)
{
        const char *s = json_is_string(v) ? json_string_value(v) : NULL;
        if (s && STREQ(s, "deny"))
                *ret = false;
        else if (s && STREQ(s, "ask"))
                *ret = true;
        else
                return policy_fail(c, "\"%s\" must be \"deny\" or \"ask\"", c->path);
        return 0;
}

int policy_net_on_unlisted_parse(struct ctx *c, void *target, json_t *v)
{
        return on_unlisted(c, v, &((struct policy *)target)->net_ask);
}

int policy_tools_on_unlisted_parse(struct ctx *c, void *target, json_t *v)
{
        return on_unlisted(c, v, &((struct policy *)target)->tools_ask);
}

/* Shown to the agent in a refusal: printable ASCII only, bounded. */
static bool reason_text_ok(const char *s)
{
        size_t n = strlen(s);
        if (n == 0 || n > POLICY_DENY_REASON_MAX)
                return false;
        for (size_t i = 0; i < n; i++)
                if ((unsigned char)s[i] < 0x20 || (unsigned char)s[i] > 0x7e)
                        return false;
        return true;
}

int policy_deny_reasons_parse(struct ctx *c, void *target, json_t *v)
{
        struct policy *p = target;
        const char *key;
        json_t *e;

        if (!json_is_object(v))
                return policy_fail(c, "\"%s\" must be an object of host pattern -> text", c->path);
        policy_kv_free_n(p->net_deny_reasons, p->n_net_deny_reasons);
        p->net_deny_reasons = NULL;
        p->n_net_deny_reasons = 0;
        size_t n = json_object_size(v), i = 0;
        if (n == 0)
                return 0;
        p->net_deny_reasons = xcalloc(n, sizeof(*p->net_deny_reasons));
        json_object_foreach(v, key, e)
        {
                size_t mark = policy_path_push(c, key);
                if (!json_is_string(e) || !reason_text_ok(json_string_value(e)))
                        return policy_fail(c,
                                           "\"%s\" must be a string of 1 to %d printable ASCII "
                                           "characters",
                                           c->path, POLICY_DENY_REASON_MAX);
                p->net_deny_reasons[i].key = xstrdup(key);
                p->net_deny_reasons[i].value = xstrdup(json_string_value(e));
                p->n_net_deny_reasons = ++i;
                policy_path_pop(c, mark);
        }
        return 0;
}

int policy_ask_parse(struct ctx *c, void *target, json_t *obj)
{
        struct policy *p = target;
        const char *key;
        json_t *v;

        if (!json_is_object(obj))
                return policy_fail(c, "\"%s\" must be an object", c->path);
        json_object_foreach(obj, key, v)
        {
                size_t mark = policy_path_push(c, key);
                if (!STREQ(key, "timeout"))
                        return policy_fail(c, "unknown key \"%s\" (ask has timeout)", c->path);
                json_int_t x = json_is_integer(v) ? json_integer_value(v) : -1;
                if (x < 1 || x > POLICY_ASK_TIMEOUT_MAX_MS / 1000)
                        return policy_fail(c, "\"%s\" must be an integer from 1 to %d seconds",
                                           c->path, POLICY_ASK_TIMEOUT_MAX_MS / 1000);
                p->ask_timeout_ms = (uint64_t)x * 1000;
                policy_path_pop(c, mark);
        }
        return 0;
}

void policy_ask_json(const struct policy *p, json_t *root, json_t *network, json_t *tools)
{
        if (p->net_ask)
                json_object_set_new(network, "onUnlisted", json_string("ask"));
        if (p->n_net_deny_reasons) {
                json_t *o = json_object();
                for (size_t i = 0; i < p->n_net_deny_reasons; i++)
                        json_object_set_new(o, p->net_deny_reasons[i].key,
                                            json_string(p->net_deny_reasons[i].value));
                json_object_set_new(network, "denyReasons", o);
        }
        if (p->tools_ask)
                json_object_set_new(tools, "onUnlisted", json_string("ask"));
        if (p->ask_timeout_ms != POLICY_ASK_TIMEOUT_DEFAULT_MS)
                json_object_set_new(
                    root, "ask",
                    json_pack("{s:I}", "timeout", (json_int_t)(p->ask_timeout_ms / 1000)));
}

const char *policy_deny_reason(const struct policy *p, const char *host)
{
        return policy_deny_reason_in(p->net_deny_reasons, p->n_net_deny_reasons, host);
}

const char *policy_deny_reason_in(const struct policy_kv *kv, size_t n, const char *host)
{
        if (!host)
                return NULL;
        size_t hl = strlen(host);
        for (size_t i = 0; i < n; i++) {
                struct netgate_rule r;
                if (netgate_rule_parse(kv[i].key, &r) < 0)
                        continue;
                const char *d = r.host.name;
                size_t dl = strlen(d);
                bool hit = r.wildcard ? hl > dl + 1 && host[hl - dl - 1] == '.' &&
                                            memcmp(host + hl - dl, d, dl) == 0
                                      : STREQ(host, d);
                netgate_rule_done(&r);
                if (hit)
                        return kv[i].value;
        }
        return NULL;
}
