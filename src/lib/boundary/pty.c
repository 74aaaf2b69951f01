/* SPDX-License-Identifier: Apache-2.0 */
/* A command's terminal: a fresh pseudo-terminal pair opened by pid 1 in the
 * sandbox's own devpts instance (mounts: /dev/pts with ptmx). The slave
 * becomes the command's stdio and controlling terminal; the master goes to
 * the supervisor over the sync socket. The user's own terminal never enters
 * the sandbox, so TIOCSTI or TIOCLINUX on the command's terminal (refused by
 * seccomp as well) could only ever reach the sandbox's own line discipline. */
#include <errno.h>
#include <fcntl.h>
#include <sys/ioctl.h>
#include <termios.h>
#include <unistd.h>

#include "spawn-internal.h"
#include "util.h"

int spawn_pty_open(uint16_t rows, uint16_t cols, int *ret_master, int *ret_slave)
{
        int unlock = 0;
        int r;

        /* /dev/ptmx is the sandbox's own (a link to pts/ptmx): the new root
         * is in place when pid 1 gets here. */
        _cleanup_close_ int master = open("/dev/ptmx", O_RDWR | O_NOCTTY | O_CLOEXEC);
        if (master < 0)
                return -errno;
        if (ioctl(master, TIOCSPTLCK, &unlock) < 0)
                return -errno;
        /* The slave by its master, not by a path name under /dev/pts. */
        int slave = ioctl(master, TIOCGPTPEER, O_RDWR | O_NOCTTY | O_CLOEXEC);
        if (slave < 0)
                return -errno;
        struct winsize ws = {.ws_row = rows ? rows : 24, .ws_col = cols ? cols : 80};
        if (ioctl(master, TIOCSWINSZ, &ws) < 0) {
                r = -errno;
                close(slave);
                return r;
        }
        *ret_master = TAKE_FD(master);
        *ret_slave = slave;
        return 0;
}
