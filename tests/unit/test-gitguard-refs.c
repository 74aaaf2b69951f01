/* SPDX-License-Identifier: Apache-2.0 */
/* What host git reads under refs/ (every name: `git branch`, `git
 * for-each-ref`, `git log --all` open each loose ref): a FIFO there, even
 * one named *.airlock-quarantine, or a symbolic link to /dev/zero, hangs it
 * for good; a quarantine name in the same directory is still a ref. An
 * alternates file the agent adds makes host git read objects from
 * elsewhere. And a name taken by the agent's own *.airlock-quarantine.N
 * files must not stop a move (lib/git). */
#include <criterion/criterion.h>
#include <dirent.h>
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

#include "gitguard-test-util.h"

static void fifo(const char *rel)
{
        char p[512];
        path(p, sizeof(p), rel);
        cr_assert_eq(mkfifo(p, 0644), 0, "%s", p);
}

static void link_to(const char *target, const char *rel)
{
        char p[512];
        path(p, sizeof(p), rel);
        cr_assert_eq(symlink(target, p), 0, "%s", p);
}

static void repo(void)
{
        snprintf(ws, sizeof(ws), "/tmp/airlock-ggrefs-XXXXXX");
        cr_assert_not_null(mkdtemp(ws));
        static const char *const dirs[] = {".git",          ".git/objects",    ".git/objects/info",
                                           ".git/refs",     ".git/refs/heads", ".git/hooks",
                                           ".git/refs/tags"};
        for (size_t i = 0; i < sizeof(dirs) / sizeof(dirs[0]); i++)
                dir(dirs[i]);
        put(".git/HEAD", "ref: refs/heads/main\n");
        put(".git/config", "[core]\n\tbare = false\n");
}

static struct gitguard *begin(void)
{
        return gg_begin_at(ws);
}

/* How many FIFOs, sockets, devices or symbolic links lie under dfd. */
static int specials(int dfd)
{
        DIR *d = fdopendir(dfd);
        cr_assert_not_null(d);
        int n = 0;
        struct dirent *de;
        while ((de = readdir(d))) {
                if (STREQ(de->d_name, ".") || STREQ(de->d_name, ".."))
                        continue;
                struct stat st;
                cr_assert_eq(fstatat(dirfd(d), de->d_name, &st, AT_SYMLINK_NOFOLLOW), 0);
                if (S_ISDIR(st.st_mode)) {
                        int sfd = openat(dirfd(d), de->d_name,
                                         O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
                        cr_assert(sfd >= 0);
                        n += specials(sfd);
                } else if (!S_ISREG(st.st_mode))
                        n++;
        }
        closedir(d);
        return n;
}

static int specials_under(const char *rel)
{
        char p[512];
        path(p, sizeof(p), rel);
        int fd = open(p, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
        cr_assert(fd >= 0, "%s", p);
        return specials(fd);
}

Test(gitguard_refs, nothing_under_refs_that_blocks_host_git)
{
        repo();
        struct gitguard *g = begin();
        /* The run's: FIFOs under names the scan once passed over, and links
         * git follows out of the tree when it reads every ref. */
        fifo(".git/refs/heads/main");
        fifo(".git/refs/heads/x.airlock-quarantine");
        dir(".git/refs/heads/d.airlock-quarantine");
        fifo(".git/refs/heads/d.airlock-quarantine/y");
        link_to("/dev/zero", ".git/refs/tags/z");
        link_to("/dev/zero", ".git/ORIG_HEAD");
        int n = gitguard_finish(g, NULL, "t", NULL, NULL);
        cr_expect_geq(n, 5, "findings: %d", n);
        cr_expect_eq(specials_under(".git/refs"), 0, "a FIFO or link left under refs/");
        cr_expect_not(exists(".git/ORIG_HEAD"), "a link to a device left as ORIG_HEAD");
        /* Moved, not deleted: to the top of the git directory. */
        cr_expect(exists(".git/main.airlock-quarantine"));
        cr_expect(exists(".git/z.airlock-quarantine"));
        fs_remove_tree(AT_FDCWD, ws, 100);
}

Test(gitguard_refs, an_alternates_file_the_run_made_is_moved_aside)
{
        repo();
        put(".git/objects/info/packs", "\n");
        struct gitguard *g = begin();
        put(".git/objects/info/alternates", "/root/private/.git/objects\n");
        int n = gitguard_finish(g, NULL, "t", NULL, NULL);
        cr_expect_eq(n, 1, "findings: %d", n);
        cr_expect_not(exists(".git/objects/info/alternates"));
        cr_expect(exists(".git/objects/info/alternates.airlock-quarantine"));
        fs_remove_tree(AT_FDCWD, ws, 100);
}

Test(gitguard_refs, the_hosts_own_alternates_stay)
{
        repo();
        put(".git/objects/info/alternates", "/srv/mirror/objects\n");
        struct gitguard *g = begin();
        int n = gitguard_finish(g, NULL, "t", NULL, NULL);
        cr_expect_eq(n, 0, "findings: %d", n);
        cr_expect(exists(".git/objects/info/alternates"));
        fs_remove_tree(AT_FDCWD, ws, 100);
}

Test(gitguard_refs, names_taken_beforehand_do_not_stop_a_move)
{
        repo();
        struct gitguard *g = begin();
        put(".git/hooks/pre-commit", "#!/bin/sh\ntouch /tmp/airlock-pwned\n");
        put(".git/hooks/pre-commit.airlock-quarantine", "x\n");
        char rel[128];
        for (int i = 1; i < 120; i++) {
                snprintf(rel, sizeof(rel), ".git/hooks/pre-commit.airlock-quarantine.%d", i);
                put(rel, "x\n");
        }
        gitguard_finish(g, NULL, "t", NULL, NULL);
        cr_expect_not(exists(".git/hooks/pre-commit"), "the hook stayed: every name was taken");
        fs_remove_tree(AT_FDCWD, ws, 100);
}

/* Telling the host's own from the run's reads a file only when the host had
 * one of that name, mode and size: thousands of sparse 16 MiB hooks (no
 * disk, but 16 MiB of zeros each to read and hash) must not keep the host
 * at the end of the run for minutes. */
Test(gitguard_refs, sparse_files_are_not_read_unless_the_host_had_them, .timeout = 20)
{
        repo();
        put(".git/hooks/pre-commit.sample", "#!/bin/sh\n");
        struct gitguard *g = begin();
        char rel[128], p[512];
        for (int i = 0; i < 2000; i++) {
                snprintf(rel, sizeof(rel), ".git/hooks/h%d", i);
                path(p, sizeof(p), rel);
                int fd = open(p, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0755);
                cr_assert(fd >= 0);
                cr_assert_eq(ftruncate(fd, 16 * 1024 * 1024), 0);
                close(fd);
        }
        int n = gitguard_finish(g, NULL, "t", NULL, NULL);
        cr_expect_eq(n, 2000, "findings: %d", n);
        fs_remove_tree(AT_FDCWD, ws, 100);
}
