/* SPDX-License-Identifier: Apache-2.0 */
#include <errno.h>
#include <netdb.h>
#include <stdio.h>
#include <string.h>
#include <strings.h>
#include <sys/socket.h>
#include <unistd.h>

#include <event2/event.h>

#include "netgate/parent.h"
#include "util.h"

#define HS_TIMEOUT_S 30
#define HEAD_MAX     8192

/* ---- the configuration ---- */

int netgate_parent_new(const char *url, char *const *no_proxy, size_t n_no_proxy,
                       struct netgate_parent **ret, struct al_error *err)
{
        static const char usage[] = "give http://HOST:PORT or socks5://HOST:PORT";
        const char *rest;
        enum netgate_parent_kind kind;
        if (!url)
                return al_error_set(err, 0, "network.parentProxy: %s", usage);
        if (strncmp(url, "http://", 7) == 0) {
                kind = NETGATE_PARENT_HTTP;
                rest = url + 7;
        } else if (strncmp(url, "socks5://", 9) == 0 || strncmp(url, "socks5h://", 10) == 0) {
                kind = NETGATE_PARENT_SOCKS5;
                rest = strchr(url, ':') + 3;
        } else
                return al_error_set(err, 0,
                                    "network.parentProxy \"%.200s\": not http:// or "
                                    "socks5://; %s",
                                    url, usage);
        size_t alen = strcspn(rest, "/");
        if (rest[alen] == '/' && rest[alen + 1] != '\0')
                return al_error_set(
                    err, 0, "network.parentProxy \"%.200s\": a proxy has no path; %s", url, usage);
        if (memchr(rest, '@', alen))
                return al_error_set(err, 0,
                                    "network.parentProxy \"%.200s\": credentials in the URL are "
                                    "not supported",
                                    url);
        const char *host = rest, *colon;
        size_t hlen;
        if (rest[0] == '[') {
                const char *close = memchr(rest, ']', alen);
                if (!close || close + 1 >= rest + alen || close[1] != ':')
                        return al_error_set(err, 0, "network.parentProxy \"%.200s\": %s", url,
                                            usage);
                host = rest + 1;
                hlen = (size_t)(close - host);
                colon = close + 1;
        } else {
                colon = memchr(rest, ':', alen);
                if (!colon)
                        return al_error_set(err, 0, "network.parentProxy \"%.200s\": no port; %s",
                                            url, usage);
                hlen = (size_t)(colon - rest);
        }
        char port_s[8];
        size_t plen = (size_t)(rest + alen - colon - 1);
        uint64_t port;
        if (hlen == 0 || hlen >= sizeof(((struct netgate_parent *)0)->host) || plen == 0 ||
            plen >= sizeof(port_s))
                return al_error_set(err, 0, "network.parentProxy \"%.200s\": %s", url, usage);
        memcpy(port_s, colon + 1, plen);
        port_s[plen] = '\0';
        if (safe_atou64(port_s, &port) < 0 || port == 0 || port > 65535)
                return al_error_set(
                    err, 0, "network.parentProxy \"%.200s\": the port must be 1-65535", url);
        struct netgate_parent *p = xcalloc(1, sizeof(*p));
        p->kind = kind;
        p->port = (uint16_t)port;
        memcpy(p->host, host, hlen);
        p->host[hlen] = '\0';
        if (netgate_addr_parse(p->host, &p->addr) < 0) {
                /* A name: resolved once, now, by the host's resolver. */
                struct addrinfo hints = {.ai_socktype = SOCK_STREAM}, *res = NULL;
                int r = getaddrinfo(p->host, NULL, &hints, &res);
                if (r != 0 || !res ||
                    netgate_addr_from_sockaddr(res->ai_addr, res->ai_addrlen, &p->addr) < 0) {
                        if (res)
                                freeaddrinfo(res);
                        al_error_set(err, 0, "network.parentProxy \"%.200s\": %s does not resolve",
                                     url, p->host);
                        free(p);
                        return -EINVAL;
                }
                freeaddrinfo(res);
        }
        p->no_proxy = xcalloc(n_no_proxy + 1, sizeof(*p->no_proxy));
        for (size_t i = 0; i < n_no_proxy; i++)
                p->no_proxy[i] = xstrdup(no_proxy[i] ? no_proxy[i] : "");
        p->n_no_proxy = n_no_proxy;
        *ret = p;
        return 0;
}

struct netgate_parent *netgate_parent_free(struct netgate_parent *p)
{
        if (!p)
                return NULL;
        strv_free(p->no_proxy);
        free(p);
        return NULL;
}

bool netgate_parent_applies(const struct netgate_parent *p, const char *host)
{
        if (!p)
                return false;
        size_t hl = strlen(host);
        for (size_t i = 0; i < p->n_no_proxy; i++) {
                const char *n = p->no_proxy[i];
                if (strncmp(n, "*.", 2) == 0) {
                        size_t sl = strlen(n + 1);
                        if (hl > sl && strcasecmp(host + hl - sl, n + 1) == 0)
                                return false;
                } else if (strcasecmp(n, host) == 0)
                        return false;
        }
        return true;
}

/* ---- the handshake ---- */

enum hs_state {
        HS_HTTP_HEAD,    /* CONNECT sent, waiting for the answer's head */
        HS_SOCKS_METHOD, /* greeting sent, waiting for the method */
        HS_SOCKS_REPLY,  /* request sent, waiting for the reply */
};

struct netgate_parent_hs {
        const struct netgate_parent *p;
        int fd;
        struct event *ev;
        enum hs_state state;
        char host[256];
        uint16_t port;
        unsigned char out[600];
        size_t out_len, out_off;
        netgate_parent_cb cb;
        void *ud;
};

void netgate_parent_handshake_cancel(struct netgate_parent_hs *hs)
{
        if (!hs)
                return;
        if (hs->ev)
                event_free(hs->ev);
        free(hs);
}

static void finish(struct netgate_parent_hs *hs, int err, const char *detail)
{
        netgate_parent_cb cb = hs->cb;
        void *ud = hs->ud;
        netgate_parent_handshake_cancel(hs);
        cb(ud, err, detail);
}

static void queue(struct netgate_parent_hs *hs, const void *buf, size_t n)
{
        memcpy(hs->out, buf, n);
        hs->out_len = n;
        hs->out_off = 0;
}

static void socks_request(struct netgate_parent_hs *hs)
{
        unsigned char req[300];
        size_t n = 0, hl = strlen(hs->host);
        struct netgate_addr a;
        req[n++] = 5;
        req[n++] = 1; /* CONNECT */
        req[n++] = 0;
        if (netgate_addr_parse(hs->host, &a) == 0) {
                req[n++] = a.family == AF_INET ? 1 : 4;
                size_t al = a.family == AF_INET ? 4 : 16;
                memcpy(req + n, a.bytes, al);
                n += al;
        } else {
                /* The name (parentProxySendNames): the parent resolves it. */
                req[n++] = 3;
                req[n++] = (unsigned char)hl;
                memcpy(req + n, hs->host, hl);
                n += hl;
        }
        req[n++] = (unsigned char)(hs->port >> 8);
        req[n++] = (unsigned char)(hs->port & 0xff);
        queue(hs, req, n);
}

/* How many bytes a SOCKS5 reply has, once its first 5 are known; 0 when
 * the address type is unknown. */
static size_t socks_reply_len(const unsigned char *r)
{
        switch (r[3]) {
        case 1:
                return 4 + 4 + 2;
        case 4:
                return 4 + 16 + 2;
        case 3:
                return 4 + 1 + r[4] + 2;
        default:
                return 0;
        }
}

/* 1: the step is done; 0: more is needed; <0: failed (detail set). */
static int read_step(struct netgate_parent_hs *hs, char *detail, size_t dsize)
{
        char buf[HEAD_MAX + 1];
        ssize_t n = recv(hs->fd, buf, hs->state == HS_HTTP_HEAD ? HEAD_MAX : 262, MSG_PEEK);
        if (n < 0)
                return errno == EAGAIN || errno == EINTR ? 0 : -errno;
        if (n == 0) {
                snprintf(detail, dsize, "the parent proxy closed the connection");
                return -ECONNRESET;
        }
        size_t want;
        if (hs->state == HS_HTTP_HEAD) {
                buf[n] = '\0';
                char *end = memmem(buf, (size_t)n, "\r\n\r\n", 4);
                if (!end) {
                        if (n >= HEAD_MAX) {
                                snprintf(detail, dsize, "the parent proxy's answer is too large");
                                return -EBADMSG;
                        }
                        return 0;
                }
                want = (size_t)(end - buf) + 4;
                /* "HTTP/1.x 2xx": the tunnel is up. */
                if (strncmp(buf, "HTTP/1.", 7) != 0 || buf[8] != ' ' || buf[9] != '2') {
                        size_t line = strcspn(buf, "\r\n");
                        snprintf(detail, dsize, "the parent proxy answered \"%.*s\"",
                                 (int)(line < 120 ? line : 120), buf);
                        for (char *c = detail; *c; c++)
                                if ((unsigned char)*c < 0x20 || (unsigned char)*c >= 0x7f)
                                        *c = '?';
                        return -ECONNREFUSED;
                }
        } else if (hs->state == HS_SOCKS_METHOD) {
                if (n < 2)
                        return 0;
                want = 2;
                if ((unsigned char)buf[0] != 5 || buf[1] != 0) {
                        snprintf(detail, dsize, "the SOCKS5 parent proxy wants authentication");
                        return -EACCES;
                }
        } else {
                if (n < 5)
                        return 0;
                want = socks_reply_len((unsigned char *)buf);
                if ((unsigned char)buf[0] != 5 || want == 0) {
                        snprintf(detail, dsize, "the SOCKS5 parent proxy's reply is malformed");
                        return -EBADMSG;
                }
                if ((size_t)n < want)
                        return 0;
                if (buf[1] != 0) {
                        snprintf(detail, dsize, "the SOCKS5 parent proxy refused: reply %u",
                                 (unsigned char)buf[1]);
                        return -ECONNREFUSED;
                }
        }
        /* Take exactly the answer: what follows is the upstream's. */
        if (recv(hs->fd, buf, want, 0) != (ssize_t)want) {
                snprintf(detail, dsize, "reading the parent proxy's answer");
                return -EIO;
        }
        return 1;
}

static void hs_cb(evutil_socket_t fd, short what, void *ud)
{
        struct netgate_parent_hs *hs = ud;
        char detail[200] = "";
        struct timeval tv = {.tv_sec = HS_TIMEOUT_S};
        if (what & EV_TIMEOUT) {
                finish(hs, -ETIMEDOUT, "the parent proxy did not answer in time");
                return;
        }
        if (hs->out_off < hs->out_len) {
                ssize_t n =
                    send(fd, hs->out + hs->out_off, hs->out_len - hs->out_off, MSG_NOSIGNAL);
                if (n < 0 && errno != EAGAIN && errno != EINTR) {
                        finish(hs, -errno, "writing to the parent proxy");
                        return;
                }
                if (n > 0)
                        hs->out_off += (size_t)n;
        } else {
                int r = read_step(hs, detail, sizeof(detail));
                if (r < 0) {
                        finish(hs, r, detail);
                        return;
                }
                if (r > 0) {
                        if (hs->state != HS_SOCKS_METHOD) {
                                finish(hs, 0, NULL);
                                return;
                        }
                        hs->state = HS_SOCKS_REPLY;
                        socks_request(hs);
                }
        }
        event_del(hs->ev);
        event_assign(hs->ev, event_get_base(hs->ev), fd,
                     hs->out_off < hs->out_len ? EV_WRITE : EV_READ, hs_cb, hs);
        event_add(hs->ev, &tv);
}

struct netgate_parent_hs *netgate_parent_handshake(const struct netgate_parent *p,
                                                   struct event_base *base, int fd,
                                                   const char *host, uint16_t port,
                                                   netgate_parent_cb cb, void *ud)
{
        struct netgate_parent_hs *hs = xcalloc(1, sizeof(*hs));
        struct timeval tv = {.tv_sec = HS_TIMEOUT_S};
        hs->p = p;
        hs->fd = fd;
        hs->cb = cb;
        hs->ud = ud;
        hs->port = port;
        snprintf(hs->host, sizeof(hs->host), "%s", host);
        if (p->kind == NETGATE_PARENT_HTTP) {
                struct netgate_addr a;
                bool v6 = netgate_addr_parse(host, &a) == 0 && a.family == AF_INET6;
                int n =
                    snprintf((char *)hs->out, sizeof(hs->out),
                             "CONNECT %s%s%s:%u HTTP/1.1\r\nHost: %s%s%s:%u\r\n\r\n", v6 ? "[" : "",
                             host, v6 ? "]" : "", port, v6 ? "[" : "", host, v6 ? "]" : "", port);
                hs->out_len = (size_t)n;
                hs->state = HS_HTTP_HEAD;
        } else {
                static const unsigned char greeting[] = {5, 1, 0};
                queue(hs, greeting, sizeof(greeting));
                hs->state = HS_SOCKS_METHOD;
        }
        hs->ev = event_new(base, fd, EV_WRITE, hs_cb, hs);
        if (!hs->ev) {
                free(hs);
                return NULL;
        }
        event_add(hs->ev, &tv);
        return hs;
}
