/* SPDX-License-Identifier: Apache-2.0 */
#include <errno.h>
#include <string.h>
#include <strings.h>
#include <sys/random.h>


#include "netgate/http.h"
#include "netgate/sentinel.h"
#include "util.h"

/* A replaced value past this is not sent: the placeholder goes instead. */
#define RESULT_MAX (16 * 1024)

int netgate_sentinel_make(char ret[static NETGATE_SENTINEL_LEN + 1])
{
        static const char hex[] = "0123456789abcdef";
        unsigned char raw[16];
        size_t got = 0;
        while (got < sizeof(raw)) {
                ssize_t n = getrandom(raw + got, sizeof(raw) - got, 0);
                if (n < 0 && errno == EINTR)
                        continue;
                if (n < 0)
                        return -errno;
                got += (size_t)n;
        }
        size_t o = sizeof(NETGATE_SENTINEL_PREFIX) - 1;
        memcpy(ret, NETGATE_SENTINEL_PREFIX, o);
        for (size_t i = 0; i < sizeof(raw); i++) {
                ret[o++] = hex[raw[i] >> 4];
                ret[o++] = hex[raw[i] & 15];
        }
        ret[o] = '\0';
        explicit_bzero(raw, sizeof(raw));
        return 0;
}

bool netgate_sentinel_host_listed(const struct netgate_sentinel *s, const char *host)
{
        size_t hl = strlen(host);
        for (size_t i = 0; i < s->n_hosts; i++) {
                const char *h = s->hosts[i];
                if (strncmp(h, "*.", 2) == 0) {
                        size_t sl = strlen(h + 1); /* ".name" */
                        if (hl > sl && strcasecmp(host + hl - sl, h + 1) == 0)
                                return true;
                } else if (strcasecmp(h, host) == 0)
                        return true;
        }
        return false;
}

/* The sentinel listed for `host` whose placeholder starts at p, or NULL. */
static const struct netgate_sentinel *placeholder_at(const struct netgate_sentinels *ss,
                                                     const char *host, const char *p, size_t left)
{
        for (size_t k = 0; k < ss->n; k++) {
                const struct netgate_sentinel *s = &ss->v[k];
                size_t pl = strlen(s->placeholder);
                if (pl > 0 && pl <= left && p[0] == s->placeholder[0] &&
                    memcmp(p, s->placeholder, pl) == 0 && netgate_sentinel_host_listed(s, host))
                        return s;
        }
        return NULL;
}

/* Replace every placeholder listed for `host` in [in, in+len), in one pass
 * over the text as it came: a value put in is never read again, so one
 * sentinel's value cannot complete (or carry) another's placeholder. 1 and
 * a new buffer when one was, 0 when none, -E2BIG past RESULT_MAX. */
static int replace(const struct netgate_sentinels *ss, const char *host, const char *in, size_t len,
                   char **ret, size_t *ret_len)
{
        size_t out_len = 0;
        bool any = false;
        for (size_t i = 0; i < len;) {
                const struct netgate_sentinel *s = placeholder_at(ss, host, in + i, len - i);
                if (s) {
                        out_len += s->value_len;
                        i += strlen(s->placeholder);
                        any = true;
                } else {
                        out_len++;
                        i++;
                }
        }
        if (!any)
                return 0;
        if (out_len > RESULT_MAX)
                return -E2BIG;
        char *out = xcalloc(out_len + 1, 1);
        size_t o = 0;
        for (size_t i = 0; i < len;) {
                const struct netgate_sentinel *s = placeholder_at(ss, host, in + i, len - i);
                if (s) {
                        memcpy(out + o, s->value, s->value_len);
                        o += s->value_len;
                        i += strlen(s->placeholder);
                } else
                        out[o++] = in[i++];
        }
        *ret = out;
        *ret_len = out_len;
        return 1;
}

/* "Basic <base64>": the placeholder inside the decoded credentials. */
static int replace_basic(const struct netgate_sentinels *ss, const char *host, const char *value,
                         size_t len, char **ret, size_t *ret_len)
{
        if (len < 6 || strncasecmp(value, "basic ", 6) != 0)
                return 0;
        const char *b64 = value + 6;
        size_t bl = len - 6;
        while (bl > 0 && *b64 == ' ') {
                b64++;
                bl--;
        }
        while (bl > 0 && b64[bl - 1] == ' ')
                bl--;
        if (bl == 0 || bl % 4 != 0 || bl > RESULT_MAX)
                return 0;
        unsigned char *dec = NULL;
        size_t dl = 0;
        if (base64_decode_n(b64, bl, &dec, &dl) < 0)
                return 0;
        char *plain = NULL;
        size_t plain_len = 0;
        int r = replace(ss, host, (const char *)dec, dl, &plain, &plain_len);
        explicit_bzero(dec, dl);
        free(dec);
        if (r <= 0)
                return r;
        size_t enc_len = 4 * ((plain_len + 2) / 3);
        if (6 + enc_len > RESULT_MAX) {
                explicit_bzero(plain, plain_len);
                free(plain);
                return -E2BIG;
        }
        char *out = xcalloc(6 + enc_len + 1, 1);
        memcpy(out, "Basic ", 6);
        base64_encode_into(out + 6, plain, plain_len);
        explicit_bzero(plain, plain_len);
        free(plain);
        *ret = out;
        *ret_len = 6 + enc_len;
        return 1;
}

int netgate_sentinels_apply(const struct netgate_sentinels *ss, const char *host, const char *name,
                            size_t name_len, const char *value, size_t len, char **ret,
                            size_t *ret_len)
{
        if (!ss || ss->n == 0 || !host)
                return 0;
        int r = replace(ss, host, value, len, ret, ret_len);
        if (r != 0)
                return r > 0 ? 1 : 0;
        if (netgate_http_name_eq(name, name_len, "authorization") ||
            netgate_http_name_eq(name, name_len, "proxy-authorization"))
                return replace_basic(ss, host, value, len, ret, ret_len) > 0 ? 1 : 0;
        return 0;
}

static bool host_matches(const char *pattern, size_t plen, const char *host)
{
        size_t hl = strlen(host);
        if (plen > 2 && strncmp(pattern, "*.", 2) == 0)
                return hl > plen - 1 &&
                       strncasecmp(host + hl - (plen - 1), pattern + 1, plen - 1) == 0;
        return hl == plen && strncasecmp(pattern, host, plen) == 0;
}

bool netgate_sentinel_cleartext_ok(const struct netgate_sentinel *s, const char *host,
                                   uint16_t port)
{
        if (s->cleartext)
                return true;
        for (size_t i = 0; i < s->n_cleartext_at; i++) {
                const char *e = s->cleartext_at[i], *colon = strrchr(e, ':');
                uint64_t p;
                if (colon && safe_atou64(colon + 1, &p) == 0 && p == port &&
                    host_matches(e, (size_t)(colon - e), host))
                        return true;
        }
        return false;
}

const struct netgate_sentinel *
netgate_sentinels_cleartext_refused(const struct netgate_sentinels *ss, const char *host,
                                    uint16_t port, const struct netgate_http_head *h,
                                    netgate_field_dropped_fn dropped, const void *ud)
{
        for (size_t k = 0; ss && host && k < ss->n; k++) {
                const struct netgate_sentinel *s = &ss->v[k];
                if (!netgate_sentinel_host_listed(s, host) ||
                    netgate_sentinel_cleartext_ok(s, host, port))
                        continue;
                /* Would it be replaced? Ask the replacer with this one alone. */
                struct netgate_sentinels one = {.v = (struct netgate_sentinel *)s, .n = 1};
                for (size_t i = 0; i < h->n_fields; i++) {
                        const struct netgate_http_field *f = &h->fields[i];
                        if (dropped && dropped(ud, h, f->name, f->name_len))
                                continue;
                        char *out = NULL;
                        size_t out_len = 0;
                        int r = netgate_sentinels_apply(&one, host, f->name, f->name_len, f->value,
                                                        f->value_len, &out, &out_len);
                        if (out) {
                                explicit_bzero(out, out_len);
                                free(out);
                        }
                        /* A placeholder past the size bound is not replaced,
                         * but it was meant for this host all the same. */
                        if (r > 0 ||
                            memmem(f->value, f->value_len, s->placeholder, strlen(s->placeholder)))
                                return s;
                }
        }
        return NULL;
}

void netgate_sentinels_clear(struct netgate_sentinels *ss)
{
        for (size_t i = 0; i < ss->n; i++) {
                struct netgate_sentinel *s = &ss->v[i];
                free(s->env);
                strv_free(s->cleartext_at);
                free(s->placeholder);
                if (s->value) {
                        explicit_bzero(s->value, s->value_len);
                        free(s->value);
                }
                strv_free(s->hosts);
        }
        free(ss->v);
        ss->v = NULL;
        ss->n = 0;
}
