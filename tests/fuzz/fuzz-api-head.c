/* SPDX-License-Identifier: Apache-2.0 */
#include <stdbool.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "httphead.h"
#include "netgate/http.h"

/* airlockd's request guard (src/daemon/httpguard.c, scan()): on one
 * connection, each head is read by the strict parser in origin form and then
 * the API's own rules, or explained from the bytes held so far when the
 * parser refuses it; an accepted head's body is framed as the head says, and
 * the next head follows it (keep-alive, pipelining). The first byte sets the
 * size of the pieces the bytes arrive in. */

static struct netgate_http_parser parser;
static char hold[NETGATE_HTTP_HEAD_MAX + 1];

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static void check_status(int status, const char *msg, size_t msg_size)
{
        if (status < 400 || status > 599 || !memchr(msg, '\0', msg_size))
                abort();
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
        if (size < 1)
                return 0;
        size_t step = (size_t)data[0] % 64 + 1;
        const char *in = (const char *)data + 1;
        size--;

        enum { HEAD, BODY } state = HEAD;
        struct netgate_http_body body;
        size_t held = 0;
        char msg[256];
        netgate_http_parser_init(&parser, NETGATE_HTTP_REQUEST);
        parser.origin_form = true;

        size_t pos = 0;
        while (pos < size) {
                size_t n = size - pos < step ? size - pos : step;
                size_t used = 0;
                if (state == BODY) {
                        size_t off, run;
                        int r =
                            netgate_http_body_feed(&body, in + pos, n, SIZE_MAX, &used, &off, &run);
                        if (r < 0)
                                return 0; /* the guard closes the connection */
                        if (used > n || (run && off + run > used))
                                abort();
                        pos += used;
                        if (r == 1) {
                                state = HEAD;
                                held = 0;
                                netgate_http_parser_init(&parser, NETGATE_HTTP_REQUEST);
                                parser.origin_form = true;
                        } else if (used == 0) {
                                abort(); /* no progress on bytes it was given */
                        }
                        continue;
                }
                int r = netgate_http_parser_feed(&parser, in + pos, n, &used);
                if (r < 0) {
                        /* head_failed: what was held, and what came with it */
                        size_t more = n < sizeof(hold) - held ? n : sizeof(hold) - held;
                        memcpy(hold + held, in + pos, more);
                        int status = http_head_explain(hold, held + more, r, msg, sizeof(msg));
                        check_status(status, msg, sizeof(msg));
                        return 0;
                }
                if (used > n || held + used > NETGATE_HTTP_HEAD_MAX)
                        abort();
                memcpy(hold + held, in + pos, used);
                held += used;
                pos += used;
                if (r == 1) {
                        int status = http_head_check(&parser.head, msg, sizeof(msg));
                        if (status) {
                                check_status(status, msg, sizeof(msg));
                                return 0; /* the connection is refused */
                        }
                        netgate_http_body_init(&body, parser.head.framing, parser.head.length);
                        if (body.framing == NETGATE_HTTP_BODY_NONE) {
                                held = 0;
                                netgate_http_parser_init(&parser, NETGATE_HTTP_REQUEST);
                                parser.origin_form = true;
                        } else {
                                state = BODY;
                        }
                } else if (used == 0) {
                        abort(); /* no progress on bytes it was given */
                }
        }
        return 0;
}
