/* SPDX-License-Identifier: Apache-2.0 */
/* Which installed node policy a pod may name (airlock.io/policy: NAME):
 * one that carries the node's power (routes and their secrets, tool
 * definitions, host mounts, the direct path) only from the Kubernetes
 * namespaces the node lists in NAME.namespaces; a list, where there is one,
 * holds for every policy; a spec from no pod (no CRI namespace) is the
 * node's own. */
#include <criterion/criterion.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

#include "policy.h"
#include "spec.h"
#include "util.h"

#define NS                                                                                         \
        "\"namespaces\":[{\"type\":\"pid\"},{\"type\":\"network\"},{\"type\":\"mount\"},"          \
        "{\"type\":\"ipc\"},{\"type\":\"uts\"}]"
#define PROC "\"process\":{\"args\":[\"/bin/sh\"],\"cwd\":\"/\",\"env\":[\"PATH=/bin\"]}"

#define ROUTES                                                                                     \
        "{\"network\":{\"hosts\":{\"up.test\":\"127.0.0.1\"},\"allowPrivate\":[\"127.0.0.1/32\"]," \
        "\"routes\":[{\"name\":\"up\",\"upstream\":\"http://up.test:8000\",\"inject\":{\"x-key\":" \
        "\"${secret:NODE_TOKEN}\"}}]}}"

static char dir[] = "/tmp/oci-access-XXXXXX";

static void put(const char *name, const char *text)
{
        _cleanup_free_ char *path = xasprintf("%s/%s", dir, name);
        FILE *f = fopen(path, "w");
        cr_assert_not_null(f);
        fputs(text, f);
        fclose(f);
}

static void setup(void)
{
        cr_assert_not_null(mkdtemp(dir));
        put("keyed.json", ROUTES);
        put("plain.json", "{\"limits\":{\"pids\":40}}");
        put("direct.json", "{\"network\":{\"allow\":[\"example.com\"],\"directPath\":true}}");
}

static void teardown(void)
{
        const char *names[] = {"keyed.json",       "plain.json",       "direct.json",
                               "keyed.namespaces", "plain.namespaces", "direct.namespaces"};
        for (size_t i = 0; i < ARRAY_SIZE(names); i++) {
                _cleanup_free_ char *p = xasprintf("%s/%s", dir, names[i]);
                unlink(p);
        }
        rmdir(dir);
}

/* oci_spec_policy's result for a spec naming `policy` with these extra
 * annotations ("" for none); the message in msg. */
static int named(const char *policy, const char *extra, char *msg, size_t size)
{
        _cleanup_free_ char *j =
            xasprintf("{\"ociVersion\":\"1.0.2\",\"root\":{\"path\":\"rootfs\"}," PROC
                      ",\"linux\":{" NS "},\"annotations\":{\"airlock.io/policy\":\"%s\"%s}}",
                      policy, extra);
        struct oci_spec *s = NULL;
        struct al_error e = {0};
        cr_assert_eq(oci_spec_parse(j, "/b", &s, &e), 0, "%s", e.msg);
        struct policy *p = NULL;
        int r = oci_spec_policy(s, dir, &p, &e);
        snprintf(msg, size, "%s", r < 0 ? e.msg : "");
        if (p)
                policy_free(p);
        oci_spec_free(s);
        return r;
}

#define CRI_NS(x) ",\"io.kubernetes.cri.sandbox-namespace\":\"" x "\""
#define POD_NS(x) ",\"io.kubernetes.pod.namespace\":\"" x "\""

TestSuite(oci_policy_access, .init = setup, .fini = teardown);

Test(oci_policy_access, node_power_needs_the_nodes_list)
{
        char m[1024];
        /* A pod of any namespace naming the node's keyed policy: refused
         * while the node lists no namespace for it. */
        cr_assert_lt(named("keyed", CRI_NS("attacker"), m, sizeof(m)), 0);
        cr_assert(strstr(m, "keyed.namespaces") && strstr(m, "attacker"), "%s", m);
        cr_assert_lt(named("keyed", POD_NS("attacker"), m, sizeof(m)), 0);
        cr_assert_lt(named("direct", CRI_NS("attacker"), m, sizeof(m)), 0);
        cr_assert(strstr(m, "directPath"), "%s", m);
        /* Listed: allowed; another namespace: refused. */
        put("keyed.namespaces", "# who may name keyed\nagents\n  ops  \n");
        cr_assert_eq(named("keyed", CRI_NS("agents"), m, sizeof(m)), 0, "%s", m);
        cr_assert_eq(named("keyed", POD_NS("ops"), m, sizeof(m)), 0, "%s", m);
        cr_assert_lt(named("keyed", CRI_NS("attacker"), m, sizeof(m)), 0);
        cr_assert(strstr(m, "attacker"), "%s", m);
        /* A prefix or a comment is no listing. */
        cr_assert_lt(named("keyed", CRI_NS("agent"), m, sizeof(m)), 0);
        cr_assert_lt(named("keyed", CRI_NS("who"), m, sizeof(m)), 0);
        /* "*" lists every namespace. */
        put("keyed.namespaces", "*\n");
        cr_assert_eq(named("keyed", CRI_NS("attacker"), m, sizeof(m)), 0, "%s", m);
}

Test(oci_policy_access, a_list_holds_for_every_policy)
{
        char m[1024];
        /* No node power, no list: any pod may name it (its own document
         * could say as much). */
        cr_assert_eq(named("plain", CRI_NS("attacker"), m, sizeof(m)), 0, "%s", m);
        put("plain.namespaces", "agents\n");
        cr_assert_lt(named("plain", CRI_NS("attacker"), m, sizeof(m)), 0);
        cr_assert_eq(named("plain", CRI_NS("agents"), m, sizeof(m)), 0, "%s", m);
}

Test(oci_policy_access, not_a_pod_is_the_nodes_own)
{
        char m[1024];
        cr_assert_eq(named("keyed", "", m, sizeof(m)), 0, "%s", m);
}

Test(oci_policy_access, namespace_annotations_checked)
{
        char m[1024];
        put("keyed.namespaces", "agents\n");
        /* Two annotations that disagree: which is the pod's is unknown. */
        cr_assert_lt(named("keyed", CRI_NS("attacker") POD_NS("agents"), m, sizeof(m)), 0);
        cr_assert(strstr(m, "namespace"), "%s", m);
        cr_assert_lt(named("keyed", POD_NS("agents") CRI_NS("attacker"), m, sizeof(m)), 0);
        /* Not a namespace name. */
        cr_assert_lt(named("keyed", CRI_NS(""), m, sizeof(m)), 0);
        cr_assert_lt(named("keyed", CRI_NS("agents\\n"), m, sizeof(m)), 0);
        cr_assert_lt(named("keyed", CRI_NS("*"), m, sizeof(m)), 0);
        cr_assert_lt(named("keyed", CRI_NS("Agents"), m, sizeof(m)), 0);
        /* The same name twice agrees. */
        cr_assert_eq(named("keyed", CRI_NS("agents") POD_NS("agents"), m, sizeof(m)), 0, "%s", m);
}
