/* SPDX-License-Identifier: Apache-2.0 */
/* POST /v1/sandboxes/{id}/estop: the hardware's emergency stop over the
 * API (docs/api.md, docs/hardware.md). The sandbox's supervisor is asked
 * on its control socket to stop every actuator now and refuse motion until
 * the sandbox ends; the sandbox goes on. The request leaves at once, on
 * the daemon's loop (ctl.h); the supervisor acts on it on its own loop, so
 * nothing the daemon does meanwhile delays the stop, and a supervisor that
 * does not answer (stopped, hung) holds no other request: its answer is a
 * 503 after ESTOP_API_TIMEOUT_MS. */
#include <errno.h>
#include <jansson.h>
#include <string.h>

#include "ctl.h"
#include "daemon.h"
#include "http.h"
#include "routes.h"
#include "sandbox.h"
#include "util.h"

enum { ESTOP_API_TIMEOUT_MS = 2000 };

struct estop_call {
        struct daemon *d;
        struct evhttp_request *req;
        char id[17];
        json_t *answer;
};

static void unreachable(struct estop_call *ec, const char *why)
{
        reply_error(ec->d, ec->req, 503, "supervisor_unreachable",
                    "the emergency stop could not reach sandbox %s's supervisor: %s "
                    "(`airlock stop %s` ends the sandbox, and its driver stops on "
                    "connection loss)",
                    ec->id, why, ec->id);
}

static void on_line(struct ctl_call *c, json_t *msg, void *ud)
{
        struct estop_call *ec = ud;
        if (!ec->answer)
                ec->answer = json_incref(msg);
}

static void on_done(struct ctl_call *c, int error, void *ud)
{
        struct estop_call *ec = ud;
        json_t *a = ec->answer;
        const char *code = json_string_value(json_object_get(a, "error"));
        const char *msg = json_string_value(json_object_get(a, "message"));
        if (!a) {
                unreachable(ec, error < 0 ? strerror(-error) : "no answer");
        } else if (json_is_true(json_object_get(a, "ok"))) {
                reply_json(ec->d, ec->req, 200,
                           json_pack("{s:s, s:b, s:b, s:f}", "sandbox", ec->id, "stopped", 1,
                                     "driverTold", json_is_true(json_object_get(a, "driverTold")),
                                     "receivedAt",
                                     json_number_value(json_object_get(a, "receivedAt"))));
        } else if (code && STREQ(code, CONTROL_ERR_NO_HARDWARE)) {
                reply_error(ec->d, ec->req, 409, "no_hardware",
                            "sandbox %s has no hardware section in its policy", ec->id);
        } else {
                char why[512];
                snprintf(why, sizeof(why), "it answered %s%s%s", code ? code : "not an answer",
                         msg ? ": " : "", msg ? msg : "");
                unreachable(ec, why);
        }
        json_decref(a);
        free(ec);
}

static const struct ctl_call_ops estop_ops = {.line = on_line, .done = on_done};

void route_estop(struct daemon *d, struct evhttp_request *req, const struct route_args *a)
{
        struct grant *g = a->grant;
        if (!require(d, req, g, g->allow_sandbox || g->allow_exec, "allowSandbox or allowExec"))
                return;
        struct sandbox *sb = find_running(d, req, a->id);
        if (!sb)
                return;
        _cleanup_free_ char *by = xasprintf("grant:%s", g->name);
        json_t *ask = json_pack("{s:s, s:s}", "op", CONTROL_OP_ESTOP, "by", by);
        struct estop_call *ec = xcalloc(1, sizeof(*ec));
        ec->d = d;
        ec->req = req;
        snprintf(ec->id, sizeof(ec->id), "%s", a->id);
        struct ctl_call *c = NULL;
        int r = ctl_call_start(d->base, sb->control_path, ask, ESTOP_API_TIMEOUT_MS, &estop_ops, ec,
                               &c);
        json_decref(ask);
        if (r < 0) {
                unreachable(ec, strerror(-r));
                free(ec);
        }
}
