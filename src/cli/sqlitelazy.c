/* SPDX-License-Identifier: Apache-2.0 */
/* SQLite, loaded by `airlock` only when a command opens the daemon's state
 * database itself (`airlock grant`, `airlock gc`). Linked statically, its
 * 1,670 relative relocations (about 10 pages written) were applied at every
 * exec of airlock, `airlock run` and `airlock supervise` included, which
 * never open it. These definitions (lazylib.h) stand in for the SQLite
 * functions the airlock program references; each forwards to the real one
 * in the shared library of the version the build compiled against
 * (AIRLOCK_LIBSQLITE_SONAME), loaded on first use. When it cannot be loaded,
 * opening fails (SQLITE_CANTOPEN, no handle) and sqlite3_errmsg says why.
 * airlockd links SQLite itself. */
#include <pthread.h>
#include <sqlite3.h>
#include <stdio.h>

#include "lazylib.h"

#ifndef AIRLOCK_LIBSQLITE_SONAME
#error "AIRLOCK_LIBSQLITE_SONAME must name SQLite's shared object (src/cli/meson.build)"
#endif

static void *lib;
static char load_msg[256];
static pthread_once_t load_once = PTHREAD_ONCE_INIT;

static void load(void)
{
        lib = lazylib_open(AIRLOCK_LIBSQLITE_SONAME, load_msg, sizeof(load_msg));
}

static void *sym(const char *name)
{
        pthread_once(&load_once, load);
        return lib ? dlsym(lib, name) : NULL;
}

HIDDEN int sqlite3_open_v2(const char *path, sqlite3 **db, int flags, const char *vfs);
int sqlite3_open_v2(const char *path, sqlite3 **db, int flags, const char *vfs)
{
        LAZY_FN(int, sqlite3_open_v2, (const char *, sqlite3 **, int, const char *))
        if (g)
                return g(path, db, flags, vfs);
        *db = NULL;
        return SQLITE_CANTOPEN;
}

LAZY(int, sqlite3_bind_int, (sqlite3_stmt *a0, int a1, int a2), (a0, a1, a2), SQLITE_MISUSE)
LAZY(int, sqlite3_bind_int64, (sqlite3_stmt *a0, int a1, sqlite3_int64 a2), (a0, a1, a2),
     SQLITE_MISUSE)
LAZY(int, sqlite3_bind_null, (sqlite3_stmt *a0, int a1), (a0, a1), SQLITE_MISUSE)
LAZY(int, sqlite3_bind_text,
     (sqlite3_stmt *a0, int a1, const char *a2, int a3, void (*a4)(void *)),
     (a0, a1, a2, a3, a4), SQLITE_MISUSE)
LAZY(int, sqlite3_busy_timeout, (sqlite3 *a0, int a1), (a0, a1), SQLITE_MISUSE)
LAZY(int, sqlite3_changes, (sqlite3 *a0), (a0), 0)
LAZY(int, sqlite3_clear_bindings, (sqlite3_stmt *a0), (a0), SQLITE_MISUSE)
/* Without the library no handle was ever opened: closing NULL is a no-op. */
LAZY(int, sqlite3_close_v2, (sqlite3 *a0), (a0), SQLITE_OK)
LAZY(int, sqlite3_column_int, (sqlite3_stmt *a0, int a1), (a0, a1), 0)
LAZY(sqlite3_int64, sqlite3_column_int64, (sqlite3_stmt *a0, int a1), (a0, a1), 0)
LAZY(const unsigned char *, sqlite3_column_text, (sqlite3_stmt *a0, int a1), (a0, a1), NULL)
LAZY(int, sqlite3_errcode, (sqlite3 *a0), (a0), SQLITE_CANTOPEN)
LAZY(const char *, sqlite3_errmsg, (sqlite3 *a0), (a0), load_msg)
LAZY(const char *, sqlite3_errstr, (int a0), (a0), load_msg)
LAZY(int, sqlite3_exec,
     (sqlite3 *a0, const char *a1, int (*a2)(void *, int, char **, char **), void *a3,
      char **a4),
     (a0, a1, a2, a3, a4), SQLITE_MISUSE)
LAZY(int, sqlite3_finalize, (sqlite3_stmt *a0), (a0), SQLITE_OK)
LAZY_VOID(sqlite3_free, (void *a0), (a0))
LAZY(int, sqlite3_get_autocommit, (sqlite3 *a0), (a0), 1)
LAZY(int, sqlite3_prepare_v2,
     (sqlite3 *a0, const char *a1, int a2, sqlite3_stmt **a3, const char **a4),
     (a0, a1, a2, a3, a4), SQLITE_MISUSE)
LAZY(int, sqlite3_prepare_v3,
     (sqlite3 *a0, const char *a1, int a2, unsigned int a3, sqlite3_stmt **a4, const char **a5),
     (a0, a1, a2, a3, a4, a5), SQLITE_MISUSE)
LAZY(int, sqlite3_reset, (sqlite3_stmt *a0), (a0), SQLITE_MISUSE)
LAZY(int, sqlite3_step, (sqlite3_stmt *a0), (a0), SQLITE_MISUSE)
LAZY(int, sqlite3_stmt_busy, (sqlite3_stmt *a0), (a0), 0)
LAZY(int, sqlite3_stmt_readonly, (sqlite3_stmt *a0), (a0), 0)
LAZY(int, sqlite3_wal_checkpoint_v2, (sqlite3 *a0, const char *a1, int a2, int *a3, int *a4),
     (a0, a1, a2, a3, a4), SQLITE_MISUSE)
