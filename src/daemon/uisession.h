/* SPDX-License-Identifier: Apache-2.0 */
#pragma once

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "grants.h"

/* The dashboard's logins (docs/internals/ui.md): one-time codes that a
 * grant's token mints, exchanged once for a session cookie bound to that
 * grant, and the CSRF rules a session's state changes pass. Pure: no I/O but
 * the random bytes, the clock is the caller's, unit-tested in
 * tests/unit/test-ui-session.c. Only SHA-256 hashes of codes and cookies are
 * kept, as for tokens. */

#define UI_SECRET_HEX      64 /* a code, a cookie, a CSRF token: 32 random bytes */
#define UI_CODE_TTL_MS     (60 * 1000)
#define UI_SESSION_TTL_MS  (8 * 3600 * 1000) /* from login, whatever the use */
#define UI_SESSION_IDLE_MS (3600 * 1000)     /* without a request */
#define UI_CODES_MAX       32
#define UI_SESSIONS_MAX    128
/* One grant's share, so that it cannot crowd out another's users. */
#define UI_GRANT_CODES_MAX    4
#define UI_GRANT_SESSIONS_MAX 8
#define UI_COOKIE_NAME     "airlock_session"
#define UI_LOGIN_COOKIE    "airlock_login" /* the login page's nonce */
#define UI_CSRF_HEADER     "X-Airlock-CSRF"
#define UI_WS_PROTOCOL     "airlock"       /* the subprotocol a terminal speaks */
#define UI_WS_TOKEN_PREFIX "airlock.csrf." /* a subprotocol entry carrying the token */

struct ui_code {
        char hash[GRANT_HASH_HEX + 1];
        char grant_hash[GRANT_HASH_HEX + 1];
        uint64_t expires_ms;
};

struct ui_session {
        char hash[GRANT_HASH_HEX + 1]; /* of the cookie's value */
        char csrf[UI_SECRET_HEX + 1];
        char grant_hash[GRANT_HASH_HEX + 1]; /* the grant it acts as */
        uint64_t created_ms, last_ms, expires_ms;
};

struct ui_sessions {
        struct ui_code codes[UI_CODES_MAX];
        size_t n_codes;
        struct ui_session s[UI_SESSIONS_MAX];
        size_t n;
};

/* A new code for the grant whose token hashes to grant_hash, valid
 * UI_CODE_TTL_MS. -EAGAIN when UI_CODES_MAX unexpired codes wait. */
int ui_code_new(struct ui_sessions *t, const char *grant_hash, uint64_t now_ms,
                char ret_code[static UI_SECRET_HEX + 1]);
/* Trade a code for a session: the code is gone whatever the outcome.
 * -ENOENT unknown or used, -ETIMEDOUT expired, -EINVAL not a code's form.
 * The oldest session makes room past UI_SESSIONS_MAX. */
int ui_code_redeem(struct ui_sessions *t, const char *code, uint64_t now_ms,
                   char ret_cookie[static UI_SECRET_HEX + 1],
                   const struct ui_session **ret_session);
/* Whether a code is waiting to be redeemed, without using it: 0, or as
 * ui_code_redeem's errors. */
int ui_code_check(struct ui_sessions *t, const char *code, uint64_t now_ms);
/* A code, a cookie or a nonce's form: UI_SECRET_HEX lowercase hex digits
 * (safe to put in a page as it is). */
bool ui_secret_form(const char *s);
/* The login's nonce, given with a code, equals the one its browser's
 * Strict cookie carries (both of a secret's form; constant time): the code
 * is redeemed by the browser the confirmation page was shown to. */
bool ui_nonce_ok(const char *cookie, const char *param);
/* The session of a cookie's value, its idle clock restarted; NULL (and an
 * expired one removed) when none is in force. */
struct ui_session *ui_session_find(struct ui_sessions *t, const char *cookie, uint64_t now_ms);
/* End the session of a cookie's value (logout); -ENOENT when none. */
int ui_session_end(struct ui_sessions *t, const char *cookie);
/* End every session and code of a grant (it was revoked). */
void ui_sessions_drop_grant(struct ui_sessions *t, const char *grant_hash);

/* The value of cookie `name` in a Cookie header, at most size - 1 bytes:
 * -ENOENT absent, -E2BIG longer. */
int ui_cookie_get(const char *header, const char *name, char *ret, size_t size);
/* The header, in constant time, equals the session's CSRF token. */
bool ui_csrf_ok(const struct ui_session *s, const char *header);
/* The session's token in a WebSocket's Sec-WebSocket-Protocol list (a
 * browser's WebSocket cannot send other headers): the entry
 * UI_WS_TOKEN_PREFIX followed by a secret's form, copied to ret. -ENOENT
 * when no entry has the prefix, -EINVAL when one does with another form. */
int ui_ws_protocol_token(const char *header, char ret[static UI_SECRET_HEX + 1]);
/* Origin is exactly http://HOST or https://HOST for the request's Host. */
bool ui_origin_ok(const char *origin, const char *host);
/* May a request of a cookie session go on: every request needs the
 * session's CSRF token (the browser sends the cookie to every port of the
 * daemon's host, a page a sandbox serves through a port forward included,
 * so the cookie alone is no credential; the token lives only in the
 * dashboard's page), and an Origin, when given, of the daemon's own; a
 * state change (not GET) or a WebSocket needs the Origin. NULL when it may,
 * else why not. */
const char *ui_request_refusal(const struct ui_session *s, bool is_get, bool is_upgrade,
                               const char *origin, const char *host, const char *csrf);
