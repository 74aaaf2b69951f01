/* SPDX-License-Identifier: Apache-2.0 */
#pragma once

#include <sys/types.h>

#include "error.h"

/* Transparent mode, the host's side: every connect() of the sandbox arrives
 * here as a seccomp notification (boundary/connect-notify.c installs the
 * filter). Loopback, Unix and other local families are connected by the
 * host on its copy of the caller's own socket, never handed back to the
 * kernel (docs/internals/netgate.md). An IPv4 or IPv6 address is read
 * once from the caller's memory, decided by the gate
 * (netgate_transparent_decide(): the name it was answered for, the rules,
 * the private ranges, the budgets) and recorded; when allowed the host
 * connects its own socket to exactly that address and installs it in place
 * of the caller's (SECCOMP_IOCTL_NOTIF_ADDFD, SECCOMP_ADDFD_FLAG_SETFD), so
 * bytes flow with no relay. A refusal is ECONNREFUSED. */

struct event_base;
struct netgate;
struct sv_connect_notify;

/* Serve `fd` (the listener, taken on success and on failure alike). */
struct sv_connect_notify *sv_connect_notify_new(struct event_base *base, struct netgate *g, int fd,
                                                struct al_error *err);
/* Answer what is pending with ECONNREFUSED, close the listener: processes
 * still inside then get ENOSYS from connect(). */
struct sv_connect_notify *sv_connect_notify_free(struct sv_connect_notify *cn);
/* The sandbox's pid 1 (as the host sees it): the direct path's sockets
 * are looked for at a revoke in its pid namespace and those nested in it,
 * whichever process connected (the agent chooses which, and it may be in
 * a pid namespace of its own, or exiting). Until it is set nothing is
 * handed over (the connection is refused). */
void sv_connect_notify_set_sandbox(struct sv_connect_notify *cn, pid_t pid1);
/* The gate's rules changed (a live revoke): each socket the direct path
 * handed over that they now refuse is shut down in the sandbox's hands
 * (pid 1 `pid1`) and recorded "revoked" (connect-handed.h). Returns how
 * many were cut, or -errno. */
int sv_connect_notify_recheck(struct sv_connect_notify *cn, pid_t pid1);
