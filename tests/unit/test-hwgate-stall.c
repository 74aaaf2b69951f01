/* SPDX-License-Identifier: Apache-2.0 */
/* A driver that stops reading its commands: the gate is built here with a
 * small queue (HWGATE_OUT_MAX, tests/unit/meson.build) so that it fills in
 * a few hundred calls. A set that cannot be queued must not be answered
 * as done: the gate stops every actuator (the stop goes ahead of what
 * waits), refuses motion from then on, and says so in its records. */
#include <criterion/criterion.h>
#include <errno.h>
#include <event2/event.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <unistd.h>

#include "hwgate.h"
#include "hwgate-internal.h"

struct answer {
        bool called;
        char code[32];
        char msg[256];
};

static void on_done(void *ud, json_t *value, const char *code, const char *message)
{
        struct answer *a = ud;
        a->called = true;
        snprintf(a->code, sizeof(a->code), "%s", code ? code : "");
        snprintf(a->msg, sizeof(a->msg), "%s", message ? message : "");
        json_decref(value);
}

static char records[64 * 1024];
static size_t records_len;

static int on_record(void *ud, const char *kind, json_t *fields)
{
        (void)ud;
        char *s = json_dumps(fields, JSON_COMPACT);
        int n = snprintf(records + records_len, sizeof(records) - records_len, "%s %s\n", kind,
                         s ? s : "");
        if (n > 0 && (size_t)n < sizeof(records) - records_len)
                records_len += (size_t)n;
        free(s);
        json_decref(fields);
        return 0;
}

static void set(struct hwgate *g, double v, struct answer *a)
{
        *a = (struct answer){0};
        json_t *args = json_pack("{s:s, s:f}", "name", "motor", "value", v);
        hwgate_call(g, "hw.set", args, on_done, a);
        json_decref(args);
        cr_assert(a->called, "hw.set answered later than its call");
}

Test(hwgate_stall, a_set_the_driver_cannot_take_stops_everything)
{
        char dir[] = "/tmp/airlock-hwstall-XXXXXX";
        cr_assert_not_null(mkdtemp(dir));
        char path[64];
        snprintf(path, sizeof(path), "%s/driver.sock", dir);
        int ls = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
        struct sockaddr_un sa = {.sun_family = AF_UNIX};
        snprintf(sa.sun_path, sizeof(sa.sun_path), "%s", path);
        cr_assert_eq(bind(ls, (struct sockaddr *)&sa, sizeof(sa)), 0);
        cr_assert_eq(listen(ls, 4), 0);

        char policy[512];
        snprintf(policy, sizeof(policy),
                 "{\"driver\": {\"socket\": \"%s\"}, \"actuators\": {\"allow\": [\"motor\"]}, "
                 "\"limits\": {\"maxSpeed\": 1, \"rate\": 1000}}",
                 path);
        struct event_base *base = event_base_new();
        struct hwgate_config cfg = {.policy_text = policy, .recorder = on_record};
        struct al_error err = {0};
        struct hwgate *g = hwgate_new(base, &cfg, &err);
        cr_assert_not_null(g, "%s", err.msg);

        /* The driver accepts and never reads: the kernel's buffer, then the
         * gate's queue fill. Every call answered "done" until then. */
        struct answer a;
        int calls = 0;
        for (; calls < 900; calls++) {
                set(g, calls % 2 ? 0.5 : 0.25, &a);
                if (a.code[0])
                        break;
        }
        cr_assert_str_eq(a.code, "tool_failed",
                         "a set the driver could not take was answered \"%s\" after %d calls "
                         "(%s)",
                         a.code[0] ? a.code : "done", calls, a.msg);
        cr_assert(strstr(records, "\"decision\":\"stop\""), "no stop recorded:\n%s", records);
        /* Motion stays refused: the gate no longer knows what the device
         * does with what it was sent. */
        set(g, 0.3, &a);
        cr_assert_str_eq(a.code, "tool_failed", "a later set was answered \"%s\"", a.code);

        /* The driver reads again: what it gets ends with the stop, whole. */
        int c = accept4(ls, NULL, NULL, SOCK_CLOEXEC | SOCK_NONBLOCK);
        cr_assert_geq(c, 0);
        static char buf[4 << 20];
        size_t got = 0;
        for (int spins = 0; spins < 400; spins++) {
                ssize_t n = read(c, buf + got, sizeof(buf) - 1 - got);
                if (n > 0)
                        got += (size_t)n;
                event_base_loop(base, EVLOOP_NONBLOCK);
                if (n <= 0)
                        usleep(5000);
        }
        buf[got] = '\0';
        cr_assert_gt(got, 0);
        cr_assert_eq(buf[got - 1], '\n', "the last line was cut");
        buf[got - 1] = '\0';
        char *last = strrchr(buf, '\n');
        last = last ? last + 1 : buf;
        cr_assert(strstr(last, "\"op\":\"stop\""), "the driver's last command: %s", last);

        hwgate_free(g);
        event_base_free(base);
        close(c);
        close(ls);
        unlink(path);
        rmdir(dir);
}
