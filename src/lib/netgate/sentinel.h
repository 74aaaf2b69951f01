/* SPDX-License-Identifier: Apache-2.0 */
#pragma once

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "error.h"

/* Sentinel secrets (network.sentinels, docs/network.md): the sandbox holds
 * a placeholder, "airlock-sentinel-" and 32 random hex digits, for a
 * secret the host keeps. In a request head to one of the hosts listed for
 * it, the gate puts the secret's value where the placeholder is: in a
 * field's value as it stands, and inside the base64 of an
 * "Authorization: Basic" or "Proxy-Authorization: Basic" value (which is
 * how git and most HTTP clients send a token in a URL's user info). To any
 * other host the placeholder goes out unchanged. Bodies are not touched.
 * Only into TLS the gate verifies upstream, or to the host's own loopback
 * (cleartext.c): plain HTTP that would carry the value elsewhere is
 * refused (cleartext_secret) unless the sentinel's "cleartext" allows it.
 * Internal to the network gate. */

#define NETGATE_SENTINEL_PREFIX    "airlock-sentinel-"
#define NETGATE_SENTINEL_LEN       (sizeof(NETGATE_SENTINEL_PREFIX) - 1 + 32)
#define NETGATE_SENTINEL_VALUE_MAX 4096

struct netgate_sentinel {
        char *env; /* the sentinel's variable: what its records name */
        char *placeholder;
        char *value;
        size_t value_len;
        char **hosts; /* "name" or "*.name" */
        size_t n_hosts;
        /* Plain HTTP off the host may carry the value: to every listed
         * host (cleartext), or to these "HOST:PORT" only. */
        bool cleartext;
        char **cleartext_at;
        size_t n_cleartext_at;
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

/* Whether plain HTTP to `host`:`port` may carry s's value (its
 * "cleartext" entry). */
bool netgate_sentinel_cleartext_ok(const struct netgate_sentinel *s, const char *host,
                                   uint16_t port);

/* The first sentinel whose value a head to `host`:`port` would carry (a
 * placeholder listed for the host, in a field or a Basic credential) but
 * may not carry in plain HTTP; NULL when none. Fields `dropped` says are
 * not passed on are not looked at (NULL: every field is). */
struct netgate_http_head;
typedef bool (*netgate_field_dropped_fn)(const void *ud, const struct netgate_http_head *h,
                                         const char *name, size_t len);
const struct netgate_sentinel *
netgate_sentinels_cleartext_refused(const struct netgate_sentinels *ss, const char *host,
                                    uint16_t port, const struct netgate_http_head *h,
                                    netgate_field_dropped_fn dropped, const void *ud);

void netgate_sentinels_clear(struct netgate_sentinels *ss);
