/* SPDX-License-Identifier: Apache-2.0 */
/* A directory of its own, with the audit log's path in it, for each test of
 * the audit writer (included by the audit's unit tests; one copy per test
 * binary). Each test is bounded by an alarm. */
#pragma once

#include <criterion/criterion.h>
#include <ftw.h>
#include <stdio.h>
#include <stdlib.h>
#include <unistd.h>

static char dir[64];
static char logpath[128];

static int rm_entry(const char *p, const struct stat *s, int flag, struct FTW *ftw)
{
        (void)s;
        (void)flag;
        (void)ftw;
        return remove(p);
}

static void audit_fixture_open(const char *name)
{
        snprintf(dir, sizeof(dir), "/tmp/airlock-test-%s-XXXXXX", name);
        cr_assert_not_null(mkdtemp(dir));
        snprintf(logpath, sizeof(logpath), "%s/audit.jsonl", dir);
        alarm(60);
}

static void audit_fixture_close(void)
{
        alarm(0);
        nftw(dir, rm_entry, 16, FTW_DEPTH | FTW_PHYS);
}
