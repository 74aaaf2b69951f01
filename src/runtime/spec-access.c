/* SPDX-License-Identifier: Apache-2.0 */
/* Which installed node policy a pod may name (spec-internal.h,
 * docs/kubernetes.md). */
#include <errno.h>
#include <fcntl.h>
#include <stdbool.h>
#include <string.h>

#include "policy.h"
#include "spec-internal.h"
#include "spec.h"
#include "util.h"

/* The Kubernetes namespace of the pod a spec is for: the CRI's annotation
 * (containerd's io.kubernetes.cri.sandbox-namespace, CRI-O's
 * io.kubernetes.pod.namespace). *ret NULL: no pod's (a spec the node's own
 * tools wrote). Two that disagree, or a value that is no namespace name (a
 * DNS label: 1 to 63 of a-z 0-9 -, not starting or ending with -), are
 * refused: which namespace the pod is in would be a guess. */
static int pod_namespace(const struct oci_spec *s, const char **ret, struct al_error *err)
{
        const char *cri = oci_spec_annotation(s, "io.kubernetes.cri.sandbox-namespace");
        const char *crio = oci_spec_annotation(s, "io.kubernetes.pod.namespace");
        *ret = NULL;
        if (cri && crio && !STREQ(cri, crio))
                return al_error_set_message(err, EPERM,
                                            "annotations: io.kubernetes.cri.sandbox-namespace "
                                            "\"%.63s\" and io.kubernetes.pod.namespace \"%.63s\" "
                                            "name two namespaces",
                                            cri, crio);
        const char *ns = cri ? cri : crio;
        if (!ns)
                return 0;
        size_t n = strlen(ns);
        bool ok = n >= 1 && n <= 63 && ns[0] != '-' && ns[n - 1] != '-' &&
                  strspn(ns, "abcdefghijklmnopqrstuvwxyz0123456789-") == n;
        if (!ok)
                return al_error_set_message(err, EPERM,
                                            "annotations: the pod's namespace \"%.63s\" is not a "
                                            "namespace name",
                                            ns);
        *ret = ns;
        return 0;
}

/* What of the node's own an installed policy hands a container, which a
 * pod's own document may not ask for (below): NULL when nothing. */
static const char *node_power(const struct policy *p)
{
        if (p->n_routes)
                return "routes (with the node's secrets)";
        if (p->n_tools)
                return "tool definitions (commands run on the node)";
        for (size_t i = 0; i < p->n_mounts; i++)
                if (!p->mounts[i].volume)
                        return "host mounts";
        if (p->net_direct_path)
                return "network.directPath";
        return NULL;
}

#define POLICY_ACCESS_MAX (64 * 1024)

/* Whether the pod of namespace `ns` may name the installed policy `name`
 * (docs/kubernetes.md): NAME.namespaces beside it lists the namespaces
 * that may, one a line ('#' starts a comment, "*" is every namespace), and
 * holds for every policy it is written for. Without the file a policy
 * that holds the node's power is for no pod; one that holds none is for
 * every pod, as a pod's own document may say as much. */
static int pod_may_name(const char *policy_dir, const char *name, const struct policy *p,
                        const char *ns, struct al_error *err)
{
        _cleanup_free_ char *path = xasprintf("%s/%s.namespaces", policy_dir, name);
        _cleanup_free_ char *text = NULL;
        size_t len = 0;
        int r = read_file_at(AT_FDCWD, path, POLICY_ACCESS_MAX, &text, &len);
        const char *power = node_power(p);
        if (r == -ENOENT) {
                if (!power)
                        return 0;
                return al_error_set_message(
                    err, EPERM,
                    "annotation airlock.io/policy \"%s\": the policy holds the node's %s, and "
                    "the node lists no namespace that may name it; a pod of namespace \"%s\" "
                    "may not (list it in %s, one a line)",
                    name, power, ns, path);
        }
        if (r < 0)
                return al_error_set(err, -r, "annotation airlock.io/policy \"%s\": reading %s",
                                    name, path);
        for (char *line = text; line && *line;) {
                char *next = strchr(line, '\n');
                if (next)
                        *next++ = '\0';
                char *hash = strchr(line, '#');
                if (hash)
                        *hash = '\0';
                while (*line == ' ' || *line == '\t')
                        line++;
                size_t n = strlen(line);
                while (n && (line[n - 1] == ' ' || line[n - 1] == '\t' || line[n - 1] == '\r'))
                        line[--n] = '\0';
                if (STREQ(line, "*") || STREQ(line, ns))
                        return 0;
                line = next;
        }
        return al_error_set_message(err, EPERM,
                                    "annotation airlock.io/policy \"%s\": namespace \"%s\" is not "
                                    "among the namespaces %s lists",
                                    name, ns, path);
}

int oci_spec_policy_access(const struct oci_spec *s, const char *policy_dir, const char *name,
                           const struct policy *p, struct al_error *err)
{
        const char *ns = NULL;
        int r = pod_namespace(s, &ns, err);
        if (r < 0 || !ns)
                return r;
        return pod_may_name(policy_dir, name, p, ns, err);
}
