/* SPDX-License-Identifier: Apache-2.0 */
#pragma once

#include "error.h"

/* The TLS layer of the upstream engine (upstream.h): a client context, and
 * the layer put on a connected socket. The peer's certificate is verified
 * against the host the engine resolved and checked (its name, or its IP
 * address), TLS 1.2 at least, ALPN http/1.1. Internal to the network gate. */

struct bufferevent;
struct event_base;
struct netgate_host;
struct netgate_tls;

/* A client context trusting only `ca_file`, or the system store when NULL.
 * Errors name the route `route`. */
int netgate_tls_new(const char *ca_file, const char *route, struct netgate_tls **ret,
                    struct al_error *err);
struct netgate_tls *netgate_tls_free(struct netgate_tls *t);

/* A bufferevent that runs the client handshake over `fd` (connected) and
 * owns it on success; NULL when out of memory (the caller still owns fd). */
struct bufferevent *netgate_tls_layer(const struct netgate_tls *t, struct event_base *base, int fd,
                                      const struct netgate_host *peer);

/* What the layer refused, for the answer and the record: the certificate's
 * verification error, the TLS error, or `err`. Clears the error queues. */
void netgate_tls_describe_failure(struct bufferevent *bev, int err, char *buf, size_t size);

/* Forget the layer's errors after a failed exchange; nothing for a plain
 * bufferevent. */
void netgate_tls_clear_errors(struct bufferevent *bev);
