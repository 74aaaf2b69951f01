/* SPDX-License-Identifier: Apache-2.0 */
#include <criterion/criterion.h>
#include <fcntl.h>
#include <ftw.h>
#include <string.h>
#include <sys/stat.h>

#include "secrets.h"
#include "util.h"

static char dir[64];

static int rm_entry(const char *p, const struct stat *st, int flag, struct FTW *ftw)
{
        return remove(p);
}

static void setup(void)
{
        snprintf(dir, sizeof(dir), "/tmp/airlock-test-secrets-XXXXXX");
        cr_assert_not_null(mkdtemp(dir));
}

static void teardown(void)
{
        nftw(dir, rm_entry, 16, FTW_DEPTH | FTW_PHYS);
}

TestSuite(secrets, .init = setup, .fini = teardown);

static char *make_file(const char *name, const char *content, mode_t mode)
{
        char *path = xasprintf("%s/%s", dir, name);
        int fd = open(path, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0600);
        cr_assert_geq(fd, 0);
        cr_assert_eq(write_full(fd, content, strlen(content)), 0);
        close(fd);
        cr_assert_eq(chmod(path, mode), 0);
        return path;
}

static struct secrets *load(const char *content)
{
        char *path = make_file("secrets", content, 0600);
        struct secrets *s = NULL;
        struct al_error err = {0};
        int r = secrets_load_file(path, &s, &err);
        cr_assert_eq(r, 0, "load: %s", err.msg);
        free(path);
        return s;
}

static void load_fails(const char *content, const char *msg)
{
        char *path = make_file("secrets", content, 0600);
        struct secrets *s = NULL;
        struct al_error err = {0};
        cr_assert_lt(secrets_load_file(path, &s, &err), 0, "accepted: %s", content);
        cr_assert_null(s);
        cr_assert_not_null(strstr(err.msg, msg), "\"%s\" lacks \"%s\"", err.msg, msg);
        cr_assert_not_null(strstr(err.msg, path), "\"%s\" does not name the file", err.msg);
        free(path);
}

Test(secrets, dotenv)
{
        struct secrets *s = load("# a comment\n"
                                 "\n"
                                 "PLAIN=abc123\n"
                                 "export EXPORTED=exp\n"
                                 "  SPACED = spaced value  \n"
                                 "COMMENTED=value # trailing comment\n"
                                 "HASH_INSIDE=a#b\n"
                                 "DQ=\"double \\\"quoted\\\"\\n# not a comment\"  # comment\n"
                                 "SQ='single $x \\n'\n"
                                 "MULTI=\"line1\n"
                                 "line2\"\n"
                                 "EMPTY=\n"
                                 "CRLF=crlf\r\n"
                                 "LAST=no-newline");
        cr_assert_str_eq(secrets_get(s, "PLAIN"), "abc123");
        cr_assert_str_eq(secrets_get(s, "EXPORTED"), "exp");
        cr_assert_str_eq(secrets_get(s, "SPACED"), "spaced value");
        cr_assert_str_eq(secrets_get(s, "COMMENTED"), "value");
        cr_assert_str_eq(secrets_get(s, "HASH_INSIDE"), "a#b");
        cr_assert_str_eq(secrets_get(s, "DQ"), "double \"quoted\"\n# not a comment");
        cr_assert_str_eq(secrets_get(s, "SQ"), "single $x \\n");
        cr_assert_str_eq(secrets_get(s, "MULTI"), "line1\nline2");
        cr_assert_str_eq(secrets_get(s, "EMPTY"), "");
        cr_assert_str_eq(secrets_get(s, "CRLF"), "crlf");
        cr_assert_str_eq(secrets_get(s, "LAST"), "no-newline");
        secrets_free(s);
}

Test(secrets, dotenv_errors)
{
        load_fails("GOOD=1\nnot a line\n", "line 2: expected NAME=VALUE");
        load_fails("1BAD=x\n", "line 1");
        load_fails("A=1\nB=\"open\n\n", "line 2: unterminated double quote");
        load_fails("A='open\n", "unterminated single quote");
        load_fails("A=\"x\" junk\n", "unexpected text");
        load_fails("A=1\nA=2\n", "line 2: A is already set on line 1");
}

Test(secrets, json)
{
        struct secrets *s = load("  {\"API_KEY\": \"sk-123\", \"OTHER\": \"line\\nbreak\"}\n");
        cr_assert_str_eq(secrets_get(s, "API_KEY"), "sk-123");
        cr_assert_str_eq(secrets_get(s, "OTHER"), "line\nbreak");
        cr_assert_null(secrets_get(s, "AIRLOCK_TEST_SURELY_UNSET"));
        secrets_free(s);

        load_fails("{\"A\": 1}", "value of \"A\" is not a string");
        load_fails("{\"bad-name\": \"x\"}", "not a valid name");
        load_fails("{\"A\": \"x\", \"A\": \"y\"}", "duplicate");
        load_fails("{\"A\": ", "line 1");
        load_fails("[\"x\"]\n", "expected NAME=VALUE");
}

Test(secrets, mode_and_owner_checked)
{
        static const mode_t bad[] = {0644, 0640, 0604, 0660, 0700 | 0007};
        for (size_t i = 0; i < ARRAY_SIZE(bad); i++) {
                char *path = make_file("loose", "A=1\n", bad[i]);
                struct secrets *s = NULL;
                struct al_error err = {0};
                cr_assert_lt(secrets_load_file(path, &s, &err), 0, "mode %o accepted", bad[i]);
                char mode[16];
                snprintf(mode, sizeof(mode), "mode %04o", (unsigned)bad[i]);
                cr_assert_not_null(strstr(err.msg, mode), "%s", err.msg);
                cr_assert_not_null(strstr(err.msg, path), "%s", err.msg);
                cr_assert_not_null(strstr(err.msg, "0600"), "%s", err.msg);
                free(path);
        }

        char *path = make_file("strict", "A=1\n", 0400);
        struct secrets *s = NULL;
        struct al_error err = {0};
        cr_assert_eq(secrets_load_file(path, &s, &err), 0, "%s", err.msg);
        s = secrets_free(s);
        free(path);

        cr_assert_lt(secrets_load_file(dir, &s, &err), 0);
        cr_assert_not_null(strstr(err.msg, "not a regular file"), "%s", err.msg);

        char *missing = xasprintf("%s/missing", dir);
        cr_assert_eq(secrets_load_file(missing, &s, &err), -ENOENT);
        cr_assert_not_null(strstr(err.msg, missing), "%s", err.msg);
        free(missing);

        if (geteuid() != 0)
                return;
        path = make_file("foreign", "A=1\n", 0600);
        cr_assert_eq(chown(path, 65534, 65534), 0);
        cr_assert_lt(secrets_load_file(path, &s, &err), 0);
        cr_assert_not_null(strstr(err.msg, "owned by uid 65534"), "%s", err.msg);
        free(path);
}

Test(secrets, env_fallback)
{
        setenv("AIRLOCK_TEST_FROM_ENV", "env-value", 1);
        setenv("AIRLOCK_TEST_BOTH", "env-loses", 1);
        struct secrets *s = load("AIRLOCK_TEST_BOTH=file-wins\n");
        cr_assert_str_eq(secrets_get(s, "AIRLOCK_TEST_FROM_ENV"), "env-value");
        cr_assert_str_eq(secrets_get(s, "AIRLOCK_TEST_BOTH"), "file-wins");
        secrets_free(s);

        s = secrets_new();
        cr_assert_str_eq(secrets_get(s, "AIRLOCK_TEST_FROM_ENV"), "env-value");
        cr_assert_str_eq(secrets_get(s, "AIRLOCK_TEST_BOTH"), "env-loses");
        secrets_free(s);
        unsetenv("AIRLOCK_TEST_FROM_ENV");
        unsetenv("AIRLOCK_TEST_BOTH");
}

static char *redact(const struct redactor *r, const char *in)
{
        char *out = NULL;
        size_t len = 0;
        cr_assert_eq(redactor_apply(r, in, strlen(in), &out, &len), 0);
        cr_assert_eq(strlen(out), len);
        return out;
}

Test(secrets, expand)
{
        struct secrets *s = load("KEY=sk-live-123\nUNUSED=never-used\n");
        struct secrets_vars vars = {
            .run_id = "run-7", .run_attempt = "2", .sandbox_id = "sb-abc", .account = "acct-9"};
        struct al_error err = {0};
        char *out = NULL;

        cr_assert_eq(secrets_expand(s, "Bearer ${secret:KEY}", &vars, &out, &err), 0, "%s",
                     err.msg);
        cr_assert_str_eq(out, "Bearer sk-live-123");
        free(out);

        cr_assert_eq(secrets_expand(s,
                                    "{\"run\":\"${run.id}\",\"attempt\":${run.attempt},"
                                    "\"sandbox\":\"${sandbox.id}\",\"user\":\"${account}\"}",
                                    &vars, &out, &err),
                     0, "%s", err.msg);
        cr_assert_str_eq(
            out, "{\"run\":\"run-7\",\"attempt\":2,\"sandbox\":\"sb-abc\",\"user\":\"acct-9\"}");
        free(out);

        cr_assert_eq(secrets_expand(s, "$5 and $${literal} and $", &vars, &out, &err), 0);
        cr_assert_str_eq(out, "$5 and ${literal} and $");
        free(out);

        out = (char *)"untouched";
        cr_assert_lt(secrets_expand(s, "x ${secret:MISSING_ONE} y", &vars, &out, &err), 0);
        cr_assert_not_null(strstr(err.msg, "\"MISSING_ONE\" is not set"), "%s", err.msg);
        cr_assert_str_eq(out, "untouched");
        cr_assert_lt(secrets_expand(s, "${run.nope}", &vars, &out, &err), 0);
        cr_assert_not_null(strstr(err.msg, "unknown template variable \"${run.nope}\""), "%s",
                           err.msg);
        cr_assert_lt(secrets_expand(s, "${secret:}", &vars, &out, &err), 0);
        cr_assert_lt(secrets_expand(s, "${secret:a-b}", &vars, &out, &err), 0);
        cr_assert_lt(secrets_expand(s, "open ${run.id", &vars, &out, &err), 0);
        cr_assert_not_null(strstr(err.msg, "unterminated"), "%s", err.msg);
        cr_assert_lt(secrets_expand(s, "${account}", NULL, &out, &err), 0);
        cr_assert_not_null(strstr(err.msg, "${account}"), "%s", err.msg);

        /* What was used is redacted; what was not, is not. */
        char *red = redact(secrets_redactor(s), "k=sk-live-123 u=never-used run-7");
        cr_assert_str_eq(red, "k=[REDACTED] u=never-used run-7");
        free(red);
        secrets_free(s);
}

Test(secrets, expand_limit)
{
        struct secrets *s = secrets_new();
        size_t n = SECRETS_EXPAND_MAX / 5 + 10;
        char *tmpl = xcalloc(n * 9 + 1, 1);
        for (size_t i = 0; i < n; i++)
                memcpy(tmpl + i * 9, "${run.id}", 9);
        struct secrets_vars vars = {.run_id = "12345"};
        struct al_error err = {0};
        char *out = NULL;
        cr_assert_lt(secrets_expand(s, tmpl, &vars, &out, &err), 0);
        cr_assert_not_null(strstr(err.msg, "longer than"), "%s", err.msg);
        free(tmpl);
        secrets_free(s);
}

Test(secrets, redaction_forms)
{
        struct redactor *r = redactor_new();
        /* "token?>" encodes with '+' '/' in the standard alphabet and one '='. */
        const char *secret = "tok?>~en";
        cr_assert_eq(redactor_add(r, secret, strlen(secret)), 0);
        cr_assert_eq(redactor_add(r, secret, strlen(secret)), 0);
        cr_assert_eq(redactor_add(r, "", 0), 0);

        /* base64("tok?>~en") = dG9rPz5+ZW4= ; URL-safe: dG9rPz5-ZW4= */
        char *out = redact(r, "raw tok?>~en std dG9rPz5+ZW4= nopad dG9rPz5+ZW4 "
                              "url dG9rPz5-ZW4= urlnopad dG9rPz5-ZW4. end");
        cr_assert_str_eq(out, "raw [REDACTED] std [REDACTED] nopad [REDACTED] url [REDACTED] "
                              "urlnopad [REDACTED]. end");
        free(out);

        out = redact(r, "tok?>~entok?>~en");
        cr_assert_str_eq(out, "[REDACTED][REDACTED]");
        free(out);
        out = redact(r, "tok?>~e");
        cr_assert_str_eq(out, "tok?>~e");
        free(out);

        char *hook = NULL;
        size_t len = 0;
        cr_assert_eq(redactor_audit_hook(r, "clean", 5, &hook, &len), 0);
        cr_assert_null(hook);
        cr_assert_eq(redactor_audit_hook(r, "x tok?>~en", 10, &hook, &len), 0);
        cr_assert_str_eq(hook, "x [REDACTED]");
        free(hook);

        /* Binary-safe: NUL bytes around a secret. */
        const char bin[] = {'a', '\0', 't', 'o', 'k', '?', '>', '~', 'e', 'n', '\0'};
        cr_assert_eq(redactor_apply(r, bin, sizeof(bin), &out, &len), 0);
        cr_assert_eq(len, 2 + strlen(REDACTOR_MARK) + 1);
        cr_assert_eq(memcmp(out, "a\0[REDACTED]\0", len), 0);
        free(out);
        redactor_free(r);
}

Test(secrets, redaction_longest_first)
{
        struct redactor *r = redactor_new();
        cr_assert_eq(redactor_add(r, "abcd", 4), 0);
        cr_assert_eq(redactor_add(r, "abcdefgh", 8), 0);
        char *out = redact(r, "abcdefgh abcdxy");
        cr_assert_str_eq(out, "[REDACTED] [REDACTED]xy");
        free(out);
        redactor_free(r);
}

static char *stream_all(const struct redactor *r, const char *in, size_t len, const size_t *cuts,
                        size_t ncuts)
{
        struct redactor_stream *st = redactor_stream_new(r);
        struct {
                char *data;
                size_t len;
        } acc = {xcalloc(1, 1), 0};
        size_t pos = 0;
        for (size_t i = 0; i <= ncuts; i++) {
                size_t end = i < ncuts ? cuts[i] : len;
                char *out = NULL;
                size_t n = 0;
                cr_assert_eq(redactor_stream_feed(st, in + pos, end - pos, &out, &n), 0);
                acc.data = xrealloc(acc.data, acc.len + n + 1, 1);
                memcpy(acc.data + acc.len, out, n);
                acc.len += n;
                free(out);
                pos = end;
        }
        char *out = NULL;
        size_t n = 0;
        cr_assert_eq(redactor_stream_finish(st, &out, &n), 0);
        acc.data = xrealloc(acc.data, acc.len + n + 1, 1);
        memcpy(acc.data + acc.len, out, n);
        acc.len += n;
        acc.data[acc.len] = '\0';
        free(out);
        redactor_stream_free(st);
        return acc.data;
}

Test(secrets, redaction_stream_split)
{
        struct redactor *r = redactor_new();
        const char *secret = "sk-ant-0123456789";
        cr_assert_eq(redactor_add(r, secret, strlen(secret)), 0);
        cr_assert_eq(redactor_add(r, "pw", 2), 0);
        const char *in = "start sk-ant-0123456789 mid c2stYW50LTAxMjM0NTY3ODk= pw end pw";
        size_t len = strlen(in);
        char *want = redact(r, in);
        cr_assert_null(strstr(want, "sk-ant"));
        cr_assert_null(strstr(want, "c2stYW50"));

        /* Every single split point, then random chunkings. */
        for (size_t cut = 0; cut <= len; cut++) {
                char *got = stream_all(r, in, len, &cut, 1);
                cr_assert_str_eq(got, want, "cut at %zu", cut);
                free(got);
        }
        unsigned seed = 1;
        for (int round = 0; round < 500; round++) {
                size_t cuts[8], n = 0, last = 0;
                for (int i = 0; i < 8; i++) {
                        seed = seed * 1103515245 + 12345;
                        size_t c = last + (seed >> 16) % 12;
                        if (c > len)
                                break;
                        cuts[n++] = last = c;
                }
                char *got = stream_all(r, in, len, cuts, n);
                cr_assert_str_eq(got, want, "round %d", round);
                free(got);
        }
        /* Bytes one at a time. */
        size_t all[128];
        for (size_t i = 0; i < len; i++)
                all[i] = i;
        char *got = stream_all(r, in, len, all, len);
        cr_assert_str_eq(got, want);
        free(got);
        free(want);
        redactor_free(r);
}

Test(secrets, redaction_stream_holds_back_little)
{
        struct redactor *r = redactor_new();
        cr_assert_eq(redactor_add(r, "secret", 6), 0);
        /* Only a tail that could still begin a value is held back. */
        struct redactor_stream *st = redactor_stream_new(r);
        char *out = NULL;
        size_t n = 0;
        const char *in = "0123456789abcdefghij";
        cr_assert_eq(redactor_stream_feed(st, in, 20, &out, &n), 0);
        cr_assert_eq(n, 20, "held back %zu", 20 - n);
        free(out);
        cr_assert_eq(redactor_stream_feed(st, " and sec", 8, &out, &n), 0);
        cr_assert_eq(n, 5);
        cr_assert_eq(memcmp(out, " and ", 5), 0);
        free(out);
        cr_assert_eq(redactor_stream_feed(st, "ond", 3, &out, &n), 0);
        cr_assert_str_eq(out, "second");
        free(out);
        /* Spelt fully percent-encoded, the hex form "736563726574" spans 36
         * bytes: all of them are held back until the last one decides. */
        const char *pct = "%37%33%36%35%36%33%37%32%36%35%37%34";
        cr_assert_eq(redactor_stream_feed(st, pct, 35, &out, &n), 0);
        cr_assert_eq(n, 0);
        free(out);
        cr_assert_eq(redactor_stream_feed(st, pct + 35, 1, &out, &n), 0);
        cr_assert_str_eq(out, REDACTOR_MARK);
        free(out);
        cr_assert_eq(redactor_stream_feed(st, "xy", 2, &out, &n), 0);
        cr_assert_str_eq(out, "xy");
        free(out);
        cr_assert_eq(redactor_stream_finish(st, &out, &n), 0);
        cr_assert_eq(n, 0);
        free(out);
        redactor_stream_free(st);

        /* With no patterns, or no redactor, nothing is held back. */
        char *copy = redact(NULL, "as is");
        cr_assert_str_eq(copy, "as is");
        free(copy);
        st = redactor_stream_new(NULL);
        cr_assert_eq(redactor_stream_feed(st, in, 20, &out, &n), 0);
        cr_assert_eq(n, 20);
        free(out);
        redactor_stream_free(st);
        struct redactor *empty = redactor_new();
        st = redactor_stream_new(empty);
        cr_assert_eq(redactor_stream_feed(st, in, 20, &out, &n), 0);
        cr_assert_eq(n, 20);
        free(out);
        redactor_stream_free(st);
        redactor_free(empty);
        redactor_free(r);
}

Test(secrets, redactor_limits)
{
        struct redactor *r = redactor_new();
        char *big = xcalloc(REDACTOR_VALUE_MAX + 2, 1);
        memset(big, 'x', REDACTOR_VALUE_MAX + 1);
        cr_assert_eq(redactor_add(r, big, REDACTOR_VALUE_MAX + 1), -E2BIG);
        free(big);
        redactor_free(r);
}
