/* SPDX-License-Identifier: Apache-2.0 */
/* Several writers appending to one audit log at once (the CLI, supervisors
 * and the daemon share it): the chain verifies, no record is lost or written
 * twice, across rotations done by any of them, and a log renamed away by
 * someone else is left for the new file at its path. */
#include <criterion/criterion.h>
#include <fcntl.h>
#include <inttypes.h>
#include <ftw.h>
#include <signal.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include "audit.h"
#include "util.h"
#include "audit-fixture.h"

#define WRITERS 4
#define PER     2000

static void setup(void)
{
        audit_fixture_open("auditconc");
}

static void teardown(void)
{
        audit_fixture_close();
}

TestSuite(concurrent, .init = setup, .fini = teardown);

static int append_one(struct audit *a, unsigned w, unsigned i)
{
        struct al_error err = {0};
        json_t *f = json_pack("{s:s, s:i, s:i}", "host", "example.com", "w", w, "n", i);
        int r = audit_append(a, "0123456789abcdef", "net.decision", f, &err);
        json_decref(f);
        return r;
}

/* Each child opens its own handle (as a separate process would) and appends. */
static void run_writers(const struct audit_options *opt)
{
        pid_t pids[WRITERS];
        for (unsigned w = 0; w < WRITERS; w++) {
                pids[w] = fork();
                cr_assert_geq(pids[w], 0);
                if (pids[w] == 0) {
                        struct al_error err = {0};
                        struct audit *a = NULL;
                        if (audit_open(logpath, opt, &a, &err) < 0)
                                _exit(10);
                        for (unsigned i = 0; i < PER; i++)
                                if (append_one(a, w, i) < 0)
                                        _exit(11);
                        audit_close(a);
                        _exit(0);
                }
        }
        for (unsigned w = 0; w < WRITERS; w++) {
                int st;
                cr_assert_eq(waitpid(pids[w], &st, 0), pids[w]);
                cr_assert(WIFEXITED(st) && WEXITSTATUS(st) == 0, "writer %u: status %d", w, st);
        }
}

struct seen {
        unsigned char hits[WRITERS][PER];
        uint64_t lines;
};

static int count_line(const char *line, size_t len, uint64_t lineno, bool complete, void *u)
{
        struct seen *s = u;
        json_error_t jerr;
        json_t *o = json_loadb(line, len, 0, &jerr);
        cr_assert_not_null(o, "line %" PRIu64 ": %s", lineno, jerr.text);
        json_int_t w = json_integer_value(json_object_get(o, "w"));
        json_int_t n = json_integer_value(json_object_get(o, "n"));
        if (json_object_get(o, "w")) {
                cr_assert(w >= 0 && w < WRITERS && n >= 0 && n < PER);
                s->hits[w][n]++;
        }
        s->lines++;
        json_decref(o);
        return 0;
}

static void check_all(size_t min_files)
{
        char **paths = NULL;
        size_t n = 0;
        unsigned long missing = 1;
        cr_assert_eq(audit_rotated_files(logpath, &paths, &n, &missing), 0);
        cr_assert_eq(missing, 0);
        cr_assert_geq(n, min_files);

        struct audit_verify_options opt = {0};
        struct audit_verify_result res;
        struct al_error err = {0};
        cr_assert_eq(audit_verify_files((const char *const *)paths, n, &opt, &res, &err), 0, "%s",
                     err.msg);
        cr_assert(res.ok, "chain broken at file %zu line %" PRIu64 ": %s", res.bad_file,
                  res.bad_line, res.reason);
        cr_assert_eq(res.first_seq, 1);
        cr_assert_eq(res.last_seq, (uint64_t)WRITERS * PER);

        static struct seen s;
        memset(&s, 0, sizeof(s));
        for (size_t i = 0; i < n; i++)
                cr_assert_eq(audit_foreach_line(paths[i], count_line, &s, &err), 0, "%s", err.msg);
        cr_assert_eq(s.lines, (uint64_t)WRITERS * PER);
        for (unsigned w = 0; w < WRITERS; w++)
                for (unsigned i = 0; i < PER; i++)
                        cr_assert_eq(s.hits[w][i], 1, "writer %u record %u seen %u times", w, i,
                                     s.hits[w][i]);
        strv_free(paths);
}

Test(concurrent, four_writers_one_chain_nothing_lost, .timeout = 60)
{
        struct audit_options opt = {.sync = AUDIT_SYNC_BATCH, .rotate_size = AUDIT_ROTATE_NEVER};
        run_writers(&opt);
        check_all(1);
}

Test(concurrent, four_writers_across_rotations, .timeout = 60)
{
        struct audit_options opt = {
            .sync = AUDIT_SYNC_BATCH, .rotate_size = 128 * 1024, .rotate_keep = AUDIT_KEEP_ALL};
        run_writers(&opt);
        check_all(4);
}

static json_t *last_line(const char *path)
{
        char *text = NULL;
        size_t len = 0;
        cr_assert_eq(read_file_at(AT_FDCWD, path, 1 << 24, &text, &len), 0);
        cr_assert_gt(len, 1);
        text[len - 1] = '\0';
        char *nl = strrchr(text, '\n');
        json_t *o = json_loads(nl ? nl + 1 : text, 0, NULL);
        free(text);
        cr_assert_not_null(o);
        return o;
}

/* A handle whose file another writer rotated away writes its next record
 * into the new file, never the rotated one. */
Test(concurrent, a_rotation_by_another_writer_is_followed, .timeout = 60)
{
        struct audit_options opt = {
            .sync = AUDIT_SYNC_BATCH, .rotate_size = 8192, .rotate_keep = AUDIT_KEEP_ALL};
        struct al_error err = {0};
        struct audit *a = NULL, *b = NULL;
        cr_assert_eq(audit_open(logpath, &opt, &a, &err), 0, "%s", err.msg);
        cr_assert_eq(audit_open(logpath, &opt, &b, &err), 0, "%s", err.msg);
        cr_assert_eq(append_one(a, 0, 0), 0);
        for (unsigned i = 0; i < 100; i++)
                cr_assert_eq(append_one(b, 1, i), 0);
        char one[160];
        snprintf(one, sizeof(one), "%s.1", logpath);
        cr_assert_eq(access(one, F_OK), 0, "b rotated the log");
        struct stat before;
        cr_assert_eq(stat(one, &before), 0);
        cr_assert_eq(append_one(a, 0, 1), 0);
        struct stat after;
        cr_assert_eq(stat(one, &after), 0);
        cr_assert_eq(after.st_size, before.st_size, "a wrote into the rotated file");
        json_t *o = last_line(logpath);
        cr_assert_eq(json_integer_value(json_object_get(o, "w")), 0);
        cr_assert_eq(json_integer_value(json_object_get(o, "seq")), 102);
        json_decref(o);
        audit_close(a);
        audit_close(b);
}

/* The same when something else renamed the log away (an operator, a
 * log rotation tool): the next record goes to the file at the path. */
Test(concurrent, a_log_renamed_away_by_hand_is_followed, .timeout = 60)
{
        struct audit_options opt = {.sync = AUDIT_SYNC_BATCH, .rotate_size = AUDIT_ROTATE_NEVER};
        struct al_error err = {0};
        struct audit *a = NULL;
        cr_assert_eq(audit_open(logpath, &opt, &a, &err), 0, "%s", err.msg);
        cr_assert_eq(append_one(a, 0, 0), 0);
        char one[160];
        snprintf(one, sizeof(one), "%s.1", logpath);
        cr_assert_eq(rename(logpath, one), 0);
        cr_assert_eq(append_one(a, 0, 1), 0);
        json_t *o = last_line(logpath);
        cr_assert_eq(json_integer_value(json_object_get(o, "n")), 1);
        cr_assert_eq(json_integer_value(json_object_get(o, "seq")), 2);
        json_decref(o);
        audit_close(a);
}
