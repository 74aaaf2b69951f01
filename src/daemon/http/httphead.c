/* SPDX-License-Identifier: Apache-2.0 */
#include <errno.h>
#include <stdbool.h>
#include <stdio.h>
#include <string.h>
#include <strings.h>

#include "httphead.h"

static bool is_tchar(unsigned char c)
{
        if ((c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9'))
                return true;
        return c != '\0' && strchr("!#$%&'*+-.^_`|~", c) != NULL;
}

static bool name_is(const char *name, size_t n, const char *want)
{
        return strlen(want) == n && strncasecmp(name, want, n) == 0;
}

int http_head_check(const struct netgate_http_head *h, char *msg, size_t size)
{
        static const char *const methods[] = {"GET", "POST", "PUT", "DELETE"};
        bool known = false;
        for (size_t i = 0; i < sizeof(methods) / sizeof(methods[0]); i++)
                known = known || (strlen(methods[i]) == h->method_len &&
                                  memcmp(methods[i], h->method, h->method_len) == 0);
        if (!known) {
                /* The method is a token of at most 32 characters: printable. */
                snprintf(msg, size, "the method %.*s is not served: use GET, POST, PUT or DELETE",
                         (int)h->method_len, h->method);
                return 501;
        }
        size_t lengths = 0;
        for (size_t i = 0; i < h->n_fields; i++)
                if (name_is(h->fields[i].name, h->fields[i].name_len, "content-length"))
                        lengths++;
        if (lengths > 1) {
                snprintf(msg, size, "the request has %zu Content-Length header fields: send one",
                         lengths);
                return 400;
        }
        return 0;
}

/* The value of a field, OWS trimmed. */
static void trim(const char **v, size_t *n)
{
        while (*n > 0 && (**v == ' ' || **v == '\t')) {
                (*v)++;
                (*n)--;
        }
        while (*n > 0 && ((*v)[*n - 1] == ' ' || (*v)[*n - 1] == '\t'))
                (*n)--;
}

/* What is wrong with one header line (no line terminator), or NULL. */
static bool explain_field(const char *line, size_t n, size_t lineno, int *lengths, int *encodings,
                          char *msg, size_t size)
{
        if (line[0] == ' ' || line[0] == '\t') {
                snprintf(msg, size,
                         "header line %zu is folded onto the previous one (obs-fold): "
                         "send each field on one line",
                         lineno);
                return true;
        }
        const char *colon = memchr(line, ':', n);
        if (!colon) {
                snprintf(msg, size, "header line %zu has no colon: expected \"Name: value\"",
                         lineno);
                return true;
        }
        size_t nlen = (size_t)(colon - line);
        for (size_t i = 0; i < nlen; i++)
                if (!is_tchar((unsigned char)line[i])) {
                        snprintf(msg, size,
                                 "header line %zu: the field name has a character not "
                                 "allowed in a name (byte 0x%02x%s)",
                                 lineno, (unsigned char)line[i],
                                 line[i] == ' ' || line[i] == '\t'
                                     ? ", white space before the colon"
                                     : "");
                        return true;
                }
        if (nlen == 0) {
                snprintf(msg, size, "header line %zu has an empty field name", lineno);
                return true;
        }
        /* From here the name is a token: printable, safe to quote. */
        const char *v = colon + 1;
        size_t vlen = n - nlen - 1;
        for (size_t i = 0; i < vlen; i++) {
                unsigned char c = (unsigned char)v[i];
                if (c == '\0') {
                        snprintf(msg, size, "the %.*s header has a NUL byte", (int)nlen, line);
                        return true;
                }
                if (c == '\r') {
                        snprintf(msg, size, "the %.*s header has a CR that does not end the line",
                                 (int)nlen, line);
                        return true;
                }
                if ((c < 0x20 && c != '\t') || c == 0x7f) {
                        snprintf(msg, size, "the %.*s header has a control character (0x%02x)",
                                 (int)nlen, line, c);
                        return true;
                }
        }
        trim(&v, &vlen);
        if (name_is(line, nlen, "content-length")) {
                bool digits = vlen > 0 && vlen <= 18;
                for (size_t i = 0; digits && i < vlen; i++)
                        digits = v[i] >= '0' && v[i] <= '9';
                if (!digits) {
                        snprintf(msg, size,
                                 "Content-Length is not a number of bytes (1 to 18 "
                                 "digits, nothing else)");
                        return true;
                }
                if (++*lengths > 1) {
                        snprintf(msg, size,
                                 "the request has more than one Content-Length header "
                                 "field: send one");
                        return true;
                }
        } else if (name_is(line, nlen, "transfer-encoding")) {
                if (++*encodings > 1) {
                        snprintf(msg, size,
                                 "the request has more than one Transfer-Encoding "
                                 "header field");
                        return true;
                }
                if (!name_is(v, vlen, "chunked")) {
                        snprintf(msg, size,
                                 "Transfer-Encoding other than \"chunked\" is not "
                                 "accepted");
                        return true;
                }
        }
        return false;
}

static bool request_line_ok(const char *line, size_t n)
{
        size_t i = 0;
        while (i < n && is_tchar((unsigned char)line[i]))
                i++;
        if (i == 0 || i > NETGATE_HTTP_METHOD_MAX || i >= n || line[i] != ' ')
                return false;
        size_t t = ++i;
        while (i < n && (unsigned char)line[i] > 0x20 && (unsigned char)line[i] != 0x7f &&
               line[i] != '#')
                i++;
        if (i == t || line[t] != '/' || i >= n || line[i] != ' ')
                return false;
        i++;
        return n - i == 8 && memcmp(line + i, "HTTP/1.", 7) == 0 &&
               (line[i + 7] == '0' || line[i + 7] == '1');
}

int http_head_explain(const char *head, size_t len, int error, char *msg, size_t size)
{
        if (error == -EMSGSIZE) {
                snprintf(msg, size,
                         "the request head is too large: at most %d bytes, %d per line "
                         "and %d fields",
                         NETGATE_HTTP_HEAD_MAX, NETGATE_HTTP_LINE_MAX, NETGATE_HTTP_FIELDS_MAX);
                return 431;
        }
        if (error == -EPROTONOSUPPORT) {
                snprintf(msg, size, "only HTTP/1.0 and HTTP/1.1 are served");
                return 505;
        }
        size_t pos = 0, lineno = 0;
        int lengths = 0, encodings = 0;
        bool http10 = false;
        while (pos < len) {
                const char *line = head + pos;
                const char *nl = memchr(line, '\n', len - pos);
                size_t n = nl ? (size_t)(nl - line) : len - pos;
                pos += n + (nl ? 1 : 0);
                if (!nl)
                        break; /* the line is not over: judged when it is */
                if (n > 0 && line[n - 1] == '\r')
                        n--;
                if (lineno == 0 && n == 0)
                        continue; /* blank lines before a request are allowed */
                lineno++;
                if (lineno == 1) {
                        if (!request_line_ok(line, n)) {
                                snprintf(msg, size,
                                         "the request line is not METHOD /path HTTP/1.1 "
                                         "(a path from the root; no spaces, CR or "
                                         "control characters)");
                                return 400;
                        }
                        http10 = memcmp(line + n - 9, " HTTP/1.0", 9) == 0;
                        continue;
                }
                if (n == 0)
                        break;
                if (explain_field(line, n, lineno - 1, &lengths, &encodings, msg, size))
                        return 400;
        }
        if (encodings > 0 && lengths > 0) {
                snprintf(msg, size,
                         "the request has both Content-Length and Transfer-Encoding: "
                         "its length is ambiguous; send one");
                return 400;
        }
        if (encodings > 0 && http10) {
                snprintf(msg, size, "Transfer-Encoding is not accepted in an HTTP/1.0 request");
                return 400;
        }
        if (error == -ENOTSUP) {
                snprintf(msg, size, "Transfer-Encoding other than \"chunked\" is not accepted");
                return 400;
        }
        snprintf(msg, size, "the request head is malformed");
        return 400;
}
