/* SPDX-License-Identifier: Apache-2.0 */
/* The dashboard's codes, sessions and CSRF rules (uisession.h). */
#include <errno.h>
#include <string.h>
#include <strings.h>

#include "grants.h"
#include "uisession.h"
#include "util.h"

static bool is_secret(const char *s)
{
        if (!s || strlen(s) != UI_SECRET_HEX)
                return false;
        for (size_t i = 0; i < UI_SECRET_HEX; i++)
                if (!((s[i] >= '0' && s[i] <= '9') || (s[i] >= 'a' && s[i] <= 'f')))
                        return false;
        return true;
}

static bool hex_eq(const char *a, const char *b, size_t n)
{
        unsigned char diff = 0;
        for (size_t i = 0; i < n; i++)
                diff |= (unsigned char)(a[i] ^ b[i]);
        return diff == 0;
}

static void expire(struct ui_sessions *t, uint64_t now_ms)
{
        for (size_t i = 0; i < t->n_codes;)
                if (t->codes[i].expires_ms <= now_ms)
                        t->codes[i] = t->codes[--t->n_codes];
                else
                        i++;
        for (size_t i = 0; i < t->n;)
                if (t->s[i].expires_ms <= now_ms || t->s[i].last_ms + UI_SESSION_IDLE_MS <= now_ms)
                        t->s[i] = t->s[--t->n];
                else
                        i++;
}

int ui_code_new(struct ui_sessions *t, const char *grant_hash, uint64_t now_ms,
                char ret_code[static UI_SECRET_HEX + 1])
{
        expire(t, now_ms);
        size_t mine = 0;
        for (size_t i = 0; i < t->n_codes; i++)
                mine += STREQ(t->codes[i].grant_hash, grant_hash);
        if (t->n_codes >= UI_CODES_MAX || mine >= UI_GRANT_CODES_MAX)
                return -EAGAIN;
        char code[UI_SECRET_HEX + 1];
        int r = random_hex(code, UI_SECRET_HEX);
        if (r < 0)
                return r;
        struct ui_code *c = &t->codes[t->n_codes++];
        grant_token_hash(code, UI_SECRET_HEX, c->hash);
        snprintf(c->grant_hash, sizeof(c->grant_hash), "%s", grant_hash);
        c->expires_ms = now_ms + UI_CODE_TTL_MS;
        memcpy(ret_code, code, sizeof(code));
        return 0;
}

bool ui_secret_form(const char *s)
{
        return is_secret(s);
}

bool ui_nonce_ok(const char *cookie, const char *param)
{
        return is_secret(cookie) && is_secret(param) && hex_eq(cookie, param, UI_SECRET_HEX);
}

int ui_code_check(struct ui_sessions *t, const char *code, uint64_t now_ms)
{
        if (!is_secret(code))
                return -EINVAL;
        char hash[GRANT_HASH_HEX + 1];
        grant_token_hash(code, UI_SECRET_HEX, hash);
        for (size_t i = 0; i < t->n_codes; i++)
                if (hex_eq(t->codes[i].hash, hash, GRANT_HASH_HEX))
                        return t->codes[i].expires_ms <= now_ms ? -ETIMEDOUT : 0;
        return -ENOENT;
}

static size_t sessions_of(const struct ui_sessions *t, const char *grant_hash)
{
        size_t n = 0;
        for (size_t i = 0; i < t->n; i++)
                n += STREQ(t->s[i].grant_hash, grant_hash);
        return n;
}

/* Room for one more session of grant_hash: past its share, its own least
 * recently used session goes; in a full table, that of the grant holding
 * the most, so that one grant's logins never end another's sessions while
 * it holds fewer. */
static void make_room(struct ui_sessions *t, const char *grant_hash)
{
        const char *victim = NULL;
        if (sessions_of(t, grant_hash) >= UI_GRANT_SESSIONS_MAX)
                victim = grant_hash;
        else if (t->n >= UI_SESSIONS_MAX) {
                size_t most = 0;
                for (size_t i = 0; i < t->n; i++) {
                        size_t k = sessions_of(t, t->s[i].grant_hash);
                        if (k > most) {
                                most = k;
                                victim = t->s[i].grant_hash;
                        }
                }
        }
        if (!victim)
                return;
        ssize_t oldest = -1;
        for (size_t i = 0; i < t->n; i++)
                if (STREQ(t->s[i].grant_hash, victim) &&
                    (oldest < 0 || t->s[i].last_ms < t->s[oldest].last_ms))
                        oldest = (ssize_t)i;
        t->s[oldest] = t->s[--t->n];
}

int ui_code_redeem(struct ui_sessions *t, const char *code, uint64_t now_ms,
                   char ret_cookie[static UI_SECRET_HEX + 1], const struct ui_session **ret_session)
{
        if (!is_secret(code))
                return -EINVAL;
        char hash[GRANT_HASH_HEX + 1];
        grant_token_hash(code, UI_SECRET_HEX, hash);
        size_t i;
        for (i = 0; i < t->n_codes; i++)
                if (hex_eq(t->codes[i].hash, hash, GRANT_HASH_HEX))
                        break;
        if (i == t->n_codes)
                return -ENOENT;
        /* Single use: gone before anything else can fail. */
        struct ui_code c = t->codes[i];
        t->codes[i] = t->codes[--t->n_codes];
        if (c.expires_ms <= now_ms)
                return -ETIMEDOUT;
        expire(t, now_ms);
        make_room(t, c.grant_hash);
        char cookie[UI_SECRET_HEX + 1];
        struct ui_session s = {0};
        int r = random_hex(cookie, UI_SECRET_HEX);
        if (r >= 0)
                r = random_hex(s.csrf, UI_SECRET_HEX);
        if (r < 0)
                return r;
        grant_token_hash(cookie, UI_SECRET_HEX, s.hash);
        memcpy(s.grant_hash, c.grant_hash, sizeof(s.grant_hash));
        s.created_ms = s.last_ms = now_ms;
        s.expires_ms = now_ms + UI_SESSION_TTL_MS;
        t->s[t->n] = s;
        memcpy(ret_cookie, cookie, sizeof(cookie));
        if (ret_session)
                *ret_session = &t->s[t->n];
        t->n++;
        return 0;
}

static ssize_t find(struct ui_sessions *t, const char *cookie)
{
        if (!is_secret(cookie))
                return -1;
        char hash[GRANT_HASH_HEX + 1];
        grant_token_hash(cookie, UI_SECRET_HEX, hash);
        for (size_t i = 0; i < t->n; i++)
                if (hex_eq(t->s[i].hash, hash, GRANT_HASH_HEX))
                        return (ssize_t)i;
        return -1;
}

struct ui_session *ui_session_find(struct ui_sessions *t, const char *cookie, uint64_t now_ms)
{
        expire(t, now_ms);
        ssize_t i = find(t, cookie);
        if (i < 0)
                return NULL;
        t->s[i].last_ms = now_ms;
        return &t->s[i];
}

int ui_session_end(struct ui_sessions *t, const char *cookie)
{
        ssize_t i = find(t, cookie);
        if (i < 0)
                return -ENOENT;
        t->s[i] = t->s[--t->n];
        return 0;
}

void ui_sessions_drop_grant(struct ui_sessions *t, const char *grant_hash)
{
        for (size_t i = 0; i < t->n;)
                if (STREQ(t->s[i].grant_hash, grant_hash))
                        t->s[i] = t->s[--t->n];
                else
                        i++;
        for (size_t i = 0; i < t->n_codes;)
                if (STREQ(t->codes[i].grant_hash, grant_hash))
                        t->codes[i] = t->codes[--t->n_codes];
                else
                        i++;
}

int ui_cookie_get(const char *header, const char *name, char *ret, size_t size)
{
        size_t nlen = strlen(name);
        const char *p = header;
        while (p && *p) {
                while (*p == ' ' || *p == '\t')
                        p++;
                size_t len = strcspn(p, ";");
                if (len > nlen && strncmp(p, name, nlen) == 0 && p[nlen] == '=') {
                        size_t vlen = len - nlen - 1;
                        if (vlen >= size)
                                return -E2BIG;
                        memcpy(ret, p + nlen + 1, vlen);
                        ret[vlen] = '\0';
                        return 0;
                }
                p += len;
                if (*p == ';')
                        p++;
        }
        return -ENOENT;
}

bool ui_csrf_ok(const struct ui_session *s, const char *header)
{
        return s && header && strlen(header) == UI_SECRET_HEX &&
               hex_eq(s->csrf, header, UI_SECRET_HEX);
}

int ui_ws_protocol_token(const char *header, char ret[static UI_SECRET_HEX + 1])
{
        const size_t plen = strlen(UI_WS_TOKEN_PREFIX);
        for (const char *p = header; p && *p;) {
                while (*p == ' ' || *p == '\t' || *p == ',')
                        p++;
                size_t len = strcspn(p, ", \t");
                if (len > plen && strncmp(p, UI_WS_TOKEN_PREFIX, plen) == 0) {
                        char v[UI_SECRET_HEX + 1];
                        if (len - plen != UI_SECRET_HEX)
                                return -EINVAL;
                        memcpy(v, p + plen, UI_SECRET_HEX);
                        v[UI_SECRET_HEX] = '\0';
                        if (!is_secret(v))
                                return -EINVAL;
                        memcpy(ret, v, sizeof(v));
                        return 0;
                }
                p += len;
        }
        return -ENOENT;
}

bool ui_origin_ok(const char *origin, const char *host)
{
        if (!origin || !host || !*host)
                return false;
        const char *rest = NULL;
        if (strncmp(origin, "http://", 7) == 0)
                rest = origin + 7;
        else if (strncmp(origin, "https://", 8) == 0)
                rest = origin + 8;
        return rest && strcasecmp(rest, host) == 0;
}

const char *ui_request_refusal(const struct ui_session *s, bool is_get, bool is_upgrade,
                               const char *origin, const char *host, const char *csrf)
{
        if (origin && !ui_origin_ok(origin, host))
                return "the request's Origin is not this daemon's: a dashboard session acts only "
                       "from the dashboard's own pages";
        if ((!is_get || is_upgrade) && !origin)
                return "a dashboard session's state change needs the Origin header";
        if (!ui_csrf_ok(s, csrf))
                return "a dashboard session's request needs the session's " UI_CSRF_HEADER
                       " header (a WebSocket: the subprotocol " UI_WS_TOKEN_PREFIX
                       "TOKEN), which only the dashboard's page holds: the cookie alone is no "
                       "credential";
        return NULL;
}
