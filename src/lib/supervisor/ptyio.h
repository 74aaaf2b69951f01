/* SPDX-License-Identifier: Apache-2.0 */
#pragma once

#include <event2/event.h>
#include <stdbool.h>

/* `airlock run -t`: what the user types goes into the sandbox's terminal
 * (its master, held by the supervisor), and the user's terminal's size
 * follows it there on SIGWINCH. The output direction is the supervisor's
 * ordinary output stream, read from the same master. */
struct ptyio;

/* in_fd: the user's input (not made non-blocking: it is the user's own file
 * description); master: the terminal's master (the caller keeps it and
 * closes it after ptyio_free); tty_fd: the user's terminal for its size, or
 * -1. */
struct ptyio *ptyio_start(struct event_base *base, int in_fd, int master, int tty_fd);
/* Copy the user's terminal size into the sandbox's now. */
void ptyio_resize(struct ptyio *p);
struct ptyio *ptyio_free(struct ptyio *p);
/* Stop reading the user's input (a prompt of the supervisor's reads it:
 * askprompt.c), or start again. NULL is fine. */
void ptyio_pause(struct ptyio *p, bool pause);
