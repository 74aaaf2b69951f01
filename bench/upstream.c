/* SPDX-License-Identifier: Apache-2.0 */
/* The upstream for bench/netgate.py: a small single-threaded epoll HTTP/1.1
 * server on 127.0.0.1, cheap enough per request not to be the bottleneck.
 *
 *   GET /bytes/N   N zero bytes (Content-Length), written with blocking
 *                  writes: one bulk transfer at a time is all the bench needs
 *   anything else  "ok\n"
 *
 * A request body (by Content-Length) is read and dropped before the answer.
 * Keep-alive and pipelining; closes after a request that says
 * "Connection: close" or is HTTP/1.0 without keep-alive. Origin-form and
 * absolute-form targets both work. Prints the port it bound, then serves
 * until killed. Usage: upstream [PORT] (0 or none: any free port). */

#define _GNU_SOURCE
#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/socket.h>
#include <unistd.h>

#define IN_MAX   16384
#define OUT_MAX  (64 * 1024)
#define CHUNK    (1024 * 1024)

struct conn {
        int fd;
        size_t in_len, out_len, out_off;
        unsigned long long skip; /* request body bytes still to drop */
        int pending;             /* a request waits for the end of its body */
        int pend_close;
        long long pend_bytes;    /* /bytes/N, or -1 */
        int closing;
        char in[IN_MAX];
        char out[OUT_MAX];
};

static const char OK[] = "HTTP/1.1 200 OK\r\nContent-Type: text/plain\r\nContent-Length: 3\r\n\r\nok\n";
static const char OK_CLOSE[] = "HTTP/1.1 200 OK\r\nContent-Type: text/plain\r\nContent-Length: 3\r\n"
                               "Connection: close\r\n\r\nok\n";
static char zeros[CHUNK];
static int ep;

static void set_blocking(int fd, int on)
{
        int fl = fcntl(fd, F_GETFL);
        fcntl(fd, F_SETFL, on ? fl & ~O_NONBLOCK : fl | O_NONBLOCK);
}

static void conn_close(struct conn *c)
{
        close(c->fd);
        free(c);
}

static int write_all(int fd, const char *p, size_t n)
{
        while (n > 0) {
                ssize_t w = write(fd, p, n);
                if (w < 0) {
                        if (errno == EINTR)
                                continue;
                        return -1;
                }
                p += w;
                n -= (size_t)w;
        }
        return 0;
}

/* Write what is queued; 1 when all of it went, 0 when the socket is full,
 * -1 on error. */
static int flush_out(struct conn *c)
{
        while (c->out_off < c->out_len) {
                ssize_t w = write(c->fd, c->out + c->out_off, c->out_len - c->out_off);
                if (w < 0) {
                        if (errno == EINTR)
                                continue;
                        if (errno == EAGAIN)
                                return 0;
                        return -1;
                }
                c->out_off += (size_t)w;
        }
        c->out_off = c->out_len = 0;
        return 1;
}

static int queue(struct conn *c, const char *p, size_t n)
{
        if (c->out_len + n > OUT_MAX) {
                /* Pipelined faster than the client reads: drain blocking. */
                set_blocking(c->fd, 1);
                int r = flush_out(c);
                set_blocking(c->fd, 0);
                if (r < 0)
                        return -1;
        }
        memcpy(c->out + c->out_len, p, n);
        c->out_len += n;
        return 0;
}

static const char *find_token(const char *head, size_t len, const char *tok)
{
        size_t n = strlen(tok);
        for (size_t i = 0; i + n <= len; i++)
                if (strncasecmp(head + i, tok, n) == 0)
                        return head + i;
        return NULL;
}

static int has_token(const char *head, size_t len, const char *tok)
{
        return find_token(head, len, tok) != NULL;
}

/* One request head (without its blank line): what to answer once its body
 * has been read. */
static void parse(struct conn *c, const char *head, size_t len)
{
        const char *eol = memchr(head, '\r', len);
        size_t line = eol ? (size_t)(eol - head) : len;
        int http10 = line >= 8 && memcmp(head + line - 8, "HTTP/1.0", 8) == 0;
        const char *cl = find_token(head, len, "\ncontent-length:");
        const char *b = memmem(head, line, "/bytes/", 7);
        c->pend_close = has_token(head, len, "connection: close") ||
                        (http10 && !has_token(head, len, "connection: keep-alive"));
        c->skip = cl ? strtoull(cl + 16, NULL, 10) : 0;
        c->pend_bytes = b ? strtoll(b + 7, NULL, 10) : -1;
        c->pending = 1;
}

/* Answer the pending request; -1 to close now. */
static int respond(struct conn *c)
{
        int close_after = c->pend_close;
        c->pending = 0;
        if (c->pend_bytes >= 0) {
                unsigned long long n = (unsigned long long)c->pend_bytes;
                char hdr[160];
                int hl = snprintf(hdr, sizeof(hdr),
                                  "HTTP/1.1 200 OK\r\nContent-Type: application/octet-stream\r\n"
                                  "Content-Length: %llu\r\n%s\r\n",
                                  n, close_after ? "Connection: close\r\n" : "");
                if (queue(c, hdr, (size_t)hl) < 0)
                        return -1;
                set_blocking(c->fd, 1);
                int r = flush_out(c);
                while (r >= 0 && n > 0) {
                        size_t k = n < CHUNK ? (size_t)n : CHUNK;
                        if (write_all(c->fd, zeros, k) < 0)
                                r = -1;
                        n -= k;
                }
                set_blocking(c->fd, 0);
                if (r < 0)
                        return -1;
        } else if (queue(c, close_after ? OK_CLOSE : OK,
                         close_after ? sizeof(OK_CLOSE) - 1 : sizeof(OK) - 1) < 0) {
                return -1;
        }
        c->closing = close_after;
        return 0;
}

static void on_readable(struct conn *c)
{
        for (;;) {
                if (c->in_len == IN_MAX) {
                        conn_close(c); /* a head larger than we take */
                        return;
                }
                size_t room = IN_MAX - c->in_len;
                ssize_t r = read(c->fd, c->in + c->in_len, room);
                if (r == 0) {
                        conn_close(c);
                        return;
                }
                if (r < 0) {
                        if (errno == EINTR)
                                continue;
                        if (errno == EAGAIN)
                                break;
                        conn_close(c);
                        return;
                }
                c->in_len += (size_t)r;
                size_t off = 0;
                char *end;
                for (;;) {
                        size_t k = c->skip < c->in_len - off ? (size_t)c->skip : c->in_len - off;
                        off += k;
                        c->skip -= k;
                        if (c->skip)
                                break;
                        if (c->pending && respond(c) < 0) {
                                conn_close(c);
                                return;
                        }
                        if (c->closing ||
                            !(end = memmem(c->in + off, c->in_len - off, "\r\n\r\n", 4)))
                                break;
                        size_t hl = (size_t)(end - (c->in + off));
                        parse(c, c->in + off, hl);
                        off += hl + 4;
                }
                memmove(c->in, c->in + off, c->in_len - off);
                c->in_len -= off;
                if ((size_t)r < room)
                        break; /* short read: nothing more waiting */
        }
        int f = flush_out(c);
        if (f < 0 || (f == 1 && c->closing)) {
                conn_close(c);
                return;
        }
        struct epoll_event ev = {.events = EPOLLIN | (f == 0 ? EPOLLOUT : 0), .data.ptr = c};
        epoll_ctl(ep, EPOLL_CTL_MOD, c->fd, &ev);
}

static void on_writable(struct conn *c)
{
        int f = flush_out(c);
        if (f < 0 || (f == 1 && c->closing)) {
                conn_close(c);
                return;
        }
        if (f == 1) {
                struct epoll_event ev = {.events = EPOLLIN, .data.ptr = c};
                epoll_ctl(ep, EPOLL_CTL_MOD, c->fd, &ev);
        }
}

int main(int argc, char **argv)
{
        signal(SIGPIPE, SIG_IGN);
        int port = argc > 1 ? atoi(argv[1]) : 0;
        int ls = socket(AF_INET, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
        int one = 1;
        setsockopt(ls, SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one));
        struct sockaddr_in sa = {.sin_family = AF_INET, .sin_port = htons((uint16_t)port),
                                 .sin_addr.s_addr = htonl(INADDR_LOOPBACK)};
        /* An optional second argument: the IPv4 address to listen on. */
        if (argc > 2 && inet_pton(AF_INET, argv[2], &sa.sin_addr) != 1) {
                fprintf(stderr, "upstream: %s: not an IPv4 address\n", argv[2]);
                return 1;
        }
        if (ls < 0 || bind(ls, (struct sockaddr *)&sa, sizeof(sa)) < 0 || listen(ls, 1024) < 0) {
                perror("upstream: listen");
                return 1;
        }
        socklen_t sl = sizeof(sa);
        getsockname(ls, (struct sockaddr *)&sa, &sl);
        printf("%d\n", ntohs(sa.sin_port));
        fflush(stdout);

        ep = epoll_create1(EPOLL_CLOEXEC);
        struct epoll_event lev = {.events = EPOLLIN, .data.ptr = NULL};
        epoll_ctl(ep, EPOLL_CTL_ADD, ls, &lev);
        struct epoll_event evs[256];
        for (;;) {
                int n = epoll_wait(ep, evs, 256, -1);
                for (int i = 0; i < n; i++) {
                        struct conn *c = evs[i].data.ptr;
                        if (!c) {
                                int fd;
                                while ((fd = accept4(ls, NULL, NULL, SOCK_NONBLOCK | SOCK_CLOEXEC)) >= 0) {
                                        setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one));
                                        struct conn *nc = calloc(1, sizeof(*nc));
                                        if (!nc) {
                                                close(fd);
                                                continue;
                                        }
                                        nc->fd = fd;
                                        struct epoll_event ev = {.events = EPOLLIN, .data.ptr = nc};
                                        epoll_ctl(ep, EPOLL_CTL_ADD, fd, &ev);
                                }
                        } else if (evs[i].events & (EPOLLIN | EPOLLERR | EPOLLHUP)) {
                                on_readable(c);
                        } else if (evs[i].events & EPOLLOUT) {
                                on_writable(c);
                        }
                }
        }
}
