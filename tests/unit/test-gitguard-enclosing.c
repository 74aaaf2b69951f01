/* SPDX-License-Identifier: Apache-2.0 */
/* A workspace that is a directory of a host repository (a monorepo's
 * package) holds what that repository's config makes host git run or read:
 * a core.hooksPath of `pkg/hooks`, a core.fsmonitor of `pkg/tools/x.sh`, an
 * include of `../pkg/shared.cfg`. The repository's .git lies outside the
 * tree, so the scan never found that config. What the run made or changed
 * there is moved aside; the host's own stays (lib/git). */
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

static char top[64], ws[128];

static void put(const char *rel, const char *text)
{
        char p[512];
        snprintf(p, sizeof(p), "%s/%s", top, rel);
        int fd = open(p, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0755);
        cr_assert(fd >= 0, "%s", p);
        cr_assert_eq(write(fd, text, strlen(text)), (ssize_t)strlen(text));
        close(fd);
}

static void dir(const char *rel)
{
        char p[512];
        snprintf(p, sizeof(p), "%s/%s", top, rel);
        cr_assert_eq(mkdir(p, 0755), 0, "%s", p);
}

static bool exists(const char *rel)
{
        char p[512];
        struct stat st;
        snprintf(p, sizeof(p), "%s/%s", top, rel);
        return lstat(p, &st) == 0;
}

static struct gitguard *begin(void)
{
        return gg_begin_at(ws);
}

#define EVIL "#!/bin/sh\ntouch /tmp/airlock-pwned\n"

Test(gitguard_enclosing, what_the_enclosing_repositorys_config_names_in_the_tree)
{
        snprintf(top, sizeof(top), "/tmp/airlock-ggencl-XXXXXX");
        cr_assert_not_null(mkdtemp(top));
        dir(".git");
        dir(".git/objects");
        dir(".git/refs");
        put(".git/HEAD", "ref: refs/heads/main\n");
        put(".git/config", "[core]\n\thooksPath = pkg/hooks\n\tfsmonitor = pkg/tools/fsmonitor.sh\n"
                           "[include]\n\tpath = ../pkg/shared.cfg\n");
        dir("pkg");
        dir("pkg/hooks");
        dir("pkg/tools");
        put("pkg/hooks/commit-msg", "#!/bin/sh\nexit 0\n");
        put("pkg/tools/fsmonitor.sh", "#!/bin/sh\nexit 1\n");
        put("pkg/shared.cfg", "[user]\n\tname = Team\n");
        snprintf(ws, sizeof(ws), "%s/pkg", top);
        struct gitguard *g = begin();
        put("pkg/hooks/pre-commit", EVIL);
        put("pkg/tools/fsmonitor.sh", EVIL);
        put("pkg/shared.cfg", "[core]\n\tsshCommand = touch /tmp/airlock-pwned\n");
        int n = gitguard_finish(g, NULL, "t", NULL, NULL);
        cr_expect_eq(n, 3, "findings: %d", n);
        cr_expect_not(exists("pkg/hooks/pre-commit"), "a hook the run added stayed");
        cr_expect_not(exists("pkg/tools/fsmonitor.sh"), "the fsmonitor the run rewrote stayed");
        cr_expect_not(exists("pkg/shared.cfg"), "the included config the run rewrote stayed");
        cr_expect(exists("pkg/hooks/commit-msg"), "the host's own hook was moved");
        cr_expect(exists(".git/config"));
        fs_remove_tree(AT_FDCWD, top, 100);
}
