/* SPDX-License-Identifier: Apache-2.0 */
/* The project-id leases of limits.workspaceDisk (quota.h): a lease whose
 * owner is gone is reclaimed by the next sweep (orphans_sweep() included,
 * with or without run records), one whose owner holds its lock is left, and
 * what cannot be read goes. Relabelling a tree needs a file system with
 * project ids, which tests/faults/test_quota_reclaim.py covers. */
#include <criterion/criterion.h>
#include <fcntl.h>
#include <stdlib.h>
#include <string.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <unistd.h>

#include "orphans.h"
#include "quota.h"
#include "util.h"

static char tmp[64];

static void setup(void)
{
        snprintf(tmp, sizeof(tmp), "/tmp/test-quota-lease-XXXXXX");
        cr_assert_not_null(mkdtemp(tmp));
        _cleanup_free_ char *d = xasprintf("%s/quota", tmp);
        cr_assert_eq(mkdir(d, 0700), 0);
}

static void teardown(void)
{
        _cleanup_free_ char *cmd = xasprintf("rm -rf '%s'", tmp);
        cr_assert_eq(system(cmd), 0);
}

static char *lease(const char *name, const char *body)
{
        char *p = xasprintf("%s/quota/%s", tmp, name);
        _cleanup_close_ int fd = open(p, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0600);
        cr_assert_geq(fd, 0);
        cr_assert_geq(write_full(fd, body, strlen(body)), 0);
        return p;
}

TestSuite(quota_lease, .init = setup, .fini = teardown);

Test(quota_lease, an_unheld_lease_is_reclaimed)
{
        _cleanup_free_ char *ws = xasprintf("%s/ws", tmp);
        cr_assert_eq(mkdir(ws, 0755), 0);
        _cleanup_free_ char *body = xasprintf("%u\n%s\n", 0x41000007u, ws);
        _cleanup_free_ char *p = lease("41000007", body);
        struct al_error err = {0};
        cr_expect_eq(quota_sweep(tmp, &err), 1, "%s", err.msg);
        cr_expect_neq(access(p, F_OK), 0, "the lease is gone");
        cr_expect_eq(access(ws, F_OK), 0, "the workspace is left");
        cr_expect_eq(quota_sweep(tmp, &err), 0, "once");
}

Test(quota_lease, a_held_lease_is_left)
{
        _cleanup_free_ char *p = lease("41000008", "1090519048\n/nonexistent\n");
        /* Its own open file description: flock conflicts within a process. */
        _cleanup_close_ int fd = open(p, O_RDONLY | O_CLOEXEC);
        cr_assert_eq(flock(fd, LOCK_EX), 0);
        struct al_error err = {0};
        cr_expect_eq(quota_sweep(tmp, &err), 0, "%s", err.msg);
        cr_expect_eq(access(p, F_OK), 0, "its owner lives");
        close(TAKE_FD(fd));
        cr_expect_eq(quota_sweep(tmp, &err), 1, "%s", err.msg);
        cr_expect_neq(access(p, F_OK), 0);
}

Test(quota_lease, garbage_and_foreign_ids_go_without_touching_anything)
{
        _cleanup_free_ char *a = lease("41000009", "not a lease");
        /* An id outside Airlock's block is never cleared. */
        _cleanup_free_ char *b = lease("00000005", "5\n/\n");
        struct al_error err = {0};
        cr_expect_eq(quota_sweep(tmp, &err), 2, "%s", err.msg);
        cr_expect_neq(access(a, F_OK), 0);
        cr_expect_neq(access(b, F_OK), 0);
}

Test(quota_lease, a_lease_being_written_is_kept_until_stale)
{
        _cleanup_free_ char *fresh = lease(".4100000a-1", "");
        _cleanup_free_ char *old = lease(".4100000b-1", "");
        struct timespec ts[2] = {{.tv_sec = 1000}, {.tv_sec = 1000}};
        cr_assert_eq(utimensat(AT_FDCWD, old, ts, 0), 0);
        struct al_error err = {0};
        cr_expect_eq(quota_sweep(tmp, &err), 0, "%s", err.msg);
        cr_expect_eq(access(fresh, F_OK), 0);
        cr_expect_neq(access(old, F_OK), 0);
}

Test(quota_lease, orphans_sweep_reclaims_leases_without_run_records)
{
        _cleanup_free_ char *p = lease("4100000c", "1090519052\n/nonexistent\n");
        struct al_error err = {0};
        cr_expect_eq(orphans_sweep(tmp, &err), 1, "%s", err.msg);
        cr_expect_neq(access(p, F_OK), 0);
}

Test(quota_lease, apply_refuses_before_leasing_where_there_are_no_quotas)
{
        /* /dev/shm: a tmpfs, never with project quotas: refused, nothing
         * leased. */
        struct quota *q = NULL;
        struct al_error err = {0};
        cr_expect_lt(quota_apply("/dev/shm", 1 << 20, "0123456789abcdef", tmp, &q, &err), 0);
        cr_expect_null(q);
        cr_expect(strstr(err.msg, "tmpfs"), "%s", err.msg);
        _cleanup_free_ char *d = xasprintf("%s/quota", tmp);
        _cleanup_(closedirp) DIR *dir = opendir(d);
        cr_assert_not_null(dir);
        struct dirent *de;
        int n = 0;
        while ((de = readdir(dir)))
                n += de->d_name[0] != '.';
        cr_expect_eq(n, 0);
}
