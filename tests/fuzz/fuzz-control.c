/* SPDX-License-Identifier: Apache-2.0 */
#include <event2/buffer.h>
#include <jansson.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "control-proto.h"

/* The supervisor's control socket (src/lib/supervisor/control-server.c):
 * the bytes a client sends are split into lines as the server splits them,
 * and each line is read by control_parse_request. A request it accepts is a
 * JSON object whose "op" is a string, and an exec's fields go through
 * control_parse_exec; one it refuses leaves nothing behind. */

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
        struct evbuffer *in = evbuffer_new();
        if (!in)
                return 0;
        evbuffer_add(in, data, size);
        char *line;
        size_t len;
        while ((line = evbuffer_readln(in, &len, EVBUFFER_EOL_LF))) {
                json_t *req = NULL;
                int r = control_parse_request(line, len, &req);
                if (r >= 0) {
                        if (!json_is_object(req) ||
                            !json_is_string(json_object_get(req, "op")))
                                abort();
                        struct control_exec x;
                        const char *why = NULL;
                        memset(&x, 0, sizeof(x));
                        if (control_parse_exec(req, &x, &why) >= 0)
                                control_exec_clear(&x);
                        else if (!why)
                                abort(); /* a refusal says why */
                        json_decref(req);
                } else if (req) {
                        abort(); /* a refused line leaves nothing */
                }
                free(line);
        }
        evbuffer_free(in);
        return 0;
}
