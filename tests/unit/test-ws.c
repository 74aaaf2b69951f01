/* SPDX-License-Identifier: Apache-2.0 */
/* The WebSocket framing of the API's terminal stream (http/ws.c): every
 * byte comes from a client, so each rule of RFC 6455 it relies on is
 * checked here. */
#include <criterion/criterion.h>
#include <string.h>

#include "ws.h"

Test(ws, accept_key_is_rfc6455s_example)
{
        char out[29];
        /* RFC 6455 section 1.3. */
        cr_assert_eq(ws_accept_key("dGhlIHNhbXBsZSBub25jZQ==", out), 0);
        cr_assert_str_eq(out, "s3pPLMBiTxaQ9kYGzzhZRbK+xOo=");
}

Test(ws, accept_key_refuses_bad_keys)
{
        char out[29];
        cr_assert_lt(ws_accept_key(NULL, out), 0);
        cr_assert_lt(ws_accept_key("", out), 0);
        cr_assert_lt(ws_accept_key("short", out), 0);
        cr_assert_lt(ws_accept_key("dGhlIHNhbXBsZSBub25jZQ=!", out), 0);
        /* 24 characters, but 17 bytes' worth. */
        cr_assert_lt(ws_accept_key("dGhlIHNhbXBsZSBub25jZXg=", out), 0);
}

static size_t frame(uint8_t *buf, uint8_t b0, const char *payload, bool mask)
{
        size_t n = strlen(payload), hl = 2;
        buf[0] = b0;
        buf[1] = (uint8_t)((mask ? 0x80 : 0) | n);
        const uint8_t m[4] = {1, 2, 3, 4};
        if (mask) {
                memcpy(buf + 2, m, 4);
                hl = 6;
        }
        for (size_t i = 0; i < n; i++)
                buf[hl + i] = (uint8_t)payload[i] ^ (mask ? m[i & 3] : 0);
        return hl + n;
}

Test(ws, parses_a_masked_binary_frame_whole_or_waits)
{
        uint8_t buf[64];
        size_t n = frame(buf, 0x82, "hello", true);
        struct ws_frame f;
        for (size_t k = 0; k < n; k++)
                cr_assert_eq(ws_parse_client_frame(buf, k, 1024, &f), 0, "at %zu bytes", k);
        cr_assert_eq(ws_parse_client_frame(buf, n, 1024, &f), 1);
        cr_assert(f.fin);
        cr_assert_eq(f.opcode, WS_BINARY);
        cr_assert_eq(f.len, 5);
        cr_assert_eq(f.header_len, 6);
        ws_unmask(buf + 6, 5, f.mask, 0);
        cr_assert_eq(memcmp(buf + 6, "hello", 5), 0);
}

Test(ws, refuses_what_rfc6455_forbids)
{
        uint8_t buf[300];
        struct ws_frame f;
        size_t n = frame(buf, 0x82, "x", false); /* unmasked */
        cr_assert_eq(ws_parse_client_frame(buf, n, 1024, &f), -WS_CLOSE_PROTOCOL);
        n = frame(buf, 0x82 | 0x40, "x", true); /* RSV1 */
        cr_assert_eq(ws_parse_client_frame(buf, n, 1024, &f), -WS_CLOSE_PROTOCOL);
        n = frame(buf, 0x83, "x", true); /* reserved data opcode */
        cr_assert_eq(ws_parse_client_frame(buf, n, 1024, &f), -WS_CLOSE_PROTOCOL);
        n = frame(buf, 0x8b, "x", true); /* reserved control opcode */
        cr_assert_eq(ws_parse_client_frame(buf, n, 1024, &f), -WS_CLOSE_PROTOCOL);
        n = frame(buf, 0x09, "x", true); /* fragmented ping */
        cr_assert_eq(ws_parse_client_frame(buf, n, 1024, &f), -WS_CLOSE_PROTOCOL);
        /* A control frame over 125 bytes. */
        uint8_t big[] = {0x89, 0x80 | 126, 0, 126};
        cr_assert_eq(ws_parse_client_frame(big, sizeof(big), 1024, &f), -WS_CLOSE_PROTOCOL);
        /* Lengths not in their shortest form. */
        uint8_t nm16[] = {0x82, 0x80 | 126, 0, 5};
        cr_assert_eq(ws_parse_client_frame(nm16, sizeof(nm16), 1024, &f), -WS_CLOSE_PROTOCOL);
        uint8_t nm64[] = {0x82, 0x80 | 127, 0, 0, 0, 0, 0, 0, 0x10, 0};
        cr_assert_eq(ws_parse_client_frame(nm64, sizeof(nm64), 1 << 20, &f), -WS_CLOSE_PROTOCOL);
        uint8_t top[] = {0x82, 0x80 | 127, 0x80, 0, 0, 0, 0, 0, 0, 0};
        cr_assert_eq(ws_parse_client_frame(top, sizeof(top), UINT64_MAX, &f), -WS_CLOSE_PROTOCOL);
}

Test(ws, refuses_frames_over_the_limit_before_they_arrive)
{
        struct ws_frame f;
        uint8_t h[] = {0x82, 0x80 | 127, 0, 0, 0, 0, 0, 0x10, 0, 0}; /* 1 MiB */
        cr_assert_eq(ws_parse_client_frame(h, sizeof(h), 64 * 1024, &f), -WS_CLOSE_TOO_BIG);
        uint8_t h16[] = {0x82, 0x80 | 126, 0x01, 0x00}; /* 256 bytes */
        cr_assert_eq(ws_parse_client_frame(h16, sizeof(h16), 255, &f), -WS_CLOSE_TOO_BIG);
        cr_assert_eq(ws_parse_client_frame(h16, sizeof(h16), 256, &f), 0);
}

Test(ws, server_headers_use_the_shortest_length)
{
        uint8_t h[10];
        cr_assert_eq(ws_server_header(h, WS_BINARY, 125), 2);
        cr_assert_eq(h[0], 0x82);
        cr_assert_eq(h[1], 125);
        cr_assert_eq(ws_server_header(h, WS_TEXT, 126), 4);
        cr_assert_eq(h[1], 126);
        cr_assert_eq(h[2], 0);
        cr_assert_eq(h[3], 126);
        cr_assert_eq(ws_server_header(h, WS_BINARY, 65536), 10);
        cr_assert_eq(h[1], 127);
        cr_assert_eq(h[7], 1);
        cr_assert_eq(h[8], 0);
}

Test(ws, unmask_continues_across_pieces)
{
        const uint8_t m[4] = {0xa, 0xb, 0xc, 0xd};
        uint8_t data[7] = {'t', 'e', 'r', 'm', 'i', 'n', 'l'}, copy[7];
        memcpy(copy, data, 7);
        ws_unmask(copy, 7, m, 0);
        ws_unmask(copy, 3, m, 0);
        ws_unmask(copy + 3, 4, m, 3);
        cr_assert_eq(memcmp(copy, data, 7), 0);
}
