/* SPDX-License-Identifier: Apache-2.0 */
#include <criterion/criterion.h>

#include "util.h"

Test(util, parse_size)
{
        uint64_t v = 0;
        cr_assert_eq(parse_size("1024", &v), 0);
        cr_assert_eq(v, 1024);
        cr_assert_eq(parse_size("512M", &v), 0);
        cr_assert_eq(v, 512ULL << 20);
        cr_assert_eq(parse_size("1G", &v), 0);
        cr_assert_eq(v, 1ULL << 30);
        cr_assert_eq(parse_size("64k", &v), 0);
        cr_assert_eq(v, 64ULL << 10);
        cr_assert_eq(parse_size("1.5G", &v), 0);
        cr_assert_eq(v, 3ULL << 29);
        cr_assert_eq(parse_size("2MiB", &v), 0);
        cr_assert_eq(v, 2ULL << 20);
        cr_assert_eq(parse_size("2MB", &v), 0);
        cr_assert_eq(v, 2ULL << 20);
}

Test(util, parse_size_rejects)
{
        uint64_t v = 7;
        cr_assert_lt(parse_size("", &v), 0);
        cr_assert_lt(parse_size("-1", &v), 0);
        cr_assert_lt(parse_size("12X", &v), 0);
        cr_assert_lt(parse_size("M", &v), 0);
        cr_assert_lt(parse_size("1.5", &v), 0);
        cr_assert_lt(parse_size(" 5", &v), 0);
        cr_assert_lt(parse_size("5 M", &v), 0);
        cr_assert_lt(parse_size("99999999999999999999", &v), 0);
        cr_assert_lt(parse_size("17179869184G", &v), 0);
        cr_assert_eq(v, 7, "failure must leave the output untouched");
}

Test(util, parse_duration)
{
        uint64_t v = 0;
        cr_assert_eq(parse_duration_ms("1", &v), 0);
        cr_assert_eq(v, 1000);
        cr_assert_eq(parse_duration_ms("0.5", &v), 0);
        cr_assert_eq(v, 500);
        cr_assert_eq(parse_duration_ms("5m", &v), 0);
        cr_assert_eq(v, 300000);
        cr_assert_eq(parse_duration_ms("250ms", &v), 0);
        cr_assert_eq(v, 250);
        cr_assert_lt(parse_duration_ms("5d", &v), 0);
        cr_assert_lt(parse_duration_ms("-1", &v), 0);
}

Test(util, safe_atou64)
{
        uint64_t v = 3;
        cr_assert_eq(safe_atou64("18446744073709551615", &v), 0);
        cr_assert_eq(v, UINT64_MAX);
        cr_assert_lt(safe_atou64("18446744073709551616", &v), 0);
        cr_assert_lt(safe_atou64("-1", &v), 0);
        cr_assert_lt(safe_atou64("1x", &v), 0);
        cr_assert_lt(safe_atou64("", &v), 0);
        int i = 0;
        cr_assert_eq(safe_atoi("-42", &i), 0);
        cr_assert_eq(i, -42);
        cr_assert_lt(safe_atoi("4294967296", &i), 0);
}
