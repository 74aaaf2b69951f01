/* SPDX-License-Identifier: Apache-2.0 */
#pragma once

#include <stdbool.h>
#include <stdint.h>
#include <termios.h>

/* The user's terminal while a sandbox's terminal is attached to it: raw
 * mode for the duration, the mode it had put back afterwards, and its size. */
struct term_saved {
        int fd; /* -1: nothing saved, nothing to restore */
        struct termios tio;
};

/* Save fd's mode into *ret and switch it to raw mode (no echo, no line
 * editing, no signals from ^C/^Z, no output processing). -ENOTTY when fd is
 * not a terminal; *ret is then empty (restoring it does nothing). */
int term_raw(int fd, struct term_saved *ret);
/* Put the saved mode back (idempotent; safe on an empty save). */
void term_restore(struct term_saved *s);
/* The terminal's rows and columns. */
int term_size(int fd, uint16_t *ret_rows, uint16_t *ret_cols);
