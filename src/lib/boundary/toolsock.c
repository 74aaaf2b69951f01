/* SPDX-License-Identifier: Apache-2.0 */
/* The tool gateway's socket from inside: bound by the setup child in the
 * sandbox's own root and namespaces, its listening fd passed to the parent
 * (which serves it, toolgate.h) the way netns.c passes the network gate's
 * listeners. No process inside ever holds it: the child closes its copy
 * before it becomes pid 1. */
#include <errno.h>
#include <fcntl.h>
#include <string.h>
#include <sys/mount.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <unistd.h>

#include "spawn.h"
#include "util.h"
#include "spawn-internal.h"

static int bind_endpoint(void)
{
        int s = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC | SOCK_NONBLOCK, 0);
        if (s < 0)
                return -errno;
        struct sockaddr_un sa = {.sun_family = AF_UNIX};
        snprintf(sa.sun_path, sizeof(sa.sun_path), "%s", SPAWN_TOOL_SOCKET);
        /* Only the sandbox user (who owns it) may connect: connect() needs
         * write permission on the socket's inode. The path is in the
         * endpoint's fresh tmpfs, which nothing else has touched. */
        if (bind(s, (struct sockaddr *)&sa, sizeof(sa)) < 0 || chmod(SPAWN_TOOL_SOCKET, 0600) < 0 ||
            listen(s, 64) < 0) {
                int r = -errno;
                close(s);
                return r;
        }
        return s;
}

/* The endpoint's tmpfs becomes read-only once the socket is in it: nothing
 * can be created, renamed or removed there, and the socket's mode cannot be
 * changed (a read-only mount still lets connect() reach a socket). */
static int seal_endpoint(void)
{
        struct mount_attr attr = {.attr_set = MOUNT_ATTR_RDONLY | MOUNT_ATTR_NOSUID |
                                              MOUNT_ATTR_NODEV | MOUNT_ATTR_NOEXEC};
        _cleanup_close_ int fd =
            open(SPAWN_TOOL_DIR, O_PATH | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
        if (fd < 0)
                return -errno;
        if (mount_setattr(fd, "", AT_EMPTY_PATH, &attr, sizeof(attr)) < 0)
                return -errno;
        return 0;
}

void toolsock_setup(struct child_ctx *ctx)
{
        struct al_error err = {0};
        if (!ctx->cfg->tool_bin)
                return;
        int s = bind_endpoint();
        if (s < 0) {
                al_error_set(&err, s, "listening on %s", SPAWN_TOOL_SOCKET);
                spawn_child_fail(ctx->sync, SPAWN_FAILED_SETUP, &err, 125);
        }
        int r = seal_endpoint();
        if (r < 0) {
                close(s);
                al_error_set(&err, r, "making %s read-only", SPAWN_TOOL_DIR);
                spawn_child_fail(ctx->sync, SPAWN_FAILED_SETUP, &err, 125);
        }
        r = spawn_send_fds(ctx->sync, SYNC_TOOL, &s, 1);
        close(s);
        if (r < 0)
                _exit(125);
}
