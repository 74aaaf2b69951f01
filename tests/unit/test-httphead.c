/* SPDX-License-Identifier: Apache-2.0 */
#include <criterion/criterion.h>
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "httphead.h"
#include "netgate/http.h"

/* Reads `head` as airlockd does; returns 0 (served) or the status it is
 * refused with, and the message in msg. */
static int judge(const char *head, size_t len, char *msg, size_t size)
{
        struct netgate_http_parser *p = malloc(sizeof(*p));
        cr_assert(p);
        netgate_http_parser_init(p, NETGATE_HTTP_REQUEST);
        p->origin_form = true;
        size_t used = 0;
        int r = netgate_http_parser_feed(p, head, len, &used);
        int status;
        if (r < 0)
                status = http_head_explain(head, len, r, msg, size);
        else if (r == 0)
                status = -1; /* incomplete */
        else
                status = http_head_check(&p->head, msg, size);
        free(p);
        return status;
}

#define JUDGE(s, msg) judge(s, sizeof(s) - 1, msg, sizeof(msg))

Test(httphead, good_heads_pass)
{
        char msg[256];
        cr_assert_eq(JUDGE("GET /healthz HTTP/1.1\r\nHost: x\r\n\r\n", msg), 0);
        cr_assert_eq(JUDGE("POST /v1/sandboxes HTTP/1.1\r\nContent-Length: 2\r\n\r\n", msg), 0);
        cr_assert_eq(JUDGE("PUT /v1/sandboxes/x/files?path=a HTTP/1.1\r\n"
                           "Transfer-Encoding: chunked\r\n\r\n",
                           msg),
                     0);
        cr_assert_eq(JUDGE("DELETE /v1/sandboxes/x HTTP/1.0\r\nX-A: \t tab ok\r\n\r\n", msg), 0);
        cr_assert_eq(JUDGE("GET / HTTP/1.1\nHost: x\n\n", msg), 0, "bare LF ends lines");
}

static void refused(const char *head, int want, const char *word)
{
        char msg[256] = "";
        int status = judge(head, strlen(head), msg, sizeof(msg));
        cr_assert_eq(status, want, "%s: status %d, want %d (%s)", head, status, want, msg);
        cr_assert(strcasestr(msg, word), "%s: message \"%s\" lacks \"%s\"", head, msg, word);
}

Test(httphead, framing_is_refused)
{
        refused("POST / HTTP/1.1\r\nContent-Length: 2\r\nContent-Length: 5\r\n\r\n", 400,
                "Content-Length");
        refused("POST / HTTP/1.1\r\nContent-Length: 2\r\nContent-Length: 2\r\n\r\n", 400,
                "Content-Length");
        refused("POST / HTTP/1.1\r\nContent-Length: 2,2\r\n\r\n", 400, "Content-Length");
        refused("POST / HTTP/1.1\r\nContent-Length: +2\r\n\r\n", 400, "Content-Length");
        refused("POST / HTTP/1.1\r\nContent-Length: 0x10\r\n\r\n", 400, "Content-Length");
        refused("POST / HTTP/1.1\r\nContent-Length: 1234567890123456789\r\n\r\n", 400,
                "Content-Length");
        refused("POST / HTTP/1.1\r\nContent-Length: 2\r\nTransfer-Encoding: chunked\r\n\r\n", 400,
                "both");
        refused("POST / HTTP/1.1\r\nTransfer-Encoding: gzip\r\n\r\n", 400, "chunked");
        refused("POST / HTTP/1.1\r\nTransfer-Encoding: gzip, chunked\r\n\r\n", 400, "chunked");
        refused(
            "POST / HTTP/1.1\r\nTransfer-Encoding: chunked\r\nTransfer-Encoding: chunked\r\n\r\n",
            400, "more than one Transfer-Encoding");
        refused("POST / HTTP/1.0\r\nTransfer-Encoding: chunked\r\n\r\n", 400, "HTTP/1.0");
}

Test(httphead, bytes_not_allowed_are_refused)
{
        char nul[] = "GET / HTTP/1.1\r\nAuthorization: Bearer a\0b\r\n\r\n";
        char msg[256];
        cr_assert_eq(judge(nul, sizeof(nul) - 1, msg, sizeof(msg)), 400);
        cr_assert(strstr(msg, "Authorization") && strstr(msg, "NUL"), "%s", msg);
        refused("GET / HTTP/1.1\r\nX-A: a\rb\r\n\r\n", 400, "CR");
        refused("GET / HTTP/1.1\r\nX-A: a\x01"
                "b\r\n\r\n",
                400, "control");
        refused("GET / HTTP/1.1\r\nX-A: a\x7f\r\n\r\n", 400, "control");
        refused("GET / HTTP/1.1\r\nX-A: 1\r\n folded\r\n\r\n", 400, "obs-fold");
        refused("GET / HTTP/1.1\r\nX-A : 1\r\n\r\n", 400, "before the colon");
        refused("GET / HTTP/1.1\r\nX(A): 1\r\n\r\n", 400, "name");
        refused("GET / HTTP/1.1\r\nno colon here\r\n\r\n", 400, "colon");
        refused("GET / HTTP/1.1\r\n: empty\r\n\r\n", 400, "empty field name");
}

Test(httphead, request_line_and_method)
{
        refused("GET  / HTTP/1.1\r\n\r\n", 400, "request line");
        refused("GET /a b HTTP/1.1\r\n\r\n", 400, "request line");
        refused("GET http://x/ HTTP/1.1\r\n\r\n", 400, "request line");
        refused("GET /\rx HTTP/1.1\r\n\r\n", 400, "request line");
        refused("GET / HTTP/2.0\r\n\r\n", 505, "HTTP/1.1");
        refused("HEAD / HTTP/1.1\r\nContent-Length: 5\r\n\r\n", 501, "HEAD");
        refused("OPTIONS / HTTP/1.1\r\n\r\n", 501, "GET, POST, PUT or DELETE");
}

Test(httphead, sizes)
{
        size_t n = NETGATE_HTTP_LINE_MAX + 100;
        char *h = malloc(n + 64);
        cr_assert(h);
        memcpy(h, "GET / HTTP/1.1\r\nX-A: ", 21);
        memset(h + 21, 'a', n);
        memcpy(h + 21 + n, "\r\n\r\n", 5);
        char msg[256];
        cr_assert_eq(judge(h, strlen(h), msg, sizeof(msg)), 431);
        cr_assert(strstr(msg, "too large"), "%s", msg);
        free(h);
}
