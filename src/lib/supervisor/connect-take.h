/* SPDX-License-Identifier: Apache-2.0 */
#pragma once

#include <stdbool.h>
#include <stddef.h>
#include <sys/types.h>

/* A descriptor of the sandbox's, taken here (pidfd_getfd(2)) by the
 * connect() handling and the revoke's scan, is a socket, and the
 * supervisor's loop never closes anything else it took. The descriptor
 * number is the agent's to choose: a file on a mount that hangs (a FUSE or
 * NFS server that stopped answering) blocks close(2) in its flush, on
 * every close and not only the last, and fstat(2) in its getattr. So the
 * type is read first from /proc/PID/fdinfo/FD (the socket file system's
 * mount id, nothing of the file's own file system), the descriptor taken
 * only when it is a socket, and the copy checked again with getsockopt(2)
 * (never a file system call): the number may have been pointed at another
 * file between the two. A copy that is not a socket then, or a socket set
 * to linger on close, is closed by a closer: a process of its own sharing
 * the supervisor's fd table (CLONE_FILES), so whatever the close waits
 * for, the loop does not; it dies with the supervisor (PR_SET_PDEATHSIG)
 * and the waits it could be in are killable. At most CN_CLOSERS_MAX
 * closers live at once; while that many hang, nothing more is taken. */
#define CN_CLOSERS_MAX 16

/* What /proc/PID/fdinfo/FD says of a descriptor. */
struct cn_fdinfo {
        unsigned long flags; /* octal in the file: O_NONBLOCK, O_CLOEXEC, ... */
        long long mnt_id;
        unsigned long long ino;
};

/* The start of a small /proc file (one read, at most size - 1 bytes) in
 * buf, NUL-terminated; -errno, or -EIO when it is empty. */
int cn_read_small(const char *path, char *buf, size_t size);

/* fd `fd` of `pid` (a thread id is fine), or -errno (-ENOENT: not open). */
int cn_fdinfo_read(pid_t pid, int fd, struct cn_fdinfo *ret);

/* The thread group of thread `tid`, or -errno. */
int cn_tgid_of(pid_t tid, pid_t *ret);

/* Take fd `fd` of thread `tid` when it is a socket: *ret_copy (the copy,
 * to be let go with cn_drop()) and *ret_flags (its file flags). `sock_mnt`
 * is the socket file system's mount id (cn_sock_mount_id()). -ENOTSOCK
 * when it is not one (as connect(2) says), -EBADF when it is not open,
 * -EAGAIN when every closer hangs, -errno else. */
int cn_take_socket(pid_t tid, int fd, long long sock_mnt, int *ret_copy, unsigned long *ret_flags);

/* fd `fd` of the process `pidfd` refers to, taken (pidfd_getfd) and kept
 * only when it is a socket: 0 and *ret_copy; -ENOTSOCK when it was not
 * (its copy went to a closer), -EAGAIN when every closer hangs (nothing
 * was taken), -errno else. */
int cn_copy_socket(int pidfd, int fd, int *ret_copy);

/* Let go of a descriptor taken from the sandbox: closed here when that
 * cannot block (a socket that does not linger), else by a closer. When no
 * closer can be started it is kept open (never closed here). */
void cn_drop(int fd);

/* _cleanup_drop_: cn_drop() at scope exit. */
static inline void cn_dropp(int *fd)
{
        cn_drop(*fd);
}
#define _cleanup_drop_ __attribute__((cleanup(cn_dropp)))

/* The mount id every socket shows in its fdinfo, read from `sock` (or a
 * socket made for it when `sock` < 0); -1 when it cannot be read
 * (connect-scan.c). */
long long cn_sock_mount_id(int sock);

/* The closers alive now (reaped first): for tests and limits. */
size_t cn_closers_live(void);

/* The other short-lived helpers of the loop (connect-unix.c's resolvers)
 * count against the same CN_CLOSERS_MAX and are reaped the same way:
 * whether one more may start (reaped first), and its pidfd (a process of
 * no exit signal) handed over to be reaped once it has exited; -EAGAIN
 * when there is no room (the pidfd is then not taken). */
bool cn_helper_room(void);
int cn_helper_add(int pidfd);
