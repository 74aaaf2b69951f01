/* SPDX-License-Identifier: Apache-2.0 */
#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <string.h>

#include "error.h"

int al_error_set(struct al_error *e, int errnum, const char *fmt, ...)
{
        if (errnum < 0)
                errnum = -errnum;
        if (e) {
                va_list ap;
                va_start(ap, fmt);
                int n = vsnprintf(e->msg, sizeof(e->msg), fmt, ap);
                va_end(ap);
                if (errnum != 0 && n >= 0 && (size_t)n < sizeof(e->msg))
                        snprintf(e->msg + n, sizeof(e->msg) - (size_t)n, ": %s", strerror(errnum));
                e->code = errnum;
        }
        return errnum != 0 ? -errnum : -EINVAL;
}

int al_error_set_message(struct al_error *e, int code, const char *fmt, ...)
{
        if (e) {
                va_list ap;
                va_start(ap, fmt);
                vsnprintf(e->msg, sizeof(e->msg), fmt, ap);
                va_end(ap);
                e->code = code;
        }
        return -code;
}

int al_error_wrap(struct al_error *e, const char *fmt, ...)
{
        if (!e)
                return -EINVAL;
        char prefix[AL_ERROR_MAX];
        va_list ap;
        va_start(ap, fmt);
        vsnprintf(prefix, sizeof(prefix), fmt, ap);
        va_end(ap);

        char old[AL_ERROR_MAX];
        memcpy(old, e->msg, sizeof(old));
        size_t plen = strlen(prefix);
        if (plen > sizeof(e->msg) - 3)
                plen = sizeof(e->msg) - 3;
        memcpy(e->msg, prefix, plen);
        if (old[0]) {
                memcpy(e->msg + plen, ": ", 2);
                plen += 2;
                size_t olen = strnlen(old, sizeof(old));
                if (olen > sizeof(e->msg) - 1 - plen)
                        olen = sizeof(e->msg) - 1 - plen;
                memcpy(e->msg + plen, old, olen);
                plen += olen;
        }
        e->msg[plen] = '\0';
        return e->code != 0 ? -e->code : -EINVAL;
}
