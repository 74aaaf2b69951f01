/* SPDX-License-Identifier: Apache-2.0 */
/* The driver protocol (docs/hardware.md, "Writing a driver"): one JSON
 * object per line each way. What comes back is a device's code talking:
 * its size, nesting and keys are checked before anything uses it. Pure,
 * fuzzed (tests/fuzz/fuzz-hwproto.c). */
#include <errno.h>
#include <stdio.h>
#include <string.h>

#include "hardware.h"
#include "hwgate-internal.h"
#include "util.h"

#define DEPTH_MAX 16

char *hwgate_proto_request(uint64_t id, const char *op, const char *name, const double *value,
                           size_t *ret_len)
{
        json_t *o = json_pack("{s:I, s:s}", "id", (json_int_t)id, "op", op);
        if (!o)
                return NULL;
        if (name)
                json_object_set_new(o, "name", json_string(name));
        if (value)
                json_object_set_new(o, "value", json_real(*value));
        char *s = json_dumps(o, JSON_COMPACT | JSON_REAL_PRECISION(17));
        json_decref(o);
        if (!s)
                return NULL;
        size_t n = strlen(s);
        char *line = xrealloc(s, n + 2, 1);
        line[n] = '\n';
        line[n + 1] = '\0';
        *ret_len = n + 1;
        return line;
}

void hwgate_reply_clear(struct hwgate_reply *r)
{
        json_decref(r->doc);
        memset(r, 0, sizeof(*r));
}

static void printable(const char *s, char *buf, size_t size)
{
        size_t n = 0;
        for (; s && *s && n + 1 < size; s++) {
                unsigned char ch = (unsigned char)*s;
                buf[n++] = (ch < 0x20 || ch >= 0x7f || ch == '"' || ch == '\\') ? '?' : (char)ch;
        }
        buf[n] = '\0';
}

int hwgate_proto_parse_reply(const char *line, size_t len, struct hwgate_reply *r, const char **why)
{
        json_error_t jerr;
        const char *key;
        json_t *v;

        memset(r, 0, sizeof(*r));
        if (len > HWGATE_LINE_MAX) {
                *why = "the driver's line is longer than 64 KiB";
                return -EINVAL;
        }
        if (!json_text_depth_ok(line, len, DEPTH_MAX)) {
                *why = "the driver's answer nests deeper than 16";
                return -EINVAL;
        }
        json_t *doc = json_loadb(line, len, JSON_REJECT_DUPLICATES, &jerr);
        if (!json_is_object(doc)) {
                json_decref(doc);
                *why = "the driver's answer is not a JSON object on one line";
                return -EINVAL;
        }
        r->doc = doc;
        json_object_foreach(doc, key, v)
        {
                if (!STREQ(key, "id") && !STREQ(key, "ok") && !STREQ(key, "value") &&
                    !STREQ(key, "error")) {
                        *why = "the driver's answer has an unknown key (id, ok, value, error)";
                        goto bad;
                }
        }
        v = json_object_get(doc, "id");
        if (!json_is_integer(v) || json_integer_value(v) < 1) {
                *why = "the driver's answer has no \"id\" (a positive integer)";
                goto bad;
        }
        r->id = (uint64_t)json_integer_value(v);
        v = json_object_get(doc, "ok");
        if (!json_is_boolean(v)) {
                *why = "the driver's answer has no \"ok\" (true or false)";
                goto bad;
        }
        r->ok = json_is_true(v);
        if (r->ok) {
                r->value = json_object_get(doc, "value");
                if (!r->value || json_object_get(doc, "error")) {
                        *why = "the driver's answer with \"ok\": true needs a \"value\" and no "
                               "\"error\"";
                        goto bad;
                }
        } else {
                v = json_object_get(doc, "error");
                if (!json_is_string(v) || json_object_get(doc, "value")) {
                        *why = "the driver's answer with \"ok\": false needs an \"error\" "
                               "string and no \"value\"";
                        goto bad;
                }
                printable(json_string_value(v), r->error, sizeof(r->error));
        }
        return 0;
bad:
        hwgate_reply_clear(r);
        return -EINVAL;
}

json_t *hwgate_annotate_list(const struct policy_hardware *h, const json_t *devices,
                             const char **why)
{
        size_t i;
        json_t *d;
        if (!json_is_array(devices) || json_array_size(devices) > 1024) {
                *why = "the driver's device list is not an array (of at most 1024)";
                return NULL;
        }
        json_t *out = json_array();
        json_array_foreach(devices, i, d)
        {
                const char *name = json_string_value(json_object_get(d, "name"));
                const char *kind = json_string_value(json_object_get(d, "kind"));
                if (!json_is_object(d) || !name || !policy_hardware_name_ok(name) || !kind ||
                    (!STREQ(kind, "actuator") && !STREQ(kind, "sensor"))) {
                        json_decref(out);
                        *why = "the driver's device list holds something that is not "
                               "{\"name\", \"kind\": \"actuator\"|\"sensor\"}";
                        return NULL;
                }
                json_t *e = json_pack("{s:s, s:s}", "name", name, "kind", kind);
                if (STREQ(kind, "actuator")) {
                        bool ok = policy_hardware_actuator_allowed(h, name);
                        json_object_set_new(e, "allowed", json_boolean(ok));
                        if (ok) {
                                double ms, ma;
                                policy_hardware_limits(h, name, &ms, &ma);
                                json_object_set_new(e, "maxSpeed", json_real(ms));
                                if (ma > 0)
                                        json_object_set_new(e, "maxAcceleration", json_real(ma));
                        }
                } else
                        json_object_set_new(e, "allowed",
                                            json_boolean(policy_hardware_sensor_allowed(h, name)));
                json_array_append_new(out, e);
        }
        return out;
}
