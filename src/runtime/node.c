/* SPDX-License-Identifier: Apache-2.0 */
/* The node's configuration for a container's routes and tools (node.h). */
#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "node.h"
#include "paths.h"
#include "secrets.h"
#include "util.h"

/* The file named by `var`, else `def` when it exists; NULL: none. An
 * explicit name that does not exist is the caller's error to report. */
static const char *node_file(const char *var, const char *def)
{
        const char *v = getenv(var);
        if (v && *v)
                return v;
        return access(def, F_OK) == 0 ? def : NULL;
}

int rt_node_policy(struct policy *p, struct al_error *err)
{
        if (p->hardware_json)
                return al_error_set_message(err, EINVAL,
                                            "annotation airlock.io/policy: \"hardware\" is not "
                                            "supported in a container; remove it");
        if (p->n_sentinels)
                return al_error_set_message(err, EINVAL,
                                            "annotation airlock.io/policy: network.sentinels are "
                                            "not supported in a container; use a route");
        /* Keys a container cannot honour are refused, never accepted and
         * then ignored: the bundle's root is the image, the spec's env the
         * environment, and no operator is there to answer an ask. */
        if (p->image)
                return al_error_set_message(err, EINVAL,
                                            "annotation airlock.io/policy: \"image\" is not "
                                            "supported in a container (the pod's image is its "
                                            "root); remove it");
        if (p->n_env)
                return al_error_set_message(err, EINVAL,
                                            "annotation airlock.io/policy: \"env\" is not "
                                            "supported in a container; set the environment in "
                                            "the pod's spec");
        if (p->net_ask || p->tools_ask)
                return al_error_set_message(err, EINVAL,
                                            "annotation airlock.io/policy: %s.onUnlisted "
                                            "\"ask\" is not supported in a container (no "
                                            "operator is there to ask); list what is allowed",
                                            p->net_ask ? "network" : "tools");
        if (!p->n_tools_allow)
                return 0;
        const char *path = node_file("AIRLOCK_RUNTIME_TOOLS", RUNTIME_TOOLS_DEFAULT);
        if (!path)
                return 0; /* the built-in tools only */
        int r = policy_tools_load_file(p, path, err);
        if (r < 0)
                return al_error_wrap(err, "the node's tool definitions");
        return 0;
}

int rt_node_secrets(const struct policy *p, struct secrets **ret, struct al_error *err)
{
        *ret = NULL;
        if (!p->n_routes && !p->n_tools_allow)
                return 0;
        const char *path = node_file("AIRLOCK_RUNTIME_SECRETS", RUNTIME_SECRETS_DEFAULT);
        if (!path) {
                *ret = secrets_new();
                return 0;
        }
        int r = secrets_load_file(path, ret, err);
        if (r < 0)
                return al_error_wrap(err, "the node's secrets");
        return 0;
}

char *rt_node_tool_bin(void)
{
        char *p = paths_beside_self("airlock-tool");
        if (p && access(p, X_OK) == 0)
                return p;
        free(p);
        p = paths_beside_self("../cli/airlock-tool");
        if (p && access(p, X_OK) == 0)
                return p;
        free(p);
        return NULL;
}
