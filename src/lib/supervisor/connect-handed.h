/* SPDX-License-Identifier: Apache-2.0 */
#pragma once

#include <stdbool.h>
#include <stddef.h>
#include <sys/types.h>

#include "netgate/transparent.h"

/* Transparent mode's direct path hands the host's own connected socket to
 * the sandbox (connect-notify.c): the gate holds no end of it. To cut one
 * at a rules change each handed socket is recorded here by its identity
 * (device and inode of the socket, from fstat) with the verdict that
 * allowed it. At a change, each record the new rules refuse is looked for
 * in the sandbox's processes (the fd tables of every process in the
 * sandbox's pid namespace or one nested in it: /proc/PID/task/TID/fd, or fdinfo where the fd
 * directory is closed to an ordinary user by a non-dumpable process),
 * taken with pidfd_getfd(2) and shut down (SHUT_RDWR): the socket, not one
 * fd, so every copy the sandbox holds is cut. Whether a socket still has a
 * file anywhere (a process, or an SCM_RIGHTS message in transit) is read
 * from the kernel's socket table (connect-sockdiag.h); a refused one that
 * is open but found in no fd table is aborted there (SOCK_DESTROY, root),
 * else the processes that could hold or receive it are killed (fail
 * closed). Records whose socket is closed are forgotten. */
#define CN_HANDED_MAX       1024    /* records; a full set refuses the next one */
#define CN_HANDED_MAX_TASKS 16384   /* tasks one scan reads */
#define CN_HANDED_MAX_FDS   1048576 /* fd entries one scan reads */

struct cn_handed_set;

/* Whether the rules refuse what `v` allowed now; what to do with a cut. */
typedef bool (*cn_handed_refused_fn)(void *ud, const struct netgate_verdict *v);
/* `reason`: "revoked" (the socket itself was cut) or "revoked_killed" (it
 * could not be reached; the processes that could hold it were killed). */
typedef void (*cn_handed_cut_fn)(void *ud, const struct netgate_verdict *v, const char *reason);

struct cn_handed_set *cn_handed_new(void);
struct cn_handed_set *cn_handed_free(struct cn_handed_set *s);
size_t cn_handed_count(const struct cn_handed_set *s);

/* Record `sock` (about to be handed to the sandbox whose pid 1 is `pid1`:
 * its pid namespace, and those nested in it, are the ones scanned; never
 * the caller's, which the agent chooses) with its verdict. When the set is full the closed ones are
 * forgotten first (the socket table; a scan without it); -ENOSPC if it is still full: the socket
 * must not be handed over. -errno when it cannot be read. */
int cn_handed_add(struct cn_handed_set *s, pid_t pid1, int sock, const struct netgate_verdict *v);

/* A recheck whose kills must be seen to take the refused sockets along
 * waits for the socket table to show them gone, up to about 2.5 s (5 ms,
 * doubled up to 1280 ms). By default that is a sleep inside
 * cn_handed_recheck(); after cn_handed_wait_async() the recheck returns
 * -EINPROGRESS instead and the caller runs cn_handed_wait_step() after
 * CN_HANDED_WAIT_FIRST_MS, then after each *ret_next_ms it gives: 1 while
 * it waits on; when done, how many were cut (the sockets still there at
 * the end: the sandbox's pid 1 killed, "revoked_killed"), or -errno as
 * cn_handed_recheck() would return. Meanwhile a recheck returns
 * -EINPROGRESS and does nothing (the caller runs it again after). */
#define CN_HANDED_WAIT_FIRST_MS 5
#define CN_HANDED_WAIT_LAST_MS  1280
void cn_handed_wait_async(struct cn_handed_set *s);
bool cn_handed_waiting(const struct cn_handed_set *s);
int cn_handed_wait_step(struct cn_handed_set *s, cn_handed_cut_fn cut, void *ud,
                        unsigned *ret_next_ms);

/* Learn the sandbox's pid namespace when not known yet: that of its pid 1
 * `pid1`, or, where its /proc is closed (an ordinary user: pid 1 is not
 * dumpable), the one on the way up from the pid namespace of `caller` (a
 * process of the sandbox, checked alive by the caller of this afterwards)
 * whose parent is this process's own: the sandbox's, however deep the
 * caller's is nested in it. 1 when learned now, 0 when known already,
 * -errno when it cannot be read. */
int cn_handed_learn_ns(struct cn_handed_set *s, pid_t pid1, pid_t caller);
/* Forget what cn_handed_learn_ns just learned (its caller was gone). */
void cn_handed_forget_ns(struct cn_handed_set *s);

/* Forget the record just added (its socket was not handed over after all). */
void cn_handed_pop(struct cn_handed_set *s);

/* The rules changed: every record `refused` says is refused is cut (above)
 * and `cut` is called for it, and it is forgotten; so is every record
 * whose socket is closed. The sandbox is the pid namespace of its pid 1
 * `pid1` and those nested in it (`pid1` (never killed for what it holds: it runs none of the
 * agent's code; killed, ending the sandbox, only when the sandbox's
 * processes cannot be read at all and the socket cannot be aborted).
 * Returns how many were cut, or -errno when the refused ones could be
 * neither cut nor their holders killed (their records are kept). */
int cn_handed_recheck(struct cn_handed_set *s, pid_t pid1, cn_handed_refused_fn refused,
                      cn_handed_cut_fn cut, void *ud);
