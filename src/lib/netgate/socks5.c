/* SPDX-License-Identifier: Apache-2.0 */
#include <errno.h>
#include <string.h>
#include <sys/socket.h>

#include "netgate/socks5.h"

enum {
        S_GREETING,
        S_REQUEST,
        S_DONE,
        S_ERROR,
};

const uint8_t netgate_socks5_method_reply[2] = {0x05, 0x00};
const uint8_t netgate_socks5_no_method_reply[2] = {0x05, 0xff};

void netgate_socks5_init(struct netgate_socks5 *s)
{
        memset(s, 0, sizeof(*s));
        s->state = S_GREETING;
        s->reply = NETGATE_SOCKS5_REP_NONE;
}

/* Total length of the message being read, as far as the bytes so far tell;
 * 0 when the address type is unknown. */
static size_t needed(const struct netgate_socks5 *s)
{
        if (s->state == S_GREETING)
                return s->len < 2 ? 2 : 2 + (size_t)s->buf[1];
        if (s->len < 4)
                return 4;
        switch (s->buf[3]) {
        case NETGATE_SOCKS5_ATYP_IPV4:
                return 4 + 4 + 2;
        case NETGATE_SOCKS5_ATYP_IPV6:
                return 4 + 16 + 2;
        case NETGATE_SOCKS5_ATYP_DOMAIN:
                return s->len < 5 ? 5 : 5 + (size_t)s->buf[4] + 2;
        default:
                return 0;
        }
}

static int fail(struct netgate_socks5 *s, int r, uint8_t reply)
{
        s->state = S_ERROR;
        s->reply = reply;
        return r;
}

static int finish_greeting(struct netgate_socks5 *s)
{
        if (s->buf[0] != 0x05)
                return fail(s, -EPROTO, NETGATE_SOCKS5_REP_NONE);
        if (!memchr(s->buf + 2, 0x00, s->buf[1]))
                return fail(s, -EACCES, NETGATE_SOCKS5_REP_NONE);
        s->state = S_REQUEST;
        s->len = 0;
        return NETGATE_SOCKS5_GREETING;
}

static int finish_request(struct netgate_socks5 *s)
{
        const uint8_t *b = s->buf;
        s->cmd = b[1];
        s->atyp = b[3];
        struct netgate_addr a = {0};
        size_t port_off;
        switch (s->atyp) {
        case NETGATE_SOCKS5_ATYP_IPV4:
                a.family = AF_INET;
                memcpy(a.bytes, b + 4, 4);
                netgate_addr_format(&a, s->host);
                port_off = 8;
                break;
        case NETGATE_SOCKS5_ATYP_IPV6:
                a.family = AF_INET6;
                memcpy(a.bytes, b + 4, 16);
                netgate_addr_format(&a, s->host);
                port_off = 20;
                break;
        default:
                memcpy(s->host, b + 5, b[4]);
                s->host[b[4]] = '\0';
                port_off = 5 + (size_t)b[4];
                break;
        }
        s->host_len = s->atyp == NETGATE_SOCKS5_ATYP_DOMAIN ? b[4] : strlen(s->host);
        s->port = (uint16_t)(b[port_off] << 8 | b[port_off + 1]);

        if (b[0] != 0x05 || b[2] != 0x00)
                return fail(s, -EPROTO, NETGATE_SOCKS5_REP_FAILURE);
        if (s->cmd != NETGATE_SOCKS5_CMD_CONNECT)
                return fail(s, -EOPNOTSUPP, NETGATE_SOCKS5_REP_CMD_UNSUPPORTED);
        s->state = S_DONE;
        return NETGATE_SOCKS5_REQUEST;
}

int netgate_socks5_feed(struct netgate_socks5 *s, const uint8_t *data, size_t len,
                        size_t *ret_consumed)
{
        size_t i = 0;
        *ret_consumed = 0;
        if (s->state == S_ERROR)
                return -EPROTO;
        if (s->state == S_DONE)
                return NETGATE_SOCKS5_REQUEST;

        for (;;) {
                size_t need = needed(s);
                if (need == 0) {
                        *ret_consumed = i;
                        return fail(s, -EAFNOSUPPORT, NETGATE_SOCKS5_REP_ATYP_UNSUPPORTED);
                }
                if (s->len < need) {
                        size_t n = need - s->len;
                        if (n > len - i)
                                n = len - i;
                        memcpy(s->buf + s->len, data + i, n);
                        s->len += n;
                        i += n;
                        /* The version byte comes first: a client speaking
                         * anything else is cut off before it can fill the
                         * buffer. */
                        if (s->len >= 1 && s->buf[0] != 0x05) {
                                *ret_consumed = i;
                                return fail(s, -EPROTO, NETGATE_SOCKS5_REP_NONE);
                        }
                        if (s->len < need) {
                                if (needed(s) != need)
                                        continue; /* a length byte arrived */
                                *ret_consumed = i;
                                return NETGATE_SOCKS5_MORE;
                        }
                        if (needed(s) != need)
                                continue;
                }
                *ret_consumed = i;
                return s->state == S_GREETING ? finish_greeting(s) : finish_request(s);
        }
}

size_t netgate_socks5_reply(uint8_t rep, const struct netgate_addr *bnd, uint16_t port,
                            uint8_t out[22])
{
        out[0] = 0x05;
        out[1] = rep;
        out[2] = 0x00;
        size_t n;
        if (bnd && bnd->family == AF_INET6) {
                out[3] = NETGATE_SOCKS5_ATYP_IPV6;
                memcpy(out + 4, bnd->bytes, 16);
                n = 20;
        } else {
                out[3] = NETGATE_SOCKS5_ATYP_IPV4;
                if (bnd && bnd->family == AF_INET)
                        memcpy(out + 4, bnd->bytes, 4);
                else
                        memset(out + 4, 0, 4);
                n = 8;
        }
        out[n] = (uint8_t)(port >> 8);
        out[n + 1] = (uint8_t)port;
        return n + 2;
}
