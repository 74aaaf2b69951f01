/* SPDX-License-Identifier: Apache-2.0 */
/* The daemon checkpoints its state database on its event loop
 * (store_checkpoint, when the store is healthy again after a full disk).
 * A reader outside the daemon (sqlite3 on the file, a backup) holding a
 * read transaction made that checkpoint wait in SQLite's busy handler, up
 * to the store's 2 s busy timeout, with nothing else served meanwhile. It
 * must not wait: it copies what it can, says the reader held the rest,
 * and truncates the WAL once the reader is gone. The busy handler's
 * sleeps are counted by standing in for libc's, which SQLite calls. */
#include <criterion/criterion.h>
#include <sqlite3.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

static unsigned sleeps;

int usleep(useconds_t us)
{
        (void)us;
        sleeps++;
        return 0;
}

int nanosleep(const struct timespec *req, struct timespec *rem)
{
        (void)req;
        (void)rem;
        sleeps++;
        return 0;
}

unsigned int sleep(unsigned int s)
{
        (void)s;
        sleeps++;
        return 0;
}

#include "store-fixture.h"

static void setup(void)
{
        store_fixture_open("store-checkpoint");
}

TestSuite(store_checkpoint, .init = setup, .fini = teardown);

static void put(const char *id)
{
        struct store_sandbox sb = {.state = "running", .class_name = "small", .metadata = "{}",
                                   .policy = "{}"};
        snprintf(sb.id, sizeof(sb.id), "%s", id);
        cr_assert_eq(store_sandbox_put(st, &sb), 0, "%s", store_last_error(st));
}

static off_t wal_size(void)
{
        char wal[160];
        snprintf(wal, sizeof(wal), "%s-wal", dbpath);
        struct stat s;
        return stat(wal, &s) == 0 ? s.st_size : 0;
}

Test(store_checkpoint, a_reader_outside_is_not_waited_for)
{
        put("0000000000000001");
        /* A reader outside the daemon, in the middle of a read. */
        sqlite3 *outside = NULL;
        cr_assert_eq(sqlite3_open_v2(dbpath, &outside, SQLITE_OPEN_READONLY, NULL), SQLITE_OK);
        cr_assert_eq(sqlite3_exec(outside, "BEGIN; SELECT count(*) FROM sandboxes;", NULL, NULL,
                                  NULL),
                     SQLITE_OK);
        put("0000000000000002");

        sleeps = 0;
        int r = store_checkpoint(st);
        cr_assert_eq(sleeps, 0, "the checkpoint waited for the reader (%u sleeps)", sleeps);
        cr_assert_lt(r, 0, "a WAL a reader holds was reported truncated");
        cr_assert_gt(wal_size(), 0);

        /* The reader gone, the WAL is truncated. */
        cr_assert_eq(sqlite3_exec(outside, "COMMIT;", NULL, NULL, NULL), SQLITE_OK);
        sqlite3_close(outside);
        cr_assert_eq(store_checkpoint(st), 0, "%s", store_last_error(st));
        cr_assert_eq(wal_size(), 0);
}
