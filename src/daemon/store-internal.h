/* SPDX-License-Identifier: Apache-2.0 */
/* What store.c, store-grants.c, store-health.c and store-process.c share;
 * nothing else includes it. */
#pragma once

#include <sqlite3.h>
#include <stdbool.h>

#include "store.h"
#include "util.h"

/* How long a statement waits for another process's lock on the file. */
#define STORE_BUSY_MS 2000

struct store {
        sqlite3 *db;
        char *path;
        int fd; /* the database file as opened, to notice it replaced */
        char last_error[256];
        bool relaxed;  /* synchronous=NORMAL is in force */
        bool relaxing; /* inside store_process_start(), where it is meant to be */
        bool unsynced; /* a commit made under it is not yet on disk */
        /* store_prepare_cached(): the hot paths' statements, compiled once. */
        struct {
                const char *sql;
                sqlite3_stmt *st;
        } cache[8];
        size_t n_cache;
        sqlite3_stmt *sync_st[2]; /* PRAGMA synchronous=NORMAL, =FULL */
};

int store_sql_error(struct store *s, int rc, struct al_error *err, const char *what);
/* synchronous=FULL (true) or NORMAL for the statements that follow. */
int store_set_synchronous(struct store *s, bool full);
int store_prepare(struct store *s, const char *sql, sqlite3_stmt **ret);
int store_prepare_cached(struct store *s, const char *sql, sqlite3_stmt **ret);
void store_bind_text(sqlite3_stmt *st, int i, const char *v);
char *store_col_text(sqlite3_stmt *st, int i);
int store_step_done(struct store *s, sqlite3_stmt *st, struct al_error *err, const char *what);
void store_finalizep(sqlite3_stmt **st);
void store_resetp(sqlite3_stmt **st);
#define _cleanup_stmt_  _cleanup_(store_finalizep)
#define _cleanup_reset_ _cleanup_(store_resetp)
