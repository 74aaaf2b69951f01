/* SPDX-License-Identifier: Apache-2.0 */
/* GET /v1/sandboxes/{id}/tools: the host tools a running sandbox may call
 * through its tool gateway, as the sandbox itself sees them (airlock-tool
 * ls, MCP tools/list). */
#include <event2/http.h>
#include <jansson.h>

#include "daemon.h"
#include "http.h"
#include "routes.h"
#include "sandbox.h"
#include "toolgate/toolgate.h"

void route_tools(struct daemon *d, struct evhttp_request *req, const struct route_args *a)
{
        struct sandbox *sb = find_running(d, req, a->id);
        if (!sb)
                return;
        json_t *list = sb->policy ? toolgate_list(sb->policy) : json_array();
        reply_json(d, req, 200,
                   json_pack("{s:s, s:o}", "sandbox", a->id, "tools", list ? list : json_array()));
}
