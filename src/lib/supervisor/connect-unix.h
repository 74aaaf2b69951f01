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
