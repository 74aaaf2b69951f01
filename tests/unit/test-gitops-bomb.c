/* SPDX-License-Identifier: Apache-2.0 */
/* A repository whose checkout is far larger than what is sent: one blob of
 * zeros named many times by a tree, that tree named many times by the next.
 * A few KiB of objects; checked out, 64 MiB here (and terabytes with one
 * more level). The host-side clone (lib/git) must refuse it before it
 * writes, and a plain repository must still clone. */
#include <criterion/criterion.h>
#include <errno.h>
#include <ftw.h>
#include <git2.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "gitops.h"

static int rm_entry(const char *p, const struct stat *st, int flag, struct FTW *ftw)
{
        (void)st, (void)flag, (void)ftw;
        return remove(p);
}

/* A bare repository at dir whose HEAD is a commit of `levels` nested trees
 * of `fan` entries over a blob of `blob` zero bytes. */
static void make_bomb(const char *dir, int levels, int fan, size_t blob)
{
        git_repository *repo;
        cr_assert_eq(git_repository_init(&repo, dir, 1), 0);
        char *zeros = calloc(1, blob);
        git_oid id;
        cr_assert_eq(git_blob_create_from_buffer(&id, repo, zeros, blob), 0);
        free(zeros);
        git_filemode_t mode = GIT_FILEMODE_BLOB;
        for (int l = 0; l < levels; l++) {
                git_treebuilder *tb;
                cr_assert_eq(git_treebuilder_new(&tb, repo, NULL), 0);
                for (int i = 0; i < fan; i++) {
                        char name[16];
                        snprintf(name, sizeof(name), "e%d", i);
                        cr_assert_eq(git_treebuilder_insert(NULL, tb, name, &id, mode), 0);
                }
                cr_assert_eq(git_treebuilder_write(&id, tb), 0);
                git_treebuilder_free(tb);
                mode = GIT_FILEMODE_TREE;
        }
        git_tree *tree;
        cr_assert_eq(git_tree_lookup(&tree, repo, &id), 0);
        git_signature *sig;
        cr_assert_eq(git_signature_new(&sig, "T", "t@example.com", 1700000000, 0), 0);
        git_oid cid;
        cr_assert_eq(git_commit_create(&cid, repo, "HEAD", sig, sig, NULL, "bomb", tree, 0, NULL),
                     0);
        git_signature_free(sig);
        git_tree_free(tree);
        git_repository_free(repo);
}

static char top[64];

static void setup(void)
{
        git_libgit2_init();
        snprintf(top, sizeof(top), "/tmp/airlock-gitbomb-XXXXXX");
        cr_assert_not_null(mkdtemp(top));
        gitops_set_clone_limits(0, 16ULL << 20, 10000);
}

static void teardown(void)
{
        gitops_set_clone_limits(0, 0, 0);
        nftw(top, rm_entry, 16, FTW_DEPTH | FTW_PHYS);
        git_libgit2_shutdown();
}

static bool exists(const char *p)
{
        struct stat st;
        return lstat(p, &st) == 0;
}

Test(gitops_bomb, checkout_larger_than_the_limit, .init = setup, .fini = teardown)
{
        char bare[128], ws[128], base[GITOPS_OID_HEX + 1];
        snprintf(bare, sizeof(bare), "%s/bomb.git", top);
        snprintf(ws, sizeof(ws), "%s/ws", top);
        /* 8 x 8 names of one 1 MiB blob: 64 MiB checked out. */
        make_bomb(bare, 2, 8, 1 << 20);
        struct al_error err = {0};
        int r = gitops_clone(bare, NULL, ws, NULL, base, &err);
        cr_expect_eq(r, -EFBIG, "the bomb was cloned (%d %s)", r, err.msg);
        cr_expect(strstr(err.msg, "larger than"), "%s", err.msg);
        cr_expect_not(exists(ws), "the failed clone left its directory");
}

Test(gitops_bomb, too_many_entries, .init = setup, .fini = teardown)
{
        char bare[128], ws[128], base[GITOPS_OID_HEX + 1];
        snprintf(bare, sizeof(bare), "%s/many.git", top);
        snprintf(ws, sizeof(ws), "%s/ws", top);
        /* 3 levels of 32: 32768 empty files from a few objects. */
        make_bomb(bare, 3, 32, 0);
        struct al_error err = {0};
        cr_expect_eq(gitops_clone(bare, NULL, ws, NULL, base, &err), -EFBIG, "%s", err.msg);
        cr_expect_not(exists(ws));
}

Test(gitops_bomb, within_the_limits, .init = setup, .fini = teardown)
{
        char bare[128], ws[128], base[GITOPS_OID_HEX + 1], f[192];
        snprintf(bare, sizeof(bare), "%s/small.git", top);
        snprintf(ws, sizeof(ws), "%s/ws", top);
        make_bomb(bare, 2, 4, 1000);
        struct al_error err = {0};
        cr_assert_eq(gitops_clone(bare, NULL, ws, NULL, base, &err), 0, "%s", err.msg);
        snprintf(f, sizeof(f), "%s/e3/e3", ws);
        struct stat st;
        cr_expect(stat(f, &st) == 0 && st.st_size == 1000, "the checkout is missing %s", f);
}
