/* SPDX-License-Identifier: Apache-2.0 */
#pragma once

/* Shared between secrets.c (the secrets file and templating) and redact.c
 * (the redaction engine); not for other modules, which use secrets.h. */

#include <stddef.h>

/* Growable byte buffer with a hard limit. */
struct sbuf {
        char *data;
        size_t len, cap, max;
};

/* secrets.c */
int sbuf_append(struct sbuf *b, const char *p, size_t n);
void sbuf_wipe(struct sbuf *b);
char *sbuf_take(struct sbuf *b, size_t *ret_len);
