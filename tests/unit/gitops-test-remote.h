/* SPDX-License-Identifier: Apache-2.0 */
#pragma once

/* What the gitops tests share: a scratch directory `top` holding an empty
 * bare repository (`bare`, reached as `url`, HEAD on main) and the path of
 * a workspace to clone into (`ws`). Each test file commits its own first
 * file into `bare`. */

#include <criterion/criterion.h>
#include <git2.h>
#include <stdio.h>
#include <stdlib.h>

static char top[64], bare[128], url[160], ws[128];

/* tmpl: the scratch directory's mkdtemp template. */
static inline void gitops_test_remote(const char *tmpl)
{
        git_libgit2_init();
        snprintf(top, sizeof(top), "%s", tmpl);
        cr_assert_not_null(mkdtemp(top));
        snprintf(bare, sizeof(bare), "%s/remote.git", top);
        snprintf(url, sizeof(url), "file://%s", bare);
        snprintf(ws, sizeof(ws), "%s/ws", top);
        git_repository *repo;
        git_repository_init_options o = GIT_REPOSITORY_INIT_OPTIONS_INIT;
        o.flags = GIT_REPOSITORY_INIT_BARE | GIT_REPOSITORY_INIT_MKPATH;
        o.initial_head = "main";
        cr_assert_eq(git_repository_init_ext(&repo, bare, &o), 0);
        git_repository_free(repo);
}
