/* SPDX-License-Identifier: Apache-2.0 */
#include <stdbool.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "daemon/httphead.h"
#include "netgate/http.h"

/* airlockd's reading of a request head (src/daemon/httpguard.c): the strict
 * parser in origin form, then the API's own rules, or the explanation of
 * what the parser refused. The first byte sets the size of the pieces the
 * head arrives in. */

static struct netgate_http_parser parser;

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
        if (size < 1)
                return 0;
        size_t step = (size_t)data[0] % 64 + 1;
        data++;
        size--;
        netgate_http_parser_init(&parser, NETGATE_HTTP_REQUEST);
        parser.origin_form = true;
        char msg[256];
        size_t pos = 0;
        while (pos < size) {
                size_t n = size - pos < step ? size - pos : step;
                size_t used = 0;
                int r = netgate_http_parser_feed(&parser, (const char *)data + pos, n, &used);
                if (r < 0) {
                        int status = http_head_explain((const char *)data, size, r, msg, sizeof(msg));
                        if (status < 400 || status > 599 || !memchr(msg, '\0', sizeof(msg)))
                                abort();
                        return 0;
                }
                if (used > n)
                        abort();
                pos += used;
                if (r == 1) {
                        int status = http_head_check(&parser.head, msg, sizeof(msg));
                        if (status != 0 && (status < 400 || status > 599))
                                abort();
                        return 0;
                }
        }
        return 0;
}
