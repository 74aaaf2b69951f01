/* SPDX-License-Identifier: Apache-2.0 */
#include <errno.h>
#include <string.h>

#include "utf8.h"

int utf8_decode_char(const unsigned char *s, size_t n, uint32_t *ret_cp)
{
        unsigned char c = s[0];
        size_t len;
        uint32_t cp, min;
        if (c < 0x80) {
                *ret_cp = c;
                return 1;
        } else if ((c & 0xe0) == 0xc0) {
                len = 2, cp = c & 0x1f, min = 0x80;
        } else if ((c & 0xf0) == 0xe0) {
                len = 3, cp = c & 0x0f, min = 0x800;
        } else if ((c & 0xf8) == 0xf0) {
                len = 4, cp = c & 0x07, min = 0x10000;
        } else
                return -EILSEQ;
        if (len > n)
                return -EILSEQ;
        for (size_t i = 1; i < len; i++) {
                if ((s[i] & 0xc0) != 0x80)
                        return -EILSEQ;
                cp = cp << 6 | (s[i] & 0x3f);
        }
        if (cp < min || cp > 0x10ffff || (cp >= 0xd800 && cp <= 0xdfff))
                return -EILSEQ;
        *ret_cp = cp;
        return (int)len;
}

bool utf8_str_valid(const char *s)
{
        const unsigned char *u = (const unsigned char *)s;
        size_t n = strlen(s);
        while (n > 0) {
                uint32_t cp;
                int k = utf8_decode_char(u, n, &cp);
                if (k < 0)
                        return false;
                u += k;
                n -= (size_t)k;
        }
        return true;
}
