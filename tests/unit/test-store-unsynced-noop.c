/* SPDX-License-Identifier: Apache-2.0 */
/* What store_process_start() and store_sandbox_put_unsynced() leave
 * unsynced is marked durable only by a commit that synced the WAL. A write
 * that changed no row (an end of a process never started, a revoke of a
 * name that is not there, a delete of what is gone) commits nothing and
 * syncs nothing: it must not clear the mark, or the sync promised within
 * 100 ms (store_sync) is skipped and a power loss takes the record. */
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
        store_fixture_open("store-noop");
}

TestSuite(store_unsynced_noop, .init = setup, .fini = teardown);

static void start_one(void)
{
        struct store_process p = {
            .pid = 1, .argv = "[\"true\"]", .state = "running", .exit_code = -1, .started_ms = 10};
        memcpy(p.sandbox, "0000000000000001", 17);
        cr_assert_eq(store_process_start(st, &p), 0);
        cr_assert(store_unsynced(st));
}

/* Either the write synced (and the start with it), or the start is still
 * marked unsynced, so that store_sync() takes it to disk. */
static void assert_promise(unsigned before, const char *what)
{
        cr_assert(syncs > before || store_unsynced(st),
                  "%s synced nothing and cleared the unsynced mark", what);
        unsigned b = syncs;
        cr_assert_eq(store_sync(st), 0);
        cr_assert(syncs > before || syncs > b, "%s: the start never reached the disk", what);
        cr_assert_not(store_unsynced(st));
}

Test(store_unsynced_noop, an_end_of_no_process_keeps_the_start_unsynced)
{
        start_one();
        unsigned before = syncs;
        cr_assert_eq(store_process_end(st, "0000000000000009", 9, 0, NULL, 20), -ENOENT);
        assert_promise(before, "an end that matched no process");
}

Test(store_unsynced_noop, a_revoke_of_no_grant_keeps_the_start_unsynced)
{
        start_one();
        unsigned before = syncs;
        cr_assert_eq(store_grant_revoke(st, "nobody-here", 5), -ENOENT);
        assert_promise(before, "a revoke that matched no grant");
}

Test(store_unsynced_noop, a_delete_of_nothing_keeps_the_start_unsynced)
{
        start_one();
        unsigned before = syncs;
        (void)store_sandbox_delete(st, "00000000000000ff");
        assert_promise(before, "a delete of no sandbox");
}
