/* SPDX-License-Identifier: Apache-2.0 */
/* Hand-made tar entries for the image tests, written through zlib (gzip
 * or, opened "wT", plain). */
#pragma once

#include <criterion/criterion.h>
#include <stdio.h>
#include <string.h>
#include <zlib.h>

/* One ustar header: `name` and `link` at most 99 bytes (longer ones go in a
 * pax header before it). */
static inline void image_test_header(gzFile gz, const char *name, char type, const char *link,
                                     size_t size)
{
        unsigned char h[512] = {0};
        snprintf((char *)h, 100, "%s", name);
        snprintf((char *)h + 100, 8, "%07o", 0644);
        snprintf((char *)h + 108, 8, "%07o", 0);
        snprintf((char *)h + 116, 8, "%07o", 0);
        snprintf((char *)h + 124, 12, "%011zo", size);
        snprintf((char *)h + 136, 12, "%011o", 0);
        h[156] = (unsigned char)type;
        if (link)
                snprintf((char *)h + 157, 100, "%s", link);
        memcpy(h + 257,
               "ustar\0"
               "00",
               8);
        memset(h + 148, ' ', 8);
        unsigned sum = 0;
        for (size_t i = 0; i < 512; i++)
                sum += h[i];
        snprintf((char *)h + 148, 8, "%06o", sum);
        cr_assert_eq(gzwrite(gz, h, 512), 512);
}

/* n zero bytes: an entry's data, padding or the end blocks. */
static inline void image_test_zeros(gzFile gz, size_t n)
{
        static char z[65536];
        while (n > 0) {
                size_t k = n > sizeof(z) ? sizeof(z) : n;
                cr_assert_eq(gzwrite(gz, z, (unsigned)k), (int)k);
                n -= k;
        }
}
