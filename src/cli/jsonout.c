/* SPDX-License-Identifier: Apache-2.0 */
#include <stdio.h>

#include "jsonout.h"
#include "util.h"

json_t *json_text(const char *s)
{
        json_t *v = json_string(s);
        if (v)
                return v;
        _cleanup_free_ char *copy = xstrdup(s);
        for (char *p = copy; *p; p++)
                if ((unsigned char)*p >= 0x80)
                        *p = '?';
        return json_string(copy);
}

void json_line(json_t *o)
{
        _cleanup_free_ char *text = json_dumps(o, JSON_COMPACT);
        json_decref(o);
        printf("%s\n", text ? text : "{\"error\":\"failed\",\"message\":\"out of memory\"}");
        fflush(stdout);
}
