/* SPDX-License-Identifier: Apache-2.0 */
#include <criterion/criterion.h>
#include <fcntl.h>
#include <ftw.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>

#include "audit.h"
#include "secrets.h"
#include "util.h"

static char dir[64];
static char logpath[128];

static int rm_entry(const char *p, const struct stat *st, int flag, struct FTW *ftw)
{
        return remove(p);
}

static void setup(void)
{
        snprintf(dir, sizeof(dir), "/tmp/airlock-test-audit-XXXXXX");
        cr_assert_not_null(mkdtemp(dir));
        snprintf(logpath, sizeof(logpath), "%s/sub/dir/audit.jsonl", dir);
}

static void teardown(void)
{
        nftw(dir, rm_entry, 16, FTW_DEPTH | FTW_PHYS);
}

TestSuite(audit, .init = setup, .fini = teardown);

static struct audit *open_log(const struct audit_options *opt)
{
        struct al_error err = {0};
        struct audit *a = NULL;
        int r = audit_open(logpath, opt, &a, &err);
        cr_assert_eq(r, 0, "audit_open: %s", err.msg);
        return a;
}

static void append(struct audit *a, const char *sandbox, unsigned i)
{
        struct al_error err = {0};
        json_t *f = json_pack("{s:s, s:i, s:s, s:{s:[i,s]}}", "host", "api.example.com", "n", i,
                              "decision", i % 2 ? "allow" : "deny", "nested", "list", i, "x");
        int r = audit_append(a, sandbox, "net.connect", f, &err);
        json_decref(f);
        cr_assert_eq(r, 0, "audit_append: %s", err.msg);
}

static void write_log(unsigned n)
{
        struct audit *a = open_log(NULL);
        for (unsigned i = 0; i < n; i++)
                append(a, "sb-0123456789", i);
        audit_close(a);
}

/* The file as an array of lines (without newlines). */
static char **read_lines(const char *path, size_t *ret_n)
{
        char *buf = NULL;
        size_t len = 0;
        cr_assert_eq(read_file_at(AT_FDCWD, path, 64 << 20, &buf, &len), 0);
        char **v = NULL;
        size_t n = 0;
        char *p = buf;
        while (*p) {
                char *nl = strchr(p, '\n');
                cr_assert_not_null(nl);
                *nl = '\0';
                v = strv_append(v, &n, p);
                p = nl + 1;
        }
        free(buf);
        *ret_n = n;
        return v;
}

static void write_lines(const char *path, char **v, size_t n)
{
        FILE *f = fopen(path, "we");
        cr_assert_not_null(f);
        for (size_t i = 0; i < n; i++)
                fprintf(f, "%s\n", v[i]);
        fclose(f);
}

static struct audit_verify_result verify(const struct audit_verify_options *opt)
{
        struct audit_verify_result res;
        struct al_error err = {0};
        const char *paths[] = {logpath};
        cr_assert_eq(audit_verify_files(paths, 1, opt, &res, &err), 0, "verify: %s", err.msg);
        return res;
}

static void assert_bad(struct audit_verify_result res, uint64_t line, uint64_t seq,
                       const char *reason)
{
        cr_assert_not(res.ok, "tampering not detected");
        cr_assert_eq(res.bad_line, line, "bad line %lu, expected %lu (%s)",
                     (unsigned long)res.bad_line, (unsigned long)line, res.reason);
        cr_assert_eq(res.bad_seq, seq, "bad seq %lu, expected %lu (%s)", (unsigned long)res.bad_seq,
                     (unsigned long)seq, res.reason);
        cr_assert_not_null(strstr(res.reason, reason), "reason \"%s\" lacks \"%s\"", res.reason,
                           reason);
}

Test(audit, chain_across_many_appends)
{
        write_log(500);

        size_t n;
        char **v = read_lines(logpath, &n);
        cr_assert_eq(n, 500);
        char prev[AUDIT_HASH_HEX + 1] = AUDIT_GENESIS;
        for (size_t i = 0; i < n; i++) {
                char head[64];
                snprintf(head, sizeof(head), "{\"seq\":%zu,\"ts\":\"", i + 1);
                cr_assert_eq(strncmp(v[i], head, strlen(head)), 0, "line %zu: %s", i + 1, v[i]);
                /* "ts":"2026-11-22T10:00:00.123456Z" */
                const char *ts = v[i] + strlen(head);
                cr_assert_eq(ts[4], '-');
                cr_assert_eq(ts[10], 'T');
                cr_assert_eq(ts[19], '.');
                cr_assert_eq(ts[26], 'Z');
                cr_assert_not_null(strstr(v[i], ",\"sandbox\":\"sb-0123456789\",\"kind\":"
                                                "\"net.connect\",\"host\":"));
                char tail[128];
                snprintf(tail, sizeof(tail), ",\"prev\":\"%s\"}", prev);
                cr_assert_str_eq(v[i] + strlen(v[i]) - strlen(tail), tail, "line %zu", i + 1);
                audit_hash_hex(v[i], strlen(v[i]), prev);
        }
        strv_free(v);

        struct audit_verify_result res = verify(NULL);
        cr_assert(res.ok, "%s", res.reason);
        cr_assert_eq(res.lines, 500);
        cr_assert_eq(res.first_seq, 1);
        cr_assert_eq(res.last_seq, 500);
        cr_assert_str_eq(res.last_hash, prev);

        struct stat st;
        cr_assert_eq(stat(logpath, &st), 0);
        cr_assert_eq(st.st_mode & 0777, 0600);
        char sub[160];
        snprintf(sub, sizeof(sub), "%s/sub", dir);
        cr_assert_eq(stat(sub, &st), 0);
        cr_assert_eq(st.st_mode & 0777, 0700);
}

Test(audit, reopen_continues)
{
        write_log(3);
        struct audit *a = open_log(NULL);
        cr_assert_eq(audit_last_seq(a), 3);
        append(a, "other", 1);
        append(a, "other", 2);
        cr_assert_eq(audit_last_seq(a), 5);
        char last[AUDIT_HASH_HEX + 1];
        memcpy(last, audit_last_hash(a), sizeof(last));
        audit_close(a);

        struct audit_verify_result res = verify(NULL);
        cr_assert(res.ok, "%s", res.reason);
        cr_assert_eq(res.lines, 5);
        cr_assert_str_eq(res.last_hash, last);
}

Test(audit, empty_log_verifies)
{
        struct audit *a = open_log(NULL);
        cr_assert_eq(audit_last_seq(a), 0);
        cr_assert_str_eq(audit_last_hash(a), AUDIT_GENESIS);
        audit_close(a);
        struct audit_verify_result res = verify(NULL);
        cr_assert(res.ok);
        cr_assert_eq(res.lines, 0);
}

static struct audit_verify_result verify_rotated(const struct audit_verify_options *opt,
                                                 size_t *ret_files)
{
        char **paths = NULL;
        size_t n = 0;
        cr_assert_eq(audit_rotated_paths(logpath, &paths, &n), 0);
        struct audit_verify_result res;
        struct al_error err = {0};
        cr_assert_eq(audit_verify_files((const char *const *)paths, n, opt, &res, &err), 0, "%s",
                     err.msg);
        strv_free(paths);
        if (ret_files)
                *ret_files = n;
        return res;
}

Test(audit, rotation_keeps_the_chain)
{
        struct audit_options opt = {.rotate_size = 2000, .rotate_keep = AUDIT_KEEP_ALL};
        struct audit *a = open_log(&opt);
        for (unsigned i = 0; i < 100; i++)
                append(a, "sb", i);
        audit_close(a);

        size_t files = 0;
        struct audit_verify_result res = verify_rotated(NULL, &files);
        cr_assert(res.ok, "%s (file %zu line %lu)", res.reason, res.bad_file,
                  (unsigned long)res.bad_line);
        cr_assert_eq(res.lines, 100);
        cr_assert_eq(res.last_seq, 100);
        cr_assert_gt(files, 3);

        char **paths = NULL;
        size_t n = 0;
        cr_assert_eq(audit_rotated_paths(logpath, &paths, &n), 0);
        for (size_t i = 0; i < n; i++) {
                struct stat st;
                cr_assert_eq(stat(paths[i], &st), 0);
                cr_assert_leq(st.st_size, 2000, "%s is %ld bytes", paths[i], (long)st.st_size);
        }
        /* The newest file alone starts mid-chain. */
        res = verify(NULL);
        assert_bad(res, 1, res.bad_seq, "not 1");
        cr_assert_gt(res.bad_seq, 1);
        struct audit_verify_options from = {.from_rotated = true};
        res = verify(&from);
        cr_assert(res.ok, "%s", res.reason);
        cr_assert_eq(res.last_seq, 100);

        /* Two adjacent files chain onto each other. */
        const char *two[] = {paths[n - 2], paths[n - 1]};
        struct al_error err = {0};
        cr_assert_eq(audit_verify_files(two, 2, &from, &res, &err), 0);
        cr_assert(res.ok, "%s", res.reason);
        /* Out of order they do not. */
        const char *swapped[] = {paths[n - 1], paths[n - 2]};
        cr_assert_eq(audit_verify_files(swapped, 2, &from, &res, &err), 0);
        cr_assert_not(res.ok);
        cr_assert_eq(res.bad_file, 1);
        strv_free(paths);

        /* Reopening continues in the same file. */
        a = open_log(&opt);
        cr_assert_eq(audit_last_seq(a), 100);
        append(a, "sb", 100);
        audit_close(a);
        res = verify_rotated(NULL, NULL);
        cr_assert(res.ok, "%s", res.reason);
        cr_assert_eq(res.last_seq, 101);
}

Test(audit, rotation_keep_limit)
{
        struct audit_options opt = {.rotate_size = 1000, .rotate_keep = 2};
        struct audit *a = open_log(&opt);
        for (unsigned i = 0; i < 60; i++)
                append(a, "sb", i);
        audit_close(a);

        size_t files = 0;
        struct audit_verify_result res = verify_rotated(NULL, &files);
        cr_assert_eq(files, 3);
        cr_assert_not(res.ok, "the oldest lines were dropped");
        struct audit_verify_options from = {.from_rotated = true};
        res = verify_rotated(&from, NULL);
        cr_assert(res.ok, "%s", res.reason);
        cr_assert_eq(res.last_seq, 60);
}

Test(audit, continues_from_rotated_when_empty)
{
        write_log(5);
        char older[160];
        snprintf(older, sizeof(older), "%s.1", logpath);
        cr_assert_eq(rename(logpath, older), 0);

        struct audit *a = open_log(NULL);
        cr_assert_eq(audit_last_seq(a), 5);
        append(a, "sb", 5);
        audit_close(a);

        const char *paths[] = {older, logpath};
        struct audit_verify_result res;
        struct al_error err = {0};
        cr_assert_eq(audit_verify_files(paths, 2, NULL, &res, &err), 0);
        cr_assert(res.ok, "%s", res.reason);
        cr_assert_eq(res.lines, 6);
}

/* Tampering: a log of 10 lines, changed in one way, must fail verification
 * at the right place. */

static char **tamper_begin(size_t *n)
{
        write_log(10);
        return read_lines(logpath, n);
}

static void tamper_end(char **v, size_t n)
{
        write_lines(logpath, v, n);
        strv_free(v);
}

Test(audit, detects_edited_byte)
{
        size_t n;
        char **v = tamper_begin(&n);
        char *p = strstr(v[3], "api.example.com");
        p[0] = 'A';
        tamper_end(v, n);
        assert_bad(verify(NULL), 4, 4, "changed");
}

Test(audit, detects_edited_seq)
{
        size_t n;
        char **v = tamper_begin(&n);
        v[5][7] = '9'; /* {"seq":6 → {"seq":9 */
        tamper_end(v, n);
        assert_bad(verify(NULL), 6, 9, "follows seq 5");
}

Test(audit, detects_edited_prev)
{
        size_t n;
        char **v = tamper_begin(&n);
        char *p = strstr(v[6], "\"prev\":\"") + 8;
        p[10] = p[10] == 'a' ? 'b' : 'a';
        tamper_end(v, n);
        assert_bad(verify(NULL), 7, 7, "prev does not match");
}

Test(audit, detects_edit_that_breaks_json)
{
        size_t n;
        char **v = tamper_begin(&n);
        v[4][strlen(v[4]) - 1] = ' ';
        tamper_end(v, n);
        assert_bad(verify(NULL), 5, 5, "corrupt record: not a JSON object");
}

Test(audit, detects_inserted_copy)
{
        size_t n;
        char **v = tamper_begin(&n);
        char **w = NULL;
        size_t m = 0;
        for (size_t i = 0; i < n; i++) {
                w = strv_append(w, &m, v[i]);
                if (i == 5)
                        w = strv_append(w, &m, v[2]);
        }
        strv_free(v);
        tamper_end(w, m);
        assert_bad(verify(NULL), 7, 3, "follows seq 6");
}

Test(audit, detects_inserted_forgery)
{
        size_t n;
        char **v = tamper_begin(&n);
        /* A well-formed line claiming seq 7 with a made-up prev. */
        char forged[512];
        snprintf(forged, sizeof(forged),
                 "{\"seq\":7,\"ts\":\"2026-11-22T10:00:00.000000Z\",\"sandbox\":\"sb-0123456789\","
                 "\"kind\":\"net.connect\",\"host\":\"fine.example\",\"prev\":\"%s\"}",
                 AUDIT_GENESIS);
        char **w = NULL;
        size_t m = 0;
        for (size_t i = 0; i < n; i++) {
                w = strv_append(w, &m, v[i]);
                if (i == 5)
                        w = strv_append(w, &m, forged);
        }
        strv_free(v);
        tamper_end(w, m);
        assert_bad(verify(NULL), 7, 7, "prev does not match");
}

Test(audit, detects_inserted_forgery_with_right_prev)
{
        size_t n;
        char **v = tamper_begin(&n);
        char prev[AUDIT_HASH_HEX + 1];
        audit_hash_hex(v[5], strlen(v[5]), prev);
        char forged[512];
        snprintf(forged, sizeof(forged),
                 "{\"seq\":7,\"ts\":\"2026-11-22T10:00:00.000000Z\",\"sandbox\":\"sb-0123456789\","
                 "\"kind\":\"net.connect\",\"host\":\"fine.example\",\"prev\":\"%s\"}",
                 prev);
        char **w = NULL;
        size_t m = 0;
        for (size_t i = 0; i < n; i++) {
                w = strv_append(w, &m, v[i]);
                if (i == 5)
                        w = strv_append(w, &m, forged);
        }
        strv_free(v);
        tamper_end(w, m);
        assert_bad(verify(NULL), 8, 7, "follows seq 7");
}

Test(audit, detects_swapped_lines)
{
        size_t n;
        char **v = tamper_begin(&n);
        char *t = v[3];
        v[3] = v[4];
        v[4] = t;
        tamper_end(v, n);
        assert_bad(verify(NULL), 4, 5, "follows seq 3");
}

Test(audit, detects_deleted_middle_line)
{
        size_t n;
        char **v = tamper_begin(&n);
        free(v[4]);
        memmove(v + 4, v + 5, (n - 5) * sizeof(char *));
        v[--n] = NULL;
        tamper_end(v, n);
        assert_bad(verify(NULL), 5, 6, "1 line(s) missing");
}

Test(audit, detects_deleted_first_line)
{
        size_t n;
        char **v = tamper_begin(&n);
        free(v[0]);
        memmove(v, v + 1, (n - 1) * sizeof(char *));
        v[--n] = NULL;
        tamper_end(v, n);
        assert_bad(verify(NULL), 1, 2, "earlier lines are missing");
}

Test(audit, detects_changed_genesis)
{
        size_t n;
        char **v = tamper_begin(&n);
        char *p = strstr(v[0], "\"prev\":\"") + 8;
        p[0] = '1';
        tamper_end(v, n);
        assert_bad(verify(NULL), 1, 1, "genesis");
}

Test(audit, detects_truncated_last_line)
{
        write_log(10);
        struct stat st;
        cr_assert_eq(stat(logpath, &st), 0);
        cr_assert_eq(truncate(logpath, st.st_size - 30), 0);
        struct audit_verify_result res = verify(NULL);
        assert_bad(res, 10, 10, "torn record");
        cr_assert(res.torn);

        /* The next writer cuts it off and says so, rather than bury it
         * mid-file (test-audit-rotate.c checks the record itself). */
        struct audit *a = open_log(NULL);
        cr_assert_eq(audit_last_seq(a), 10);
        audit_close(a);
        res = verify(NULL);
        cr_assert(res.ok, "%s", res.reason);
        cr_assert_eq(res.last_seq, 10);
}

Test(audit, detects_newline_only_truncation)
{
        write_log(10);
        struct stat st;
        cr_assert_eq(stat(logpath, &st), 0);
        cr_assert_eq(truncate(logpath, st.st_size - 1), 0);
        assert_bad(verify(NULL), 10, 10, "torn record");
        /* A whole record lacking only its newline is completed. */
        struct audit *a = open_log(NULL);
        cr_assert_eq(audit_last_seq(a), 10);
        audit_close(a);
        struct audit_verify_result res = verify(NULL);
        cr_assert(res.ok, "%s", res.reason);
        cr_assert_eq(res.lines, 10);
}

Test(audit, deleted_last_line_needs_expect_last)
{
        struct audit *a = open_log(NULL);
        for (unsigned i = 0; i < 10; i++)
                append(a, "sb", i);
        uint64_t last = audit_last_seq(a);
        audit_close(a);

        size_t n;
        char **v = read_lines(logpath, &n);
        free(v[--n]);
        v[n] = NULL;
        tamper_end(v, n);

        /* The chain alone cannot tell a log cut at a line boundary. */
        struct audit_verify_result res = verify(NULL);
        cr_assert(res.ok);
        cr_assert_eq(res.last_seq, 9);

        struct audit_verify_options opt = {.expect_last_seq = last};
        assert_bad(verify(&opt), 10, 10, "removed from the end");
}

Test(audit, edited_last_line_needs_expect_hash)
{
        struct audit *a = open_log(NULL);
        for (unsigned i = 0; i < 10; i++)
                append(a, "sb", i);
        struct audit_verify_options opt = {.expect_last_seq = audit_last_seq(a)};
        char hash[AUDIT_HASH_HEX + 1];
        memcpy(hash, audit_last_hash(a), sizeof(hash));
        opt.expect_last_hash = hash;
        audit_close(a);

        struct audit_verify_result res = verify(&opt);
        cr_assert(res.ok, "%s", res.reason);

        size_t n;
        char **v = read_lines(logpath, &n);
        strstr(v[9], "api.example.com")[0] = 'X';
        tamper_end(v, n);
        cr_assert(verify(NULL).ok, "undetectable by the chain alone");
        assert_bad(verify(&opt), 10, 10, "recorded");
}

Test(audit, expect_last_is_a_minimum)
{
        /* Other writers may have appended after the recorded seq. */
        write_log(10);
        struct audit_verify_options opt = {.expect_last_seq = 7};
        cr_assert(verify(&opt).ok);
}

Test(audit, detects_overlong_line)
{
        write_log(3);
        FILE *f = fopen(logpath, "ae");
        cr_assert_not_null(f);
        for (int i = 0; i < AUDIT_LINE_MAX + 10; i++)
                fputc('x', f);
        fputc('\n', f);
        fclose(f);
        assert_bad(verify(NULL), 4, 0, "longer than");
}

Test(audit, unreadable_file_is_an_error)
{
        const char *paths[] = {"/nonexistent/audit.jsonl"};
        struct audit_verify_result res;
        struct al_error err = {0};
        cr_assert_eq(audit_verify_files(paths, 1, NULL, &res, &err), -ENOENT);
        cr_assert_not_null(strstr(err.msg, "/nonexistent/audit.jsonl"));
}

Test(audit, reserved_keys_and_bad_fields)
{
        struct audit *a = open_log(NULL);
        struct al_error err = {0};
        json_t *f = json_pack("{s:i}", "seq", 99);
        cr_assert_lt(audit_append(a, "sb", "x", f, &err), 0);
        cr_assert_not_null(strstr(err.msg, "reserved"), "%s", err.msg);
        json_decref(f);
        f = json_pack("{s:s}", "prev", "x");
        cr_assert_lt(audit_append(a, "sb", "x", f, &err), 0);
        json_decref(f);
        f = json_array();
        cr_assert_lt(audit_append(a, "sb", "x", f, &err), 0);
        json_decref(f);
        cr_assert_lt(audit_append(a, "sb", NULL, NULL, &err), 0);
        cr_assert_eq(audit_append(a, "sb", "sandbox.created", NULL, &err), 0);
        cr_assert_eq(audit_last_seq(a), 1);

        /* Too large for one line: refused, nothing written. */
        char *big = xcalloc(AUDIT_LINE_MAX + 1, 1);
        memset(big, 'a', AUDIT_LINE_MAX);
        f = json_pack("{s:s}", "data", big);
        free(big);
        cr_assert_lt(audit_append(a, "sb", "x", f, &err), 0);
        json_decref(f);
        audit_close(a);
        struct audit_verify_result res = verify(NULL);
        cr_assert(res.ok);
        cr_assert_eq(res.lines, 1);
}

Test(audit, redaction_hook)
{
        struct redactor *r = redactor_new();
        cr_assert_eq(redactor_add(r, "s3cr3t-value", 12), 0);
        struct audit_options opt = {.redact = redactor_audit_hook, .redact_userdata = r};
        struct audit *a = open_log(&opt);
        struct al_error err = {0};
        json_t *f = json_pack("{s:s, s:[s, {s:s}], s:i}", "header", "Bearer s3cr3t-value", "argv",
                              "echo", "k", "czNjcjN0LXZhbHVl", "n", 5);
        cr_assert_eq(audit_append(a, "sb", "process.started", f, &err), 0, "%s", err.msg);
        /* The caller's object is left alone. */
        cr_assert_str_eq(json_string_value(json_object_get(f, "header")), "Bearer s3cr3t-value");
        json_decref(f);
        audit_close(a);
        redactor_free(r);

        char *buf = NULL;
        cr_assert_eq(read_file_at(AT_FDCWD, logpath, 1 << 20, &buf, NULL), 0);
        cr_assert_null(strstr(buf, "s3cr3t"), "%s", buf);
        cr_assert_null(strstr(buf, "czNjcjN0LXZhbHVl"), "%s", buf);
        cr_assert_not_null(strstr(buf, "\"header\":\"Bearer [REDACTED]\""), "%s", buf);
        cr_assert_not_null(strstr(buf, "\"argv\":[\"echo\",{\"k\":\"[REDACTED]\"}]"), "%s", buf);
        free(buf);
        cr_assert(verify(NULL).ok);
}

Test(audit, batch_sync_deadline)
{
        struct audit_options opt = {.sync = AUDIT_SYNC_BATCH};
        struct audit *a = open_log(&opt);
        cr_assert_eq(audit_flush_deadline(a), 0);
        uint64_t before = now_monotonic_us();
        append(a, "sb", 1);
        uint64_t deadline = audit_flush_deadline(a);
        cr_assert_geq(deadline, before + 100000);
        cr_assert_leq(deadline, now_monotonic_us() + 100000);
        append(a, "sb", 2);
        cr_assert_eq(audit_flush_deadline(a), deadline, "the first pending event sets it");
        cr_assert_not(audit_needs_flush(a, deadline - 1));
        cr_assert(audit_needs_flush(a, deadline));
        cr_assert_eq(audit_flush(a), 0);
        cr_assert_eq(audit_flush_deadline(a), 0);
        cr_assert_not(audit_needs_flush(a, UINT64_MAX));
        audit_close(a);
        cr_assert(verify(NULL).ok);
}

Test(audit, default_path)
{
        char *p = audit_default_path(0, "/root");
        cr_assert_str_eq(p, "/var/lib/airlock/audit/audit.jsonl");
        free(p);
        p = audit_default_path(1000, "/home/u/");
        cr_assert_str_eq(p, "/home/u/.local/state/airlock/audit/audit.jsonl");
        free(p);
        cr_assert_null(audit_default_path(1000, NULL));
        cr_assert_null(audit_default_path(1000, "relative"));
}

static void writer_child(const struct audit_options *opt, const char *sandbox, unsigned n)
{
        struct al_error err = {0};
        struct audit *a = NULL;
        if (audit_open(logpath, opt, &a, &err) < 0)
                _exit(10);
        for (unsigned i = 0; i < n; i++) {
                json_t *f =
                    json_pack("{s:i, s:s}", "i", i, "pad", "some bytes to make lines longer");
                int r = audit_append(a, sandbox, "test.event", f, &err);
                json_decref(f);
                if (r < 0) {
                        fprintf(stderr, "child %s: %s\n", sandbox, err.msg);
                        _exit(11);
                }
        }
        audit_close(a);
        _exit(0);
}

static void concurrent(const struct audit_options *opt)
{
        enum { PER_CHILD = 300 };
        pid_t pids[2];

        /* Both start from an existing chain. */
        write_log(2);
        for (int i = 0; i < 2; i++) {
                pids[i] = fork();
                cr_assert_geq(pids[i], 0);
                if (pids[i] == 0)
                        writer_child(opt, i == 0 ? "child-a" : "child-b", PER_CHILD);
        }
        for (int i = 0; i < 2; i++) {
                int status;
                cr_assert_eq(waitpid(pids[i], &status, 0), pids[i]);
                cr_assert(WIFEXITED(status) && WEXITSTATUS(status) == 0, "child %d: %d", i, status);
        }

        char **paths = NULL;
        size_t n = 0;
        cr_assert_eq(audit_rotated_paths(logpath, &paths, &n), 0);
        struct audit_verify_result res;
        struct al_error err = {0};
        cr_assert_eq(audit_verify_files((const char *const *)paths, n, NULL, &res, &err), 0);
        cr_assert(res.ok, "%s: line %lu: %s", paths[res.bad_file], (unsigned long)res.bad_line,
                  res.reason);
        cr_assert_eq(res.lines, 2 + 2 * PER_CHILD);
        cr_assert_eq(res.last_seq, 2 + 2 * PER_CHILD);
        if (opt && opt->rotate_size)
                cr_assert_gt(n, 2);
        strv_free(paths);
}

Test(audit, concurrent_writers)
{
        concurrent(NULL);
}

Test(audit, concurrent_writers_with_rotation)
{
        struct audit_options opt = {
            .rotate_size = 8192, .rotate_keep = AUDIT_KEEP_ALL, .sync = AUDIT_SYNC_BATCH};
        concurrent(&opt);
}

struct count {
        uint64_t lines;
        bool last_complete;
};

static int count_line(const char *line, size_t len, uint64_t lineno, bool complete, void *userdata)
{
        struct count *c = userdata;
        cr_assert_eq(strlen(line), len);
        c->lines = lineno;
        c->last_complete = complete;
        return 0;
}

Test(audit, foreach_line)
{
        write_log(7);
        struct count c = {0};
        struct al_error err = {0};
        cr_assert_eq(audit_foreach_line(logpath, count_line, &c, &err), 0);
        cr_assert_eq(c.lines, 7);
        cr_assert(c.last_complete);

        FILE *f = fopen(logpath, "ae");
        fputs("{\"partial", f);
        fclose(f);
        c = (struct count){0};
        cr_assert_eq(audit_foreach_line(logpath, count_line, &c, &err), 0);
        cr_assert_eq(c.lines, 8);
        cr_assert_not(c.last_complete);
}
