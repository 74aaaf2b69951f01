/* SPDX-License-Identifier: Apache-2.0 */
/* A motion is on the audit log before the device is told to move: the
 * hw.command record of an allowed set is written before the set reaches the
 * driver, and a set whose record cannot be written (the audit disk full)
 * never reaches it (audit_failed). Before, the record followed the send, so
 * with a full disk a device moved with no line. */
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
#include "util.h"

struct answer {
        bool called;
        char code[32];
};

static void on_done(void *ud, json_t *value, const char *code, const char *message)
{
        struct answer *a = ud;
        a->called = true;
        snprintf(a->code, sizeof(a->code), "%s", code ? code : "");
        json_decref(value);
}

static int drv = -1; /* the driver's end */
static bool set_sent_before_record, recorded_allow;
static int record_result; /* what the recorder answers for an allowed set */

/* Whether the driver has been sent a set yet (peeked, nothing consumed). */
static bool driver_got_set(void)
{
        char buf[4096];
        ssize_t n = recv(drv, buf, sizeof(buf) - 1, MSG_PEEK | MSG_DONTWAIT);
        if (n <= 0)
                return false;
        buf[n] = '\0';
        return strstr(buf, "\"set\"") != NULL;
}

static int on_record(void *ud, const char *kind, json_t *fields)
{
        int r = 0;
        const char *op = json_string_value(json_object_get(fields, "op"));
        const char *dec = json_string_value(json_object_get(fields, "decision"));
        if (STREQ(kind, "hw.command") && op && STREQ(op, "set") && dec && STREQ(dec, "allow")) {
                recorded_allow = true;
                set_sent_before_record = driver_got_set();
                r = record_result;
        }
        json_decref(fields);
        return r;
}

struct rig {
        char dir[64], path[96];
        int ls;
        struct event_base *base;
        struct hwgate *g;
};

static void rig_up(struct rig *r)
{
        snprintf(r->dir, sizeof(r->dir), "/tmp/airlock-hwahead-XXXXXX");
        cr_assert_not_null(mkdtemp(r->dir));
        snprintf(r->path, sizeof(r->path), "%s/driver.sock", r->dir);
        r->ls = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
        struct sockaddr_un sa = {.sun_family = AF_UNIX};
        snprintf(sa.sun_path, sizeof(sa.sun_path), "%s", r->path);
        cr_assert_eq(bind(r->ls, (struct sockaddr *)&sa, sizeof(sa)), 0);
        cr_assert_eq(listen(r->ls, 4), 0);
        char policy[512];
        snprintf(policy, sizeof(policy),
                 "{\"driver\": {\"socket\": \"%s\"}, \"actuators\": {\"allow\": [\"motor\"]}, "
                 "\"limits\": {\"maxSpeed\": 1, \"rate\": 1000}}",
                 r->path);
        r->base = event_base_new();
        struct hwgate_config cfg = {.policy_text = policy, .recorder = on_record};
        struct al_error err = {0};
        r->g = hwgate_new(r->base, &cfg, &err);
        cr_assert_not_null(r->g, "%s", err.msg);
        drv = accept4(r->ls, NULL, NULL, SOCK_CLOEXEC);
        cr_assert_geq(drv, 0);
}

static void rig_down(struct rig *r)
{
        hwgate_free(r->g);
        event_base_free(r->base);
        close(drv);
        drv = -1;
        close(r->ls);
        unlink(r->path);
        rmdir(r->dir);
}

static void set(struct hwgate *g, double v, struct answer *a)
{
        *a = (struct answer){0};
        json_t *args = json_pack("{s:s, s:f}", "name", "motor", "value", v);
        hwgate_call(g, "hw.set", args, on_done, a);
        json_decref(args);
        cr_assert(a->called);
}

Test(hwgate_audit_ahead, recorded_before_the_device_is_told)
{
        struct rig r;
        set_sent_before_record = recorded_allow = false;
        record_result = 0;
        rig_up(&r);
        struct answer a;
        set(r.g, 0.5, &a);
        cr_assert_str_eq(a.code, "", "the set was refused: %s", a.code);
        cr_assert(recorded_allow, "no record of the allowed set");
        cr_assert_not(set_sent_before_record,
                      "the driver was told to move before the motion was recorded");
        cr_assert(driver_got_set(), "the set never reached the driver");
        rig_down(&r);
}

Test(hwgate_audit_ahead, unrecorded_set_never_moves)
{
        struct rig r;
        set_sent_before_record = recorded_allow = false;
        record_result = -ENOSPC;
        rig_up(&r);
        struct answer a;
        set(r.g, 0.5, &a);
        cr_assert_str_eq(a.code, "audit_failed", "answered \"%s\"", a.code);
        cr_assert_not(driver_got_set(), "the device was told to move with no record");
        rig_down(&r);
}
