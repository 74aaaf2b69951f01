/* SPDX-License-Identifier: Apache-2.0 */
#include <errno.h>
#include <openssl/sha.h>
#include <string.h>

#include "util.h"
#include "ws.h"

static const char ws_guid[] = "258EAFA5-E914-47DA-95CA-C5AB0DC85B11";

int ws_accept_key(const char *key, char out[29])
{
        _cleanup_free_ unsigned char *raw = NULL;
        size_t n = 0;
        if (!key || strlen(key) != 24 || base64_decode(key, &raw, &n) < 0 || n != 16)
                return -EINVAL;
        char buf[24 + sizeof(ws_guid)];
        memcpy(buf, key, 24);
        memcpy(buf + 24, ws_guid, sizeof(ws_guid) - 1);
        unsigned char digest[SHA_DIGEST_LENGTH];
        if (!SHA1((const unsigned char *)buf, 24 + sizeof(ws_guid) - 1, digest))
                return -EIO;
        _cleanup_free_ char *b64 = base64_encode(digest, sizeof(digest));
        if (!b64 || strlen(b64) != 28)
                return -EINVAL;
        memcpy(out, b64, 29);
        return 0;
}

static int parse_frame(const uint8_t *buf, size_t len, uint64_t max_payload, bool from_client,
                       struct ws_frame *f)
{
        if (len < 2)
                return 0;
        uint8_t b0 = buf[0], b1 = buf[1];
        bool fin = b0 & 0x80;
        uint8_t op = b0 & 0x0f;
        /* No extension was negotiated: the reserved bits must be clear. */
        if (b0 & 0x70)
                return -WS_CLOSE_PROTOCOL;
        switch (op) {
        case WS_CONT:
        case WS_TEXT:
        case WS_BINARY:
                break;
        case WS_CLOSE:
        case WS_PING:
        case WS_PONG:
                if (!fin || (b1 & 0x7f) > 125)
                        return -WS_CLOSE_PROTOCOL;
                break;
        default:
                return -WS_CLOSE_PROTOCOL;
        }
        /* Every frame from a client is masked, none from a server
         * (RFC 6455 5.1). */
        if (!(b1 & 0x80) != !from_client)
                return -WS_CLOSE_PROTOCOL;
        uint64_t plen = b1 & 0x7f;
        size_t hl = 2;
        if (plen == 126) {
                if (len < 4)
                        return 0;
                plen = (uint64_t)buf[2] << 8 | buf[3];
                hl = 4;
                if (plen < 126)
                        return -WS_CLOSE_PROTOCOL;
        } else if (plen == 127) {
                if (len < 10)
                        return 0;
                plen = 0;
                for (int i = 0; i < 8; i++)
                        plen = plen << 8 | buf[2 + i];
                hl = 10;
                if (plen < 65536 || plen >> 63)
                        return -WS_CLOSE_PROTOCOL;
        }
        if (plen > max_payload)
                return -WS_CLOSE_TOO_BIG;
        memset(f->mask, 0, sizeof(f->mask));
        if (from_client) {
                if (len < hl + 4)
                        return 0;
                memcpy(f->mask, buf + hl, 4);
                hl += 4;
        }
        if (len - hl < plen)
                return 0;
        f->fin = fin;
        f->opcode = op;
        f->len = plen;
        f->header_len = hl;
        return 1;
}

int ws_parse_client_frame(const uint8_t *buf, size_t len, uint64_t max_payload, struct ws_frame *f)
{
        return parse_frame(buf, len, max_payload, true, f);
}

int ws_parse_server_frame(const uint8_t *buf, size_t len, uint64_t max_payload, struct ws_frame *f)
{
        return parse_frame(buf, len, max_payload, false, f);
}

size_t ws_client_header(uint8_t hdr[14], uint8_t opcode, uint64_t len, const uint8_t mask[4])
{
        size_t hl = ws_server_header(hdr, opcode, len);
        hdr[1] |= 0x80;
        memcpy(hdr + hl, mask, 4);
        return hl + 4;
}

void ws_unmask(uint8_t *p, size_t n, const uint8_t mask[4], uint64_t offset)
{
        for (size_t i = 0; i < n; i++)
                p[i] ^= mask[(offset + i) & 3];
}

size_t ws_server_header(uint8_t hdr[10], uint8_t opcode, uint64_t len)
{
        hdr[0] = 0x80 | (opcode & 0x0f);
        if (len < 126) {
                hdr[1] = (uint8_t)len;
                return 2;
        }
        if (len < 65536) {
                hdr[1] = 126;
                hdr[2] = (uint8_t)(len >> 8);
                hdr[3] = (uint8_t)len;
                return 4;
        }
        hdr[1] = 127;
        for (int i = 0; i < 8; i++)
                hdr[2 + i] = (uint8_t)(len >> (56 - 8 * i));
        return 10;
}
