/* SPDX-License-Identifier: Apache-2.0 */
#pragma once

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "netgate/addr.h"
#include "netgate/exchange.h"
#include "netgate/upstream.h"

/* The gate's HTTP client: one sandbox connection (the downstream) served
 * through one upstream connection at a time. The HTTP proxy, CONNECT and
 * SOCKS5 (proxy.c) and the routes (route.c) are front-ends over it; they
 * decide each request, write its upstream head and record it. This layer
 * owns the rest, once:
 *
 *   callbacks  both sides' bufferevent callbacks and the engine's ops
 *   upstream   opened through the engine (upstream.h; TLS is the engine's
 *              optional layer), kept after a response for the next
 *              request to the same origin (host, port, TLS layer and the
 *              front-end's key), idle for NETGATE_IDLE_UP_TIMEOUT_S at most
 *   retry      a body-less request on a kept connection that the upstream
 *              closed before answering is sent once more, on a fresh
 *              connection to the same checked address
 *   response   the exchange (exchange.h) relays the request body and the
 *              upstream's response head and body
 *   closing    the gate's own answer, then the linger before the close
 *
 * Internal to the network gate. */

struct bufferevent;
struct evbuffer;
struct netgate;
struct netgate_tls;

enum netgate_client_state {
        NETGATE_CLIENT_HEAD,       /* waiting for a request: ops->read */
        NETGATE_CLIENT_CONNECTING, /* the engine resolves, checks, connects */
        NETGATE_CLIENT_EXCHANGE,   /* a request and its response in flight */
        NETGATE_CLIENT_TUNNEL,     /* both sides handed to ops->tunnel */
        NETGATE_CLIENT_CLOSING,    /* answered; lingering before the close */
};

struct netgate_client_ops {
        /* Bytes from the sandbox while a request is awaited. */
        void (*read)(void *ud);
        /* Append the upstream request head to `out`. Called at each send:
         * a retry sends it again. */
        void (*write_head)(void *ud, struct evbuffer *out);
        /* An answer of the upstream's name is private (cl->addr), `range`
         * the range it is in. Nothing was connected. */
        void (*refused)(void *ud, const char *range);
        /* The network did not deliver before a response began: the engine's
         * reasons (upstream.h), or "upstream_failed" with the errno
         * (ECONNRESET when the upstream just closed) for an upstream that
         * failed the exchange before its response. */
        void (*failed)(void *ud, const char *reason, int err, const char *detail);
        /* The response is complete: record it. The client then keeps or
         * drops the upstream and reads the next request, or closes. */
        void (*done)(void *ud);
        /* Free the connection now (netgate_client_release()), ending its
         * record with `reason` (NULL: nothing more to record). */
        void (*end)(void *ud, const char *reason);
        /* Tunnels only (netgate_client_tunnel()): the upstream is up; both
         * bufferevents are the front-end's now. */
        void (*tunnel)(void *ud, struct bufferevent *down, struct bufferevent *up);
};

struct netgate_client {
        struct netgate *g;
        const struct netgate_client_ops *ops;
        void *ud;
        enum netgate_client_state state;
        struct bufferevent *down, *up;

        /* The request being served: status, byte counts and client_eof
         * serve tunnels too. x.reqp is the front-end's to allocate. */
        struct netgate_exchange x;
        struct netgate_upstream u;
        struct netgate_linger linger;
        bool origin_form; /* request heads are origin-form (the routes) */
        bool tunnel;      /* the request being connected is a tunnel */

        /* Where the request went, or the address refused: for its record. */
        struct netgate_addr addr;
        bool have_addr;

        /* The origin of the request being sent; `host` is the front-end's
         * and stays valid while the request is served. */
        const struct netgate_host *host;
        uint16_t port;
        const struct netgate_tls *tls;
        const void *key;

        /* The upstream connection in `up`: what it reaches, and whether it
         * waits for the next request (idle) or serves a request again. */
        char up_host[NETGATE_HOST_MAX + 1];
        uint16_t up_port;
        const struct netgate_tls *up_tls;
        const void *up_key;
        struct netgate_addr up_addr;
        bool up_idle, up_reused;
};

/* Serve the accepted socket `fd` (taken, closed on failure): its
 * bufferevent with the gate's watermark and rate limit, waiting for a
 * request for `head_timeout_s`. `filter` (optional) sees every response. */
int netgate_client_accept(struct netgate_client *cl, struct netgate *g, int fd,
                          const struct netgate_client_ops *ops,
                          const struct netgate_exchange_filter *filter, void *ud,
                          long head_timeout_s);

/* Free the bufferevents, the engine's work in flight and the exchange. */
void netgate_client_release(struct netgate_client *cl);

/* A new request: its byte counts, status and address are reset. */
void netgate_client_begin(struct netgate_client *cl);

/* Send the request in x.reqp to `port` on `host` (with `tls` layered when
 * not NULL): on the kept connection when it reaches the same origin and
 * `key`, else through the engine. */
void netgate_client_send(struct netgate_client *cl, const struct netgate_host *host, uint16_t port,
                         const struct netgate_tls *tls, const void *key);

/* Open a tunnel's upstream to `port` on `host`: ops->tunnel when it is up. */
void netgate_client_tunnel(struct netgate_client *cl, const struct netgate_host *host,
                           uint16_t port);

/* The gate's own plain-text answer (`line` is its body), then the close. */
void netgate_client_answer(struct netgate_client *cl, int status, const char *phrase,
                           const char *header, const char *reason, const char *line);

/* The same with `extra` header fields ("Name: value\r\n" each). */
void netgate_client_answer_ex(struct netgate_client *cl, int status, const char *phrase,
                              const char *header, const char *reason, const char *extra,
                              const char *line);

/* Close after what is written has gone (netgate_linger_start()); may call
 * ops->end. */
void netgate_client_close(struct netgate_client *cl);
/* Drop the kept upstream if it waits idle (the rules no longer allow it). */
void netgate_client_drop_idle(struct netgate_client *cl);
