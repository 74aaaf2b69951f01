/* SPDX-License-Identifier: Apache-2.0 */
#include <errno.h>
#include <string.h>
#include <strings.h>

#include "netgate/http.h"

enum {
        ST_START,
        ST_FIELDS,
        ST_DONE,
        ST_ERROR,
};

#define BLANK_LINES_MAX 8

static bool is_tchar(unsigned char c)
{
        if ((c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9'))
                return true;
        return c != '\0' && strchr("!#$%&'*+-.^_`|~", c) != NULL;
}

bool netgate_http_is_token(const char *s, size_t len)
{
        if (len == 0)
                return false;
        for (size_t i = 0; i < len; i++)
                if (!is_tchar((unsigned char)s[i]))
                        return false;
        return true;
}

bool netgate_http_value_ok(const char *v)
{
        for (; *v; v++)
                if (((unsigned char)*v < 0x20 && *v != '\t') || *v == 0x7f)
                        return false;
        return true;
}

static bool is_digit(char c)
{
        return c >= '0' && c <= '9';
}

bool netgate_http_name_eq(const char *a, size_t alen, const char *b)
{
        return strlen(b) == alen && strncasecmp(a, b, alen) == 0;
}

static int fail(struct netgate_http_parser *p, int r)
{
        p->state = ST_ERROR;
        p->error = r;
        return r;
}

void netgate_http_parser_init(struct netgate_http_parser *p, enum netgate_http_kind kind)
{
        /* The buffer needs no clearing: only bytes below p->len are read. */
        memset(p, 0, offsetof(struct netgate_http_parser, buf));
        p->kind = kind;
        p->state = ST_START;
}

static int parse_port(const char *s, size_t n, uint16_t *ret)
{
        unsigned v = 0;
        if (n == 0 || n > 5)
                return -EBADMSG;
        for (size_t i = 0; i < n; i++) {
                if (!is_digit(s[i]))
                        return -EBADMSG;
                v = v * 10 + (unsigned)(s[i] - '0');
        }
        if (v == 0 || v > 65535)
                return -EBADMSG;
        *ret = (uint16_t)v;
        return 0;
}

/* host[:port] or [v6][:port]. Userinfo is refused: in
 * "http://allowed.test@evil.test/" the host is evil.test, and a checker that
 * reads it differently from the connector is an escape. */
static int parse_authority(struct netgate_http_head *h, const char *s, size_t n, bool need_port)
{
        const char *port = NULL;
        size_t port_len = 0;
        if (n == 0 || memchr(s, '@', n))
                return -EBADMSG;
        if (s[0] == '[') {
                const char *close = memchr(s, ']', n);
                if (!close)
                        return -EBADMSG;
                h->host = s + 1;
                h->host_len = (size_t)(close - s - 1);
                size_t rest = n - (size_t)(close + 1 - s);
                if (rest > 0) {
                        if (close[1] != ':')
                                return -EBADMSG;
                        port = close + 2;
                        port_len = rest - 1;
                }
        } else {
                const char *colon = memchr(s, ':', n);
                h->host = s;
                h->host_len = colon ? (size_t)(colon - s) : n;
                if (colon) {
                        port = colon + 1;
                        port_len = n - (size_t)(port - s);
                        if (memchr(port, ':', port_len))
                                return -EBADMSG;
                }
        }
        if (h->host_len == 0)
                return -EBADMSG;
        if (port && port_len > 0) {
                if (parse_port(port, port_len, &h->port) < 0)
                        return -EBADMSG;
                h->port_given = true;
        } else if (need_port)
                return -EBADMSG;
        else
                h->port = 80;
        return 0;
}

static int parse_version(const char *s, size_t n, int *ret_minor)
{
        if (n != 8 || memcmp(s, "HTTP/", 5) != 0 || !is_digit(s[5]) || s[6] != '.' ||
            !is_digit(s[7]))
                return -EBADMSG;
        if (s[5] != '1' || (s[7] != '0' && s[7] != '1'))
                return -EPROTONOSUPPORT;
        *ret_minor = s[7] - '0';
        return 0;
}

static int parse_request_line(struct netgate_http_parser *p, const char *line, size_t n)
{
        struct netgate_http_head *h = &p->head;
        const char *sp1 = memchr(line, ' ', n);
        if (!sp1 || sp1 == line || (size_t)(sp1 - line) > NETGATE_HTTP_METHOD_MAX)
                return -EBADMSG;
        for (const char *c = line; c < sp1; c++)
                if (!is_tchar((unsigned char)*c))
                        return -EBADMSG;
        const char *target = sp1 + 1;
        const char *sp2 = memchr(target, ' ', n - (size_t)(target - line));
        if (!sp2 || sp2 == target)
                return -EBADMSG;
        size_t tlen = (size_t)(sp2 - target);
        for (size_t i = 0; i < tlen; i++) {
                unsigned char c = (unsigned char)target[i];
                if (c < 0x21 || c == 0x7f)
                        return -EBADMSG;
        }
        const char *version = sp2 + 1;
        int r = parse_version(version, n - (size_t)(version - line), &h->minor);
        if (r < 0)
                return r;

        h->method = line;
        h->method_len = (size_t)(sp1 - line);
        h->is_connect = h->method_len == 7 && memcmp(line, "CONNECT", 7) == 0;
        if (p->origin_form) {
                if (h->is_connect || target[0] != '/' || memchr(target, '#', tlen))
                        return -EBADMSG;
                h->path = target;
                h->path_len = tlen;
                return 0;
        }
        if (h->is_connect)
                return parse_authority(h, target, tlen, true);

        if (tlen >= 8 && strncasecmp(target, "https://", 8) == 0)
                return -ENOTSUP;
        if (tlen < 7 || strncasecmp(target, "http://", 7) != 0) {
                if (memmem(target, tlen, "://", 3))
                        return -ENOTSUP;
                return -EBADMSG;
        }
        const char *auth = target + 7, *end = target + tlen, *rest = auth;
        while (rest < end && *rest != '/' && *rest != '?' && *rest != '#')
                rest++;
        r = parse_authority(h, auth, (size_t)(rest - auth), false);
        if (r < 0)
                return r;
        if (memchr(rest, '#', (size_t)(end - rest)))
                return -EBADMSG;
        h->path = rest;
        h->path_len = (size_t)(end - rest);
        h->path_needs_slash = h->path_len > 0 && rest[0] == '?';
        return 0;
}

static int parse_status_line(struct netgate_http_parser *p, const char *line, size_t n)
{
        struct netgate_http_head *h = &p->head;
        if (n < 12)
                return -EBADMSG;
        int r = parse_version(line, 8, &h->minor);
        if (r < 0)
                return r;
        if (line[8] != ' ' || !is_digit(line[9]) || !is_digit(line[10]) || !is_digit(line[11]))
                return -EBADMSG;
        h->status = (line[9] - '0') * 100 + (line[10] - '0') * 10 + (line[11] - '0');
        if (h->status < 100 || h->status > 599)
                return -EBADMSG;
        if (n > 12 && line[12] != ' ')
                return -EBADMSG;
        h->reason = n > 13 ? line + 13 : "";
        h->reason_len = n > 13 ? n - 13 : 0;
        for (size_t i = 0; i < h->reason_len; i++) {
                unsigned char c = (unsigned char)h->reason[i];
                if ((c < 0x20 && c != '\t') || c == 0x7f)
                        return -EBADMSG;
        }
        return 0;
}

static void trim_ows(const char **s, size_t *n)
{
        while (*n > 0 && (**s == ' ' || **s == '\t')) {
                (*s)++;
                (*n)--;
        }
        while (*n > 0 && ((*s)[*n - 1] == ' ' || (*s)[*n - 1] == '\t'))
                (*n)--;
}

/* Calls fn for each comma-separated, OWS-trimmed, non-empty element. */
static void for_each_token(const char *v, size_t n, void (*fn)(void *ud, const char *t, size_t tn),
                           void *ud)
{
        while (n > 0) {
                const char *comma = memchr(v, ',', n);
                size_t len = comma ? (size_t)(comma - v) : n;
                const char *t = v;
                size_t tn = len;
                trim_ows(&t, &tn);
                if (tn > 0)
                        fn(ud, t, tn);
                if (!comma)
                        break;
                v = comma + 1;
                n -= len + 1;
        }
}

static void connection_token(void *ud, const char *t, size_t n)
{
        struct netgate_http_head *h = ud;
        if (netgate_http_name_eq(t, n, "close"))
                h->conn_close = true;
        else if (netgate_http_name_eq(t, n, "upgrade"))
                h->conn_upgrade = true;
}

static void te_token(void *ud, const char *t, size_t n)
{
        struct netgate_http_parser *p = ud;
        p->te_chunked_last = netgate_http_name_eq(t, n, "chunked");
}

static int parse_field(struct netgate_http_parser *p, const char *line, size_t n)
{
        struct netgate_http_head *h = &p->head;
        size_t i = 0;
        /* A space before the colon, or a line folded onto the previous one,
         * is read differently by different servers: refuse both. */
        while (i < n && is_tchar((unsigned char)line[i]))
                i++;
        if (i == 0 || i == n || line[i] != ':')
                return -EBADMSG;
        const char *value = line + i + 1;
        size_t vlen = n - i - 1;
        for (size_t k = 0; k < vlen; k++) {
                unsigned char c = (unsigned char)value[k];
                if ((c < 0x20 && c != '\t') || c == 0x7f)
                        return -EBADMSG;
        }
        trim_ows(&value, &vlen);
        if (h->n_fields >= NETGATE_HTTP_FIELDS_MAX)
                return -EMSGSIZE;
        h->fields[h->n_fields++] = (struct netgate_http_field){line, i, value, vlen};

        if (netgate_http_name_eq(line, i, "content-length")) {
                uint64_t v = 0;
                if (vlen == 0 || vlen > 18)
                        return -EBADMSG;
                for (size_t k = 0; k < vlen; k++) {
                        if (!is_digit(value[k]))
                                return -EBADMSG;
                        v = v * 10 + (uint64_t)(value[k] - '0');
                }
                if (p->have_length && v != h->length)
                        return -EBADMSG;
                p->have_length = true;
                h->length = v;
        } else if (netgate_http_name_eq(line, i, "transfer-encoding")) {
                p->te_count++;
                if (p->kind == NETGATE_HTTP_REQUEST) {
                        if (p->te_count > 1)
                                return -EBADMSG;
                        if (!netgate_http_name_eq(value, vlen, "chunked"))
                                return -ENOTSUP;
                        p->te_chunked_last = true;
                } else
                        for_each_token(value, vlen, te_token, p);
        } else if (netgate_http_name_eq(line, i, "connection")) {
                for_each_token(value, vlen, connection_token, h);
        }
        return 0;
}

static int finish_head(struct netgate_http_parser *p)
{
        struct netgate_http_head *h = &p->head;
        if (p->kind == NETGATE_HTTP_REQUEST) {
                /* Both framings at once is the classic smuggling request. */
                if (p->te_count > 0 && (p->have_length || h->minor == 0))
                        return -EBADMSG;
                if (h->is_connect)
                        h->framing = NETGATE_HTTP_BODY_NONE;
                else if (p->te_count > 0)
                        h->framing = NETGATE_HTTP_BODY_CHUNKED;
                else if (p->have_length)
                        h->framing = NETGATE_HTTP_BODY_LENGTH;
                else
                        h->framing = NETGATE_HTTP_BODY_NONE;
        } else {
                if (p->head_request || h->status < 200 || h->status == 204 || h->status == 304)
                        h->framing = NETGATE_HTTP_BODY_NONE;
                else if (p->te_count > 0)
                        h->framing = p->te_chunked_last ? NETGATE_HTTP_BODY_CHUNKED
                                                        : NETGATE_HTTP_BODY_CLOSE;
                else if (p->have_length)
                        h->framing = NETGATE_HTTP_BODY_LENGTH;
                else
                        h->framing = NETGATE_HTTP_BODY_CLOSE;
                if (h->framing == NETGATE_HTTP_BODY_CLOSE)
                        h->conn_close = true;
        }
        if (h->framing != NETGATE_HTTP_BODY_LENGTH)
                h->length = 0;
        if (h->minor == 0)
                h->conn_close = true;
        return 1;
}

static int process_line(struct netgate_http_parser *p, const char *line, size_t n)
{
        if (p->state == ST_START) {
                if (n == 0) {
                        if (++p->blank_lines > BLANK_LINES_MAX)
                                return -EBADMSG;
                        return 0;
                }
                int r = p->kind == NETGATE_HTTP_REQUEST ? parse_request_line(p, line, n)
                                                        : parse_status_line(p, line, n);
                if (r < 0)
                        return r;
                p->state = ST_FIELDS;
                return 0;
        }
        if (n == 0)
                return finish_head(p);
        return parse_field(p, line, n);
}

int netgate_http_parser_feed(struct netgate_http_parser *p, const char *data, size_t len,
                             size_t *ret_consumed)
{
        if (p->state == ST_DONE) {
                *ret_consumed = 0;
                return 1;
        }
        if (p->state == ST_ERROR)
                return p->error;

        size_t i = 0;
        while (i < len) {
                const char *nl = memchr(data + i, '\n', len - i);
                size_t n = nl ? (size_t)(nl - (data + i)) + 1 : len - i;
                if (n > NETGATE_HTTP_HEAD_MAX - p->len)
                        return fail(p, -EMSGSIZE);
                memcpy(p->buf + p->len, data + i, n);
                p->len += n;
                i += n;
                size_t line_len = p->len - p->line_start - (nl ? 1 : 0);
                if (line_len > NETGATE_HTTP_LINE_MAX)
                        return fail(p, -EMSGSIZE);
                if (!nl)
                        break;

                char *line = p->buf + p->line_start;
                if (line_len > 0 && line[line_len - 1] == '\r')
                        line_len--;
                line[line_len] = '\0';
                p->line_start = p->len;
                int r = process_line(p, line, line_len);
                if (r < 0)
                        return fail(p, r);
                if (r > 0) {
                        p->state = ST_DONE;
                        *ret_consumed = i;
                        return 1;
                }
        }
        *ret_consumed = len;
        return 0;
}

static bool is_hop_name(const char *name, size_t len)
{
        static const char *const hop[] = {
            "connection",        "keep-alive",     "te",   "trailer", "upgrade",
            "transfer-encoding", "content-length", "host",
        };
        if (len >= 6 && strncasecmp(name, "proxy-", 6) == 0)
                return true;
        for (size_t i = 0; i < sizeof(hop) / sizeof(hop[0]); i++)
                if (netgate_http_name_eq(name, len, hop[i]))
                        return true;
        return false;
}

struct listed {
        const char *name;
        size_t len;
        bool found;
};

static void listed_token(void *ud, const char *t, size_t n)
{
        struct listed *l = ud;
        if (n == l->len && strncasecmp(t, l->name, n) == 0)
                l->found = true;
}

bool netgate_http_field_is_hop(const struct netgate_http_head *h, const char *name, size_t len)
{
        if (is_hop_name(name, len))
                return true;
        struct listed l = {name, len, false};
        for (size_t i = 0; i < h->n_fields && !l.found; i++)
                if (netgate_http_name_eq(h->fields[i].name, h->fields[i].name_len, "connection"))
                        for_each_token(h->fields[i].value, h->fields[i].value_len, listed_token,
                                       &l);
        return l.found;
}

enum {
        B_SIZE,
        B_SIZE_WS,
        B_EXT,
        B_SIZE_LF,
        B_DATA,
        B_DATA_CR,
        B_DATA_LF,
        B_TRAILER_START,
        B_TRAILER,
        B_TRAILER_LF,
        B_END_LF,
        B_DONE,
};

void netgate_http_body_init(struct netgate_http_body *b, enum netgate_http_framing framing,
                            uint64_t length)
{
        *b = (struct netgate_http_body){.framing = framing, .remaining = length};
        if (framing == NETGATE_HTTP_BODY_CHUNKED)
                b->remaining = 0;
}

static int hexval(char c)
{
        if (c >= '0' && c <= '9')
                return c - '0';
        if (c >= 'a' && c <= 'f')
                return c - 'a' + 10;
        if (c >= 'A' && c <= 'F')
                return c - 'A' + 10;
        return -1;
}

static int chunked_feed(struct netgate_http_body *b, const char *data, size_t len, size_t max_run,
                        size_t *ret_consumed, size_t *ret_run_off, size_t *ret_run_len)
{
        size_t i = 0;
        while (i < len) {
                char c = data[i];
                switch (b->state) {
                case B_SIZE: {
                        int v = hexval(c);
                        if (v >= 0) {
                                /* 15 significant digits: no size wraps around
                                 * a 64-bit counter (or a smaller one here). */
                                if ((b->remaining > 0 || v > 0) && ++b->digits > 15)
                                        return -EBADMSG;
                                b->remaining = (b->remaining << 4) | (uint64_t)v;
                                if (++b->line > NETGATE_HTTP_CHUNK_LINE)
                                        return -EMSGSIZE;
                                break;
                        }
                        if (b->line == 0)
                                return -EBADMSG;
                        if (c == ' ' || c == '\t')
                                b->state = B_SIZE_WS;
                        else if (c == ';')
                                b->state = B_EXT;
                        else if (c == '\r')
                                b->state = B_SIZE_LF;
                        else
                                return -EBADMSG;
                        break;
                }
                case B_SIZE_WS:
                        if (c == ';')
                                b->state = B_EXT;
                        else if (c == '\r')
                                b->state = B_SIZE_LF;
                        else if (c != ' ' && c != '\t')
                                return -EBADMSG;
                        break;
                case B_EXT:
                        if (c == '\r')
                                b->state = B_SIZE_LF;
                        else if (((unsigned char)c < 0x20 && c != '\t') || c == 0x7f)
                                return -EBADMSG;
                        if (++b->line > NETGATE_HTTP_CHUNK_LINE)
                                return -EMSGSIZE;
                        break;
                case B_SIZE_LF:
                        if (c != '\n')
                                return -EBADMSG;
                        b->state = b->remaining > 0 ? B_DATA : B_TRAILER_START;
                        b->line = 0;
                        b->digits = 0;
                        break;
                case B_DATA: {
                        size_t run = len - i;
                        if (run > b->remaining)
                                run = (size_t)b->remaining;
                        if (run > max_run)
                                run = max_run;
                        b->remaining -= run;
                        if (b->remaining == 0)
                                b->state = B_DATA_CR;
                        *ret_run_off = i;
                        *ret_run_len = run;
                        *ret_consumed = i + run;
                        return 0;
                }
                case B_DATA_CR:
                        if (c != '\r')
                                return -EBADMSG;
                        b->state = B_DATA_LF;
                        break;
                case B_DATA_LF:
                        if (c != '\n')
                                return -EBADMSG;
                        b->state = B_SIZE;
                        break;
                case B_TRAILER_START:
                        if (c == '\r') {
                                b->state = B_END_LF;
                                break;
                        }
                        b->state = B_TRAILER;
                        /* fall through */
                case B_TRAILER:
                        if (c == '\r')
                                b->state = B_TRAILER_LF;
                        else if (((unsigned char)c < 0x20 && c != '\t') || c == 0x7f)
                                return -EBADMSG;
                        if (++b->trailer > NETGATE_HTTP_TRAILER_MAX)
                                return -EMSGSIZE;
                        break;
                case B_TRAILER_LF:
                        if (c != '\n')
                                return -EBADMSG;
                        b->state = B_TRAILER_START;
                        break;
                case B_END_LF:
                        if (c != '\n')
                                return -EBADMSG;
                        b->state = B_DONE;
                        *ret_consumed = i + 1;
                        return 1;
                case B_DONE:
                        *ret_consumed = i;
                        return 1;
                }
                i++;
        }
        *ret_consumed = len;
        return 0;
}

int netgate_http_body_feed(struct netgate_http_body *b, const char *data, size_t len,
                           size_t max_run, size_t *ret_consumed, size_t *ret_run_off,
                           size_t *ret_run_len)
{
        size_t run = 0;
        *ret_run_off = 0;
        *ret_run_len = 0;
        switch (b->framing) {
        case NETGATE_HTTP_BODY_NONE:
                *ret_consumed = 0;
                return 1;
        case NETGATE_HTTP_BODY_LENGTH:
                run = len;
                if (run > b->remaining)
                        run = (size_t)b->remaining;
                if (run > max_run)
                        run = max_run;
                b->remaining -= run;
                *ret_run_len = run;
                *ret_consumed = run;
                return b->remaining == 0 ? 1 : 0;
        case NETGATE_HTTP_BODY_CLOSE:
                run = len < max_run ? len : max_run;
                *ret_run_len = run;
                *ret_consumed = run;
                return 0;
        case NETGATE_HTTP_BODY_CHUNKED:
                if (b->state == B_DONE) {
                        *ret_consumed = 0;
                        return 1;
                }
                return chunked_feed(b, data, len, max_run, ret_consumed, ret_run_off, ret_run_len);
        }
        return -EINVAL;
}
