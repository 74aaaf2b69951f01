/* SPDX-License-Identifier: Apache-2.0 */
/* The approvals ops (docs/internals/control.md): "approvals" lists the
 * asks the gates hold for the operator, "approve" decides one. */
#include <errno.h>
#include <jansson.h>
#include <string.h>

#include "control-internal.h"
#include "control-proto.h"
#include "util.h"

void control_do_approvals(struct client *cl)
{
        json_t *l = sv_core_approvals_list(&cl->ctl->core);
        control_send_json(
            cl, json_pack("{s:b, s:s, s:o}", "ok", 1, "sandbox", cl->ctl->core.id, "approvals", l));
        control_client_finish(cl);
}

/* Who decided: recorded, so printable ASCII and bounded. */
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

void control_do_approve(struct client *cl, json_t *req)
{
        const char *id = json_string_value(json_object_get(req, "id"));
        const char *decision = json_string_value(json_object_get(req, "decision"));
        json_t *jby = json_object_get(req, "by");
        if (!id || strlen(id) >= 64) {
                control_send_error(cl, CONTROL_ERR_BAD_REQUEST, "\"id\" must be an approval id");
                return;
        }
        if (jby && (!json_is_string(jby) || !by_ok(json_string_value(jby)))) {
                control_send_error(cl, CONTROL_ERR_BAD_REQUEST,
                                   "\"by\" must be 1 to 128 printable ASCII characters");
                return;
        }
        json_t *o = NULL;
        int r = sv_core_approvals_decide(&cl->ctl->core, id, decision,
                                         jby ? json_string_value(jby) : "unknown", &o);
        if (r == -EINVAL) {
                control_send_error(cl, CONTROL_ERR_BAD_REQUEST,
                                   "\"decision\" must be allow-once, allow-sandbox, deny or "
                                   "deny-sandbox");
                return;
        }
        if (r == -EIO) {
                control_send_error(cl, CONTROL_ERR_AUDIT_FAILED,
                                   "the decision could not be recorded in the audit log, so it "
                                   "took no effect: the request was refused");
                return;
        }
        if (r < 0) {
                control_send_error(cl, CONTROL_ERR_UNKNOWN_APPROVAL,
                                   "no such approval is pending (decided, expired or unknown)");
                return;
        }
        control_send_json(cl, json_pack("{s:b, s:o}", "ok", 1, "approval", o));
        control_client_finish(cl);
}
