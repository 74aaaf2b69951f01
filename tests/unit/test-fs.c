/* SPDX-License-Identifier: Apache-2.0 */
#include <criterion/criterion.h>
#include <fcntl.h>
#include <linux/openat2.h>
#include <string.h>
#include <sys/stat.h>

#include "fs.h"
#include "util.h"

static char dir[64];

static void setup(void)
{
        snprintf(dir, sizeof(dir), "/tmp/airlock-test-fs-XXXXXX");
        cr_assert_not_null(mkdtemp(dir));
}

static void teardown(void)
{
        (void)fs_remove_tree(AT_FDCWD, dir, FS_REMOVE_DEPTH_MAX);
}

static void mk(const char *rel, bool is_dir)
{
        _cleanup_free_ char *p = xasprintf("%s/%s", dir, rel);
        if (is_dir)
                cr_assert_eq(mkdir(p, 0755), 0, "%s", p);
        else {
                int fd = open(p, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0644);
                cr_assert_geq(fd, 0, "%s", p);
                close(fd);
        }
}

static bool exists(const char *rel)
{
        _cleanup_free_ char *p = xasprintf("%s/%s", dir, rel);
        struct stat st;
        return lstat(p, &st) == 0;
}

TestSuite(fs, .init = setup, .fini = teardown, .timeout = 30);

Test(fs, remove_tree_removes_links_not_their_targets)
{
        mk("keep", true);
        mk("keep/file", false);
        mk("tree", true);
        mk("tree/a", true);
        mk("tree/a/b", false);
        _cleanup_free_ char *target = xasprintf("%s/keep", dir);
        _cleanup_free_ char *link = xasprintf("%s/tree/a/link", dir);
        cr_assert_eq(symlink(target, link), 0);
        _cleanup_close_ int dfd = open(dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
        cr_assert_eq(fs_remove_tree(dfd, "tree", FS_REMOVE_DEPTH_MAX), 0);
        cr_assert(!exists("tree"));
        cr_assert(exists("keep/file"));
        /* Gone already: nothing to do. */
        cr_assert_eq(fs_remove_tree(dfd, "tree", FS_REMOVE_DEPTH_MAX), 0);
        /* A plain file, by path. */
        _cleanup_free_ char *file = xasprintf("%s/keep/file", dir);
        cr_assert_eq(fs_remove_tree(AT_FDCWD, file, FS_REMOVE_DEPTH_MAX), 0);
        cr_assert(!exists("keep/file"));
}

Test(fs, remove_tree_is_bounded)
{
        mk("d", true);
        mk("d/1", true);
        mk("d/1/2", true);
        mk("d/1/2/3", true);
        mk("d/x", false);
        _cleanup_close_ int dfd = open(dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
        cr_assert_eq(fs_remove_tree(dfd, "d", 2), -ELOOP);
        /* What lies within the bound is still removed. */
        cr_assert(!exists("d/x"));
        cr_assert(exists("d/1/2"));
        cr_assert_eq(fs_remove_tree(dfd, "d", 4), 0);
        cr_assert(!exists("d"));
}

Test(fs, openat2_returns_negative_errno)
{
        mk("in", true);
        mk("in/f", false);
        _cleanup_free_ char *out = xasprintf("%s/in/out", dir);
        cr_assert_eq(symlink("..", out), 0);
        _cleanup_close_ int dfd = open(dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
        _cleanup_close_ int in =
            fs_openat2(dfd, "in", O_RDONLY | O_DIRECTORY | O_CLOEXEC, 0, RESOLVE_BENEATH);
        cr_assert_geq(in, 0);
        _cleanup_close_ int f = fs_openat2(in, "f", O_RDONLY | O_CLOEXEC, 0, RESOLVE_BENEATH);
        cr_assert_geq(f, 0);
        cr_assert_eq(fs_openat2(in, "../in/f", O_RDONLY | O_CLOEXEC, 0, RESOLVE_BENEATH), -EXDEV);
        cr_assert_eq(fs_openat2(in, "out/in", O_RDONLY | O_CLOEXEC, 0,
                                RESOLVE_BENEATH | RESOLVE_NO_SYMLINKS),
                     -ELOOP);
        cr_assert_eq(fs_openat2(in, "nope", O_RDONLY | O_CLOEXEC, 0, RESOLVE_BENEATH), -ENOENT);
        _cleanup_close_ int c =
            fs_openat2(in, "new", O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0600, RESOLVE_BENEATH);
        cr_assert_geq(c, 0);
        struct stat st;
        cr_assert_eq(fstat(c, &st), 0);
        cr_assert_eq(st.st_mode & 0777, 0600 & ~(mode_t)0);
}
