/* SPDX-License-Identifier: Apache-2.0 */
#pragma once

#include <linux/inet_diag.h>
#include <stdbool.h>
#include <sys/types.h>

/* The kernel's table of TCP sockets (NETLINK_SOCK_DIAG), read from the
 * network namespace the netlink socket was made in: the supervisor's own,
 * where the direct path's sockets live. A socket there has an inode while
 * it has a file, wherever that file is: in a process's fd table or inside
 * an SCM_RIGHTS message in transit. Reading the table needs no privilege;
 * destroying a socket needs CAP_NET_ADMIN over the namespace. */

/* A NETLINK_SOCK_DIAG socket (O_CLOEXEC), or -errno. */
int cn_sockdiag_open(void);

/* Called for every TCP socket (IPv4 and IPv6) that has a file. */
typedef void (*cn_sockdiag_fn)(void *ud, ino_t ino, int family, const struct inet_diag_sockid *id);

/* Walk the table; 0, or -errno when it cannot be read whole. */
int cn_sockdiag_walk(int nl, cn_sockdiag_fn fn, void *ud);

/* Abort the socket `id` of `family` (SOCK_DESTROY: a reset is sent and
 * every holder's next call fails, wherever the file is). 0, or -errno:
 * -EPERM without CAP_NET_ADMIN, -EOPNOTSUPP where the kernel lacks it,
 * -ENOENT when it is gone. */
int cn_sockdiag_destroy(int nl, int family, const struct inet_diag_sockid *id);
