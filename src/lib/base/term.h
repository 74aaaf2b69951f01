/* SPDX-License-Identifier: Apache-2.0 */
#pragma once

#include <stdbool.h>
#include <stdint.h>
#include <sys/types.h>
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
/* While *s holds a saved mode, a signal that would end the process by
 * default (SIGQUIT, SIGUSR1, SIGABRT, SIGSEGV, ...) puts it back first, then
 * ends the process as it would have. Handlers installed later for some of
 * them (the supervisor's SIGINT, SIGTERM, SIGHUP) take precedence. One
 * saved mode at a time; term_restore disarms it. */
void term_restore_on_fatal_signals(const struct term_saved *s);
/* The terminal's rows and columns. */
int term_size(int fd, uint16_t *ret_rows, uint16_t *ret_cols);

/* A command without a terminal of its own must not be handed the user's
 * terminal as its stdin: with it, it could change the terminal's mode or
 * file status flags (O_NONBLOCK on the shared open file) for the user's
 * shell after the run, and read it while in the background. Instead a
 * relay process copies fd (the user's terminal) into a pipe; *ret_fd is
 * the pipe's read end (close-on-exec), *ret_pid the relay, ended with
 * term_stdin_relay_end. The relay ignores ^C and ^\ (the run is ended by
 * Airlock, not by its stdin going away) and dies with its parent. */
int term_stdin_relay(int fd, int *ret_fd, pid_t *ret_pid);
void term_stdin_relay_end(pid_t pid);
