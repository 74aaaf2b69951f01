/* SPDX-License-Identifier: Apache-2.0 */
#pragma once

#include <stdbool.h>
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

/* Whether `su` names a path (resolved in the file system, where a hung
 * mount can make the lookup wait) rather than an abstract address. */
bool sv_unix_is_path(const struct sockaddr_un *su, size_t len);

/* sv_unix_connect() off the caller's loop, for a path: a short-lived
 * process (a fork: its copy of `sock` is the same socket, its identity
 * switched, not the loop's) resolves the path and connects, then writes
 * the errno (an int, 0 on success) to ret->answer and exits. A lookup that
 * crosses a mount whose server hangs (FUSE, NFS) waits there, not in the
 * loop. ret->answer is non-blocking and close-on-exec; the process counts
 * against the loop's helpers (connect-take.h) and is reaped with them.
 * 0, or -errno (-EAGAIN when every helper is busy). */
struct sv_unix_pending {
        int answer; /* read end: readable once the answer (or the helper's end) is there */
        int pidfd;  /* the helper, to stop it */
};
int sv_unix_connect_start(pid_t tid, int sock, const struct sockaddr_un *su, size_t len,
                          struct sv_unix_pending *ret);
/* Once ret->answer is readable: the connect's errno, or EAGAIN when the
 * helper ended without one (killed). Closes both descriptors. */
int sv_unix_connect_answer(struct sv_unix_pending *p);
/* A helper whose answer is no longer wanted (its caller went, or its time
 * ran out): killed, and both descriptors closed. No-op on one already
 * answered ({-1, -1}). */
void sv_unix_connect_stop(struct sv_unix_pending *p);

/* connect() on a socket the sandbox shares with the host, from the
 * supervisor's loop: it returns within a millisecond whatever the socket's
 * flags are by then (the sandbox can clear O_NONBLOCK on its copy at any
 * moment, and a blocking connect to a full backlog would hold the loop,
 * and with it every gate, the deadman and the emergency stop). 0 or a
 * positive errno; EINTR when it was cut short: a TCP connect then goes on
 * as EINPROGRESS would, a Unix one was not made. */
struct sockaddr;
int sv_connect_bounded(int sock, const struct sockaddr *sa, unsigned len);
