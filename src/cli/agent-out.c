/* SPDX-License-Identifier: Apache-2.0 */
#include <fcntl.h>
#include <string.h>
#include <unistd.h>

#include "agent-out.h"
#include "child.h"
#include "paths.h"
#include "util.h"

/* Text of the model or the sandbox on the user's terminal: at most `max`
 * bytes, cut at a character's boundary, and no control character reaches
 * the terminal as itself (an escape sequence could set the title, write the
 * clipboard or hide what is shown): C0, DEL and C1 are written as \xNN,
 * newlines and tabs are kept. */
static void print_clean(FILE *out, const char *s, size_t max)
{
        size_t i = 0, len = s ? strlen(s) : 0;
        while (i < len && i < max) {
                unsigned char c = (unsigned char)s[i];
                if (c == 0xc2 && i + 1 < len && (unsigned char)s[i + 1] >= 0x80 &&
                    (unsigned char)s[i + 1] <= 0x9f) {
                        fprintf(out, "\\x%02x", (unsigned char)s[i + 1]);
                        i += 2;
                        continue;
                }
                size_t n = c < 0x80 ? 1 : c >= 0xf0 ? 4 : c >= 0xe0 ? 3 : 2;
                if (i + n > max || i + n > len)
                        break;
                if ((c < 0x20 && c != '\n' && c != '\t') || c == 0x7f)
                        fprintf(out, "\\x%02x", c);
                else
                        fwrite(s + i, 1, n, out);
                i += n;
        }
        if (i < len)
                fputs(" [...]", out);
}

static void print_entry(FILE *out, json_t *e)
{
        const char *type = json_string_value(json_object_get(e, "type"));
        if (!type)
                return;
        if (STREQ(type, "assistant")) {
                const char *t = json_string_value(json_object_get(e, "text"));
                if (t && t[0]) {
                        fputs("agent: model: ", out);
                        print_clean(out, t, 4000);
                        fputc('\n', out);
                }
                size_t i;
                json_t *c;
                json_array_foreach(json_object_get(e, "toolCalls"), i, c)
                {
                        _cleanup_free_ char *in =
                            json_dumps(json_object_get(c, "input"), JSON_COMPACT);
                        fputs("agent: -> ", out);
                        print_clean(out, json_string_value(json_object_get(c, "name")), 128);
                        fputc(' ', out);
                        print_clean(out, in, 300);
                        fputc('\n', out);
                }
        } else if (STREQ(type, "tool.result")) {
                const char *r = json_string_value(json_object_get(e, "result"));
                fputs("agent: <- ", out);
                print_clean(out, json_string_value(json_object_get(e, "name")), 128);
                fprintf(out, "%s: ", json_is_true(json_object_get(e, "isError")) ? " (error)" : "");
                print_clean(out, r, 400);
                fputc('\n', out);
        } else if (STREQ(type, "model.error")) {
                fprintf(out, "agent: model call failed (attempt %d): ",
                        (int)json_integer_value(json_object_get(e, "attempt")));
                print_clean(out, json_string_value(json_object_get(e, "message")), 1000);
                fputc('\n', out);
        } else if (STREQ(type, "end") && !json_is_null(json_object_get(e, "errorCode"))) {
                fprintf(out,
                        "agent: ended: %s: ", json_string_value(json_object_get(e, "errorCode")));
                print_clean(out, json_string_value(json_object_get(e, "message")), 1000);
                fputc('\n', out);
        }
        fflush(out);
}

void agent_out_entry(void *ud, json_t *e)
{
        struct transcript *t = ud;
        if (t->f) {
                char *s = json_dumps(e, JSON_COMPACT);
                if (s) {
                        fprintf(t->f, "%s\n", s);
                        fflush(t->f);
                }
                free(s);
        }
        if (!t->quiet)
                print_entry(stderr, e);
        json_decref(e);
}

/* "From <40 hex> Mon Sep 17 00:00:00 2001\n": where a patch of an mbox
 * (airlock export) starts. */
static bool is_from_line(const char *p)
{
        if (strncmp(p, "From ", 5) != 0)
                return false;
        for (int i = 0; i < 40; i++)
                if (!strchr("0123456789abcdef", p[5 + i]) || !p[5 + i])
                        return false;
        return strncmp(p + 45, " Mon Sep 17 00:00:00 2001\n", 26) == 0;
}

/* The mbox into one patch each, and each one's subject. */
void agent_out_split_mbox(const char *mbox, json_t *patches, json_t *messages)
{
        const char *p = mbox;
        while (p && *p) {
                const char *next = p;
                do
                        next = strstr(next + 1, "\nFrom ");
                while (next && !is_from_line(next + 1));
                size_t len = next ? (size_t)(next + 1 - p) : strlen(p);
                _cleanup_free_ char *one = strndup(p, len);
                json_t *s = json_string(one);
                if (s)
                        json_array_append_new(patches, s);
                const char *subj = strstr(one, "\nSubject: ");
                if (subj) {
                        subj += 10;
                        if (strncmp(subj, "[PATCH", 6) == 0 && strchr(subj, ']'))
                                subj = strchr(subj, ']') + 1;
                        while (*subj == ' ')
                                subj++;
                        _cleanup_free_ char *line = strndup(subj, strcspn(subj, "\n"));
                        json_t *m = json_string(line);
                        if (m)
                                json_array_append_new(messages, m);
                }
                p = next ? next + 1 : NULL;
        }
}
