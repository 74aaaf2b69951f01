/* SPDX-License-Identifier: Apache-2.0 */
/* audit_append_many(): several records under one lock, in one write when
 * they fit: consecutive in the chain even with other writers appending, the
 * same checks as audit_append(), rotation between two records of a batch,
 * and no partial line when the write fails. */
#include <criterion/criterion.h>
#include <fcntl.h>
#include <ftw.h>
#include <inttypes.h>
#include <signal.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include "audit.h"
#include "util.h"
#include "audit-fixture.h"

#define SB "0123456789abcdef"

static void setup(void)
{
        audit_fixture_open("auditbatch");
}

static void teardown(void)
{
        audit_fixture_close();
}

TestSuite(batch, .init = setup, .fini = teardown);

static struct audit *open_log(const struct audit_options *opt)
{
        struct al_error err = {0};
        struct audit *a = NULL;
        cr_assert_eq(audit_open(logpath, opt, &a, &err), 0, "audit_open: %s", err.msg);
        return a;
}

/* n records {w, b, i}; fields freed by free_batch(). */
static struct audit_record *make_batch(unsigned w, unsigned b, size_t n)
{
        struct audit_record *r = xcalloc(n, sizeof(*r));
        for (size_t i = 0; i < n; i++) {
                r[i].sandbox = SB;
                r[i].kind = "net.request";
                r[i].fields = json_pack("{s:s, s:i, s:i, s:i}", "host", "api.example.com", "w", w,
                                        "b", b, "i", (int)i);
        }
        return r;
}

static void free_batch(struct audit_record *r, size_t n)
{
        for (size_t i = 0; i < n; i++)
                json_decref(r[i].fields);
        free(r);
}

static struct audit_verify_result verify_all(size_t *ret_files)
{
        char **paths = NULL;
        size_t n = 0;
        unsigned long missing = 1;
        cr_assert_eq(audit_rotated_files(logpath, &paths, &n, &missing), 0);
        cr_assert_eq(missing, 0);
        struct audit_verify_options opt = {0};
        struct audit_verify_result res;
        struct al_error err = {0};
        cr_assert_eq(audit_verify_files((const char *const *)paths, n, &opt, &res, &err), 0, "%s",
                     err.msg);
        strv_free(paths);
        if (ret_files)
                *ret_files = n;
        return res;
}

Test(batch, lines_are_those_of_single_appends, .timeout = 30)
{
        struct audit *a = open_log(NULL);
        struct al_error err = {0};
        struct audit_record *r = make_batch(0, 0, 50);
        cr_assert_eq(audit_append_many(a, r, 50, &err), 0, "%s", err.msg);
        cr_assert_eq(audit_last_seq(a), 50);
        json_t *one = json_pack("{s:i}", "after", 1);
        cr_assert_eq(audit_append(a, SB, "test.after", one, &err), 0, "%s", err.msg);
        json_decref(one);
        cr_assert_eq(audit_append_many(a, r, 0, &err), 0, "an empty batch writes nothing");
        free_batch(r, 50);
        audit_close(a);
        struct audit_verify_result res = verify_all(NULL);
        cr_assert(res.ok, "%s", res.reason);
        cr_assert_eq(res.first_seq, 1);
        cr_assert_eq(res.last_seq, 51);
        cr_assert_eq(res.lines, 51);
}

Test(batch, a_bad_record_writes_nothing, .timeout = 30)
{
        struct audit *a = open_log(NULL);
        struct al_error err = {0};
        struct audit_record *r = make_batch(0, 0, 5);
        json_object_set_new(r[3].fields, "prev", json_string("forged"));
        cr_assert_lt(audit_append_many(a, r, 5, &err), 0);
        cr_assert_not_null(strstr(err.msg, "reserved"), "%s", err.msg);
        r[3].kind = "";
        cr_assert_lt(audit_append_many(a, r, 5, &err), 0);
        free_batch(r, 5);
        cr_assert_eq(audit_last_seq(a), 0);
        audit_close(a);
        struct stat st;
        cr_assert_eq(stat(logpath, &st), 0);
        cr_assert_eq(st.st_size, 0);
}

/* 4 processes each append 50 batches of 40 while the others do: every
 * batch is 40 consecutive seqs, the chain verifies, nothing is lost. */
static int check_contiguous(const char *line, size_t len, uint64_t lineno, bool complete, void *u)
{
        static json_int_t last_w = -1, last_b = -1, last_i = -1;
        uint64_t *count = u;
        json_t *o = json_loadb(line, len, 0, NULL);
        cr_assert_not_null(o);
        json_int_t w = json_integer_value(json_object_get(o, "w"));
        json_int_t b = json_integer_value(json_object_get(o, "b"));
        json_int_t i = json_integer_value(json_object_get(o, "i"));
        if (i == 0)
                cr_assert(last_i == -1 || last_i == 39, "line %" PRIu64 ": a batch was split",
                          lineno);
        else
                cr_assert(w == last_w && b == last_b && i == last_i + 1,
                          "line %" PRIu64 ": another writer's line inside a batch", lineno);
        last_w = w;
        last_b = b;
        last_i = i;
        (*count)++;
        json_decref(o);
        return 0;
}

Test(batch, concurrent_batches_stay_whole, .timeout = 60)
{
        struct audit_options opt = {.sync = AUDIT_SYNC_BATCH, .rotate_size = AUDIT_ROTATE_NEVER};
        pid_t pids[4];
        for (unsigned w = 0; w < 4; w++) {
                pids[w] = fork();
                cr_assert_geq(pids[w], 0);
                if (pids[w] == 0) {
                        struct al_error err = {0};
                        struct audit *a = NULL;
                        if (audit_open(logpath, &opt, &a, &err) < 0)
                                _exit(10);
                        for (unsigned b = 0; b < 50; b++) {
                                struct audit_record *r = make_batch(w, b, 40);
                                if (audit_append_many(a, r, 40, &err) < 0)
                                        _exit(11);
                                free_batch(r, 40);
                        }
                        audit_close(a);
                        _exit(0);
                }
        }
        for (unsigned w = 0; w < 4; w++) {
                int st;
                cr_assert_eq(waitpid(pids[w], &st, 0), pids[w]);
                cr_assert(WIFEXITED(st) && WEXITSTATUS(st) == 0, "writer %u: %d", w, st);
        }
        struct audit_verify_result res = verify_all(NULL);
        cr_assert(res.ok, "%s", res.reason);
        cr_assert_eq(res.last_seq, 4 * 50 * 40);
        uint64_t count = 0;
        struct al_error err = {0};
        cr_assert_eq(audit_foreach_line(logpath, check_contiguous, &count, &err), 0, "%s", err.msg);
        cr_assert_eq(count, 4 * 50 * 40);
}

Test(batch, a_batch_rotates_between_records, .timeout = 30)
{
        struct audit_options opt = {.rotate_size = 4096, .rotate_keep = AUDIT_KEEP_ALL};
        struct audit *a = open_log(&opt);
        struct al_error err = {0};
        struct audit_record *r = make_batch(0, 0, 300);
        cr_assert_eq(audit_append_many(a, r, 300, &err), 0, "%s", err.msg);
        free_batch(r, 300);
        audit_close(a);
        size_t files = 0;
        struct audit_verify_result res = verify_all(&files);
        cr_assert(res.ok, "%s", res.reason);
        cr_assert_gt(files, 5);
        cr_assert_eq(res.last_seq, 300);
        cr_assert_eq(res.lines, 300);
        char **paths = NULL;
        size_t n = 0;
        cr_assert_eq(audit_rotated_paths(logpath, &paths, &n), 0);
        for (size_t i = 0; i < n; i++) {
                struct stat st;
                cr_assert_eq(stat(paths[i], &st), 0);
                cr_assert_leq(st.st_size, 4096, "%s", paths[i]);
        }
        strv_free(paths);
}

Test(batch, a_failed_write_leaves_no_partial_line, .timeout = 30)
{
        struct audit *a = open_log(NULL);
        struct al_error err = {0};
        struct audit_record *r = make_batch(0, 0, 3);
        cr_assert_eq(audit_append_many(a, r, 3, &err), 0, "%s", err.msg);
        struct stat st;
        cr_assert_eq(stat(logpath, &st), 0);
        /* Room for about one more record: the batch's write is cut after it,
         * as a full disk would. */
        signal(SIGXFSZ, SIG_IGN);
        struct rlimit rl = {.rlim_cur = (rlim_t)st.st_size + 150, .rlim_max = RLIM_INFINITY};
        cr_assert_eq(setrlimit(RLIMIT_FSIZE, &rl), 0);
        struct audit_record *big = make_batch(1, 0, 20);
        cr_assert_lt(audit_append_many(a, big, 20, &err), 0);
        cr_assert_not_null(strstr(err.msg, "writing audit log"), "%s", err.msg);
        struct stat st2;
        cr_assert_eq(stat(logpath, &st2), 0);
        cr_assert_eq(st2.st_size, st.st_size, "the partial batch was taken back");
        cr_assert_eq(audit_last_seq(a), 3);
        rl.rlim_cur = RLIM_INFINITY;
        cr_assert_eq(setrlimit(RLIMIT_FSIZE, &rl), 0);
        cr_assert_eq(audit_append_many(a, big, 20, &err), 0, "%s", err.msg);
        free_batch(big, 20);
        free_batch(r, 3);
        audit_close(a);
        struct audit_verify_result res = verify_all(NULL);
        cr_assert(res.ok, "%s", res.reason);
        cr_assert_eq(res.last_seq, 23);
}
