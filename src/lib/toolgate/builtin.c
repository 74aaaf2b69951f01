/* SPDX-License-Identifier: Apache-2.0 */
/* The built-in tools, answered by the gateway itself. */
#include <string.h>
#include <time.h>

#include "policy.h"
#include "toolgate-internal.h"
#include "util.h"

/* core.time: {"utc": "2026-11-24T06:00:00.123456Z", "unix": 1795500000.123456} */
static json_t *core_time(void)
{
        struct timespec ts;
        struct tm tm;
        char buf[64], utc[96];

        clock_gettime(CLOCK_REALTIME, &ts);
        gmtime_r(&ts.tv_sec, &tm);
        strftime(buf, sizeof(buf), "%Y-%m-%dT%H:%M:%S", &tm);
        snprintf(utc, sizeof(utc), "%.40s.%06dZ", buf, (int)(ts.tv_nsec / 1000));
        return json_pack("{s:s, s:I, s:I}", "utc", utc, "unix", (json_int_t)ts.tv_sec, "unixMs",
                         (json_int_t)ts.tv_sec * 1000 + ts.tv_nsec / 1000000);
}

void toolgate_builtin_start(struct tg_call *c)
{
        const char *name = c->tool->def->name;
        if (STREQ(name, "core.time")) {
                json_t *v = core_time();
                char *s = json_dumps(v, JSON_COMPACT);
                size_t n = s ? strlen(s) : 0;
                free(s);
                toolgate_call_finish(c, v, NULL, NULL, NULL, -1, n);
                return;
        }
        toolgate_call_finish(c, NULL, "internal", "builtin", "no such built-in tool", -1, 0);
}
