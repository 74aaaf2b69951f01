/* SPDX-License-Identifier: Apache-2.0 */
/* The state database's health: its WAL checkpointed, a probe write, the
 * file checked against what was opened (docs/internals/daemon.md, "The
 * store"). Each runs on the daemon's loop and never waits for another
 * process's lock. */
#include <errno.h>
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "store-internal.h"

/* health */

const char *store_last_error(struct store *s)
{
        return s->last_error[0] ? s->last_error : "unknown error";
}

int store_checkpoint(struct store *s)
{
        /* Without the busy handler: a TRUNCATE checkpoint waits in it for
         * every reader, and a reader outside the daemon (sqlite3 on the
         * file, a backup) would hold the daemon's loop for the whole busy
         * timeout. What the readers hold is copied later; the WAL is
         * truncated at a call they leave free (SQLITE_BUSY until then). */
        sqlite3_busy_timeout(s->db, 0);
        int rc = sqlite3_wal_checkpoint_v2(s->db, NULL, SQLITE_CHECKPOINT_TRUNCATE, NULL, NULL);
        sqlite3_busy_timeout(s->db, STORE_BUSY_MS);
        return rc == SQLITE_OK ? 0 : store_sql_error(s, rc & 0xff, NULL, "checkpointing the WAL");
}

int store_probe(struct store *s)
{
        if (s->relaxed && store_set_synchronous(s, true) < 0)
                return -EIO;
        /* A real write, as large as a record: it needs room in the WAL and
         * in the file as a create does. The row never shows: it goes in the
         * same transaction. */
        char *emsg = NULL;
        int rc = sqlite3_exec(s->db,
                              "BEGIN IMMEDIATE;"
                              "INSERT INTO sandboxes (id, state, class, metadata, policy,"
                              " workspace_owned, pid, created_ms, ended_ms, expires_ms,"
                              " idle_timeout_ms, last_active_ms)"
                              " VALUES ('-probe', 'probe', '', '{}', hex(zeroblob(8192)), 0, 0, 0, 0,"
                              " 0, 0, 0);"
                              "DELETE FROM sandboxes WHERE id = '-probe';"
                              "COMMIT;",
                              NULL, NULL, &emsg);
        sqlite3_free(emsg);
        if (rc != SQLITE_OK) {
                int r = store_sql_error(s, rc & 0xff, NULL, "writing");
                (void)sqlite3_exec(s->db, "ROLLBACK;", NULL, NULL, NULL);
                return r;
        }
        /* Read the file's first page back: a file that is no database any
         * more (overwritten) shows here. */
        sqlite3_stmt *st = NULL;
        rc = sqlite3_prepare_v2(s->db, "PRAGMA quick_check(1);", -1, &st, NULL);
        if (rc == SQLITE_OK) {
                rc = sqlite3_step(st);
                const unsigned char *t = rc == SQLITE_ROW ? sqlite3_column_text(st, 0) : NULL;
                if (rc == SQLITE_ROW && (!t || !STREQ((const char *)t, "ok"))) {
                        snprintf(s->last_error, sizeof(s->last_error), "the database is corrupt: %s",
                                 t ? (const char *)t : "?");
                        sqlite3_finalize(st);
                        return -EUCLEAN;
                }
                rc = rc == SQLITE_ROW ? SQLITE_OK : rc;
        }
        sqlite3_finalize(st);
        return rc == SQLITE_OK ? 0 : store_sql_error(s, rc & 0xff, NULL, "checking");
}

int store_check_file(struct store *s)
{
        struct stat open_st, path_st;
        if (s->fd < 0 || fstat(s->fd, &open_st) < 0)
                return 0; /* nothing to compare with */
        if (open_st.st_nlink == 0) {
                snprintf(s->last_error, sizeof(s->last_error), "%s was deleted", s->path);
                return -ENOENT;
        }
        if (stat(s->path, &path_st) < 0) {
                snprintf(s->last_error, sizeof(s->last_error), "%s: %s", s->path, strerror(errno));
                return -ENOENT;
        }
        if (path_st.st_ino != open_st.st_ino || path_st.st_dev != open_st.st_dev) {
                snprintf(s->last_error, sizeof(s->last_error), "%s was replaced by another file",
                         s->path);
                return -ESTALE;
        }
        /* Overwritten in place: SQLite's cache would hide it for a while. */
        char head[16];
        if (open_st.st_size >= (off_t)sizeof(head) &&
            (pread(s->fd, head, sizeof(head), 0) != (ssize_t)sizeof(head) ||
             memcmp(head, "SQLite format 3", sizeof(head)) != 0)) {
                snprintf(s->last_error, sizeof(s->last_error), "%s is no SQLite database any more",
                         s->path);
                return -EUCLEAN;
        }
        return 0;
}

int store_checkpoint_keep(struct store *s)
{
        int rc = sqlite3_wal_checkpoint_v2(s->db, NULL, SQLITE_CHECKPOINT_PASSIVE, NULL, NULL);
        return rc == SQLITE_OK ? 0 : store_sql_error(s, rc & 0xff, NULL, "checkpointing the WAL");
}
