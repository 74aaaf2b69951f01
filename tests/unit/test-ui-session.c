/* SPDX-License-Identifier: Apache-2.0 */
/* The dashboard's login codes, sessions and CSRF rules (uisession.c). */
#include <criterion/criterion.h>
#include <errno.h>
#include <stdio.h>
#include <string.h>

#include "uisession.h"

static const char GRANT_A[] = "aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa";
static const char GRANT_B[] = "bbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbb";

static struct ui_sessions t;

static void reset(void)
{
        memset(&t, 0, sizeof(t));
}

TestSuite(ui_session, .init = reset);

Test(ui_session, code_is_single_use)
{
        char code[UI_SECRET_HEX + 1], cookie[UI_SECRET_HEX + 1], again[UI_SECRET_HEX + 1];
        const struct ui_session *s = NULL;
        cr_assert_eq(ui_code_new(&t, GRANT_A, 1000, code), 0);
        cr_assert_eq(strlen(code), UI_SECRET_HEX);
        cr_assert_eq(ui_code_redeem(&t, code, 2000, cookie, &s), 0);
        cr_assert_str_eq(s->grant_hash, GRANT_A);
        cr_assert_neq(strcmp(cookie, code), 0);
        cr_assert_eq(ui_code_redeem(&t, code, 2001, again, NULL), -ENOENT);
        cr_assert_eq(t.n, 1);
}

Test(ui_session, code_expires_and_is_gone_after_a_late_try)
{
        char code[UI_SECRET_HEX + 1], cookie[UI_SECRET_HEX + 1];
        cr_assert_eq(ui_code_new(&t, GRANT_A, 1000, code), 0);
        cr_assert_eq(ui_code_redeem(&t, code, 1000 + UI_CODE_TTL_MS, cookie, NULL), -ETIMEDOUT);
        cr_assert_eq(ui_code_redeem(&t, code, 1001, cookie, NULL), -ENOENT);
        cr_assert_eq(t.n, 0);
}

Test(ui_session, malformed_and_unknown_codes)
{
        char cookie[UI_SECRET_HEX + 1], code[UI_SECRET_HEX + 1];
        cr_assert_eq(ui_code_redeem(&t, "", 1, cookie, NULL), -EINVAL);
        cr_assert_eq(ui_code_redeem(&t, "zz", 1, cookie, NULL), -EINVAL);
        cr_assert_eq(ui_code_new(&t, GRANT_A, 1, code), 0);
        char upper[UI_SECRET_HEX + 1];
        for (size_t i = 0; i <= UI_SECRET_HEX; i++)
                upper[i] = (char)(code[i] >= 'a' && code[i] <= 'f' ? code[i] - 32 : code[i]);
        cr_assert_eq(ui_code_redeem(&t, upper, 2, cookie, NULL), -EINVAL);
        code[0] = code[0] == '0' ? '1' : '0';
        cr_assert_eq(ui_code_redeem(&t, code, 2, cookie, NULL), -ENOENT);
}

Test(ui_session, codes_are_bounded)
{
        char code[UI_SECRET_HEX + 1], grant[GRANT_HASH_HEX + 1];
        /* UI_CODES_MAX in all, UI_GRANT_CODES_MAX of each grant. */
        for (int i = 0; i < UI_CODES_MAX; i++) {
                snprintf(grant, sizeof(grant), "%064x", i / UI_GRANT_CODES_MAX);
                cr_assert_eq(ui_code_new(&t, grant, 1, code), 0);
        }
        cr_assert_eq(ui_code_new(&t, GRANT_A, 1, code), -EAGAIN);
        /* Expired ones make room. */
        cr_assert_eq(ui_code_new(&t, GRANT_A, 1 + UI_CODE_TTL_MS, code), 0);
}

Test(ui_session, session_expiry_idle_and_absolute)
{
        char code[UI_SECRET_HEX + 1], cookie[UI_SECRET_HEX + 1];
        cr_assert_eq(ui_code_new(&t, GRANT_A, 0, code), 0);
        cr_assert_eq(ui_code_redeem(&t, code, 0, cookie, NULL), 0);
        cr_assert_not_null(ui_session_find(&t, cookie, UI_SESSION_IDLE_MS - 1));
        /* Used within the idle time again and again: still ends at the TTL. */
        uint64_t now = 0;
        while (now + UI_SESSION_IDLE_MS / 2 < UI_SESSION_TTL_MS) {
                now += UI_SESSION_IDLE_MS / 2;
                cr_assert_not_null(ui_session_find(&t, cookie, now));
        }
        cr_assert_null(ui_session_find(&t, cookie, UI_SESSION_TTL_MS));
        cr_assert_eq(t.n, 0);

        cr_assert_eq(ui_code_new(&t, GRANT_A, 0, code), 0);
        cr_assert_eq(ui_code_redeem(&t, code, 0, cookie, NULL), 0);
        cr_assert_null(ui_session_find(&t, cookie, UI_SESSION_IDLE_MS));
}

Test(ui_session, logout_and_revocation)
{
        char code[UI_SECRET_HEX + 1], a[UI_SECRET_HEX + 1], b[UI_SECRET_HEX + 1];
        cr_assert_eq(ui_code_new(&t, GRANT_A, 0, code), 0);
        cr_assert_eq(ui_code_redeem(&t, code, 0, a, NULL), 0);
        cr_assert_eq(ui_code_new(&t, GRANT_B, 0, code), 0);
        cr_assert_eq(ui_code_redeem(&t, code, 0, b, NULL), 0);
        cr_assert_eq(ui_code_new(&t, GRANT_A, 0, code), 0);
        cr_assert_eq(ui_session_end(&t, a), 0);
        cr_assert_null(ui_session_find(&t, a, 1));
        cr_assert_eq(ui_session_end(&t, a), -ENOENT);
        ui_sessions_drop_grant(&t, GRANT_B);
        cr_assert_null(ui_session_find(&t, b, 1));
        ui_sessions_drop_grant(&t, GRANT_A);
        cr_assert_eq(t.n_codes, 0);
        cr_assert_eq(ui_code_redeem(&t, code, 1, a, NULL), -ENOENT);
}

Test(ui_session, sessions_are_bounded_oldest_goes)
{
        char code[UI_SECRET_HEX + 1], first[UI_SECRET_HEX + 1], c[UI_SECRET_HEX + 1];
        char grant[GRANT_HASH_HEX + 1];
        /* The table full with each grant at its share: the oldest of the
         * grant holding the most goes. */
        cr_assert_eq(ui_code_new(&t, GRANT_A, 0, code), 0);
        cr_assert_eq(ui_code_redeem(&t, code, 0, first, NULL), 0);
        for (int i = 1; i <= UI_SESSIONS_MAX; i++) {
                snprintf(grant, sizeof(grant), "%064x", (i - 1) / UI_GRANT_SESSIONS_MAX);
                cr_assert_eq(ui_code_new(&t, grant, (uint64_t)i, code), 0);
                cr_assert_eq(ui_code_redeem(&t, code, (uint64_t)i, c, NULL), 0);
        }
        cr_assert_eq(t.n, UI_SESSIONS_MAX);
        cr_assert_not_null(ui_session_find(&t, first, UI_SESSIONS_MAX + 1));
        cr_assert_not_null(ui_session_find(&t, c, UI_SESSIONS_MAX + 1));
        /* One grant alone keeps its share: its own oldest goes. */
        memset(&t, 0, sizeof(t));
        cr_assert_eq(ui_code_new(&t, GRANT_A, 0, code), 0);
        cr_assert_eq(ui_code_redeem(&t, code, 0, first, NULL), 0);
        for (int i = 1; i <= UI_GRANT_SESSIONS_MAX; i++) {
                cr_assert_eq(ui_code_new(&t, GRANT_A, (uint64_t)i, code), 0);
                cr_assert_eq(ui_code_redeem(&t, code, (uint64_t)i, c, NULL), 0);
        }
        cr_assert_eq(t.n, UI_GRANT_SESSIONS_MAX);
        cr_assert_null(ui_session_find(&t, first, UI_GRANT_SESSIONS_MAX + 1));
        cr_assert_not_null(ui_session_find(&t, c, UI_GRANT_SESSIONS_MAX + 1));
}

Test(ui_session, cookie_header_parsing)
{
        char v[UI_SECRET_HEX + 1];
        cr_assert_eq(ui_cookie_get("a=1; airlock_session=abc; b=2", UI_COOKIE_NAME, v, sizeof(v)),
                     0);
        cr_assert_str_eq(v, "abc");
        cr_assert_eq(ui_cookie_get("xairlock_session=abc", UI_COOKIE_NAME, v, sizeof(v)), -ENOENT);
        cr_assert_eq(ui_cookie_get("airlock_sessionx=abc", UI_COOKIE_NAME, v, sizeof(v)), -ENOENT);
        cr_assert_eq(ui_cookie_get("", UI_COOKIE_NAME, v, sizeof(v)), -ENOENT);
        char big[200];
        memset(big, 'a', sizeof(big));
        memcpy(big, "airlock_session=", 16);
        big[sizeof(big) - 1] = '\0';
        cr_assert_eq(ui_cookie_get(big, UI_COOKIE_NAME, v, sizeof(v)), -E2BIG);
}

Test(ui_session, csrf_and_origin_rules)
{
        char code[UI_SECRET_HEX + 1], cookie[UI_SECRET_HEX + 1];
        const struct ui_session *s = NULL;
        cr_assert_eq(ui_code_new(&t, GRANT_A, 0, code), 0);
        cr_assert_eq(ui_code_redeem(&t, code, 0, cookie, &s), 0);
        const char *host = "127.0.0.1:7070", *origin = "http://127.0.0.1:7070";
        char wrong[UI_SECRET_HEX + 1];
        memcpy(wrong, s->csrf, sizeof(wrong));
        wrong[5] = wrong[5] == 'a' ? 'b' : 'a';

        /* Reads: no Origin needed, but a foreign one is refused, and the
         * token always: the cookie alone (which the browser also sends to
         * a sandbox's forwarded port) is no credential. */
        cr_assert_null(ui_request_refusal(s, true, false, NULL, host, s->csrf));
        cr_assert_null(ui_request_refusal(s, true, false, origin, host, s->csrf));
        cr_assert_not_null(ui_request_refusal(s, true, false, NULL, host, NULL));
        cr_assert_not_null(ui_request_refusal(s, true, false, origin, host, NULL));
        cr_assert_not_null(ui_request_refusal(s, true, false, origin, host, wrong));
        cr_assert_not_null(
            ui_request_refusal(s, true, false, "http://evil.example", host, s->csrf));
        cr_assert_not_null(ui_request_refusal(s, true, false, "null", host, s->csrf));
        /* State changes: Origin and the token, both right. */
        cr_assert_null(ui_request_refusal(s, false, false, origin, host, s->csrf));
        cr_assert_not_null(ui_request_refusal(s, false, false, origin, host, NULL));
        cr_assert_not_null(ui_request_refusal(s, false, false, origin, host, wrong));
        cr_assert_not_null(ui_request_refusal(s, false, false, origin, host, ""));
        cr_assert_not_null(ui_request_refusal(s, false, false, NULL, host, s->csrf));
        cr_assert_not_null(
            ui_request_refusal(s, false, false, "http://127.0.0.1:7071", host, s->csrf));
        /* A WebSocket (a terminal): its Origin must be ours, its token
         * right. */
        cr_assert_not_null(ui_request_refusal(s, true, true, NULL, host, s->csrf));
        cr_assert_not_null(
            ui_request_refusal(s, true, true, "http://evil.example", host, s->csrf));
        cr_assert_not_null(ui_request_refusal(s, true, true, origin, host, NULL));
        cr_assert_null(ui_request_refusal(s, true, true, origin, host, s->csrf));
        /* The Origin's host is the whole Host. */
        cr_assert(ui_origin_ok("https://127.0.0.1:7070", host));
        cr_assert_not(ui_origin_ok("http://127.0.0.1:7070.evil.example", host));
        cr_assert_not(ui_origin_ok("http://127.0.0.1", host));
        cr_assert_not(ui_origin_ok("ftp://127.0.0.1:7070", host));
        cr_assert_not(ui_origin_ok(origin, NULL));
        cr_assert_not(ui_origin_ok(origin, ""));
}

Test(ui_session, ws_protocol_token)
{
        char tok[UI_SECRET_HEX + 1], hex[UI_SECRET_HEX + 1], h[256];
        memset(hex, 'a', UI_SECRET_HEX);
        hex[UI_SECRET_HEX] = '\0';
        snprintf(h, sizeof(h), "airlock, " UI_WS_TOKEN_PREFIX "%s", hex);
        cr_assert_eq(ui_ws_protocol_token(h, tok), 0);
        cr_assert_str_eq(tok, hex);
        snprintf(h, sizeof(h), UI_WS_TOKEN_PREFIX "%s,airlock", hex);
        cr_assert_eq(ui_ws_protocol_token(h, tok), 0);
        cr_assert_eq(ui_ws_protocol_token("airlock", tok), -ENOENT);
        cr_assert_eq(ui_ws_protocol_token(NULL, tok), -ENOENT);
        /* Too short, too long, not lowercase hex: no token. */
        cr_assert_eq(ui_ws_protocol_token(UI_WS_TOKEN_PREFIX "abc", tok), -EINVAL);
        snprintf(h, sizeof(h), UI_WS_TOKEN_PREFIX "%sa", hex);
        cr_assert_eq(ui_ws_protocol_token(h, tok), -EINVAL);
        hex[3] = 'G';
        snprintf(h, sizeof(h), UI_WS_TOKEN_PREFIX "%s", hex);
        cr_assert_eq(ui_ws_protocol_token(h, tok), -EINVAL);
}

/* One grant cannot crowd another out of the dashboard: it minted the 32
 * codes the daemon keeps (no other grant's user could log in for a
 * minute), and its 128 sessions evicted every other grant's (the operator
 * logged out, again and again). */
Test(ui_session, one_grant_cannot_crowd_out_another)
{
        char code[UI_SECRET_HEX + 1], b[UI_SECRET_HEX + 1], a[UI_SECRET_HEX + 1];
        cr_assert_eq(ui_code_new(&t, GRANT_B, 0, code), 0);
        cr_assert_eq(ui_code_redeem(&t, code, 0, b, NULL), 0);
        for (int i = 0; i < UI_GRANT_CODES_MAX; i++)
                cr_assert_eq(ui_code_new(&t, GRANT_A, 1, code), 0);
        cr_assert_eq(ui_code_new(&t, GRANT_A, 1, code), -EAGAIN);
        cr_assert_eq(ui_code_new(&t, GRANT_B, 1, code), 0);
        memset(&t.codes, 0, sizeof(t.codes));
        t.n_codes = 0;
        for (int i = 0; i < 2 * UI_SESSIONS_MAX; i++) {
                cr_assert_eq(ui_code_new(&t, GRANT_A, 2 + (uint64_t)i, code), 0);
                cr_assert_eq(ui_code_redeem(&t, code, 2 + (uint64_t)i, a, NULL), 0);
        }
        size_t of_a = 0;
        for (size_t i = 0; i < t.n; i++)
                of_a += strcmp(t.s[i].grant_hash, GRANT_A) == 0;
        cr_assert_eq(of_a, UI_GRANT_SESSIONS_MAX);
        cr_assert_not_null(ui_session_find(&t, b, 1000));
        cr_assert_not_null(ui_session_find(&t, a, 1000)); /* its newest lives */
}
