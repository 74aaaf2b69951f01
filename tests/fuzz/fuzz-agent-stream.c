/* SPDX-License-Identifier: Apache-2.0 */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "agent/provider.h"
#include "agent/sse.h"

/* The model's answer as the host-owned agent loop reads it
 * (src/lib/agent/provider.c): the first byte picks the format and whether
 * it is streamed; the rest is the body. A stream is also fed to the SSE
 * parser cut at every byte, which must see the same events as when fed
 * whole. Whatever the bytes, the reply is bounded and freed. */

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static int count(void *ud, const char *name, const char *d, size_t len)
{
        (*(size_t *)ud)++;
        return strlen(d) > len || strlen(name) > AGENT_SSE_NAME_MAX ? abort(), 0 : 0;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
        if (size < 1)
                return 0;
        enum agent_provider p = (data[0] & 1) ? AGENT_PROVIDER_OPENAI : AGENT_PROVIDER_ANTHROPIC;
        const char *body = (const char *)data + 1;
        size_t len = size - 1;
        struct agent_reply r = {0};
        struct al_error err = {0};
        int rr = (data[0] & 2) ? agent_parse_stream(p, body, len, &r, &err)
                               : agent_parse_reply(p, body, len, &r, &err);
        if (rr >= 0) {
                if (r.n_calls > AGENT_CALLS_MAX || (r.text && strlen(r.text) > AGENT_TEXT_MAX))
                        abort();
                agent_reply_clear(&r);
        }
        size_t whole = 0, bytewise = 0;
        struct agent_sse *s = agent_sse_new(count, &whole);
        int a = agent_sse_feed(s, body, len);
        agent_sse_free(s);
        s = agent_sse_new(count, &bytewise);
        int b = 0;
        for (size_t i = 0; i < len && b >= 0; i++)
                b = agent_sse_feed(s, body + i, 1);
        agent_sse_free(s);
        if ((a < 0) != (b < 0) || (a >= 0 && whole != bytewise))
                abort();
        return 0;
}
