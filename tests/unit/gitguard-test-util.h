/* SPDX-License-Identifier: Apache-2.0 */
#pragma once

/* What the gitguard tests share: a temporary workspace `ws` and the files
 * and directories they lay out in it, by path relative to it. A test file
 * whose files must be executable defines GG_TEST_PUT_MODE first. */

#include <criterion/criterion.h>
#include <fcntl.h>
#include <stdbool.h>
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "gitguard-test-begin.h"

#ifndef GG_TEST_PUT_MODE
#define GG_TEST_PUT_MODE 0644
#endif

static char ws[64];

static inline void path(char *p, size_t n, const char *rel)
{
        snprintf(p, n, "%s/%s", ws, rel);
}

static inline void put(const char *rel, const char *text)
{
        char p[512];
        path(p, sizeof(p), rel);
        int fd = open(p, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, GG_TEST_PUT_MODE);
        cr_assert(fd >= 0, "%s", p);
        cr_assert_eq(write(fd, text, strlen(text)), (ssize_t)strlen(text));
        close(fd);
}

static inline void append(const char *rel, const char *text)
{
        char p[512];
        path(p, sizeof(p), rel);
        FILE *f = fopen(p, "ae");
        cr_assert_not_null(f, "%s", p);
        fputs(text, f);
        fclose(f);
}

static inline void dir(const char *rel)
{
        char p[512];
        path(p, sizeof(p), rel);
        cr_assert_eq(mkdir(p, 0755), 0, "%s", p);
}

static inline bool exists(const char *rel)
{
        char p[512];
        struct stat st;
        path(p, sizeof(p), rel);
        return lstat(p, &st) == 0;
}
