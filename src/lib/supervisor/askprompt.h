/* SPDX-License-Identifier: Apache-2.0 */
#pragma once

/* `airlock run --ask`: each ask of the sandbox's gates is put to the user on
 * their terminal, the way sudo asks for a password: what is asked, then
 * [o]nce / [a]lways / [d]eny / [n]ever with the time left. Asks wait in
 * order, one prompt at a time; the answer is read on the loop (nothing else
 * waits for it), and while a prompt is up the user's input is not copied
 * into the sandbox's terminal (-t). An ask the timeout denied first is said
 * to be too late.
 *
 * The sandbox shares the terminal and its bytes are hostile: it may print a
 * prompt of its own. So a word made at the start of the run is shown then,
 * and begins every real prompt (the sandbox never sees it); each prompt
 * begins by cancelling whatever sequence the sandbox left open and
 * resetting the attributes; the sandbox's output is held while a prompt is
 * up; and keys typed before a prompt could be read (within 500 ms, or
 * waiting in the terminal) never answer it. */

#include <stdbool.h>

struct sv_core;
struct ptyio;
struct ask_prompt;

/* tty_fd: the user's terminal (/dev/tty), opened O_RDWR by the caller, who
 * keeps it; pty: the -t copier to pause, or NULL; fwd_fd (taken, or -1): the
 * write end of the command's stdin pipe, when the terminal is its stdin
 * (-T): the prompt is then the terminal's one reader and passes on what is
 * typed while no prompt is up, and the end of input. NULL (fwd_fd closed)
 * when the run's word could not be made: nobody is asked then, and every
 * ask is denied by its timeout. */
struct ask_prompt *ask_prompt_start(struct sv_core *core, int tty_fd, struct ptyio *pty,
                                    int fwd_fd);
struct ask_prompt *ask_prompt_free(struct ask_prompt *a);
/* While a prompt is up, hold(ud, true): the sandbox's output is not relayed
 * (it waits in its pipe), so it can neither overwrite the prompt nor draw
 * a prompt beside it; hold(ud, false) when none is. */
void ask_prompt_hold_output(struct ask_prompt *a, void (*hold)(void *ud, bool hold), void *ud);
