/* SPDX-License-Identifier: Apache-2.0 */
#pragma once

/* An error with context, filled by library code and printed once by main().
 * Each layer that knows more adds "doing what, to which object" in front:
 *   mounting "/data" at "/data": No such file or directory */

#define AL_ERROR_MAX 1024

struct al_error {
        int code; /* positive errno, or 0 when the message says it all */
        char msg[AL_ERROR_MAX];
};

/* Set the message (and errno text when errnum != 0); returns -errnum, or -EINVAL
 * when errnum is 0, so that callers can `return al_error_set(...)`. */
int al_error_set(struct al_error *e, int errnum, const char *fmt, ...)
        __attribute__((format(printf, 3, 4)));

/* Set a message that says it all (no errno text appended) and keep code for
 * the caller. Returns -code. */
int al_error_set_message(struct al_error *e, int code, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));

/* Put context in front of an existing message: "ctx: old". Returns -code. */
int al_error_wrap(struct al_error *e, const char *fmt, ...) __attribute__((format(printf, 2, 3)));

static inline void al_error_clear(struct al_error *e)
{
        if (e) {
                e->code = 0;
                e->msg[0] = '\0';
        }
}
