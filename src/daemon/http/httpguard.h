/* SPDX-License-Identifier: Apache-2.0 */
#pragma once

#include <event2/http.h>
#include <stdbool.h>
#include <stdint.h>

#include "daemon.h"
#include "error.h"

struct evconnlistener;

/* The connections of the API (httpguard.c): every byte of a request head is
 * read by a strict HTTP/1.1 parser before libevent's, which sees only heads
 * that passed (a refused one becomes a request answered with the reason);
 * a request has a deadline from its first byte to the end of its body;
 * connections are capped in total and per peer; accept() backs off when
 * the daemon is out of file descriptors. */
struct http_limits {
        uint64_t request_timeout_ms;   /* head and body, from the first byte */
        uint64_t max_connections;      /* open at once; 0: no maximum */
        uint64_t max_peer_connections; /* per uid on the unix socket, per address on TCP */
};
#define HTTP_REQUEST_TIMEOUT_MS   30000
#define HTTP_MAX_CONNECTIONS      4096
#define HTTP_MAX_PEER_CONNECTIONS 512

int http_guard_setup(struct daemon *d, const struct http_limits *lim, struct al_error *err);
/* Back off on this listener's accept() errors instead of spinning. */
void http_guard_listener(struct evconnlistener *lev);
/* True, with the answer sent, when the connection of `req` is refused: a
 * head that broke the rules, or a connection past a cap. */
bool http_guard_refused(struct daemon *d, struct evhttp_request *req);
void http_guard_shutdown(void);
/* The connection of `req` switched protocols (a WebSocket, http/pty.c): its
 * bytes are no longer HTTP heads, so the guard passes them through untouched
 * and drops its request deadline; whoever took the connection over bounds
 * what it reads and how long it stays. */
void http_guard_upgraded(struct evhttp_request *req);
