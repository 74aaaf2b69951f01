/* SPDX-License-Identifier: Apache-2.0 */
#pragma once

#include <stddef.h>
#include <sys/types.h>
#include <sys/un.h>

/* Transparent mode (connect-notify.c): connect() on the host's copy of a
 * sandbox process's own Unix socket `sock`, to `su` (the host's one copy of
 * the address, `len` bytes). A path is resolved as the caller (thread `tid`)
 * would resolve it: beneath its root, from its working directory, with its
 * file system user and groups; an abstract or empty address belongs to the
 * socket's own network namespace. Returns 0 or a positive errno, as
 * connect() would have set it. */
int sv_unix_connect(pid_t tid, int sock, const struct sockaddr_un *su, size_t len);

/* connect() on a socket the sandbox shares with the host, from the
 * supervisor's loop: it returns within a millisecond whatever the socket's
 * flags are by then (the sandbox can clear O_NONBLOCK on its copy at any
 * moment, and a blocking connect to a full backlog would hold the loop,
 * and with it every gate, the deadman and the emergency stop). 0 or a
 * positive errno; EINTR when it was cut short: a TCP connect then goes on
 * as EINPROGRESS would, a Unix one was not made. */
struct sockaddr;
int sv_connect_bounded(int sock, const struct sockaddr *sa, unsigned len);
