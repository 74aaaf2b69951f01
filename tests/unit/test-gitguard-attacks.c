/* SPDX-License-Identifier: Apache-2.0 */
/* What an agent can leave for the host's git that gitguard (lib/git) must
 * still find: config keys that run programs through commands other than
 * status, and repositories git discovers that the walk did not see (a bare
 * repository whose objects and refs are not plain directories, one deeper
 * than the walk goes). */
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

static int check(const char *text)
{
        char reason[256];
        return gitguard_config_check(text, strlen(text), reason, sizeof(reason));
}

Test(gitguard_attacks, more_keys_that_run_programs)
{
        /* git archive runs tar.<format>.command through the shell. */
        cr_expect_eq(check("[tar \"tar.xz\"]\n\tcommand = touch /tmp/x\n"), 1);
        /* git commit --trailer / interpret-trailers run a trailer's command. */
        cr_expect_eq(check("[trailer \"sign\"]\n\tcommand = touch /tmp/x\n"), 1);
        cr_expect_eq(check("[trailer \"sign\"]\n\tcmd = touch /tmp/x\n"), 1);
        /* git imap-send runs imap.tunnel through the shell. */
        cr_expect_eq(check("[imap]\n\ttunnel = touch /tmp/x\n"), 1);
        /* git gui's tools, config-based hooks, git instaweb's server. */
        cr_expect_eq(check("[guitool \"x\"]\n\tcmd = touch /tmp/x\n"), 1);
        cr_expect_eq(check("[hook \"x\"]\n\tcommand = touch /tmp/x\n\tevent = pre-commit\n"), 1);
        cr_expect_eq(check("[instaweb]\n\thttpd = /tmp/x\n"), 1);
        /* send-email takes an absolute smtpServer for a sendmail program. */
        cr_expect_eq(check("[sendemail]\n\tsmtpServer = /tmp/x\n"), 1);
        cr_expect_eq(check("[sendemail]\n\tsmtpServer = smtp.example.com\n"), 0);
        /* "user" lets ext:: URLs run programs on any fetch the user types. */
        cr_expect_eq(check("[protocol \"ext\"]\n\tallow = user\n"), 1);
        cr_expect_eq(check("[protocol]\n\tallow = user\n"), 1);
        cr_expect_eq(check("[protocol \"https\"]\n\tallow = always\n"), 1);
        /* git-lfs runs custom transfer agents and extensions from config. */
        cr_expect_eq(check("[lfs \"customtransfer.x\"]\n\tpath = /tmp/x\n"), 1);
        cr_expect_eq(check("[lfs \"extension.x\"]\n\tclean = /tmp/x %f\n"), 1);
        cr_expect_eq(check("[lfs]\n\turl = https://lfs.example.com\n"), 0);
}

static char *tmpdir(void)
{
        char tmpl[] = "/tmp/airlock-gg-XXXXXX";
        cr_assert_not_null(mkdtemp(tmpl));
        return xstrdup(tmpl);
}

static struct gitguard *begin(const char *ws)
{
        return gg_begin_at(ws);
}

static void put(const char *path, const char *text, mode_t mode)
{
        int fd = open(path, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, mode);
        cr_assert(fd >= 0, "%s", path);
        cr_assert_eq(write(fd, text, strlen(text)), (ssize_t)strlen(text));
        close(fd);
}

static bool exists(const char *path)
{
        struct stat st;
        return lstat(path, &st) == 0;
}

#define EVIL "[core]\n\tbare = true\n\tfsmonitor = touch /tmp/airlock-gg-pwned\n"

/* git's discovery takes a directory for a bare repository when HEAD is
 * valid and access(objects, X_OK) and access(refs, X_OK) pass: symbolic
 * links to directories, or executable files, do. */
Test(gitguard_attacks, bare_repository_with_linked_objects)
{
        _cleanup_free_ char *ws = tmpdir();
        struct gitguard *g = begin(ws);
        char p[512];
        snprintf(p, sizeof(p), "%s/b", ws);
        cr_assert_eq(mkdir(p, 0755), 0);
        snprintf(p, sizeof(p), "%s/b/real", ws);
        cr_assert_eq(mkdir(p, 0755), 0);
        snprintf(p, sizeof(p), "%s/b/objects", ws);
        cr_assert_eq(symlink("real", p), 0);
        snprintf(p, sizeof(p), "%s/b/refs", ws);
        cr_assert_eq(symlink("real", p), 0);
        snprintf(p, sizeof(p), "%s/b/HEAD", ws);
        put(p, "ref: refs/heads/main\n", 0644);
        snprintf(p, sizeof(p), "%s/b/config", ws);
        put(p, EVIL, 0644);
        /* And one whose objects and refs are executable files. */
        snprintf(p, sizeof(p), "%s/c", ws);
        cr_assert_eq(mkdir(p, 0755), 0);
        snprintf(p, sizeof(p), "%s/c/objects", ws);
        put(p, "", 0755);
        snprintf(p, sizeof(p), "%s/c/refs", ws);
        put(p, "", 0755);
        snprintf(p, sizeof(p), "%s/c/HEAD", ws);
        put(p, "ref: refs/heads/main\n", 0644);
        snprintf(p, sizeof(p), "%s/c/config", ws);
        put(p, EVIL, 0644);

        cr_expect_geq(gitguard_finish(g, NULL, "t", NULL, NULL), 2);
        snprintf(p, sizeof(p), "%s/b/config", ws);
        cr_expect_not(exists(p), "the linked bare repository's config was left for git");
        snprintf(p, sizeof(p), "%s/c/config", ws);
        cr_expect_not(exists(p), "the bare repository of files' config was left for git");
        fs_remove_tree(AT_FDCWD, ws, 100);
}

struct lines {
        char text[8192];
};

static void collect(const char *line, void *ud)
{
        struct lines *l = ud;
        size_t n = strlen(l->text);
        snprintf(l->text + n, sizeof(l->text) - n, "%s\n", line);
}

/* A repository deeper than the walk goes is not silently passed over. */
Test(gitguard_attacks, repository_past_the_depth_limit)
{
        _cleanup_free_ char *ws = tmpdir();
        struct gitguard *g = begin(ws);
        char p[PATH_MAX];
        size_t n = (size_t)snprintf(p, sizeof(p), "%s", ws);
        for (int i = 0; i < GITGUARD_DEPTH_MAX + 6; i++) {
                n += (size_t)snprintf(p + n, sizeof(p) - n, "/d");
                cr_assert_eq(mkdir(p, 0755), 0);
        }
        snprintf(p + n, sizeof(p) - n, "/.git");
        cr_assert_eq(mkdir(p, 0755), 0);
        snprintf(p + n, sizeof(p) - n, "/.git/config");
        put(p, EVIL, 0644);
        struct lines l = {{0}};
        int found = gitguard_finish(g, NULL, "t", collect, &l);
        cr_expect(found >= 1 && (!exists(p) || strstr(l.text, "not checked")),
                  "a repository %d levels down was neither moved nor reported: %s",
                  GITGUARD_DEPTH_MAX + 6, l.text);
        fs_remove_tree(AT_FDCWD, ws, 200);
}

/* A FIFO where git reads (the index, HEAD, a ref) hangs the host's next
 * `git status`, and every shell prompt that runs it, for good. */
Test(gitguard_attacks, fifos_in_the_hosts_repository)
{
        _cleanup_free_ char *ws = tmpdir();
        char p[512];
        static const char *const dirs[] = {".git", ".git/objects", ".git/refs", ".git/refs/heads"};
        for (size_t i = 0; i < sizeof(dirs) / sizeof(dirs[0]); i++) {
                snprintf(p, sizeof(p), "%s/%s", ws, dirs[i]);
                cr_assert_eq(mkdir(p, 0755), 0);
        }
        snprintf(p, sizeof(p), "%s/.git/HEAD", ws);
        put(p, "ref: refs/heads/main\n", 0644);
        snprintf(p, sizeof(p), "%s/.git/config", ws);
        put(p, "[core]\n\tbare = false\n", 0644);
        snprintf(p, sizeof(p), "%s/.git/index", ws);
        put(p, "DIRC", 0644);
        struct gitguard *g = begin(ws);
        /* The run: the index and a ref become FIFOs. */
        cr_assert_eq(unlink(p), 0);
        cr_assert_eq(mkfifo(p, 0644), 0);
        char ref[512];
        snprintf(ref, sizeof(ref), "%s/.git/refs/heads/main", ws);
        cr_assert_eq(mkfifo(ref, 0644), 0);
        cr_expect_geq(gitguard_finish(g, NULL, "t", NULL, NULL), 2);
        struct stat st;
        cr_expect(lstat(p, &st) < 0 || !S_ISFIFO(st.st_mode), "a FIFO index was left for git");
        cr_expect(lstat(ref, &st) < 0 || !S_ISFIFO(st.st_mode), "a FIFO ref was left for git");
        fs_remove_tree(AT_FDCWD, ws, 100);
}

/* On btrfs the owner of a directory may make a subvolume in it, without
 * any privilege: it has a device number of its own but is no mount. The
 * scan, which does not cross into other mounts, must still walk it. */
Test(gitguard_attacks, repository_in_a_btrfs_subvolume, .timeout = 60)
{
        if (geteuid() != 0 || access("/usr/sbin/mkfs.btrfs", X_OK) != 0 ||
            access("/usr/bin/btrfs", X_OK) != 0)
                cr_skip_test("needs root and btrfs-progs (make deps)");
        _cleanup_free_ char *top = tmpdir();
        char img[128], ws[128], cmd[1024], p[512];
        snprintf(img, sizeof(img), "%s/img", top);
        snprintf(ws, sizeof(ws), "%s/ws", top);
        cr_assert_eq(mkdir(ws, 0755), 0);
        snprintf(cmd, sizeof(cmd),
                 "truncate -s 160M %s && mkfs.btrfs -q %s >/dev/null 2>&1 && "
                 "mount -o loop %s %s",
                 img, img, img, ws);
        if (system(cmd) != 0) {
                fs_remove_tree(AT_FDCWD, top, 10);
                cr_skip_test("cannot mount a btrfs image here");
        }
        struct gitguard *g = begin(ws);
        snprintf(cmd, sizeof(cmd), "btrfs -q subvolume create %s/sub >/dev/null", ws);
        cr_assert_eq(system(cmd), 0);
        snprintf(p, sizeof(p), "%s/sub/.git", ws);
        cr_assert_eq(mkdir(p, 0755), 0);
        snprintf(p, sizeof(p), "%s/sub/.git/config", ws);
        put(p, EVIL, 0644);
        int found = gitguard_finish(g, NULL, "t", NULL, NULL);
        bool left = exists(p);
        snprintf(cmd, sizeof(cmd), "umount %s", ws);
        cr_assert_eq(system(cmd), 0);
        fs_remove_tree(AT_FDCWD, top, 10);
        cr_expect(found >= 1 && !left, "a repository in a subvolume was passed over");
}
