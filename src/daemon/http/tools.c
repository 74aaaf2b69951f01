/* SPDX-License-Identifier: Apache-2.0 */
/* GET /v1/sandboxes/{id}/tools: the host tools a running sandbox may call
 * through its tool gateway, as the sandbox itself sees them (airlock-tool
 * ls, MCP tools/list): the definitions in its policy, filtered by what its
 * supervisor says it may call now (the live capabilities, "op": "caps"),
 * so that a tool granted or revoked at run time is listed as it is. */
#include <event2/http.h>
#include <jansson.h>
#include <string.h>

#include "ctl.h"
#include "daemon.h"
#include "http.h"
#include "routes.h"
#include "sandbox.h"
#include "toolgate/toolgate.h"
#include "util.h"

#define TOOLS_CALL_TIMEOUT_MS 10000

struct tools_call {
        struct daemon *d;
        struct evhttp_request *req;
        struct sandbox *sb;
        json_t *answer;
};

static void on_line(struct ctl_call *c, json_t *msg, void *userdata)
{
        struct tools_call *tc = userdata;
        if (!tc->answer)
                tc->answer = json_incref(msg);
}

static bool listed(void *ud, const char *name)
{
        size_t i;
        json_t *v;
        json_array_foreach((json_t *)ud, i, v)
        {
                if (json_is_string(v) && STREQ(json_string_value(v), name))
                        return true;
        }
        return false;
}

static void on_done(struct ctl_call *c, int error, void *userdata)
{
        struct tools_call *tc = userdata;
        json_t *tools = json_object_get(json_object_get(tc->answer, "capabilities"), "tools");
        if (error < 0 || !json_is_true(json_object_get(tc->answer, "ok")) || !json_is_array(tools))
                reply_error(tc->d, tc->req, 502, "supervisor_unavailable",
                            "the sandbox's supervisor did not say which tools it may call");
        else {
                json_t *list = tc->sb->policy ? toolgate_list_with(tc->sb->policy, listed, tools)
                                              : json_array();
                reply_json(tc->d, tc->req, 200,
                           json_pack("{s:s, s:o}", "sandbox", tc->sb->id, "tools",
                                     list ? list : json_array()));
        }
        json_decref(tc->answer);
        sandbox_unref(tc->sb);
        free(tc);
}

static const struct ctl_call_ops tools_ops = {
    .line = on_line,
    .done = on_done,
};

void route_tools(struct daemon *d, struct evhttp_request *req, const struct route_args *a)
{
        struct sandbox *sb = find_running(d, req, a->id);
        if (!sb)
                return;
        struct tools_call *tc = xcalloc(1, sizeof(*tc));
        tc->d = d;
        tc->req = req;
        tc->sb = sb;
        sandbox_ref(sb);
        json_t *ctl = json_pack("{s:s}", "op", CONTROL_OP_CAPS);
        struct ctl_call *c = NULL;
        int r = ctl_call_start(d->base, sb->control_path, ctl, TOOLS_CALL_TIMEOUT_MS, &tools_ops,
                               tc, &c);
        json_decref(ctl);
        if (r < 0) {
                sandbox_unref(sb);
                free(tc);
                reply_error(d, req, 502, "supervisor_unavailable",
                            "the sandbox's supervisor did not answer: %s", strerror(-r));
        }
}
