/* SPDX-License-Identifier: Apache-2.0 */
#include <openssl/evp.h>
#include <openssl/sha.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "sha256.h"
#include "util.h"

/* Airlock's own base64 and SHA-256 (base/util.c, base/sha256.c) against
 * libcrypto's, on any bytes: the bytes encoded alike and read back; the
 * bytes read as base64 text accepted only where libcrypto reads them too,
 * and then to the same bytes; the digest alike, whole and in two pieces. */

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
        if (size > 4096)
                return 0;
        char *want = malloc(4 * ((size + 2) / 3) + 1);
        int wn = EVP_EncodeBlock((unsigned char *)want, data, (int)size);
        char *got = base64_encode(data, size);
        if (strcmp(got, want) != 0)
                abort();
        unsigned char *back = NULL;
        size_t bn = 0;
        if (base64_decode_n(got, (size_t)wn, &back, &bn) < 0 || bn != size ||
            memcmp(back, data, size) != 0)
                abort();
        free(back);
        free(got);
        free(want);

        /* As text: what Airlock reads, libcrypto reads the same. */
        unsigned char *out = NULL;
        size_t on = 0;
        if (memchr(data, '\0', size) == NULL && base64_decode_n((const char *)data, size, &out,
                                                                &on) == 0) {
                unsigned char *ref = malloc(size / 4 * 3 + 1);
                int rn = EVP_DecodeBlock(ref, data, (int)size);
                size_t pad = (size >= 1 && data[size - 1] == '=') +
                             (size >= 2 && data[size - 2] == '=');
                if (rn < 0 || (size_t)rn != on + pad || memcmp(out, ref, on) != 0)
                        abort();
                free(ref);
                free(out);
        }

        unsigned char a[SHA256_LEN], b[SHA256_LEN];
        SHA256(data, size, a);
        struct sha256 c;
        sha256_init(&c);
        size_t cut = size ? data[0] % (size + 1) : 0;
        sha256_update(&c, data, cut);
        sha256_update(&c, data + cut, size - cut);
        sha256_final(&c, b);
        if (memcmp(a, b, sizeof(a)) != 0)
                abort();
        return 0;
}
