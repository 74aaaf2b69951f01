/* SPDX-License-Identifier: Apache-2.0 */
/* A program the host's own config runs from the working tree: a
 * core.fsmonitor of `tools/fsmonitor.sh`, a filter's `./scripts/clean.sh`
 * (git runs them from the top of the working tree). The config is the
 * host's and stays; the script is an ordinary file the agent writes, and
 * host git ran the agent's version at the next `git status`. What the run
 * made or changed there is moved aside; the host's own stays (lib/git). */
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

#define GG_TEST_PUT_MODE 0755
#include "gitguard-test-util.h"

static void repo(const char *config)
{
        snprintf(ws, sizeof(ws), "/tmp/airlock-ggprog-XXXXXX");
        cr_assert_not_null(mkdtemp(ws));
        dir(".git");
        dir(".git/objects");
        dir(".git/refs");
        dir(".git/hooks");
        put(".git/HEAD", "ref: refs/heads/main\n");
        put(".git/config", config);
        dir("tools");
        dir("scripts");
}

static struct gitguard *begin(void)
{
        return gg_begin_at(ws);
}

#define EVIL "#!/bin/sh\ntouch /tmp/airlock-pwned\n"

Test(gitguard_programs, a_program_of_the_tree_the_run_changed_is_moved_aside)
{
        repo("[core]\n\tfsmonitor = tools/fsmonitor.sh\n[filter \"fmt\"]\n\tclean = "
             "./scripts/clean.sh %f\n\tsmudge = cat\n");
        put("tools/fsmonitor.sh", "#!/bin/sh\nwatchman ...\n");
        struct gitguard *g = begin();
        put("tools/fsmonitor.sh", EVIL);
        put("scripts/clean.sh", EVIL);
        int n = gitguard_finish(g, NULL, "t", NULL, NULL);
        cr_expect_eq(n, 2, "findings: %d", n);
        cr_expect_not(exists("tools/fsmonitor.sh"), "the fsmonitor the agent rewrote stayed");
        cr_expect_not(exists("scripts/clean.sh"), "the clean filter the agent made stayed");
        cr_expect(exists(".git/config"));
        fs_remove_tree(AT_FDCWD, ws, 100);
}

Test(gitguard_programs, the_hosts_own_programs_stay)
{
        repo("[core]\n\tfsmonitor = tools/fsmonitor.sh\n[alias]\n\tfmt = !scripts/fmt.sh\n");
        put("tools/fsmonitor.sh", "#!/bin/sh\nwatchman ...\n");
        put("scripts/fmt.sh", "#!/bin/sh\nclang-format ...\n");
        struct gitguard *g = begin();
        /* A program found on PATH is not the tree's. */
        put("git-lfs", EVIL);
        int n = gitguard_finish(g, NULL, "t", NULL, NULL);
        cr_expect_eq(n, 0, "findings: %d", n);
        cr_expect(exists("tools/fsmonitor.sh"));
        cr_expect(exists("scripts/fmt.sh"));
        fs_remove_tree(AT_FDCWD, ws, 100);
}

Test(gitguard_programs, a_shell_alias_running_a_tree_script)
{
        repo("[alias]\n\tfmt = \"! scripts/fmt.sh --all\"\n");
        struct gitguard *g = begin();
        put("scripts/fmt.sh", EVIL);
        int n = gitguard_finish(g, NULL, "t", NULL, NULL);
        cr_expect_eq(n, 1, "findings: %d", n);
        cr_expect_not(exists("scripts/fmt.sh"));
        fs_remove_tree(AT_FDCWD, ws, 100);
}
