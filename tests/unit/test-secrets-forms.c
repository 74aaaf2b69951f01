/* SPDX-License-Identifier: Apache-2.0 */
#include <criterion/criterion.h>
#include <string.h>

#include "secrets.h"
#include "util.h"

/* The forms a secret leaks in besides its raw bytes: hex, percent-encoded,
 * base64 at any offset, reversed. Each must be caught by redactor_apply,
 * by the stream redactor at every split, and by the same-length scrubber. */

static const char secret[] = "sk-Live_9f/Qz+Ab=tok";

static char *redact(const struct redactor *r, const char *in)
{
        char *out = NULL;
        size_t len = 0;
        cr_assert_eq(redactor_apply(r, in, strlen(in), &out, &len), 0);
        return out;
}

static const char b64std[] = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";
static const char b64url[] = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-_";

static char *b64(const char *in, size_t len, bool url)
{
        const char *t = url ? b64url : b64std;
        char *out = xcalloc(len * 2 + 8, 1);
        size_t o = 0, i = 0;
        const unsigned char *p = (const unsigned char *)in;
        for (; i + 3 <= len; i += 3) {
                uint32_t v = (uint32_t)p[i] << 16 | (uint32_t)p[i + 1] << 8 | p[i + 2];
                out[o++] = t[v >> 18];
                out[o++] = t[(v >> 12) & 63];
                out[o++] = t[(v >> 6) & 63];
                out[o++] = t[v & 63];
        }
        if (len - i == 1) {
                uint32_t v = (uint32_t)p[i] << 16;
                out[o++] = t[v >> 18];
                out[o++] = t[(v >> 12) & 63];
                out[o++] = '=';
                out[o++] = '=';
        } else if (len - i == 2) {
                uint32_t v = (uint32_t)p[i] << 16 | (uint32_t)p[i + 1] << 8;
                out[o++] = t[v >> 18];
                out[o++] = t[(v >> 12) & 63];
                out[o++] = t[(v >> 6) & 63];
                out[o++] = '=';
        }
        return out;
}

static char *hex(const char *in, bool up)
{
        const char *digits = up ? "0123456789ABCDEF" : "0123456789abcdef";
        size_t n = strlen(in);
        char *out = xcalloc(2 * n + 1, 1);
        for (size_t i = 0; i < n; i++) {
                out[2 * i] = digits[(unsigned char)in[i] >> 4];
                out[2 * i + 1] = digits[(unsigned char)in[i] & 15];
        }
        return out;
}

/* Percent-encode the bytes whose index has bit `mask` set (cycling). */
static char *pct(const char *in, unsigned mask, bool up)
{
        size_t n = strlen(in);
        char *out = xcalloc(3 * n + 1, 1);
        size_t o = 0;
        for (size_t i = 0; i < n; i++) {
                if (mask & (1u << (i % 8))) {
                        o += (size_t)snprintf(out + o, 4, up ? "%%%02X" : "%%%02x",
                                              (unsigned char)in[i]);
                } else
                        out[o++] = in[i];
        }
        return out;
}

static char *reversed(const char *in)
{
        size_t n = strlen(in);
        char *out = xcalloc(n + 1, 1);
        for (size_t i = 0; i < n; i++)
                out[i] = in[n - 1 - i];
        return out;
}

/* Every leaked form of `secret` that the redactor must catch, each inside
 * some text. */
static char **forms(size_t *ret_n)
{
        char **v = NULL;
        size_t n = 0;
        char *s;

        v = strv_append(v, &n, secret);
        s = hex(secret, false);
        v = strv_append(v, &n, s);
        free(s);
        s = hex(secret, true);
        v = strv_append(v, &n, s);
        free(s);
        for (unsigned mask = 1; mask < 256; mask = mask * 3 + 1)
                for (int up = 0; up <= 1; up++) {
                        s = pct(secret, mask, up);
                        v = strv_append(v, &n, s);
                        free(s);
                }
        s = pct(secret, 0xff, true);
        v = strv_append(v, &n, s);
        free(s);
        s = reversed(secret);
        v = strv_append(v, &n, s);
        free(s);
        /* base64 at every offset inside a longer text, both alphabets. */
        for (int url = 0; url <= 1; url++)
                for (size_t pre = 0; pre < 6; pre++) {
                        char plain[128];
                        snprintf(plain, sizeof(plain), "%.*sAuthorization: Bearer %s\r\n", (int)pre,
                                 "xyzxyz", secret);
                        s = b64(plain, strlen(plain), url);
                        v = strv_append(v, &n, s);
                        free(s);
                }
        /* JSON string escapes, as a JSON echo of the request carries it:
         * "\/" and "\u00XX" for some of the bytes. */
        {
                char json[256];
                size_t o = 0;
                for (size_t i = 0; secret[i]; i++) {
                        if (secret[i] == '/')
                                o += (size_t)snprintf(json + o, sizeof(json) - o, "\\/");
                        else if (i % 4 == 1)
                                o += (size_t)snprintf(json + o, sizeof(json) - o,
                                                      i % 8 == 1 ? "\\u%04x" : "\\u%04X",
                                                      (unsigned char)secret[i]);
                        else
                                json[o++] = secret[i];
                        json[o] = '\0';
                }
                v = strv_append(v, &n, json);
        }
        /* Percent-encoded base64, as a query parameter carries it. */
        s = b64(secret, strlen(secret), false);
        char *p = pct(s, 0xff, false);
        v = strv_append(v, &n, p);
        free(p);
        free(s);
        *ret_n = n;
        return v;
}

static struct redactor *make(void)
{
        struct redactor *r = redactor_new();
        cr_assert_eq(redactor_add(r, secret, strlen(secret)), 0);
        return r;
}

/* The secret can be recovered from `out`: decode every form and look. */
static bool leaks(const char *out)
{
        if (strstr(out, secret))
                return true;
        char *h = hex(secret, false), *H = hex(secret, true), *rv = reversed(secret);
        bool bad = strcasestr(out, h) || strstr(out, rv);
        free(h);
        free(H);
        free(rv);
        /* Any 8-character stretch of the secret's base64 at any offset. */
        for (int url = 0; url <= 1 && !bad; url++)
                for (size_t pre = 0; pre < 3 && !bad; pre++) {
                        char plain[64];
                        snprintf(plain, sizeof(plain), "%.*s%s", (int)pre, "\x01\x01", secret);
                        char *e = b64(plain, strlen(plain), url);
                        for (size_t k = 4; k + 8 <= strlen(e) - 4 && !bad; k++) {
                                char piece[9];
                                memcpy(piece, e + k, 8);
                                piece[8] = '\0';
                                bad = strstr(out, piece) != NULL;
                        }
                        free(e);
                }
        return bad;
}

Test(secrets_forms, every_form_is_redacted)
{
        struct redactor *r = make();
        size_t n = 0;
        char **v = forms(&n);
        for (size_t i = 0; i < n; i++) {
                char *in = xasprintf("before %s after", v[i]);
                char *out = redact(r, in);
                cr_assert_not_null(strstr(out, REDACTOR_MARK), "not redacted: %s", v[i]);
                cr_assert(!leaks(out), "leaks: %s -> %s", in, out);
                cr_assert(strncmp(out, "before ", 7) == 0, "%s", out);
                free(out);
                free(in);
        }
        strv_free(v);
        redactor_free(r);
}

Test(secrets_forms, innocent_text_passes)
{
        struct redactor *r = make();
        const char *text = "GET /v1/models HTTP/1.1 200 OK {\"id\": \"abc\", \"n\": 42} "
                           "73 6b 2d %41%42 dG9rZW4= ok";
        char *out = redact(r, text);
        cr_assert_str_eq(out, text);
        free(out);
        redactor_free(r);
}

static char *stream_all(const struct redactor *r, const char *in, size_t len, size_t step)
{
        struct redactor_stream *st = redactor_stream_new(r);
        char *acc = xcalloc(1, 1);
        size_t alen = 0;
        for (size_t pos = 0; pos <= len; pos += step) {
                size_t n = len - pos < step ? len - pos : step;
                char *out = NULL;
                size_t olen = 0;
                cr_assert_eq(redactor_stream_feed(st, in + pos, n, &out, &olen), 0);
                acc = xrealloc(acc, alen + olen + 1, 1);
                memcpy(acc + alen, out, olen);
                alen += olen;
                free(out);
        }
        char *out = NULL;
        size_t olen = 0;
        cr_assert_eq(redactor_stream_finish(st, &out, &olen), 0);
        acc = xrealloc(acc, alen + olen + 1, 1);
        memcpy(acc + alen, out, olen);
        alen += olen;
        acc[alen] = '\0';
        free(out);
        redactor_stream_free(st);
        return acc;
}

Test(secrets_forms, stream_catches_every_form_at_every_split)
{
        struct redactor *r = make();
        size_t n = 0;
        char **v = forms(&n);
        for (size_t i = 0; i < n; i++) {
                char *in = xasprintf("[%s]", v[i]);
                char *want = redact(r, in);
                for (size_t step = 1; step <= strlen(in) + 1; step++) {
                        char *got = stream_all(r, in, strlen(in), step);
                        cr_assert_str_eq(got, want, "form %s, step %zu", v[i], step);
                        free(got);
                }
                free(want);
                free(in);
        }
        strv_free(v);
        redactor_free(r);
}

static char *scrub_all(const struct redactor *r, const char *in, size_t len, size_t step)
{
        struct redactor_scrub *st = redactor_scrub_new(r);
        char *acc = xcalloc(len + 1, 1);
        size_t alen = 0;
        for (size_t pos = 0; pos < len; pos += step) {
                size_t n = len - pos < step ? len - pos : step;
                char *out = NULL;
                size_t olen = 0;
                cr_assert_eq(redactor_scrub_feed(st, in + pos, n, &out, &olen), 0);
                cr_assert_leq(alen + olen, len);
                memcpy(acc + alen, out, olen);
                alen += olen;
                free(out);
                cr_assert_lt(redactor_scrub_held(st), 6 * 2 * sizeof(secret) + 16);
        }
        char *out = NULL;
        size_t olen = 0;
        cr_assert_eq(redactor_scrub_finish(st, &out, &olen), 0);
        memcpy(acc + alen, out, olen);
        alen += olen;
        free(out);
        cr_assert_eq(alen, len, "same length");
        cr_assert_eq(redactor_scrub_held(st), 0);
        redactor_scrub_free(st);
        return acc;
}

Test(secrets_forms, scrub_keeps_length_and_hides_every_form)
{
        struct redactor *r = make();
        size_t n = 0;
        char **v = forms(&n);
        for (size_t i = 0; i < n; i++) {
                char *in = xasprintf("{\"h\": \"%s\", \"x\": 1}", v[i]);
                size_t len = strlen(in);
                char *first = NULL;
                for (size_t step = 1; step <= len; step += (step < 8 ? 1 : 7)) {
                        char *got = scrub_all(r, in, len, step);
                        cr_assert(!leaks(got), "leaks: %s", got);
                        size_t stars = 0;
                        for (const char *c = got; *c; c++)
                                stars += *c == '*';
                        cr_assert_geq(stars, strlen(secret), "not scrubbed: %s", got);
                        cr_assert(strncmp(got, "{\"h\": \"", 7) == 0, "%s", got);
                        cr_assert_str_eq(got + len - 10, "\", \"x\": 1}", "%s", got);
                        if (!first)
                                first = xstrdup(got);
                        else
                                cr_assert_str_eq(got, first, "step %zu", step);
                        free(got);
                }
                free(first);
                free(in);
        }
        strv_free(v);
        redactor_free(r);
}

Test(secrets_forms, scrub_overlapping_and_repeated)
{
        struct redactor *r = redactor_new();
        cr_assert_eq(redactor_add(r, "abab", 4), 0);
        char *got = scrub_all(r, "xababab-abab", 12, 1);
        cr_assert_str_eq(got, "x******-****");
        free(got);
        redactor_free(r);

        /* Nothing known: the scrubber passes bytes straight through. */
        got = scrub_all(NULL, "plain", 5, 2);
        cr_assert_str_eq(got, "plain");
        free(got);
}
