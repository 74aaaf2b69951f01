/* SPDX-License-Identifier: Apache-2.0 */
/* Which names review keeps: valid UTF-8 without control characters, no "."
 * or ".." components; and hidden code points (invisible or reordering),
 * which an accept takes only when the user names them. */
#include <errno.h>
#include <string.h>

#include "review-internal.h"
#include "utf8.h"

/* Decode the UTF-8 sequence at s (n bytes left): its length, or 0 when it
 * is not valid UTF-8 (overlong, a surrogate, past U+10FFFF, cut short). */
size_t review_utf8_next(const unsigned char *s, size_t n, uint32_t *ret_cp)
{
        int k = utf8_decode_char(s, n, ret_cp);
        return k < 0 ? 0 : (size_t)k;
}

/* Code points that draw nothing, or look like a space, or make text display
 * in another order than it reads (CVE-2021-42574, "Trojan Source"): in a
 * name they make "a.txt" + U+200B look like "a.txt", or "invoice" U+202E
 * "txt.sh" look like "invoicehs.txt". */
bool review_is_hidden_codepoint(uint32_t cp)
{
        static const uint32_t ranges[][2] = {
            {0x00a0, 0x00a0},   {0x00ad, 0x00ad}, {0x034f, 0x034f},   {0x061c, 0x061c},
            {0x115f, 0x1160},   {0x1680, 0x1680}, {0x17b4, 0x17b5},   {0x180b, 0x180f},
            {0x2000, 0x200f},   {0x2028, 0x202f}, {0x205f, 0x206f},   {0x2800, 0x2800},
            {0x3000, 0x3000},   {0x3164, 0x3164}, {0xfe00, 0xfe0f},   {0xfeff, 0xfeff},
            {0xffa0, 0xffa0},   {0xfff9, 0xfffb}, {0x1bca0, 0x1bca3}, {0x1d173, 0x1d17a},
            {0xe0000, 0xe0fff},
        };
        for (size_t i = 0; i < sizeof(ranges) / sizeof(ranges[0]); i++)
                if (cp >= ranges[i][0] && cp <= ranges[i][1])
                        return true;
        return false;
}

/* Valid UTF-8 without C1 control characters (U+0080 to U+009F, which a
 * terminal may take for an escape sequence's start, as 0x9b is CSI). */
static bool utf8_valid(const unsigned char *s, size_t n)
{
        for (size_t i = 0; i < n;) {
                uint32_t cp;
                size_t len = review_utf8_next(s + i, n - i, &cp);
                if (len == 0 || (cp >= 0x80 && cp <= 0x9f))
                        return false;
                i += len;
        }
        return true;
}

/* A file name from the upper layer: printable, valid UTF-8, so that it can
 * be stored in JSON and shown in a diff. Hidden code points are allowed
 * here; the diff flags them and accept takes them only when named. */
bool review_name_valid(const char *name)
{
        size_t n = strlen(name);
        if (n == 0 || n > NAME_MAX || STREQ(name, ".") || STREQ(name, ".."))
                return false;
        for (size_t i = 0; i < n; i++)
                if ((unsigned char)name[i] < 0x20 || name[i] == 0x7f || name[i] == '/')
                        return false;
        return utf8_valid((const unsigned char *)name, n);
}

/* Where the last component of path holding a hidden code point ends (0:
 * none, or path is not valid UTF-8, as only host names can be). A request
 * takes such a path only when it names it that far. */
size_t review_hidden_end(const char *path)
{
        const unsigned char *s = (const unsigned char *)path;
        size_t n = strlen(path), end = 0;
        bool in = false;
        for (size_t i = 0; i <= n;) {
                if (i == n || s[i] == '/') {
                        if (in)
                                end = i;
                        in = false;
                        i++;
                        continue;
                }
                uint32_t cp;
                size_t len = review_utf8_next(s + i, n - i, &cp);
                if (len == 0)
                        return 0;
                in = in || review_is_hidden_codepoint(cp);
                i += len;
        }
        return end;
}

bool review_path_valid(const char *path)
{
        size_t len = strlen(path);
        if (len == 0 || len >= PATH_MAX)
                return false;
        char name[NAME_MAX + 1];
        for (const char *s = path;;) {
                const char *e = strchrnul(s, '/');
                size_t n = (size_t)(e - s);
                if (n == 0 || n > NAME_MAX)
                        return false;
                memcpy(name, s, n);
                name[n] = '\0';
                if (!review_name_valid(name))
                        return false;
                if (!*e)
                        return true;
                s = e + 1;
        }
}

bool review_id_valid(const char *id)
{
        size_t n = strlen(id);
        return n > 0 && n <= ID_MAX &&
               strspn(id, "abcdefghijklmnopqrstuvwxyz"
                          "ABCDEFGHIJKLMNOPQRSTUVWXYZ"
                          "0123456789_-") == n;
}
