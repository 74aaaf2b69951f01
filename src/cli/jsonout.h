/* SPDX-License-Identifier: Apache-2.0 */
#pragma once

#include <jansson.h>

/* Machine-readable answers of the CLI's --json modes. CLI code: it prints
 * (the library never does). */

/* A JSON string of s. Messages quote paths and URLs, which need not be
 * UTF-8: such bytes become '?' rather than lose the message. */
json_t *json_text(const char *s);

/* Print o as one line on stdout, flush, and free o. */
void json_line(json_t *o);
