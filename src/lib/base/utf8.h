/* SPDX-License-Identifier: Apache-2.0 */
#pragma once

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

/* The one UTF-8 decoder: well-formed only (no overlong forms, no surrogates,
 * nothing past U+10FFFF, no sequence cut short). */

/* Decode the sequence at s (n > 0 bytes left): its length (1 to 4) with the
 * code point in *ret_cp, or -EILSEQ. */
int utf8_decode_char(const unsigned char *s, size_t n, uint32_t *ret_cp);

/* Whether the NUL-terminated s is well-formed UTF-8. */
bool utf8_str_valid(const char *s);
