/* SPDX-License-Identifier: Apache-2.0 */
#include <errno.h>
#include <inttypes.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <string.h>
#include <strings.h>
#include <sys/socket.h>

#include <event2/buffer.h>
#include <event2/bufferevent.h>
#include <event2/dns.h>
#include <event2/event.h>
#include <event2/util.h>

#include "netgate/exchange.h"
#include "secrets.h"
#include "util.h"

/* ---- one exchange ---- */

void netgate_exchange_account(struct netgate_exchange *x, bool up, size_t n)
{
        netgate_count_bytes(x->g, up, n);
        if (up)
                x->bytes_up += n;
        else
                x->bytes_down += n;
}

static bool is_head_request(const struct netgate_http_head *h)
{
        return h->method_len == 4 && memcmp(h->method, "HEAD", 4) == 0;
}

static void write_response_head(struct netgate_exchange *x, struct evbuffer *out)
{
        const struct netgate_http_head *h = &x->respp->head;
        size_t before = evbuffer_get_length(out);
        bool interim = h->status < 200;
        char *v = NULL;
        size_t vlen = 0;

        if (x->filter && x->filter->mask &&
            (v = x->filter->mask(x->filter_ud, h->reason, h->reason_len, &vlen)))
                evbuffer_add_printf(out, "HTTP/1.1 %03d %.*s\r\n", h->status, (int)vlen, v);
        else
                evbuffer_add_printf(out, "HTTP/1.1 %03d %.*s\r\n", h->status, (int)h->reason_len,
                                    h->reason);
        free(v);
        for (size_t i = 0; i < h->n_fields; i++) {
                const struct netgate_http_field *f = &h->fields[i];
                /* A HEAD or 304 answer's length describes a body not sent. */
                bool keep_length = h->framing == NETGATE_HTTP_BODY_NONE && !interim &&
                                   h->status != 204 &&
                                   netgate_http_name_eq(f->name, f->name_len, "content-length");
                if (!keep_length && netgate_http_field_is_hop(h, f->name, f->name_len))
                        continue;
                /* A known value spelt in a field's name (an echo of the
                 * request as fields): the field is left out, as a name
                 * cannot carry the mask. */
                if (x->filter && x->filter->mask &&
                    (v = x->filter->mask(x->filter_ud, f->name, f->name_len, &vlen))) {
                        free(v);
                        continue;
                }
                const char *val = f->value;
                size_t len = f->value_len;
                v = NULL;
                if (x->filter && x->filter->mask &&
                    (v = x->filter->mask(x->filter_ud, f->value, f->value_len, &vlen))) {
                        val = v;
                        len = vlen;
                }
                evbuffer_add_printf(out, "%.*s: %.*s\r\n", (int)f->name_len, f->name, (int)len,
                                    val);
                if (!interim && x->filter && x->filter->field)
                        x->filter->field(x->filter_ud, f, val, len);
                free(v);
        }
        if (!interim) {
                if (h->framing == NETGATE_HTTP_BODY_LENGTH)
                        evbuffer_add_printf(out, "Content-Length: %" PRIu64 "\r\n", h->length);
                else if (x->resp_encode)
                        evbuffer_add(out, "Transfer-Encoding: chunked\r\n", 28);
                if (x->close_after)
                        evbuffer_add(out, "Connection: close\r\n", 19);
        }
        evbuffer_add(out, "\r\n", 2);
        netgate_exchange_account(x, false, evbuffer_get_length(out) - before);
}

void netgate_exchange_release(struct netgate_exchange *x)
{
        x->resp_scrub = redactor_scrub_free(x->resp_scrub);
}

void netgate_exchange_put_framing(struct evbuffer *out, const struct netgate_http_head *req)
{
        if (req->framing == NETGATE_HTTP_BODY_LENGTH)
                evbuffer_add_printf(out, "Content-Length: %" PRIu64 "\r\n", req->length);
        else if (req->framing == NETGATE_HTTP_BODY_CHUNKED)
                evbuffer_add(out, "Transfer-Encoding: chunked\r\n", 28);
}

void netgate_exchange_start(struct netgate_exchange *x, struct bufferevent *client,
                            struct bufferevent *up)
{
        const struct netgate_http_head *h = &x->reqp->head;
        x->up_eof = false;
        x->resp_started = x->resp_sent = false;
        x->resp_head_done = x->resp_done = false;
        x->resp_encode = false;
        x->resp_scrub = redactor_scrub_free(x->resp_scrub);
        netgate_http_body_init(&x->req_body, h->framing, h->length);
        x->req_done = h->framing == NETGATE_HTTP_BODY_NONE;
        x->req_encode = h->framing == NETGATE_HTTP_BODY_CHUNKED;
        if (!x->respp)
                x->respp = xcalloc(1, sizeof(*x->respp));
        netgate_http_parser_init(x->respp, NETGATE_HTTP_RESPONSE);
        x->respp->head_request = is_head_request(h);
        /* Writing is allowed already on a kept upstream: enabling it again
         * with nothing queued would register the write event for nothing. */
        bufferevent_enable(up,
                           bufferevent_get_enabled(up) & EV_WRITE ? EV_READ : EV_READ | EV_WRITE);
        netgate_exchange_pump(x, client, up);
}

/* Add `n` scrubbed bytes to dst, as one chunk when `encode`. */
static void put_scrubbed(struct evbuffer *dst, char *buf, size_t n, bool encode)
{
        if (n) {
                if (encode)
                        evbuffer_add_printf(dst, "%zx\r\n", n);
                evbuffer_add(dst, buf, n);
                if (encode)
                        evbuffer_add(dst, "\r\n", 2);
        }
        free(buf);
}

/* A run of the response body passes the scrubber: what it gives back is as
 * long as what went in, less the tail it holds until the next run shows
 * whether a value continues there. */
static int scrub_run(struct netgate_exchange *x, struct evbuffer *src, struct evbuffer *dst,
                     size_t run, bool encode)
{
        char *in = xcalloc(run, 1), *out = NULL;
        size_t n = 0;
        if (evbuffer_remove(src, in, run) != (int)run) {
                free(in);
                return -EIO;
        }
        int r = redactor_scrub_feed(x->resp_scrub, in, run, &out, &n);
        explicit_bzero(in, run);
        free(in);
        if (r < 0)
                return r;
        put_scrubbed(dst, out, n, encode);
        return 0;
}

/* The body is complete: the held tail goes out. */
static int scrub_flush(struct netgate_exchange *x, struct evbuffer *dst, bool encode)
{
        char *out = NULL;
        size_t n = 0;
        if (!x->resp_scrub)
                return 0;
        int r = redactor_scrub_finish(x->resp_scrub, &out, &n);
        if (r < 0)
                return r;
        put_scrubbed(dst, out, n, encode);
        return 0;
}

/* Move one body from src to dst within dst's bound and the byte budget,
 * re-encoding chunks when `encode`: each run that arrives leaves at once as
 * one chunk, so a streamed answer reaches the client as it is produced.
 * 1: body complete; 0: waiting; <0: bad framing, or -EDQUOT when the byte
 * budget ran out. */
static int move_body(struct netgate_exchange *x, struct evbuffer *src, struct evbuffer *dst,
                     struct netgate_http_body *b, bool encode, bool up)
{
        for (;;) {
                size_t dlen = evbuffer_get_length(dst);
                size_t room = dlen < NETGATE_BUF_HIGH ? NETGATE_BUF_HIGH - dlen : 0;
                size_t allowed = netgate_budget_allows(x->g, room);
                struct evbuffer_iovec v = {0};
                if (evbuffer_peek(src, -1, NULL, &v, 1) < 1)
                        v.iov_len = 0;
                size_t used = 0, off = 0, run = 0;
                int r =
                    netgate_http_body_feed(b, v.iov_base, v.iov_len, allowed, &used, &off, &run);
                if (r < 0)
                        return r;
                if (off)
                        evbuffer_drain(src, off);
                if (run && !up && x->resp_scrub) {
                        int e = scrub_run(x, src, dst, run, encode);
                        if (e < 0)
                                return e;
                } else if (run) {
                        if (encode)
                                evbuffer_add_printf(dst, "%zx\r\n", run);
                        evbuffer_remove_buffer(src, dst, run);
                        if (encode)
                                evbuffer_add(dst, "\r\n", 2);
                }
                if (used > off + run)
                        evbuffer_drain(src, used - off - run);
                if (r == 1 && !up) {
                        int e = scrub_flush(x, dst, encode);
                        if (e < 0)
                                return e;
                }
                if (r == 1 && encode)
                        evbuffer_add(dst, "0\r\n\r\n", 5);
                netgate_exchange_account(x, up, evbuffer_get_length(dst) - dlen);
                if (r == 1)
                        return 1;
                if (used == 0) {
                        if (allowed == 0 && room > 0 && v.iov_len > 0)
                                return -EDQUOT;
                        return 0;
                }
        }
}

/* Whether every coding in a Content-Encoding or Transfer-Encoding value
 * leaves the bytes as they are: "identity", and "chunked" for transfer,
 * which the gate decodes itself. */
static bool codings_plain(const char *v, size_t n, bool transfer)
{
        size_t i = 0;
        while (i <= n) {
                size_t j = i;
                while (j < n && v[j] != ',')
                        j++;
                size_t a = i, b = j;
                while (a < b && (v[a] == ' ' || v[a] == '\t'))
                        a++;
                while (b > a && (v[b - 1] == ' ' || v[b - 1] == '\t'))
                        b--;
                bool ok = b == a || (b - a == 8 && strncasecmp(v + a, "identity", 8) == 0) ||
                          (transfer && b - a == 7 && strncasecmp(v + a, "chunked", 7) == 0);
                if (!ok)
                        return false;
                i = j + 1;
        }
        return true;
}

/* With refuse_encoded, the codings of a response body that the gate cannot
 * scan (printable, for the message), or NULL. */
static const char *encoded_body(const struct netgate_exchange *x, const struct netgate_http_head *h,
                                char shown[static 64])
{
        if (!x->refuse_encoded || h->framing == NETGATE_HTTP_BODY_NONE)
                return NULL;
        for (size_t i = 0; i < h->n_fields; i++) {
                const struct netgate_http_field *f = &h->fields[i];
                bool content = netgate_http_name_eq(f->name, f->name_len, "content-encoding");
                bool transfer = netgate_http_name_eq(f->name, f->name_len, "transfer-encoding");
                if ((!content && !transfer) || codings_plain(f->value, f->value_len, transfer))
                        continue;
                /* The message quotes the value: a known value in it is
                 * masked whole before it is cut to fit. */
                size_t vlen = f->value_len, o = 0;
                char *masked = x->filter && x->filter->mask
                                   ? x->filter->mask(x->filter_ud, f->value, f->value_len, &vlen)
                                   : NULL;
                const char *val = masked ? masked : f->value;
                if (!masked)
                        vlen = f->value_len;
                for (size_t k = 0; k < vlen && o + 1 < 64; k++) {
                        char c = val[k];
                        shown[o++] = c >= 0x20 && c < 0x7f ? c : '?';
                }
                shown[o] = '\0';
                free(masked);
                return shown;
        }
        return NULL;
}

enum pump_next { PUMP_ON, PUMP_END, PUMP_UP_FAILED, PUMP_REFUSED, PUMP_DONE };

/* Move what can be moved; says what comes next, with the reason for an end
 * and the detail of a refusal. Calls nothing of the owner's: the caller
 * pushes the held outputs first (netgate_bev_push), since the owner may
 * free both sides. */
static enum pump_next pump_moves(struct netgate_exchange *x, struct bufferevent *client,
                                 struct bufferevent *up, const char **reason, char *detail,
                                 size_t detail_size)
{
        struct evbuffer *cin = bufferevent_get_input(client);
        struct evbuffer *cout = bufferevent_get_output(client);
        struct evbuffer *uin = bufferevent_get_input(up);
        struct evbuffer *uout = bufferevent_get_output(up);
        const struct netgate_http_head *req = &x->reqp->head;

        if (!x->req_done) {
                int r = move_body(x, cin, uout, &x->req_body, x->req_encode, true);
                if (r == -EDQUOT) {
                        *reason = "budget_bytes";
                        return PUMP_END;
                }
                if (r < 0) {
                        *reason = "bad_request";
                        return PUMP_END;
                }
                x->req_done = r == 1;
                if (!x->req_done && x->client_eof && evbuffer_get_length(cin) == 0) {
                        *reason = "client_closed";
                        return PUMP_END;
                }
        }

        if (evbuffer_get_length(uin) > 0)
                x->resp_started = true;
        while (!x->resp_done) {
                if (!x->resp_head_done) {
                        struct evbuffer_iovec v;
                        if (evbuffer_peek(uin, -1, NULL, &v, 1) < 1 || v.iov_len == 0)
                                break;
                        size_t used = 0;
                        int r = netgate_http_parser_feed(x->respp, v.iov_base, v.iov_len, &used);
                        evbuffer_drain(uin, used);
                        if (r < 0 || (r > 0 && x->respp->head.status == 101)) {
                                /* The gate never asks for an upgrade; an
                                 * unasked-for 101 or a malformed head ends it. */
                                x->up_eof = true;
                                x->last_errno = EPROTO;
                                return PUMP_UP_FAILED;
                        }
                        if (r == 0)
                                break;
                        const struct netgate_http_head *h = &x->respp->head;
                        x->status = h->status;
                        x->resp_sent = true;
                        if (h->status < 200) {
                                if (req->minor == 1)
                                        write_response_head(x, cout);
                                netgate_http_parser_init(x->respp, NETGATE_HTTP_RESPONSE);
                                x->respp->head_request = is_head_request(req);
                                continue;
                        }
                        char coding[64];
                        const char *enc = encoded_body(x, h, coding);
                        if (enc) {
                                snprintf(detail, detail_size,
                                         "the answer's body is encoded (%s) although the gate "
                                         "asked for identity; it cannot be scanned for injected "
                                         "values",
                                         enc);
                                x->up_eof = true;
                                return x->filter && x->filter->refused ? PUMP_REFUSED
                                                                       : PUMP_UP_FAILED;
                        }
                        if (x->scrub && h->framing != NETGATE_HTTP_BODY_NONE)
                                x->resp_scrub = redactor_scrub_new(x->scrub);
                        /* An HTTP/1.1 client keeps its connection even when
                         * the upstream delimits by closing: the gate re-chunks. */
                        x->resp_encode =
                            req->minor == 1 && (h->framing == NETGATE_HTTP_BODY_CHUNKED ||
                                                h->framing == NETGATE_HTTP_BODY_CLOSE);
                        if (req->minor == 0)
                                x->close_after = true;
                        write_response_head(x, cout);
                        netgate_http_body_init(&x->resp_body, h->framing, h->length);
                        x->resp_head_done = true;
                }
                int r = move_body(x, uin, cout, &x->resp_body, x->resp_encode, false);
                if (r == -EDQUOT) {
                        *reason = "budget_bytes";
                        return PUMP_END;
                }
                if (r < 0) {
                        *reason = "upstream_failed";
                        return PUMP_END;
                }
                if (r == 1) {
                        x->resp_done = true;
                        break;
                }
                if (x->resp_body.framing == NETGATE_HTTP_BODY_CLOSE && x->up_eof &&
                    evbuffer_get_length(uin) == 0 && x->last_errno == 0) {
                        size_t before = evbuffer_get_length(cout);
                        if (scrub_flush(x, cout, x->resp_encode) < 0) {
                                *reason = "upstream_failed";
                                return PUMP_END;
                        }
                        netgate_exchange_account(x, false, evbuffer_get_length(cout) - before);
                        if (x->resp_encode)
                                evbuffer_add(cout, "0\r\n\r\n", 5);
                        x->resp_done = true;
                }
                break;
        }

        if (x->resp_done)
                return PUMP_DONE;
        if (x->up_eof && evbuffer_get_length(uin) == 0)
                return PUMP_UP_FAILED;
        return PUMP_ON;
}

void netgate_exchange_pump(struct netgate_exchange *x, struct bufferevent *client,
                           struct bufferevent *up)
{
        struct evbuffer *cout = bufferevent_get_output(client);
        struct evbuffer *uout = bufferevent_get_output(up);
        const char *reason = NULL;
        char detail[256] = "";
        bool hc = netgate_bev_hold(x->g, client), hu = netgate_bev_hold(x->g, up);
        enum pump_next next = pump_moves(x, client, up, &reason, detail, sizeof(detail));
        netgate_bev_push(client, hc);
        netgate_bev_push(up, hu);
        switch (next) {
        case PUMP_END:
                x->ops->end(x->ud, reason);
                return;
        case PUMP_UP_FAILED:
                x->ops->upstream_failed(x->ud);
                return;
        case PUMP_REFUSED:
                x->filter->refused(x->filter_ud, "encoded_response", detail);
                return;
        case PUMP_DONE:
                x->ops->done(x->ud);
                return;
        case PUMP_ON:
                break;
        }
        /* Once the request is complete, reading the client stays as it is:
         * the next request's bytes (or its end) wait in the bounded input
         * until this answer is done (client.c), and a keep-alive connection
         * does not register and remove its read event for every request. */
        if (!x->req_done && evbuffer_get_length(uout) < NETGATE_BUF_HIGH)
                bufferevent_enable(client, EV_READ);
        else if (!x->req_done)
                bufferevent_disable(client, EV_READ);
        if (evbuffer_get_length(cout) < NETGATE_BUF_HIGH)
                bufferevent_enable(up, EV_READ);
        else
                bufferevent_disable(up, EV_READ);
}

bool netgate_exchange_keep_upstream(struct netgate_exchange *x, struct bufferevent *up)
{
        struct timeval tv;
        const struct netgate_http_head *req = &x->reqp->head, *resp = &x->respp->head;
        /* Bytes past the end of the response (a body sent after a HEAD
         * answer) would be read as the next response: such an upstream is
         * not reused. */
        bool reusable = x->req_done && !x->up_eof && !x->close_after && !resp->conn_close &&
                        evbuffer_get_length(bufferevent_get_input(up)) == 0 &&
                        resp->framing != NETGATE_HTTP_BODY_CLOSE && req->minor == 1 &&
                        resp->minor == 1;
        if (!reusable)
                return false;
        bufferevent_set_timeouts(up, netgate_secs(&tv, NETGATE_IDLE_UP_TIMEOUT_S), NULL);
        bufferevent_enable(up, EV_READ);
        return true;
}

bool netgate_exchange_retryable(const struct netgate_exchange *x, bool up_reused)
{
        return up_reused && !x->resp_started && x->reqp->head.framing == NETGATE_HTTP_BODY_NONE;
}

/* ---- the gate's own answers ---- */

void netgate_exchange_answer(struct netgate_exchange *x, struct bufferevent *client, int status,
                             const char *phrase, const char *header, const char *reason,
                             const char *line)
{
        netgate_exchange_answer_ex(x, client, status, phrase, header, reason, NULL, line);
}

void netgate_exchange_answer_ex(struct netgate_exchange *x, struct bufferevent *client, int status,
                                const char *phrase, const char *header, const char *reason,
                                const char *extra, const char *line)
{
        struct evbuffer *out = bufferevent_get_output(client);
        x->status = status;
        evbuffer_add_printf(out,
                            "HTTP/1.1 %d %s\r\n"
                            "%s: %s\r\n"
                            "%s"
                            "Content-Type: text/plain; charset=utf-8\r\n"
                            "Content-Length: %zu\r\n"
                            "Connection: close\r\n"
                            "\r\n"
                            "%s",
                            status, phrase, header, reason, extra ? extra : "", strlen(line), line);
}

void netgate_http_refusal(int r, int *ret_status, const char **ret_phrase, const char **ret_reason)
{
        const char *reason = "bad_request", *phrase = "Bad Request";
        int status = 400;
        if (r == -EMSGSIZE) {
                reason = "head_too_large";
                phrase = "Request Header Fields Too Large";
                status = 431;
        } else if (r == -ENOTSUP) {
                reason = "unsupported";
                phrase = "Not Implemented";
                status = 501;
        } else if (r == -EPROTONOSUPPORT) {
                reason = "unsupported";
                phrase = "HTTP Version Not Supported";
                status = 505;
        }
        *ret_status = status;
        *ret_phrase = phrase;
        *ret_reason = reason;
}

int netgate_read_head(struct netgate_http_parser *p, struct evbuffer *in)
{
        for (;;) {
                struct evbuffer_iovec v;
                if (evbuffer_peek(in, -1, NULL, &v, 1) < 1 || v.iov_len == 0)
                        return 0;
                size_t used = 0;
                int r = netgate_http_parser_feed(p, v.iov_base, v.iov_len, &used);
                evbuffer_drain(in, used);
                if (r != 0)
                        return r;
        }
}

/* ---- closing ---- */

#define LINGER_MAX       (1024 * 1024)
#define LINGER_TIMEOUT_S 2

bool netgate_linger_start(struct netgate_linger *l, struct bufferevent *client, bool client_eof)
{
        struct timeval tv;
        l->lingering = false;
        if (client_eof) {
                bufferevent_disable(client, EV_READ);
                if (evbuffer_get_length(bufferevent_get_output(client)) == 0)
                        return true;
        } else
                bufferevent_enable(client, EV_READ);
        bufferevent_set_timeouts(client, netgate_secs(&tv, LINGER_TIMEOUT_S),
                                 netgate_secs(&tv, LINGER_TIMEOUT_S));
        bufferevent_enable(client, EV_WRITE);
        if (evbuffer_get_length(bufferevent_get_output(client)) == 0) {
                shutdown(bufferevent_getfd(client), SHUT_WR);
                l->lingering = true;
        }
        return false;
}

bool netgate_linger_read(struct netgate_linger *l, struct bufferevent *client)
{
        struct evbuffer *in = bufferevent_get_input(client);
        l->lingered += evbuffer_get_length(in);
        evbuffer_drain(in, evbuffer_get_length(in));
        return l->lingered > LINGER_MAX;
}

bool netgate_linger_write(struct netgate_linger *l, struct bufferevent *client, bool client_eof)
{
        if (evbuffer_get_length(bufferevent_get_output(client)) > 0)
                return false;
        if (client_eof)
                return true;
        if (!l->lingering) {
                shutdown(bufferevent_getfd(client), SHUT_WR);
                l->lingering = true;
        }
        return false;
}

bool netgate_linger_eof(const struct netgate_linger *l, struct bufferevent *client)
{
        return l->lingering || evbuffer_get_length(bufferevent_get_output(client)) == 0;
}
