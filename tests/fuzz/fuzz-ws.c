/* SPDX-License-Identifier: Apache-2.0 */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "ws.h"

/* The terminal stream's reader (src/daemon/http/pty.c, process_frames): a
 * client's bytes parsed frame after frame, each payload unmasked in place;
 * a refusal ends the stream. A frame must lie inside the bytes given, and a
 * refusal must be a close code the stream may send. */

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
        uint8_t *buf = malloc(size ? size : 1);
        if (!buf)
                return 0;
        memcpy(buf, data, size);
        size_t off = 0;
        for (;;) {
                struct ws_frame f;
                int r = ws_parse_client_frame(buf + off, size - off, 64 * 1024, &f);
                if (r == 0)
                        break;
                if (r < 0) {
                        if (r != -WS_CLOSE_PROTOCOL && r != -WS_CLOSE_TOO_BIG)
                                abort();
                        break;
                }
                if (f.header_len + f.len > size - off || f.len > 64 * 1024)
                        abort();
                ws_unmask(buf + off + f.header_len, (size_t)f.len, f.mask, 0);
                off += f.header_len + (size_t)f.len;
        }
        free(buf);
        return 0;
}
