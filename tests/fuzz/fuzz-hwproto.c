/* SPDX-License-Identifier: Apache-2.0 */
#include <jansson.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "hardware.h"
#include "hwgate-internal.h"

/* The hardware driver protocol (src/lib/hwgate/proto.c): the bytes a
 * driver sends are split into lines as the gate splits them, each read by
 * hwgate_proto_parse_reply; an accepted answer's value goes through the
 * list check (hwgate_annotate_list) as a list answer would, and through
 * the value check a sandbox's set gets (hwgate_value). */

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
        static struct policy_hardware h;
        static int ready;
        if (!ready) {
                struct al_error e = {0};
                if (policy_hardware_from_text(
                        "{\"driver\": {\"command\": [\"x\"]}, \"actuators\": {\"allow\": "
                        "[\"motor_left\"]}, \"sensors\": {\"deny\": [\"microphone\"]}, "
                        "\"limits\": {\"maxSpeed\": 0.5, \"maxAcceleration\": 0.2}}",
                        &h, &e) < 0)
                        abort();
                ready = 1;
        }
        const char *p = (const char *)data, *end = p + size;
        while (p < end) {
                const char *nl = memchr(p, '\n', (size_t)(end - p));
                size_t len = nl ? (size_t)(nl - p) : (size_t)(end - p);
                struct hwgate_reply r;
                const char *why = NULL;
                if (hwgate_proto_parse_reply(p, len, &r, &why) == 0) {
                        if (r.ok) {
                                json_t *l = hwgate_annotate_list(&h, r.value, &why);
                                if (!l && !why)
                                        abort();
                                json_decref(l);
                                double v;
                                if (hwgate_value(r.value, &v, &why) == 0 && !(v == v))
                                        abort(); /* NaN accepted */
                        } else if (strpbrk(r.error, "\n\"\\"))
                                abort();
                        hwgate_reply_clear(&r);
                } else if (!why)
                        abort();
                p += len + 1;
        }
        return 0;
}
