/* SPDX-License-Identifier: Apache-2.0 */
#pragma once

/* SHA-256 (FIPS 180-4), Airlock's one engine for it: the audit chain, tool
 * call records, gitguard's quarantine and image digests. Its own, so that a
 * program which hashes but does not speak TLS does not link libcrypto, whose
 * relocations every start of `airlock` pays (docs/internals/spawn.md). */

#include <stddef.h>
#include <stdint.h>

#define SHA256_LEN 32
#define SHA256_HEX_LEN 64

struct sha256 {
        uint32_t h[8];
        uint64_t bytes;
        unsigned char block[64];
        size_t used;
};

void sha256_init(struct sha256 *c);
void sha256_update(struct sha256 *c, const void *buf, size_t len);
void sha256_final(struct sha256 *c, unsigned char ret[static SHA256_LEN]);
/* The digest of buf in one call. */
void sha256(const void *buf, size_t len, unsigned char ret[static SHA256_LEN]);
/* The digest of buf as 64 lower-case hex digits and a NUL. */
void sha256_hex(const void *buf, size_t len, char ret[static SHA256_HEX_LEN + 1]);
