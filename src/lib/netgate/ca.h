/* SPDX-License-Identifier: Apache-2.0 */
#pragma once

#include <stdbool.h>
#include <stddef.h>

#include "error.h"

/* The sandbox's own certificate authority, for the hosts whose TLS the gate
 * terminates (a route with "terminate": true, docs/routes.md). It is made
 * on the host when the sandbox starts: an ECDSA P-256 key that lives only
 * in this process's memory, and a certificate valid for a day, for this
 * sandbox only (its id is in the subject). The sandbox gets the certificate
 * (a CA bundle and the usual variables), never the key. For each
 * terminated host the gate serves a leaf for that name signed by it. */

struct netgate_ca;
typedef struct ssl_ctx_st SSL_CTX;

int netgate_ca_new(const char *sandbox_id, struct netgate_ca **ret, struct al_error *err);
struct netgate_ca *netgate_ca_free(struct netgate_ca *ca);

/* The certificate, PEM; NUL-terminated, valid while `ca` is. */
const char *netgate_ca_cert_pem(const struct netgate_ca *ca);

/* A TLS server context presenting a fresh leaf for `host` (a DNS name or an
 * IP literal) signed by the CA: TLS 1.2 or later, ALPN http/1.1 only. The
 * caller owns it (SSL_CTX_free). */
int netgate_ca_server_ctx(const struct netgate_ca *ca, const char *host, SSL_CTX **ret,
                          struct al_error *err);

/* Write `host_bundle` (the host's CA bundle; skipped when it does not
 * exist) followed by the CA's certificate to a new file in `dir`, mode
 * 0644 (it holds certificates only). *ret_path is the caller's to unlink
 * and free. */
int netgate_ca_write_bundle(const struct netgate_ca *ca, const char *host_bundle, const char *dir,
                            char **ret_path, struct al_error *err);
