/* SPDX-License-Identifier: Apache-2.0 */
/* The host reads an agent's repository through a private copy (export,
 * push, and the report at the end of every `run --repo`). A sparse pack
 * of 1.5 GiB costs the agent no disk, yet the copy wrote all of it into
 * $TMPDIR (on a tmpfs, the host's memory) each time. Git never writes a
 * sparse file: one is refused before it is copied (lib/git). */
#include <criterion/criterion.h>
#include <fcntl.h>
#include <ftw.h>
#include <git2.h>
#include <signal.h>
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

#define MiB (1024LL * 1024)

static char tmp[128];

static int rm_entry(const char *p, const struct stat *st, int flag, struct FTW *ftw)
{
        return remove(p);
}

static void commit_readme(const char *dir)
{
        git_repository *repo;
        cr_assert_eq(git_repository_open(&repo, dir), 0);
        git_oid blob, tree_id, id;
        git_tree *tree;
        cr_assert_eq(git_blob_create_from_buffer(&blob, repo, "hello\n", 6), 0);
        git_tree_update upd = {GIT_TREE_UPDATE_UPSERT, blob, GIT_FILEMODE_BLOB, "README"};
        cr_assert_eq(git_tree_create_updated(&tree_id, repo, NULL, 1, &upd), 0);
        cr_assert_eq(git_tree_lookup(&tree, repo, &tree_id), 0);
        git_signature *sig;
        cr_assert_eq(git_signature_new(&sig, "T", "t@example.com", 1700000000, 0), 0);
        cr_assert_eq(
            git_commit_create(&id, repo, "HEAD", sig, sig, NULL, "initial\n", tree, 0, NULL), 0);
        git_signature_free(sig);
        git_tree_free(tree);
        git_repository_free(repo);
}

static void setup(void)
{
        gitops_test_remote("/var/tmp/airlock-test-gcsparse-XXXXXX");
        snprintf(tmp, sizeof(tmp), "%s/tmp", top);
        cr_assert_eq(mkdir(tmp, 0700), 0);
        commit_readme(bare);
}

static void teardown(void)
{
        nftw(top, rm_entry, 16, FTW_DEPTH | FTW_PHYS);
        git_libgit2_shutdown();
}

TestSuite(gitops_copy_sparse, .init = setup, .fini = teardown, .timeout = 60);

static void sparse_file(const char *rel, long long size)
{
        char p[512];
        snprintf(p, sizeof(p), "%s/%s", ws, rel);
        int fd = open(p, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
        cr_assert(fd >= 0, "%s", p);
        cr_assert_eq(write(fd, "PACK", 4), 4);
        cr_assert_eq(ftruncate(fd, size), 0);
        close(fd);
}

/* gitops_count on the workspace in a child that may write at most 64 MiB
 * to any one file; its message in msg. */
static int count_in_child(char *msg, size_t msglen)
{
        int pfd[2];
        cr_assert_eq(pipe(pfd), 0);
        pid_t pid = fork();
        cr_assert(pid >= 0);
        if (pid == 0) {
                close(pfd[0]);
                struct rlimit rl = {.rlim_cur = 64 * MiB, .rlim_max = 64 * MiB};
                setrlimit(RLIMIT_FSIZE, &rl);
                setenv("TMPDIR", tmp, 1);
                struct al_error err = {0};
                size_t n = 0;
                int r =
                    gitops_count(ws, "0000000000000000000000000000000000000000", &n, NULL, &err);
                (void)!write(pfd[1], err.msg, strlen(err.msg));
                _exit(r < 0 ? 1 : 0);
        }
        close(pfd[1]);
        ssize_t k = read(pfd[0], msg, msglen - 1);
        msg[k > 0 ? k : 0] = '\0';
        close(pfd[0]);
        int st;
        cr_assert_eq(waitpid(pid, &st, 0), pid);
        return WIFEXITED(st) ? WEXITSTATUS(st) : 128 + WTERMSIG(st);
}

Test(gitops_copy_sparse, a_sparse_pack_is_refused_before_it_is_copied)
{
        char base[GITOPS_OID_HEX + 1];
        struct al_error err = {0};
        cr_assert_eq(gitops_clone(url, NULL, ws, NULL, base, &err), 0, "%s", err.msg);
        sparse_file(".git/objects/pack/pack-0000000000000000000000000000000000000000.pack",
                    1536 * MiB);
        char msg[1024];
        int r = count_in_child(msg, sizeof(msg));
        cr_expect_neq(r, 128 + SIGXFSZ, "the sparse pack was copied out in full");
        cr_expect_eq(r, 1, "status %d: %s", r, msg);
        cr_expect_not_null(strstr(msg, "sparse"), "%s", msg);
}
