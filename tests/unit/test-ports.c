/* SPDX-License-Identifier: Apache-2.0 */
#include <criterion/criterion.h>
#include <errno.h>
#include <string.h>

#include "control-proto.h"
#include "ports.h"

Test(ports, spec_forms)
{
        struct sv_port_req r;
        const char *why = NULL;
        cr_assert_eq(sv_ports_parse_spec("3000", &r, &why), 0);
        cr_assert_eq(r.port, 3000);
        cr_assert_eq(r.host_port, 3000, "HOSTPORT defaults to PORT");
        cr_assert_str_empty(r.bind);
        cr_assert_eq(sv_ports_parse_spec("3000:8080", &r, &why), 0);
        cr_assert_eq(r.port, 3000);
        cr_assert_eq(r.host_port, 8080);
        cr_assert_eq(sv_ports_parse_spec("1:0", &r, &why), 0);
        cr_assert_eq(r.host_port, 0, "0 asks for any free port");
        cr_assert_eq(sv_ports_parse_spec("65535:65535", &r, &why), 0);
}

Test(ports, spec_refusals)
{
        static const char *const bad[] = {
            "",      ":",          "0",       "65536",    "-1",      "3000:",
            ":3000", "3000:65536", "3000:-1", "x",        "3000:x",  "3000:80:1",
            " 80",   "80 ",        "0x50",    "12345678", "3000::1",
        };
        for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
                struct sv_port_req r = {.port = 7};
                const char *why = NULL;
                cr_assert_eq(sv_ports_parse_spec(bad[i], &r, &why), -EINVAL, "\"%s\"", bad[i]);
                cr_assert_not_null(why);
                cr_assert_eq(r.port, 7, "untouched on failure");
        }
}

Test(ports, bind_addresses)
{
        cr_assert_eq(sv_ports_check_bind("127.0.0.1"), 0);
        cr_assert_eq(sv_ports_check_bind("0.0.0.0"), 0);
        cr_assert_eq(sv_ports_check_bind("::1"), 0);
        cr_assert_eq(sv_ports_check_bind("localhost"), -EINVAL);
        cr_assert_eq(sv_ports_check_bind("127.0.0.1:80"), -EINVAL);
        cr_assert_eq(sv_ports_check_bind(""), -EINVAL);
}

Test(ports, control_op)
{
        json_t *req = NULL;
        const char *line = "{\"op\":\"ports\",\"action\":\"list\"}";
        cr_assert_eq(control_parse_request(line, strlen(line), &req), CONTROL_REQ_PORTS);
        json_decref(req);
}

Test(ports, netns_socket_needs_a_namespace)
{
        cr_assert_eq(sv_ports_netns_socket(-1), -EBADF);
}
