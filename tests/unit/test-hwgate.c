/* SPDX-License-Identifier: Apache-2.0 */
/* The hardware gate's rules and protocol: the policy section's checks,
 * hostile values, the clamp, the ramp, the rate bucket, the deadman, the
 * driver protocol's parser, and a stop going ahead of what waits. */
#include <criterion/criterion.h>
#include <errno.h>
#include <math.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include "hardware.h"
#include "hwgate-internal.h"
#include "policy.h"

#define DRIVER "\"driver\": {\"command\": [\"robot\"]}"

static void hw_fails(const char *text, const char *needle)
{
        struct policy_hardware h;
        struct al_error e = {0};
        int r = policy_hardware_from_text(text, &h, &e);
        cr_assert_lt(r, 0, "accepted: %s", text);
        cr_assert(strstr(e.msg, needle), "message \"%s\" lacks \"%s\"", e.msg, needle);
}

Test(hwgate, policy_ok)
{
        struct policy_hardware h;
        struct al_error e = {0};
        int r = policy_hardware_from_text(
            "{" DRIVER ", \"actuators\": {\"allow\": [\"motor_left\", \"arm_joint_5\"], \"deny\": "
            "[\"arm_joint_5\"]}, \"sensors\": {\"deny\": [\"microphone\"]}, \"limits\": "
            "{\"maxSpeed\": 0.5, \"maxAcceleration\": 0.2, \"motionTimeout\": 30, \"rate\": 4, "
            "\"actuators\": {\"motor_left\": {\"maxSpeed\": 0.3}}}}",
            &h, &e);
        cr_assert_eq(r, 0, "%s", e.msg);
        cr_assert(policy_hardware_actuator_allowed(&h, "motor_left"));
        cr_assert(!policy_hardware_actuator_allowed(&h, "arm_joint_5"), "deny wins over allow");
        cr_assert(!policy_hardware_actuator_allowed(&h, "motor_right"), "default deny");
        cr_assert(policy_hardware_sensor_allowed(&h, "camera"), "default allow");
        cr_assert(!policy_hardware_sensor_allowed(&h, "microphone"));
        double ms, ma;
        policy_hardware_limits(&h, "motor_left", &ms, &ma);
        cr_assert(ms == 0.3 && ma == 0.2);
        cr_assert(h.rate == 4 && h.motion_timeout == 30);
        policy_hardware_clear(&h);
}

Test(hwgate, policy_refusals)
{
        hw_fails("{\"limits\": {\"maxSpeed\": 1}}", "driver");
        hw_fails("{" DRIVER "}", "maxSpeed");
        hw_fails("{" DRIVER ", \"limits\": {\"maxSpeed\": 1}, \"motors\": 1}", "hardware.motors");
        hw_fails("{" DRIVER ", \"limits\": {\"maxSpeed\": 1e308}}", "hardware.limits.maxSpeed");
        hw_fails("{" DRIVER ", \"limits\": {\"maxSpeed\": -0.5}}", "hardware.limits.maxSpeed");
        hw_fails("{" DRIVER ", \"limits\": {\"maxSpeed\": 0}}", "hardware.limits.maxSpeed");
        hw_fails("{" DRIVER ", \"limits\": {\"maxSpeed\": \"0.5\"}}", "hardware.limits.maxSpeed");
        hw_fails("{" DRIVER ", \"limits\": {\"maxSpeed\": 1, \"rate\": 0}}", "limits.rate");
        hw_fails("{" DRIVER ", \"limits\": {\"maxSpeed\": 1, \"rate\": 1e9}}", "limits.rate");
        hw_fails("{" DRIVER ", \"limits\": {\"maxSpeed\": 1, \"motionTimeout\": 0}}",
                 "motionTimeout");
        hw_fails("{" DRIVER ", \"limits\": {\"maxSpeed\": 1, \"speed\": 1}}", "limits.speed");
        hw_fails("{" DRIVER ", \"limits\": {\"maxSpeed\": 1, \"actuators\": {\"m\": {\"maxSpeed\": "
                 "2}}}}",
                 "tighten");
        hw_fails("{" DRIVER ", \"limits\": {\"maxSpeed\": 1, \"actuators\": {\"m\": {\"torque\": "
                 "2}}}}",
                 "torque");
        hw_fails("{" DRIVER ", \"limits\": {\"maxSpeed\": 1}, \"actuators\": {\"allow\": "
                 "[\"a b\"]}}",
                 "actuators.allow");
        hw_fails("{" DRIVER ", \"limits\": {\"maxSpeed\": 1}, \"actuators\": {\"allow\": "
                 "[\"m\", \"m\"]}}",
                 "twice");
        hw_fails("{" DRIVER ", \"limits\": {\"maxSpeed\": 1}, \"sensors\": {\"allow\": []}}",
                 "sensors.allow");
        hw_fails("{\"driver\": {\"command\": []}, \"limits\": {\"maxSpeed\": 1}}", "command");
        hw_fails("{\"driver\": {\"socket\": \"rel\"}, \"limits\": {\"maxSpeed\": 1}}", "socket");
        hw_fails("{\"driver\": {\"socket\": \"/a\", \"command\": [\"x\"]}, \"limits\": "
                 "{\"maxSpeed\": 1}}",
                 "exactly one");
        hw_fails("{\"driver\": {\"usb\": 1}, \"limits\": {\"maxSpeed\": 1}}", "driver.usb");
        hw_fails("[]", "must be an object");
}

Test(hwgate, policy_loader_keeps_section)
{
        struct policy *p = policy_new();
        struct al_error e = {0};
        cr_assert_lt(policy_load_string(p, "{\"hardware\": {\"limits\": {\"maxSpeed\": 1}}}",
                                        "policy.json", &e),
                     0);
        cr_assert(strstr(e.msg, "policy.json") && strstr(e.msg, "driver"), "%s", e.msg);
        cr_assert_eq(policy_load_string(p, "{\"hardware\": {" DRIVER
                                           ", \"limits\": {\"maxSpeed\": 1}}}",
                                        "policy.json", &e),
                     0, "%s", e.msg);
        cr_assert(p->hardware_json && strstr(p->hardware_json, "maxSpeed"));
        char *j = policy_to_json(p);
        cr_assert(strstr(j, "\"hardware\""));
        free(j);
        policy_free(p);
}

Test(hwgate, hostile_values)
{
        double v;
        const char *why;
        json_t *cases[] = {
            NULL,
            json_real(1e308),
            json_real(-1e308),
            json_real(1e6 + 1),
            json_integer(INT64_MAX),
            json_string("0.3"),
            json_string("NaN"),
            json_null(),
            json_true(),
            json_array(),
            json_object(),
        };
        for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
                cr_assert_eq(hwgate_value(cases[i], &v, &why), -EINVAL, "case %zu accepted", i);
                cr_assert(why && *why);
                json_decref(cases[i]);
        }
        /* jansson refuses to hold NaN or an infinity at all. */
        cr_assert_null(json_real(NAN));
        cr_assert_null(json_real(INFINITY));
        json_t *ok = json_real(-0.0);
        cr_assert_eq(hwgate_value(ok, &v, &why), 0);
        cr_assert(v == 0 && !signbit(v));
        json_decref(ok);
        ok = json_integer(-3);
        cr_assert_eq(hwgate_value(ok, &v, &why), 0);
        cr_assert(v == -3);
        json_decref(ok);
}

Test(hwgate, clamp)
{
        bool c;
        cr_assert(hwgate_clamp(2.0, 0.5, &c) == 0.5 && c);
        cr_assert(hwgate_clamp(-2.0, 0.5, &c) == -0.5 && c);
        cr_assert(hwgate_clamp(0.25, 0.5, &c) == 0.25 && !c);
        cr_assert(hwgate_clamp(0.5, 0.5, &c) == 0.5 && !c);
}

Test(hwgate, ramp)
{
        cr_assert(fabs(hwgate_ramp(0, 0.5, 0.2, 0.1) - 0.02) < 1e-12);
        cr_assert(fabs(hwgate_ramp(0.5, 0, 0.2, 0.1) - 0.48) < 1e-12, "braking is ramped too");
        cr_assert(hwgate_ramp(0.49, 0.5, 0.2, 0.1) == 0.5, "no overshoot");
        cr_assert(hwgate_ramp(0, 0.5, 0, 0.1) == 0.5, "no maxAcceleration: at once");
        cr_assert(hwgate_ramp(0.1, 0.5, 0.2, 0) == 0.1);
        cr_assert(hwgate_ramp(0.1, 0.5, 0.2, -1) == 0.1, "time going back moves nothing");
        /* A second of 20 ms steps moves by maxAcceleration, no more. */
        double v = 0;
        for (int i = 0; i < 50; i++)
                v = hwgate_ramp(v, 1.0, 0.2, 0.02);
        cr_assert(fabs(v - 0.2) < 1e-9, "%g", v);
}

Test(hwgate, bucket)
{
        struct hwgate_bucket b;
        hwgate_bucket_init(&b, 5, 1000);
        int n = 0;
        for (int i = 0; i < 100; i++)
                n += hwgate_bucket_take(&b, 1000);
        cr_assert_eq(n, 5, "a burst of one second's worth");
        cr_assert(!hwgate_bucket_take(&b, 1100));
        cr_assert(hwgate_bucket_take(&b, 1200), "one more after 200 ms at 5/s");
        cr_assert(!hwgate_bucket_take(&b, 500), "a clock going back gives nothing");
        hwgate_bucket_init(&b, 0.1, 0);
        cr_assert(hwgate_bucket_take(&b, 0));
        cr_assert(!hwgate_bucket_take(&b, 5000));
        cr_assert(hwgate_bucket_take(&b, 10000));
}

Test(hwgate, deadman)
{
        cr_assert(!hwgate_deadman_due(0, 100000, 1000), "at rest");
        cr_assert(!hwgate_deadman_due(5000, 5999, 1000));
        cr_assert(hwgate_deadman_due(5000, 6000, 1000));
        cr_assert(!hwgate_deadman_due(5000, 4000, 1000));
}

static int reply_ok(const char *s, struct hwgate_reply *r)
{
        const char *why = NULL;
        return hwgate_proto_parse_reply(s, strlen(s), r, &why);
}

Test(hwgate, proto_reply)
{
        struct hwgate_reply r;
        cr_assert_eq(reply_ok("{\"id\": 3, \"ok\": true, \"value\": {\"x\": 1}}", &r), 0);
        cr_assert(r.id == 3 && r.ok && json_is_object(r.value));
        hwgate_reply_clear(&r);
        cr_assert_eq(reply_ok("{\"id\": 4, \"ok\": false, \"error\": \"bad\\n\\u001b[2J\"}", &r),
                     0);
        cr_assert(!r.ok && !strchr(r.error, '\n') && !strchr(r.error, 0x1b), "%s", r.error);
        hwgate_reply_clear(&r);
        const char *bad[] = {
            "",
            "[]",
            "nope",
            "{\"id\": 1, \"ok\": true}",
            "{\"id\": 1, \"ok\": true, \"value\": 1, \"error\": \"x\"}",
            "{\"id\": 1, \"ok\": false}",
            "{\"id\": 1, \"ok\": false, \"error\": 3}",
            "{\"id\": 0, \"ok\": true, \"value\": 1}",
            "{\"id\": -1, \"ok\": true, \"value\": 1}",
            "{\"id\": \"1\", \"ok\": true, \"value\": 1}",
            "{\"ok\": true, \"value\": 1}",
            "{\"id\": 1, \"ok\": 1, \"value\": 1}",
            "{\"id\": 1, \"ok\": true, \"value\": 1, \"extra\": 1}",
            "{\"id\": 1, \"id\": 2, \"ok\": true, \"value\": 1}",
            "{\"id\": 1, \"ok\": true, \"value\": NaN}",
        };
        for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++)
                cr_assert_lt(reply_ok(bad[i], &r), 0, "accepted: %s", bad[i]);
        char deep[200];
        size_t n = 0;
        n += (size_t)snprintf(deep, sizeof(deep), "{\"id\": 1, \"ok\": true, \"value\": ");
        for (int i = 0; i < 40; i++)
                deep[n++] = '[';
        deep[n] = '\0';
        cr_assert_lt(reply_ok(deep, &r), 0);
}

Test(hwgate, proto_request)
{
        size_t len;
        double v = 0.25;
        char *l = hwgate_proto_request(7, "set", "motor_left", &v, &len);
        cr_assert(l[len - 1] == '\n' && strlen(l) == len);
        json_error_t je;
        json_t *o = json_loads(l, 0, &je);
        cr_assert(json_integer_value(json_object_get(o, "id")) == 7);
        cr_assert(json_real_value(json_object_get(o, "value")) == 0.25);
        json_decref(o);
        free(l);
}

Test(hwgate, annotate_list)
{
        struct policy_hardware h;
        struct al_error e = {0};
        cr_assert_eq(policy_hardware_from_text("{" DRIVER ", \"actuators\": {\"allow\": [\"m\"]}, "
                                               "\"sensors\": {\"deny\": [\"mic\"]}, \"limits\": "
                                               "{\"maxSpeed\": 0.5}}",
                                               &h, &e),
                     0);
        json_error_t je;
        json_t *devs = json_loads("[{\"name\": \"m\", \"kind\": \"actuator\"}, {\"name\": \"j\", "
                                  "\"kind\": \"actuator\"}, {\"name\": \"mic\", \"kind\": "
                                  "\"sensor\"}]",
                                  0, &je);
        const char *why = NULL;
        json_t *l = hwgate_annotate_list(&h, devs, &why);
        cr_assert_not_null(l);
        cr_assert(json_is_true(json_object_get(json_array_get(l, 0), "allowed")));
        cr_assert(json_is_false(json_object_get(json_array_get(l, 1), "allowed")));
        cr_assert(json_is_false(json_object_get(json_array_get(l, 2), "allowed")));
        json_decref(l);
        json_decref(devs);
        devs = json_loads("[{\"name\": \"../x\", \"kind\": \"actuator\"}]", 0, &je);
        cr_assert_null(hwgate_annotate_list(&h, devs, &why));
        json_decref(devs);
        policy_hardware_clear(&h);
}

/* A driver that does not read: what waits is dropped for the stop, and
 * the stop follows the last line the kernel got whole. */
Test(hwgate, stop_goes_first)
{
        int sv[2];
        cr_assert_eq(socketpair(AF_UNIX, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0, sv), 0);
        int small = 4096;
        setsockopt(sv[0], SOL_SOCKET, SO_SNDBUF, &small, sizeof(small));
        struct hwgate_driver d = {.fd = sv[0], .pid = -1, .pidfd = -1};
        size_t len;
        double v = 0.3;
        int sent = 0;
        for (; sent < 2000; sent++) {
                char *l = hwgate_proto_request((uint64_t)sent + 1, "set", "motor_left", &v, &len);
                int r = hwgate_driver_send(&d, l, len);
                free(l);
                if (r == -ENOBUFS)
                        break;
                cr_assert_eq(r, 0);
        }
        cr_assert_gt(d.out_len, 0, "something waits");
        hwgate_driver_drop_queued(&d);
        char *stop = hwgate_proto_request(99999, "stop", NULL, NULL, &len);
        cr_assert_eq(hwgate_driver_send(&d, stop, len), 0);
        free(stop);
        /* Read everything: whole lines, the stop among the first few KiB. */
        static char buf[1 << 20];
        size_t got = 0;
        for (int spins = 0; spins < 1000; spins++) {
                ssize_t n = read(sv[1], buf + got, sizeof(buf) - 1 - got);
                if (n > 0)
                        got += (size_t)n;
                cr_assert_geq(hwgate_driver_flush(&d), 0);
                if (d.out_len == 0 && n <= 0)
                        break;
        }
        buf[got] = '\0';
        cr_assert_lt(got, 64 * 1024, "the queue was not dropped (%zu bytes)", got);
        char *last = strstr(buf, "\"op\":\"stop\"");
        cr_assert_not_null(last, "no stop");
        for (char *line = buf; *line;) {
                char *nl = strchr(line, '\n');
                cr_assert_not_null(nl, "a line was cut");
                json_error_t je;
                json_t *o = json_loadb(line, (size_t)(nl - line), 0, &je);
                cr_assert_not_null(o, "not a whole line: %.*s", (int)(nl - line), line);
                json_decref(o);
                line = nl + 1;
        }
        hwgate_driver_close(&d, 0);
        close(sv[1]);
}
