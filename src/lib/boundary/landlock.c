/* SPDX-License-Identifier: Apache-2.0 */
#include <errno.h>
#include <fcntl.h>
#include <linux/landlock.h>
#include <stdint.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <unistd.h>

#include "landlock.h"
#include "util.h"

/* Rights newer than some installed kernel headers. */
#ifndef LANDLOCK_ACCESS_FS_TRUNCATE
#define LANDLOCK_ACCESS_FS_TRUNCATE (1ULL << 14)
#endif
#ifndef LANDLOCK_ACCESS_FS_IOCTL_DEV
#define LANDLOCK_ACCESS_FS_IOCTL_DEV (1ULL << 15)
#endif

/* Every right that changes the file system, as of ABI 1. */
#define WRITE_RIGHTS_V1                                                                            \
        (LANDLOCK_ACCESS_FS_WRITE_FILE | LANDLOCK_ACCESS_FS_REMOVE_DIR |                           \
         LANDLOCK_ACCESS_FS_REMOVE_FILE | LANDLOCK_ACCESS_FS_MAKE_CHAR |                           \
         LANDLOCK_ACCESS_FS_MAKE_DIR | LANDLOCK_ACCESS_FS_MAKE_REG |                               \
         LANDLOCK_ACCESS_FS_MAKE_SOCK | LANDLOCK_ACCESS_FS_MAKE_FIFO |                             \
         LANDLOCK_ACCESS_FS_MAKE_BLOCK | LANDLOCK_ACCESS_FS_MAKE_SYM)

/* The rights a rule on a non-directory may carry (among those we handle);
 * directory-only rights on a file rule make landlock_add_rule fail. */
#define FILE_RIGHTS                                                                                \
        (LANDLOCK_ACCESS_FS_WRITE_FILE | LANDLOCK_ACCESS_FS_TRUNCATE | LANDLOCK_ACCESS_FS_IOCTL_DEV)

/* Device nodes every process writes to or drives with ioctls: the bit
 * buckets, the controlling terminal and the pseudo-terminals. */
static const char *const device_paths[] = {
    "/dev/null", "/dev/zero", "/dev/full", "/dev/tty", "/dev/ptmx", "/dev/pts",
};

static int sys_landlock_create_ruleset(const struct landlock_ruleset_attr *attr, size_t size,
                                       uint32_t flags)
{
        return (int)syscall(SYS_landlock_create_ruleset, attr, size, flags);
}

static int sys_landlock_add_rule(int ruleset_fd, enum landlock_rule_type type, const void *attr,
                                 uint32_t flags)
{
        return (int)syscall(SYS_landlock_add_rule, ruleset_fd, type, attr, flags);
}

static int sys_landlock_restrict_self(int ruleset_fd, uint32_t flags)
{
        return (int)syscall(SYS_landlock_restrict_self, ruleset_fd, flags);
}

int landlock_abi(void)
{
        int abi = sys_landlock_create_ruleset(NULL, 0, LANDLOCK_CREATE_RULESET_VERSION);
        return abi < 0 ? 0 : abi;
}

/* The write rights the running kernel knows. Asking for an unknown one
 * makes landlock_create_ruleset fail with EINVAL, so newer rights are only
 * handled where the ABI has them. */
static uint64_t handled_rights(int abi)
{
        uint64_t rights = WRITE_RIGHTS_V1;

        /* Before ABI 2 reparenting (rename or link into another directory)
         * is always refused once a ruleset is in force. */
        if (abi >= 2)
                rights |= LANDLOCK_ACCESS_FS_REFER;
        if (abi >= 3)
                rights |= LANDLOCK_ACCESS_FS_TRUNCATE;
        if (abi >= 5)
                rights |= LANDLOCK_ACCESS_FS_IOCTL_DEV;
        return rights;
}

/* Allow `rights` beneath `path` (or on it, when it is not a directory).
 * Returns 0 when added, 1 when the path does not exist. */
static int add_path(int ruleset_fd, const char *path, uint64_t rights, struct al_error *err)
{
        _cleanup_close_ int fd = open(path, O_PATH | O_CLOEXEC);
        if (fd < 0) {
                if (errno == ENOENT)
                        return 1;
                return al_error_set(err, errno, "landlock: opening \"%s\"", path);
        }

        struct stat st;
        if (fstat(fd, &st) < 0)
                return al_error_set(err, errno, "landlock: inspecting \"%s\"", path);
        if (!S_ISDIR(st.st_mode))
                rights &= FILE_RIGHTS;
        if (rights == 0)
                return 0;

        struct landlock_path_beneath_attr attr = {
            .allowed_access = rights,
            .parent_fd = fd,
        };
        if (sys_landlock_add_rule(ruleset_fd, LANDLOCK_RULE_PATH_BENEATH, &attr, 0) < 0)
                return al_error_set(err, errno, "landlock: allowing writes to \"%s\"", path);
        return 0;
}

/* The kernel's answer does not change while it runs: asked once per process
 * tree (pid 1 asks, what it forks inherits). */
static int cached_abi = -1;

int landlock_build_writes(const char *const *paths, size_t n, bool required, int *ret_fd,
                          struct al_error *err)
{
        *ret_fd = -1;
        if (cached_abi < 0)
                cached_abi = landlock_abi();
        int abi = cached_abi;
        if (abi <= 0) {
                if (!required)
                        return 0;
                return al_error_set(err, EOPNOTSUPP, "landlock: not available in this kernel");
        }

        uint64_t handled = handled_rights(abi);
        /* Only the file-system field: the kernel accepts a shorter struct
         * than its own, and network and scope rules are not ours to set. */
        struct landlock_ruleset_attr attr = {
            .handled_access_fs = handled,
        };
        _cleanup_close_ int ruleset_fd = sys_landlock_create_ruleset(&attr, sizeof(attr), 0);
        if (ruleset_fd < 0)
                return al_error_set(err, errno, "landlock: creating ruleset (ABI %d)", abi);

        for (size_t i = 0; i < n; i++) {
                int r = add_path(ruleset_fd, paths[i], handled, err);
                if (r < 0)
                        return r;
        }
        for (size_t i = 0; i < ARRAY_SIZE(device_paths); i++) {
                int r = add_path(ruleset_fd, device_paths[i], handled & FILE_RIGHTS, err);
                if (r < 0)
                        return r;
        }
        *ret_fd = TAKE_FD(ruleset_fd);
        return 0;
}

int landlock_restrict_fd(int ruleset_fd, struct al_error *err)
{
        /* Needs no_new_privs (or CAP_SYS_ADMIN), which the caller sets. The
         * domain made here is a copy: the ruleset can serve the next process
         * unchanged, and nothing added to it later reaches this one. */
        if (sys_landlock_restrict_self(ruleset_fd, 0) < 0)
                return al_error_set(err, errno, "landlock: restricting the process");
        return 0;
}

int landlock_restrict_writes(const char *const *paths, size_t n, bool required,
                             struct al_error *err)
{
        _cleanup_close_ int fd = -1;
        int r = landlock_build_writes(paths, n, required, &fd, err);
        if (r < 0 || fd < 0)
                return r;
        return landlock_restrict_fd(fd, err);
}
