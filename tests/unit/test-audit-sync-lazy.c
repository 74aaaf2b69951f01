/* SPDX-License-Identifier: Apache-2.0 */
/* The background sync helper (audit_set_background_sync()) is started by
 * the first sync handed to it, not when it is asked for: a run that ends
 * within one batch (`airlock run -- true`) forked it, and waited for it to
 * end, for nothing (about 0.3 ms of a cold start). What audit_flush()
 * promises holds either way: every line written is on the disk when it
 * returns. fdatasync is interposed to count the syncs of this process. */
#include <criterion/criterion.h>
#include <dirent.h>
#include <stdio.h>
#include <string.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

#include "audit.h"
#include "util.h"
#include "audit-fixture.h"

#define SB "0123456789abcdef"

static int inline_syncs;

int fdatasync(int fd)
{
        inline_syncs++;
        return (int)syscall(SYS_fdatasync, fd);
}

static void setup(void)
{
        audit_fixture_open("auditlazy");
        inline_syncs = 0;
}

static void teardown(void)
{
        audit_fixture_close();
}

TestSuite(audit_sync_lazy, .init = setup, .fini = teardown);

static int children(void)
{
        char path[64], buf[4096];
        snprintf(path, sizeof(path), "/proc/self/task/%d/children", (int)gettid());
        FILE *f = fopen(path, "re");
        cr_assert_not_null(f);
        size_t n = fread(buf, 1, sizeof(buf) - 1, f);
        fclose(f);
        buf[n] = '\0';
        int c = 0;
        for (size_t i = 0; i < n; i++)
                c += buf[i] >= '0' && buf[i] <= '9' && (i + 1 == n || buf[i + 1] == ' ');
        return c;
}

static struct audit *open_log(uint64_t batch_ms)
{
        struct audit_options o = {.sync = AUDIT_SYNC_BATCH, .batch_ms = batch_ms};
        struct al_error err = {0};
        struct audit *a = NULL;
        cr_assert_eq(audit_open(logpath, &o, &a, &err), 0, "audit_open: %s", err.msg);
        return a;
}

static void append(struct audit *a, int i)
{
        struct al_error err = {0};
        json_t *f = json_pack("{s:i}", "i", i);
        cr_assert_eq(audit_append(a, SB, "sandbox.created", f, &err), 0, "%s", err.msg);
        json_decref(f);
}

Test(audit_sync_lazy, a_writer_done_within_one_batch_starts_no_helper)
{
        int before = children();
        struct audit *a = open_log(60000);
        cr_assert_eq(audit_set_background_sync(a), 0);
        cr_assert_eq(children(), before, "a helper was forked before any sync was handed over");
        append(a, 0);
        append(a, 1);
        cr_assert_eq(children(), before, "a helper was forked for lines within the batch");
        inline_syncs = 0;
        cr_assert_eq(audit_flush(a), 0);
        cr_assert_eq(inline_syncs, 1, "audit_flush() did not sync what was pending");
        cr_assert_eq(audit_flush_deadline(a), 0);
        audit_close(a);
        cr_assert_eq(children(), before);
}

Test(audit_sync_lazy, the_first_sync_handed_over_starts_the_helper)
{
        int before = children();
        struct audit *a = open_log(60000);
        cr_assert_eq(audit_set_background_sync(a), 0);
        append(a, 0);
        inline_syncs = 0;
        cr_assert_eq(audit_flush_soon(a), 0);
        cr_assert_eq(children(), before + 1, "no helper after a sync was handed over");
        cr_assert_eq(audit_flush_deadline(a), 0, "handed to the helper at once");
        cr_assert_eq(audit_flush(a), 0);
        cr_assert_eq(inline_syncs, 0, "the sync ran inline, not in the helper");
        append(a, 1);
        cr_assert_eq(audit_flush_soon(a), 0);
        cr_assert_eq(children(), before + 1, "a second helper");
        audit_close(a);
        cr_assert_eq(children(), before, "the helper did not end with the writer");
}
