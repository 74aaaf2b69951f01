/* SPDX-License-Identifier: Apache-2.0 */
/* Hostile archives against the one tar reader (src/lib/base/tar.c): an
 * entry's size must never let a later header come out of its data. */
#include <criterion/criterion.h>
#include <errno.h>
#include <stdio.h>
#include <string.h>

#include "tar.h"
#include "util.h"

TestSuite(tar_attacks, .timeout = 10);

struct ar {
        unsigned char buf[16 * TAR_BLOCK];
        size_t len;
};

static void checksum(unsigned char *h)
{
        memset(h + 148, ' ', 8);
        unsigned sum = 0;
        for (size_t i = 0; i < TAR_BLOCK; i++)
                sum += h[i];
        snprintf((char *)h + 148, 8, "%06o", sum);
}

static unsigned char *header(struct ar *a, const char *name, char type, unsigned long long size)
{
        unsigned char *h = a->buf + a->len;
        memset(h, 0, TAR_BLOCK);
        memcpy(h, name, strnlen(name, 100));
        snprintf((char *)h + 100, 8, "%07o", 0644);
        snprintf((char *)h + 124, 12, "%011llo", size);
        h[156] = (unsigned char)type;
        memcpy(h + 257, "ustar", 6);
        checksum(h);
        a->len += TAR_BLOCK;
        return h;
}

/* A pax header whose size record is `size`, then entry "a" whose data
 * block is a whole header of its own ("hidden"), then the end. */
static void build(struct ar *a, const char *size)
{
        a->len = 0;
        char rec[64];
        int n = snprintf(rec, sizeof(rec), "xx size=%s\n", size);
        /* The record's length counts its own digits. */
        snprintf(rec, sizeof(rec), "%d size=%s\n", n, size);
        header(a, "pax", 'x', strlen(rec));
        memcpy(a->buf + a->len, rec, strlen(rec));
        a->len += TAR_BLOCK;
        header(a, "a", '0', 0);
        header(a, "hidden", '0', 0);
        memset(a->buf + a->len, 0, 2 * TAR_BLOCK);
        a->len += 2 * TAR_BLOCK;
}

static void check_no_hidden(const char *size)
{
        static struct ar a;
        build(&a, size);
        struct tar_mem m = {.data = a.buf, .len = a.len};
        struct al_error err = {0};
        struct tar_reader r = {
            .read = tar_mem_read, .src = &m, .what = "t", .err = &err, .ext_max = 4096};
        struct tar_entry e = {0};
        int k;
        /* The caller passes over each entry's data without reading it. */
        while ((k = tar_next(&r, &e)) == 1) {
                cr_assert_str_neq(e.name, "hidden",
                                  "a header inside an entry's data (size %s) was read as "
                                  "the next entry",
                                  size);
                tar_entry_clear(&e);
        }
        cr_assert_lt(k, 0, "an entry of %s bytes in a 4 KiB archive", size);
        cr_assert(strstr(err.msg, "size") || strstr(err.msg, "ends inside"), "%s", err.msg);
}

Test(tar_attacks, size_wrapping_with_its_padding)
{
        check_no_hidden("18446744073709551615"); /* 2^64 - 1: padding 1 wraps to 0 */
}

Test(tar_attacks, size_wrapping_to_one_block)
{
        check_no_hidden("18446744073709551104"); /* 2^64 - 512: ends exactly at 2^64 */
}
