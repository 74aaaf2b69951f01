/* SPDX-License-Identifier: Apache-2.0 */
#pragma once

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "netgate/addr.h"
#include "netgate/http.h"
#include "netgate/netgate-internal.h"
#include "netgate/upstream.h"

/* The HTTP layer above the upstream engine (upstream.h), under the gate's HTTP
 * client (client.h): one request/response exchange
 * between a client and a connected upstream bufferevent (bodies streamed
 * both ways through bounded buffers, chunks re-encoded, interim answers
 * passed on), the gate's own plain-text answers, and the linger before a
 * close. Internal to the network gate. */

struct bufferevent;
struct evbuffer;
struct netgate;
struct redactor;
struct redactor_scrub;
struct timeval;

/* ---- one exchange ---- */

/* The exchange's owner, the HTTP client (client.h). */
struct netgate_exchange_ops {
        /* The response is complete. */
        void (*done)(void *ud);
        /* The upstream closed, failed, or answered with a bad head. */
        void (*upstream_failed)(void *ud);
        /* Close the connection, ending the record with `reason`. */
        void (*end)(void *ud, const char *reason);
};

/* The front-end's view of the responses; every op is optional. */
struct netgate_exchange_filter {
        /* A masked copy (malloc'd) of a value from the upstream's response
         * head, or NULL to pass it as it is. */
        char *(*mask)(void *ud, const char *value, size_t len, size_t *ret_len);
        /* A field of a final response head as it was passed on. */
        void (*field)(void *ud, const struct netgate_http_field *f, const char *value, size_t len);
        /* The upstream's final response head is refused before anything of
         * it is passed on (a content-encoded answer the gate cannot scan);
         * `detail` says why. Without it, upstream_failed. */
        void (*refused)(void *ud, const char *reason, const char *detail);
};

struct netgate_exchange {
        struct netgate *g;
        const struct netgate_exchange_ops *ops;
        void *ud;
        const struct netgate_exchange_filter *filter; /* NULL: none */
        void *filter_ud;

        /* The request being served, for its record. */
        int status; /* sent to the client */
        uint64_t bytes_up, bytes_down;
        int last_errno;

        struct netgate_http_parser *reqp, *respp;
        struct netgate_http_body req_body, resp_body;
        bool req_done, resp_head_done, resp_done, resp_started, resp_sent;
        bool req_encode, resp_encode;
        bool close_after;
        bool client_eof, up_eof;

        /* Set by the owner: response bodies pass through a same-length
         * scrubber of the values this redactor knows, so a framed length
         * stays true; with refuse_encoded, a response whose body is
         * content-encoded (and so cannot be scanned) is refused. */
        const struct redactor *scrub;
        bool refuse_encoded;
        struct redactor_scrub *resp_scrub; /* the response body in flight */
};

/* Free what the exchange holds besides its parsers. */
void netgate_exchange_release(struct netgate_exchange *x);

/* Count bytes against the gate's budget and this request. */
void netgate_exchange_account(struct netgate_exchange *x, bool up, size_t n);

/* The framing field of a request head as the gate relays its body to the
 * upstream: Content-Length, or chunked (re-encoded). */
void netgate_exchange_put_framing(struct evbuffer *out, const struct netgate_http_head *req);

/* Start the exchange of the request in x->reqp, whose head the caller has
 * already written to `up`, and pump it. */
void netgate_exchange_start(struct netgate_exchange *x, struct bufferevent *client,
                            struct bufferevent *up);

/* Move what can move, then call one of the ops or set the read sides for
 * flow control. */
void netgate_exchange_pump(struct netgate_exchange *x, struct bufferevent *client,
                           struct bufferevent *up);

/* Whether a finished exchange leaves `up` ready for the next request; when it
 * does, `up` is set to wait idle for it. */
bool netgate_exchange_keep_upstream(struct netgate_exchange *x, struct bufferevent *up);

/* Whether a failed exchange may be sent again on a fresh connection: the
 * kept upstream it went to closed before answering a body-less request. */
bool netgate_exchange_retryable(const struct netgate_exchange *x, bool up_reused);

/* ---- the gate's own answers ---- */

/* A plain-text answer that closes the connection; `line` is its body. */
void netgate_exchange_answer(struct netgate_exchange *x, struct bufferevent *client, int status,
                             const char *phrase, const char *header, const char *reason,
                             const char *line);
/* The same with `extra` (NULL, or whole "Name: value\r\n" fields) after
 * the first field. */
void netgate_exchange_answer_ex(struct netgate_exchange *x, struct bufferevent *client,
                                int status, const char *phrase, const char *header,
                                const char *reason, const char *extra, const char *line);

/* The status, phrase and record reason for a request head the parser
 * refused with `r`. */
void netgate_http_refusal(int r, int *ret_status, const char **ret_phrase, const char **ret_reason);

/* Feed the client's bytes to a request parser: <0 refused, 0 more needed,
 * 1 the head is complete. */
int netgate_read_head(struct netgate_http_parser *p, struct evbuffer *in);

/* ---- closing ---- */

/* Answer, then close without resetting: stop writing, read and discard what
 * the client still sends for a moment, so that unread request bytes do not
 * turn the close into a reset that destroys the answer in flight. Each
 * returns true when the connection is to be freed now. */
struct netgate_linger {
        bool lingering;
        size_t lingered;
};

bool netgate_linger_start(struct netgate_linger *l, struct bufferevent *client, bool client_eof);
bool netgate_linger_read(struct netgate_linger *l, struct bufferevent *client);
bool netgate_linger_write(struct netgate_linger *l, struct bufferevent *client, bool client_eof);
/* The client closed its side while lingering. */
bool netgate_linger_eof(const struct netgate_linger *l, struct bufferevent *client);
