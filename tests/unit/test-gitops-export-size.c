/* SPDX-License-Identifier: Apache-2.0 */
/* What `airlock export` costs the host for a commit of very many short
 * lines: libgit2's diff holds about 100 bytes per line, so a 16 MiB blob
 * of newlines (far under the 64 MiB Airlock reads of one object) took
 * about 1.6 GB to export, and the 1 GiB read in all would take 100 GB. Such
 * a file goes into the mbox as a binary patch, which `git am` applies the
 * same (lib/git). */
#include <criterion/criterion.h>
#include <fcntl.h>
#include <ftw.h>
#include <git2.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include "gitops.h"
#include "util.h"

#include "gitops-test-remote.h"

#define MiB        (1024 * 1024)
#define MEMORY_MAX (384LL * MiB)

#if defined(__SANITIZE_ADDRESS__)
#define ASAN 1
#elif defined(__has_feature)
#if __has_feature(address_sanitizer)
#define ASAN 1
#endif
#endif

static int rm_entry(const char *p, const struct stat *st, int flag, struct FTW *ftw)
{
        return remove(p);
}

/* Commit path=content (len bytes) on top of HEAD in the repository at dir. */
static void commit_blob(const char *dir, const char *path, const char *content, size_t len)
{
        git_repository *repo;
        cr_assert_eq(git_repository_open(&repo, dir), 0);
        git_oid parent_id, blob, tree_id, id;
        git_commit *parent = NULL;
        git_tree *base = NULL, *tree;
        if (git_reference_name_to_id(&parent_id, repo, "HEAD") == 0) {
                cr_assert_eq(git_commit_lookup(&parent, repo, &parent_id), 0);
                cr_assert_eq(git_commit_tree(&base, parent), 0);
        }
        cr_assert_eq(git_blob_create_from_buffer(&blob, repo, content, len), 0);
        git_tree_update upd = {GIT_TREE_UPDATE_UPSERT, blob, GIT_FILEMODE_BLOB, path};
        cr_assert_eq(git_tree_create_updated(&tree_id, repo, base, 1, &upd), 0);
        cr_assert_eq(git_tree_lookup(&tree, repo, &tree_id), 0);
        git_signature *sig;
        cr_assert_eq(git_signature_new(&sig, "Test Agent", "agent@example.com", 1700000000, 0), 0);
        const git_commit *parents[] = {parent};
        cr_assert_eq(git_commit_create(&id, repo, "HEAD", sig, sig, NULL, "change\n", tree,
                                       parent ? 1 : 0, parents),
                     0);
        git_signature_free(sig);
        git_tree_free(tree);
        git_tree_free(base);
        git_commit_free(parent);
        git_repository_free(repo);
}

static void setup(void)
{
        gitops_test_remote("/var/tmp/airlock-test-gexsize-XXXXXX");
        commit_blob(bare, "README", "hello\n", 6);
}

static void teardown(void)
{
        nftw(top, rm_entry, 16, FTW_DEPTH | FTW_PHYS);
        git_libgit2_shutdown();
}

TestSuite(gitops_export_size, .init = setup, .fini = teardown, .timeout = 60);

/* gitops_export in a child (its address space capped, but under ASan),
 * the mbox to out_path; its peak memory in *ret_rss. */
static int export_in_child(const char *base, const char *out_path, long long *ret_rss)
{
        pid_t pid = fork();
        cr_assert(pid >= 0);
        if (pid == 0) {
#ifndef ASAN
                struct rlimit rl = {.rlim_cur = 2048LL * MiB, .rlim_max = 2048LL * MiB};
                setrlimit(RLIMIT_AS, &rl);
#endif
                FILE *out = fopen(out_path, "we");
                if (!out)
                        _exit(3);
                struct al_error err = {0};
                size_t n = 0;
                int r = gitops_export(ws, base, out, &n, &err);
                if (fclose(out) != 0)
                        _exit(4);
                if (r < 0) {
                        fprintf(stderr, "gitops_export: %s\n", err.msg);
                        _exit(1);
                }
                _exit(n == 1 ? 0 : 5);
        }
        int st;
        struct rusage ru;
        cr_assert_eq(wait4(pid, &st, 0, &ru), pid);
        *ret_rss = (long long)ru.ru_maxrss * 1024;
        return WIFEXITED(st) ? WEXITSTATUS(st) : 128 + WTERMSIG(st);
}

Test(gitops_export_size, a_blob_of_many_lines_is_exported_as_binary)
{
        char base[GITOPS_OID_HEX + 1];
        struct al_error err = {0};
        cr_assert_eq(gitops_clone(url, NULL, ws, NULL, base, &err), 0, "%s", err.msg);
        size_t len = 16 * MiB;
        char *nl = xcalloc(len, 1);
        memset(nl, '\n', len);
        commit_blob(ws, "lines.txt", nl, len);
        free(nl);
        char out[256];
        snprintf(out, sizeof(out), "%s/out.mbox", top);
        long long rss = 0;
        int r = export_in_child(base, out, &rss);
        cr_assert_eq(r, 0, "the export failed (%d)", r);
        cr_expect_lt(rss, MEMORY_MAX, "peak memory %lld MiB for a 16 MiB blob", rss / MiB);
        char *text = NULL;
        size_t tlen = 0;
        cr_assert_eq(read_file_at(AT_FDCWD, out, 64 * MiB, &text, &tlen), 0);
        cr_expect_not_null(strstr(text, "lines.txt"), "the file is not in the mbox");
        cr_expect_not_null(strstr(text, "GIT binary patch"), "not a binary patch");
        free(text);
}

Test(gitops_export_size, an_ordinary_text_file_stays_text)
{
        char base[GITOPS_OID_HEX + 1];
        struct al_error err = {0};
        cr_assert_eq(gitops_clone(url, NULL, ws, NULL, base, &err), 0, "%s", err.msg);
        /* 3 MiB of 60-byte lines: larger than the line limit in bytes, far
         * under it in lines. */
        size_t len = 3 * MiB / 60 * 60;
        char *t = xcalloc(len + 1, 1);
        for (size_t o = 0; o < len; o += 60) {
                memset(t + o, 'x', 59);
                t[o + 59] = '\n';
        }
        commit_blob(ws, "text.txt", t, len);
        free(t);
        char out[256];
        snprintf(out, sizeof(out), "%s/out.mbox", top);
        long long rss = 0;
        cr_assert_eq(export_in_child(base, out, &rss), 0);
        char *text = NULL;
        size_t tlen = 0;
        cr_assert_eq(read_file_at(AT_FDCWD, out, 64 * MiB, &text, &tlen), 0);
        cr_expect_null(strstr(text, "GIT binary patch"), "an ordinary text file made binary");
        cr_expect_not_null(strstr(text, "+xxxxxxxx"));
        free(text);
}
