/* SPDX-License-Identifier: Apache-2.0 */
/* Batch mode's promise (audit_flush(): every line this writer wrote is on
 * the disk) when the log is rotated away under the writer by another
 * writer of the same file: the lines it wrote to the file that is now
 * FILE.1 are synced before it moves on to the new one, inline or by its
 * background helper. fdatasync is interposed here: each call records the
 * inode it synced (in shared memory, so the helper's count too). */
#include <criterion/criterion.h>
#include <ftw.h>
#include <stdio.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <unistd.h>

#include "audit.h"
#include "util.h"
#include "audit-fixture.h"

#define SB "0123456789abcdef"

struct synced {
        int n;
        ino_t ino[256];
};
static struct synced *synced;

int fdatasync(int fd)
{
        struct stat st;
        if (synced && fstat(fd, &st) == 0 && synced->n < 256)
                synced->ino[__atomic_fetch_add(&synced->n, 1, __ATOMIC_SEQ_CST)] = st.st_ino;
        return (int)syscall(SYS_fdatasync, fd);
}

static bool was_synced(ino_t ino)
{
        for (int i = 0; i < synced->n && i < 256; i++)
                if (synced->ino[i] == ino)
                        return true;
        return false;
}

static void setup(void)
{
        audit_fixture_open("syncatk");
        synced =
            mmap(NULL, sizeof(*synced), PROT_READ | PROT_WRITE, MAP_SHARED | MAP_ANONYMOUS, -1, 0);
        cr_assert_neq(synced, MAP_FAILED);
}

static void teardown(void)
{
        munmap(synced, sizeof(*synced));
        synced = NULL;
        audit_fixture_close();
}

TestSuite(audit_sync_attacks, .init = setup, .fini = teardown);

static struct audit *open_log(uint64_t rotate_size)
{
        struct audit_options o = {
            .sync = AUDIT_SYNC_BATCH, .batch_ms = 60000, .rotate_size = rotate_size};
        struct al_error err = {0};
        struct audit *a = NULL;
        cr_assert_eq(audit_open(logpath, &o, &a, &err), 0, "audit_open: %s", err.msg);
        return a;
}

static void append(struct audit *a, int i)
{
        struct al_error err = {0};
        json_t *f = json_pack("{s:i}", "i", i);
        cr_assert_eq(audit_append(a, SB, "net.decision", f, &err), 0, "%s", err.msg);
        json_decref(f);
}

static void rotated_under_the_writer(bool background)
{
        struct audit *a = open_log(AUDIT_ROTATE_NEVER);
        if (background)
                cr_assert_eq(audit_set_background_sync(a), 0);
        /* Another writer of the same log, which rotates at its next line. */
        struct audit *b = open_log(1);
        append(a, 1); /* pending: the batch is 60 s long */
        struct stat st;
        cr_assert_eq(stat(logpath, &st), 0);
        ino_t first = st.st_ino;
        synced->n = 0;
        append(b, 2); /* b had nothing pending: it renames the file unsynced */
        cr_assert_eq(stat(logpath, &st), 0);
        cr_assert_neq(st.st_ino, first, "b did not rotate the log");
        append(a, 3); /* a finds its file gone and moves to the new one */
        cr_assert_eq(audit_flush(a), 0);
        cr_assert(was_synced(first),
                  "audit_flush() returned with this writer's line in the rotated file "
                  "never synced");
        audit_close(a);
        audit_close(b);
}

Test(audit_sync_attacks, a_rotation_by_another_writer_loses_no_sync)
{
        rotated_under_the_writer(false);
}

Test(audit_sync_attacks, a_rotation_by_another_writer_loses_no_background_sync)
{
        rotated_under_the_writer(true);
}
