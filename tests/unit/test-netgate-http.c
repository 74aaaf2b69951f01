/* SPDX-License-Identifier: Apache-2.0 */
#include <criterion/criterion.h>
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "netgate/http.h"

static struct netgate_http_parser *p;

static void setup(void)
{
        p = calloc(1, sizeof(*p));
        cr_assert_not_null(p);
        netgate_http_parser_init(p, NETGATE_HTTP_REQUEST);
}

static void teardown(void)
{
        free(p);
}

static int feed_all(struct netgate_http_parser *x, const char *s, size_t len, size_t *used)
{
        return netgate_http_parser_feed(x, s, len, used);
}

/* Feed one byte at a time; returns the final result and the bytes used. */
static int feed_bytes(struct netgate_http_parser *x, const char *s, size_t len, size_t *used)
{
        size_t total = 0;
        for (size_t i = 0; i < len; i++) {
                size_t u = 0;
                int r = netgate_http_parser_feed(x, s + i, 1, &u);
                if (r != 0) {
                        *used = total + u;
                        return r;
                }
                total += u;
        }
        *used = total;
        return 0;
}

static int req(const char *s)
{
        size_t used;
        netgate_http_parser_init(p, NETGATE_HTTP_REQUEST);
        return feed_all(p, s, strlen(s), &used);
}

static bool str_eq(const char *a, size_t alen, const char *b)
{
        return alen == strlen(b) && memcmp(a, b, alen) == 0;
}

Test(netgate_http, absolute_get, .init = setup, .fini = teardown)
{
        static const char msg[] = "GET http://Example.com:8080/a/b?q=1 HTTP/1.1\r\n"
                                  "Host: example.com:8080\r\n"
                                  "User-Agent:  test/1.0  \r\n"
                                  "Proxy-Authorization: Basic Zm9vOmJhcg==\r\n"
                                  "\r\n"
                                  "NEXT";
        size_t used;
        cr_assert_eq(feed_all(p, msg, sizeof(msg) - 1, &used), 1);
        cr_expect_eq(used, sizeof(msg) - 1 - 4, "the next message is not consumed");
        const struct netgate_http_head *h = &p->head;
        cr_expect(str_eq(h->method, h->method_len, "GET"));
        cr_expect(str_eq(h->host, h->host_len, "Example.com"));
        cr_expect_eq(h->port, 8080);
        cr_expect(h->port_given);
        cr_expect(str_eq(h->path, h->path_len, "/a/b?q=1"));
        cr_expect_eq(h->minor, 1);
        cr_expect_not(h->is_connect);
        cr_expect_eq(h->n_fields, 3);
        cr_expect(str_eq(h->fields[1].value, h->fields[1].value_len, "test/1.0"));
        cr_expect_eq(h->framing, NETGATE_HTTP_BODY_NONE);
        cr_expect_not(h->conn_close);
        cr_expect(netgate_http_field_is_hop(h, "Proxy-Authorization", 19));
        cr_expect(netgate_http_field_is_hop(h, "host", 4));
        cr_expect_not(netgate_http_field_is_hop(h, "User-Agent", 10));

        /* Same result one byte at a time. */
        netgate_http_parser_init(p, NETGATE_HTTP_REQUEST);
        cr_assert_eq(feed_bytes(p, msg, sizeof(msg) - 1, &used), 1);
        cr_expect_eq(used, sizeof(msg) - 1 - 4);
        cr_expect(str_eq(p->head.path, p->head.path_len, "/a/b?q=1"));
        cr_expect_eq(p->head.port, 8080);

        /* Further feeding returns done without consuming. */
        cr_expect_eq(feed_all(p, "xx", 2, &used), 1);
        cr_expect_eq(used, 0);
}

Test(netgate_http, targets, .init = setup, .fini = teardown)
{
        cr_assert_eq(req("GET http://example.com HTTP/1.1\r\n\r\n"), 1);
        cr_expect_eq(p->head.port, 80);
        cr_expect_not(p->head.port_given);
        cr_expect_eq(p->head.path_len, 0);

        cr_assert_eq(req("GET http://example.com?x=1 HTTP/1.1\r\n\r\n"), 1);
        cr_expect(p->head.path_needs_slash);
        cr_expect(str_eq(p->head.path, p->head.path_len, "?x=1"));

        cr_assert_eq(req("GET HTTP://example.com:/ HTTP/1.0\r\n\r\n"), 1);
        cr_expect_eq(p->head.port, 80);
        cr_expect_eq(p->head.minor, 0);
        cr_expect(p->head.conn_close, "HTTP/1.0 closes");

        cr_assert_eq(req("GET http://[::1]:8080/ HTTP/1.1\r\n\r\n"), 1);
        cr_expect(str_eq(p->head.host, p->head.host_len, "::1"));
        cr_expect_eq(p->head.port, 8080);

        cr_assert_eq(req("CONNECT example.com:443 HTTP/1.1\r\nHost: example.com:443\r\n\r\n"), 1);
        cr_expect(p->head.is_connect);
        cr_expect(str_eq(p->head.host, p->head.host_len, "example.com"));
        cr_expect_eq(p->head.port, 443);

        cr_assert_eq(req("CONNECT [2001:db8::1]:443 HTTP/1.1\r\n\r\n"), 1);
        cr_expect(str_eq(p->head.host, p->head.host_len, "2001:db8::1"));

        /* The raw host bytes are handed on for the rules to judge. */
        cr_assert_eq(req("GET http://evil.test%00.allowed.test/ HTTP/1.1\r\n\r\n"), 1);
        cr_expect(str_eq(p->head.host, p->head.host_len, "evil.test%00.allowed.test"));
}

Test(netgate_http, refused_targets, .init = setup, .fini = teardown)
{
        cr_expect_eq(req("GET /path HTTP/1.1\r\n\r\n"), -EBADMSG);
        cr_expect_eq(req("GET * HTTP/1.1\r\n\r\n"), -EBADMSG);
        cr_expect_eq(req("GET https://example.com/ HTTP/1.1\r\n\r\n"), -ENOTSUP);
        cr_expect_eq(req("GET ftp://example.com/ HTTP/1.1\r\n\r\n"), -ENOTSUP);
        cr_expect_eq(req("GET http://allowed.test@evil.test/ HTTP/1.1\r\n\r\n"), -EBADMSG);
        cr_expect_eq(req("GET http://user:pw@evil.test/ HTTP/1.1\r\n\r\n"), -EBADMSG);
        cr_expect_eq(req("GET http:///x HTTP/1.1\r\n\r\n"), -EBADMSG);
        cr_expect_eq(req("GET http://a.test:99999/ HTTP/1.1\r\n\r\n"), -EBADMSG);
        cr_expect_eq(req("GET http://a.test:0/ HTTP/1.1\r\n\r\n"), -EBADMSG);
        cr_expect_eq(req("GET http://a.test:8x/ HTTP/1.1\r\n\r\n"), -EBADMSG);
        cr_expect_eq(req("GET http://a.test:1:2/ HTTP/1.1\r\n\r\n"), -EBADMSG);
        cr_expect_eq(req("GET http://[::1/ HTTP/1.1\r\n\r\n"), -EBADMSG);
        cr_expect_eq(req("GET http://a.test/#frag HTTP/1.1\r\n\r\n"), -EBADMSG);
        cr_expect_eq(req("CONNECT example.com HTTP/1.1\r\n\r\n"), -EBADMSG);
        cr_expect_eq(req("CONNECT example.com: HTTP/1.1\r\n\r\n"), -EBADMSG);
        cr_expect_eq(req("CONNECT :443 HTTP/1.1\r\n\r\n"), -EBADMSG);
        cr_expect_eq(req("GET http://a.test/ HTTP/2.0\r\n\r\n"), -EPROTONOSUPPORT);
        cr_expect_eq(req("GET http://a.test/ HTTP/1.2\r\n\r\n"), -EPROTONOSUPPORT);
        cr_expect_eq(req("GET http://a.test/ HTTP/1.1 \r\n\r\n"), -EBADMSG);
        cr_expect_eq(req("GET  http://a.test/ HTTP/1.1\r\n\r\n"), -EBADMSG);
        cr_expect_eq(req("GET http://a.test/\tx HTTP/1.1\r\n\r\n"), -EBADMSG);
        cr_expect_eq(req("G(T http://a.test/ HTTP/1.1\r\n\r\n"), -EBADMSG);
        cr_expect_eq(req("GET http://a.test/ http/1.1\r\n\r\n"), -EBADMSG);
        cr_expect_eq(req("GET http://a.test/\r\n\r\n"), -EBADMSG);
        cr_expect_eq(req("ABCDEFGHIJKLMNOPQRSTUVWXYZABCDEFG http://a.test/ HTTP/1.1\r\n\r\n"),
                     -EBADMSG);
}

Test(netgate_http, fields, .init = setup, .fini = teardown)
{
        /* Whitespace before the colon and folded lines are smuggling tools. */
        cr_expect_eq(req("GET http://a.test/ HTTP/1.1\r\nHost : a\r\n\r\n"), -EBADMSG);
        cr_expect_eq(req("GET http://a.test/ HTTP/1.1\r\nX: a\r\n b\r\n\r\n"), -EBADMSG);
        cr_expect_eq(req("GET http://a.test/ HTTP/1.1\r\n: a\r\n\r\n"), -EBADMSG);
        cr_expect_eq(req("GET http://a.test/ HTTP/1.1\r\nNoColon\r\n\r\n"), -EBADMSG);
        cr_expect_eq(req("GET http://a.test/ HTTP/1.1\r\nX: a\rb\r\n\r\n"), -EBADMSG);
        cr_expect_eq(req("GET http://a.test/ HTTP/1.1\r\nX: \x7f\r\n\r\n"), -EBADMSG);
        cr_expect_eq(req("GET http://a.test/ HTTP/1.1\r\nX(: a\r\n\r\n"), -EBADMSG);

        static const char nul[] = "GET http://a.test/ HTTP/1.1\r\nX: a\0b\r\n\r\n";
        size_t used;
        netgate_http_parser_init(p, NETGATE_HTTP_REQUEST);
        cr_expect_eq(feed_all(p, nul, sizeof(nul) - 1, &used), -EBADMSG);
        cr_expect_eq(feed_all(p, "\r\n", 2, &used), -EBADMSG, "errors stick");

        /* Bare LF line ends and leading empty lines are tolerated. */
        cr_expect_eq(req("\r\n\r\nGET http://a.test/ HTTP/1.1\nX: y\n\n"), 1);
        cr_expect_eq(p->head.n_fields, 1);
        cr_expect_eq(req("\r\n\r\n\r\n\r\n\r\n\r\n\r\n\r\n\r\nGET http://a.test/ HTTP/1.1\r\n\r\n"),
                     -EBADMSG);
        cr_expect_eq(req("GET http://a.test/ HTTP/1.1\r\nX: \xc3\xa9\tok\r\n\r\n"), 1);
        cr_expect(str_eq(p->head.fields[0].value, p->head.fields[0].value_len, "\xc3\xa9\tok"));
}

Test(netgate_http, framing, .init = setup, .fini = teardown)
{
        cr_assert_eq(req("POST http://a.test/ HTTP/1.1\r\nContent-Length: 42\r\n\r\n"), 1);
        cr_expect_eq(p->head.framing, NETGATE_HTTP_BODY_LENGTH);
        cr_expect_eq(p->head.length, 42);
        cr_assert_eq(req("POST http://a.test/ HTTP/1.1\r\nContent-Length: 5\r\n"
                         "Content-Length: 5\r\n\r\n"),
                     1);
        cr_expect_eq(p->head.length, 5);
        cr_assert_eq(req("POST http://a.test/ HTTP/1.1\r\nTransfer-Encoding: Chunked\r\n\r\n"), 1);
        cr_expect_eq(p->head.framing, NETGATE_HTTP_BODY_CHUNKED);

        cr_expect_eq(req("POST http://a.test/ HTTP/1.1\r\nContent-Length: 5\r\n"
                         "Content-Length: 6\r\n\r\n"),
                     -EBADMSG);
        cr_expect_eq(req("POST http://a.test/ HTTP/1.1\r\nContent-Length: 5, 5\r\n\r\n"), -EBADMSG);
        cr_expect_eq(req("POST http://a.test/ HTTP/1.1\r\nContent-Length: +5\r\n\r\n"), -EBADMSG);
        cr_expect_eq(req("POST http://a.test/ HTTP/1.1\r\nContent-Length: \r\n\r\n"), -EBADMSG);
        cr_expect_eq(req("POST http://a.test/ HTTP/1.1\r\nContent-Length: 0x10\r\n\r\n"), -EBADMSG);
        cr_expect_eq(req("POST http://a.test/ HTTP/1.1\r\nContent-Length: 99999999999999999999\r\n"
                         "\r\n"),
                     -EBADMSG);
        cr_expect_eq(req("POST http://a.test/ HTTP/1.1\r\nContent-Length: 5\r\n"
                         "Transfer-Encoding: chunked\r\n\r\n"),
                     -EBADMSG);
        cr_expect_eq(
            req("POST http://a.test/ HTTP/1.1\r\nTransfer-Encoding: gzip, chunked\r\n\r\n"),
            -ENOTSUP);
        cr_expect_eq(req("POST http://a.test/ HTTP/1.1\r\nTransfer-Encoding: chunked\r\n"
                         "Transfer-Encoding: chunked\r\n\r\n"),
                     -EBADMSG);
        cr_expect_eq(req("POST http://a.test/ HTTP/1.0\r\nTransfer-Encoding: chunked\r\n\r\n"),
                     -EBADMSG);

        cr_assert_eq(req("GET http://a.test/ HTTP/1.1\r\nConnection: keep-alive, Close\r\n\r\n"),
                     1);
        cr_expect(p->head.conn_close);
        cr_assert_eq(req("GET http://a.test/ HTTP/1.1\r\nConnection: X-Secret, upgrade\r\n"
                         "X-Secret: 1\r\n\r\n"),
                     1);
        cr_expect(p->head.conn_upgrade);
        cr_expect(netgate_http_field_is_hop(&p->head, "x-secret", 8), "Connection-listed");
        cr_expect(netgate_http_field_is_hop(&p->head, "Upgrade", 7));
        cr_expect(netgate_http_field_is_hop(&p->head, "Keep-Alive", 10));
        cr_expect(netgate_http_field_is_hop(&p->head, "Proxy-Connection", 16));
        cr_expect(netgate_http_field_is_hop(&p->head, "TE", 2));
        cr_expect_not(netgate_http_field_is_hop(&p->head, "X-Secretive", 11));
}

Test(netgate_http, limits, .init = setup, .fini = teardown)
{
        size_t n = NETGATE_HTTP_LINE_MAX + 64, used;
        char *long_line = malloc(n + 64);
        memcpy(long_line, "GET http://a.test/", 18);
        memset(long_line + 18, 'a', n - 18);
        memcpy(long_line + n, " HTTP/1.1\r\n\r\n", 14);
        netgate_http_parser_init(p, NETGATE_HTTP_REQUEST);
        cr_expect_eq(feed_all(p, long_line, n + 13, &used), -EMSGSIZE);
        /* Also when the line arrives without its end. */
        netgate_http_parser_init(p, NETGATE_HTTP_REQUEST);
        cr_expect_eq(feed_bytes(p, long_line, NETGATE_HTTP_LINE_MAX + 2, &used), -EMSGSIZE);
        free(long_line);

        /* Too many fields. */
        netgate_http_parser_init(p, NETGATE_HTTP_REQUEST);
        const char *start = "GET http://a.test/ HTTP/1.1\r\n";
        cr_assert_eq(feed_all(p, start, strlen(start), &used), 0);
        int r = 0;
        for (int i = 0; i <= NETGATE_HTTP_FIELDS_MAX && r == 0; i++)
                r = feed_all(p, "X: y\r\n", 6, &used);
        cr_expect_eq(r, -EMSGSIZE);

        /* The whole head is bounded even when each line is short enough. */
        netgate_http_parser_init(p, NETGATE_HTTP_REQUEST);
        cr_assert_eq(feed_all(p, start, strlen(start), &used), 0);
        char field[4096 + 8];
        memset(field, 'v', sizeof(field));
        memcpy(field, "X-Big: ", 7);
        memcpy(field + sizeof(field) - 2, "\r\n", 2);
        r = 0;
        for (int i = 0; i < 16 && r == 0; i++)
                r = feed_all(p, field, sizeof(field), &used);
        cr_expect_eq(r, -EMSGSIZE);
}

static struct netgate_http_parser *resp(const char *s, bool head_request)
{
        size_t used;
        netgate_http_parser_init(p, NETGATE_HTTP_RESPONSE);
        p->head_request = head_request;
        int r = feed_all(p, s, strlen(s), &used);
        cr_assert_eq(r, 1, "response head \"%s\" should parse (got %d)", s, r);
        return p;
}

Test(netgate_http, responses, .init = setup, .fini = teardown)
{
        resp("HTTP/1.1 200 OK\r\nContent-Length: 10\r\n\r\n", false);
        cr_expect_eq(p->head.status, 200);
        cr_expect(str_eq(p->head.reason, p->head.reason_len, "OK"));
        cr_expect_eq(p->head.framing, NETGATE_HTTP_BODY_LENGTH);
        cr_expect_eq(p->head.length, 10);

        resp("HTTP/1.1 200 OK\r\nContent-Length: 10\r\n\r\n", true);
        cr_expect_eq(p->head.framing, NETGATE_HTTP_BODY_NONE, "HEAD has no body");
        resp("HTTP/1.1 204 No Content\r\n\r\n", false);
        cr_expect_eq(p->head.framing, NETGATE_HTTP_BODY_NONE);
        resp("HTTP/1.1 304 Not Modified\r\nContent-Length: 99\r\n\r\n", false);
        cr_expect_eq(p->head.framing, NETGATE_HTTP_BODY_NONE);
        resp("HTTP/1.1 100 Continue\r\n\r\n", false);
        cr_expect_eq(p->head.framing, NETGATE_HTTP_BODY_NONE);
        resp("HTTP/1.1 200 OK\r\nTransfer-Encoding: gzip, chunked\r\nContent-Length: 3\r\n\r\n",
             false);
        cr_expect_eq(p->head.framing, NETGATE_HTTP_BODY_CHUNKED, "chunked wins over length");
        resp("HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked, gzip\r\n\r\n", false);
        cr_expect_eq(p->head.framing, NETGATE_HTTP_BODY_CLOSE);
        cr_expect(p->head.conn_close);
        resp("HTTP/1.1 200 OK\r\n\r\n", false);
        cr_expect_eq(p->head.framing, NETGATE_HTTP_BODY_CLOSE);
        resp("HTTP/1.0 200 OK\r\nContent-Length: 1\r\n\r\n", false);
        cr_expect(p->head.conn_close);
        resp("HTTP/1.1 404\r\nContent-Length: 0\r\n\r\n", false);
        cr_expect_eq(p->head.status, 404);
        cr_expect_eq(p->head.reason_len, 0);

        size_t used;
        const char *bad[] = {"HTTP/1.1 20 OK\r\n\r\n",           "HTTP/1.1 2000 OK\r\n\r\n",
                             "HTTP/1.1 099 X\r\n\r\n",           "HTTP/1.1 600 X\r\n\r\n",
                             "HTTP/1.1  200 OK\r\n\r\n",         "ICY 200 OK\r\n\r\n",
                             "HTTP/1.1 200 OK\r\nA : b\r\n\r\n", "HTTP/1.1 200 O\x01K\r\n\r\n"};
        for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
                netgate_http_parser_init(p, NETGATE_HTTP_RESPONSE);
                cr_expect_lt(feed_all(p, bad[i], strlen(bad[i]), &used), 0, "\"%s\"", bad[i]);
        }
}

/* Run a body through the framer in pieces of `step`; collect the payload. */
static int body_run(enum netgate_http_framing f, uint64_t len, const char *in, size_t in_len,
                    size_t step, size_t max_run, char *out, size_t *out_len, size_t *ret_used)
{
        struct netgate_http_body b;
        netgate_http_body_init(&b, f, len);
        size_t pos = 0, o = 0;
        int r = 0;
        for (int guard = 0; guard < 1000000; guard++) {
                size_t n = in_len - pos < step ? in_len - pos : step;
                size_t used, off, run;
                r = netgate_http_body_feed(&b, in + pos, n, max_run, &used, &off, &run);
                if (r < 0)
                        break;
                cr_assert_leq(off + run, used);
                cr_assert_leq(run, max_run);
                memcpy(out + o, in + pos + off, run);
                o += run;
                pos += used;
                if (r == 1 || (used == 0 && pos == in_len))
                        break;
        }
        *out_len = o;
        *ret_used = pos;
        return r;
}

Test(netgate_http, body_length)
{
        char out[64];
        size_t olen, used;
        static const char in[] = "hello worldNEXT";
        cr_expect_eq(body_run(NETGATE_HTTP_BODY_LENGTH, 11, in, 15, 3, 100, out, &olen, &used), 1);
        cr_expect_eq(olen, 11);
        cr_expect_eq(used, 11);
        cr_expect_arr_eq(out, "hello world", 11);

        cr_expect_eq(body_run(NETGATE_HTTP_BODY_LENGTH, 0, in, 15, 3, 100, out, &olen, &used), 1);
        cr_expect_eq(used, 0);
        cr_expect_eq(body_run(NETGATE_HTTP_BODY_NONE, 0, in, 15, 3, 100, out, &olen, &used), 1);
        cr_expect_eq(used, 0);
        cr_expect_eq(body_run(NETGATE_HTTP_BODY_CLOSE, 0, in, 15, 4, 2, out, &olen, &used), 0);
        cr_expect_eq(olen, 15);

        /* max_run 0: no progress, no error. */
        struct netgate_http_body b;
        size_t off, run;
        netgate_http_body_init(&b, NETGATE_HTTP_BODY_LENGTH, 5);
        cr_expect_eq(netgate_http_body_feed(&b, in, 15, 0, &used, &off, &run), 0);
        cr_expect_eq(used, 0);
}

Test(netgate_http, body_chunked)
{
        static const char in[] = "5\r\nhello\r\n"
                                 "6;name=\"v\"\r\n world\r\n"
                                 "0000A \r\n0123456789\r\n"
                                 "0\r\nTrailer: x\r\nMore: y\r\n\r\n"
                                 "NEXT";
        char out[64];
        size_t olen, used;
        size_t steps[] = {1, 2, 3, 7, sizeof(in)};
        for (size_t i = 0; i < sizeof(steps) / sizeof(steps[0]); i++) {
                for (size_t max = 1; max <= 16; max *= 4) {
                        cr_expect_eq(body_run(NETGATE_HTTP_BODY_CHUNKED, 0, in, sizeof(in) - 1,
                                              steps[i], max, out, &olen, &used),
                                     1, "step %zu max %zu", steps[i], max);
                        cr_expect_eq(olen, 21);
                        cr_expect_arr_eq(out, "hello world0123456789", 21);
                        cr_expect_eq(used, sizeof(in) - 1 - 4, "step %zu: NEXT is not body",
                                     steps[i]);
                }
        }

        static const char empty[] = "0\r\n\r\n";
        cr_expect_eq(body_run(NETGATE_HTTP_BODY_CHUNKED, 0, empty, 5, 1, 10, out, &olen, &used), 1);
        cr_expect_eq(olen, 0);
        cr_expect_eq(used, 5);
}

Test(netgate_http, body_chunked_refused)
{
        const char *bad[] = {
            "5\nhello\r\n0\r\n\r\n",         /* bare LF after the size */
            "5\r\nhello\n0\r\n\r\n",         /* bare LF after the data */
            "5\r\nhelloX\r\n0\r\n\r\n",      /* data longer than the size */
            "\r\nhello\r\n0\r\n\r\n",        /* no size */
            "-5\r\nhello\r\n0\r\n\r\n",      /* sign */
            "0x5\r\nhello\r\n0\r\n\r\n",     /* prefix */
            "5 5\r\nhello\r\n0\r\n\r\n",     /* space inside the size */
            "1000000000000000\r\n",          /* 16 digits: would wrap */
            "5;a\x01\r\nhello\r\n0\r\n\r\n", /* control byte in an extension */
            "0\r\nX: y\nZ\r\n\r\n",          /* bare LF in the trailers */
            "0\r\n\rx",                      /* CR then not LF */
        };
        char out[64];
        size_t olen, used;
        for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++)
                cr_expect_lt(body_run(NETGATE_HTTP_BODY_CHUNKED, 0, bad[i], strlen(bad[i]), 1, 64,
                                      out, &olen, &used),
                             0, "case %zu", i);

        /* Zero padding is bounded by the line limit, not by digits. */
        size_t n = NETGATE_HTTP_CHUNK_LINE + 10;
        char *zeros = malloc(n);
        memset(zeros, '0', n);
        cr_expect_eq(body_run(NETGATE_HTTP_BODY_CHUNKED, 0, zeros, n, 512, 64, out, &olen, &used),
                     -EMSGSIZE);
        free(zeros);

        /* Endless trailers are bounded. */
        size_t tn = NETGATE_HTTP_TRAILER_MAX * 2;
        char *trailers = malloc(tn);
        memcpy(trailers, "0\r\n", 3);
        for (size_t i = 3; i + 6 <= tn; i += 6)
                memcpy(trailers + i, "X: y\r\n", 6);
        cr_expect_eq(body_run(NETGATE_HTTP_BODY_CHUNKED, 0, trailers, tn - (tn - 3) % 6, 100, 64,
                              out, &olen, &used),
                     -EMSGSIZE);
        free(trailers);
}

Test(netgate_http, body_chunked_large_sizes)
{
        /* 15 significant hex digits is the limit; the data need not arrive. */
        struct netgate_http_body b;
        size_t used, off, run;
        netgate_http_body_init(&b, NETGATE_HTTP_BODY_CHUNKED, 0);
        static const char big[] = "fffffffffffffff\r\nabc";
        cr_expect_eq(netgate_http_body_feed(&b, big, sizeof(big) - 1, 100, &used, &off, &run), 0);
        cr_expect_eq(run, 3);
        cr_expect_eq(b.remaining, 0xfffffffffffffffULL - 3);
}
