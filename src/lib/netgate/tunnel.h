/* SPDX-License-Identifier: Apache-2.0 */
#pragma once

#include <stdbool.h>
#include <stddef.h>

/* A tunnel (CONNECT, SOCKS5) between a client and a connected upstream,
 * above the upstream engine: bytes pass as they are, in both directions,
 * each half closed when its side ends. Without a rate limit both sockets
 * go to a splice() relay (socket to pipe to socket inside the kernel);
 * with one, through bounded bufferevents. The byte budget applies either
 * way. Internal to the network gate. */

struct bufferevent;
struct event;
struct evbuffer;
struct netgate;
struct netgate_exchange;
struct netgate_tunnel;

struct netgate_tunnel_dir {
        struct netgate_tunnel *t;
        bool up; /* client to upstream */
        int src, dst;
        int pipe_r, pipe_w;
        size_t in_pipe;
        struct evbuffer *pre; /* bytes read before the switch, written first */
        bool eof, done;
        /* ev_rd is persistent and stays registered while the direction
         * reads (`reading`); it is taken off only while the destination
         * is full. ev_wr is one-shot, for a full destination. */
        bool reading;
        struct event *ev_rd, *ev_wr;
};

struct netgate_tunnel {
        struct netgate *g;
        struct netgate_exchange *x; /* the request's byte counts */
        /* The tunnel is over: `reason` NULL when both sides ended, else
         * budget_bytes, timeout or client_closed. Its owner releases it. */
        void (*end)(void *ud, const char *reason);
        void *ud;

        struct bufferevent *client, *up; /* owned, until spliced */
        bool client_eof, up_eof;
        bool shut_up, shut_client;
        struct netgate_tunnel_dir dir[2];
        int client_fd, up_fd; /* owned once spliced */
        void *guard;          /* sni.c: the SNI check, until it is done */
};

void netgate_tunnel_init(struct netgate_tunnel *t);

/* Take both bufferevents, send `reply` (n bytes) to the client first, and
 * relay. */
void netgate_tunnel_start(struct netgate_tunnel *t, struct netgate *g, struct netgate_exchange *x,
                          void (*end)(void *ud, const char *reason), void *ud,
                          struct bufferevent *client, struct bufferevent *up, const void *reply,
                          size_t n);

/* The client ended its side and everything it sent went on: the tunnel
 * waits only for the upstream's close. Closed now, it ended as the client
 * asked, not cut. */
bool netgate_tunnel_client_done(const struct netgate_tunnel *t);

/* Close what the tunnel holds. */
void netgate_tunnel_release(struct netgate_tunnel *t);
