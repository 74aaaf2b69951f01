/* SPDX-License-Identifier: Apache-2.0 */
#include <errno.h>
#include <jansson.h>
#include <string.h>
#include <time.h>

#include "cgroup.h"
#include "control-internal.h"
#include "control-proto.h"
#include "util.h"

/* The kill switch's supervisor side (docs/internals/control.md, "stop"):
 * freeze every process of the sandbox, so that nothing more reaches a gate;
 * close the gates (the network gate, the tool gateway, the port forwards:
 * nothing more is accepted or relayed, and what was open is recorded); write
 * sandbox.stopped naming who stopped it and when the freeze took hold, and
 * make it durable; then kill, answer, and destroy as the destroy op does. */

static void format_ts(uint64_t us, char buf[static 40])
{
        time_t s = (time_t)(us / 1000000);
        struct tm tm;
        gmtime_r(&s, &tm);
        size_t n = strftime(buf, 40, "%Y-%m-%dT%H:%M:%S", &tm);
        snprintf(buf + n, 40 - n, ".%06uZ", (unsigned)(us % 1000000));
}

/* "by": who asked (the CLI's "cli:uid=0", the daemon's grant name), at most
 * CONTROL_STOP_BY_MAX printable ASCII bytes. */
static bool by_ok(const char *s)
{
        size_t n = strlen(s);
        if (n == 0 || n > CONTROL_STOP_BY_MAX)
                return false;
        for (size_t i = 0; i < n; i++)
                if (s[i] < 0x20 || s[i] > 0x7e)
                        return false;
        return true;
}

void control_do_stop(struct client *cl, json_t *req)
{
        struct control *c = cl->ctl;
        json_t *jby = json_object_get(req, "by");
        if (jby && (!json_is_string(jby) || !by_ok(json_string_value(jby)))) {
                control_send_error(cl, CONTROL_ERR_BAD_REQUEST,
                                   "\"by\" must be 1 to 128 printable ASCII characters");
                return;
        }
        const char *by = jby ? json_string_value(jby) : "unknown";

        /* The actuators first: a moving device is the most urgent. */
        if (c->core.hw) {
                char who[CONTROL_STOP_BY_MAX + 32];
                snprintf(who, sizeof(who), "kill switch, %s", by);
                sv_core_estop(&c->core, who);
        }

        uint64_t t0 = now_monotonic_us();
        int fr = c->core.cg ? cgroup_freeze(c->core.cg, true) : -ESRCH;
        uint64_t frozen_us = now_realtime_us();
        uint64_t freeze_ms = (now_monotonic_us() - t0) / 1000;
        char frozen_at[40];
        format_ts(frozen_us, frozen_at);

        /* The sandbox is still now; its gates stop accepting and relaying. */
        sv_core_close_gates(&c->core);

        json_t *ev = json_pack("{s:s, s:b, s:s, s:I}", "by", by, "frozen", fr >= 0, "frozenAt",
                               frozen_at, "freezeMs", (json_int_t)freeze_ms);
        if (fr < 0 && ev)
                json_object_set_new(ev, "freezeError", json_string(strerror(-fr)));
        sv_core_record(&c->core, "sandbox.stopped", ev);
        sv_core_commit(&c->core);

        /* Kill: a frozen v1 member dies once thawed, with SIGKILL already
         * pending, so it runs none of its own code again. */
        if (c->core.cg)
                c->core.cg->ops->kill(c->core.cg);
        sv_core_kill(&c->core);

        json_t *ans =
            json_pack("{s:b, s:s, s:b, s:s, s:I}", "ok", 1, "sandbox", c->cfg->id, "frozen",
                      fr >= 0, "frozenAt", frozen_at, "freezeMs", (json_int_t)freeze_ms);
        if (fr < 0 && ans)
                json_object_set_new(ans, "freezeError", json_string(strerror(-fr)));
        control_send_json(cl, ans);
        control_client_finish(cl);
        control_destroy(c);
}

/* The hardware's emergency stop (`airlock estop`, POST
 * /v1/sandboxes/{id}/estop): every actuator stopped now, motion refused
 * until the sandbox ends; the sandbox itself goes on. */
void control_do_estop(struct client *cl, json_t *req)
{
        struct control *c = cl->ctl;
        uint64_t received_us = now_realtime_us();
        json_t *jby = json_object_get(req, "by");
        if (jby && (!json_is_string(jby) || !by_ok(json_string_value(jby)))) {
                control_send_error(cl, CONTROL_ERR_BAD_REQUEST,
                                   "\"by\" must be 1 to 128 printable ASCII characters");
                return;
        }
        if (!c->core.hw) {
                control_send_error(cl, CONTROL_ERR_NO_HARDWARE,
                                   "this sandbox's policy has no hardware section");
                return;
        }
        int r = sv_core_estop(&c->core, jby ? json_string_value(jby) : "unknown");
        /* receivedAt: when the supervisor took the request (seconds since
         * the epoch), so that a test can time the device against it. */
        control_send_json(cl,
                          json_pack("{s:b, s:s, s:b, s:f}", "ok", 1, "sandbox", c->cfg->id,
                                    "driverTold", r >= 0, "receivedAt", (double)received_us / 1e6));
        control_client_finish(cl);
}
