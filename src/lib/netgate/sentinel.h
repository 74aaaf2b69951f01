/* SPDX-License-Identifier: Apache-2.0 */
#pragma once

#include <stdbool.h>
#include <stddef.h>

#include "error.h"

/* Sentinel secrets (network.sentinels, docs/network.md): the sandbox holds
 * a placeholder, "airlock-sentinel-" and 32 random hex digits, for a
 * secret the host keeps. In a request head to one of the hosts listed for
 * it, the gate puts the secret's value where the placeholder is: in a
 * field's value as it stands, and inside the base64 of an
 * "Authorization: Basic" or "Proxy-Authorization: Basic" value (which is
 * how git and most HTTP clients send a token in a URL's user info). To any
 * other host the placeholder goes out unchanged. Bodies are not touched.
 * Internal to the network gate. */

#define NETGATE_SENTINEL_PREFIX    "airlock-sentinel-"
#define NETGATE_SENTINEL_LEN       (sizeof(NETGATE_SENTINEL_PREFIX) - 1 + 32)
#define NETGATE_SENTINEL_VALUE_MAX 4096

struct netgate_sentinel {
        char *placeholder;
        char *value;
        size_t value_len;
        char **hosts; /* "name" or "*.name" */
        size_t n_hosts;
};

struct netgate_sentinels {
        struct netgate_sentinel *v;
        size_t n;
};

/* A fresh placeholder: NETGATE_SENTINEL_LEN characters and a NUL. */
int netgate_sentinel_make(char ret[static NETGATE_SENTINEL_LEN + 1]);

/* Whether `host` (canonical) is one of `hosts`: equal, or under a "*.name". */
bool netgate_sentinel_host_listed(const struct netgate_sentinel *s, const char *host);

/* The field's value for a request to `host`: 1 and *ret (malloc'd, to be
 * wiped) when a placeholder was replaced, 0 when it goes out as it is. */
int netgate_sentinels_apply(const struct netgate_sentinels *ss, const char *host, const char *name,
                            size_t name_len, const char *value, size_t len, char **ret,
                            size_t *ret_len);

void netgate_sentinels_clear(struct netgate_sentinels *ss);
