/* SPDX-License-Identifier: Apache-2.0 */
#pragma once

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "netgate/addr.h"

/* An incremental SOCKS5 server-side parser (RFC 1928): the greeting, where
 * only "no authentication" is accepted, and one request. Only CONNECT is
 * served; the parser reads every request whole so that refusals can name the
 * target. */

enum {
        NETGATE_SOCKS5_REP_OK = 0x00,
        NETGATE_SOCKS5_REP_FAILURE = 0x01,
        NETGATE_SOCKS5_REP_NOT_ALLOWED = 0x02,
        NETGATE_SOCKS5_REP_NET_UNREACHABLE = 0x03,
        NETGATE_SOCKS5_REP_HOST_UNREACHABLE = 0x04,
        NETGATE_SOCKS5_REP_REFUSED = 0x05,
        NETGATE_SOCKS5_REP_TTL_EXPIRED = 0x06,
        NETGATE_SOCKS5_REP_CMD_UNSUPPORTED = 0x07,
        NETGATE_SOCKS5_REP_ATYP_UNSUPPORTED = 0x08,
        NETGATE_SOCKS5_REP_NONE = 0xff, /* close without a reply */
};

enum {
        NETGATE_SOCKS5_CMD_CONNECT = 0x01,
        NETGATE_SOCKS5_CMD_BIND = 0x02,
        NETGATE_SOCKS5_CMD_UDP = 0x03,
};

enum {
        NETGATE_SOCKS5_ATYP_IPV4 = 0x01,
        NETGATE_SOCKS5_ATYP_DOMAIN = 0x03,
        NETGATE_SOCKS5_ATYP_IPV6 = 0x04,
};

#define NETGATE_SOCKS5_BUF 262 /* the longest message: a request with a 255-byte name */

/* Results of netgate_socks5_feed(). */
enum {
        NETGATE_SOCKS5_MORE = 0,     /* all bytes taken, need more */
        NETGATE_SOCKS5_GREETING = 1, /* send netgate_socks5_method_reply, then feed on */
        NETGATE_SOCKS5_REQUEST = 2,  /* a CONNECT request is ready */
};

struct netgate_socks5 {
        int state;
        size_t len;
        uint8_t buf[NETGATE_SOCKS5_BUF];

        uint8_t cmd;
        uint8_t atyp;
        /* The target as sent: a domain's raw bytes (NUL and all: validate
         * before use), or the text of an IPv4/IPv6 address. */
        char host[256];
        size_t host_len;
        uint16_t port;

        uint8_t reply; /* when feed fails: the reply code to send, or REP_NONE */
};

extern const uint8_t netgate_socks5_method_reply[2];    /* 05 00 */
extern const uint8_t netgate_socks5_no_method_reply[2]; /* 05 ff */

void netgate_socks5_init(struct netgate_socks5 *s);

/* Returns NETGATE_SOCKS5_MORE, _GREETING or _REQUEST with *ret_consumed bytes
 * used, or a negative errno with s->reply set:
 *   -EPROTO        not SOCKS version 5, or a malformed message (REP_NONE / 0x01)
 *   -EACCES        the client offers no acceptable method (send no_method_reply)
 *   -EOPNOTSUPP    BIND, UDP ASSOCIATE or an unknown command (0x07)
 *   -EAFNOSUPPORT  unknown address type (0x08) */
int netgate_socks5_feed(struct netgate_socks5 *s, const uint8_t *data, size_t len,
                        size_t *ret_consumed);

/* Build a reply: VER REP RSV ATYP BND.ADDR BND.PORT; `bnd` NULL gives
 * 0.0.0.0:0. Returns its length (at most 22). */
size_t netgate_socks5_reply(uint8_t rep, const struct netgate_addr *bnd, uint16_t port,
                            uint8_t out[22]);
