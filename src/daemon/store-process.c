/* SPDX-License-Identifier: Apache-2.0 */
/* The state database's process records, and the writes that do not wait
 * for a sync (a process's start, the sandbox states no answer reports):
 * docs/internals/daemon.md, "The store". */
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "store-internal.h"

/* processes */

struct store_process *store_process_free(struct store_process *p)
{
        if (!p)
                return NULL;
        free(p->argv);
        free(p->state);
        free(p->error_code);
        free(p);
        return NULL;
}

void store_processes_free(struct store_process **v, size_t n)
{
        for (size_t i = 0; i < n; i++)
                store_process_free(v[i]);
        free(v);
}

int store_process_put(struct store *s, const struct store_process *p)
{
        _cleanup_reset_ sqlite3_stmt *st = NULL;
        int r = store_prepare_cached(
            s,
            "INSERT OR REPLACE INTO processes (sandbox, pid, argv, background, state,"
            " exit_code, error_code, started_ms, ended_ms)"
            " VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9)",
            &st);
        if (r < 0)
                return r;
        store_bind_text(st, 1, p->sandbox);
        sqlite3_bind_int64(st, 2, (sqlite3_int64)p->pid);
        store_bind_text(st, 3, p->argv ? p->argv : "[]");
        sqlite3_bind_int(st, 4, p->background);
        store_bind_text(st, 5, p->state ? p->state : "running");
        sqlite3_bind_int64(st, 6, p->exit_code);
        store_bind_text(st, 7, p->error_code);
        sqlite3_bind_int64(st, 8, (sqlite3_int64)p->started_ms);
        sqlite3_bind_int64(st, 9, (sqlite3_int64)p->ended_ms);
        return store_step_done(s, st, NULL, "process");
}

/* Around one write that is not to wait for a sync: relax() before it,
 * unrelax() after, with its result. */
static int relax(struct store *s)
{
        int r = store_set_synchronous(s, false);
        if (r < 0)
                return r;
        s->relaxing = true;
        return 0;
}

static int unrelax(struct store *s, int r)
{
        s->relaxing = false;
        int k = store_set_synchronous(s, true);
        if (r == 0 && k == 0)
                s->unsynced = true;
        return r < 0 ? r : k;
}

int store_process_start(struct store *s, const struct store_process *p)
{
        int r = relax(s);
        return r < 0 ? r : unrelax(s, store_process_put(s, p));
}

int store_sandbox_put_unsynced(struct store *s, const struct store_sandbox *sb)
{
        int r = relax(s);
        return r < 0 ? r : unrelax(s, store_sandbox_put(s, sb));
}

bool store_unsynced(const struct store *s)
{
        return s->unsynced;
}

int store_sync(struct store *s)
{
        if (s->relaxed) {
                int r = store_set_synchronous(s, true);
                if (r < 0)
                        return r;
        }
        if (!s->unsynced)
                return 0;
        /* A checkpoint syncs the WAL before it copies from it (and the
         * database after): the relaxed commits are then durable. */
        int rc = sqlite3_wal_checkpoint_v2(s->db, NULL, SQLITE_CHECKPOINT_PASSIVE, NULL, NULL);
        if (rc != SQLITE_OK)
                return store_sql_error(s, rc & 0xff, NULL, "syncing the WAL");
        s->unsynced = false;
        return 0;
}

int store_process_end(struct store *s, const char *sandbox, uint64_t pid, int64_t exit_code,
                      const char *error_code, uint64_t ended_ms)
{
        _cleanup_reset_ sqlite3_stmt *st = NULL;
        int r = store_prepare_cached(
            s,
            "UPDATE processes SET state = 'exited', exit_code = ?3, error_code = ?4,"
            " ended_ms = ?5 WHERE sandbox = ?1 AND pid = ?2",
            &st);
        if (r < 0)
                return r;
        store_bind_text(st, 1, sandbox);
        sqlite3_bind_int64(st, 2, (sqlite3_int64)pid);
        sqlite3_bind_int64(st, 3, exit_code);
        store_bind_text(st, 4, error_code);
        sqlite3_bind_int64(st, 5, (sqlite3_int64)ended_ms);
        r = store_step_done(s, st, NULL, "process");
        if (r < 0)
                return r;
        return sqlite3_changes(s->db) > 0 ? 0 : -ENOENT;
}

int store_process_list(struct store *s, const char *sandbox, size_t limit,
                       struct store_process ***ret, size_t *ret_n)
{
        _cleanup_stmt_ sqlite3_stmt *st = NULL;
        int r = store_prepare(s,
                              "SELECT sandbox, pid, argv, background, state, exit_code, error_code,"
                              " started_ms, ended_ms FROM processes WHERE sandbox = ?1"
                              " ORDER BY pid DESC LIMIT ?2",
                              &st);
        if (r < 0)
                return r;
        store_bind_text(st, 1, sandbox);
        sqlite3_bind_int64(st, 2, (sqlite3_int64)(limit ? limit : 1000));
        struct store_process **v = NULL;
        size_t n = 0;
        int rc;
        while ((rc = sqlite3_step(st)) == SQLITE_ROW) {
                struct store_process *p = xcalloc(1, sizeof(*p));
                const unsigned char *sb = sqlite3_column_text(st, 0);
                snprintf(p->sandbox, sizeof(p->sandbox), "%s", sb ? (const char *)sb : "");
                p->pid = (uint64_t)sqlite3_column_int64(st, 1);
                p->argv = store_col_text(st, 2);
                p->background = sqlite3_column_int(st, 3) != 0;
                p->state = store_col_text(st, 4);
                p->exit_code = sqlite3_column_int64(st, 5);
                p->error_code = store_col_text(st, 6);
                p->started_ms = (uint64_t)sqlite3_column_int64(st, 7);
                p->ended_ms = (uint64_t)sqlite3_column_int64(st, 8);
                v = xrealloc(v, n + 1, sizeof(*v));
                v[n++] = p;
        }
        if (rc != SQLITE_DONE) {
                store_processes_free(v, n);
                return store_sql_error(s, rc & 0xff, NULL, "processes");
        }
        *ret = v;
        *ret_n = n;
        return 0;
}
