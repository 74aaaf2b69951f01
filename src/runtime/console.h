/* SPDX-License-Identifier: Apache-2.0 */
#pragma once

#include <stdint.h>

#include "error.h"

/* A container's terminal (process.terminal): a pty made on the host whose
 * master goes to the caller over --console-socket, as the runc shim
 * expects at create. The process itself gets a pty of the sandbox's own at
 * start (spawn_exec_pty_request); the keeper relays between the two and
 * carries window size changes (SIGWINCH on the host side, which is the
 * keeper's controlling terminal). */
int rt_console_open(const char *socket_path, uint16_t rows, uint16_t cols, int *ret_slave,
                    struct al_error *err);
/* The host side's window size onto the sandbox's pty master. */
void rt_console_winsize(int host_slave, int inner_master);
/* Move what is readable from one to the other: < 0 once `from` is done. */
int rt_console_pump(int from, int to);
/* What is left in `from` without waiting. */
void rt_console_drain(int from, int to);
