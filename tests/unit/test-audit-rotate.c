/* SPDX-License-Identifier: Apache-2.0 */
/* The audit log's size cap (rotation keeps the chain across files), a
 * rotated file missing from the middle, and the repair of a torn last line. */
#include <criterion/criterion.h>
#include <fcntl.h>
#include <ftw.h>
#include <signal.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/stat.h>

#include "audit.h"
#include "util.h"

static char dir[64];
static char logpath[128];

static int rm_entry(const char *p, const struct stat *st, int flag, struct FTW *ftw)
{
        return remove(p);
}

static void setup(void)
{
        snprintf(dir, sizeof(dir), "/tmp/airlock-test-rotate-XXXXXX");
        cr_assert_not_null(mkdtemp(dir));
        snprintf(logpath, sizeof(logpath), "%s/audit.jsonl", dir);
}

static void teardown(void)
{
        nftw(dir, rm_entry, 16, FTW_DEPTH | FTW_PHYS);
}

TestSuite(rotate, .init = setup, .fini = teardown);

static struct audit *open_log(const struct audit_options *opt)
{
        struct al_error err = {0};
        struct audit *a = NULL;
        cr_assert_eq(audit_open(logpath, opt, &a, &err), 0, "audit_open: %s", err.msg);
        return a;
}

static void append_n(struct audit *a, unsigned n)
{
        for (unsigned i = 0; i < n; i++) {
                struct al_error err = {0};
                json_t *f = json_pack("{s:s, s:i}", "host", "denied.example", "n", i);
                int r = audit_append(a, "0123456789abcdef", "net.decision", f, &err);
                json_decref(f);
                cr_assert_eq(r, 0, "audit_append: %s", err.msg);
        }
}

static json_t *line_at(const char *path, bool last)
{
        char *text = NULL;
        size_t len = 0;
        cr_assert_eq(read_file_at(AT_FDCWD, path, 1 << 24, &text, &len), 0);
        cr_assert_gt(len, 0);
        text[len - 1] = '\0';
        char *start = last ? strrchr(text, '\n') : NULL;
        start = start ? start + 1 : text;
        char *nl = last ? NULL : strchr(start, '\n');
        if (nl)
                *nl = '\0';
        json_error_t jerr;
        json_t *o = json_loads(start, 0, &jerr);
        cr_assert_not_null(o, "%s: %s", path, jerr.text);
        if (last) {
                char hash[AUDIT_HASH_HEX + 1];
                audit_hash_hex(start, strlen(start), hash);
                json_object_set_new(o, "_hash", json_string(hash));
        }
        free(text);
        return o;
}

static struct audit_verify_result verify_all(bool from_rotated, size_t *ret_files)
{
        char **paths = NULL;
        size_t n = 0;
        unsigned long missing = 1;
        cr_assert_eq(audit_rotated_files(logpath, &paths, &n, &missing), 0);
        cr_assert_eq(missing, 0);
        struct audit_verify_options opt = {.from_rotated = from_rotated};
        struct audit_verify_result res;
        struct al_error err = {0};
        cr_assert_eq(audit_verify_files((const char *const *)paths, n, &opt, &res, &err), 0, "%s",
                     err.msg);
        strv_free(paths);
        if (ret_files)
                *ret_files = n;
        return res;
}

Test(rotate, size_is_capped_and_the_chain_crosses_files)
{
        struct audit_options opt = {.rotate_size = 4096, .rotate_keep = 3};
        struct audit *a = open_log(&opt);
        append_n(a, 500);
        audit_close(a);

        char **paths = NULL;
        size_t n = 0;
        cr_assert_eq(audit_rotated_paths(logpath, &paths, &n), 0);
        cr_assert_eq(n, 4, "FILE.3 FILE.2 FILE.1 FILE, got %zu", n);
        off_t total = 0;
        for (size_t i = 0; i < n; i++) {
                struct stat st;
                cr_assert_eq(stat(paths[i], &st), 0);
                cr_assert_leq(st.st_size, 4096);
                total += st.st_size;
        }
        cr_assert_leq(total, 4 * 4096);
        /* Each file's first line chains onto the last line of the one before. */
        for (size_t i = 1; i < n; i++) {
                json_t *prev_last = line_at(paths[i - 1], true);
                json_t *first = line_at(paths[i], false);
                cr_assert_str_eq(json_string_value(json_object_get(first, "prev")),
                                 json_string_value(json_object_get(prev_last, "_hash")));
                cr_assert_eq(json_integer_value(json_object_get(first, "seq")),
                             json_integer_value(json_object_get(prev_last, "seq")) + 1);
                json_decref(prev_last);
                json_decref(first);
        }
        strv_free(paths);

        struct audit_verify_result res = verify_all(true, NULL);
        cr_assert(res.ok, "%s", res.reason);
        cr_assert_eq(res.last_seq, 500);
        cr_assert_gt(res.first_seq, 1, "the oldest lines were rotated away");
}

Test(rotate, a_missing_middle_file_is_reported)
{
        struct audit_options opt = {.rotate_size = 4096, .rotate_keep = AUDIT_KEEP_ALL};
        struct audit *a = open_log(&opt);
        append_n(a, 200);
        audit_close(a);
        size_t files = 0;
        struct audit_verify_result res = verify_all(false, &files);
        cr_assert(res.ok, "%s", res.reason);
        cr_assert_geq(files, 4);

        char victim[160];
        snprintf(victim, sizeof(victim), "%s.2", logpath);
        cr_assert_eq(unlink(victim), 0);
        char **paths = NULL;
        size_t n = 0;
        unsigned long missing = 0;
        cr_assert_eq(audit_rotated_files(logpath, &paths, &n, &missing), 0);
        cr_assert_eq(missing, 2);
        cr_assert_eq(n, files - 1, "the files after the gap are still listed");
        /* Their chain has the hole too. */
        struct audit_verify_result r2;
        struct al_error err = {0};
        cr_assert_eq(audit_verify_files((const char *const *)paths, n, NULL, &r2, &err), 0);
        cr_assert_not(r2.ok);
        cr_assert_not_null(strstr(r2.reason, "missing"), "%s", r2.reason);
        strv_free(paths);
}

Test(rotate, parse_rotate)
{
        struct audit_options o = {0};
        cr_assert_eq(audit_parse_rotate("64M:8", &o), 0);
        cr_assert_eq(o.rotate_size, 64ull << 20);
        cr_assert_eq(o.rotate_keep, 8);
        cr_assert_eq(audit_parse_rotate("1M:all", &o), 0);
        cr_assert_eq(o.rotate_keep, AUDIT_KEEP_ALL);
        cr_assert_eq(audit_parse_rotate("never", &o), 0);
        cr_assert_eq(o.rotate_size, AUDIT_ROTATE_NEVER);
        cr_assert_eq(audit_parse_rotate("16K", &o), 0);
        cr_assert_eq(o.rotate_keep, 0, "KEEP left out: the default");
        const char *bad[] = {"", "abc", "1M:0", "1M:x", "100", "1M:", "-1M"};
        for (size_t i = 0; i < ARRAY_SIZE(bad); i++)
                cr_assert_eq(audit_parse_rotate(bad[i], &o), -EINVAL, "\"%s\"", bad[i]);
}

static void append_raw(const char *path, const char *bytes)
{
        int fd = open(path, O_WRONLY | O_APPEND | O_CLOEXEC);
        cr_assert_geq(fd, 0);
        cr_assert_eq(write_full(fd, bytes, strlen(bytes)), 0);
        close(fd);
}

Test(rotate, torn_tail_is_cut_and_recorded)
{
        static const char frag[] = "{\"seq\":6,\"ts\":\"2026-11-24T02:00:00.0000";
        struct audit *a = open_log(NULL);
        append_n(a, 5);
        audit_close(a);
        append_raw(logpath, frag);

        a = open_log(NULL);
        cr_assert_eq(audit_last_seq(a), 6, "audit.torn takes seq 6");
        append_n(a, 1);
        audit_close(a);

        struct audit_verify_result res = verify_all(false, NULL);
        cr_assert(res.ok, "%s", res.reason);
        cr_assert_eq(res.last_seq, 7);

        char *text = NULL;
        size_t len = 0;
        cr_assert_eq(read_file_at(AT_FDCWD, logpath, 1 << 20, &text, &len), 0);
        char *line = strstr(text, "\"kind\":\"audit.torn\"");
        cr_assert_not_null(line);
        while (line > text && line[-1] != '\n')
                line--;
        *strchr(line, '\n') = '\0';
        json_t *o = json_loads(line, 0, NULL);
        cr_assert_not_null(o);
        cr_assert_str_eq(json_string_value(json_object_get(o, "sandbox")), AUDIT_SANDBOX_NONE);
        cr_assert_eq(json_integer_value(json_object_get(o, "seq")), 6);
        cr_assert_eq(json_integer_value(json_object_get(o, "tornSeq")), 6);
        cr_assert_eq(json_integer_value(json_object_get(o, "bytes")), (json_int_t)strlen(frag));
        char hash[AUDIT_HASH_HEX + 1];
        audit_hash_hex(frag, strlen(frag), hash);
        cr_assert_str_eq(json_string_value(json_object_get(o, "sha256")), hash);
        unsigned char *data = NULL;
        size_t dlen = 0;
        cr_assert_eq(base64_decode(json_string_value(json_object_get(o, "data")), &data, &dlen), 0);
        cr_assert_eq(dlen, strlen(frag));
        cr_assert_eq(memcmp(data, frag, dlen), 0);
        free(data);
        json_decref(o);
        free(text);
}

Test(rotate, torn_first_line_after_a_rotation)
{
        struct audit_options opt = {.rotate_size = 4096, .rotate_keep = AUDIT_KEEP_ALL};
        struct audit *a = open_log(&opt);
        append_n(a, 60);
        audit_close(a);
        /* The current file is nothing but a torn line. */
        cr_assert_eq(truncate(logpath, 0), 0);
        append_raw(logpath, "{\"seq\":41,\"ts\"");
        a = open_log(&opt);
        append_n(a, 1);
        audit_close(a);
        struct audit_verify_result res = verify_all(false, NULL);
        cr_assert(res.ok, "%s", res.reason);
}

Test(rotate, a_failed_write_leaves_no_partial_line)
{
        struct audit *a = open_log(NULL);
        append_n(a, 3);
        struct stat st;
        cr_assert_eq(stat(logpath, &st), 0);
        /* The file may grow by 100 bytes more: a 4 KiB line is cut by the
         * kernel after them, as a full disk would. */
        signal(SIGXFSZ, SIG_IGN);
        struct rlimit rl = {.rlim_cur = (rlim_t)st.st_size + 100, .rlim_max = RLIM_INFINITY};
        cr_assert_eq(setrlimit(RLIMIT_FSIZE, &rl), 0);
        char big[4096];
        memset(big, 'x', sizeof(big) - 1);
        big[sizeof(big) - 1] = '\0';
        json_t *f = json_pack("{s:s}", "pad", big);
        struct al_error err = {0};
        cr_assert_lt(audit_append(a, "0123456789abcdef", "test.big", f, &err), 0);
        json_decref(f);
        cr_assert_not_null(strstr(err.msg, "writing audit log"), "%s", err.msg);
        struct stat st2;
        cr_assert_eq(stat(logpath, &st2), 0);
        cr_assert_eq(st2.st_size, st.st_size, "the partial line was taken back");
        rl.rlim_cur = RLIM_INFINITY;
        cr_assert_eq(setrlimit(RLIMIT_FSIZE, &rl), 0);
        append_n(a, 1);
        audit_close(a);
        struct audit_verify_result res = verify_all(false, NULL);
        cr_assert(res.ok, "%s", res.reason);
        cr_assert_eq(res.last_seq, 4);
}
