/* SPDX-License-Identifier: Apache-2.0 */
#include <fcntl.h>
#include <jansson.h>
#include <stdbool.h>
#include <string.h>
#include <sys/stat.h>

#include "secrets.h"
#include "util.h"

/* Growable byte buffer with a hard limit. */
struct sbuf {
        char *data;
        size_t len, cap, max;
};

static int sbuf_append(struct sbuf *b, const char *p, size_t n)
{
        if (n > b->max - b->len)
                return -E2BIG;
        if (b->len + n + 1 > b->cap) {
                size_t cap = b->cap ? b->cap : 64;
                while (cap < b->len + n + 1)
                        cap *= 2;
                b->data = xrealloc(b->data, cap, 1);
                b->cap = cap;
        }
        memcpy(b->data + b->len, p, n);
        b->len += n;
        b->data[b->len] = '\0';
        return 0;
}

static void sbuf_wipe(struct sbuf *b)
{
        if (b->data)
                explicit_bzero(b->data, b->cap);
        free(b->data);
        b->data = NULL;
        b->len = b->cap = 0;
}

static char *sbuf_take(struct sbuf *b, size_t *ret_len)
{
        if (!b->data)
                b->data = xcalloc(1, 1);
        if (ret_len)
                *ret_len = b->len;
        b->len = b->cap = 0;
        return TAKE_PTR(b->data);
}

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
        return c == f || c == '%' || c == '\\' || (c == '+' && f == ' ') ||
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

/* The length of the input at d[0..avail) that spells pattern p, or 0. Each
 * byte of the pattern may appear as itself, percent-encoded ("%2F" or
 * "%2f"; "+" for a space) as URLs and form bodies carry it, or as a JSON
 * string escape ("\/", "\u002f") as a JSON echo of the request carries
 * it, so that any subset of the value's bytes may be encoded; a hex
 * pattern matches in either case. */
static size_t match_at(const struct pattern *p, const unsigned char *d, size_t avail)
{
        size_t k = 0;

        for (size_t j = 0; j < p->len; j++) {
                unsigned char want = (unsigned char)p->bytes[j];
                if (k >= avail)
                        return MATCH_MORE;
                unsigned char c = d[k];
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
                return 0;
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

/* Secrets. */

struct secret {
        char *name;
        char *value;
        size_t len;
        unsigned line; /* where the dotenv file set it */
};

struct secrets {
        struct secret *v;
        size_t n;
        struct redactor *redactor;
};

struct secrets *secrets_new(void)
{
        struct secrets *s = xcalloc(1, sizeof(*s));
        s->redactor = redactor_new();
        return s;
}

struct secrets *secrets_free(struct secrets *s)
{
        if (!s)
                return NULL;
        for (size_t i = 0; i < s->n; i++) {
                explicit_bzero(s->v[i].value, s->v[i].len);
                free(s->v[i].value);
                free(s->v[i].name);
        }
        free(s->v);
        redactor_free(s->redactor);
        free(s);
        return NULL;
}

static void secretsp(struct secrets **s)
{
        secrets_free(*s);
}

static bool is_name_char(char c, bool first)
{
        return (c >= 'A' && c <= 'Z') || (c >= 'a' && c <= 'z') || c == '_' ||
               (!first && c >= '0' && c <= '9');
}

static bool is_name(const char *p, size_t n)
{
        if (n == 0 || n > 256)
                return false;
        for (size_t i = 0; i < n; i++)
                if (!is_name_char(p[i], i == 0))
                        return false;
        return true;
}

static const struct secret *find(const struct secrets *s, const char *name, size_t n)
{
        for (size_t i = 0; i < s->n; i++)
                if (strlen(s->v[i].name) == n && memcmp(s->v[i].name, name, n) == 0)
                        return &s->v[i];
        return NULL;
}

static void add_secret(struct secrets *s, const char *name, size_t name_len, char *value,
                       size_t len, unsigned line)
{
        s->v = xrealloc(s->v, s->n + 1, sizeof(*s->v));
        s->v[s->n].name = strndup(name, name_len);
        if (!s->v[s->n].name)
                abort();
        s->v[s->n].value = value;
        s->v[s->n].len = len;
        s->v[s->n].line = line;
        s->n++;
}

static int load_json(struct secrets *s, const char *path, const char *buf, size_t len,
                     struct al_error *err)
{
        json_error_t jerr;
        json_t *o = json_loadb(buf, len, JSON_REJECT_DUPLICATES, &jerr);
        const char *key;
        json_t *val;
        int r = 0;

        if (!o)
                return al_error_set(err, 0, "secrets file \"%s\": line %d: %s", path, jerr.line,
                                    jerr.text);
        if (!json_is_object(o)) {
                json_decref(o);
                return al_error_set(err, 0, "secrets file \"%s\": not a JSON object", path);
        }
        json_object_foreach(o, key, val)
        {
                if (!is_name(key, strlen(key))) {
                        r = al_error_set(err, 0,
                                         "secrets file \"%s\": \"%s\" is not a valid name "
                                         "(letters, digits and _, not starting with a digit)",
                                         path, key);
                        break;
                }
                if (!json_is_string(val)) {
                        r = al_error_set(err, 0,
                                         "secrets file \"%s\": the value of \"%s\" is not a string",
                                         path, key);
                        break;
                }
                size_t n = json_string_length(val);
                char *v = xcalloc(n + 1, 1);
                memcpy(v, json_string_value(val), n);
                add_secret(s, key, strlen(key), v, n, 0);
        }
        json_decref(o);
        return r;
}

static void skip_blank(const char **p)
{
        while (**p == ' ' || **p == '\t' || **p == '\r')
                (*p)++;
}

/* A quoted dotenv value starting after its opening quote; may span lines. */
static int dotenv_quoted(const char **pp, char quote, unsigned *line, struct sbuf *out)
{
        const char *p = *pp;

        for (;;) {
                char c = *p;
                if (c == '\0')
                        return -EINVAL;
                p++;
                if (c == quote)
                        break;
                if (c == '\n')
                        (*line)++;
                if (quote == '"' && c == '\\' && *p) {
                        char e = *p++;
                        switch (e) {
                        case 'n':
                                c = '\n';
                                break;
                        case 'r':
                                c = '\r';
                                break;
                        case 't':
                                c = '\t';
                                break;
                        case '"':
                        case '\\':
                        case '$':
                                c = e;
                                break;
                        default:
                                if (sbuf_append(out, "\\", 1) < 0)
                                        return -E2BIG;
                                c = e;
                                if (c == '\n')
                                        (*line)++;
                        }
                }
                if (sbuf_append(out, &c, 1) < 0)
                        return -E2BIG;
        }
        *pp = p;
        return 0;
}

static int load_dotenv(struct secrets *s, const char *path, const char *buf, struct al_error *err)
{
        const char *p = buf;
        unsigned line = 1;

        while (*p) {
                skip_blank(&p);
                if (*p == '\n') {
                        p++;
                        line++;
                        continue;
                }
                if (*p == '\0')
                        break;
                if (*p == '#') {
                        p += strcspn(p, "\n");
                        continue;
                }
                if (strncmp(p, "export", 6) == 0 && (p[6] == ' ' || p[6] == '\t')) {
                        p += 6;
                        skip_blank(&p);
                }
                const char *name = p;
                while (is_name_char(*p, p == name))
                        p++;
                size_t name_len = (size_t)(p - name);
                skip_blank(&p);
                if (name_len == 0 || *p != '=')
                        return al_error_set(err, 0,
                                            "secrets file \"%s\": line %u: expected NAME=VALUE",
                                            path, line);
                if (!is_name(name, name_len))
                        return al_error_set(err, 0, "secrets file \"%s\": line %u: name too long",
                                            path, line);
                p++;
                while (*p == ' ' || *p == '\t')
                        p++;

                unsigned start_line = line;
                struct sbuf val = {.max = SECRETS_FILE_MAX};
                if (*p == '"' || *p == '\'') {
                        char q = *p++;
                        if (dotenv_quoted(&p, q, &line, &val) < 0) {
                                sbuf_wipe(&val);
                                return al_error_set(err, 0,
                                                    "secrets file \"%s\": line %u: unterminated "
                                                    "%s quote",
                                                    path, start_line,
                                                    q == '"' ? "double" : "single");
                        }
                        skip_blank(&p);
                        if (*p == '#')
                                p += strcspn(p, "\n");
                        if (*p != '\n' && *p != '\0') {
                                sbuf_wipe(&val);
                                return al_error_set(err, 0,
                                                    "secrets file \"%s\": line %u: unexpected "
                                                    "text after the closing quote",
                                                    path, line);
                        }
                } else {
                        const char *v = p;
                        while (*p && *p != '\n' &&
                               !(*p == '#' && p > v && (p[-1] == ' ' || p[-1] == '\t')))
                                p++;
                        const char *end = p;
                        while (end > v && (end[-1] == ' ' || end[-1] == '\t' || end[-1] == '\r'))
                                end--;
                        if (sbuf_append(&val, v, (size_t)(end - v)) < 0) {
                                sbuf_wipe(&val);
                                return al_error_set(err, E2BIG, "secrets file \"%s\"", path);
                        }
                        p += strcspn(p, "\n");
                }

                const struct secret *dup = find(s, name, name_len);
                if (dup) {
                        sbuf_wipe(&val);
                        return al_error_set(err, 0,
                                            "secrets file \"%s\": line %u: %.*s is already set "
                                            "on line %u",
                                            path, start_line, (int)name_len, name, dup->line);
                }
                size_t len = 0;
                char *value = sbuf_take(&val, &len);
                add_secret(s, name, name_len, value, len, start_line);
        }
        return 0;
}

int secrets_load_file(const char *path, struct secrets **ret, struct al_error *err)
{
        struct stat st;

        if (!path)
                return al_error_set(err, EINVAL, "loading secrets");
        /* O_NONBLOCK: a FIFO planted at the path must not hang us before the
         * type check refuses it. */
        _cleanup_close_ int fd = open(path, O_RDONLY | O_CLOEXEC | O_NOCTTY | O_NONBLOCK);
        if (fd < 0)
                return al_error_set(err, errno, "opening secrets file \"%s\"", path);
        if (fstat(fd, &st) < 0)
                return al_error_set(err, errno, "inspecting secrets file \"%s\"", path);
        if (!S_ISREG(st.st_mode))
                return al_error_set(err, 0, "secrets file \"%s\" is not a regular file", path);
        if (st.st_uid != geteuid())
                return al_error_set(err, 0,
                                    "secrets file \"%s\" is owned by uid %u, not by the caller "
                                    "(uid %u)",
                                    path, (unsigned)st.st_uid, (unsigned)geteuid());
        if (st.st_mode & 077)
                return al_error_set(err, 0,
                                    "secrets file \"%s\" has mode %04o; it must be 0600 or "
                                    "stricter (chmod 600 \"%s\")",
                                    path, (unsigned)(st.st_mode & 07777), path);
        if (st.st_size > SECRETS_FILE_MAX)
                return al_error_set(err, EFBIG, "secrets file \"%s\"", path);

        struct sbuf b = {.max = SECRETS_FILE_MAX};
        for (;;) {
                char chunk[4096];
                ssize_t n = read(fd, chunk, sizeof(chunk));
                if (n < 0) {
                        if (errno == EINTR)
                                continue;
                        int e = errno;
                        sbuf_wipe(&b);
                        return al_error_set(err, e, "reading secrets file \"%s\"", path);
                }
                if (n == 0)
                        break;
                int r = sbuf_append(&b, chunk, (size_t)n);
                explicit_bzero(chunk, sizeof(chunk));
                if (r < 0) {
                        sbuf_wipe(&b);
                        return al_error_set(err, EFBIG, "secrets file \"%s\"", path);
                }
        }
        if (!b.data)
                b.data = xcalloc(1, 1);
        if (memchr(b.data, '\0', b.len)) {
                sbuf_wipe(&b);
                return al_error_set(err, 0, "secrets file \"%s\" contains a NUL byte", path);
        }

        _cleanup_(secretsp) struct secrets *s = secrets_new();
        const char *p = b.data;
        while (*p == ' ' || *p == '\t' || *p == '\r' || *p == '\n')
                p++;
        int r =
            *p == '{' ? load_json(s, path, b.data, b.len, err) : load_dotenv(s, path, b.data, err);
        sbuf_wipe(&b);
        if (r < 0)
                return r;
        *ret = TAKE_PTR(s);
        return 0;
}

static int lookup(const struct secrets *s, const char *name, size_t n, const char **ret)
{
        const char *v;
        size_t len;
        const struct secret *e = find(s, name, n);

        if (e) {
                v = e->value;
                len = e->len;
        } else {
                char key[257];
                if (n >= sizeof(key))
                        return -ENOENT;
                memcpy(key, name, n);
                key[n] = '\0';
                v = secure_getenv(key);
                if (!v)
                        return -ENOENT;
                len = strlen(v);
        }
        /* A value we could not register must not be handed out: it would
         * reach the logs unredacted. */
        int r = redactor_add(s->redactor, v, len);
        if (r < 0)
                return r;
        *ret = v;
        return 0;
}

const char *secrets_get(const struct secrets *s, const char *name)
{
        const char *v = NULL;

        if (!s || !name || lookup(s, name, strlen(name), &v) < 0)
                return NULL;
        return v;
}

struct redactor *secrets_redactor(const struct secrets *s)
{
        return s ? s->redactor : NULL;
}

static int expand_var(const struct secrets *s, const char *name, size_t n,
                      const struct secrets_vars *vars, const char **ret, struct al_error *err)
{
        static const struct secrets_vars none = {0};
        const struct {
                const char *name;
                const char *value;
        } table[] = {
            {"run.id", (vars ? vars : &none)->run_id},
            {"run.attempt", (vars ? vars : &none)->run_attempt},
            {"sandbox.id", (vars ? vars : &none)->sandbox_id},
            {"account", (vars ? vars : &none)->account},
        };

        if (n > 7 && memcmp(name, "secret:", 7) == 0) {
                const char *key = name + 7;
                size_t klen = n - 7;
                if (!is_name(key, klen))
                        return al_error_set(err, 0, "\"%.*s\" is not a valid secret name",
                                            (int)klen, key);
                int r = lookup(s, key, klen, ret);
                if (r == -ENOENT)
                        return al_error_set(err, 0,
                                            "secret \"%.*s\" is not set (neither in the secrets "
                                            "file nor in the environment)",
                                            (int)klen, key);
                if (r < 0)
                        return al_error_set(err, r, "secret \"%.*s\" cannot be redacted", (int)klen,
                                            key);
                return 0;
        }
        for (size_t i = 0; i < ARRAY_SIZE(table); i++)
                if (strlen(table[i].name) == n && memcmp(table[i].name, name, n) == 0) {
                        if (!table[i].value)
                                return al_error_set(err, 0, "\"${%s}\" has no value here",
                                                    table[i].name);
                        *ret = table[i].value;
                        return 0;
                }
        return al_error_set(err, 0, "unknown template variable \"${%.*s}\"", (int)n, name);
}

int secrets_expand(const struct secrets *s, const char *template, const struct secrets_vars *vars,
                   char **ret, struct al_error *err)
{
        struct sbuf out = {.max = SECRETS_EXPAND_MAX};
        const char *p = template;
        int r = 0;

        if (!s || !template)
                return al_error_set(err, EINVAL, "expanding a template");
        while (*p && r >= 0) {
                if (p[0] == '$' && p[1] == '$' && p[2] == '{') {
                        r = sbuf_append(&out, "${", 2);
                        p += 3;
                        continue;
                }
                if (p[0] != '$' || p[1] != '{') {
                        size_t n = strcspn(p + 1, "$") + 1;
                        r = sbuf_append(&out, p, n);
                        p += n;
                        continue;
                }
                const char *end = strchr(p + 2, '}');
                if (!end) {
                        sbuf_wipe(&out);
                        return al_error_set(err, 0, "unterminated \"${\" in \"%s\"", template);
                }
                const char *v = NULL;
                int e = expand_var(s, p + 2, (size_t)(end - p - 2), vars, &v, err);
                if (e < 0) {
                        sbuf_wipe(&out);
                        return e;
                }
                r = sbuf_append(&out, v, strlen(v));
                p = end + 1;
        }
        if (r < 0) {
                sbuf_wipe(&out);
                return al_error_set(err, 0, "the expanded value is longer than %d bytes",
                                    SECRETS_EXPAND_MAX);
        }
        *ret = sbuf_take(&out, NULL);
        return 0;
}
