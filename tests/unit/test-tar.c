/* SPDX-License-Identifier: Apache-2.0 */
/* The one tar reader (src/lib/base/tar.c): what image layers and the files
 * API both read with, each with its own policy on top. */
#include <criterion/criterion.h>
#include <errno.h>
#include <stdio.h>
#include <string.h>

#include "tar.h"
#include "util.h"

TestSuite(tar, .timeout = 10);

struct ar {
        unsigned char buf[64 * TAR_BLOCK];
        size_t len;
};

static void put_octal(unsigned char *f, size_t n, unsigned long long v)
{
        snprintf((char *)f, n, "%0*llo", (int)(n - 1), v);
}

static void checksum(unsigned char *h)
{
        memset(h + 148, ' ', 8);
        unsigned sum = 0;
        for (size_t i = 0; i < TAR_BLOCK; i++)
                sum += h[i];
        snprintf((char *)h + 148, 8, "%06o", sum);
}

/* One header and its data, padded. */
static void add(struct ar *a, const char *name, char type, const char *data, size_t size)
{
        unsigned char *h = a->buf + a->len;
        memset(h, 0, TAR_BLOCK);
        memcpy(h, name, strnlen(name, 100));
        put_octal(h + 100, 8, 0644);
        put_octal(h + 124, 12, size);
        h[156] = (unsigned char)type;
        memcpy(h + 257, "ustar", 6);
        checksum(h);
        a->len += TAR_BLOCK;
        if (data)
                memcpy(a->buf + a->len, data, size);
        a->len += (size + TAR_BLOCK - 1) / TAR_BLOCK * TAR_BLOCK;
}

static void end(struct ar *a)
{
        memset(a->buf + a->len, 0, 2 * TAR_BLOCK);
        a->len += 2 * TAR_BLOCK;
}

struct read {
        struct tar_mem m;
        struct tar_reader r;
        struct al_error err;
};

static void start(struct read *rd, struct ar *a, bool end_optional)
{
        *rd = (struct read){.m = {.data = a->buf, .len = a->len}};
        rd->r = (struct tar_reader){.read = tar_mem_read,
                                    .src = &rd->m,
                                    .what = "t",
                                    .err = &rd->err,
                                    .ext_max = 4096,
                                    .end_optional = end_optional};
}

Test(tar, entries_names_and_data)
{
        static struct ar a;
        a.len = 0;
        add(&a, "dir/", '5', NULL, 0);
        add(&a, "dir/file", '0', "hello", 5);
        /* A pax path and size for the next entry only. */
        char rec[64];
        int n = snprintf(rec, sizeof(rec), "%d path=pax/long/name\n", 22);
        add(&a, "PaxHeader", 'x', rec, (size_t)n);
        add(&a, "short", '0', "abc", 3);
        /* A GNU long name and long link. */
        add(&a, "././@LongLink", 'L', "gnu/long\0", 9);
        add(&a, "././@LongLink", 'K', "target/of/link", 14);
        add(&a, "x", '2', NULL, 0);
        end(&a);

        struct read rd;
        start(&rd, &a, false);
        struct tar_entry e = {0};
        cr_assert_eq(tar_next(&rd.r, &e), 1);
        cr_assert_str_eq(e.name, "dir/");
        cr_assert_eq(e.type, '5');
        tar_entry_clear(&e);
        cr_assert_eq(tar_next(&rd.r, &e), 1);
        cr_assert_str_eq(e.name, "dir/file");
        char buf[8] = {0};
        cr_assert_eq(tar_data(&rd.r, buf, 5), 0);
        cr_assert_str_eq(buf, "hello");
        cr_assert_lt(tar_data(&rd.r, buf, 1), 0, "read past its data");
        tar_entry_clear(&e);
        cr_assert_eq(tar_next(&rd.r, &e), 1);
        cr_assert_str_eq(e.name, "pax/long/name");
        cr_assert_eq(e.size, 3);
        tar_entry_clear(&e);
        cr_assert_eq(tar_next(&rd.r, &e), 1);
        cr_assert_str_eq(e.name, "gnu/long");
        cr_assert_str_eq(e.link, "target/of/link");
        cr_assert_eq(e.type, '2');
        tar_entry_clear(&e);
        cr_assert_eq(tar_next(&rd.r, &e), 0);
}

Test(tar, refusals_have_messages)
{
        static struct ar a;
        struct read rd;
        struct tar_entry e = {0};

        /* A bad checksum. */
        a.len = 0;
        add(&a, "f", '0', "x", 1);
        a.buf[0] = 'g';
        end(&a);
        start(&rd, &a, false);
        cr_assert_eq(tar_next(&rd.r, &e), -EINVAL);
        cr_assert(strstr(rd.err.msg, "checksum"), "%s", rd.err.msg);

        /* Data cut short. */
        a.len = 0;
        add(&a, "f", '0', NULL, 4096);
        a.len = TAR_BLOCK + 100;
        start(&rd, &a, true);
        cr_assert_eq(tar_next(&rd.r, &e), 1);
        tar_entry_clear(&e);
        cr_assert_lt(tar_next(&rd.r, &e), 0);
        cr_assert(strstr(rd.err.msg, "ends inside"), "%s", rd.err.msg);

        /* No end blocks: an error unless the user takes it. */
        a.len = 0;
        add(&a, "f", '0', "x", 1);
        start(&rd, &a, false);
        cr_assert_eq(tar_next(&rd.r, &e), 1);
        tar_entry_clear(&e);
        cr_assert_lt(tar_next(&rd.r, &e), 0);
        cr_assert(strstr(rd.err.msg, "end-of-archive"), "%s", rd.err.msg);
        start(&rd, &a, true);
        cr_assert_eq(tar_next(&rd.r, &e), 1);
        tar_entry_clear(&e);
        cr_assert_eq(tar_next(&rd.r, &e), 0);

        /* An extended header past the bound, a pax name with a NUL, a size
         * in base-256. */
        a.len = 0;
        add(&a, "big", 'x', NULL, 8192);
        end(&a);
        start(&rd, &a, false);
        cr_assert_lt(tar_next(&rd.r, &e), 0);
        cr_assert(strstr(rd.err.msg, "extended header"), "%s", rd.err.msg);

        a.len = 0;
        add(&a, "PaxHeader", 'x', "12 path=a\0b\n", 12);
        add(&a, "f", '0', "x", 1);
        end(&a);
        start(&rd, &a, false);
        cr_assert_lt(tar_next(&rd.r, &e), 0);
        cr_assert(strstr(rd.err.msg, "pax"), "%s", rd.err.msg);

        a.len = 0;
        add(&a, "f", '0', "x", 1);
        a.buf[124] = 0x80;
        checksum(a.buf);
        end(&a);
        start(&rd, &a, false);
        cr_assert_lt(tar_next(&rd.r, &e), 0);
        cr_assert(strstr(rd.err.msg, "size or mode"), "%s", rd.err.msg);

        /* A link's size field carries no data (POSIX): the next header is
         * read where it is. */
        a.len = 0;
        add(&a, "l", '2', NULL, 0);
        put_octal(a.buf + 124, 12, 1024);
        checksum(a.buf);
        add(&a, "f", '0', "x", 1);
        end(&a);
        start(&rd, &a, false);
        cr_assert_eq(tar_next(&rd.r, &e), 1);
        tar_entry_clear(&e);
        cr_assert_eq(tar_next(&rd.r, &e), 1, "%s", rd.err.msg);
        cr_assert_str_eq(e.name, "f");
        tar_entry_clear(&e);
}
