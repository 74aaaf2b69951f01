/* SPDX-License-Identifier: Apache-2.0 */
/* The ports op (docs/internals/control.md): open, close and list the
 * sandbox's port forwards (ports.h). */
#include <jansson.h>
#include <string.h>

#include "control-internal.h"
#include "control-proto.h"
#include "ports.h"
#include "util.h"

/* A port field: 1 to 65535, or 0 as well when zero_ok. -1 when bad. */
static int get_port(json_t *req, const char *key, bool zero_ok, bool required)
{
        json_t *v = json_object_get(req, key);
        if (!v)
                return required ? -1 : 0;
        if (!json_is_integer(v))
                return -1;
        json_int_t n = json_integer_value(v);
        if (n < (zero_ok ? 0 : 1) || n > 65535)
                return -1;
        return (int)n;
}

static void do_open(struct client *cl, json_t *req)
{
        struct control *c = cl->ctl;
        struct sv_port_req pr = {0};
        int port = get_port(req, "port", false, true);
        int host = get_port(req, "hostPort", true, false);
        json_t *jbind = json_object_get(req, "bind");
        if (port < 0) {
                control_send_error(cl, CONTROL_ERR_BAD_REQUEST, "port: must be 1 to 65535");
                return;
        }
        if (host < 0) {
                control_send_error(cl, CONTROL_ERR_BAD_REQUEST,
                                   "hostPort: must be 0 (any free port) to 65535");
                return;
        }
        if (jbind && (!json_is_string(jbind) || json_string_length(jbind) >= sizeof(pr.bind) ||
                      sv_ports_check_bind(json_string_value(jbind)) < 0)) {
                control_send_error(cl, CONTROL_ERR_BAD_REQUEST,
                                   "bind: must be an IP address, e.g. 127.0.0.1 or ::1");
                return;
        }
        pr.port = (uint16_t)port;
        pr.host_port = (uint16_t)host;
        if (jbind)
                snprintf(pr.bind, sizeof(pr.bind), "%s", json_string_value(jbind));
        if (!c->core.ports)
                c->core.ports = sv_ports_new(&c->core);
        struct al_error err = {0};
        json_t *d = NULL;
        int r = sv_ports_open(c->core.ports, &pr, &d, &err);
        if (r < 0) {
                control_send_error(
                    cl, r == -EINVAL ? CONTROL_ERR_BAD_REQUEST : CONTROL_ERR_PORT_UNAVAILABLE,
                    err.msg);
                return;
        }
        sv_core_commit(&c->core);
        control_send_json(cl, json_pack("{s:b, s:o}", "ok", 1, "port", d));
        control_client_finish(cl);
}

void control_do_ports(struct client *cl, json_t *req)
{
        struct control *c = cl->ctl;
        const char *action = json_string_value(json_object_get(req, "action"));
        if (!action) {
                control_send_error(cl, CONTROL_ERR_BAD_REQUEST,
                                   "action: must be open, close or list");
        } else if (STREQ(action, "open")) {
                do_open(cl, req);
        } else if (STREQ(action, "close")) {
                int port = get_port(req, "port", false, true);
                if (port < 0) {
                        control_send_error(cl, CONTROL_ERR_BAD_REQUEST, "port: must be 1 to 65535");
                        return;
                }
                if (!c->core.ports || sv_ports_close(c->core.ports, (uint16_t)port, "api") < 0) {
                        char msg[64];
                        snprintf(msg, sizeof(msg), "port %d is not forwarded", port);
                        control_send_error(cl, CONTROL_ERR_UNKNOWN_PORT, msg);
                        return;
                }
                sv_core_commit(&c->core);
                control_send_json(cl, json_pack("{s:b, s:{s:i, s:b}}", "ok", 1, "port", "port",
                                                port, "closed", 1));
                control_client_finish(cl);
        } else if (STREQ(action, "list")) {
                control_send_json(
                    cl, json_pack("{s:b, s:o}", "ok", 1, "ports", sv_ports_list(c->core.ports)));
                control_client_finish(cl);
        } else {
                control_send_error(cl, CONTROL_ERR_BAD_REQUEST,
                                   "action: must be open, close or list");
        }
}
