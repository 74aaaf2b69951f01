/* SPDX-License-Identifier: Apache-2.0 */
/* POST /v1/sandboxes/{id}/estop: the hardware's emergency stop over the
 * API (docs/api.md, docs/hardware.md). The sandbox's supervisor is asked
 * on its control socket (supervisor/estop.h) to stop every actuator now and
 * refuse motion until the sandbox ends; the sandbox goes on. It blocks the
 * daemon's loop for at most ESTOP_API_TIMEOUT_MS: a stop goes first. */
#include <errno.h>
#include <jansson.h>

#include "daemon.h"
#include "estop.h"
#include "http.h"
#include "record.h"
#include "routes.h"
#include "sandbox.h"
#include "util.h"

enum { ESTOP_API_TIMEOUT_MS = 2000 };

void route_estop(struct daemon *d, struct evhttp_request *req, const struct route_args *a)
{
        struct grant *g = a->grant;
        if (!require(d, req, g, g->allow_sandbox || g->allow_exec, "allowSandbox or allowExec"))
                return;
        struct sandbox *sb = find_running(d, req, a->id);
        if (!sb)
                return;
        _cleanup_free_ char *by = xasprintf("grant:%s", g->name);
        struct al_error err = {0};
        struct sv_estop_result res;
        int r = sv_estop(d->run_dir, a->id, by, ESTOP_API_TIMEOUT_MS, &res, &err);
        if (r == -ENODEV) {
                reply_error(d, req, 409, "no_hardware",
                            "sandbox %s has no hardware section in its policy", a->id);
                return;
        }
        if (r < 0) {
                reply_error(d, req, 503, "supervisor_unreachable",
                            "the emergency stop could not reach sandbox %s's supervisor: %s "
                            "(`airlock stop %s` ends the sandbox, and its driver stops on "
                            "connection loss)",
                            a->id, err.msg, a->id);
                return;
        }
        reply_json(d, req, 200,
                   json_pack("{s:s, s:b, s:b, s:f}", "sandbox", a->id, "stopped", 1, "driverTold",
                             res.driver_told, "receivedAt", res.received_at));
}
