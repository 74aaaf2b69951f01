/* SPDX-License-Identifier: Apache-2.0 */
#include <stdbool.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "netgate/http.h"
#include "netgate/rules.h"

/* The first byte picks the message kind and the size of the pieces the rest
 * is fed in, so that the parsers see every split of every message. */

static struct netgate_http_parser parser;
static bool head_done;

static void check_head(const struct netgate_http_head *h)
{
        if (h->host && h->host_len > 0) {
                struct netgate_host host;
                (void)netgate_host_parse(h->host, h->host_len, &host);
        }
        for (size_t i = 0; i < h->n_fields; i++)
                (void)netgate_http_field_is_hop(h, h->fields[i].name, h->fields[i].name_len);
}

static size_t feed_head(const uint8_t *data, size_t size, size_t step, enum netgate_http_kind kind)
{
        netgate_http_parser_init(&parser, kind);
        parser.head_request = step % 2 == 0;
        parser.origin_form = kind == NETGATE_HTTP_REQUEST && step % 3 == 0; /* as routes read */
        head_done = false;
        size_t pos = 0;
        while (pos < size) {
                size_t n = size - pos < step ? size - pos : step;
                size_t used = 0;
                int r = netgate_http_parser_feed(&parser, (const char *)data + pos, n, &used);
                if (used > n)
                        abort();
                pos += used;
                if (r < 0)
                        return size;
                if (r > 0) {
                        check_head(&parser.head);
                        head_done = true;
                        return pos;
                }
        }
        return size;
}

static void feed_body(const uint8_t *data, size_t size, size_t step,
                      enum netgate_http_framing framing, uint64_t length)
{
        struct netgate_http_body b;
        netgate_http_body_init(&b, framing, length);
        size_t pos = 0;
        while (pos < size) {
                size_t n = size - pos < step ? size - pos : step;
                size_t used = 0, off = 0, run = 0;
                int r = netgate_http_body_feed(&b, (const char *)data + pos, n, step * 3 + 1, &used,
                                               &off, &run);
                if (used > n || off + run > used || run > step * 3 + 1)
                        abort();
                if (r != 0 || used == 0)
                        return;
                pos += used;
        }
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
        if (size < 1)
                return 0;
        uint8_t mode = data[0];
        data++;
        size--;
        size_t step = (size_t)(mode & 0x3f) + 1;
        if (mode & 0x40)
                step = size ? size : 1;
        enum netgate_http_kind kind = (mode & 0x80) ? NETGATE_HTTP_RESPONSE : NETGATE_HTTP_REQUEST;

        size_t head = feed_head(data, size, step, kind);
        if (head_done) {
                const struct netgate_http_head *h = &parser.head;
                enum netgate_http_framing f = h->framing;
                uint64_t len = h->length;
                feed_body(data + head, size - head, step, f, len);
        }
        /* And the whole input as a chunked body on its own. */
        feed_body(data, size, step, NETGATE_HTTP_BODY_CHUNKED, 0);
        return 0;
}
