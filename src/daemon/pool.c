/* SPDX-License-Identifier: Apache-2.0 */
#include <string.h>

#include "sandbox.h"
#include "pool.h"
#include "daemon.h"
#include "util.h"

/* The warm pool: per class, N sandboxes started ahead of need with the
 * class's default policy and an empty daemon-made workspace. A create that
 * asks for nothing but that class (no policy, no host workspace) takes one;
 * its metadata, TTL and idle timeout are applied when it is taken. */

struct sandbox *pool_take(struct daemon *d, const char *class_name)
{
        for (struct sandbox *sb = d->sandboxes; sb; sb = sb->next)
                if (sb->state == SANDBOX_POOLED && STREQ(sb->class_name, class_name))
                        return sb;
        return NULL;
}

size_t pool_ready(struct daemon *d)
{
        size_t n = 0;
        for (struct sandbox *sb = d->sandboxes; sb; sb = sb->next)
                n += sb->state == SANDBOX_POOLED;
        return n;
}

static void on_pool_started(struct sandbox *sb, int error, const char *message, void *userdata)
{
        /* A failure is retried at the next collection round, not at once:
         * a broken setup must not spin. */
        if (error < 0)
                daemon_log(sb->d, "pool: a %s sandbox failed to start: %s", sb->class_name,
                           message ? message : strerror(-error));
}

/* Pooled sandboxes of a class no longer pooled, or more than asked for (a
 * restart with another --pool), are destroyed. */
static void pool_trim(struct daemon *d)
{
        for (struct sandbox *sb = d->sandboxes; sb;) {
                struct sandbox *next = sb->next;
                if (sb->state != SANDBOX_POOLED) {
                        sb = next;
                        continue;
                }
                size_t want = 0, have = 0;
                for (size_t i = 0; i < d->n_pools; i++)
                        if (STREQ(d->pools[i].class_name, sb->class_name))
                                want = d->pools[i].size;
                for (struct sandbox *o = d->sandboxes; o; o = o->next)
                        if (o->state == SANDBOX_POOLED && STREQ(o->class_name, sb->class_name))
                                have++;
                if (have > want) {
                        sandbox_destroy(sb, "pool_trim", NULL, NULL);
                        /* The destroy may have ended and unlinked it. */
                        sb = d->sandboxes;
                        continue;
                }
                sb = next;
        }
}

void pool_refill(struct daemon *d)
{
        if (d->shutting_down)
                return;
        pool_trim(d);
        for (size_t i = 0; i < d->n_pools; i++) {
                const struct pool_spec *spec = &d->pools[i];
                size_t have = 0;
                for (struct sandbox *sb = d->sandboxes; sb; sb = sb->next)
                        if (sb->for_pool && STREQ(sb->class_name, spec->class_name) &&
                            (sb->state == SANDBOX_STARTING || sb->state == SANDBOX_POOLED))
                                have++;
                while (have < spec->size) {
                        if (d->max_sandboxes && sandbox_count(d, NULL, true) >= d->max_sandboxes)
                                return;
                        struct al_error err = {0};
                        struct policy *p = policy_new();
                        int r = policy_set_class(p, spec->class_name, &err);
                        if (r >= 0)
                                r = policy_finalize(p, "/", d->home, &err);
                        if (r < 0) {
                                policy_free(p);
                                daemon_log(d, "pool: %s: %s", spec->class_name, err.msg);
                                break;
                        }
                        struct sandbox_params params = {.pooled = true};
                        struct sandbox *sb = NULL;
                        r = sandbox_start(d, p, &params, on_pool_started, NULL, &sb, &err);
                        if (r < 0) {
                                daemon_log(d, "pool: %s: %s", spec->class_name, err.msg);
                                break;
                        }
                        have++;
                }
        }
}

static void on_refill(evutil_socket_t fd, short what, void *arg)
{
        pool_refill(arg);
}

void pool_refill_later(struct daemon *d)
{
        if (d->shutting_down)
                return;
        if (!d->pool_timer)
                d->pool_timer = evtimer_new(d->base, on_refill, d);
        /* After the answer that emptied a slot has gone out: starting a
         * supervisor forks, which holds up the loop for a moment. */
        struct timeval tv = {.tv_sec = 0, .tv_usec = 5000};
        if (d->pool_timer && !evtimer_pending(d->pool_timer, NULL))
                evtimer_add(d->pool_timer, &tv);
}
