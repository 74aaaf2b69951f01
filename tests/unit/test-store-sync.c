/* SPDX-License-Identifier: Apache-2.0 */
/* A process's start record is written without a sync (store_process_start)
 * and made durable by the next synced write or store_sync(); every other
 * write stays synced. The syncs are counted by standing in for libc's
 * fsync/fdatasync, which SQLite calls. */
#include <criterion/criterion.h>
#include <ftw.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <unistd.h>

#include "store.h"
#include "util.h"

static unsigned syncs;

int fdatasync(int fd)
{
        syncs++;
        return (int)syscall(SYS_fdatasync, fd);
}

int fsync(int fd)
{
        syncs++;
        return (int)syscall(SYS_fsync, fd);
}

#include "store-fixture.h"

static void setup(void)
{
        store_fixture_open("store-sync");
}

TestSuite(store_sync, .init = setup, .fini = teardown);

static struct store_process proc(uint64_t pid)
{
        struct store_process p = {.pid = pid, .argv = "[\"true\"]", .state = "running",
                                  .exit_code = -1, .started_ms = 10};
        memcpy(p.sandbox, "0000000000000001", 17);
        return p;
}

Test(store_sync, the_start_is_not_synced_the_end_takes_it_to_disk)
{
        struct store_process p = proc(1);
        unsigned before = syncs;
        cr_assert_eq(store_process_start(st, &p), 0);
        cr_assert_eq(syncs, before, "a start record waits for no sync");
        cr_assert(store_unsynced(st));

        before = syncs;
        cr_assert_eq(store_process_end(st, p.sandbox, 1, 0, NULL, 20), 0);
        cr_assert_gt(syncs, before, "the end is synced");
        cr_assert_not(store_unsynced(st), "and the start with it (one WAL)");
}

Test(store_sync, every_other_write_stays_synced)
{
        struct store_process p = proc(1);
        cr_assert_eq(store_process_start(st, &p), 0);
        p.pid = 2;
        unsigned before = syncs;
        cr_assert_eq(store_process_put(st, &p), 0);
        cr_assert_gt(syncs, before, "synchronous=FULL is back after a start");
        struct store_sandbox sb = {.state = "running", .class_name = "small", .metadata = "{}",
                                   .policy = "{}"};
        memcpy(sb.id, "0000000000000002", 17);
        before = syncs;
        cr_assert_eq(store_sandbox_put(st, &sb), 0);
        cr_assert_gt(syncs, before);
}

Test(store_sync, store_sync_makes_a_start_durable_once)
{
        struct store_process p = proc(1);
        cr_assert_eq(store_process_start(st, &p), 0);
        unsigned before = syncs;
        cr_assert_eq(store_sync(st), 0);
        cr_assert_gt(syncs, before);
        cr_assert_not(store_unsynced(st));
        before = syncs;
        cr_assert_eq(store_sync(st), 0);
        cr_assert_eq(syncs, before, "nothing waits: no sync");
}

Test(store_sync, a_start_is_there_for_another_reader_at_once)
{
        /* What a restarted daemon opens after a crash of this one: the WAL
         * holds the record although nothing synced it. */
        struct store_process p = proc(7);
        cr_assert_eq(store_process_start(st, &p), 0);
        struct store *other = NULL;
        struct al_error err = {0};
        cr_assert_eq(store_open(dbpath, &other, &err), 0, "%s", err.msg);
        struct store_process **v = NULL;
        size_t n = 0;
        cr_assert_eq(store_process_list(other, p.sandbox, 0, &v, &n), 0);
        cr_assert_eq(n, 1);
        cr_assert_eq(v[0]->pid, 7);
        cr_assert_str_eq(v[0]->state, "running");
        store_processes_free(v, n);
        store_close(other);
}

Test(store_sync, a_sandbox_state_nobody_is_told_waits_for_the_next_synced_write)
{
        struct store_sandbox sb = {.state = "pooled", .class_name = "small", .metadata = "{}",
                                   .policy = "{}"};
        memcpy(sb.id, "0000000000000003", 17);
        unsigned before = syncs;
        cr_assert_eq(store_sandbox_put_unsynced(st, &sb), 0);
        cr_assert_eq(syncs, before);
        cr_assert(store_unsynced(st));
        /* The take: synced, and the pooled state with it. */
        sb.state = "running";
        sb.grant = "ci";
        before = syncs;
        cr_assert_eq(store_sandbox_put(st, &sb), 0);
        cr_assert_gt(syncs, before);
        cr_assert_not(store_unsynced(st));
        struct store_sandbox *r = NULL;
        cr_assert_eq(store_sandbox_get(st, sb.id, &r), 0);
        cr_assert_str_eq(r->state, "running");
        cr_assert_str_eq(r->grant, "ci");
        store_sandbox_free(r);
}

static off_t wal_size(void)
{
        _cleanup_free_ char *wal = xasprintf("%s-wal", dbpath);
        struct stat s;
        return stat(wal, &s) == 0 ? s.st_size : -1;
}

Test(store_sync, a_kept_checkpoint_lets_later_commits_overwrite_the_wal)
{
        struct store_process p = proc(1);
        for (int i = 1; i <= 64; i++) {
                p.pid = (uint64_t)i;
                cr_assert_eq(store_process_put(st, &p), 0);
        }
        off_t grown = wal_size();
        cr_assert_gt(grown, 0);
        cr_assert_eq(store_checkpoint_keep(st), 0);
        cr_assert_eq(wal_size(), grown, "the WAL's file is kept");
        for (int i = 1; i <= 16; i++) {
                p.pid = (uint64_t)i;
                p.state = "exited";
                cr_assert_eq(store_process_put(st, &p), 0);
        }
        cr_assert_eq(wal_size(), grown, "later commits overwrite it from the start");
        /* The recovery path still gives the space back. */
        cr_assert_eq(store_checkpoint(st), 0);
        cr_assert_eq(wal_size(), 0);
}
