/* SPDX-License-Identifier: Apache-2.0 */
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "agent/sse.h"
#include "util.h"

struct agent_sse {
        agent_sse_event_fn fn;
        void *ud;
        int error;
        bool skip_lf; /* the last line ended with CR: a following LF is its end too */
        char *line;
        size_t line_len, line_cap;
        char *data;
        size_t data_len, data_cap;
        bool have_data;
        char name[AGENT_SSE_NAME_MAX + 1];
};

struct agent_sse *agent_sse_new(agent_sse_event_fn fn, void *ud)
{
        struct agent_sse *s = xcalloc(1, sizeof(*s));
        s->fn = fn;
        s->ud = ud;
        return s;
}

/* Room for `need` bytes and a NUL in *buf, grown by doubling; the bounds
 * are checked by the callers before. */
static void reserve(char **buf, size_t *cap, size_t need)
{
        if (need + 1 <= *cap)
                return;
        size_t n = *cap ? *cap : 256;
        while (n < need + 1)
                n *= 2;
        *buf = xrealloc(*buf, n, 1);
        *cap = n;
}

struct agent_sse *agent_sse_free(struct agent_sse *s)
{
        if (s) {
                free(s->line);
                free(s->data);
                free(s);
        }
        return NULL;
}

static int dispatch(struct agent_sse *s)
{
        int r = 0;
        if (s->have_data) {
                reserve(&s->data, &s->data_cap, s->data_len);
                s->data[s->data_len] = '\0';
                r = s->fn(s->ud, s->name[0] ? s->name : "message", s->data, s->data_len);
        }
        s->have_data = false;
        s->data_len = 0;
        s->name[0] = '\0';
        return r;
}

static int field(struct agent_sse *s, const char *line, size_t len)
{
        if (len == 0)
                return dispatch(s);
        if (line[0] == ':')
                return 0; /* a comment */
        const char *colon = memchr(line, ':', len);
        size_t nlen = colon ? (size_t)(colon - line) : len;
        const char *v = colon ? colon + 1 : line + len;
        size_t vlen = colon ? len - nlen - 1 : 0;
        if (vlen && v[0] == ' ') {
                v++;
                vlen--;
        }
        if (nlen == 4 && memcmp(line, "data", 4) == 0) {
                size_t need = vlen + (s->have_data ? 1 : 0);
                if (s->data_len + need > AGENT_SSE_EVENT_MAX)
                        return -EMSGSIZE;
                reserve(&s->data, &s->data_cap, s->data_len + need);
                if (s->have_data)
                        s->data[s->data_len++] = '\n';
                memcpy(s->data + s->data_len, v, vlen);
                s->data_len += vlen;
                s->have_data = true;
        } else if (nlen == 5 && memcmp(line, "event", 5) == 0) {
                if (vlen > AGENT_SSE_NAME_MAX || memchr(v, '\0', vlen))
                        return -EMSGSIZE;
                memcpy(s->name, v, vlen);
                s->name[vlen] = '\0';
        }
        /* id, retry and unknown fields mean nothing to a one-shot reader. */
        return 0;
}

int agent_sse_feed(struct agent_sse *s, const char *buf, size_t len)
{
        for (size_t i = 0; i < len && !s->error; i++) {
                char ch = buf[i];
                if (s->skip_lf) {
                        s->skip_lf = false;
                        if (ch == '\n')
                                continue;
                }
                if (ch == '\r' || ch == '\n') {
                        s->skip_lf = ch == '\r';
                        reserve(&s->line, &s->line_cap, s->line_len);
                        s->line[s->line_len] = '\0';
                        int r = field(s, s->line, s->line_len);
                        s->line_len = 0;
                        if (r < 0)
                                s->error = r;
                        continue;
                }
                if (s->line_len == AGENT_SSE_LINE_MAX) {
                        s->error = -EMSGSIZE;
                        break;
                }
                reserve(&s->line, &s->line_cap, s->line_len + 1);
                s->line[s->line_len++] = ch;
        }
        return s->error;
}

int agent_sse_finish(struct agent_sse *s)
{
        s->line_len = 0;
        s->have_data = false;
        s->data_len = 0;
        return s->error;
}
