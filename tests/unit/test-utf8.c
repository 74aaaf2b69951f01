/* SPDX-License-Identifier: Apache-2.0 */
#include <criterion/criterion.h>
#include <errno.h>
#include <string.h>

#include "utf8.h"

TestSuite(utf8, .timeout = 10);

static int decode(const char *s, uint32_t *cp)
{
        return utf8_decode_char((const unsigned char *)s, strlen(s), cp);
}

Test(utf8, well_formed)
{
        uint32_t cp;
        cr_assert_eq(decode("a", &cp), 1);
        cr_assert_eq(cp, 'a');
        cr_assert_eq(decode("\xc3\xa9", &cp), 2);
        cr_assert_eq(cp, 0xe9);
        cr_assert_eq(decode("\xe2\x80\x8b", &cp), 3);
        cr_assert_eq(cp, 0x200b);
        cr_assert_eq(decode("\xf4\x8f\xbf\xbf", &cp), 4);
        cr_assert_eq(cp, 0x10ffff);
        cr_assert(utf8_str_valid(""));
        cr_assert(utf8_str_valid("h\xc3\xa9llo \xf0\x9f\x98\x80"));
}

Test(utf8, ill_formed)
{
        uint32_t cp;
        cr_assert_eq(decode("\xc0\xaf", &cp), -EILSEQ);         /* overlong '/' */
        cr_assert_eq(decode("\xe0\x80\xaf", &cp), -EILSEQ);     /* overlong */
        cr_assert_eq(decode("\xed\xa0\x80", &cp), -EILSEQ);     /* surrogate */
        cr_assert_eq(decode("\xf4\x90\x80\x80", &cp), -EILSEQ); /* past U+10FFFF */
        cr_assert_eq(decode("\xf8\x88\x80\x80\x80", &cp), -EILSEQ);
        cr_assert_eq(decode("\x80", &cp), -EILSEQ);
        cr_assert_eq(decode("\xe2\x80", &cp), -EILSEQ); /* cut short */
        cr_assert_eq(utf8_decode_char((const unsigned char *)"\xc3\xa9", 1, &cp), -EILSEQ);
        cr_assert(!utf8_str_valid("ok\xc3"));
        cr_assert(!utf8_str_valid("\xed\xbf\xbf"));
        cr_assert(!utf8_str_valid("a\xffz"));
}
