/* SPDX-License-Identifier: Apache-2.0 */
#pragma once

/* A fake cgroup hierarchy for the backends' unit tests: a temporary
 * directory whose control files are plain files. */
#include <criterion/criterion.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "util.h"

static char tmp[64];

static void fake_cgroup_setup(const char *name)
{
        snprintf(tmp, sizeof(tmp), "/tmp/test-%s-XXXXXX", name);
        cr_assert_not_null(mkdtemp(tmp));
}

static void teardown(void)
{
        _cleanup_free_ char *cmd = xasprintf("rm -rf '%s'", tmp);
        cr_assert_eq(system(cmd), 0);
}

/* Write a control file. */
static void put(const char *dir, const char *file, const char *s)
{
        _cleanup_free_ char *p = xasprintf("%s/%s", dir, file);
        _cleanup_close_ int fd = open(p, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
        cr_assert_geq(fd, 0);
        cr_assert_geq(write_full(fd, s, strlen(s)), 0);
}

/* A control file's contents (to free). */
static char *get(const char *dir, const char *file)
{
        _cleanup_free_ char *p = xasprintf("%s/%s", dir, file);
        char *s = NULL;
        cr_assert_geq(read_file_at(AT_FDCWD, p, 4096, &s, NULL), 0, "%s", p);
        return s;
}
