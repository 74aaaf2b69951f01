/* SPDX-License-Identifier: Apache-2.0 */
/* The gateway's protocol: one JSON object per line each way
 * (docs/tools.md). A request is hostile bytes: its size, its nesting and
 * its keys are checked before anything reads it. */
#include <errno.h>
#include <string.h>

#include "toolgate-internal.h"
#include "util.h"

/* Nesting of arrays and objects, counted outside strings, before the JSON
 * parser sees the text (its own limit is far deeper). */
static bool short_printable(const char *s, size_t len, size_t max)
{
        if (len == 0 || len > max || strlen(s) != len)
                return false;
        for (size_t i = 0; i < len; i++)
                if ((unsigned char)s[i] < 0x20 || s[i] == 0x7f)
                        return false;
        return true;
}

void toolgate_request_clear(struct toolgate_request *req)
{
        json_decref(req->doc);
        *req = (struct toolgate_request){0};
}

int toolgate_proto_parse(const char *line, size_t len, struct toolgate_request *ret,
                         const char **ret_why)
{
        json_error_t jerr;
        const char *key;
        json_t *v;

        *ret = (struct toolgate_request){0};
        if (len > TOOLGATE_LINE_MAX) {
                *ret_why = "the request line is longer than the gateway's limit (1 MiB)";
                return -EINVAL;
        }
        if (!json_text_depth_ok(line, len, TOOLGATE_DEPTH_MAX)) {
                *ret_why = "the request nests deeper than the gateway's limit (32)";
                return -EINVAL;
        }
        json_t *doc = json_loadb(line, len, JSON_REJECT_DUPLICATES, &jerr);
        if (!doc || !json_is_object(doc)) {
                json_decref(doc);
                *ret_why = "the request is not a JSON object on one line";
                return -EINVAL;
        }
        ret->doc = doc;

        /* What identifies the call first, so that even a refusal names it. */
        v = json_object_get(doc, "callId");
        if (json_is_string(v) &&
            short_printable(json_string_value(v), json_string_length(v), TOOLGATE_CALL_ID_MAX))
                ret->call_id = json_string_value(v);
        v = json_object_get(doc, "runId");
        if (json_is_string(v) && strlen(json_string_value(v)) == json_string_length(v))
                ret->run_id = json_string_value(v);

        json_object_foreach(doc, key, v)
        {
                if (STREQ(key, "runId") || STREQ(key, "callId") || STREQ(key, "tool") ||
                    STREQ(key, "args") || STREQ(key, "op"))
                        continue;
                *ret_why = "the request has an unknown key (runId, callId, tool, args, op)";
                return -EINVAL;
        }
        if (json_object_get(doc, "callId") && !ret->call_id) {
                *ret_why = "\"callId\" must be a string of 1 to 128 printable bytes";
                return -EINVAL;
        }
        v = json_object_get(doc, "op");
        if (v) {
                if (!json_is_string(v) || !STREQ(json_string_value(v), "list")) {
                        *ret_why = "\"op\" must be \"list\"";
                        return -EINVAL;
                }
                if (json_object_get(doc, "tool") || json_object_get(doc, "args")) {
                        *ret_why = "\"op\": \"list\" takes no \"tool\" or \"args\"";
                        return -EINVAL;
                }
                ret->list = true;
                return 0;
        }
        v = json_object_get(doc, "tool");
        if (!json_is_string(v) ||
            !short_printable(json_string_value(v), json_string_length(v), TOOLGATE_TOOL_NAME_MAX)) {
                *ret_why = "\"tool\" must be a tool's name, 1 to 128 printable bytes";
                return -EINVAL;
        }
        ret->tool = json_string_value(v);
        v = json_object_get(doc, "args");
        if (v && !json_is_object(v)) {
                *ret_why = "\"args\" must be an object";
                return -EINVAL;
        }
        ret->args = v;
        return 0;
}

static char *dump_line(json_t *o, size_t *ret_len)
{
        char *s = json_dumps(o, JSON_COMPACT | JSON_ENCODE_ANY);
        json_decref(o);
        if (!s)
                return NULL;
        size_t n = strlen(s);
        char *line = xrealloc(s, n + 2, 1);
        line[n] = '\n';
        line[n + 1] = '\0';
        *ret_len = n + 1;
        return line;
}

char *toolgate_proto_ok(const char *call_id, const json_t *value, size_t *ret_len)
{
        json_t *o = json_object();
        json_object_set_new(o, "callId", call_id ? json_string(call_id) : json_null());
        json_object_set_new(o, "ok", json_true());
        json_object_set(o, "value", value ? (json_t *)value : json_null());
        return dump_line(o, ret_len);
}

char *toolgate_proto_error(const char *call_id, const char *code, const char *message,
                           size_t *ret_len)
{
        json_t *o = json_object();
        json_object_set_new(o, "callId", call_id ? json_string(call_id) : json_null());
        json_object_set_new(o, "ok", json_false());
        json_object_set_new(o, "errorCode", json_string(code));
        /* A message that is not UTF-8 (bytes a tool printed) must not lose
         * the whole answer: json_string refuses it, so say less. */
        json_t *m = json_string(message ? message : "");
        json_object_set_new(o, "safeMessage", m ? m : json_string("(unprintable message)"));
        return dump_line(o, ret_len);
}

const char *toolgate_escape(const char *s, char *buf, size_t size)
{
        static const char hex[] = "0123456789abcdef";
        size_t n = 0;

        if (!s)
                s = "";
        for (; *s && n + 5 < size; s++) {
                unsigned char ch = (unsigned char)*s;
                if (ch < 0x20 || ch >= 0x7f || ch == '"' || ch == '\\') {
                        buf[n++] = '\\';
                        buf[n++] = 'x';
                        buf[n++] = hex[ch >> 4];
                        buf[n++] = hex[ch & 15];
                } else
                        buf[n++] = (char)ch;
        }
        buf[n] = '\0';
        return buf;
}
