/* SPDX-License-Identifier: Apache-2.0 */
#include <criterion/criterion.h>
#include <limits.h>
#include <openssl/evp.h>
#include <signal.h>
#include <stddef.h>
#include <string.h>
#include <sys/stat.h>

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

Test(util, base64_encode)
{
        static const struct {
                const char *in, *out;
        } v[] = {
            /* RFC 4648, section 10. */
            {"", ""},
            {"f", "Zg=="},
            {"fo", "Zm8="},
            {"foo", "Zm9v"},
            {"foob", "Zm9vYg=="},
            {"fooba", "Zm9vYmE="},
            {"foobar", "Zm9vYmFy"},
        };
        for (size_t i = 0; i < ARRAY_SIZE(v); i++) {
                _cleanup_free_ char *s = base64_encode(v[i].in, strlen(v[i].in));
                cr_assert_str_eq(s, v[i].out);
        }
        static const unsigned char bin[] = {0x00, 0xff, 0xfe, 0x3e, 0x3f};
        _cleanup_free_ char *s = base64_encode(bin, sizeof(bin));
        cr_assert_str_eq(s, "AP/+Pj8=");
}

Test(util, base64_round_trip)
{
        unsigned char bin[256];
        for (size_t i = 0; i < sizeof(bin); i++)
                bin[i] = (unsigned char)(255 - i);
        for (size_t len = 0; len <= sizeof(bin); len++) {
                _cleanup_free_ char *s = base64_encode(bin, len);
                _cleanup_free_ unsigned char *out = NULL;
                size_t n = 1;
                cr_assert_eq(base64_decode(s, &out, &n), 0);
                cr_assert_eq(n, len);
                cr_assert_eq(memcmp(out, bin, len), 0);
                cr_assert_eq(out[len], 0, "the decoding is NUL-terminated");
        }
}

/* Against libcrypto's EVP blocks, which Airlock's own base64 replaced:
 * every length to 300 encoded alike; each encoding, and each with one
 * character changed to another of the alphabet (or to one outside it), read
 * back alike (EVP_DecodeBlock counts the padding's bytes: they are left off
 * here, and a character outside the alphabet fails both). */
Test(util, base64_matches_libcrypto)
{
        unsigned char bin[300];
        unsigned seed = 12345;
        static const char alpha[] =
            "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";
        for (size_t len = 0; len <= sizeof(bin); len++) {
                for (size_t i = 0; i < len; i++)
                        bin[i] = (unsigned char)((seed = seed * 1103515245u + 12345u) >> 16);
                char want[4 * (sizeof(bin) + 2) / 3 + 1];
                int wn = EVP_EncodeBlock((unsigned char *)want, bin, (int)len);
                _cleanup_free_ char *got = base64_encode(bin, len);
                cr_assert_eq(strlen(got), (size_t)wn, "length %zu", len);
                cr_assert_str_eq(got, want, "length %zu", len);
                size_t pad = (len % 3) ? 3 - len % 3 : 0;
                for (int round = 0; round < 8 && wn > 0; round++) {
                        char in[sizeof(want)];
                        memcpy(in, want, (size_t)wn + 1);
                        size_t at = (seed = seed * 1103515245u + 12345u) % (size_t)(wn - pad);
                        bool bad = round == 7;
                        in[at] = bad ? '*' : alpha[(seed >> 8) % 64];
                        unsigned char ref[sizeof(bin) + 3];
                        int rn = EVP_DecodeBlock(ref, (unsigned char *)in, wn);
                        _cleanup_free_ unsigned char *out = NULL;
                        size_t on = 0;
                        int r = base64_decode(in, &out, &on);
                        if (bad) {
                                cr_assert_lt(rn, 0, "%s", in);
                                cr_assert_lt(r, 0, "%s", in);
                                continue;
                        }
                        cr_assert_geq(rn, 0, "%s", in);
                        cr_assert_eq(r, 0, "%s", in);
                        cr_assert_eq(on, (size_t)rn - pad, "%s", in);
                        cr_assert_eq(memcmp(out, ref, on), 0, "%s", in);
                }
        }
}

Test(util, base64_decode_rejects)
{
        unsigned char *out = NULL;
        size_t n = 7;
        cr_assert_lt(base64_decode("Zg=", &out, &n), 0);
        cr_assert_lt(base64_decode("Zm9", &out, &n), 0);
        cr_assert_lt(base64_decode("Zm9v!A==", &out, &n), 0);
        cr_assert_lt(base64_decode("Zm*v", &out, &n), 0);
        cr_assert_lt(base64_decode("Zm=v", &out, &n), 0, "padding only at the end");
        cr_assert_lt(base64_decode("Z===", &out, &n), 0);
        cr_assert_lt(base64_decode("====", &out, &n), 0);
        cr_assert_lt(base64_decode("Zg==Zg==", &out, &n), 0);
        cr_assert_lt(base64_decode("Zm9v\nA==", &out, &n), 0);
        cr_assert_null(out, "failure must leave the output untouched");
        cr_assert_eq(n, 7);
}

Test(util, base64_decode_n_reads_only_its_bytes)
{
        _cleanup_free_ unsigned char *out = NULL;
        size_t n = 0;
        cr_assert_eq(base64_decode_n("Zm9vYmFyXXXX", 8, &out, &n), 0);
        cr_assert_eq(n, 6);
        cr_assert_str_eq((const char *)out, "foobar");
        char buf[9];
        base64_encode_into(buf, "fooba", 5);
        cr_assert_str_eq(buf, "Zm9vYmE=");
}

Test(util, mkdir_p)
{
        char tmp[] = "/tmp/test-util-XXXXXX";
        cr_assert_not_null(mkdtemp(tmp));
        _cleanup_free_ char *deep = xasprintf("%s/a/b/c", tmp);
        cr_assert_eq(mkdir_p(deep, 0755, 0700), 0);
        cr_assert_eq(mkdir_p(deep, 0755, 0700), 0, "existing directories are fine");
        struct stat st;
        cr_assert_eq(stat(deep, &st), 0);
        cr_assert(S_ISDIR(st.st_mode));
        mode_t mask = umask(0);
        umask(mask);
        cr_assert_eq(st.st_mode & 0777, 0700 & ~mask);
        _cleanup_free_ char *mid = xasprintf("%s/a/b", tmp);
        cr_assert_eq(stat(mid, &st), 0);
        cr_assert_eq(st.st_mode & 0777, 0755 & ~mask);

        char too_long[PATH_MAX + 8];
        memset(too_long, 'x', sizeof(too_long) - 1);
        too_long[0] = '/';
        too_long[sizeof(too_long) - 1] = '\0';
        cr_assert_eq(mkdir_p(too_long, 0700, 0700), -ENAMETOOLONG);

        static const char *const made[] = {"/a/b/c", "/a/b", "/a", ""};
        for (size_t i = 0; i < ARRAY_SIZE(made); i++) {
                _cleanup_free_ char *d = xasprintf("%s%s", tmp, made[i]);
                cr_assert_eq(rmdir(d), 0);
        }
}

Test(util, signal_parse)
{
        int sig = 0;
        cr_assert_eq(signal_parse("TERM", &sig), 0);
        cr_assert_eq(sig, SIGTERM);
        cr_assert_eq(signal_parse("SIGKILL", &sig), 0);
        cr_assert_eq(sig, SIGKILL);
        cr_assert_eq(signal_parse("9", &sig), 0);
        cr_assert_eq(sig, 9);
        cr_assert_eq(signal_parse("SIGNOPE", &sig), -EINVAL);
        cr_assert_eq(signal_parse("0", &sig), -EINVAL);
        cr_assert_eq(signal_parse("65", &sig), -EINVAL);
        cr_assert_eq(signal_parse("", &sig), -EINVAL);
        cr_assert_eq(signal_parse("term", &sig), -EINVAL);
}

Test(util, sorted_first_at_or_after)
{
        struct named {
                int n;
                const char *name;
        } v[] = {{1, "a"}, {2, "b"}, {3, "b"}, {4, "d"}};
        size_t off = offsetof(struct named, name);
        cr_assert_eq(sorted_first_at_or_after(v, 4, sizeof(*v), off, "a"), 0);
        cr_assert_eq(sorted_first_at_or_after(v, 4, sizeof(*v), off, "b"), 1, "the first of equals");
        cr_assert_eq(sorted_first_at_or_after(v, 4, sizeof(*v), off, "c"), 3);
        cr_assert_eq(sorted_first_at_or_after(v, 4, sizeof(*v), off, "e"), 4, "none: n");
        cr_assert_eq(sorted_first_at_or_after(v, 0, sizeof(*v), off, "a"), 0);
}
