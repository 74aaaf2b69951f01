/* SPDX-License-Identifier: Apache-2.0 */
/* The live capabilities' model (src/lib/supervisor/caps.c): a change is
 * checked whole, entry by entry like the policy, and applied to a copy;
 * the effective set, the tools' and env's answers follow it. */
#include <criterion/criterion.h>
#include <string.h>

#include "caps.h"
#include "policy-test-util.h"
#include "util.h"

#define POLICY                                                                                     \
        "{\"network\": {\"allow\": [\"a.example.com\"], \"deny\": [\"evil.example.com\"]},"        \
        " \"env\": {\"KEEP\": \"1\", \"DROP\": \"2\"},"                                            \
        " \"tools\": {\"allow\": [\"t.one\"], \"define\": {"                                       \
        "   \"t.one\": {\"command\": [\"/bin/true\"]},"                                            \
        "   \"t.two\": {\"command\": [\"/bin/true\"]}}}}"

static struct policy *pol;
static struct caps *caps;

static void setup(void)
{
        pol = finalize_ok(POLICY);
        caps = caps_new(pol);
}

static void teardown(void)
{
        caps = caps_free(caps);
        pol = policy_free(pol);
}

/* Parse and apply `grant`/`revoke` (JSON text or NULL) to a copy; on success
 * the copy replaces caps. Returns the result and the message in why. */
static int change(const char *grant, const char *revoke, char *why, size_t n)
{
        json_t *g = grant ? json_loads(grant, 0, NULL) : NULL;
        json_t *r = revoke ? json_loads(revoke, 0, NULL) : NULL;
        struct caps_change ch = {0};
        why[0] = '\0';
        int ret = caps_parse_change(g, r, &ch, why, n);
        if (ret >= 0) {
                struct caps *next = caps_dup(caps);
                ret = caps_apply(next, &ch, why, n);
                if (ret >= 0) {
                        caps_free(caps);
                        caps = next;
                } else
                        caps_free(next);
                caps_change_clear(&ch);
        }
        json_decref(g);
        json_decref(r);
        return ret;
}

static void refused(const char *grant, const char *revoke, const char *needle)
{
        char why[768];
        json_t *before = caps_json(caps);
        cr_assert_lt(change(grant, revoke, why, sizeof(why)), 0, "accepted %s / %s",
                     grant ? grant : "-", revoke ? revoke : "-");
        cr_assert(strstr(why, needle), "message \"%s\" lacks \"%s\"", why, needle);
        json_t *after = caps_json(caps);
        cr_assert(json_equal(before, after), "a refused change changed something");
        json_decref(before);
        json_decref(after);
}

static void ok(const char *grant, const char *revoke)
{
        char why[768];
        cr_assert_eq(change(grant, revoke, why, sizeof(why)), 0, "refused: %s", why);
}

static bool listed(const char *list, const char *s)
{
        json_t *j = caps_json(caps);
        json_t *a = json_object_get(json_object_get(j, "network"), list);
        size_t i;
        json_t *v;
        bool found = false;
        json_array_foreach(a, i, v) found = found || strcmp(json_string_value(v), s) == 0;
        json_decref(j);
        return found;
}

TestSuite(caps, .init = setup, .fini = teardown);

Test(caps, starts_from_the_policy)
{
        cr_assert(listed("allow", "a.example.com"));
        cr_assert(listed("deny", "evil.example.com"));
        cr_assert(caps_tool_allowed(caps, "t.one"));
        cr_assert_not(caps_tool_allowed(caps, "t.two"));
}

Test(caps, network_grant_and_revoke)
{
        ok("[{\"network\": {\"allow\": \"b.example.com:8443\"}}]", NULL);
        cr_assert(listed("allow", "b.example.com:8443"));
        /* An allow for a host a deny rule names word for word lifts it. */
        ok("[{\"network\": {\"allow\": \"evil.example.com\"}}]", NULL);
        cr_assert_not(listed("deny", "evil.example.com"));
        ok("[{\"network\": {\"deny\": \"a.example.com\"}}]", NULL);
        cr_assert_not(listed("allow", "a.example.com"));
        ok(NULL, "[{\"network\": {\"allow\": \"b.example.com:8443\"}}]");
        cr_assert_not(listed("allow", "b.example.com:8443"));
        refused(NULL, "[{\"network\": {\"allow\": \"nope.example.com\"}}]",
                "not in the effective rules");
}

Test(caps, budget)
{
        ok("[{\"network\": {\"budget\": {\"requests\": 7, \"bytes\": 100}}}]", NULL);
        cr_assert_eq(caps->budget.requests, 7);
        cr_assert_eq(caps->budget.bytes, 100);
        refused("[{\"network\": {\"budget\": {\"rate\": 5}}}]", NULL, "fixed when the sandbox");
        refused("[{\"network\": {\"budget\": {\"requests\": -1}}}]", NULL, "whole number");
        refused(NULL, "[{\"network\": {\"budget\": {\"requests\": 1}}}]", "not revoked");
}

Test(caps, bad_entries_are_named)
{
        refused("[{\"network\": {\"allow\": \"http://x.com/\"}}]", NULL, "grant[0].network.allow");
        refused("[{\"network\": {\"allow\": \"x.com:99999\"}}]", NULL, "grant[0]");
        refused("[{\"bogus\": 1}]", NULL, "unknown key \"bogus\"");
        refused("[{\"tool\": \"t.two\", \"env\": {}}]", NULL, "one key");
        refused("[{\"mount\": {\"source\": \"/x\", \"target\": \"/y\", \"extra\": 1}}]", NULL,
                "unknown key \"extra\"");
        refused("[{\"mount\": {\"source\": \"rel\", \"target\": \"/y\"}}]", NULL, "absolute");
        refused("[{\"mount\": {\"source\": \"/x\", \"target\": \"/proc/x\"}}]", NULL, "/proc");
        refused("[{\"env\": {\"name\": \"1X\", \"value\": \"v\"}}]", NULL, "env");
        refused("[{\"env\": {\"name\": \"K\", \"value\": \"${secret:T}\"}}]", NULL, "secret");
        refused("[{\"env\": {\"name\": \"AIRLOCK_RUN_ID\", \"value\": \"x\"}}]", NULL,
                "Airlock's own");
        refused("{\"tool\": \"t.two\"}", NULL, "must be an array");
}

Test(caps, nothing_half_applied)
{
        /* The first entry is good, the second is not: neither is taken. */
        refused("[{\"network\": {\"allow\": \"c.example.com\"}}, {\"tool\": \"t.undefined\"}]",
                NULL, "no such tool");
        cr_assert_not(listed("allow", "c.example.com"));
        refused("[{\"tool\": \"t.two\"}]", "[{\"env\": {\"name\": \"NEVER\"}}]", "not set");
        cr_assert_not(caps_tool_allowed(caps, "t.two"));
}

Test(caps, tools)
{
        ok("[{\"tool\": \"t.two\"}]", NULL);
        cr_assert(caps_tool_allowed(caps, "t.two"));
        ok(NULL, "[{\"tool\": \"t.one\"}]");
        cr_assert_not(caps_tool_allowed(caps, "t.one"));
        refused(NULL, "[{\"tool\": \"t.one\"}]", "may not call it now");
        refused("[{\"tool\": {\"command\": [\"/bin/sh\"]}}]", NULL, "tools.define");
        ok("[{\"tool\": \"t.one\"}]", NULL);
        cr_assert(caps_tool_allowed(caps, "t.one"));
}

Test(caps, env)
{
        ok("[{\"env\": {\"name\": \"NEW\", \"value\": \"x\"}}]",
           "[{\"env\": {\"name\": \"DROP\"}}]");
        char *base[] = {"PATH=/bin", "KEEP=1", "DROP=2", NULL};
        char **e = caps_env(caps, base);
        size_t n = 0;
        bool keep = false, drop = false, nw = false;
        for (; e[n]; n++) {
                keep = keep || strcmp(e[n], "KEEP=1") == 0;
                drop = drop || strncmp(e[n], "DROP=", 5) == 0;
                nw = nw || strcmp(e[n], "NEW=x") == 0;
        }
        cr_assert(keep && !drop && nw);
        strv_free(e);
        caps->one_command = true;
        refused("[{\"env\": {\"name\": \"B\", \"value\": \"x\"}}]", NULL, "one command");
}

Test(caps, mounts_model)
{
        ok("[{\"mount\": {\"source\": \"/srv/data\", \"target\": \"/workspace/data\"}}]", NULL);
        cr_assert_eq(caps->n_mounts, 1);
        cr_assert(caps->mounts[0].readonly, "read-only unless said otherwise");
        refused("[{\"mount\": {\"source\": \"/srv/x\", \"target\": \"/workspace/data/in\"}}]", NULL,
                "overlaps");
        refused("[{\"mount\": {\"source\": \"/srv/x\", \"target\": \"/home\"}}]", NULL, "hide");
        refused(NULL, "[{\"mount\": \"/workspace/other\"}]", "nothing was mounted");
        ok(NULL, "[{\"mount\": \"/workspace/data\"}]");
        cr_assert_eq(caps->n_mounts, 0);
}

Test(caps, no_gate_no_network)
{
        struct policy *p = finalize_ok("{\"network\": {\"mode\": \"none\"}}");
        struct caps *c = caps_new(p);
        json_t *g = json_loads("[{\"network\": {\"allow\": \"x.com\"}}]", 0, NULL);
        struct caps_change ch = {0};
        char why[512];
        cr_assert_eq(caps_parse_change(g, NULL, &ch, why, sizeof(why)), 0);
        cr_assert_lt(caps_apply(c, &ch, why, sizeof(why)), 0);
        cr_assert(strstr(why, "no network gate"), "%s", why);
        caps_change_clear(&ch);
        json_decref(g);
        caps_free(c);
        policy_free(p);
}
