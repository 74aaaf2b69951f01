/* SPDX-License-Identifier: Apache-2.0 */
/* A fresh store in a directory of its own for each test of the daemon's
 * store (included by the store's unit tests; one copy per test binary). */
#pragma once

#include <criterion/criterion.h>
#include <ftw.h>
#include <stdio.h>
#include <stdlib.h>

#include "store.h"
#include "util.h"

static char dir[64];
static char dbpath[128];
static struct store *st;

static int rm_entry(const char *p, const struct stat *s, int flag, struct FTW *ftw)
{
        (void)s;
        (void)flag;
        (void)ftw;
        return remove(p);
}

static void store_fixture_open(const char *name)
{
        snprintf(dir, sizeof(dir), "/tmp/airlock-test-%s-XXXXXX", name);
        cr_assert_not_null(mkdtemp(dir));
        snprintf(dbpath, sizeof(dbpath), "%s/%s", dir, STORE_FILE);
        struct al_error err = {0};
        cr_assert_eq(store_open(dbpath, &st, &err), 0, "%s", err.msg);
}

static void teardown(void)
{
        st = store_close(st);
        nftw(dir, rm_entry, 16, FTW_DEPTH | FTW_PHYS);
}
