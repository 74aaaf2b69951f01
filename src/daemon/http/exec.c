/* SPDX-License-Identifier: Apache-2.0 */
/* POST /v1/sandboxes/{id}/exec: the request checked, its audit line
 * written, and the call on the sandbox's control socket started; the
 * relay of its answer is call.c's. */
#include <ctype.h>
#include <string.h>

#include "daemon.h"
#include "http.h"
#include "idrange.h"
#include "record.h"
#include "routes.h"
#include "sandbox.h"
#include "trace.h"
#include "util.h"
#include "call.h"

static bool valid_env_name(const char *k)
{
        if (!*k || isdigit((unsigned char)*k) || strlen(k) > 256)
                return false;
        for (const char *p = k; *p; p++)
                if (!isalnum((unsigned char)*p) && *p != '_')
                        return false;
        return true;
}

static void handle_exec(struct daemon *d, struct evhttp_request *req, struct grant *g,
                        const char *id)
{
        if (!require(d, req, g, g->allow_exec, "allowExec") || refuse_lost_store(d, req))
                return;
        json_t *body = read_json_body(d, req, false);
        if (!body)
                return;
        static const char *const keys[] = {"argv",         "env",        "cwd", "stdin", "timeout",
                                           "stallTimeout", "background", "pty", "uid",   NULL};
        json_t *ctl = NULL;
        if (reject_unknown(d, req, body, keys))
                goto out;
        if (query_utf8(req) < 0) {
                reply_bad_field(d, req, "encoding", "must be utf8 or base64");
                goto out;
        }
        json_t *argv = json_object_get(body, "argv");
        json_t *env = json_object_get(body, "env");
        json_t *cwd = json_object_get(body, "cwd");
        json_t *in = json_object_get(body, "stdin");
        json_t *bg = json_object_get(body, "background");
        double timeout, stall;
        size_t i;
        json_t *v;
        if (!json_is_array(argv) || json_array_size(argv) == 0 || json_array_size(argv) > 4096) {
                reply_bad_field(d, req, "argv", "must be a non-empty array of strings");
                goto out;
        }
        json_array_foreach(argv, i, v)
        {
                if (!json_is_string(v) || strlen(json_string_value(v)) != json_string_length(v)) {
                        _cleanup_free_ char *f = xasprintf("argv[%zu]", i);
                        reply_bad_field(d, req, f, "must be a string without NUL");
                        goto out;
                }
        }
        if (env && !json_is_null(env)) {
                const char *k;
                if (!json_is_object(env) || json_object_size(env) > 1024) {
                        reply_bad_field(d, req, "env", "must be an object of strings");
                        goto out;
                }
                json_object_foreach(env, k, v)
                {
                        if (!valid_env_name(k) || !json_is_string(v) ||
                            strlen(json_string_value(v)) != json_string_length(v)) {
                                _cleanup_free_ char *f = xasprintf("env.%s", k);
                                reply_bad_field(
                                    d, req, f,
                                    "must be a string, under a name of letters, digits and _");
                                goto out;
                        }
                }
        }
        if (cwd && !json_is_null(cwd) &&
            (!json_is_string(cwd) || json_string_value(cwd)[0] != '/' ||
             strlen(json_string_value(cwd)) != json_string_length(cwd))) {
                reply_bad_field(d, req, "cwd", "must be an absolute path inside the sandbox");
                goto out;
        }
        if (in && !json_is_null(in) &&
            (!json_is_string(in) || json_string_length(in) > STDIN_MAX)) {
                reply_bad_field(d, req, "stdin", "must be base64 text of at most 6 MiB of data");
                goto out;
        }
        if (bg && !json_is_boolean(bg)) {
                reply_bad_field(d, req, "background", "must be true or false");
                goto out;
        }
        if (body_seconds(body, "timeout", 7 * 24 * 3600.0, &timeout) < 0 || timeout == 0) {
                reply_bad_field(d, req, "timeout", "must be a positive number of seconds");
                goto out;
        }
        if (body_seconds(body, "stallTimeout", 3600.0, &stall) < 0 || stall == 0) {
                reply_bad_field(d, req, "stallTimeout",
                                "must be a positive number of seconds, at most 3600");
                goto out;
        }
        struct sandbox *sb = find_running(d, req, id);
        if (!sb)
                goto out;
        al_trace_mark("exec.parsed");
        /* A sandbox's user namespace maps its policy's uid, and with
         * "users" uids 0 to users-1, each its own unprivileged host id
         * (idrange.h): a command runs as one of those or not at all. */
        json_t *juid = json_object_get(body, "uid");
        long uid = -1;
        if (juid && !json_is_null(juid)) {
                char why[256];
                /* Not an integer from 0 to 65535: the same message. */
                uid = json_is_integer(juid) && json_integer_value(juid) >= 0 &&
                              json_integer_value(juid) <= 65535
                          ? (long)json_integer_value(juid)
                          : -2;
                if (idrange_check_uid(sb->policy, uid, why, sizeof(why))) {
                        reply_bad_field(d, req, "uid", why);
                        goto out;
                }
        }
        /* The policy's wall clock bounds every command. */
        double cap = (double)sb->policy->limits.timeout_ms / 1000.0;
        if (cap > 0 && (timeout < 0 || timeout > cap))
                timeout = cap;

        ctl = json_pack("{s:s, s:O, s:b}", "op", "exec", "argv", argv, "background",
                        json_is_true(bg));
        if (env && json_is_object(env))
                json_object_set(ctl, "env", env);
        if (json_is_string(cwd))
                json_object_set(ctl, "cwd", cwd);
        if (json_is_string(in))
                json_object_set(ctl, "stdin", in);
        if (uid >= 0)
                json_object_set_new(ctl, "uid", json_integer(uid));
        if (timeout > 0)
                json_object_set_new(ctl, "timeout", json_real(timeout));
        if (stall > 0)
                json_object_set_new(ctl, "stallTimeout", json_real(stall));
        if (!pty_exec_option(d, req, body, ctl))
                goto out;
        if (record_audit(d, id, "api.exec",
                         json_pack("{s:s, s:O, s:b, s:o}", "grant", g->name, "argv", argv,
                                   "background", json_is_true(bg), "uid",
                                   uid >= 0 ? json_integer(uid) : json_null())) < 0) {
                reply_audit_failed(d, req, d->audit_fault);
                goto out;
        }
        al_trace_mark("exec.audit");
        struct call_ctx *c = xcalloc(1, sizeof(*c));
        c->utf8 = query_utf8(req) > 0;
        c->background = json_is_true(bg);
        c->stall_ms = stall > 0 ? (uint64_t)(stall * 1000) : 0;
        c->argv = json_incref(argv);
        c->grant = xstrdup(g->name);
        snprintf(c->grant_hash, sizeof(c->grant_hash), "%s", g->token_hash);
        call_start(d, req, sb, CALL_EXEC, ctl, c);
out:
        json_decref(ctl);
        json_decref(body);
}

void route_exec(struct daemon *d, struct evhttp_request *req, const struct route_args *a)
{
        handle_exec(d, req, a->grant, a->id);
}
