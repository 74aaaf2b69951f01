/* SPDX-License-Identifier: Apache-2.0 */
#pragma once

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

/* WebSocket framing (RFC 6455) for the API's terminal stream (pty.c): the
 * handshake's accept key and the frames, both ways. Pure: no I/O (fuzzed
 * and unit-tested as a parser of client bytes). */

enum ws_opcode {
        WS_CONT = 0x0,
        WS_TEXT = 0x1,
        WS_BINARY = 0x2,
        WS_CLOSE = 0x8,
        WS_PING = 0x9,
        WS_PONG = 0xa,
};

/* Close codes (RFC 6455 7.4.1). */
#define WS_CLOSE_NORMAL      1000
#define WS_CLOSE_GOING_AWAY  1001
#define WS_CLOSE_PROTOCOL    1002
#define WS_CLOSE_UNSUPPORTED 1003
#define WS_CLOSE_POLICY      1008
#define WS_CLOSE_TOO_BIG     1009
#define WS_CLOSE_INTERNAL    1011

struct ws_frame {
        bool fin;
        uint8_t opcode;
        uint64_t len;      /* payload length */
        size_t header_len; /* bytes before the payload */
        uint8_t mask[4];
};

/* The Sec-WebSocket-Accept value for a client's Sec-WebSocket-Key: -EINVAL
 * unless the key is the base64 of 16 bytes. out gets 28 characters and a NUL. */
int ws_accept_key(const char *key, char out[29]);

/* Parse a client frame's header from buf. Returns 1 with *f set when the
 * whole frame (header and payload) is in buf, 0 when more bytes are needed,
 * or a negative close reason: -WS_CLOSE_PROTOCOL (unmasked, reserved bits
 * or opcode, a control frame fragmented or over 125 bytes, a non-minimal
 * length) or -WS_CLOSE_TOO_BIG (payload over max_payload). */
int ws_parse_client_frame(const uint8_t *buf, size_t len, uint64_t max_payload, struct ws_frame *f);
/* The same for a server's frame (`airlock attach`): unmasked. */
int ws_parse_server_frame(const uint8_t *buf, size_t len, uint64_t max_payload, struct ws_frame *f);
/* A client frame's header with its mask key; the payload is to be masked
 * with ws_unmask (the same XOR). Returns its length (6, 8 or 14). */
size_t ws_client_header(uint8_t hdr[14], uint8_t opcode, uint64_t len, const uint8_t mask[4]);
/* Unmask a payload in place (offset: where in the payload `p` starts). */
void ws_unmask(uint8_t *p, size_t n, const uint8_t mask[4], uint64_t offset);
/* A server frame's header (final, unmasked) for a payload of len bytes;
 * returns its length (2, 4 or 10). */
size_t ws_server_header(uint8_t hdr[10], uint8_t opcode, uint64_t len);
