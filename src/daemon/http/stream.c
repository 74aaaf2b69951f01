/* SPDX-License-Identifier: Apache-2.0 */
/* A reply streamed from a source one chunk at a time (http.h,
 * reply_stream): the next chunk is pulled when the last has left for the
 * client, so that a body of any size takes no more of the daemon's memory
 * than one chunk, and a client that goes away frees the source. */
#include <event2/buffer.h>
#include <event2/http.h>
#include <stdlib.h>

#include "http.h"
#include "util.h"

struct stream {
        struct evhttp_request *req;
        struct evhttp_connection *conn;
        stream_pull_fn pull;
        stream_free_fn free_src;
        void *src;
};

static void stream_free(struct stream *s)
{
        if (s->conn)
                evhttp_connection_set_closecb(s->conn, NULL, NULL);
        s->free_src(s->src);
        free(s);
}

/* The client went away: libevent frees the request. */
static void stream_closed(struct evhttp_connection *conn, void *arg)
{
        struct stream *s = arg;
        (void)conn;
        s->conn = NULL;
        stream_free(s);
}

static void stream_next(struct evhttp_connection *conn, void *arg)
{
        struct stream *s = arg;
        (void)conn;
        struct evbuffer *buf = evbuffer_new();
        int n = buf ? s->pull(s->src, buf) : -1;
        if (n <= 0 || evbuffer_get_length(buf) == 0) {
                /* The end, or a read error: the client sees a short body,
                 * never bytes from elsewhere. */
                if (buf)
                        evbuffer_free(buf);
                struct evhttp_request *req = s->req;
                stream_free(s);
                evhttp_send_reply_end(req);
                return;
        }
        evhttp_send_reply_chunk_with_cb(s->req, buf, stream_next, s);
        evbuffer_free(buf);
}

void reply_stream(struct daemon *d, struct evhttp_request *req, stream_pull_fn pull,
                  stream_free_fn free_src, void *src)
{
        struct stream *s = xcalloc(1, sizeof(*s));
        s->req = req;
        s->pull = pull;
        s->free_src = free_src;
        s->src = src;
        s->conn = evhttp_request_get_connection(req);
        if (s->conn)
                evhttp_connection_set_closecb(s->conn, stream_closed, s);
        count_reply(d, 200);
        evhttp_send_reply_start(req, 200, NULL);
        stream_next(s->conn, s);
}
