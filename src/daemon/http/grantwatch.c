/* SPDX-License-Identifier: Apache-2.0 */
/* The revocation check of a grant's long requests (grantwatch.h). */
#include <errno.h>
#include <event2/event.h>
#include <stdio.h>

#include "daemon.h"
#include "grants.h"
#include "grantwatch.h"
#include "store.h"
#include "util.h"

struct grant_watch {
        struct daemon *d;
        struct event *ev;
        char hash[GRANT_HASH_HEX + 1];
        void (*on_revoked)(void *arg);
        void *arg;
};

bool grant_hash_revoked(struct daemon *d, const char *token_hash)
{
        struct grant *g = NULL;
        int r = store_grant_by_hash(d->store, token_hash, &g);
        grant_free(g);
        /* A store that cannot answer does not end a stream: only a grant
         * known to be out of force does. */
        return r == -ENOENT;
}

static void on_check(evutil_socket_t fd, short what, void *arg)
{
        struct grant_watch *w = arg;
        (void)fd;
        (void)what;
        /* w may be freed by the callback: nothing of it is used after. */
        if (grant_hash_revoked(w->d, w->hash))
                w->on_revoked(w->arg);
}

struct grant_watch *grant_watch_new(struct daemon *d, const char *token_hash,
                                    void (*on_revoked)(void *arg), void *arg)
{
        if (!token_hash || !token_hash[0])
                return NULL;
        struct grant_watch *w = xcalloc(1, sizeof(*w));
        w->d = d;
        snprintf(w->hash, sizeof(w->hash), "%s", token_hash);
        w->on_revoked = on_revoked;
        w->arg = arg;
        w->ev = event_new(d->base, -1, EV_PERSIST, on_check, w);
        struct timeval tv = {.tv_sec = GRANT_WATCH_MS / 1000,
                             .tv_usec = (GRANT_WATCH_MS % 1000) * 1000};
        event_add(w->ev, &tv);
        return w;
}

struct grant_watch *grant_watch_free(struct grant_watch *w)
{
        if (!w)
                return NULL;
        event_free(w->ev);
        free(w);
        return NULL;
}
