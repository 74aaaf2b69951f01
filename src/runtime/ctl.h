/* SPDX-License-Identifier: Apache-2.0 */
#pragma once

#include <stddef.h>

/* The keeper's control socket (SOCK_SEQPACKET at <root>/<id>/ctl.sock):
 * one text message each way, fds with SCM_RIGHTS. */
#define CTL_MSG_MAX (64 * 1024)
int ctl_send(int fd, const char *text, const int *fds, size_t n_fds);
/* Receives into buf (NUL-terminated); at most max_fds fds, the rest closed. */
int ctl_recv(int fd, char *buf, size_t size, int *fds, size_t max_fds, size_t *ret_nfds);
int ctl_connect(const char *path);
struct sockaddr_un;
/* The address of the socket at `path`: the path itself, or where it does
 * not fit, /proc/self/fd/N/NAME on its directory (*ret_dirfd, to close
 * after the bind or connect; else -1). */
int ctl_addr(const char *path, struct sockaddr_un *sa, int *ret_dirfd);
