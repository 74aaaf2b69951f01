/* SPDX-License-Identifier: Apache-2.0 */
/* Batch mode's background sync (audit_set_background_sync()): the sync the
 * writer asks for runs in a helper process while the caller goes on; an
 * append past the deadline does not sync inline; audit_flush() and closing
 * wait for it; the helper ends with the writer; the chain is unchanged. */
#include <criterion/criterion.h>
#include <dirent.h>
#include <ftw.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "audit.h"
#include "util.h"
#include "audit-fixture.h"

#define SB "0123456789abcdef"

static void setup(void)
{
        audit_fixture_open("auditsync");
}

static void teardown(void)
{
        audit_fixture_close();
}

TestSuite(audit_sync, .init = setup, .fini = teardown);

/* Child processes of this thread. */
static int threads(void)
{
        DIR *d = opendir("/proc/self/task");
        cr_assert_not_null(d);
        int t = 0;
        struct dirent *e;
        while ((e = readdir(d)))
                t += e->d_name[0] != '.';
        closedir(d);
        return t;
}

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

static struct audit *open_log(enum audit_sync mode, uint64_t batch_ms)
{
        struct audit_options o = {.sync = mode, .batch_ms = batch_ms};
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

Test(audit_sync, the_sync_runs_beside_the_writer_and_ends_with_it)
{
        int before = children(), before_threads = threads();
        struct audit *a = open_log(AUDIT_SYNC_BATCH, 0);
        cr_assert_eq(audit_set_background_sync(a), 0);
        cr_assert_eq(audit_set_background_sync(a), 0, "twice is once");
        for (int i = 0; i < 10; i++)
                append(a, i);
        cr_assert_neq(audit_flush_deadline(a), 0, "pending");
        cr_assert_eq(audit_flush_soon(a), 0);
        cr_assert_eq(audit_flush_deadline(a), 0, "handed to the helper at once");
        /* Forked by the first sync handed over (test-audit-sync-lazy.c). */
        cr_assert_eq(children(), before + 1, "no helper process");
        cr_assert_eq(threads(), before_threads, "the writer got a thread");
        append(a, 10);
        cr_assert_eq(audit_flush(a), 0);
        cr_assert_eq(audit_flush_deadline(a), 0, "audit_flush synced what was pending");
        audit_close(a);
        cr_assert_eq(children(), before, "the helper ended with the writer");

        struct audit_verify_result vr;
        struct al_error err = {0};
        const char *paths[] = {logpath};
        cr_assert_eq(audit_verify_files(paths, 1, NULL, &vr, &err), 0, "%s", err.msg);
        cr_assert(vr.ok, "%s", vr.reason);
        cr_assert_eq(vr.last_seq, 11);
}

Test(audit_sync, an_append_past_the_deadline_hands_the_sync_over)
{
        struct audit *a = open_log(AUDIT_SYNC_BATCH, 1);
        cr_assert_eq(audit_set_background_sync(a), 0);
        append(a, 0);
        cr_assert_neq(audit_flush_deadline(a), 0);
        struct timespec ts = {0, 3 * 1000 * 1000};
        nanosleep(&ts, NULL);
        append(a, 1); /* past the deadline: the helper syncs */
        cr_assert_eq(audit_flush_deadline(a), 0);
        cr_assert_eq(audit_flush(a), 0);
        audit_close(a);
}

Test(audit_sync, not_in_per_event_mode)
{
        struct audit *a = open_log(AUDIT_SYNC_EVENT, 0);
        cr_assert_eq(audit_set_background_sync(a), -EINVAL);
        cr_assert_eq(audit_flush_soon(a), 0);
        audit_close(a);
}
