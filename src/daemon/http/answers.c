/* SPDX-License-Identifier: Apache-2.0 */
/* The host-job answers a grant holds in the daemon (answers.h): charged
 * while the job prints them, then while they wait in their connection's
 * output, let go of as the connection writes them or ends. */
#include <errno.h>
#include <event2/buffer.h>
#include <event2/bufferevent.h>
#include <event2/event.h>
#include <event2/http.h>
#include <stdlib.h>
#include <string.h>

#include "answers.h"
#include "daemon.h"
#include "grants.h"
#include "http.h"
#include "util.h"

#define ANSWER_GRANT_MAX_DEF ((size_t)128 << 20)
#define ANSWER_MAX_DEF       ((size_t)512 << 20)
#define ANSWER_BOUND_MIN     ((uint64_t)1 << 20)
#define ANSWER_BOUND_MAX     ((uint64_t)64 << 30)
#define CHECK_MS             1000

struct answer_grant {
        struct answer_grant *next;
        char name[GRANT_NAME_MAX + 1];
        size_t bytes;
        unsigned holds;
};

static struct {
        bool loaded;
        size_t grant_max, max;
        size_t total, readers;
        unsigned holds, reader_holds;
        struct answer_grant *grants;
        struct answer_hold *sent; /* answers on their way to a client */
} A;

struct answer_hold {
        struct daemon *d;
        struct answer_grant *g;
        bool reader;
        size_t bytes;
        struct bufferevent *bev; /* the answer's connection, once sent (a reference) */
        struct event *check;
        struct answer_hold *next, **prev; /* in A.sent, once sent */
};

static size_t bound(const char *name, size_t dflt)
{
        const char *v = secure_getenv(name);
        uint64_t n;
        if (v && *v && safe_atou64(v, &n) >= 0 && n >= ANSWER_BOUND_MIN && n <= ANSWER_BOUND_MAX)
                return (size_t)n;
        return dflt;
}

static void load(void)
{
        if (A.loaded)
                return;
        A.loaded = true;
        A.grant_max = bound("AIRLOCK_ANSWER_GRANT_MAX", ANSWER_GRANT_MAX_DEF);
        A.max = bound("AIRLOCK_ANSWER_MAX", ANSWER_MAX_DEF);
}

static struct answer_grant *grant_find(const char *name)
{
        for (struct answer_grant *g = A.grants; g; g = g->next)
                if (STREQ(g->name, name))
                        return g;
        struct answer_grant *g = xcalloc(1, sizeof(*g));
        snprintf(g->name, sizeof(g->name), "%s", name);
        g->next = A.grants;
        A.grants = g;
        return g;
}

static void grant_put(struct answer_grant *g)
{
        if (--g->holds)
                return;
        for (struct answer_grant **p = &A.grants; *p; p = &(*p)->next)
                if (*p == g) {
                        *p = g->next;
                        free(g);
                        return;
                }
}

struct answer_hold *answer_hold_new(struct daemon *d, const char *grant, bool reader)
{
        load();
        struct answer_hold *h = xcalloc(1, sizeof(*h));
        h->d = d;
        h->reader = reader;
        h->g = grant_find(grant ? grant : "");
        h->g->holds++;
        A.holds++;
        if (reader)
                A.reader_holds++;
        return h;
}

int answer_hold_admit(const struct answer_hold *h)
{
        if (h->g->holds > ANSWER_HOLDS_GRANT_MAX)
                return -EMFILE;
        if (A.holds > ANSWER_HOLDS_MAX || (h->reader && A.reader_holds > ANSWER_HOLDS_MAX / 2))
                return -ENFILE;
        return 0;
}

int answer_hold_charge(struct answer_hold *h, size_t n)
{
        if (h->g->bytes + n > A.grant_max)
                return -EDQUOT;
        if (A.total + n > A.max || (h->reader && A.readers + n > A.max / 2))
                return -ENOBUFS;
        h->bytes += n;
        h->g->bytes += n;
        A.total += n;
        if (h->reader)
                A.readers += n;
        return 0;
}

static void uncharge(struct answer_hold *h, size_t n)
{
        if (n > h->bytes)
                n = h->bytes;
        h->bytes -= n;
        h->g->bytes -= n;
        A.total -= n;
        if (h->reader)
                A.readers -= n;
}

static void on_output(struct evbuffer *buf, const struct evbuffer_cb_info *info, void *arg);

struct answer_hold *answer_hold_free(struct answer_hold *h)
{
        if (!h)
                return NULL;
        uncharge(h, h->bytes);
        if (h->prev) {
                *h->prev = h->next;
                if (h->next)
                        h->next->prev = h->prev;
        }
        if (h->check)
                event_free(h->check);
        if (h->bev) {
                evbuffer_remove_cb(bufferevent_get_output(h->bev), on_output, h);
                bufferevent_decref(h->bev);
        }
        grant_put(h->g);
        A.holds--;
        if (h->reader)
                A.reader_holds--;
        free(h);
        return NULL;
}

/* What of the answer can still be waiting is no more than what waits in
 * the connection's output. */
static void follow(struct answer_hold *h)
{
        size_t waiting = evbuffer_get_length(bufferevent_get_output(h->bev));
        if (waiting < h->bytes)
                uncharge(h, h->bytes - waiting);
}

static void on_output(struct evbuffer *buf, const struct evbuffer_cb_info *info, void *arg)
{
        struct answer_hold *h = arg;
        (void)buf;
        if (!info->n_deleted)
                return;
        follow(h);
        /* Freed from the loop, not from inside the buffer's callbacks. */
        if (!h->bytes)
                event_active(h->check, EV_TIMEOUT, 0);
}

/* libevent frees a connection that failed, or that the client closed,
 * without a word: its bufferevent (kept by our reference) has lost its
 * callbacks then. */
static bool conn_gone(struct bufferevent *bev)
{
        bufferevent_data_cb r, w;
        bufferevent_event_cb e;
        void *arg;
        bufferevent_getcb(bev, &r, &w, &e, &arg);
        return !r && !w && !e;
}

static void on_check(evutil_socket_t fd, short what, void *arg)
{
        struct answer_hold *h = arg;
        (void)fd;
        (void)what;
        if (!conn_gone(h->bev))
                follow(h);
        if (conn_gone(h->bev) || !h->bytes)
                answer_hold_free(h);
}

void answer_hold_reply(struct answer_hold *h, struct evhttp_request *req, int code,
                       const char *type, struct evbuffer *body)
{
        struct evhttp_connection *conn = evhttp_request_get_connection(req);
        struct bufferevent *bev = conn ? evhttp_connection_get_bufferevent(conn) : NULL;
        if (bev)
                bufferevent_incref(bev);
        reply_body(h->d, req, code, type, body);
        if (!bev) {
                /* The client is gone: libevent freed the answer. */
                answer_hold_free(h);
                return;
        }
        h->bev = bev;
        h->next = A.sent;
        if (A.sent)
                A.sent->prev = &h->next;
        h->prev = &A.sent;
        A.sent = h;
        h->check = event_new(h->d->base, -1, EV_PERSIST, on_check, h);
        if (!h->check || !evbuffer_add_cb(bufferevent_get_output(bev), on_output, h)) {
                /* Not followed: let go at once rather than hold for ever. */
                answer_hold_free(h);
                return;
        }
        follow(h);
        struct timeval tv = {.tv_sec = CHECK_MS / 1000, .tv_usec = (CHECK_MS % 1000) * 1000};
        event_add(h->check, &tv);
        if (!h->bytes)
                event_active(h->check, EV_TIMEOUT, 0);
}

void answer_hold_refused(struct daemon *d, struct evhttp_request *req, const struct answer_hold *h,
                         int r)
{
        evhttp_add_header(evhttp_request_get_output_headers(req), "Retry-After", "5");
        if (r == -EMFILE)
                reply_error_fields(d, req, 429, "unread_answers",
                                   json_pack("{s:s, s:I}", "limit", "answersPerGrant", "max",
                                             (json_int_t)ANSWER_HOLDS_GRANT_MAX),
                                   "grant \"%s\" has %u host jobs (diff, export, ...) running or "
                                   "answered and not read yet, its most: read or close those "
                                   "requests, then try again",
                                   h->g->name, ANSWER_HOLDS_GRANT_MAX);
        else if (r == -ENFILE)
                reply_error_fields(
                    d, req, 503, "unread_answers",
                    json_pack("{s:s, s:I}", "limit", h->reader ? "answersReaders" : "answers",
                              "max",
                              (json_int_t)(h->reader ? ANSWER_HOLDS_MAX / 2 : ANSWER_HOLDS_MAX)),
                    "the daemon has %u host jobs running or answered and not "
                    "read yet, its most%s: try again later",
                    h->reader ? A.reader_holds - 1 : A.holds - 1,
                    h->reader ? " for grants reading another grant's sandbox" : "");
        else if (r == -EDQUOT)
                reply_error_fields(d, req, 429, "unread_answers",
                                   json_pack("{s:s, s:I}", "limit", "answerBytesPerGrant", "max",
                                             (json_int_t)A.grant_max),
                                   "grant \"%s\" holds %zu bytes of diff, export and job answers "
                                   "its clients have not read yet, its most "
                                   "(AIRLOCK_ANSWER_GRANT_MAX, %zu): read or close those "
                                   "requests, then try again",
                                   h->g->name, h->g->bytes, A.grant_max);
        else
                reply_error_fields(d, req, 503, "unread_answers",
                                   json_pack("{s:s, s:I}", "limit",
                                             h->reader ? "answerBytesReaders" : "answerBytes",
                                             "max", (json_int_t)(h->reader ? A.max / 2 : A.max)),
                                   "the daemon holds %zu bytes of answers not read yet, its "
                                   "most%s (AIRLOCK_ANSWER_MAX, %zu): try again later",
                                   h->reader ? A.readers : A.total,
                                   h->reader ? " for grants reading another grant's sandbox" : "",
                                   h->reader ? A.max / 2 : A.max);
}

size_t answers_held(void)
{
        return A.total;
}

void answers_shutdown(void)
{
        while (A.sent)
                answer_hold_free(A.sent);
}
