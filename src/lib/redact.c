/* SPDX-License-Identifier: Apache-2.0 */
#include <fcntl.h>
#include <jansson.h>
#include <stdbool.h>
#include <string.h>
#include <sys/stat.h>

#include "secrets-internal.h"
#include "secrets.h"
#include "util.h"

/* Redactor. */

struct pattern {
        char *bytes;
        size_t len;
        bool icase; /* hex digits: either case matches */
};

struct redactor {
        struct pattern *pats; /* longest first */
        size_t n;
        size_t max_len; /* the longest pattern */
        /* For each byte, the patterns (in order) a match starting with it
         * can be of: those that begin with it, and all of them for "%". */
        uint32_t *starts[256];
        size_t n_starts[256];
};

struct redactor *redactor_new(void)
{
        return xcalloc(1, sizeof(struct redactor));
}

struct redactor *redactor_free(struct redactor *r)
{
        if (!r)
                return NULL;
        for (size_t i = 0; i < r->n; i++) {
                explicit_bzero(r->pats[i].bytes, r->pats[i].len);
                free(r->pats[i].bytes);
        }
        free(r->pats);
        for (size_t c = 0; c < 256; c++)
                free(r->starts[c]);
        free(r);
        return NULL;
}

static unsigned char lower(unsigned char c)
{
        return c >= 'A' && c <= 'Z' ? (unsigned char)(c - 'A' + 'a') : c;
}

static int hexval(unsigned char c)
{
        if (c >= '0' && c <= '9')
                return c - '0';
        c = lower(c);
        if (c >= 'a' && c <= 'f')
                return c - 'a' + 10;
        return -1;
}

/* match_at(): the input ends before the pattern could be told apart from
 * it; more input decides. */
#define MATCH_MORE SIZE_MAX

static bool add_pattern(struct redactor *r, const char *p, size_t len, bool icase)
{
        size_t at = r->n;

        for (size_t i = 0; i < r->n; i++) {
                if (r->pats[i].len == len && memcmp(r->pats[i].bytes, p, len) == 0) {
                        /* Another value's hex form: either case then. */
                        bool widened = icase && !r->pats[i].icase;
                        r->pats[i].icase |= icase;
                        return widened;
                }
                if (r->pats[i].len < len && at == r->n)
                        at = i;
        }
        r->pats = xrealloc(r->pats, r->n + 1, sizeof(*r->pats));
        memmove(r->pats + at + 1, r->pats + at, (r->n - at) * sizeof(*r->pats));
        r->pats[at].bytes = xcalloc(len, 1);
        memcpy(r->pats[at].bytes, p, len);
        r->pats[at].len = len;
        r->pats[at].icase = icase;
        r->n++;
        if (len > r->max_len)
                r->max_len = len;
        return true;
}

static bool can_start(const struct pattern *p, unsigned char c)
{
        unsigned char f = (unsigned char)p->bytes[0];
        return c == f || c == '%' || c == '\\' || c == '&' || (c == '+' && f == ' ') ||
               (p->icase && lower(c) == f);
}

static void index_patterns(struct redactor *r)
{
        for (size_t c = 0; c < 256; c++) {
                size_t n = 0;
                for (size_t k = 0; k < r->n; k++)
                        n += can_start(&r->pats[k], (unsigned char)c);
                free(r->starts[c]);
                r->starts[c] = n ? xcalloc(n, sizeof(uint32_t)) : NULL;
                r->n_starts[c] = 0;
                for (size_t k = 0; k < r->n; k++)
                        if (can_start(&r->pats[k], (unsigned char)c))
                                r->starts[c][r->n_starts[c]++] = (uint32_t)k;
        }
}

/* One pattern byte spelt as a JSON string escape at d[0..avail): the input
 * length (2 or 6), 0 when it is not one, MATCH_MORE when the input ends
 * inside it. Only ASCII: "\u00e9" is a character, not the byte 0xe9. */
static size_t json_escape(const unsigned char *d, size_t avail, unsigned char want, bool icase)
{
        static const char shorts[][2] = {{'/', '/'},  {'"', '"'},  {'\\', '\\'}, {'b', '\b'},
                                         {'f', '\f'}, {'n', '\n'}, {'r', '\r'},  {'t', '\t'}};
        if (avail < 2)
                return MATCH_MORE;
        for (size_t i = 0; i < ARRAY_SIZE(shorts); i++)
                if (d[1] == (unsigned char)shorts[i][0])
                        return (unsigned char)shorts[i][1] == want ? 2 : 0;
        if (d[1] != 'u')
                return 0;
        unsigned v = 0;
        for (size_t i = 2; i < 6; i++) {
                if (i >= avail)
                        return MATCH_MORE;
                int h = hexval(d[i]);
                if (h < 0)
                        return 0;
                v = v << 4 | (unsigned)h;
        }
        if (v >= 0x80)
                return 0;
        return v == want || (icase && lower((unsigned char)v) == want) ? 6 : 0;
}

/* One pattern byte spelt as an HTML character reference at d[0..avail) (an
 * error page echoing its request escapes &, <, >, " and ' so): the input
 * length, 0 when it is not one, MATCH_MORE when the input ends inside it.
 * Named references of those five, in either case, and numeric ones
 * ("&#39;", "&#039;", "&#x27;") of at most 8 digits, ';' always. */
static size_t html_ref(const unsigned char *d, size_t avail, unsigned char want, bool icase)
{
        static const struct {
                const char *name;
                unsigned char c;
        } named[] = {{"amp;", '&'}, {"lt;", '<'}, {"gt;", '>'}, {"quot;", '"'}, {"apos;", '\''}};
        if (avail < 2)
                return MATCH_MORE;
        if (d[1] != '#') {
                bool more = false;
                for (size_t i = 0; i < ARRAY_SIZE(named); i++) {
                        size_t n = strlen(named[i].name), k = 0;
                        while (k < n && 1 + k < avail &&
                               lower(d[1 + k]) == (unsigned char)named[i].name[k])
                                k++;
                        if (k == n)
                                return named[i].c == want ? 1 + n : 0;
                        more = more || 1 + k == avail;
                }
                return more ? MATCH_MORE : 0;
        }
        size_t k = 2;
        bool hex = false;
        if (k < avail && (d[k] == 'x' || d[k] == 'X')) {
                hex = true;
                k++;
        }
        unsigned v = 0;
        size_t digits = 0;
        for (;; k++) {
                if (k >= avail)
                        return MATCH_MORE;
                int h = hex ? hexval(d[k]) : (d[k] >= '0' && d[k] <= '9' ? d[k] - '0' : -1);
                if (h < 0)
                        break;
                if (++digits > 8)
                        return 0;
                v = v * (hex ? 16u : 10u) + (unsigned)h;
        }
        if (digits == 0 || d[k] != ';' || v >= 0x80)
                return 0;
        return v == want || (icase && lower((unsigned char)v) == want) ? k + 1 : 0;
}

/* The length of the input at d[0..avail) that spells pattern p, or 0. Each
 * byte of the pattern may appear as itself, percent-encoded ("%2F" or
 * "%2f"; "+" for a space) as URLs and form bodies carry it, or as a JSON
 * string escape ("\/", "\u002f") as a JSON echo of the request carries
 * it, or as an HTML character reference ("&amp;", "&#39;") as an error
 * page echoing it writes it, so that any subset of the value's bytes may
 * be encoded; a hex
 * pattern matches in either case. */
static size_t match_at(const struct pattern *p, const unsigned char *d, size_t avail)
{
        size_t k = 0;
        bool more = false;

        for (size_t j = 0; j < p->len; j++) {
                unsigned char want = (unsigned char)p->bytes[j];
                if (k >= avail)
                        return MATCH_MORE;
                unsigned char c = d[k];
                if (c == '&') {
                        size_t m = html_ref(d + k, avail - k, want, p->icase);
                        /* The input ends inside a reference: more decides,
                         * unless the value's own '&' matches as it is. */
                        if (m == MATCH_MORE && c != want)
                                return MATCH_MORE;
                        if (m == MATCH_MORE) {
                                more = true;
                                m = 0;
                        }
                        /* "&amp;" for a '&' of the value, unless the value
                         * goes on with that text itself. */
                        if (m && !(want == '&' && p->len - j >= m &&
                                   memcmp(p->bytes + j, d + k, m) == 0)) {
                                k += m;
                                continue;
                        }
                }
                if (c == want || (p->icase && lower(c) == want)) {
                        k++;
                        continue;
                }
                if (c == '+' && want == ' ') {
                        k++;
                        continue;
                }
                if (c == '%' && avail - k < 3)
                        return MATCH_MORE;
                if (c == '%') {
                        int hi = hexval(d[k + 1]), lo = hexval(d[k + 2]);
                        unsigned char v = hi >= 0 && lo >= 0
                                              ? (unsigned char)((unsigned)hi << 4 | (unsigned)lo)
                                              : 0;
                        if (hi >= 0 && lo >= 0 && (v == want || (p->icase && lower(v) == want))) {
                                k += 3;
                                continue;
                        }
                }
                if (c == '\\') {
                        size_t m = json_escape(d + k, avail - k, want, p->icase);
                        if (m == MATCH_MORE)
                                return MATCH_MORE;
                        if (m) {
                                k += m;
                                continue;
                        }
                }
                return more ? MATCH_MORE : 0;
        }
        return k;
}

/* The first pattern (longest first) spelt at d[0..avail), and its input
 * length; with `longest`, the longest input any pattern spans there. Unless
 * `final`, MATCH_MORE when some pattern could still match with more input:
 * the caller holds the bytes from here on back until it knows. */
static size_t match_any(const struct redactor *r, const unsigned char *d, size_t avail,
                        bool longest, bool final)
{
        size_t best = 0;
        const uint32_t *cand = r->starts[d[0]];

        for (size_t i = 0; i < r->n_starts[d[0]]; i++) {
                size_t m = match_at(&r->pats[cand[i]], d, avail);
                if (m == MATCH_MORE) {
                        if (!final)
                                return MATCH_MORE;
                        continue;
                }
                if (m > best) {
                        best = m;
                        if (!longest)
                                break;
                }
        }
        return best;
}

static const char b64_std[] = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";
static const char b64_url[] = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-_";

/* base64 in the four spellings a secret may leak in: standard or URL-safe
 * alphabet, padded or not. */
static size_t base64_variant(const unsigned char *in, size_t len, bool url, bool pad, char *out)
{
        const char *t = url ? b64_url : b64_std;
        size_t o = 0, i = 0;

        for (; i + 3 <= len; i += 3) {
                uint32_t v = (uint32_t)in[i] << 16 | (uint32_t)in[i + 1] << 8 | in[i + 2];
                out[o++] = t[v >> 18];
                out[o++] = t[(v >> 12) & 63];
                out[o++] = t[(v >> 6) & 63];
                out[o++] = t[v & 63];
        }
        if (len - i == 1) {
                uint32_t v = (uint32_t)in[i] << 16;
                out[o++] = t[v >> 18];
                out[o++] = t[(v >> 12) & 63];
                if (pad) {
                        out[o++] = '=';
                        out[o++] = '=';
                }
        } else if (len - i == 2) {
                uint32_t v = (uint32_t)in[i] << 16 | (uint32_t)in[i + 1] << 8;
                out[o++] = t[v >> 18];
                out[o++] = t[(v >> 12) & 63];
                out[o++] = t[(v >> 6) & 63];
                if (pad)
                        out[o++] = '=';
        }
        return o;
}

/* A value inside a longer text is base64-encoded at one of three offsets
 * from a 3-byte group; the characters that depend on its bits alone are the
 * same wherever it sits. For offset a (bytes before it in its group) those
 * are the 6-bit groups wholly inside bits [8a, 8a + 8 len). */
static size_t base64_core(const unsigned char *in, size_t len, size_t a, bool url, char *out)
{
        const char *t = url ? b64_url : b64_std;
        size_t bits = 8 * (a + len), o = 0;

        for (size_t c = (8 * a + 5) / 6; 6 * c + 6 <= bits; c++) {
                size_t bit = 6 * c;
                unsigned v = 0;
                for (size_t b = bit; b < bit + 6; b++) {
                        size_t byte = b / 8;
                        unsigned x = byte < a ? 0 : in[byte - a];
                        v = v << 1 | ((x >> (7 - b % 8)) & 1);
                }
                out[o++] = t[v];
        }
        return o;
}

/* Shorter base64 cores would hide innocent text for little gain. */
#define BASE64_CORE_MIN    4
#define PATTERNS_PER_VALUE 14

int redactor_add(struct redactor *r, const char *value, size_t len)
{
        if (!r || !value)
                return -EINVAL;
        if (len == 0)
                return 0;
        if (len > REDACTOR_VALUE_MAX)
                return -E2BIG;
        if (r->n + PATTERNS_PER_VALUE > REDACTOR_PATTERNS_MAX)
                return -E2BIG;

        const unsigned char *v = (const unsigned char *)value;
        bool added = add_pattern(r, value, len, false);
        _cleanup_free_ char *enc = xcalloc(2 * len + 8, 1);
        for (int url = 0; url <= 1; url++) {
                for (int pad = 0; pad <= 1; pad++) {
                        size_t n = base64_variant(v, len, url, pad, enc);
                        added |= add_pattern(r, enc, n, false);
                        explicit_bzero(enc, n);
                }
                for (size_t a = 0; a < 3; a++) {
                        size_t n = base64_core(v, len, a, url, enc);
                        if (n >= BASE64_CORE_MIN)
                                added |= add_pattern(r, enc, n, false);
                        explicit_bzero(enc, n);
                }
        }
        static const char hex[] = "0123456789abcdef";
        for (size_t i = 0; i < len; i++) {
                enc[2 * i] = hex[v[i] >> 4];
                enc[2 * i + 1] = hex[v[i] & 15];
        }
        added |= add_pattern(r, enc, 2 * len, true);
        for (size_t i = 0; i < len; i++)
                enc[i] = value[len - 1 - i];
        added |= add_pattern(r, enc, len, false);
        explicit_bzero(enc, 2 * len);
        if (added)
                index_patterns(r);
        return 0;
}

/* Redact data[0..len) into out. Unless final, stop at the first position
 * where more input could still complete a match; returns the number of
 * bytes consumed. */
static int redact_into(const struct redactor *r, const char *data, size_t len, bool final,
                       struct sbuf *out, size_t *ret_consumed, size_t *ret_hits)
{
        static const struct redactor none = {0};
        const unsigned char *d = (const unsigned char *)data;
        size_t i = 0, lit = 0, hits = 0;
        int ret;

        if (!r)
                r = &none;
        while (i < len) {
                size_t m = match_any(r, d + i, len - i, false, final);
                if (m == MATCH_MORE)
                        break;
                if (m == 0) {
                        i++;
                        continue;
                }
                ret = sbuf_append(out, data + lit, i - lit);
                if (ret < 0)
                        return ret;
                ret = sbuf_append(out, REDACTOR_MARK, strlen(REDACTOR_MARK));
                if (ret < 0)
                        return ret;
                hits++;
                i += m;
                lit = i;
        }
        ret = sbuf_append(out, data + lit, i - lit);
        if (ret < 0)
                return ret;
        *ret_consumed = i;
        if (ret_hits)
                *ret_hits = hits;
        return 0;
}

int redactor_apply(const struct redactor *r, const char *in, size_t len, char **ret,
                   size_t *ret_len)
{
        struct sbuf out = {.max = SIZE_MAX - 1};
        size_t consumed;

        if (!in && len)
                return -EINVAL;
        int e = redact_into(r, in ? in : "", len, true, &out, &consumed, NULL);
        if (e < 0) {
                sbuf_wipe(&out);
                return e;
        }
        *ret = sbuf_take(&out, ret_len);
        return 0;
}

int redactor_audit_hook(void *userdata, const char *in, size_t len, char **ret, size_t *ret_len)
{
        const struct redactor *r = userdata;
        struct sbuf out = {.max = SIZE_MAX - 1};
        size_t consumed, hits;

        if (!in && len)
                return -EINVAL;
        int e = redact_into(r, in ? in : "", len, true, &out, &consumed, &hits);
        if (e < 0) {
                sbuf_wipe(&out);
                return e;
        }
        if (hits == 0) {
                sbuf_wipe(&out);
                *ret = NULL;
                return 0;
        }
        *ret = sbuf_take(&out, ret_len);
        return 0;
}

struct redactor_stream {
        const struct redactor *r;
        struct sbuf hold;
};

struct redactor_stream *redactor_stream_new(const struct redactor *r)
{
        struct redactor_stream *st = xcalloc(1, sizeof(*st));
        st->r = r;
        st->hold.max = SIZE_MAX - 1;
        return st;
}

struct redactor_stream *redactor_stream_free(struct redactor_stream *st)
{
        if (!st)
                return NULL;
        sbuf_wipe(&st->hold);
        free(st);
        return NULL;
}

int redactor_stream_feed(struct redactor_stream *st, const char *in, size_t len, char **ret,
                         size_t *ret_len)
{
        if (!st || (!in && len))
                return -EINVAL;
        int e = sbuf_append(&st->hold, in ? in : "", len);
        if (e < 0)
                return e;

        struct sbuf out = {.max = SIZE_MAX - 1};
        size_t consumed = 0;
        e = redact_into(st->r, st->hold.data, st->hold.len, false, &out, &consumed, NULL);
        if (e < 0) {
                sbuf_wipe(&out);
                return e;
        }
        /* What is held back is shorter than the longest pattern. */
        memmove(st->hold.data, st->hold.data + consumed, st->hold.len - consumed);
        st->hold.len -= consumed;
        st->hold.data[st->hold.len] = '\0';
        *ret = sbuf_take(&out, ret_len);
        return 0;
}

int redactor_stream_finish(struct redactor_stream *st, char **ret, size_t *ret_len)
{
        if (!st)
                return -EINVAL;
        struct sbuf out = {.max = SIZE_MAX - 1};
        size_t consumed = 0;
        int e = redact_into(st->r, st->hold.data ? st->hold.data : "", st->hold.len, true, &out,
                            &consumed, NULL);
        if (e < 0) {
                sbuf_wipe(&out);
                return e;
        }
        if (st->hold.data)
                explicit_bzero(st->hold.data, st->hold.cap);
        st->hold.len = 0;
        *ret = sbuf_take(&out, ret_len);
        return 0;
}

/* Same-length scrubbing. */

struct redactor_scrub {
        const struct redactor *r;
        struct sbuf hold; /* input not yet given out, as it came */
        size_t masked;    /* bytes from hold[0] on inside a match already found */
        uint64_t hits;
};

struct redactor_scrub *redactor_scrub_new(const struct redactor *r)
{
        struct redactor_scrub *st = xcalloc(1, sizeof(*st));
        st->r = r;
        st->hold.max = SIZE_MAX - 1;
        return st;
}

struct redactor_scrub *redactor_scrub_free(struct redactor_scrub *st)
{
        if (!st)
                return NULL;
        sbuf_wipe(&st->hold);
        free(st);
        return NULL;
}

uint64_t redactor_scrub_hits(const struct redactor_scrub *st)
{
        return st ? st->hits : 0;
}

/* Every byte inside some match becomes '*'. A byte is final once every
 * position at or before it has been tried, so overlapping matches are all
 * covered and nothing is looked at twice. */
static int scrub(struct redactor_scrub *st, bool final, char **ret, size_t *ret_len)
{
        static const struct redactor none = {0};
        const struct redactor *r = st->r ? st->r : &none;
        const unsigned char *d = (const unsigned char *)(st->hold.data ? st->hold.data : "");
        size_t len = st->hold.len, i = 0;
        char *out = xcalloc(len + 1, 1);

        for (; i < len; i++) {
                size_t m = match_any(r, d + i, len - i, true, final);
                if (m == MATCH_MORE)
                        break;
                if (m > 0) {
                        st->hits++;
                        if (i + m > st->masked)
                                st->masked = i + m;
                }
                out[i] = i < st->masked ? '*' : (char)d[i];
        }
        if (i > 0) {
                explicit_bzero(st->hold.data, i);
                memmove(st->hold.data, st->hold.data + i, len - i);
                st->hold.len -= i;
                st->hold.data[st->hold.len] = '\0';
        }
        st->masked = st->masked > i ? st->masked - i : 0;
        *ret = out;
        *ret_len = i;
        return 0;
}

int redactor_scrub_feed(struct redactor_scrub *st, const char *in, size_t len, char **ret,
                        size_t *ret_len)
{
        if (!st || (!in && len))
                return -EINVAL;
        int e = sbuf_append(&st->hold, in ? in : "", len);
        if (e < 0)
                return e;
        return scrub(st, false, ret, ret_len);
}

int redactor_scrub_finish(struct redactor_scrub *st, char **ret, size_t *ret_len)
{
        if (!st)
                return -EINVAL;
        return scrub(st, true, ret, ret_len);
}

size_t redactor_scrub_held(const struct redactor_scrub *st)
{
        return st ? st->hold.len : 0;
}
