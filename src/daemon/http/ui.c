/* SPDX-License-Identifier: Apache-2.0 */
/* The dashboard (docs/dashboard.md, docs/internals/ui.md): its static
 * assets, built into the binary (ui-assets.c, made from src/daemon/ui/ by
 * embed.py), the login that trades a one-time code for a session cookie,
 * the session's grant for the router, and logout. Everything the pages do
 * goes through the API's own handlers and grant checks; a session only
 * stands in for the grant's token, and only with the CSRF rules of
 * uisession.c on every state change. */
#include <errno.h>
#include <event2/buffer.h>
#include <event2/http.h>
#include <event2/keyvalq_struct.h>
#include <string.h>
#include <strings.h>

#include "daemon.h"
#include "grants.h"
#include "http.h"
#include "jobs.h"
#include "log.h"
#include "policy.h"
#include "routes.h"
#include "uisession.h"
#include "util.h"

struct ui_asset {
        const char *name;
        const char *type;
        const unsigned char *data;
        size_t len;
};
extern const struct ui_asset ui_assets[];
extern const size_t ui_assets_n;

static struct ui_sessions sessions;

/* No inline script or style, nothing from elsewhere, never in a frame. */
static void security_headers(struct evhttp_request *req)
{
        struct evkeyvalq *h = evhttp_request_get_output_headers(req);
        evhttp_add_header(h, "Content-Security-Policy",
                          "default-src 'none'; script-src 'self'; style-src 'self'; "
                          "img-src 'self' data:; connect-src 'self'; base-uri 'none'; "
                          "form-action 'self'; frame-ancestors 'none'");
        evhttp_add_header(h, "X-Frame-Options", "DENY");
        evhttp_add_header(h, "X-Content-Type-Options", "nosniff");
        evhttp_add_header(h, "Referrer-Policy", "no-referrer");
        evhttp_add_header(h, "Cache-Control", "no-store");
}

static void reply_page(struct daemon *d, struct evhttp_request *req, int code, const char *title,
                       const char *message)
{
        struct evbuffer *b = evbuffer_new();
        if (!b) {
                evhttp_send_error(req, 500, NULL);
                return;
        }
        /* Only fixed text goes in: no escaping needed. */
        evbuffer_add_printf(b,
                            "<!doctype html><html lang=\"en\"><head><meta charset=\"utf-8\">"
                            "<title>Airlock: %s</title><link rel=\"stylesheet\" "
                            "href=\"/ui/app.css\"></head><body><main class=\"notice\"><h1>%s</h1>"
                            "<p>%s</p></main></body></html>\n",
                            title, title, message);
        security_headers(req);
        reply_body(d, req, code, "text/html; charset=utf-8", b);
        evbuffer_free(b);
}

static bool over_tls(struct evhttp_request *req)
{
        const char *p =
            evhttp_find_header(evhttp_request_get_input_headers(req), "X-Forwarded-Proto");
        return p && STREQ(p, "https");
}

static void set_cookie(struct evhttp_request *req, const char *value, long max_age)
{
        char c[256];
        snprintf(c, sizeof(c),
                 UI_COOKIE_NAME "=%s; Path=/; Max-Age=%ld; HttpOnly; SameSite=Strict%s", value,
                 max_age, over_tls(req) ? "; Secure" : "");
        evhttp_add_header(evhttp_request_get_output_headers(req), "Set-Cookie", c);
}

/* The login's nonce: a Strict cookie of the login page only. */
static void set_login_cookie(struct evhttp_request *req, const char *value, long max_age)
{
        char c[256];
        snprintf(c, sizeof(c),
                 UI_LOGIN_COOKIE "=%s; Path=/ui/login; Max-Age=%ld; HttpOnly; SameSite=Strict%s",
                 value, max_age, over_tls(req) ? "; Secure" : "");
        evhttp_add_header(evhttp_request_get_output_headers(req), "Set-Cookie", c);
}

/* Was this address opened by the browser that asked for the code? Yes
 * when the user opened it themselves (the browser says Sec-Fetch-Site:
 * none: the address bar, a terminal, a bookmark), or from the login page
 * with the nonce its cookie carries. A link, a form or a redirect from
 * another site gets the page, which the user confirms. */
static bool login_requested(struct evhttp_request *req, const char *nonce)
{
        struct evkeyvalq *in = evhttp_request_get_input_headers(req);
        const char *site = evhttp_find_header(in, "Sec-Fetch-Site");
        if (site && STREQ(site, "none"))
                return true;
        if (!nonce || (site && !STREQ(site, "same-origin")))
                return false;
        const char *h = evhttp_find_header(in, "Cookie");
        char have[UI_SECRET_HEX + 1];
        return h && ui_cookie_get(h, UI_LOGIN_COOKIE, have, sizeof(have)) == 0 &&
               ui_nonce_ok(have, nonce);
}

/* The page that asks the user to confirm a login, its nonce in a Strict
 * cookie and in the form: another site can lead a browser here, never
 * past it. */
static void login_confirm(struct daemon *d, struct evhttp_request *req, const char *code)
{
        char nonce[UI_SECRET_HEX + 1];
        struct evbuffer *b = evbuffer_new();
        if (!b || random_hex(nonce, UI_SECRET_HEX) < 0 || !ui_secret_form(code)) {
                if (b)
                        evbuffer_free(b);
                evhttp_send_error(req, 500, NULL);
                return;
        }
        /* code and nonce are 64 hex digits each (checked): no escaping. */
        evbuffer_add_printf(
            b,
            "<!doctype html><html lang=\"en\"><head><meta charset=\"utf-8\">"
            "<title>Airlock: log in</title><link rel=\"stylesheet\" href=\"/ui/app.css\">"
            "</head><body><main class=\"notice\"><h1>Log in to the dashboard?</h1>"
            "<p>Only if you ran <code>airlock ui</code> yourself just now: a login code "
            "someone else sent you would have you work as their grant.</p>"
            "<form method=\"get\" action=\"/ui/login\"><input type=\"hidden\" name=\"code\" "
            "value=\"%s\"><input type=\"hidden\" name=\"nonce\" value=\"%s\">"
            "<button type=\"submit\">Log in</button></form></main></body></html>\n",
            code, nonce);
        set_login_cookie(req, nonce, UI_CODE_TTL_MS / 1000);
        security_headers(req);
        reply_body(d, req, 200, "text/html; charset=utf-8", b);
        evbuffer_free(b);
}

static struct ui_session *session_of(struct evhttp_request *req)
{
        const char *h = evhttp_find_header(evhttp_request_get_input_headers(req), "Cookie");
        char value[UI_SECRET_HEX + 1];
        if (!h || ui_cookie_get(h, UI_COOKIE_NAME, value, sizeof(value)) < 0)
                return NULL;
        return ui_session_find(&sessions, value, daemon_now_ms());
}

static void login(struct daemon *d, struct evhttp_request *req)
{
        struct evkeyvalq q;
        const struct evhttp_uri *uri = evhttp_request_get_evhttp_uri(req);
        const char *qs = evhttp_uri_get_query(uri);
        if (!qs || evhttp_parse_query_str(qs, &q) < 0) {
                reply_page(d, req, 400, "No login code",
                           "This address needs a code: run <code>airlock ui</code> for a new one.");
                return;
        }
        const char *code = evhttp_find_header(&q, "code");
        char cookie[UI_SECRET_HEX + 1];
        const struct ui_session *fresh = NULL;
        int r = code ? ui_code_check(&sessions, code, daemon_now_ms()) : -EINVAL;
        if (r == 0 && !login_requested(req, evhttp_find_header(&q, "nonce"))) {
                login_confirm(d, req, code);
                evhttp_clear_headers(&q);
                return;
        }
        if (r == 0)
                r = ui_code_redeem(&sessions, code, daemon_now_ms(), cookie, &fresh);
        evhttp_clear_headers(&q);
        if (r == -ETIMEDOUT) {
                reply_page(d, req, 401, "Login code expired",
                           "Codes are good for 60 seconds: run <code>airlock ui</code> again.");
                return;
        }
        if (r < 0) {
                reply_page(d, req, 401, "Login code not valid",
                           "This code is unknown or was used already (each works once): run "
                           "<code>airlock ui</code> again.");
                return;
        }
        /* A browser logged in as one grant is not switched to another by
         * following a link (a login CSRF: someone else's code would have
         * the user work in sandboxes that someone can read): logging out
         * comes first. The same grant's code just renews the session. */
        char fresh_grant[GRANT_HASH_HEX + 1], fresh_csrf[UI_SECRET_HEX + 1];
        memcpy(fresh_grant, fresh->grant_hash, sizeof(fresh_grant));
        memcpy(fresh_csrf, fresh->csrf, sizeof(fresh_csrf));
        const char *h = evhttp_find_header(evhttp_request_get_input_headers(req), "Cookie");
        char oldval[UI_SECRET_HEX + 1];
        const struct ui_session *old =
            h && ui_cookie_get(h, UI_COOKIE_NAME, oldval, sizeof(oldval)) == 0
                ? ui_session_find(&sessions, oldval, daemon_now_ms())
                : NULL;
        if (old && !STREQ(old->grant_hash, fresh_grant)) {
                ui_session_end(&sessions, cookie);
                reply_page(d, req, 409, "Logged in as another grant",
                           "This browser has a dashboard session of another grant: log out "
                           "first, then run <code>airlock ui</code> again.");
                return;
        }
        if (old)
                ui_session_end(&sessions, oldval);
        char nonce[UI_SECRET_HEX + 1];
        if (h && ui_cookie_get(h, UI_LOGIN_COOKIE, nonce, sizeof(nonce)) == 0)
                set_login_cookie(req, "", 0); /* used: gone */
        set_cookie(req, cookie, UI_SESSION_TTL_MS / 1000);
        security_headers(req);
        /* The session's other half, its token, goes to the page in the
         * fragment, which the browser keeps to itself: never in a cookie,
         * which it would send to every port of this host. */
        _cleanup_free_ char *where = xasprintf("/ui/#csrf=%s", fresh_csrf);
        evhttp_add_header(evhttp_request_get_output_headers(req), "Location", where);
        count_reply(d, 303);
        evhttp_send_reply(req, 303, "See Other", NULL);
}

bool ui_serve(struct daemon *d, struct evhttp_request *req, const char *path)
{
        if (!STREQ(path, "/ui") && strncmp(path, "/ui/", 4) != 0)
                return false;
        if (evhttp_request_get_command(req) != EVHTTP_REQ_GET) {
                evhttp_add_header(evhttp_request_get_output_headers(req), "Allow", "GET");
                reply_error(d, req, 405, "method_not_allowed", "use GET");
                return true;
        }
        if (STREQ(path, "/ui")) {
                evhttp_add_header(evhttp_request_get_output_headers(req), "Location", "/ui/");
                count_reply(d, 308);
                evhttp_send_reply(req, 308, "Permanent Redirect", NULL);
                return true;
        }
        if (STREQ(path, "/ui/login")) {
                login(d, req);
                return true;
        }
        const char *name = path + 4;
        if (!*name)
                name = "index.html";
        for (size_t i = 0; i < ui_assets_n; i++) {
                if (!STREQ(ui_assets[i].name, name))
                        continue;
                struct evbuffer *b = evbuffer_new();
                if (!b) {
                        evhttp_send_error(req, 500, NULL);
                        return true;
                }
                evbuffer_add_reference(b, ui_assets[i].data, ui_assets[i].len, NULL, NULL);
                security_headers(req);
                reply_body(d, req, 200, ui_assets[i].type, b);
                evbuffer_free(b);
                return true;
        }
        reply_error(d, req, 404, "not_found", "no such page: %s", path);
        return true;
}

int ui_authenticate(struct daemon *d, struct evhttp_request *req, struct grant **ret)
{
        struct evkeyvalq *h = evhttp_request_get_input_headers(req);
        const char *cookie = evhttp_find_header(h, "Cookie");
        char value[UI_SECRET_HEX + 1];
        int r = cookie ? ui_cookie_get(cookie, UI_COOKIE_NAME, value, sizeof(value)) : -ENOENT;
        if (r == -ENOENT)
                return 0;
        /* A value too long for a session's is none. */
        struct ui_session *s = r < 0 ? NULL : ui_session_find(&sessions, value, daemon_now_ms());
        if (!s) {
                reply_error(d, req, 401, "unauthorized",
                            "the dashboard session has ended: run 'airlock ui' to log in again");
                return -1;
        }
        const char *up = evhttp_find_header(h, "Upgrade");
        bool upgrade = up && strcasecmp(up, "websocket") == 0;
        /* A browser's WebSocket sends no header of the page's: its token
         * comes as a subprotocol. */
        char ws_token[UI_SECRET_HEX + 1];
        const char *csrf = evhttp_find_header(h, UI_CSRF_HEADER);
        if (upgrade && !csrf &&
            ui_ws_protocol_token(evhttp_find_header(h, "Sec-WebSocket-Protocol"), ws_token) == 0)
                csrf = ws_token;
        const char *why = ui_request_refusal(s, evhttp_request_get_command(req) == EVHTTP_REQ_GET,
                                             upgrade, evhttp_find_header(h, "Origin"),
                                             evhttp_find_header(h, "Host"), csrf);
        if (why) {
                reply_error(d, req, 403, "csrf_refused", "%s", why);
                return -1;
        }
        struct grant *g = NULL;
        r = store_grant_by_hash(d->store, s->grant_hash, &g);
        if (r == -ENOENT) {
                ui_sessions_drop_grant(&sessions, s->grant_hash);
                reply_error(d, req, 401, "unauthorized",
                            "the dashboard session's grant was revoked");
                return -1;
        }
        if (r < 0) {
                reply_error(d, req, 500, "internal", "looking up the grant: %s", strerror(-r));
                return -1;
        }
        *ret = g;
        return 1;
}

void route_ui_code(struct daemon *d, struct evhttp_request *req, const struct route_args *a)
{
        /* A session may not mint the codes that would outlive it. */
        if (!evhttp_find_header(evhttp_request_get_input_headers(req), "Authorization")) {
                reply_error(d, req, 403, "authz_denied",
                            "a login code is made with the grant's token (airlock ui), not from "
                            "a dashboard session");
                return;
        }
        char code[UI_SECRET_HEX + 1];
        int r = ui_code_new(&sessions, a->grant->token_hash, daemon_now_ms(), code);
        if (r == -EAGAIN) {
                reply_error(d, req, 429, "too_many_codes",
                            "%d login codes of this grant (or %d in all) wait to be used; try "
                            "again within a minute",
                            UI_GRANT_CODES_MAX, UI_CODES_MAX);
                return;
        }
        if (r < 0) {
                reply_error(d, req, 500, "internal", "making a login code: %s", strerror(-r));
                return;
        }
        _cleanup_free_ char *path = xasprintf("/ui/login?code=%s", code);
        json_t *o = json_pack("{s:s, s:s, s:i}", "code", code, "path", path, "expiresIn",
                              UI_CODE_TTL_MS / 1000);
        if (d->listen_addr) {
                _cleanup_free_ char *url = xasprintf("http://%s%s", d->listen_addr, path);
                json_object_set_new(o, "url", json_string(url));
        }
        reply_json(d, req, 201, o);
}

static json_t *classes_json(const struct grant *g)
{
        static const char *const names[] = {"small", "medium", "large", "xlarge"};
        json_t *a = json_array();
        for (size_t i = 0; i < ARRAY_SIZE(names); i++) {
                const struct policy_class *c = policy_class_find(names[i]);
                if (!c)
                        continue;
                json_array_append_new(a, json_pack("{s:s, s:I, s:f, s:I, s:I, s:I, s:b}", "name",
                                                   c->name, "memory", (json_int_t)c->memory, "cpus",
                                                   c->cpus_milli / 1000.0, "cpuTime",
                                                   (json_int_t)c->cpu_time_s, "timeout",
                                                   (json_int_t)(c->timeout_ms / 1000), "netRate",
                                                   (json_int_t)c->net_rate, "allowed",
                                                   grant_allows_class(g, c->name)));
        }
        return a;
}

void route_ui_session(struct daemon *d, struct evhttp_request *req, const struct route_args *a)
{
        struct ui_session *s = session_of(req);
        if (!s) {
                reply_error(d, req, 404, "not_found", "this request has no dashboard session");
                return;
        }
        const struct grant *g = a->grant;
        _cleanup_free_ char *classes = grant_classes_string(g);
        _cleanup_free_ char *tools = grant_tools_string(g);
        struct policy *p = policy_new();
        _cleanup_free_ char *pj = p ? policy_to_json(p) : NULL;
        policy_free(p);
        json_t *dp = pj ? json_loads(pj, 0, NULL) : NULL;
        json_t *o = json_pack(
            "{s:s, s:s, s:I, s:{s:b, s:b, s:b, s:b, s:I, s:s, s:s}, s:o, s:o}", "grant", g->name,
            "csrf", s->csrf, "expiresAt", (json_int_t)s->expires_ms, "permissions", "allowSandbox",
            g->allow_sandbox, "allowExec", g->allow_exec, "allowHostWorkspace",
            g->allow_host_workspace, "allowGit", g->allow_git, "maxSandboxes",
            (json_int_t)g->max_sandboxes, "classes", classes ? classes : "", "tools",
            tools ? tools : "", "classes", classes_json(g), "defaultPolicy", dp ? dp : json_null());
        reply_json(d, req, 200, o);
}

void route_ui_logout(struct daemon *d, struct evhttp_request *req, const struct route_args *a)
{
        (void)a;
        const char *h = evhttp_find_header(evhttp_request_get_input_headers(req), "Cookie");
        char value[UI_SECRET_HEX + 1];
        if (!h || ui_cookie_get(h, UI_COOKIE_NAME, value, sizeof(value)) < 0 ||
            ui_session_end(&sessions, value) < 0) {
                reply_error(d, req, 404, "not_found", "this request has no dashboard session");
                return;
        }
        set_cookie(req, "", 0);
        reply_json(d, req, 200, json_pack("{s:b}", "ok", true));
}

/* A host job's JSON answer for the page: the object the child printed,
 * or a 500 naming what it said instead. */
static void reply_job_json(struct daemon *d, struct evhttp_request *req,
                           const struct job_result *res, const char *what)
{
        json_error_t jerr;
        size_t len = evbuffer_get_length(res->out);
        json_t *o = res->exit_code < 0 || res->timed_out
                        ? NULL
                        : json_loadb((const char *)evbuffer_pullup(res->out, -1), len, 0, &jerr);
        if (json_is_object(o))
                reply_json(d, req, 200, o);
        else {
                json_decref(o);
                reply_error(d, req, 500, "internal", "%s gave no report: %.200s", what,
                            res->err ? res->err : "");
        }
}

/* One verification at a time: any grant may ask, and each reads the whole
 * log (nine files of 64 MiB by default). It ran on the loop once, which
 * then served no one else, the kill switch included. */
static bool verify_running;

struct host_report {
        struct daemon *d;
        struct evhttp_request *req;
};

static void verify_done(const struct job_result *res, void *userdata)
{
        struct host_report *c = userdata;
        reply_job_json(c->d, c->req, res, "airlock audit verify");
        verify_running = false;
        free(c);
}

/* GET /v1/ui/audit/verify: whether the audit log's hash chain holds, as
 * `airlock audit verify` says of the same files, run by the daemon in a
 * job (the child reads; the loop goes on). */
void route_ui_audit_verify(struct daemon *d, struct evhttp_request *req, const struct route_args *a)
{
        (void)a;
        if (!d->audit_path) {
                reply_error(d, req, 404, "not_found", "this daemon keeps no audit log");
                return;
        }
        if (verify_running) {
                reply_error(d, req, 429, "busy",
                            "the audit log is being verified for another request; "
                            "ask again in a moment");
                return;
        }
        struct host_report *c = xcalloc(1, sizeof(*c));
        *c = (struct host_report){.d = d, .req = req};
        char *argv[] = {d->airlock_bin, (char *)"audit", (char *)"verify", (char *)"--json",
                        (char *)d->audit_path, NULL};
        struct al_error err = {0};
        if (job_start(d, argv, 64 * 1024, verify_done, c, &err) < 0) {
                reply_error(d, req, 500, "internal", "%s", err.msg);
                free(c);
                return;
        }
        verify_running = true;
}

/* One doctor at a time: each forks its probes, and any grant may ask. */
static bool doctor_running;

static void doctor_done(const struct job_result *res, void *userdata)
{
        struct host_report *c = userdata;
        reply_job_json(c->d, c->req, res, "airlock doctor");
        doctor_running = false;
        free(c);
}

/* GET /v1/ui/doctor: what `airlock doctor --json` says of this host, run
 * by the daemon (as the daemon's user, in a job: it forks its probes). */
void route_ui_doctor(struct daemon *d, struct evhttp_request *req, const struct route_args *a)
{
        (void)a;
        if (doctor_running) {
                reply_error(d, req, 429, "busy",
                            "airlock doctor is running for another request; "
                            "ask again in a moment");
                return;
        }
        struct host_report *c = xcalloc(1, sizeof(*c));
        *c = (struct host_report){.d = d, .req = req};
        char *argv[] = {d->airlock_bin, (char *)"doctor", (char *)"--json", NULL};
        struct al_error err = {0};
        if (job_start(d, argv, 256 * 1024, doctor_done, c, &err) < 0) {
                reply_error(d, req, 500, "internal", "%s", err.msg);
                free(c);
                return;
        }
        doctor_running = true;
}
