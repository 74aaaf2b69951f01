/* SPDX-License-Identifier: Apache-2.0 */
/* Before the sandbox's plan walks the workspace (trusted_open), the
 * spawner makes the workspace's .git/hooks and .git/config so that they
 * can be covered read-only. As root that write must be held to the same
 * rule as the mount: a workspace on a path another user could swap (their
 * directory) is refused, and nothing is made in what it names (for a
 * link to a third user's repository, root-owned files in it). */
#include <criterion/criterion.h>
#include <fcntl.h>
#include <pwd.h>
#include <stdio.h>
#include <sys/stat.h>
#include <unistd.h>

#include "fs.h"
#include "mounts.h"
#include "policy.h"
#include "util.h"

Test(prepare_trusted, a_workspace_another_user_could_swap_gets_nothing_made, .timeout = 20)
{
        if (geteuid() != 0)
                cr_skip_test("needs root (the rule is root's)");
        struct passwd *other = getpwnam("nobody");
        if (!other)
                cr_skip_test("no user nobody");
        char top[64], theirs[96], git[160], cfg[192];
        snprintf(top, sizeof(top), "/tmp/airlock-prep-XXXXXX");
        cr_assert_not_null(mkdtemp(top));
        cr_assert_eq(chmod(top, 0755), 0);
        snprintf(theirs, sizeof(theirs), "%s/theirs", top);
        cr_assert_eq(mkdir(theirs, 0755), 0);
        snprintf(git, sizeof(git), "%s/ws", theirs);
        cr_assert_eq(mkdir(git, 0755), 0);
        snprintf(git, sizeof(git), "%s/ws/.git", theirs);
        cr_assert_eq(mkdir(git, 0755), 0);
        cr_assert_eq(chown(theirs, other->pw_uid, other->pw_gid), 0);

        struct policy *p = policy_new();
        p->workspace = xasprintf("%s/ws", theirs);
        p->protect_git = true;
        struct al_error e = {0};
        setenv("SUDO_UID", "0", 1);
        int r = mounts_prepare_workspace(p, &e);
        unsetenv("SUDO_UID");
        snprintf(cfg, sizeof(cfg), "%s/config", git);
        bool made = access(cfg, F_OK) == 0;
        policy_free(p);
        fs_remove_tree(AT_FDCWD, top, FS_REMOVE_DEPTH_MAX);
        cr_assert_not(made, "root made .git/config in a workspace another user could swap");
        cr_assert_eq(r, -EPERM, "%s", e.msg);
}
