/* SPDX-License-Identifier: Apache-2.0 */
/* The root-from-a-directory engine's listing (rootdir.h); root.c builds. */
#include <dirent.h>
#include <fcntl.h>
#include <limits.h>
#include <string.h>
#include <sys/mount.h>
#include <sys/stat.h>
#include <unistd.h>

#include "mounts.h"
#include "rootdir.h"
#include "util.h"
#include "mounts-internal.h"

static bool skipped(enum rootdir_kind kind, const char *name)
{
        static const char *const both[] = {"proc", "dev", "sys", "tmp", "run", "root", "workspace"};
        for (size_t i = 0; i < ARRAY_SIZE(both); i++)
                if (STREQ(name, both[i]))
                        return true;
        if (kind == ROOTDIR_IMAGE)
                return STREQ(name, "home");
        return STREQ(name, "lost+found");
}

struct rootdir *rootdir_free(struct rootdir *rd)
{
        if (!rd)
                return NULL;
        for (size_t i = 0; i < rd->n_entries; i++) {
                free(rd->entries[i].name);
                free(rd->entries[i].link);
                if (rd->entries[i].mnt >= 0)
                        close(rd->entries[i].mnt);
        }
        free(rd->entries);
        free(rd->path);
        free(rd);
        return NULL;
}

static int list_entry(struct rootdir *rd, int root, const char *name, struct al_error *err)
{
        struct stat st;
        if (fstatat(root, name, &st, AT_SYMLINK_NOFOLLOW) < 0)
                return al_error_set(err, errno, "%s/%s", rd->path, name);
        if (!S_ISDIR(st.st_mode) && !S_ISREG(st.st_mode) && !S_ISLNK(st.st_mode))
                return 0;
        if (rd->n_entries >= ROOTDIR_ENTRIES_MAX)
                return al_error_set_message(err, E2BIG, "%s has more than %d top-level entries",
                                            rd->path, ROOTDIR_ENTRIES_MAX);
        rd->entries = xrealloc(rd->entries, rd->n_entries + 1, sizeof(*rd->entries));
        struct rootdir_entry *e = &rd->entries[rd->n_entries++];
        *e = (struct rootdir_entry){.name = xstrdup(name), .mnt = -1};
        if (S_ISLNK(st.st_mode)) {
                char buf[PATH_MAX];
                ssize_t n = readlinkat(root, name, buf, sizeof(buf) - 1);
                if (n < 0)
                        return al_error_set(err, errno, "reading link %s/%s", rd->path, name);
                buf[n] = '\0';
                e->link = xstrdup(buf);
                return 0;
        }
        /* Only root can clone; anyone else's child binds by path with the
         * caller's own rights. A clone that fails is bound by path too. */
        if (geteuid() != 0)
                return 0;
        _cleanup_close_ int fd = openat(root, name, O_PATH | O_NOFOLLOW | O_CLOEXEC);
        if (fd < 0)
                return al_error_set(err, errno, "%s/%s", rd->path, name);
        int mnt = mounts_clone_tree(fd, MOUNT_ATTR_NOSUID | MOUNT_ATTR_NODEV |
                                            (rd->readonly ? MOUNT_ATTR_RDONLY : 0));
        e->mnt = mnt < 0 ? -1 : mnt;
        return 0;
}

int rootdir_list(const char *path, enum rootdir_kind kind, bool readonly, struct rootdir **ret,
                 struct al_error *err)
{
        _cleanup_close_ int root = open(path, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
        if (root < 0)
                return al_error_set(err, errno, "the root file system %s", path);
        int dfd = fcntl(root, F_DUPFD_CLOEXEC, 3);
        DIR *d = dfd >= 0 ? fdopendir(dfd) : NULL;
        if (!d) {
                int e = errno;
                if (dfd >= 0)
                        close(dfd);
                return al_error_set(err, e, "reading the root file system %s", path);
        }
        struct rootdir *rd = xcalloc(1, sizeof(*rd));
        rd->kind = kind;
        rd->path = xstrdup(path);
        rd->readonly = readonly || kind == ROOTDIR_IMAGE;
        struct stat rst;
        rd->resolv_file = fstatat(root, "etc/resolv.conf", &rst, AT_SYMLINK_NOFOLLOW) == 0 &&
                          S_ISREG(rst.st_mode);
        struct dirent *de;
        int r = 0;
        while (r >= 0 && (de = readdir(d)))
                if (!STREQ(de->d_name, ".") && !STREQ(de->d_name, "..") &&
                    !skipped(kind, de->d_name))
                        r = list_entry(rd, root, de->d_name, err);
        closedir(d);
        if (r < 0) {
                rootdir_free(rd);
                return r;
        }
        *ret = rd;
        return 0;
}
