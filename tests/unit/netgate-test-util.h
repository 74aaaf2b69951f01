/* SPDX-License-Identifier: Apache-2.0 */
#pragma once

/* Helpers the network gate's unit tests share (test-netgate-gate.c and
 * test-netgate-route.c): loopback sockets, the byte pattern of large bodies,
 * reading a response as a client sees it, and waiting for records. */

#include <criterion/criterion.h>
#include <arpa/inet.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <poll.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/queue.h>
#include <sys/socket.h>

#include <event2/buffer.h>
#include <event2/event.h>
#include <event2/http.h>
#include <event2/keyvalq_struct.h>

#include "netgate/netgate.h"
#include "policy.h"
#include "secrets.h"
#include "util.h"

static inline void ngt_copy(char *dst, size_t n, const char *src)
{
        snprintf(dst, n, "%s", src ? src : "");
}

/* Byte i of a large test body. */
static inline uint8_t ngt_pattern(size_t i)
{
        return (uint8_t)((i * 7 + 3) ^ (i >> 9));
}

static inline uint16_t ngt_local_port(int fd)
{
        struct sockaddr_in sin;
        socklen_t len = sizeof(sin);
        cr_assert_eq(getsockname(fd, (struct sockaddr *)&sin, &len), 0);
        return ntohs(sin.sin_port);
}

/* A socket bound to 127.0.0.1 on a free port; listening when a stream one. */
static inline int ngt_loopback_socket(int type)
{
        int fd = socket(AF_INET, type | SOCK_CLOEXEC | SOCK_NONBLOCK, 0);
        cr_assert_geq(fd, 0);
        struct sockaddr_in sin = {.sin_family = AF_INET, .sin_addr.s_addr = htonl(INADDR_LOOPBACK)};
        cr_assert_eq(bind(fd, (struct sockaddr *)&sin, sizeof(sin)), 0);
        if (type == SOCK_STREAM)
                cr_assert_eq(listen(fd, 64), 0);
        return fd;
}

/* A non-blocking client socket connected to 127.0.0.1:port. */
static inline int ngt_connect_loopback(uint16_t port)
{
        int fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
        struct sockaddr_in sin = {.sin_family = AF_INET,
                                  .sin_port = htons(port),
                                  .sin_addr.s_addr = htonl(INADDR_LOOPBACK)};
        cr_assert_eq(connect(fd, (struct sockaddr *)&sin, sizeof(sin)), 0);
        fcntl(fd, F_SETFL, O_NONBLOCK);
        return fd;
}

/* What follows the head in the NUL-terminated bytes `in`, or NULL. */
static inline const char *ngt_body_of(const char *in)
{
        const char *e = strstr(in, "\r\n\r\n");
        return e ? e + 4 : NULL;
}

/* A whole response: Content-Length, or the end of chunked framing, or the
 * close. */
static inline bool ngt_response_complete(const char *in, size_t in_len, bool eof)
{
        const char *body = ngt_body_of(in);
        if (!body)
                return false;
        size_t head = (size_t)(body - in);
        const char *cl = strcasestr(in, "\r\nContent-Length:");
        if (cl && cl < body)
                return in_len - head >= strtoul(cl + 17, NULL, 10);
        const char *te = strcasestr(in, "\r\nTransfer-Encoding: chunked");
        if (te && te < body)
                return in_len >= head + 5 && memcmp(in + in_len - 5, "0\r\n\r\n", 5) == 0;
        return eof;
}

static inline int ngt_status_of(const char *in, size_t in_len)
{
        if (in_len < 12 || strncmp(in, "HTTP/1.1 ", 9) != 0)
                return -1;
        return atoi(in + 9);
}

/* Run the loop until *n_recs reaches n, for up to five seconds. */
static inline void ngt_wait_records(struct event_base *base, const size_t *n_recs, size_t n)
{
        uint64_t deadline = now_monotonic_us() + 5000000;
        while (*n_recs < n && now_monotonic_us() < deadline) {
                event_base_loop(base, EVLOOP_NONBLOCK);
                poll(NULL, 0, 1);
        }
        cr_assert_geq(*n_recs, n, "waiting for %zu records", n);
}

/* What a test's upstream was sent, request after request. */
struct ngt_seen {
        int count;
        char uri[1024];
        char headers[4096]; /* "name: value\n" lines */
        char body[1024];    /* the start of the body, NUL-terminated */
        size_t body_len;    /* the whole body */
};

static inline void ngt_capture(struct ngt_seen *seen, struct evhttp_request *req)
{
        struct evkeyvalq *h = evhttp_request_get_input_headers(req);
        struct evbuffer *in = evhttp_request_get_input_buffer(req);
        struct evkeyval *kv;
        seen->count++;
        ngt_copy(seen->uri, sizeof(seen->uri), evhttp_request_get_uri(req));
        seen->headers[0] = '\0';
        TAILQ_FOREACH(kv, h, next)
        {
                size_t l = strlen(seen->headers);
                snprintf(seen->headers + l, sizeof(seen->headers) - l, "%s: %s\n", kv->key,
                         kv->value);
        }
        seen->body_len = evbuffer_get_length(in);
        size_t n = seen->body_len < sizeof(seen->body) ? seen->body_len : sizeof(seen->body) - 1;
        evbuffer_copyout(in, seen->body, n);
        seen->body[n] = '\0';
}

/* An HTTP upstream on 127.0.0.1 (GET and POST) that hands every request to
 * `handler`; *ret_port is its port. */
static inline struct evhttp *ngt_upstream_start(struct event_base *base,
                                                void (*handler)(struct evhttp_request *, void *),
                                                uint16_t *ret_port)
{
        struct evhttp *h = evhttp_new(base);
        cr_assert_not_null(h);
        struct evhttp_bound_socket *bs = evhttp_bind_socket_with_handle(h, "127.0.0.1", 0);
        cr_assert_not_null(bs);
        *ret_port = ngt_local_port(evhttp_bound_socket_get_fd(bs));
        evhttp_set_gencb(h, handler, NULL);
        evhttp_set_allowed_methods(h, EVHTTP_REQ_GET | EVHTTP_REQ_POST);
        return h;
}

/* Let the loop run what is ready, `n` times. */
static inline void ngt_spin(struct event_base *base, int n)
{
        for (int i = 0; i < n; i++)
                event_base_loop(base, EVLOOP_NONBLOCK);
}

/* The end of a test with a gate, an upstream, a policy and secrets on one
 * loop: the gate first (it records what is still open), then the rest. */
static inline void ngt_teardown(struct event_base *base, struct netgate **gate,
                                struct evhttp *upstream, struct policy **pol,
                                struct secrets **secrets)
{
        *gate = netgate_free(*gate);
        ngt_spin(base, 10);
        evhttp_free(upstream);
        *pol = policy_free(*pol);
        *secrets = secrets_free(*secrets);
        event_base_free(base);
}
