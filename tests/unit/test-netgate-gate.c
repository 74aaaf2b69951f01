/* SPDX-License-Identifier: Apache-2.0 */
#include <criterion/criterion.h>
#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <poll.h>
#include <signal.h>
#include <stdarg.h>
#include <stdio.h>
#include <string.h>
#include <strings.h>
#include <sys/socket.h>
#include <unistd.h>

#include <event2/buffer.h>
#include <event2/bufferevent.h>
#include <event2/event.h>
#include <event2/http.h>
#include <event2/listener.h>

#include "netgate/netgate.h"
#include "policy.h"
#include "util.h"

#include "netgate-test-util.h"

/* Everything runs in this process on one event loop: the gate, an HTTP
 * upstream, a TCP echo server and a tiny DNS server, all on 127.0.0.1. The
 * test client is a non-blocking socket that steps the loop while it waits. */

static struct event_base *base;
static struct netgate *gate;
static struct policy *pol;
static uint16_t gate_http_port, gate_socks_port;
static uint16_t up_port, echo_port, dns_port, closed_port;
static struct evhttp *upstream;
static struct evconnlistener *echo;
static struct event *dns_ev;
static int dns_fd = -1;

struct rec {
        char protocol[16], method[16], host[300], address[64], decision[8], reason[64], rule[160];
        uint16_t port;
        int status;
        uint64_t up, down;
};
static struct rec recs[64];
static size_t n_recs;

static struct {
        int count;
        char uri[512];
        char host[300];
        bool proxy_auth, proxy_conn, secret, te;
        size_t body_len;
        size_t connections;
} seen;

static void recorder(void *ud, const struct netgate_record *r)
{
        cr_assert_lt(n_recs, sizeof(recs) / sizeof(recs[0]));
        struct rec *x = &recs[n_recs++];
        ngt_copy(x->protocol, sizeof(x->protocol), r->protocol);
        ngt_copy(x->method, sizeof(x->method), r->method);
        ngt_copy(x->host, sizeof(x->host), r->host);
        ngt_copy(x->address, sizeof(x->address), r->address);
        ngt_copy(x->decision, sizeof(x->decision), r->decision);
        ngt_copy(x->reason, sizeof(x->reason), r->reason);
        ngt_copy(x->rule, sizeof(x->rule), r->rule);
        x->port = r->port;
        x->status = r->status;
        x->up = r->bytes_up;
        x->down = r->bytes_down;
        cr_expect_str_eq(r->sandbox, "sbx-test");
}

/* ---- the upstream HTTP server ---- */

static void up_handler(struct evhttp_request *req, void *ud)
{
        struct evkeyvalq *h = evhttp_request_get_input_headers(req);
        seen.count++;
        ngt_copy(seen.uri, sizeof(seen.uri), evhttp_request_get_uri(req));
        ngt_copy(seen.host, sizeof(seen.host), evhttp_find_header(h, "Host"));
        seen.proxy_auth = evhttp_find_header(h, "Proxy-Authorization") != NULL;
        seen.proxy_conn = evhttp_find_header(h, "Proxy-Connection") != NULL;
        seen.secret = evhttp_find_header(h, "X-Secret") != NULL;
        seen.body_len = evbuffer_get_length(evhttp_request_get_input_buffer(req));

        struct evbuffer *out = evbuffer_new();
        const char *uri = seen.uri;
        if (strncmp(uri, "/big/", 5) == 0) {
                size_t n = strtoul(uri + 5, NULL, 10);
                uint8_t *buf = malloc(n);
                for (size_t i = 0; i < n; i++)
                        buf[i] = ngt_pattern(i);
                evbuffer_add(out, buf, n);
                free(buf);
        } else if (strcmp(uri, "/chunked") == 0) {
                evhttp_send_reply_start(req, 200, "OK");
                for (int i = 0; i < 5; i++) {
                        evbuffer_add_printf(out, "part %d;", i);
                        evhttp_send_reply_chunk(req, out);
                }
                evhttp_send_reply_end(req);
                evbuffer_free(out);
                return;
        } else if (strcmp(uri, "/head") == 0) {
                evhttp_add_header(evhttp_request_get_output_headers(req), "Content-Length", "1234");
        } else if (strcmp(uri, "/echo") == 0) {
                evbuffer_add_printf(out, "got %zu", seen.body_len);
        } else {
                evbuffer_add_printf(out, "hello from upstream %s", uri);
        }
        evhttp_send_reply(req, 200, "OK", out);
        evbuffer_free(out);
}

/* ---- the echo server ---- */

static struct bufferevent *echo_conns[64];

static void echo_free(struct bufferevent *bev)
{
        for (size_t i = 0; i < sizeof(echo_conns) / sizeof(echo_conns[0]); i++)
                if (echo_conns[i] == bev)
                        echo_conns[i] = NULL;
        bufferevent_free(bev);
}

static void echo_read(struct bufferevent *bev, void *ud)
{
        evbuffer_add_buffer(bufferevent_get_output(bev), bufferevent_get_input(bev));
}

static void echo_write(struct bufferevent *bev, void *ud)
{
        if (ud) /* the peer finished sending and everything is echoed */
                echo_free(bev);
}

static void echo_event(struct bufferevent *bev, short what, void *ud)
{
        if ((what & BEV_EVENT_EOF) && evbuffer_get_length(bufferevent_get_output(bev)) > 0) {
                bufferevent_setcb(bev, echo_read, echo_write, echo_event, (void *)1);
                return;
        }
        echo_free(bev);
}

static void echo_accept(struct evconnlistener *l, evutil_socket_t fd, struct sockaddr *sa, int len,
                        void *ud)
{
        struct bufferevent *bev = bufferevent_socket_new(base, fd, BEV_OPT_CLOSE_ON_FREE);
        bufferevent_setcb(bev, echo_read, echo_write, echo_event, NULL);
        bufferevent_enable(bev, EV_READ | EV_WRITE);
        for (size_t i = 0; i < sizeof(echo_conns) / sizeof(echo_conns[0]); i++)
                if (!echo_conns[i]) {
                        echo_conns[i] = bev;
                        break;
                }
}

/* ---- the DNS server: dns.test is 127.0.0.1, rebind.test 169.254.169.254,
 * nx.test does not exist ---- */

static void dns_read(evutil_socket_t fd, short what, void *ud)
{
        uint8_t q[512], r[600];
        struct sockaddr_storage from;
        socklen_t fl = sizeof(from);
        ssize_t n = recvfrom(fd, q, sizeof(q), 0, (struct sockaddr *)&from, &fl);
        if (n < 12)
                return;
        size_t off = 12, nl = 0;
        char name[256];
        while (off < (size_t)n && q[off]) {
                size_t l = q[off++];
                if (off + l > (size_t)n || nl + l + 1 >= sizeof(name))
                        return;
                if (nl)
                        name[nl++] = '.';
                memcpy(name + nl, q + off, l);
                nl += l;
                off += l;
        }
        name[nl] = '\0';
        off++;
        if (off + 4 > (size_t)n)
                return;
        int qtype = q[off] << 8 | q[off + 1];
        off += 4;
        memcpy(r, q, off);
        r[2] = (uint8_t)(0x84 | (q[2] & 0x01));
        r[3] = 0x80;
        r[4] = 0;
        r[5] = 1;
        memset(r + 6, 0, 6);
        size_t len = off;
        uint8_t a[4] = {0};
        bool known = false;
        if (strcasecmp(name, "dns.test") == 0) {
                memcpy(a, (uint8_t[]){127, 0, 0, 1}, 4);
                known = true;
        } else if (strcasecmp(name, "rebind.test") == 0) {
                memcpy(a, (uint8_t[]){169, 254, 169, 254}, 4);
                known = true;
        }
        if (strcasecmp(name, "slow.test") == 0)
                return; /* never answered */
        if (!known)
                r[3] |= 3; /* NXDOMAIN */
        else if (qtype == 1) {
                static const uint8_t rr[] = {0xc0, 0x0c, 0, 1, 0, 1, 0, 0, 0, 60, 0, 4};
                r[7] = 1;
                memcpy(r + len, rr, sizeof(rr));
                memcpy(r + len + sizeof(rr), a, 4);
                len += sizeof(rr) + 4;
        }
        sendto(fd, r, len, 0, (struct sockaddr *)&from, fl);
}

/* ---- sockets ---- */

static void add_listener(enum netgate_proto proto, uint16_t *ret_port)
{
        struct al_error err = {0};
        int fd = ngt_loopback_socket(SOCK_STREAM);
        *ret_port = ngt_local_port(fd);
        cr_assert_eq(netgate_add_listener(gate, proto, fd, &err), 0, "%s", err.msg);
}

static void strv_add(char ***v, size_t *n, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));
static void strv_add(char ***v, size_t *n, const char *fmt, ...)
{
        char buf[512];
        va_list ap;
        va_start(ap, fmt);
        vsnprintf(buf, sizeof(buf), fmt, ap);
        va_end(ap);
        *v = strv_append(*v, n, buf);
}

static void host_add(struct policy *p, const char *name, const char *ip)
{
        p->net_hosts = xrealloc(p->net_hosts, p->n_net_hosts + 1, sizeof(*p->net_hosts));
        p->net_hosts[p->n_net_hosts].key = xstrdup(name);
        p->net_hosts[p->n_net_hosts].value = xstrdup(ip);
        p->n_net_hosts++;
}

static void start_gate(void)
{
        struct al_error err = {0};
        gate = netgate_new(base, pol, "sbx-test", &err);
        cr_assert_not_null(gate, "%s", err.msg);
        netgate_set_recorder(gate, recorder, NULL);
        char ns[32];
        snprintf(ns, sizeof(ns), "127.0.0.1:%u", dns_port);
        cr_assert_eq(netgate_set_nameserver(gate, ns, &err), 0, "%s", err.msg);
        add_listener(NETGATE_PROTO_HTTP, &gate_http_port);
        add_listener(NETGATE_PROTO_SOCKS5, &gate_socks_port);
}

/* The default policy; tests change it and call start_gate(). */
static void setup_servers(void)
{
        signal(SIGPIPE, SIG_IGN);
        base = event_base_new();
        cr_assert_not_null(base);

        upstream = evhttp_new(base);
        struct evhttp_bound_socket *bs = evhttp_bind_socket_with_handle(upstream, "127.0.0.1", 0);
        cr_assert_not_null(bs);
        up_port = ngt_local_port(evhttp_bound_socket_get_fd(bs));
        evhttp_set_gencb(upstream, up_handler, NULL);
        evhttp_set_allowed_methods(upstream, EVHTTP_REQ_GET | EVHTTP_REQ_POST | EVHTTP_REQ_HEAD |
                                                 EVHTTP_REQ_PUT);

        int efd = ngt_loopback_socket(SOCK_STREAM);
        echo_port = ngt_local_port(efd);
        echo = evconnlistener_new(base, echo_accept, NULL, LEV_OPT_CLOSE_ON_FREE, 0, efd);
        cr_assert_not_null(echo);

        dns_fd = ngt_loopback_socket(SOCK_DGRAM);
        dns_port = ngt_local_port(dns_fd);
        dns_ev = event_new(base, dns_fd, EV_READ | EV_PERSIST, dns_read, NULL);
        event_add(dns_ev, NULL);

        /* A port nobody listens on. */
        int cfd = ngt_loopback_socket(SOCK_STREAM);
        closed_port = ngt_local_port(cfd);
        close(cfd);

        memset(&seen, 0, sizeof(seen));
        n_recs = 0;

        pol = policy_new();
        size_t *n = &pol->n_net_allow;
        strv_add(&pol->net_allow, n, "upstream.test:%u", up_port);
        strv_add(&pol->net_allow, n, "echo.test:%u", echo_port);
        strv_add(&pol->net_allow, n, "127.0.0.1:%u", up_port);
        strv_add(&pol->net_allow, n, "127.0.0.1:%u", echo_port);
        strv_add(&pol->net_allow, n, "*.wild.test:%u", up_port);
        strv_add(&pol->net_allow, n, "dns.test:%u", up_port);
        strv_add(&pol->net_allow, n, "nx.test:%u", up_port);
        strv_add(&pol->net_allow, n, "rebind.test:%u", up_port);
        strv_add(&pol->net_allow, n, "slow.test:%u", up_port);
        strv_add(&pol->net_allow, n, "closed.test:%u", closed_port);
        strv_add(&pol->net_allow, n, "evil.test");
        strv_add(&pol->net_deny, &pol->n_net_deny, "evil.test");
        strv_add(&pol->net_allow_private, &pol->n_net_allow_private, "127.0.0.0/8");
        host_add(pol, "upstream.test", "127.0.0.1");
        host_add(pol, "Echo.Test.", "127.0.0.1");
        host_add(pol, "a.wild.test", "127.0.0.1");
        host_add(pol, "closed.test", "127.0.0.1");
}

static void setup(void)
{
        setup_servers();
        start_gate();
}

static void teardown(void)
{
        gate = netgate_free(gate);
        /* Let queries failed by the shutdown call back and free themselves. */
        for (int i = 0; i < 10; i++)
                event_base_loop(base, EVLOOP_NONBLOCK);
        pol = policy_free(pol);
        evhttp_free(upstream);
        evconnlistener_free(echo);
        for (size_t i = 0; i < sizeof(echo_conns) / sizeof(echo_conns[0]); i++)
                if (echo_conns[i])
                        echo_free(echo_conns[i]);
        event_free(dns_ev);
        close(dns_fd);
        event_base_free(base);
}

/* ---- the test client ---- */

struct tc {
        int fd;
        char *in;
        size_t in_len, in_cap;
        char *out;
        size_t out_len, out_off;
        bool eof;
};

static struct tc *tc_open(uint16_t port)
{
        struct tc *t = xcalloc(1, sizeof(*t));
        t->fd = ngt_connect_loopback(port);
        return t;
}

static void tc_close(struct tc *t)
{
        close(t->fd);
        free(t->in);
        free(t->out);
        free(t);
}

static void tc_send(struct tc *t, const void *data, size_t len)
{
        t->out = xrealloc(t->out, t->out_len + len, 1);
        memcpy(t->out + t->out_len, data, len);
        t->out_len += len;
}

static void tc_sends(struct tc *t, const char *s)
{
        tc_send(t, s, strlen(s));
}

static void tc_reset(struct tc *t)
{
        t->in_len = 0;
}

typedef bool (*tc_done_fn)(struct tc *t, size_t arg);

static bool tc_drive(struct tc *t, tc_done_fn done, size_t arg)
{
        uint64_t deadline = now_monotonic_us() + 10 * 1000000ULL;
        while (now_monotonic_us() < deadline) {
                event_base_loop(base, EVLOOP_NONBLOCK);
                while (t->out_off < t->out_len) {
                        ssize_t n = send(t->fd, t->out + t->out_off, t->out_len - t->out_off,
                                         MSG_DONTWAIT | MSG_NOSIGNAL);
                        if (n <= 0)
                                break;
                        t->out_off += (size_t)n;
                }
                for (;;) {
                        if (t->in_cap - t->in_len < 65536) {
                                t->in_cap = t->in_cap * 2 + 65536;
                                t->in = xrealloc(t->in, t->in_cap, 1);
                        }
                        ssize_t n =
                            recv(t->fd, t->in + t->in_len, t->in_cap - t->in_len - 1, MSG_DONTWAIT);
                        if (n > 0) {
                                t->in_len += (size_t)n;
                                continue;
                        }
                        if (n == 0 || (errno != EAGAIN && errno != EINTR))
                                t->eof = true;
                        break;
                }
                t->in[t->in_len] = '\0';
                if (done(t, arg))
                        return true;
                if (t->eof)
                        return done(t, arg);
                struct pollfd pfd = {t->fd, POLLIN | (t->out_off < t->out_len ? POLLOUT : 0), 0};
                poll(&pfd, 1, 1);
        }
        return false;
}

static bool have_bytes(struct tc *t, size_t n)
{
        return t->in_len >= n;
}

static bool have_eof(struct tc *t, size_t n)
{
        return t->eof;
}

static bool has_text(struct tc *t, size_t s)
{
        return strstr(t->in, (const char *)s) != NULL;
}

static bool have_head(struct tc *t, size_t n)
{
        return strstr(t->in, "\r\n\r\n") != NULL;
}

/* Records for tunnels come when both sides have closed. */
static void wait_records(size_t n)
{
        ngt_wait_records(base, &n_recs, n);
}

static const char *body_of(struct tc *t)
{
        return ngt_body_of(t->in);
}

/* A whole response: Content-Length, or the end of chunked framing. */
static bool have_response(struct tc *t, size_t unused)
{
        return ngt_response_complete(t->in, t->in_len, t->eof);
}

static int status_of(struct tc *t)
{
        return ngt_status_of(t->in, t->in_len);
}

static bool has_header(struct tc *t, const char *line)
{
        const char *body = body_of(t);
        const char *h = strstr(t->in, line);
        return h && body && h < body;
}

static struct tc *http_get(const char *target, const char *extra)
{
        struct tc *t = tc_open(gate_http_port);
        char *req =
            xasprintf("GET %s HTTP/1.1\r\nHost: ignored\r\n%s\r\n", target, extra ? extra : "");
        tc_sends(t, req);
        free(req);
        cr_assert(tc_drive(t, have_response, 0), "no response to GET %s: %s", target, t->in);
        return t;
}

static const struct rec *last_rec(void)
{
        cr_assert_gt(n_recs, 0, "no record");
        return &recs[n_recs - 1];
}

/* ---- tests ---- */

Test(netgate_gate, plain_get, .init = setup, .fini = teardown)
{
        char *url = xasprintf("http://UPSTREAM.test.:%u/hello?x=1", up_port);
        struct tc *t = http_get(url, "Proxy-Authorization: Basic c2VjcmV0\r\n"
                                     "Proxy-Connection: keep-alive\r\n"
                                     "Connection: X-Secret\r\nX-Secret: 1\r\n");
        cr_expect_eq(status_of(t), 200, "%s", t->in);
        cr_expect(strstr(body_of(t), "hello from upstream /hello?x=1") != NULL, "%s", t->in);
        cr_expect_str_eq(seen.uri, "/hello?x=1", "origin-form request line");
        char *host = xasprintf("upstream.test:%u", up_port);
        cr_expect_str_eq(seen.host, host, "Host is rewritten from the URI");
        cr_expect_not(seen.proxy_auth, "Proxy-Authorization is not forwarded");
        cr_expect_not(seen.proxy_conn);
        cr_expect_not(seen.secret, "Connection-listed fields are not forwarded");

        /* The record for an allowed request comes when its response is done. */
        const struct rec *r = last_rec();
        cr_expect_str_eq(r->protocol, "http");
        cr_expect_str_eq(r->method, "GET");
        cr_expect_str_eq(r->host, "upstream.test");
        cr_expect_eq(r->port, up_port);
        cr_expect_str_eq(r->address, "127.0.0.1");
        cr_expect_str_eq(r->decision, "allow");
        cr_expect_str_eq(r->reason, "");
        char *rule = xasprintf("upstream.test:%u", up_port);
        cr_expect_str_eq(r->rule, rule);
        cr_expect_eq(r->status, 200);
        cr_expect_gt(r->up, 0);
        cr_expect_geq(r->down, t->in_len);
        free(url);
        free(host);
        free(rule);
        tc_close(t);

        struct netgate_stats st;
        netgate_get_stats(gate, &st);
        cr_expect_eq(st.connections, 1);
        cr_expect_eq(st.allowed, 1);
        cr_expect_eq(st.denied, 0);
        cr_expect_gt(st.bytes_down, 0);
}

Test(netgate_gate, keep_alive_and_pipelining, .init = setup, .fini = teardown)
{
        struct tc *t = tc_open(gate_http_port);
        char *req = xasprintf("GET http://upstream.test:%u/one HTTP/1.1\r\n\r\n", up_port);
        tc_sends(t, req);
        cr_assert(tc_drive(t, have_response, 0));
        cr_expect_eq(status_of(t), 200);
        cr_expect(strstr(t->in, "/one") != NULL);
        cr_expect_not(strcasestr(t->in, "Connection: close"));

        /* Two more at once: pipelined, one to another upstream. */
        tc_reset(t);
        char *two = xasprintf("GET http://upstream.test:%u/two HTTP/1.1\r\n\r\n"
                              "GET http://127.0.0.1:%u/three HTTP/1.1\r\n\r\n",
                              up_port, up_port);
        tc_sends(t, two);
        /* Each body ends with its path: "/three" last means both are in. */
        cr_assert(tc_drive(t, has_text, (size_t) "/three"), "%s", t->in);
        cr_expect(strstr(t->in, "/two") != NULL, "%s", t->in);
        cr_expect_lt(strstr(t->in, "/two"), strstr(t->in, "/three"), "answered in order");
        cr_expect_eq(n_recs, 3);
        cr_expect_str_eq(recs[2].host, "127.0.0.1");
        struct netgate_stats st;
        netgate_get_stats(gate, &st);
        cr_expect_eq(st.connections, 1, "one client connection for three requests");
        free(req);
        free(two);
        tc_close(t);
}

Test(netgate_gate, request_bodies, .init = setup, .fini = teardown)
{
        size_t n = 3 * 1024 * 1024 + 17;
        char *body = malloc(n);
        for (size_t i = 0; i < n; i++)
                body[i] = (char)ngt_pattern(i);

        struct tc *t = tc_open(gate_http_port);
        char *req = xasprintf("POST http://upstream.test:%u/echo HTTP/1.1\r\n"
                              "Content-Length: %zu\r\n\r\n",
                              up_port, n);
        tc_sends(t, req);
        tc_send(t, body, n);
        cr_assert(tc_drive(t, have_response, 0), "%s", t->in);
        cr_expect_eq(status_of(t), 200);
        cr_expect_eq(seen.body_len, n);
        char *want = xasprintf("got %zu", n);
        cr_expect(strstr(body_of(t), want) != NULL, "%s", t->in);
        free(want);

        /* Chunked upload in uneven chunks on the same connection. */
        tc_reset(t);
        free(req);
        req = xasprintf("POST http://upstream.test:%u/echo HTTP/1.1\r\n"
                        "Transfer-Encoding: chunked\r\n\r\n",
                        up_port);
        tc_sends(t, req);
        size_t sent = 0, sizes[] = {1, 4095, 65536, 300000, 7, 1000000};
        for (size_t i = 0; i < sizeof(sizes) / sizeof(sizes[0]); i++) {
                char line[32];
                snprintf(line, sizeof(line), "%zx;ext=1\r\n", sizes[i]);
                tc_sends(t, line);
                tc_send(t, body + sent, sizes[i]);
                tc_sends(t, "\r\n");
                sent += sizes[i];
        }
        tc_sends(t, "0\r\nX-Trailer: dropped\r\n\r\n");
        cr_assert(tc_drive(t, have_response, 0), "%s", t->in);
        cr_expect_eq(status_of(t), 200);
        cr_expect_eq(seen.body_len, sent);
        free(req);
        free(body);
        tc_close(t);
}

Test(netgate_gate, large_and_chunked_downloads, .init = setup, .fini = teardown)
{
        size_t n = 4 * 1024 * 1024 + 3;
        char *url = xasprintf("http://upstream.test:%u/big/%zu", up_port, n);
        struct tc *t = http_get(url, NULL);
        cr_expect_eq(status_of(t), 200);
        const char *b = body_of(t);
        size_t got = t->in_len - (size_t)(b - t->in);
        cr_assert_eq(got, n);
        size_t bad = 0;
        for (size_t i = 0; i < n; i++)
                bad += (uint8_t)b[i] != ngt_pattern(i);
        cr_expect_eq(bad, 0);
        cr_expect_geq(last_rec()->down, n);
        tc_close(t);
        free(url);

        url = xasprintf("http://upstream.test:%u/chunked", up_port);
        t = http_get(url, NULL);
        cr_expect_eq(status_of(t), 200);
        cr_expect(has_header(t, "Transfer-Encoding: chunked"));
        /* De-chunk and compare. */
        const char *p = body_of(t);
        char out[256];
        size_t o = 0;
        for (;;) {
                size_t sz = strtoul(p, NULL, 16);
                p = strstr(p, "\r\n") + 2;
                if (sz == 0)
                        break;
                cr_assert_lt(o + sz, sizeof(out));
                memcpy(out + o, p, sz);
                o += sz;
                p += sz + 2;
        }
        out[o] = '\0';
        cr_expect_str_eq(out, "part 0;part 1;part 2;part 3;part 4;");
        tc_close(t);
        free(url);

        url = xasprintf("http://upstream.test:%u/head", up_port);
        t = tc_open(gate_http_port);
        char *req = xasprintf("HEAD %s HTTP/1.1\r\n\r\n", url);
        tc_sends(t, req);
        cr_assert(tc_drive(t, have_head, 0));
        cr_expect_eq(status_of(t), 200);
        cr_expect(has_header(t, "Content-Length: 1234"), "a HEAD answer keeps its length: %s",
                  t->in);
        /* No body follows: the next request on the connection works. */
        tc_reset(t);
        tc_sends(t, req);
        cr_assert(tc_drive(t, have_head, 0));
        cr_expect_eq(status_of(t), 200, "%s", t->in);
        cr_expect_eq(t->in_len, (size_t)(body_of(t) - t->in), "no body after a HEAD answer");

        /* An upstream that sends a body after a HEAD answer anyway: the
         * stray bytes are never read as the next response. */
        free(req);
        req = xasprintf("HEAD http://upstream.test:%u/sloppy HTTP/1.1\r\n\r\n", up_port);
        for (int i = 0; i < 3; i++) {
                tc_reset(t);
                tc_sends(t, req);
                cr_assert(tc_drive(t, have_head, 0));
                cr_expect_eq(status_of(t), 200, "%d: %s", i, t->in);
                cr_expect_eq(t->in_len, (size_t)(body_of(t) - t->in), "%d: %s", i, t->in);
        }
        free(req);
        free(url);
        tc_close(t);
}

static bool connect_established(struct tc *t, size_t extra)
{
        const char *b = body_of(t);
        return b && t->in_len - (size_t)(b - t->in) >= extra;
}

Test(netgate_gate, connect_tunnel, .init = setup, .fini = teardown)
{
        struct tc *t = tc_open(gate_http_port);
        char *req = xasprintf("CONNECT echo.test:%u HTTP/1.1\r\nHost: x\r\n\r\nearly", echo_port);
        tc_sends(t, req);
        cr_assert(tc_drive(t, connect_established, 5), "%s", t->in);
        cr_expect_eq(strncmp(t->in, "HTTP/1.1 200 ", 13), 0, "%s", t->in);
        cr_expect_str_eq(body_of(t), "early", "bytes sent with CONNECT are relayed");

        size_t n = 2 * 1024 * 1024;
        char *data = malloc(n);
        for (size_t i = 0; i < n; i++)
                data[i] = (char)ngt_pattern(i);
        tc_reset(t);
        tc_send(t, data, n);
        cr_assert(tc_drive(t, have_bytes, n));
        cr_expect_eq(memcmp(t->in, data, n), 0);

        /* Half-close travels through; the echo server then closes. */
        shutdown(t->fd, SHUT_WR);
        cr_expect(tc_drive(t, have_eof, 0));
        tc_close(t);
        wait_records(1);
        const struct rec *r = last_rec();
        cr_expect_str_eq(r->protocol, "connect");
        cr_expect_str_eq(r->method, "CONNECT");
        cr_expect_str_eq(r->host, "echo.test");
        cr_expect_str_eq(r->decision, "allow");
        cr_expect_eq(r->status, 200);
        cr_expect_eq(r->up, n + 5);
        cr_expect_eq(r->down, n + 5);
        free(req);
        free(data);
}

static void socks_greet(struct tc *t)
{
        tc_send(t, (uint8_t[]){5, 1, 0}, 3);
        cr_assert(tc_drive(t, have_bytes, 2));
        cr_assert_eq(t->in[0], 5);
        cr_assert_eq(t->in[1], 0);
        tc_reset(t);
}

static void socks_domain(struct tc *t, const char *name, size_t len, uint16_t port)
{
        uint8_t req[300] = {5, 1, 0, 3, (uint8_t)len};
        memcpy(req + 5, name, len);
        req[5 + len] = (uint8_t)(port >> 8);
        req[6 + len] = (uint8_t)port;
        tc_send(t, req, 7 + len);
}

Test(netgate_gate, socks5_domain, .init = setup, .fini = teardown)
{
        struct tc *t = tc_open(gate_socks_port);
        socks_greet(t);
        socks_domain(t, "ECHO.test.", 10, echo_port);
        cr_assert(tc_drive(t, have_bytes, 10));
        cr_expect_eq(t->in[1], 0, "succeeded");
        cr_expect_eq(t->in[3], 1);
        tc_reset(t);
        tc_sends(t, "ping");
        cr_assert(tc_drive(t, have_bytes, 4));
        cr_expect_str_eq(t->in, "ping");
        tc_close(t);
        wait_records(1);
        const struct rec *r = last_rec();
        cr_expect_str_eq(r->protocol, "socks5");
        cr_expect_str_eq(r->host, "echo.test");
        cr_expect_str_eq(r->decision, "allow");
        cr_expect_eq(r->up, 4);
}

Test(netgate_gate, socks5_greeting_and_request_together, .init = setup, .fini = teardown)
{
        struct tc *t = tc_open(gate_socks_port);
        uint8_t msg[] = {
            5,   1,  0, 5, 1, 0, 1, 127, 0, 0, 1, (uint8_t)(echo_port >> 8), (uint8_t)echo_port,
            'h', 'i'};
        tc_send(t, msg, sizeof(msg));
        cr_assert(tc_drive(t, have_bytes, 2 + 10 + 2));
        cr_expect_eq(t->in[3], 0);
        cr_expect_eq(memcmp(t->in + 12, "hi", 2), 0);
        tc_close(t);
}

static void socks_refused(const uint8_t *req, size_t len, int code, const char *reason)
{
        struct tc *t = tc_open(gate_socks_port);
        socks_greet(t);
        tc_send(t, req, len);
        cr_assert(tc_drive(t, have_bytes, 10));
        cr_expect_eq(t->in[0], 5);
        cr_expect_eq(t->in[1], code, "reply %d, want %d", t->in[1], code);
        cr_expect(tc_drive(t, have_eof, 0), "the gate closes after refusing");
        const struct rec *r = last_rec();
        cr_expect_str_eq(r->decision, "deny");
        cr_expect_str_eq(r->reason, reason);
        cr_expect_eq(r->status, code);
        tc_close(t);
}

Test(netgate_gate, socks5_refusals, .init = setup, .fini = teardown)
{
        uint8_t req[300];
        static const char nul[] = "evil.test\0.allowed.test";
        size_t len = sizeof(nul) - 1;
        memcpy(req, (uint8_t[]){5, 1, 0, 3, (uint8_t)len}, 5);
        memcpy(req + 5, nul, len);
        req[5 + len] = 0;
        req[6 + len] = 80;
        socks_refused(req, 7 + len, 0x02, "bad_host");
        cr_expect_str_eq(last_rec()->host, "evil.test\\x00.allowed.test");

        uint8_t bind[] = {5, 2, 0, 1, 127, 0, 0, 1, 0, 80};
        socks_refused(bind, sizeof(bind), 0x07, "command_not_supported");
        uint8_t udp[] = {5, 3, 0, 1, 0, 0, 0, 0, 0, 0};
        socks_refused(udp, sizeof(udp), 0x07, "command_not_supported");
        uint8_t atyp[] = {5, 1, 0, 9, 0, 0, 0, 0, 0, 0};
        socks_refused(atyp, sizeof(atyp), 0x08, "address_type_not_supported");
        uint8_t lit[] = {5, 1, 0, 1, 10, 0, 0, 1, 0, 80};
        socks_refused(lit, sizeof(lit), 0x02, "ip_literal_not_listed");

        uint8_t dom[64] = {5, 1, 0, 3, 9};
        memcpy(dom + 5, "EVIL.TEST", 9);
        dom[14] = 1;
        dom[15] = 0xbb;
        socks_refused(dom, 16, 0x02, "denied_by_rule");
        cr_expect_str_eq(last_rec()->rule, "evil.test");

        struct tc *t = tc_open(gate_socks_port);
        tc_send(t, (uint8_t[]){5, 1, 2}, 3);
        cr_assert(tc_drive(t, have_bytes, 2));
        cr_expect_eq((uint8_t)t->in[1], 0xff, "no acceptable method");
        tc_close(t);
}

static struct tc *http_denied(const char *target, int status, const char *reason)
{
        struct tc *t = http_get(target, NULL);
        cr_expect_eq(status_of(t), status, "%s: %s", target, t->in);
        char *hdr = xasprintf("\r\nX-Airlock-Denied: %s\r\n", reason);
        cr_expect(has_header(t, hdr), "%s: want %s in %s", target, reason, t->in);
        free(hdr);
        const struct rec *r = last_rec();
        cr_expect_str_eq(r->decision, "deny");
        cr_expect_str_eq(r->reason, reason);
        cr_expect_eq(r->status, status);
        cr_expect(tc_drive(t, have_eof, 0), "a refusal closes the connection");
        return t;
}

Test(netgate_gate, http_refusals, .init = setup, .fini = teardown)
{
        int before = seen.count;
        struct tc *t = http_denied("http://unlisted.test/", 403, "not_allowed");
        cr_expect(strstr(body_of(t), "unlisted.test:80") != NULL, "%s", t->in);
        cr_expect(strstr(body_of(t), "rule: none") != NULL, "%s", t->in);
        cr_expect_str_eq(last_rec()->host, "unlisted.test");
        tc_close(t);

        t = http_denied("http://EVIL.TEST./x", 403, "denied_by_rule");
        cr_expect(strstr(body_of(t), "evil.test:80") != NULL, "%s", t->in);
        cr_expect(strstr(body_of(t), "rule: evil.test") != NULL, "%s", t->in);
        cr_expect_str_eq(last_rec()->rule, "evil.test");
        tc_close(t);

        tc_close(http_denied("http://upstream.test.evil.test/", 403, "not_allowed"));
        tc_close(http_denied("http://upstream.test:1/", 403, "port_not_allowed"));
        tc_close(http_denied("http://b.a.wild.test.evil.test/", 403, "not_allowed"));
        tc_close(http_denied("http://evil.test%00.upstream.test/", 403, "bad_host"));

        char *url = xasprintf("http://2130706433:%u/", up_port);
        tc_close(http_denied(url, 403, "ip_literal_not_listed"));
        free(url);
        url = xasprintf("http://0x7f.1:%u/", up_port);
        tc_close(http_denied(url, 403, "ip_literal_not_listed"));
        free(url);
        url = xasprintf("http://[::ffff:127.0.0.1]:%u/", up_port);
        tc_close(http_denied(url, 403, "ip_literal_not_listed"));
        free(url);
        cr_expect_eq(seen.count, before, "no refused request reached the upstream");

        /* A CONNECT refusal is a 403 as well. */
        t = tc_open(gate_http_port);
        tc_sends(t, "CONNECT unlisted.test:443 HTTP/1.1\r\n\r\n");
        cr_assert(tc_drive(t, have_response, 0));
        cr_expect_eq(status_of(t), 403);
        cr_expect_str_eq(last_rec()->protocol, "connect");
        tc_close(t);

        struct netgate_stats st;
        netgate_get_stats(gate, &st);
        cr_expect_eq(st.allowed, 0);
        cr_expect_eq(st.denied, n_recs);
}

Test(netgate_gate, malformed_requests, .init = setup, .fini = teardown)
{
        static const struct {
                const char *req;
                int status;
                const char *reason;
        } cases[] = {
            {"GET https://upstream.test/ HTTP/1.1\r\n\r\n", 501, "unsupported"},
            {"GET /relative HTTP/1.1\r\n\r\n", 400, "bad_request"},
            {"GET http://a.test/ HTTP/2.0\r\n\r\n", 505, "unsupported"},
            {"POST http://upstream.test/ HTTP/1.1\r\nContent-Length: 3\r\n"
             "Transfer-Encoding: chunked\r\n\r\n",
             400, "bad_request"},
            {"GET http://upstream.test/ HTTP/1.1\r\nX : y\r\n\r\n", 400, "bad_request"},
            {"GET http://allowed@evil.test/ HTTP/1.1\r\n\r\n", 400, "bad_request"},
        };
        for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
                struct tc *t = tc_open(gate_http_port);
                tc_sends(t, cases[i].req);
                cr_assert(tc_drive(t, have_response, 0), "%zu", i);
                cr_expect_eq(status_of(t), cases[i].status, "%zu: %s", i, t->in);
                /* Repeated refusals of one kind share a record (aggregation),
                 * so the reason is read from the answer. */
                char want[128];
                snprintf(want, sizeof(want), "X-Airlock-Denied: %s\r\n", cases[i].reason);
                cr_expect_not_null(strstr(t->in, want), "%zu: %s", i, t->in);
                tc_close(t);
        }

        struct tc *t = tc_open(gate_http_port);
        tc_sends(t, "GET http://upstream.test/ HTTP/1.1\r\n");
        char field[1024];
        memset(field, 'a', sizeof(field));
        memcpy(field, "X-Pad: ", 7);
        memcpy(field + sizeof(field) - 2, "\r\n", 2);
        for (int i = 0; i < 40; i++)
                tc_send(t, field, sizeof(field));
        cr_assert(tc_drive(t, have_response, 0));
        cr_expect_eq(status_of(t), 431);
        cr_expect_str_eq(last_rec()->reason, "head_too_large");
        tc_close(t);
}

Test(netgate_gate, private_addresses)
{
        setup_servers();
        /* No allowPrivate: the names and the listed literal all land on
         * loopback and are refused. */
        for (size_t i = 0; i < pol->n_net_allow_private; i++)
                free(pol->net_allow_private[i]);
        free(pol->net_allow_private);
        pol->net_allow_private = NULL;
        pol->n_net_allow_private = 0;
        start_gate();

        char *url = xasprintf("http://127.0.0.1:%u/", up_port);
        struct tc *t = http_denied(url, 403, "private_address");
        cr_expect_str_eq(last_rec()->address, "127.0.0.1");
        cr_expect_str_eq(last_rec()->rule, "loopback 127.0.0.0/8");
        cr_expect(strstr(body_of(t), "private_address") != NULL);
        tc_close(t);
        free(url);

        url = xasprintf("http://upstream.test:%u/", up_port);
        tc_close(http_denied(url, 403, "private_address"));
        cr_expect_str_eq(last_rec()->host, "upstream.test");
        cr_expect_str_eq(last_rec()->address, "127.0.0.1");
        free(url);

        t = tc_open(gate_socks_port);
        socks_greet(t);
        socks_domain(t, "echo.test", 9, echo_port);
        cr_assert(tc_drive(t, have_bytes, 10));
        cr_expect_eq(t->in[1], 0x02);
        cr_expect_str_eq(last_rec()->reason, "private_address");
        tc_close(t);
        cr_expect_eq(seen.count, 0);
        teardown();
}

Test(netgate_gate, dns, .init = setup, .fini = teardown)
{
        char *url = xasprintf("http://dns.test:%u/resolved", up_port);
        struct tc *t = http_get(url, NULL);
        cr_expect_eq(status_of(t), 200, "%s", t->in);
        cr_expect_str_eq(last_rec()->address, "127.0.0.1");
        tc_close(t);
        free(url);

        /* The answer is checked: 169.254.169.254 is refused even for an
         * allowed name. */
        url = xasprintf("http://rebind.test:%u/", up_port);
        tc_close(http_denied(url, 403, "private_address"));
        cr_expect_str_eq(last_rec()->address, "169.254.169.254");
        cr_expect_str_eq(last_rec()->rule, "link-local 169.254.0.0/16");
        free(url);

        url = xasprintf("http://nx.test:%u/", up_port);
        t = http_get(url, NULL);
        cr_expect_eq(status_of(t), 502, "%s", t->in);
        cr_expect(has_header(t, "\r\nX-Airlock-Error: dns_failed\r\n"), "%s", t->in);
        cr_expect_str_eq(last_rec()->decision, "allow");
        cr_expect_str_eq(last_rec()->reason, "dns_failed");
        tc_close(t);
        free(url);
}

Test(netgate_gate, upstream_failure, .init = setup, .fini = teardown)
{
        char *url = xasprintf("http://closed.test:%u/", closed_port);
        struct tc *t = http_get(url, NULL);
        cr_expect_eq(status_of(t), 502, "%s", t->in);
        cr_expect(has_header(t, "\r\nX-Airlock-Error: upstream_failed\r\n"), "%s", t->in);
        cr_expect_str_eq(last_rec()->reason, "upstream_failed");
        tc_close(t);
        free(url);

        t = tc_open(gate_socks_port);
        socks_greet(t);
        socks_domain(t, "closed.test", 11, closed_port);
        cr_assert(tc_drive(t, have_bytes, 10));
        cr_expect_eq(t->in[1], 0x05, "connection refused");
        tc_close(t);
}

Test(netgate_gate, budget_requests)
{
        setup_servers();
        pol->budget.requests = 2;
        start_gate();
        char *url = xasprintf("http://upstream.test:%u/", up_port);
        tc_close(http_get(url, NULL));
        tc_close(http_get(url, NULL));
        struct tc *t = http_denied(url, 429, "budget_requests");
        cr_expect(strstr(body_of(t), "budget_requests") != NULL);
        tc_close(t);
        t = tc_open(gate_socks_port);
        socks_greet(t);
        socks_domain(t, "echo.test", 9, echo_port);
        cr_assert(tc_drive(t, have_bytes, 10));
        cr_expect_eq(t->in[1], 0x02);
        cr_expect_str_eq(last_rec()->reason, "budget_requests");
        tc_close(t);
        free(url);
        teardown();
}

Test(netgate_gate, budget_bytes)
{
        setup_servers();
        pol->budget.bytes = 256 * 1024;
        start_gate();
        struct tc *t = tc_open(gate_http_port);
        char *req = xasprintf("CONNECT echo.test:%u HTTP/1.1\r\n\r\n", echo_port);
        tc_sends(t, req);
        cr_assert(tc_drive(t, connect_established, 0));
        tc_reset(t);
        size_t n = 1024 * 1024;
        char *data = calloc(1, n);
        tc_send(t, data, n);
        cr_expect(tc_drive(t, have_eof, 0), "the tunnel is cut");
        cr_expect_lt(t->in_len, n);
        cr_expect_str_eq(last_rec()->reason, "budget_bytes");
        cr_expect_leq(last_rec()->up + last_rec()->down, 256 * 1024);
        tc_close(t);

        char *url = xasprintf("http://upstream.test:%u/", up_port);
        tc_close(http_denied(url, 429, "budget_bytes"));
        free(url);
        free(req);
        free(data);
        teardown();
}

Test(netgate_gate, rate_limited_tunnel)
{
        /* With a rate the tunnel runs through bounded bufferevents. */
        setup_servers();
        pol->budget.rate = 1024ULL * 1024 * 1024;
        start_gate();
        struct tc *t = tc_open(gate_http_port);
        char *req = xasprintf("CONNECT 127.0.0.1:%u HTTP/1.1\r\n\r\n", echo_port);
        tc_sends(t, req);
        cr_assert(tc_drive(t, connect_established, 0));
        cr_expect_eq(status_of(t), 200);
        tc_reset(t);
        size_t n = 512 * 1024;
        char *data = malloc(n);
        for (size_t i = 0; i < n; i++)
                data[i] = (char)ngt_pattern(i);
        tc_send(t, data, n);
        cr_assert(tc_drive(t, have_bytes, n));
        cr_expect_eq(memcmp(t->in, data, n), 0);
        shutdown(t->fd, SHUT_WR);
        cr_expect(tc_drive(t, have_eof, 0));
        tc_close(t);
        wait_records(1);
        cr_expect_eq(last_rec()->up, n);
        free(req);
        free(data);
        teardown();
}

Test(netgate_gate, bad_policy_is_named)
{
        struct event_base *b = event_base_new();
        struct policy *p = policy_new();
        struct al_error err = {0};
        p->net_allow_private = strv_append(p->net_allow_private, &p->n_net_allow_private, "10/8");
        cr_expect_null(netgate_new(b, p, "x", &err));
        cr_expect(strstr(err.msg, "network.allowPrivate[0]") != NULL, "%s", err.msg);
        policy_free(p);

        p = policy_new();
        p->net_allow = strv_append(p->net_allow, &p->n_net_allow, "ok.test");
        p->net_allow = strv_append(p->net_allow, &p->n_net_allow, "not a host");
        cr_expect_null(netgate_new(b, p, "x", &err));
        cr_expect(strstr(err.msg, "network.allow[1]") != NULL, "%s", err.msg);
        policy_free(p);

        struct netgate *g;
        p = policy_new();
        g = netgate_new(b, p, "x", &err);
        cr_assert_not_null(g);
        int fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
        cr_expect_lt(netgate_add_listener(g, NETGATE_PROTO_HTTP, fd, &err), 0,
                     "a socket that is not listening is refused");
        close(fd);
        netgate_free(g);
        policy_free(p);
        event_base_free(b);
}

Test(netgate_gate, dns_in_flight_when_client_leaves_and_at_shutdown, .init = setup,
     .fini = teardown)
{
        char *get = xasprintf("GET http://slow.test:%u/ HTTP/1.1\r\n\r\n", up_port);
        char *tunnel = xasprintf("CONNECT slow.test:%u HTTP/1.1\r\n\r\n", up_port);
        struct tc *a = tc_open(gate_http_port);
        tc_sends(a, tunnel);
        struct tc *b = tc_open(gate_http_port);
        tc_sends(b, get);
        /* Send both and let the queries go out; nobody answers them. */
        for (int i = 0; i < 50; i++) {
                tc_drive(a, have_bytes, 0);
                tc_drive(b, have_bytes, 0);
                poll(NULL, 0, 2);
        }
        cr_expect_eq(n_recs, 0);
        tc_close(a);
        for (int i = 0; i < 200 && n_recs == 0; i++) {
                event_base_loop(base, EVLOOP_NONBLOCK);
                poll(NULL, 0, 1);
        }
        cr_assert_eq(n_recs, 1, "a tunnel client that leaves is noticed while resolving");
        cr_expect_str_eq(last_rec()->protocol, "connect");
        cr_expect_str_eq(last_rec()->reason, "client_closed");
        struct netgate_stats st;
        netgate_get_stats(gate, &st);
        cr_expect_eq(st.active, 1);

        gate = netgate_free(gate);
        cr_assert_eq(n_recs, 2);
        cr_expect_str_eq(last_rec()->protocol, "http");
        cr_expect_str_eq(last_rec()->reason, "shutdown");
        cr_expect_str_eq(last_rec()->decision, "allow");
        tc_close(b);
        free(get);
        free(tunnel);
}

Test(netgate_gate, connection_limit, .init = setup, .fini = teardown)
{
        struct tc *conns[NETGATE_MAX_CONNECTIONS];
        for (int i = 0; i < NETGATE_MAX_CONNECTIONS; i++) {
                conns[i] = tc_open(gate_http_port);
                for (int k = 0; k < 4; k++)
                        event_base_loop(base, EVLOOP_NONBLOCK);
        }
        struct netgate_stats st;
        netgate_get_stats(gate, &st);
        cr_assert_eq(st.active, NETGATE_MAX_CONNECTIONS);

        /* One more waits in the listen queue, not accepted... */
        char *req = xasprintf("GET http://upstream.test:%u/late HTTP/1.1\r\n\r\n", up_port);
        struct tc *late = tc_open(gate_http_port);
        tc_sends(late, req);
        for (int i = 0; i < 50; i++) {
                tc_drive(late, have_bytes, 0);
                poll(NULL, 0, 1);
        }
        netgate_get_stats(gate, &st);
        cr_expect_eq(st.active, NETGATE_MAX_CONNECTIONS);
        cr_expect_eq(st.connections, NETGATE_MAX_CONNECTIONS);
        cr_expect_eq(late->in_len, 0);

        /* ...until a slot frees. */
        tc_close(conns[0]);
        cr_assert(tc_drive(late, have_response, 0), "%s", late->in);
        cr_expect_eq(status_of(late), 200);
        netgate_get_stats(gate, &st);
        cr_expect_eq(st.connections, NETGATE_MAX_CONNECTIONS + 1);
        tc_close(late);
        for (int i = 1; i < NETGATE_MAX_CONNECTIONS; i++)
                tc_close(conns[i]);
        free(req);
}
