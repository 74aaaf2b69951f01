/* SPDX-License-Identifier: Apache-2.0 */
/* /v1/sandboxes/{id}/ports: a running sandbox's port forwards (docs/api.md).
 * The supervisor owns them (src/lib/supervisor/ports.c): the daemon only
 * passes one control request on ("op": "ports") and its answer back, so a
 * forward outlives a daemon restart and closes with its sandbox. */
#include <arpa/inet.h>
#include <errno.h>
#include <event2/http.h>
#include <jansson.h>
#include <netinet/in.h>
#include <stdbool.h>
#include <string.h>

#include "ctl.h"
#include "record.h"
#include "routes.h"
#include "sandbox.h"
#include "util.h"

#define PORTS_CALL_TIMEOUT_MS 10000

struct ports_call {
        struct daemon *d;
        struct evhttp_request *req;
        struct sandbox *sb;
        json_t *answer;
        int ok_status; /* 200 or 201 */
};

static void on_line(struct ctl_call *c, json_t *msg, void *userdata)
{
        struct ports_call *pc = userdata;
        if (!pc->answer)
                pc->answer = json_incref(msg);
}

static int error_status(const char *code)
{
        if (!code)
                return 502;
        if (STREQ(code, CONTROL_ERR_BAD_REQUEST))
                return 400;
        if (STREQ(code, CONTROL_ERR_UNKNOWN_PORT))
                return 404;
        if (STREQ(code, CONTROL_ERR_PORT_UNAVAILABLE))
                return 409;
        if (STREQ(code, CONTROL_ERR_DESTROYED))
                return 409;
        return 502;
}

static void on_done(struct ctl_call *c, int error, void *userdata)
{
        struct ports_call *pc = userdata;
        json_t *a = pc->answer;
        if (error < 0 || !a) {
                reply_error(pc->d, pc->req, 502, "supervisor_unavailable",
                            "the sandbox's supervisor did not answer%s%s", error < 0 ? ": " : "",
                            error < 0 ? strerror(-error) : "");
        } else if (!json_is_true(json_object_get(a, "ok"))) {
                const char *code = json_string_value(json_object_get(a, "error"));
                const char *msg = json_string_value(json_object_get(a, "message"));
                reply_error(pc->d, pc->req, error_status(code), code ? code : "internal", "%s",
                            msg ? msg : "the supervisor refused");
        } else {
                json_object_del(a, "ok");
                json_t *port = json_object_get(a, "port");
                reply_json(pc->d, pc->req, pc->ok_status,
                           json_incref(json_is_object(port) ? port : a));
        }
        json_decref(a);
        sandbox_unref(pc->sb);
        free(pc);
}

static const struct ctl_call_ops ports_ops = {
    .line = on_line,
    .done = on_done,
};

static void call(struct daemon *d, struct evhttp_request *req, struct sandbox *sb, json_t *ctl,
                 int ok_status)
{
        struct ports_call *pc = xcalloc(1, sizeof(*pc));
        pc->d = d;
        pc->req = req;
        pc->sb = sb;
        pc->ok_status = ok_status;
        sandbox_ref(sb);
        sandbox_touch(sb);
        struct ctl_call *c = NULL;
        int r = ctl_call_start(d->base, sb->control_path, ctl, PORTS_CALL_TIMEOUT_MS, &ports_ops,
                               pc, &c);
        if (r < 0) {
                sandbox_unref(sb);
                free(pc);
                reply_error(d, req, 502, "supervisor_unavailable",
                            "the sandbox's supervisor did not answer: %s", strerror(-r));
        }
}

/* 1 for a loopback address (127.0.0.0/8, ::1, ::ffff:127.0.0.0/104), 0
 * for another address, -1 for no address. */
static int loopback(const char *s)
{
        struct in_addr a4;
        struct in6_addr a6;
        if (inet_pton(AF_INET, s, &a4) == 1)
                return (ntohl(a4.s_addr) >> 24) == 127;
        if (inet_pton(AF_INET6, s, &a6) != 1)
                return -1;
        if (IN6_IS_ADDR_LOOPBACK(&a6))
                return 1;
        return IN6_IS_ADDR_V4MAPPED(&a6) && a6.s6_addr[12] == 127;
}

/* GET and POST /v1/sandboxes/{id}/ports */
void route_ports(struct daemon *d, struct evhttp_request *req, const struct route_args *a)
{
        if (evhttp_request_get_command(req) == EVHTTP_REQ_GET) {
                struct sandbox *sb = find_running(d, req, a->id);
                if (!sb)
                        return;
                json_t *ctl = json_pack("{s:s, s:s}", "op", CONTROL_OP_PORTS, "action", "list");
                call(d, req, sb, ctl, 200);
                json_decref(ctl);
                return;
        }
        if (!require(d, req, a->grant, a->grant->allow_sandbox, "allowSandbox"))
                return;
        json_t *body = read_json_body(d, req, false);
        if (!body)
                return;
        static const char *const keys[] = {"port", "hostPort", "bind", NULL};
        json_t *ctl = NULL;
        if (reject_unknown(d, req, body, keys))
                goto out;
        json_t *port = json_object_get(body, "port"), *host = json_object_get(body, "hostPort"),
               *bind = json_object_get(body, "bind");
        if (!json_is_integer(port) || json_integer_value(port) < 1 ||
            json_integer_value(port) > 65535) {
                reply_bad_field(d, req, "port", "must be a port number from 1 to 65535");
                goto out;
        }
        if (host && (!json_is_integer(host) || json_integer_value(host) < 0 ||
                     json_integer_value(host) > 65535)) {
                reply_bad_field(d, req, "hostPort",
                                "must be 0 (any free port, the default) to 65535");
                goto out;
        }
        if (bind && (!json_is_string(bind) || loopback(json_string_value(bind)) < 0)) {
                reply_bad_field(d, req, "bind", "must be an IP address, e.g. 127.0.0.1 or ::1");
                goto out;
        }
        /* Served to the network, or on a port only the host's own
         * services may take (a grant could squat it before them): host
         * power, as host paths are. */
        if (!a->grant->allow_host_workspace &&
            ((bind && loopback(json_string_value(bind)) == 0) ||
             (host && json_integer_value(host) > 0 && json_integer_value(host) < 1024))) {
                reply_error_fields(d, req, 403, "authz_denied",
                                   json_pack("{s:s}", "permission", "allowHostWorkspace"),
                                   "grant \"%s\" may forward ports only on loopback and above "
                                   "1023; %s needs a grant with allowHostWorkspace",
                                   a->grant->name,
                                   bind && loopback(json_string_value(bind)) == 0
                                       ? "a bind beyond loopback"
                                       : "a privileged hostPort");
                goto out;
        }
        struct sandbox *sb = find_running(d, req, a->id);
        if (!sb)
                goto out;
        ctl = json_pack("{s:s, s:s, s:O, s:I}", "op", CONTROL_OP_PORTS, "action", "open", "port",
                        port, "hostPort", host ? json_integer_value(host) : (json_int_t)0);
        if (bind)
                json_object_set(ctl, "bind", bind);
        /* No port opened to the host without its line. */
        if (record_audit(d, a->id, "api.port_open",
                         json_pack("{s:s, s:O}", "grant", a->grant->name, "port", port)) < 0) {
                reply_audit_failed(d, req, d->audit_fault);
                goto out;
        }
        call(d, req, sb, ctl, 201);
out:
        json_decref(ctl);
        json_decref(body);
}

/* DELETE /v1/sandboxes/{id}/ports/{port} */
void route_port_delete(struct daemon *d, struct evhttp_request *req, const struct route_args *a)
{
        if (!require(d, req, a->grant, a->grant->allow_sandbox, "allowSandbox"))
                return;
        if (a->pid > 65535) {
                reply_error(d, req, 404, "not_found", "no port %llu", (unsigned long long)a->pid);
                return;
        }
        struct sandbox *sb = find_running(d, req, a->id);
        if (!sb)
                return;
        if (record_audit(
                d, a->id, "api.port_close",
                json_pack("{s:s, s:I}", "grant", a->grant->name, "port", (json_int_t)a->pid)) < 0) {
                reply_audit_failed(d, req, d->audit_fault);
                return;
        }
        json_t *ctl = json_pack("{s:s, s:s, s:I}", "op", CONTROL_OP_PORTS, "action", "close",
                                "port", (json_int_t)a->pid);
        call(d, req, sb, ctl, 200);
        json_decref(ctl);
}
