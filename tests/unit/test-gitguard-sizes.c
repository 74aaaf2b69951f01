/* SPDX-License-Identifier: Apache-2.0 */
/* Files host git reads whole at the commands a shell prompt runs: HEAD
 * and each loose ref (`git status`, `git branch`), info/exclude, and
 * .gitignore, .mailmap and the like in the working tree. A sparse one
 * costs the agent no disk, yet every `git status` reads all of its size
 * into memory: a 1 GiB sparse HEAD took 16 s and 1 GiB of memory per
 * `git status` here, a larger one makes git die for want of memory. What
 * the run made so is moved aside; the host's own stays (lib/git). */
#include <criterion/criterion.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "fs.h"
#include "gitguard.h"
#include "policy.h"
#include "util.h"

#include "gitguard-test-begin.h"

#define GiB (1024LL * 1024 * 1024)

static char ws[64];

static void path(char *p, size_t n, const char *rel)
{
        snprintf(p, n, "%s/%s", ws, rel);
}

/* rel holding text, then extended to size (sparse past the text). */
static void put_sized(const char *rel, const char *text, long long size)
{
        char p[512];
        path(p, sizeof(p), rel);
        int fd = open(p, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
        cr_assert(fd >= 0, "%s", p);
        cr_assert_eq(write(fd, text, strlen(text)), (ssize_t)strlen(text));
        if (size > 0)
                cr_assert_eq(ftruncate(fd, size), 0, "%s", p);
        close(fd);
}

static void put(const char *rel, const char *text)
{
        put_sized(rel, text, 0);
}

/* rel with size bytes written out (no hole). */
static void put_dense(const char *rel, size_t size)
{
        char p[512];
        path(p, sizeof(p), rel);
        int fd = open(p, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
        cr_assert(fd >= 0, "%s", p);
        char *buf = xcalloc(size, 1);
        memset(buf, '0', size);
        cr_assert_eq(write(fd, buf, size), (ssize_t)size);
        free(buf);
        close(fd);
}

static void dir(const char *rel)
{
        char p[512];
        path(p, sizeof(p), rel);
        cr_assert_eq(mkdir(p, 0755), 0, "%s", p);
}

static bool exists(const char *rel)
{
        char p[512];
        struct stat st;
        path(p, sizeof(p), rel);
        return lstat(p, &st) == 0;
}

static long long size_of(const char *rel)
{
        char p[512];
        struct stat st;
        path(p, sizeof(p), rel);
        return lstat(p, &st) == 0 ? (long long)st.st_size : -1;
}

static void repo(void)
{
        snprintf(ws, sizeof(ws), "/tmp/airlock-ggsize-XXXXXX");
        cr_assert_not_null(mkdtemp(ws));
        static const char *const dirs[] = {".git",           ".git/objects",    ".git/objects/pack",
                                           ".git/refs",      ".git/refs/heads", ".git/hooks",
                                           ".git/refs/tags", ".git/info",       "src"};
        for (size_t i = 0; i < sizeof(dirs) / sizeof(dirs[0]); i++)
                dir(dirs[i]);
        put(".git/HEAD", "ref: refs/heads/main\n");
        put(".git/refs/heads/main", "3f9c2a1b0d4e5f603f9c2a1b0d4e5f603f9c2a1b\n");
        put(".git/config", "[core]\n\tbare = false\n");
        put(".git/info/exclude", "*.o\n");
        put(".gitignore", "build/\n");
}

static struct gitguard *begin(void)
{
        return gg_begin_at(ws);
}

Test(gitguard_sizes, a_sparse_head_or_ref_the_run_made_is_moved_aside, .timeout = 20)
{
        repo();
        struct gitguard *g = begin();
        /* Still a valid HEAD to git (it reads the first line to find the
         * repository), then 4 GiB of nothing git reads to the end. */
        put_sized(".git/HEAD", "ref: refs/heads/main\n", 4 * GiB);
        put_sized(".git/refs/heads/big", "", 4 * GiB);
        put_sized(".git/refs/tags/v1", "3f9c2a1b0d4e5f603f9c2a1b0d4e5f603f9c2a1b\n", 2 * GiB);
        put_sized(".git/ORIG_HEAD", "", 2 * GiB);
        put_sized(".git/info/exclude", "*.o\n", 4 * GiB);
        int n = gitguard_finish(g, NULL, "t", NULL, NULL);
        cr_expect_eq(n, 5, "findings: %d", n);
        cr_expect_not(exists(".git/HEAD"), "a 4 GiB sparse HEAD left for git to read");
        cr_expect(exists(".git/HEAD.airlock-quarantine"));
        cr_expect_not(exists(".git/refs/heads/big"), "a 4 GiB sparse ref left under refs/");
        cr_expect_not(exists(".git/refs/tags/v1"), "a 2 GiB sparse tag left under refs/");
        /* Moved out of refs/ (git reads every name there): to the top. */
        cr_expect(exists(".git/big.airlock-quarantine"));
        cr_expect_not(exists(".git/ORIG_HEAD"));
        cr_expect_not(exists(".git/info/exclude"), "a 4 GiB sparse info/exclude left");
        /* What was not grown stays. */
        cr_expect_eq(size_of(".git/refs/heads/main"), 41);
        fs_remove_tree(AT_FDCWD, ws, 100);
}

Test(gitguard_sizes, a_loose_ref_larger_than_any_ref_is_moved_aside)
{
        repo();
        struct gitguard *g = begin();
        /* Written out, no hole: 256 KiB git would read at each `git branch`
         * (the run's disk limit allows many more). */
        put_dense(".git/refs/heads/wide", 256 * 1024);
        /* FETCH_HEAD holds a line per ref fetched: large, and legitimate. */
        put_dense(".git/FETCH_HEAD", 256 * 1024);
        int n = gitguard_finish(g, NULL, "t", NULL, NULL);
        cr_expect_eq(n, 1, "findings: %d", n);
        cr_expect_not(exists(".git/refs/heads/wide"));
        cr_expect(exists(".git/FETCH_HEAD"));
        fs_remove_tree(AT_FDCWD, ws, 100);
}

Test(gitguard_sizes, sparse_ignore_files_in_the_tree_are_moved_aside, .timeout = 20)
{
        repo();
        dir("src/deep");
        struct gitguard *g = begin();
        put_sized(".gitignore", "build/\n", 4 * GiB);
        put_sized("src/deep/.gitignore", "", 4 * GiB);
        put_sized(".mailmap", "", 2 * GiB);
        put_sized("src/.GITATTRIBUTES", "", 2 * GiB);
        /* An ordinary file of the same size is not git's to read. */
        put_sized("src/data.img", "", 4 * GiB);
        int n = gitguard_finish(g, NULL, "t", NULL, NULL);
        cr_expect_eq(n, 4, "findings: %d", n);
        cr_expect_not(exists(".gitignore"));
        cr_expect(exists(".gitignore.airlock-quarantine"));
        cr_expect_not(exists("src/deep/.gitignore"));
        cr_expect(exists("src/deep/.gitignore.airlock-quarantine"));
        cr_expect_not(exists(".mailmap"));
        cr_expect_not(exists("src/.GITATTRIBUTES"));
        cr_expect(exists("src/data.img"));
        fs_remove_tree(AT_FDCWD, ws, 100);
}

Test(gitguard_sizes, the_hosts_own_large_files_stay, .timeout = 20)
{
        repo();
        /* There before the run and untouched by it: the host's. */
        put_sized(".git/info/exclude", "*.o\n", 2 * GiB);
        put_sized("src/.gitignore", "", 2 * GiB);
        put_dense(".git/refs/heads/wide", 256 * 1024);
        /* Objects are read by their headers, never whole. */
        put_sized(".git/objects/pack/pack-1.pack", "PACK", 2 * GiB);
        /* Past the file system's clock tick: what was written in the tick
         * the run starts in counts as the run's. */
        usleep(30 * 1000);
        struct gitguard *g = begin();
        put_sized(".git/objects/pack/pack-2.pack", "PACK", 2 * GiB);
        int n = gitguard_finish(g, NULL, "t", NULL, NULL);
        cr_expect_eq(n, 0, "findings: %d", n);
        cr_expect(exists(".git/info/exclude"));
        cr_expect(exists("src/.gitignore"));
        cr_expect(exists(".git/refs/heads/wide"));
        cr_expect(exists(".git/objects/pack/pack-1.pack"));
        cr_expect(exists(".git/objects/pack/pack-2.pack"));
        fs_remove_tree(AT_FDCWD, ws, 100);
}
