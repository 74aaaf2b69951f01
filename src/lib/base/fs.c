/* SPDX-License-Identifier: Apache-2.0 */
#include <dirent.h>
#include <fcntl.h>
#include <linux/openat2.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/syscall.h>

#include "fs.h"
#include "util.h"

int fs_openat2(int dirfd, const char *path, int flags, mode_t mode, uint64_t resolve)
{
        struct open_how how = {.flags = (uint64_t)(unsigned)flags, .resolve = resolve};
        if ((flags & O_CREAT) || (flags & O_TMPFILE) == O_TMPFILE)
                how.mode = mode;
        int fd;
        do
                fd = (int)syscall(SYS_openat2, dirfd, path, &how, sizeof(how));
        while (fd < 0 && errno == EAGAIN);
        return fd < 0 ? -errno : fd;
}

static int remove_tree(int parent, const char *name, unsigned depth, unsigned max_depth)
{
        struct stat st;
        if (fstatat(parent, name, &st, AT_SYMLINK_NOFOLLOW) < 0)
                return errno == ENOENT ? 0 : -errno;
        if (!S_ISDIR(st.st_mode))
                return unlinkat(parent, name, 0) < 0 && errno != ENOENT ? -errno : 0;
        if (depth >= max_depth)
                return -ELOOP;
        int fd = openat(parent, name, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
        if (fd < 0)
                return errno == ENOENT ? 0 : -errno;
        _cleanup_(closedirp) DIR *d = fdopendir(fd);
        if (!d) {
                int e = errno;
                close(fd);
                return -e;
        }
        int r = 0;
        struct dirent *de;
        while ((errno = 0, de = readdir(d))) {
                if (STREQ(de->d_name, ".") || STREQ(de->d_name, ".."))
                        continue;
                int k = remove_tree(dirfd(d), de->d_name, depth + 1, max_depth);
                if (k < 0 && r == 0)
                        r = k;
        }
        if (errno && r == 0)
                r = -errno;
        if (unlinkat(parent, name, AT_REMOVEDIR) < 0 && errno != ENOENT && r == 0)
                r = -errno;
        return r;
}

int fs_remove_tree(int dirfd, const char *name, unsigned max_depth)
{
        return remove_tree(dirfd, name, 0, max_depth);
}
