/* SPDX-License-Identifier: Apache-2.0 */
#include <errno.h>
#include <string.h>

#include "control-proto.h"
#include "util.h"

int control_parse_request(const char *line, size_t len, json_t **req)
{
        static const struct {
                const char *name;
                enum control_req op;
        } ops[] = {
            {CONTROL_OP_STATUS, CONTROL_REQ_STATUS},   {CONTROL_OP_EXEC, CONTROL_REQ_EXEC},
            {CONTROL_OP_ATTACH, CONTROL_REQ_ATTACH},   {CONTROL_OP_STDIN, CONTROL_REQ_STDIN},
            {CONTROL_OP_SIGNAL, CONTROL_REQ_SIGNAL},   {CONTROL_OP_REVIEW, CONTROL_REQ_REVIEW},
            {CONTROL_OP_DESTROY, CONTROL_REQ_DESTROY}, {CONTROL_OP_PORTS, CONTROL_REQ_PORTS},
            {CONTROL_OP_DESTROY, CONTROL_REQ_DESTROY}, {CONTROL_OP_RESIZE, CONTROL_REQ_RESIZE},
            {CONTROL_OP_STOP, CONTROL_REQ_STOP},
            {CONTROL_OP_CAPS, CONTROL_REQ_CAPS},
            {CONTROL_OP_ESTOP, CONTROL_REQ_ESTOP},
            {CONTROL_OP_APPROVALS, CONTROL_REQ_APPROVALS},
            {CONTROL_OP_APPROVE, CONTROL_REQ_APPROVE},
            {CONTROL_OP_FETCH, CONTROL_REQ_FETCH},
        };
        json_error_t jerr;
        *req = NULL;
        json_t *o = json_loadb(line, len, 0, &jerr);
        const char *op = json_string_value(json_object_get(o, "op"));
        if (!o || !op) {
                json_decref(o);
                return -EINVAL;
        }
        *req = o;
        for (size_t i = 0; i < ARRAY_SIZE(ops); i++)
                if (STREQ(op, ops[i].name))
                        return (int)ops[i].op;
        return CONTROL_REQ_UNKNOWN;
}

void control_exec_clear(struct control_exec *x)
{
        strv_free(x->argv);
        strv_free(x->env);
        free(x->stdin_data);
        memset(x, 0, sizeof(*x));
}

int control_parse_size(json_t *o, uint16_t *rows, uint16_t *cols)
{
        json_t *r = json_object_get(o, "rows"), *c = json_object_get(o, "cols");
        if (!json_is_object(o) || !json_is_integer(r) || !json_is_integer(c) ||
            json_integer_value(r) < 1 || json_integer_value(r) > CONTROL_PTY_MAX ||
            json_integer_value(c) < 1 || json_integer_value(c) > CONTROL_PTY_MAX)
                return -EINVAL;
        *rows = (uint16_t)json_integer_value(r);
        *cols = (uint16_t)json_integer_value(c);
        return 0;
}

static int bad(struct control_exec *x, const char **why, const char *msg)
{
        control_exec_clear(x);
        *why = msg;
        return -EINVAL;
}

int control_parse_exec(json_t *req, struct control_exec *x, const char **why)
{
        static const char argv_msg[] = "\"argv\" must be a non-empty array of strings";
        static const char env_msg[] = "\"env\" must be an object of strings";
        json_t *argv = json_object_get(req, "argv");
        json_t *env = json_object_get(req, "env");
        json_t *cwd = json_object_get(req, "cwd");
        json_t *stdin_data = json_object_get(req, "stdin");
        json_t *timeout = json_object_get(req, "timeout");
        json_t *stall = json_object_get(req, "stallTimeout");

        memset(x, 0, sizeof(*x));
        x->background = json_is_true(json_object_get(req, "background"));
        if (!json_is_array(argv) || json_array_size(argv) == 0 ||
            json_array_size(argv) > CONTROL_ARGV_MAX)
                return bad(x, why, argv_msg);
        if (env && !json_is_null(env) && !json_is_object(env))
                return bad(x, why, env_msg);
        if (cwd && !json_is_null(cwd) && (!json_is_string(cwd) || json_string_value(cwd)[0] != '/'))
                return bad(x, why, "\"cwd\" must be an absolute path");
        if (stdin_data && !json_is_null(stdin_data) && !json_is_string(stdin_data))
                return bad(x, why, "\"stdin\" must be base64 or null");
        if (timeout && !json_is_null(timeout) &&
            (!json_is_number(timeout) || json_number_value(timeout) <= 0))
                return bad(x, why, "\"timeout\" must be a positive number of seconds");
        if (stall && !json_is_null(stall) &&
            (!json_is_number(stall) || json_number_value(stall) <= 0 ||
             json_number_value(stall) * 1000 > CONTROL_STALL_MAX_MS))
                return bad(x, why,
                           "\"stallTimeout\" must be a positive number of seconds, at most 3600");

        size_t n_av = 0, n_ev = 0, i;
        json_t *v;
        json_array_foreach(argv, i, v)
        {
                if (!json_is_string(v))
                        return bad(x, why, argv_msg);
                x->argv = strv_append(x->argv, &n_av, json_string_value(v));
        }
        const char *key;
        json_object_foreach(env, key, v)
        {
                if (!json_is_string(v) || !*key || strchr(key, '='))
                        return bad(x, why, env_msg);
                if (strstr(json_string_value(v), "${secret:"))
                        return bad(x, why,
                                   "env values may not name a secret: secrets never enter the "
                                   "sandbox");
                _cleanup_free_ char *kv = xasprintf("%s=%s", key, json_string_value(v));
                x->env = strv_append(x->env, &n_ev, kv);
        }
        if (json_is_string(stdin_data) &&
            base64_decode(json_string_value(stdin_data), &x->stdin_data, &x->stdin_len) < 0)
                return bad(x, why, "\"stdin\" is not valid base64");
        json_t *pty = json_object_get(req, "pty");
        if (pty && !json_is_null(pty)) {
                if (control_parse_size(pty, &x->rows, &x->cols) < 0)
                        return bad(x, why,
                                   "\"pty\" must be {\"rows\": R, \"cols\": C}, each 1 to 4096");
                if (x->stdin_len)
                        return bad(x, why,
                                   "\"stdin\" cannot go with \"pty\": type into the terminal");
                x->pty = true;
        }
        json_t *uid = json_object_get(req, "uid");
        x->uid = -1;
        if (uid && !json_is_null(uid)) {
                if (!json_is_integer(uid) || json_integer_value(uid) < 0 ||
                    json_integer_value(uid) > 65535)
                        return bad(x, why, "\"uid\" must be an integer from 0 to 65535");
                x->uid = (long)json_integer_value(uid);
        }
        x->cwd = json_is_string(cwd) ? json_string_value(cwd) : "/workspace";
        x->timeout_s = json_is_number(timeout) ? json_number_value(timeout) : 0;
        x->stall_ms = json_is_number(stall) ? (uint64_t)(json_number_value(stall) * 1000)
                                            : CONTROL_STALL_DEFAULT_MS;
        if (x->stall_ms == 0)
                x->stall_ms = 1;
        return 0;
}
