/* SPDX-License-Identifier: Apache-2.0 */
#include <criterion/criterion.h>
#include <string.h>

#include "gitguard.h"

static int check(const char *text, char *reason)
{
        return gitguard_config_check(text, strlen(text), reason, 256);
}

Test(gitguard, keys_that_run_programs)
{
        static const struct {
                const char *sec, *sub, *name, *value;
        } risky[] = {
            {"core", NULL, "fsmonitor", "/tmp/x"},
            {"core", NULL, "fsmonitor", "true"},
            {"CORE", NULL, "FSMonitor", "x"},
            {"core", NULL, "hooksPath", "/tmp"},
            {"core", NULL, "sshCommand", "ssh -i k"},
            {"core", NULL, "pager", "less"},
            {"core", NULL, "editor", "vi"},
            {"core", NULL, "askPass", "x"},
            {"core", NULL, "gitProxy", "x"},
            {"core", NULL, "worktree", "/"},
            {"core", NULL, "alternateRefsCommand", "x"},
            {"credential", NULL, "helper", "store"},
            {"credential", "https://x", "helper", "x"},
            {"filter", "lfs", "smudge", "x"},
            {"filter", "a", "clean", "x"},
            {"filter", "a", "process", "x"},
            {"diff", "a", "textconv", "x"},
            {"diff", "a", "command", "x"},
            {"diff", NULL, "external", "x"},
            {"merge", "a", "driver", "x"},
            {"include", NULL, "path", "x"},
            {"includeIf", "gitdir:/x", "path", "x"},
            {"uploadpack", NULL, "packObjectsHook", "x"},
            {"remote", "origin", "uploadpack", "x"},
            {"remote", "origin", "receivepack", "x"},
            {"remote", "origin", "proxy", "x"},
            {"alias", NULL, "st", "!touch /tmp/x"},
            {"alias", NULL, "st", "  !x"},
            {"submodule", "m", "update", "!x"},
            {"sequence", NULL, "editor", "x"},
            {"gpg", NULL, "program", "x"},
            {"gpg", "ssh", "program", "x"},
            {"gpg", "ssh", "defaultKeyCommand", "x"},
            {"pager", NULL, "log", "x"},
            {"interactive", NULL, "diffFilter", "x"},
            {"difftool", "a", "cmd", "x"},
            {"mergetool", "a", "cmd", "x"},
            {"sendemail", NULL, "sendmailCmd", "x"},
            {"protocol", "ext", "allow", "always"},
            {"init", NULL, "templateDir", "x"},
        };
        for (size_t i = 0; i < sizeof(risky) / sizeof(risky[0]); i++)
                cr_expect_not_null(
                    gitguard_key_reason(risky[i].sec, risky[i].sub, risky[i].name, risky[i].value),
                    "%s.%s.%s", risky[i].sec, risky[i].sub ? risky[i].sub : "", risky[i].name);
}

Test(gitguard, keys_that_do_not)
{
        static const struct {
                const char *sec, *sub, *name, *value;
        } fine[] = {
            {"core", NULL, "repositoryformatversion", "0"},
            {"core", NULL, "bare", "false"},
            {"core", NULL, "filemode", "true"},
            {"core", NULL, "fsmonitor", "false"},
            {"remote", "origin", "url", "https://x"},
            {"remote", "origin", "fetch", "+refs/heads/*:refs/remotes/origin/*"},
            {"branch", "main", "remote", "origin"},
            {"alias", NULL, "st", "status"},
            {"pager", NULL, "log", "false"},
            {"submodule", "m", "update", "checkout"},
            {"user", NULL, "name", "x"},
            {"protocol", "ext", "allow", "never"},
        };
        for (size_t i = 0; i < sizeof(fine) / sizeof(fine[0]); i++)
                cr_expect_null(
                    gitguard_key_reason(fine[i].sec, fine[i].sub, fine[i].name, fine[i].value),
                    "%s.%s", fine[i].sec, fine[i].name);
}

Test(gitguard, config_files)
{
        char reason[256];
        cr_expect_eq(check("[core]\n\trepositoryformatversion = 0\n\tbare = false\n"
                           "[remote \"origin\"]\n\turl = https://x/y.git\n"
                           "\tfetch = +refs/heads/*:refs/remotes/origin/*\n"
                           "[branch \"main\"]\n\tremote = origin\n; comment\n# comment\n",
                           reason),
                     0);
        cr_expect_eq(check("", reason), 0);
        cr_expect_eq(check("[core]\n\tfsmonitor = touch /tmp/x; false\n", reason), 1);
        cr_expect(strstr(reason, "core.fsmonitor"));
        /* A key on the header's line, the old subsection form, continuations. */
        cr_expect_eq(check("[core] fsmonitor = x\n", reason), 1);
        cr_expect_eq(check("[filter.lfs]\n\tsmudge = x\n", reason), 1);
        cr_expect_eq(check("[core]\n\tfsmon\\\nitor = x\n", reason), 1);
        cr_expect_eq(check("[core]\n\tpager = \"less\" # comment\n", reason), 1);
        cr_expect_eq(check("[alias]\n\tst = \"!touch /tmp/x\"\n", reason), 1);
        cr_expect_eq(check("[alias]\n\tst = status ; !x\n", reason), 0);
        cr_expect_eq(check("[includeIf \"gitdir:/x/\"]\n\tpath = /tmp/evil\n", reason), 1);
        cr_expect_eq(check("[CoRe]\n\tHooksPath = /tmp\n", reason), 1);
        cr_expect_eq(check("\xef\xbb\xbf[core]\n\tfsmonitor = x\n", reason), 1);
        /* Fail closed on what this parser does not read as git would. */
        cr_expect_eq(check("fsmonitor = x\n", reason), 1);
        cr_expect_eq(check("[core\n\tfsmonitor = x\n", reason), 1);
        cr_expect_eq(check("[core]\n\tbad key = x\n", reason), 1);
        cr_expect_eq(check("[core]\n\tpager = \"unterminated\n", reason), 1);
        cr_expect_eq(check("[core]\n\tpager = \\q\n", reason), 1);
        cr_expect(strstr(reason, "line 2"));
        static const char nul[] = "[core]\n\tbare = a\0b\n";
        cr_expect_eq(gitguard_config_check(nul, sizeof(nul) - 1, reason, sizeof(reason)), 1);
}
