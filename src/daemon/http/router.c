/* SPDX-License-Identifier: Apache-2.0 */
/* The API's router: a table of method, path pattern and handler. Before the
 * table: the guard's verdict on the connection, then the grant (nothing of
 * a request is parsed or kept for a client that has not shown one), then
 * the query string. A path no pattern matches is a 404; a path some
 * pattern matches under another method is a 405 naming the methods that
 * would do (Allow). */
#include <ctype.h>
#include <event2/http.h>
#include <string.h>

#include "trace.h"
#include "daemon.h"
#include "grants.h"
#include "httpguard.h"
#include "routes.h"
#include "sandbox.h"
#include "store.h"
#include "util.h"

struct route {
        enum evhttp_cmd_type method;
        /* Literal but for {id} (a sandbox: 16 hex digits) and {pid} (a
         * process number), each one whole path segment. */
        const char *pattern;
        route_fn fn;
};

static const struct route routes[] = {
    {EVHTTP_REQ_GET, "/healthz", route_healthz},
    {EVHTTP_REQ_GET, "/metrics", route_metrics},
    {EVHTTP_REQ_GET, "/v1/sandboxes", route_sandbox_list},
    {EVHTTP_REQ_POST, "/v1/sandboxes", route_sandbox_create},
    {EVHTTP_REQ_GET, "/v1/sandboxes/", route_sandbox_list},
    {EVHTTP_REQ_POST, "/v1/sandboxes/", route_sandbox_create},
    {EVHTTP_REQ_GET, "/v1/sandboxes/{id}", route_sandbox_get},
    {EVHTTP_REQ_DELETE, "/v1/sandboxes/{id}", route_sandbox_delete},
    {EVHTTP_REQ_POST, "/v1/sandboxes/{id}/ttl", route_sandbox_ttl},
    {EVHTTP_REQ_POST, "/v1/sandboxes/{id}/exec", route_exec},
    {EVHTTP_REQ_GET, "/v1/sandboxes/{id}/files", route_files},
    {EVHTTP_REQ_PUT, "/v1/sandboxes/{id}/files", route_files},
    {EVHTTP_REQ_DELETE, "/v1/sandboxes/{id}/files", route_files},
    {EVHTTP_REQ_GET, "/v1/sandboxes/{id}/files/list", route_files_list},
    {EVHTTP_REQ_POST, "/v1/sandboxes/{id}/files/mkdir", route_files_mkdir},
    {EVHTTP_REQ_POST, "/v1/sandboxes/{id}/files/rename", route_files_rename},
    {EVHTTP_REQ_GET, "/v1/sandboxes/{id}/files/stat", route_files_stat},
    {EVHTTP_REQ_GET, "/v1/sandboxes/{id}/files/exists", route_files_exists},
    {EVHTTP_REQ_GET, "/v1/sandboxes/{id}/files/watch", route_files_watch},
    {EVHTTP_REQ_GET, "/v1/sandboxes/{id}/files/tar", route_files_tar},
    {EVHTTP_REQ_PUT, "/v1/sandboxes/{id}/files/tar", route_files_tar},
    {EVHTTP_REQ_GET, "/v1/sandboxes/{id}/diff", route_diff},
    {EVHTTP_REQ_POST, "/v1/sandboxes/{id}/accept", route_accept},
    {EVHTTP_REQ_POST, "/v1/sandboxes/{id}/discard", route_discard},
    {EVHTTP_REQ_POST, "/v1/sandboxes/{id}/export", route_export},
    {EVHTTP_REQ_POST, "/v1/sandboxes/{id}/push", route_push},
    {EVHTTP_REQ_GET, "/v1/sandboxes/{id}/audit", route_audit},
    {EVHTTP_REQ_GET, "/v1/sandboxes/{id}/tools", route_tools},
    {EVHTTP_REQ_GET, "/v1/sandboxes/{id}/processes", route_processes},
    {EVHTTP_REQ_GET, "/v1/sandboxes/{id}/processes/{pid}/events", route_events},
    {EVHTTP_REQ_POST, "/v1/sandboxes/{id}/processes/{pid}/stdin", route_stdin},
    {EVHTTP_REQ_POST, "/v1/sandboxes/{id}/processes/{pid}/signal", route_signal},
    {EVHTTP_REQ_GET, "/v1/sandboxes/{id}/ports", route_ports},
    {EVHTTP_REQ_POST, "/v1/sandboxes/{id}/ports", route_ports},
    {EVHTTP_REQ_DELETE, "/v1/sandboxes/{id}/ports/{pid}", route_port_delete},
    {EVHTTP_REQ_GET, "/v1/sandboxes/{id}/processes/{pid}/pty", route_pty},
    {EVHTTP_REQ_POST, "/v1/sandboxes/{id}/processes/{pid}/resize", route_resize},
    {EVHTTP_REQ_GET, "/v1/volumes", route_volume_list},
    {EVHTTP_REQ_POST, "/v1/volumes", route_volume_create},
    {EVHTTP_REQ_GET, "/v1/volumes/{name}", route_volume_get},
    {EVHTTP_REQ_DELETE, "/v1/volumes/{name}", route_volume_delete},
    {EVHTTP_REQ_GET, "/v1/events", route_events_stream},
    {EVHTTP_REQ_POST, "/v1/stop", route_stop},
    {EVHTTP_REQ_POST, "/v1/ui/codes", route_ui_code},
    {EVHTTP_REQ_GET, "/v1/ui/session", route_ui_session},
    {EVHTTP_REQ_POST, "/v1/ui/logout", route_ui_logout},
    {EVHTTP_REQ_GET, "/v1/ui/audit/verify", route_ui_audit_verify},
    {EVHTTP_REQ_GET, "/v1/ui/doctor", route_ui_doctor},
    {EVHTTP_REQ_GET, "/v1/sandboxes/{id}/capabilities", route_capabilities},
    {EVHTTP_REQ_POST, "/v1/sandboxes/{id}/capabilities", route_capabilities},
    {EVHTTP_REQ_POST, "/v1/sandboxes/{id}/estop", route_estop},
    {EVHTTP_REQ_GET, "/v1/approvals", route_approvals_list},
    {EVHTTP_REQ_POST, "/v1/approvals/{name}", route_approval_decide},
    {EVHTTP_REQ_POST, "/v1/runs", route_runs},
    {EVHTTP_REQ_GET, "/v1/runs/{id}", route_run_get},
    {EVHTTP_REQ_GET, "/v1/runs/{id}/events", route_run_events},
};

/* The methods, in the order Allow names them. */
static const struct {
        enum evhttp_cmd_type method;
        const char *name;
} methods[] = {
    {EVHTTP_REQ_GET, "GET"},
    {EVHTTP_REQ_POST, "POST"},
    {EVHTTP_REQ_PUT, "PUT"},
    {EVHTTP_REQ_DELETE, "DELETE"},
};

static bool valid_id(const char *s, size_t n)
{
        if (n != 16)
                return false;
        for (size_t i = 0; i < n; i++)
                if (!isdigit((unsigned char)s[i]) && !(s[i] >= 'a' && s[i] <= 'f'))
                        return false;
        return true;
}

/* A {id} or {pid} segment that is none: the 404 it gets, when no pattern
 * matches the whole path. */
struct bad_segment {
        bool is_id;
        const char *at;
        size_t len;
};

/* 1 when path matches pattern (a->id and a->pid set), 0 when it does not;
 * -1 when it would but for a {id} or {pid} segment, described in *bad. */
static int match(const char *pattern, const char *path, struct route_args *a,
                 struct bad_segment *bad)
{
        const char *p = pattern, *s = path;
        while (*p) {
                if (*p != '{') {
                        if (*p != *s)
                                return 0;
                        p++;
                        s++;
                        continue;
                }
                size_t n = strcspn(s, "/");
                bool is_id = strncmp(p, "{id}", 4) == 0;
                if (strncmp(p, "{name}", 6) == 0) {
                        /* A volume: volume.h's names only; any other
                         * segment is no volume (404 from the handler). */
                        snprintf(a->name, sizeof(a->name), "%.*s", (int)(n > 64 ? 65 : n), s);
                        if (n == 0)
                                return 0;
                } else if (is_id) {
                        if (!valid_id(s, n))
                                goto bad;
                        memcpy(a->id, s, 16);
                        a->id[16] = '\0';
                } else {
                        _cleanup_free_ char *num = xasprintf("%.*s", (int)n, s);
                        if (!parse_pid(num, &a->pid))
                                goto bad;
                }
                p = strchr(p, '}') + 1;
                s += n;
                continue;
        bad:
                *bad = (struct bad_segment){.is_id = is_id, .at = s, .len = n};
                return -1;
        }
        return *s ? 0 : 1;
}

/* Acting on a sandbox (running, writing, signalling, a terminal, a port,
 * its TTL, its review, its end) is for the grant that made it: to any other
 * grant the sandbox does not exist, so that one grant's sandboxes, with the
 * secrets and tools it was given, are never another grant's power. Reads
 * (GET, but a terminal's stream, which carries input) stay open to every
 * grant, as the reading grant's table in docs/api.md says. */
static bool acts(enum evhttp_cmd_type cmd, const char *pattern)
{
        return cmd != EVHTTP_REQ_GET || strstr(pattern, "/pty") != NULL;
}

/* Whether the grant holds the permission the route's handler asks for
 * first: a grant without it gets the handler's 403, whoever made the
 * sandbox. Every acting route is named here; one that is not is taken as
 * held, so that its sandbox is the maker's alone (a 404 to every other
 * grant) whatever its handler asks: a route added without a line here
 * fails closed, never open. */
static bool may_act(const struct grant *g, enum evhttp_cmd_type cmd, const char *pattern)
{
        if (strstr(pattern, "/push"))
                return g->allow_git;
        if (strstr(pattern, "/capabilities"))
                return g->allow_capabilities;
        if (strstr(pattern, "/ports") || strstr(pattern, "/ttl") ||
            (cmd == EVHTTP_REQ_DELETE && STREQ(pattern, "/v1/sandboxes/{id}")))
                return g->allow_sandbox;
        if (strstr(pattern, "/exec") || strstr(pattern, "/files") || strstr(pattern, "/stdin") ||
            strstr(pattern, "/signal") || strstr(pattern, "/pty") || strstr(pattern, "/resize") ||
            strstr(pattern, "/accept") || strstr(pattern, "/discard") || strstr(pattern, "/export"))
                return g->allow_exec;
        return true;
}

static bool someone_elses(struct daemon *d, const struct route_args *a)
{
        const struct sandbox *sb = sandbox_find(d, a->id);
        if (sb)
                return sb->grant && !STREQ(sb->grant, a->grant->name);
        struct store_sandbox *r = NULL;
        bool other = store_sandbox_get(d->store, a->id, &r) >= 0 && r->grant &&
                     !STREQ(r->grant, a->grant->name);
        store_sandbox_free(r);
        return other;
}

static void dispatch(struct daemon *d, struct evhttp_request *req, const char *path,
                     struct route_args *a)
{
        enum evhttp_cmd_type cmd = evhttp_request_get_command(req);
        struct bad_segment bad = {0};
        bool have_bad = false;
        unsigned allowed = 0; /* the methods of the patterns that match */
        for (size_t i = 0; i < ARRAY_SIZE(routes); i++) {
                struct route_args m = *a;
                struct bad_segment b;
                int r = match(routes[i].pattern, path, &m, &b);
                if (r < 0 && !have_bad) {
                        bad = b;
                        have_bad = true;
                }
                if (r <= 0)
                        continue;
                if (routes[i].method == cmd) {
                        if (strstr(routes[i].pattern, "{id}") && acts(cmd, routes[i].pattern) &&
                            may_act(m.grant, cmd, routes[i].pattern) && someone_elses(d, &m)) {
                                reply_error(d, req, 404, "not_found", "no sandbox %s", m.id);
                                return;
                        }
                        routes[i].fn(d, req, &m);
                        return;
                }
                allowed |= routes[i].method;
        }
        if (allowed) {
                char allow[64] = "";
                for (size_t i = 0; i < ARRAY_SIZE(methods); i++)
                        if (allowed & methods[i].method)
                                snprintf(allow + strlen(allow), sizeof(allow) - strlen(allow),
                                         "%s%s", *allow ? ", " : "", methods[i].name);
                evhttp_add_header(evhttp_request_get_output_headers(req), "Allow", allow);
                reply_error(d, req, 405, "method_not_allowed", "use %s", allow);
        } else if (have_bad && bad.is_id)
                reply_error(d, req, 404, "not_found", "no sandbox %.*s",
                            (int)(bad.len > 64 ? 64 : bad.len), bad.at);
        else if (have_bad)
                reply_error(d, req, 404, "not_found", "no process %.*s", (int)bad.len, bad.at);
        else
                reply_error(d, req, 404, "not_found", "no such endpoint: %s", path);
}

void route(struct daemon *d, struct evhttp_request *req)
{
        const struct evhttp_uri *uri = evhttp_request_get_evhttp_uri(req);
        const char *path = uri ? evhttp_uri_get_path(uri) : NULL;
        al_trace_mark("http.request");
        if (http_guard_refused(d, req))
                return;
        if (!path) {
                reply_error(d, req, 400, "bad_request", "no path");
                return;
        }
        if (ui_serve(d, req, path))
                return;
        /* Who asks comes first: nothing of a request is parsed or kept
         * for a client that has not shown a grant. */
        _cleanup_grant_ struct grant *g = authenticate(d, req);
        if (!g)
                return;
        al_trace_mark("http.auth");
        struct query q = {0};
        if (query_parse(evhttp_uri_get_query(uri), &q) < 0) {
                reply_error(d, req, 400, "bad_request", "the query string is malformed");
                return;
        }
        struct route_args a = {.grant = g, .query = &q};
        dispatch(d, req, path, &a);
        query_free(&q);
}
