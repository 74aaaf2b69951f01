/* SPDX-License-Identifier: Apache-2.0 */
#include <errno.h>
#include <inttypes.h>
#include <fcntl.h>
#include <unistd.h>
#include <string.h>

#include "sandbox.h"
#include "pool.h"
#include "gc.h"
#include "daemon.h"
#include "prune.h"
#include "util.h"

/* Collection on a timer: sandboxes past their TTL, sandboxes idle past their
 * idle timeout (no request and no process running), a refresh of each
 * sandbox's status for the metrics, and the warm pool's refill. */

#define STATUS_EVERY_MS     15000
#define STATUS_INFLIGHT     16
#define CHECKPOINT_EVERY_MS 60000

static unsigned status_inflight;

static void on_idle_status(struct sandbox *sb, int error, const char *message, void *userdata)
{
        status_inflight--;
        if (error < 0 || sb->state != SANDBOX_RUNNING)
                return;
        uint64_t now = daemon_now_ms();
        if (sb->status.busy || sb->streams > 0) {
                sb->last_active_ms = now;
                return;
        }
        if (sb->idle_timeout_ms && now - sb->last_active_ms >= sb->idle_timeout_ms)
                sandbox_destroy(sb, "idle", NULL, NULL);
}

static void on_poll_status(struct sandbox *sb, int error, const char *message, void *userdata)
{
        status_inflight--;
}

/* The state database: is it still the file the daemon opened, and can it be
 * written? A deleted, replaced or corrupt database stops every write
 * ("database", until a restart: what the daemon would record is lost);
 * a store that failed a write ("store", e.g. a full disk) is checkpointed
 * and probed each round until it takes writes again, and then the live
 * records, which may have missed changes meanwhile, are written anew. */
/* Room for a sandbox's files in the state directory: 0, or -errno. */
static int state_dir_probe(struct daemon *d)
{
        static const char probe[] = ".space-probe";
        _cleanup_close_ int dir = open(d->state_dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
        if (dir < 0)
                return -errno;
        int fd = openat(dir, probe, O_WRONLY | O_CREAT | O_TRUNC | O_NOFOLLOW | O_CLOEXEC, 0600);
        if (fd < 0)
                return -errno;
        char buf[16384] = {0};
        int r = 0;
        for (int i = 0; i < 4 && r >= 0; i++)
                r = write_full(fd, buf, sizeof(buf));
        if (r >= 0 && fsync(fd) < 0)
                r = -errno;
        close(fd);
        (void)unlinkat(dir, probe, 0);
        return r;
}

static void store_watch(struct daemon *d, uint64_t now)
{
        if (daemon_health_get(d, "database"))
                return;
        int r = store_check_file(d->store);
        if (r < 0) {
                _cleanup_free_ char *why =
                    xasprintf("the state database is lost: %s; writes are refused until the "
                              "daemon is restarted on a restored copy",
                              store_last_error(d->store));
                daemon_health_set(d, "database", why);
                return;
        }
        if (daemon_health_get(d, "store")) {
                /* Healthy again when what the WAL holds fits in the
                 * database file, and a record-sized write fits after it. */
                r = daemon_store_result(d, store_checkpoint(d->store));
                if (r >= 0)
                        r = daemon_store_result(d, store_probe(d->store));
                if (r >= 0)
                        r = state_dir_probe(d);
                if (r == -EUCLEAN) {
                        _cleanup_free_ char *why = xasprintf("the state database is corrupt: %s",
                                                             store_last_error(d->store));
                        daemon_health_set(d, "database", why);
                        return;
                }
                if (r < 0)
                        return;
                for (struct sandbox *sb = d->sandboxes; sb; sb = sb->next)
                        if (sb->state != SANDBOX_FAILED && sb->state != SANDBOX_DESTROYED &&
                            sandbox_save(sb) < 0)
                                return;
                if (daemon_store_result(d, store_checkpoint(d->store)) < 0)
                        return;
                d->store_checked_ms = now;
                daemon_health_set(d, "store", NULL);
                daemon_log(d, "the state database takes writes again");
                return;
        }
        if (now - d->store_checked_ms >= CHECKPOINT_EVERY_MS) {
                d->store_checked_ms = now;
                /* Kept, not truncated: it is bounded (journal_size_limit),
                 * and a WAL that must grow again makes every sync dear. */
                if (daemon_store_result(d, store_checkpoint_keep(d->store)) == -EUCLEAN)
                        daemon_health_set(d, "database", "the state database is corrupt");
        }
}

static bool is_live(const char *id, void *ud)
{
        return sandbox_find(ud, id) != NULL;
}

/* Records of sandboxes that ended more than --retain ago, and the review
 * state of changes accepted or discarded as long ago: each minute (or each
 * retention period, when shorter). */
static void prune(struct daemon *d, uint64_t now)
{
        uint64_t every = d->retain_ms < 60000 ? d->retain_ms : 60000;
        if (!d->retain_ms || now - d->pruned_ms < every || daemon_health_get(d, "database") ||
            daemon_health_get(d, "store"))
                return;
        d->pruned_ms = now;
        uint64_t cutoff = now > d->retain_ms ? now - d->retain_ms : 0;
        uint64_t records = 0, reviews = 0;
        int r = daemon_store_result(d, prune_records(d->store, cutoff, &records));
        if (r < 0)
                daemon_log(d, "pruning records: %s", store_last_error(d->store));
        r = prune_review_state(d->keep_dir, cutoff, is_live, d, &reviews);
        if (r < 0)
                daemon_log(d, "pruning %s: %s", d->keep_dir, strerror(-r));
        if (records || reviews)
                daemon_log(d, "pruned %" PRIu64 " record(s) and %" PRIu64
                              " reviewed change set(s) older than the retention period",
                           records, reviews);
}

static void gc_run(struct daemon *d)
{
        uint64_t now = daemon_now_ms();
        store_watch(d, now);
        prune(d, now);
        /* A destroy may end a sandbox at once and unlink it: walk ids. */
        size_t n = 0;
        for (struct sandbox *sb = d->sandboxes; sb; sb = sb->next)
                n++;
        char(*ids)[17] = xcalloc(n ? n : 1, sizeof(*ids));
        size_t k = 0;
        for (struct sandbox *sb = d->sandboxes; sb && k < n; sb = sb->next)
                memcpy(ids[k++], sb->id, 17);

        for (size_t i = 0; i < k; i++) {
                struct sandbox *sb = sandbox_find(d, ids[i]);
                if (!sb || (sb->state != SANDBOX_RUNNING && sb->state != SANDBOX_POOLED))
                        continue;
                if (sb->state == SANDBOX_RUNNING && sb->expires_ms && now >= sb->expires_ms) {
                        sandbox_destroy(sb, "ttl", NULL, NULL);
                        continue;
                }
                if (sb->state == SANDBOX_RUNNING && sb->idle_timeout_ms && sb->streams == 0 &&
                    now - sb->last_active_ms >= sb->idle_timeout_ms) {
                        /* Idle by the API's account; ask whether a background
                         * process still runs. */
                        if (status_inflight < STATUS_INFLIGHT * 4 &&
                            sandbox_refresh_status(sb, on_idle_status, NULL) >= 0)
                                status_inflight++;
                        continue;
                }
                /* While a process runs, each round: its end is recorded from
                 * the status when no stream saw it (a background process). */
                uint64_t every = sb->status.busy ? 0 : STATUS_EVERY_MS;
                if (status_inflight < STATUS_INFLIGHT &&
                    (!sb->status.valid || now - sb->status.at_ms >= every) &&
                    sandbox_refresh_status(sb, on_poll_status, NULL) >= 0)
                        status_inflight++;
        }
        free(ids);
        pool_refill(d);
}

static void on_gc_timer(evutil_socket_t fd, short what, void *arg)
{
        gc_run(arg);
}

void gc_start(struct daemon *d)
{
        d->gc_timer = event_new(d->base, -1, EV_PERSIST, on_gc_timer, d);
        uint64_t ms = d->gc_interval_ms ? d->gc_interval_ms : 1000;
        struct timeval tv = {.tv_sec = (time_t)(ms / 1000),
                             .tv_usec = (suseconds_t)(ms % 1000) * 1000};
        event_add(d->gc_timer, &tv);
}
