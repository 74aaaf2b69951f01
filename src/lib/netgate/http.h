/* SPDX-License-Identifier: Apache-2.0 */
#pragma once

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

/* An incremental HTTP/1.x message-head parser for a forward proxy, and a body
 * framer. Every byte is hostile: lengths are bounded, the grammar is strict,
 * and anything that two HTTP implementations could read differently (request
 * smuggling) is refused rather than guessed at. */

#define NETGATE_HTTP_HEAD_MAX    32768
#define NETGATE_HTTP_LINE_MAX    8192
#define NETGATE_HTTP_FIELDS_MAX  128
#define NETGATE_HTTP_METHOD_MAX  32
#define NETGATE_HTTP_CHUNK_LINE  4096  /* chunk size line with extensions */
#define NETGATE_HTTP_TRAILER_MAX 16384 /* whole trailer section */

enum netgate_http_kind {
        NETGATE_HTTP_REQUEST,
        NETGATE_HTTP_RESPONSE,
};

enum netgate_http_framing {
        NETGATE_HTTP_BODY_NONE,
        NETGATE_HTTP_BODY_LENGTH,
        NETGATE_HTTP_BODY_CHUNKED,
        NETGATE_HTTP_BODY_CLOSE, /* responses only: until the upstream closes */
};

struct netgate_http_field {
        const char *name;
        size_t name_len;
        const char *value; /* OWS trimmed */
        size_t value_len;
};

/* Pointers point into the parser that produced the head. */
struct netgate_http_head {
        int minor; /* HTTP/1.<minor>: 0 or 1 */

        /* requests */
        const char *method;
        size_t method_len;
        bool is_connect;
        const char *host; /* raw bytes, IPv6 without brackets: validate before use */
        size_t host_len;
        uint16_t port;
        bool port_given;
        const char *path; /* origin-form path and query; "" means "/" */
        size_t path_len;
        bool path_needs_slash; /* path starts with '?': send "/" first */

        /* responses */
        int status;
        const char *reason;
        size_t reason_len;

        struct netgate_http_field fields[NETGATE_HTTP_FIELDS_MAX];
        size_t n_fields;

        enum netgate_http_framing framing;
        uint64_t length;   /* NETGATE_HTTP_BODY_LENGTH */
        bool conn_close;   /* the sender will not send another message on this connection */
        bool conn_upgrade; /* "Connection: upgrade" */
};

struct netgate_http_parser {
        enum netgate_http_kind kind;
        bool head_request; /* RESPONSE: the request was HEAD, so no body */
        /* REQUEST: take origin-form targets ("/path?query", as a server
         * does) instead of absolute URIs; anything else is -EBADMSG. Set
         * after netgate_http_parser_init(). */
        bool origin_form;
        int state;
        int error;
        size_t len;
        size_t line_start;
        size_t blank_lines;
        int te_count;
        bool te_chunked_last;
        bool have_length;
        struct netgate_http_head head;
        char buf[NETGATE_HTTP_HEAD_MAX];
};

void netgate_http_parser_init(struct netgate_http_parser *p, enum netgate_http_kind kind);

/* Feed bytes. Returns 1 when the head is complete (*ret_consumed says how many
 * of `data` it used; the rest is body or the next message), 0 when all bytes
 * were taken and more are needed, or:
 *   -EMSGSIZE        a line, the head or the field count is over its limit
 *   -EBADMSG         malformed
 *   -ENOTSUP         a transfer coding or URI scheme the gate does not forward
 *   -EPROTONOSUPPORT not HTTP/1.0 or HTTP/1.1
 * Once it has returned non-zero, further calls return the same. */
int netgate_http_parser_feed(struct netgate_http_parser *p, const char *data, size_t len,
                             size_t *ret_consumed);

/* Fields the gate does not pass on: the hop-by-hop ones (Connection,
 * Keep-Alive, Proxy-*, TE, Trailer, Upgrade, and every field the Connection
 * header names), and Host, Transfer-Encoding and Content-Length, which the
 * gate writes itself from what it parsed. */
bool netgate_http_field_is_hop(const struct netgate_http_head *h, const char *name, size_t len);

/* Whether `len` bytes (at least one) are an HTTP token: a method or a
 * field name. */
bool netgate_http_is_token(const char *s, size_t len);

/* Whether a field value the gate writes holds no control character but
 * horizontal tab (no CR or LF that would start another field). */
bool netgate_http_value_ok(const char *v);

/* Case-insensitive field-name comparison. */
bool netgate_http_name_eq(const char *a, size_t alen, const char *b);

struct netgate_http_body {
        enum netgate_http_framing framing;
        uint64_t remaining;
        int state;
        size_t line;
        size_t trailer;
        unsigned digits;
};

void netgate_http_body_init(struct netgate_http_body *b, enum netgate_http_framing framing,
                            uint64_t length);

/* Scan body bytes. Payload comes back as one run per call:
 * data[*ret_run_off .. *ret_run_off + *ret_run_len) with at most `max_run`
 * bytes, ending at *ret_consumed; chunk framing and trailers are consumed and
 * dropped (the gate re-encodes chunks, so no two parsers ever disagree about
 * where a chunk ends). Returns 1 when the body ended at *ret_consumed, 0 when
 * more is needed (or the run filled `max_run`), -EBADMSG on bad chunking,
 * -EMSGSIZE when a chunk line or the trailers are too long. */
int netgate_http_body_feed(struct netgate_http_body *b, const char *data, size_t len,
                           size_t max_run, size_t *ret_consumed, size_t *ret_run_off,
                           size_t *ret_run_len);
