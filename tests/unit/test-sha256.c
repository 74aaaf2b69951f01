/* SPDX-License-Identifier: Apache-2.0 */
#include <criterion/criterion.h>
#define OPENSSL_SUPPRESS_DEPRECATED
#include <openssl/sha.h>
#include <stdlib.h>
#include <string.h>

#include "sha256.h"

TestSuite(sha256, .timeout = 30);

static void expect_hex(const void *buf, size_t len, const char *want)
{
        char hex[SHA256_HEX_LEN + 1];
        sha256_hex(buf, len, hex);
        cr_assert_str_eq(hex, want, "length %zu", len);
}

/* The examples of FIPS 180-4 (NIST's SHA256.pdf and SHA2_Additional.pdf). */
Test(sha256, fips_examples)
{
        expect_hex("", 0, "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855");
        expect_hex("abc", 3, "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad");
        const char *two = "abcdbcdecdefdefgefghfghighijhijkijkljklmklmnlmnomnopnopq";
        expect_hex(two, strlen(two),
                   "248d6a61d20638b8e5c026930c3e6039a33ce45964ff2167f6ecedd419db06c1");
        size_t n = 1000000;
        char *a = malloc(n);
        cr_assert_not_null(a);
        memset(a, 'a', n);
        expect_hex(a, n, "cdc76e5c9914fb9281a1c7e284d73e67f1809a48a497200e046d39ccc7112cd0");
        free(a);
}

/* Every length across the padding's edges (55, 56, 63, 64 bytes and their
 * multiples), fed whole and in pieces of every size, against libcrypto's. */
Test(sha256, matches_libcrypto_at_every_length_and_split)
{
        unsigned char buf[300], want[SHA256_LEN], got[SHA256_LEN];
        for (size_t i = 0; i < sizeof(buf); i++)
                buf[i] = (unsigned char)(i * 131 + 7);
        for (size_t len = 0; len <= sizeof(buf); len++) {
                SHA256(buf, len, want);
                sha256(buf, len, got);
                cr_assert_arr_eq(got, want, SHA256_LEN, "one call, length %zu", len);
                for (size_t piece = 1; piece <= 70; piece += 23) {
                        struct sha256 c;
                        sha256_init(&c);
                        for (size_t o = 0; o < len; o += piece)
                                sha256_update(&c, buf + o, len - o < piece ? len - o : piece);
                        sha256_final(&c, got);
                        cr_assert_arr_eq(got, want, SHA256_LEN, "length %zu in pieces of %zu",
                                         len, piece);
                }
        }
}
