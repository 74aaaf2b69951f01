/* SPDX-License-Identifier: Apache-2.0 */
#include <event2/buffer.h>
#include <jansson.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "control.h"

/* The supervisor's control socket (src/lib/control.c): the bytes a client
 * sends are split into lines as on_client_read splits them, and each line is
 * read by control_request_parse. A request it accepts is a JSON object whose
 * "op" is a string; one it refuses leaves nothing behind. */

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
                const char *op = NULL;
                json_t *req = control_request_parse(line, len, &op);
                if (req) {
                        if (!json_is_object(req) || !op ||
                            op != json_string_value(json_object_get(req, "op")))
                                abort();
                        json_decref(req);
                } else if (op) {
                        abort(); /* a refused line sets nothing */
                }
                free(line);
        }
        evbuffer_free(in);
        return 0;
}
