/* SPDX-License-Identifier: Apache-2.0 */
#include <fcntl.h>
#include <sqlite3.h>
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "store.h"
#include "util.h"
#include "store-internal.h"


#define SCHEMA_VERSION 6

static const char schema[] =
        "CREATE TABLE IF NOT EXISTS grants ("
        " name TEXT PRIMARY KEY,"
        " token_hash TEXT NOT NULL UNIQUE,"
        " allow_sandbox INTEGER NOT NULL,"
        " allow_exec INTEGER NOT NULL,"
        " allow_host_workspace INTEGER NOT NULL,"
        " max_sandboxes INTEGER NOT NULL,"
        " classes TEXT NOT NULL,"
        " created_ms INTEGER NOT NULL,"
        " revoked_ms INTEGER NOT NULL DEFAULT 0,"
        " allow_git INTEGER NOT NULL DEFAULT 0,"
        " secrets TEXT NOT NULL DEFAULT '',"
        " tools TEXT NOT NULL DEFAULT '',"
        " allow_capabilities INTEGER NOT NULL DEFAULT 0,"
        " allow_runs INTEGER NOT NULL DEFAULT 0);"
        "CREATE TABLE IF NOT EXISTS sandboxes ("
        " id TEXT PRIMARY KEY,"
        " state TEXT NOT NULL,"
        " grant_name TEXT,"
        " class TEXT NOT NULL,"
        " metadata TEXT NOT NULL,"
        " policy TEXT NOT NULL,"
        " workspace TEXT,"
        " workspace_owned INTEGER NOT NULL,"
        " pid INTEGER NOT NULL,"
        " created_ms INTEGER NOT NULL,"
        " ended_ms INTEGER NOT NULL,"
        " expires_ms INTEGER NOT NULL,"
        " idle_timeout_ms INTEGER NOT NULL,"
        " last_active_ms INTEGER NOT NULL,"
        " reason TEXT);"
        "CREATE INDEX IF NOT EXISTS sandboxes_state ON sandboxes (state);"
        "CREATE TABLE IF NOT EXISTS processes ("
        " sandbox TEXT NOT NULL,"
        " pid INTEGER NOT NULL,"
        " argv TEXT NOT NULL,"
        " background INTEGER NOT NULL,"
        " state TEXT NOT NULL,"
        " exit_code INTEGER NOT NULL,"
        " error_code TEXT,"
        " started_ms INTEGER NOT NULL,"
        " ended_ms INTEGER NOT NULL,"
        " PRIMARY KEY (sandbox, pid));";

int store_sql_error(struct store *s, int rc, struct al_error *err, const char *what)
{
        int e = (rc == SQLITE_BUSY || rc == SQLITE_LOCKED) ? EBUSY
                : rc == SQLITE_CONSTRAINT                  ? EEXIST
                : rc == SQLITE_NOMEM                       ? ENOMEM
                : rc == SQLITE_READONLY || rc == SQLITE_PERM ? EACCES
                : rc == SQLITE_FULL                        ? ENOSPC
                : rc == SQLITE_CORRUPT || rc == SQLITE_NOTADB ? EUCLEAN
                                                           : EIO;
        if (s && rc != SQLITE_CONSTRAINT)
                snprintf(s->last_error, sizeof(s->last_error), "%s: %s", what,
                         s->db ? sqlite3_errmsg(s->db) : sqlite3_errstr(rc));
        if (err)
                al_error_set(err, 0, "%s: %s", what, s && s->db ? sqlite3_errmsg(s->db) : sqlite3_errstr(rc));
        if (err)
                err->code = e;
        return -e;
}

/* Whether table has a column of that name: 1, 0, or an SQLite error code
 * negated. */
static int has_column(struct store *s, const char *table, const char *column)
{
        _cleanup_free_ char *sql = xasprintf("PRAGMA table_info(%s)", table);
        sqlite3_stmt *st = NULL;
        int rc = sqlite3_prepare_v2(s->db, sql, -1, &st, NULL);
        if (rc != SQLITE_OK)
                return -rc;
        int found = 0;
        while ((rc = sqlite3_step(st)) == SQLITE_ROW) {
                const unsigned char *name = sqlite3_column_text(st, 1);
                if (name && STREQ((const char *)name, column))
                        found = 1;
        }
        sqlite3_finalize(st);
        return rc == SQLITE_DONE ? found : -rc;
}

/* Bring a database an older version made up to this schema: grants gained
 * allow_git in version 2, secrets in version 3, tools in version 4,
 * allow_capabilities in version 5, allow_runs in version 6. The checks and the ALTERs
 * share one write transaction, so that the daemon and `airlock grant`
 * opening the same old file at once do not both add a column. */
static int user_version(struct store *s)
{
        sqlite3_stmt *st = NULL;
        int v = -1;
        if (sqlite3_prepare_v2(s->db, "PRAGMA user_version;", -1, &st, NULL) == SQLITE_OK &&
            sqlite3_step(st) == SQLITE_ROW)
                v = sqlite3_column_int(st, 0);
        sqlite3_finalize(st);
        return v;
}

static int migrate(struct store *s, char **emsg)
{
        /* Up to date: no write, so that a daemon restarted on a full disk
         * still opens its records (and re-attaches what runs). */
        if (user_version(s) == SCHEMA_VERSION)
                return SQLITE_OK;
        int rc = sqlite3_exec(s->db, "BEGIN IMMEDIATE;", NULL, NULL, emsg);
        if (rc != SQLITE_OK)
                return rc;
        int has = has_column(s, "grants", "allow_git");
        if (has < 0)
                rc = -has;
        else if (has == 0)
                rc = sqlite3_exec(s->db,
                                  "ALTER TABLE grants ADD COLUMN allow_git INTEGER NOT NULL DEFAULT 0;",
                                  NULL, NULL, emsg);
        if (rc == SQLITE_OK) {
                has = has_column(s, "grants", "secrets");
                if (has < 0)
                        rc = -has;
                else if (has == 0)
                        rc = sqlite3_exec(s->db,
                                          "ALTER TABLE grants ADD COLUMN secrets TEXT NOT NULL DEFAULT '';",
                                          NULL, NULL, emsg);
        }
        if (rc == SQLITE_OK) {
                has = has_column(s, "grants", "tools");
                if (has < 0)
                        rc = -has;
                else if (has == 0)
                        rc = sqlite3_exec(s->db,
                                          "ALTER TABLE grants ADD COLUMN tools TEXT NOT NULL DEFAULT '';",
                                          NULL, NULL, emsg);
        }
        if (rc == SQLITE_OK) {
                has = has_column(s, "grants", "allow_capabilities");
                if (has < 0)
                        rc = -has;
                else if (has == 0)
                        rc = sqlite3_exec(s->db,
                                          "ALTER TABLE grants ADD COLUMN allow_capabilities INTEGER "
                                          "NOT NULL DEFAULT 0;",
                                          NULL, NULL, emsg);
        }
        if (rc == SQLITE_OK) {
                has = has_column(s, "grants", "allow_runs");
                if (has < 0)
                        rc = -has;
                else if (has == 0)
                        rc = sqlite3_exec(s->db,
                                          "ALTER TABLE grants ADD COLUMN allow_runs INTEGER NOT "
                                          "NULL DEFAULT 0;",
                                          NULL, NULL, emsg);
        }
        if (rc == SQLITE_OK) {
                _cleanup_free_ char *version = xasprintf("PRAGMA user_version=%d;", SCHEMA_VERSION);
                rc = sqlite3_exec(s->db, version, NULL, NULL, emsg);
        }
        if (rc == SQLITE_OK)
                return sqlite3_exec(s->db, "COMMIT;", NULL, NULL, emsg);
        (void)sqlite3_exec(s->db, "ROLLBACK;", NULL, NULL, NULL);
        return rc;
}

int store_open(const char *path, struct store **ret, struct al_error *err)
{
        struct store *s = xcalloc(1, sizeof(*s));
        s->fd = -1;
        s->path = xstrdup(path);
        int rc = sqlite3_open_v2(path, &s->db,
                                 SQLITE_OPEN_READWRITE | SQLITE_OPEN_CREATE | SQLITE_OPEN_NOMUTEX |
                                         SQLITE_OPEN_EXRESCODE,
                                 NULL);
        if (rc != SQLITE_OK) {
                int r = store_sql_error(s, rc, err, "opening the database");
                al_error_wrap(err, "%s", path);
                store_close(s);
                return r;
        }
        (void)chmod(path, 0600);
        sqlite3_busy_timeout(s->db, STORE_BUSY_MS);
        char *emsg = NULL;
        /* synchronous=FULL: a write is durable when it returns, so an answer
         * the daemon gives holds after a crash. journal_size_limit gives back
         * what a burst of writes (or a full disk) made the WAL grow to once
         * it is checkpointed. */
        rc = sqlite3_exec(s->db,
                          "PRAGMA journal_mode=WAL;"
                          "PRAGMA synchronous=FULL;"
                          "PRAGMA journal_size_limit=4194304;"
                          "PRAGMA foreign_keys=ON;",
                          NULL, NULL, &emsg);
        if (rc == SQLITE_OK)
                rc = sqlite3_exec(s->db, schema, NULL, NULL, &emsg);
        if (rc == SQLITE_OK)
                rc = migrate(s, &emsg);
        if (rc != SQLITE_OK) {
                int r = al_error_set(err, 0, "%s: setting up the database: %s", path,
                                     emsg ? emsg : sqlite3_errstr(rc));
                if (err)
                        err->code = EIO;
                sqlite3_free(emsg);
                store_close(s);
                return r == -EINVAL ? -EIO : r;
        }
        s->fd = open(path, O_RDONLY | O_CLOEXEC | O_NOFOLLOW);
        *ret = s;
        return 0;
}

struct store *store_close(struct store *s)
{
        if (!s)
                return NULL;
        for (size_t i = 0; i < s->n_cache; i++)
                sqlite3_finalize(s->cache[i].st);
        for (size_t i = 0; i < ARRAY_SIZE(s->sync_st); i++)
                sqlite3_finalize(s->sync_st[i]);
        sqlite3_close_v2(s->db);
        if (s->fd >= 0)
                close(s->fd);
        free(s->path);
        free(s);
        return NULL;
}

void store_finalizep(sqlite3_stmt **st)
{
        if (*st)
                sqlite3_finalize(*st);
}

/* A cached statement is reset after use, not finalized. */
void store_resetp(sqlite3_stmt **st)
{
        if (*st) {
                sqlite3_reset(*st);
                sqlite3_clear_bindings(*st);
        }
}

int store_set_synchronous(struct store *s, bool full)
{
        const char *sql = full ? "PRAGMA synchronous=FULL;" : "PRAGMA synchronous=NORMAL;";
        sqlite3_stmt **st = &s->sync_st[full];
        int rc = SQLITE_OK;
        if (!*st)
                rc = sqlite3_prepare_v3(s->db, sql, -1, SQLITE_PREPARE_PERSISTENT, st, NULL);
        if (rc == SQLITE_OK) {
                rc = sqlite3_step(*st);
                sqlite3_reset(*st);
                if (rc == SQLITE_DONE || rc == SQLITE_ROW)
                        rc = SQLITE_OK;
        }
        if (rc != SQLITE_OK)
                return store_sql_error(s, rc & 0xff, NULL, "setting synchronous");
        s->relaxed = !full;
        return 0;
}

int store_prepare(struct store *s, const char *sql, sqlite3_stmt **ret)
{
        /* Every statement but store_process_start()'s goes out synced: a
         * restore of FULL that failed there is tried again here, and the
         * statement is refused while it cannot be. */
        if (s->relaxed && !s->relaxing) {
                int r = store_set_synchronous(s, true);
                if (r < 0)
                        return r;
        }
        int rc = sqlite3_prepare_v2(s->db, sql, -1, ret, NULL);
        return rc == SQLITE_OK ? 0 : store_sql_error(s, rc, NULL, "prepare");
}

/* As store_prepare(), for a statement of the hot paths (a request's grant, a
 * sandbox's and a process's record): compiled once per store, kept, and
 * reset after each use (_cleanup_reset_, never _cleanup_stmt_). `sql` must
 * be a literal: its address is the key. Five callers; the cache has room
 * for eight, and one more would be refused (-ENOSPC), never leaked. */
int store_prepare_cached(struct store *s, const char *sql, sqlite3_stmt **ret)
{
        if (s->relaxed && !s->relaxing) {
                int r = store_set_synchronous(s, true);
                if (r < 0)
                        return r;
        }
        for (size_t i = 0; i < s->n_cache; i++)
                if (s->cache[i].sql == sql) {
                        /* In use further up the stack: not shared. */
                        if (sqlite3_stmt_busy(s->cache[i].st))
                                return -EBUSY;
                        *ret = s->cache[i].st;
                        return 0;
                }
        if (s->n_cache >= ARRAY_SIZE(s->cache))
                return -ENOSPC;
        int rc = sqlite3_prepare_v3(s->db, sql, -1, SQLITE_PREPARE_PERSISTENT, ret, NULL);
        if (rc != SQLITE_OK)
                return store_sql_error(s, rc, NULL, "prepare");
        s->cache[s->n_cache].sql = sql;
        s->cache[s->n_cache].st = *ret;
        s->n_cache++;
        return 0;
}

void store_bind_text(sqlite3_stmt *st, int i, const char *v)
{
        if (v)
                sqlite3_bind_text(st, i, v, -1, SQLITE_TRANSIENT);
        else
                sqlite3_bind_null(st, i);
}

char *store_col_text(sqlite3_stmt *st, int i)
{
        const unsigned char *t = sqlite3_column_text(st, i);
        return t ? xstrdup((const char *)t) : NULL;
}

int store_step_done(struct store *s, sqlite3_stmt *st, struct al_error *err, const char *what)
{
        int rc = sqlite3_step(st);
        if (rc == SQLITE_DONE) {
                /* A commit under synchronous=FULL syncs the whole WAL: what
                 * store_process_start() left unsynced is on disk with it.
                 * Only a commit that wrote: one that changed no row (an end
                 * of no process, a revoke of no grant) syncs nothing. */
                if (!s->relaxed && sqlite3_get_autocommit(s->db) && !sqlite3_stmt_readonly(st) &&
                    sqlite3_changes(s->db) > 0)
                        s->unsynced = false;
                return 0;
        }
        return store_sql_error(s, rc & 0xff, err, what);
}

/* sandboxes */

struct store_sandbox *store_sandbox_free(struct store_sandbox *sb)
{
        if (!sb)
                return NULL;
        free(sb->state);
        free(sb->grant);
        free(sb->class_name);
        free(sb->metadata);
        free(sb->policy);
        free(sb->workspace);
        free(sb->reason);
        free(sb);
        return NULL;
}

void store_sandboxes_free(struct store_sandbox **v, size_t n)
{
        for (size_t i = 0; i < n; i++)
                store_sandbox_free(v[i]);
        free(v);
}

#define SANDBOX_COLUMNS                                                                            \
        "id, state, grant_name, class, metadata, policy, workspace, workspace_owned, pid,"         \
        " created_ms, ended_ms, expires_ms, idle_timeout_ms, last_active_ms, reason"

int store_sandbox_put(struct store *s, const struct store_sandbox *sb)
{
        _cleanup_reset_ sqlite3_stmt *st = NULL;
        int r = store_prepare_cached(
            s,
            "INSERT OR REPLACE INTO sandboxes (" SANDBOX_COLUMNS ")"
            " VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9, ?10, ?11, ?12, ?13, ?14, ?15)",
            &st);
        if (r < 0)
                return r;
        store_bind_text(st, 1, sb->id);
        store_bind_text(st, 2, sb->state);
        store_bind_text(st, 3, sb->grant);
        store_bind_text(st, 4, sb->class_name ? sb->class_name : "");
        store_bind_text(st, 5, sb->metadata ? sb->metadata : "{}");
        store_bind_text(st, 6, sb->policy ? sb->policy : "{}");
        store_bind_text(st, 7, sb->workspace);
        sqlite3_bind_int(st, 8, sb->workspace_owned);
        sqlite3_bind_int64(st, 9, sb->pid);
        sqlite3_bind_int64(st, 10, (sqlite3_int64)sb->created_ms);
        sqlite3_bind_int64(st, 11, (sqlite3_int64)sb->ended_ms);
        sqlite3_bind_int64(st, 12, (sqlite3_int64)sb->expires_ms);
        sqlite3_bind_int64(st, 13, (sqlite3_int64)sb->idle_timeout_ms);
        sqlite3_bind_int64(st, 14, (sqlite3_int64)sb->last_active_ms);
        store_bind_text(st, 15, sb->reason);
        return store_step_done(s, st, NULL, "sandbox");
}

static struct store_sandbox *sandbox_from_row(sqlite3_stmt *st)
{
        struct store_sandbox *sb = xcalloc(1, sizeof(*sb));
        const unsigned char *id = sqlite3_column_text(st, 0);
        snprintf(sb->id, sizeof(sb->id), "%s", id ? (const char *)id : "");
        sb->state = store_col_text(st, 1);
        sb->grant = store_col_text(st, 2);
        sb->class_name = store_col_text(st, 3);
        sb->metadata = store_col_text(st, 4);
        sb->policy = store_col_text(st, 5);
        sb->workspace = store_col_text(st, 6);
        sb->workspace_owned = sqlite3_column_int(st, 7) != 0;
        sb->pid = sqlite3_column_int64(st, 8);
        sb->created_ms = (uint64_t)sqlite3_column_int64(st, 9);
        sb->ended_ms = (uint64_t)sqlite3_column_int64(st, 10);
        sb->expires_ms = (uint64_t)sqlite3_column_int64(st, 11);
        sb->idle_timeout_ms = (uint64_t)sqlite3_column_int64(st, 12);
        sb->last_active_ms = (uint64_t)sqlite3_column_int64(st, 13);
        sb->reason = store_col_text(st, 14);
        return sb;
}

int store_sandbox_get(struct store *s, const char *id, struct store_sandbox **ret)
{
        _cleanup_reset_ sqlite3_stmt *st = NULL;
        int r = store_prepare_cached(s, "SELECT " SANDBOX_COLUMNS " FROM sandboxes WHERE id = ?1", &st);
        if (r < 0)
                return r;
        store_bind_text(st, 1, id);
        int rc = sqlite3_step(st);
        if (rc == SQLITE_DONE)
                return -ENOENT;
        if (rc != SQLITE_ROW)
                return store_sql_error(s, rc & 0xff, NULL, "sandbox");
        *ret = sandbox_from_row(st);
        return 0;
}

int store_sandbox_delete(struct store *s, const char *id)
{
        _cleanup_stmt_ sqlite3_stmt *st = NULL;
        int r = store_prepare(s, "DELETE FROM sandboxes WHERE id = ?1", &st);
        if (r < 0)
                return r;
        store_bind_text(st, 1, id);
        r = store_step_done(s, st, NULL, "sandbox");
        if (r < 0)
                return r;
        _cleanup_stmt_ sqlite3_stmt *pr = NULL;
        r = store_prepare(s, "DELETE FROM processes WHERE sandbox = ?1", &pr);
        if (r < 0)
                return r;
        store_bind_text(pr, 1, id);
        return store_step_done(s, pr, NULL, "processes");
}

int store_sandbox_count_state(struct store *s, const char *state, uint64_t *ret)
{
        _cleanup_stmt_ sqlite3_stmt *st = NULL;
        int r = store_prepare(s, "SELECT count(*) FROM sandboxes WHERE state = ?1", &st);
        if (r < 0)
                return r;
        store_bind_text(st, 1, state);
        int rc = sqlite3_step(st);
        if (rc != SQLITE_ROW)
                return store_sql_error(s, rc & 0xff, NULL, "count");
        *ret = (uint64_t)sqlite3_column_int64(st, 0);
        return 0;
}

int store_sandbox_list(struct store *s, const struct store_filter *f, struct store_sandbox ***ret,
                       size_t *ret_n)
{
        /* Parameters: 1 state, 2 grant, 3 limit, then a key path and a value
         * per metadata filter. */
        char sql[4096];
        int off = snprintf(sql, sizeof(sql),
                           "SELECT " SANDBOX_COLUMNS " FROM sandboxes WHERE"
                           " (CASE WHEN ?1 IS NULL THEN state != 'pooled' ELSE state = ?1 END)"
                           " AND (?2 IS NULL OR grant_name = ?2)");
        if (f->n_meta > STORE_META_MAX)
                return -E2BIG;
        for (size_t i = 0; i < f->n_meta; i++)
                off += snprintf(sql + off, sizeof(sql) - (size_t)off,
                                " AND json_extract(metadata, ?%zu) IS ?%zu", 4 + 2 * i, 5 + 2 * i);
        /* The page cursor: strictly after (created_ms, id) in this order. */
        size_t ci = 4 + 2 * f->n_meta;
        off += snprintf(
            sql + off, sizeof(sql) - (size_t)off,
            " AND (?%zu IS NULL OR created_ms < ?%zu OR (created_ms = ?%zu AND id > ?%zu))", ci + 1,
            ci, ci, ci + 1);
        snprintf(sql + off, sizeof(sql) - (size_t)off, " ORDER BY created_ms DESC, id LIMIT ?3");

        _cleanup_stmt_ sqlite3_stmt *st = NULL;
        int r = store_prepare(s, sql, &st);
        if (r < 0)
                return r;
        store_bind_text(st, 1, f->state);
        store_bind_text(st, 2, f->grant);
        sqlite3_bind_int64(st, 3, (sqlite3_int64)(f->limit ? f->limit : 1000));
        for (size_t i = 0; i < f->n_meta; i++) {
                /* The key is quoted as a JSON path member; callers allow only
                 * [A-Za-z0-9_.-] in keys, so no quote can end it early. */
                _cleanup_free_ char *path = xasprintf("$.\"%s\"", f->meta_key[i]);
                store_bind_text(st, (int)(4 + 2 * i), path);
                store_bind_text(st, (int)(5 + 2 * i), f->meta_value[i]);
        }
        sqlite3_bind_int64(st, (int)ci, (sqlite3_int64)f->after_created_ms);
        store_bind_text(st, (int)ci + 1, f->after_id);
        struct store_sandbox **v = NULL;
        size_t n = 0;
        int rc;
        while ((rc = sqlite3_step(st)) == SQLITE_ROW) {
                v = xrealloc(v, n + 1, sizeof(*v));
                v[n++] = sandbox_from_row(st);
        }
        if (rc != SQLITE_DONE) {
                store_sandboxes_free(v, n);
                return store_sql_error(s, rc & 0xff, NULL, "sandboxes");
        }
        *ret = v;
        *ret_n = n;
        return 0;
}

int store_sandbox_prune(struct store *s, uint64_t before_ms, uint64_t *ret_n)
{
        if (s->relaxed && store_set_synchronous(s, true) < 0)
                return -EIO;
        /* One transaction: a record and its processes go together. */
        char *emsg = NULL;
        int rc = sqlite3_exec(s->db, "BEGIN IMMEDIATE;", NULL, NULL, &emsg);
        sqlite3_free(emsg);
        if (rc != SQLITE_OK)
                return store_sql_error(s, rc & 0xff, NULL, "pruning");
        _cleanup_stmt_ sqlite3_stmt *st = NULL;
        int r = store_prepare(s,
                        "DELETE FROM sandboxes WHERE state IN ('destroyed', 'failed')"
                        " AND ended_ms > 0 AND ended_ms < ?1",
                        &st);
        if (r >= 0) {
                sqlite3_bind_int64(st, 1, (sqlite3_int64)before_ms);
                r = store_step_done(s, st, NULL, "pruning sandboxes");
        }
        uint64_t n = r >= 0 ? (uint64_t)sqlite3_changes(s->db) : 0;
        if (r >= 0)
                r = sqlite3_exec(s->db,
                                 "DELETE FROM processes WHERE sandbox NOT IN (SELECT id FROM sandboxes);",
                                 NULL, NULL, NULL) == SQLITE_OK
                            ? 0
                            : store_sql_error(s, sqlite3_errcode(s->db) & 0xff, NULL, "pruning processes");
        if (r >= 0 && sqlite3_exec(s->db, "COMMIT;", NULL, NULL, NULL) != SQLITE_OK)
                r = store_sql_error(s, sqlite3_errcode(s->db) & 0xff, NULL, "pruning");
        if (r < 0) {
                (void)sqlite3_exec(s->db, "ROLLBACK;", NULL, NULL, NULL);
                return r;
        }
        if (ret_n)
                *ret_n = n;
        return 0;
}
