/* SPDX-License-Identifier: Apache-2.0 */
#include <dirent.h>
#include <fcntl.h>
#include <inttypes.h>
#include <linux/loop.h>
#include <linux/openat2.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/file.h>
#include <sys/ioctl.h>
#include <sys/mount.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "child.h"
#include "fs.h"
#include "paths.h"
#include "spawn.h"
#include "util.h"
#include "volume-internal.h"
#include "volume.h"

#define IMAGE     "disk.img"
#define LOCK      "lock"
#define OWNER     "owner"
#define OWNER_MAX 256
/* How long an attach waits for the loop device of a sandbox that is
 * still being torn down to let go of the image. */
#define STALE_WAIT_MS 5000

const char *volume_name_check(const char *name)
{
        if (!name || !*name)
                return "is empty";
        size_t n = strlen(name);
        if (n > VOLUME_NAME_MAX)
                return "is longer than 64 characters";
        for (size_t i = 0; i < n; i++) {
                char c = name[i];
                bool alnum = (c >= 'a' && c <= 'z') || (c >= '0' && c <= '9');
                if (i == 0 && !alnum)
                        return "must start with a lowercase letter or a digit";
                if (!alnum && c != '_' && c != '.' && c != '-')
                        return "may hold only lowercase letters, digits, '_', '.' and '-'";
        }
        return NULL;
}

char *volume_root(void)
{
        _cleanup_free_ char *state = paths_state_root(geteuid(), getenv("HOME"));
        return state ? xasprintf("%s/volumes", state) : NULL;
}

static int check_name(const char *name, struct al_error *err)
{
        const char *why = volume_name_check(name);
        if (why)
                return al_error_set_message(err, EINVAL,
                                            "volume name \"%.64s\" %s; give a name such as "
                                            "\"agent-home\"",
                                            name ? name : "", why);
        return 0;
}

/* The volumes directory, opened without following any symbolic link below
 * the state root; created when `create`. */
static int open_root(bool create, struct al_error *err)
{
        _cleanup_free_ char *root = volume_root();
        if (!root)
                return al_error_set_message(err, ENOENT,
                                            "no state directory for volumes: set $HOME");
        if (create) {
                int r = mkdir_p(root, 0755, 0700);
                if (r < 0)
                        return al_error_set(err, r, "creating %s", root);
        }
        int fd = open(root, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
        if (fd < 0)
                return al_error_set(err, errno, "%s", root);
        return fd;
}

static int open_volume(const char *name, struct al_error *err)
{
        int r = check_name(name, err);
        if (r < 0)
                return r;
        _cleanup_close_ int root = open_root(false, err);
        if (root == -ENOENT)
                return al_error_set_message(err, ENOENT,
                                            "no volume \"%s\"; create it with 'airlock volume "
                                            "create %s --size SIZE'",
                                            name, name);
        if (root < 0)
                return root;
        int fd = fs_openat2(root, name, O_RDONLY | O_DIRECTORY | O_CLOEXEC, 0,
                            RESOLVE_BENEATH | RESOLVE_NO_SYMLINKS);
        if (fd == -ENOENT)
                return al_error_set_message(err, ENOENT,
                                            "no volume \"%s\"; create it with 'airlock volume "
                                            "create %s --size SIZE'",
                                            name, name);
        if (fd < 0)
                return al_error_set(err, fd, "volume %s", name);
        return fd;
}

static int need_root(const char *what, struct al_error *err)
{
        if (geteuid() == 0)
                return 0;
        return al_error_set_message(err, EPERM,
                                    "%s: volumes need root (each is an ext4 image mounted through "
                                    "a loop device, the size limit the kernel enforces); run it "
                                    "as root or through a root airlockd",
                                    what);
}

int volume_create(const char *name, uint64_t size, const char *owner, struct al_error *err)
{
        int r = check_name(name, err);
        if (r < 0)
                return r;
        if (size < VOLUME_SIZE_MIN || size > VOLUME_SIZE_MAX)
                return al_error_set_message(err, ERANGE,
                                            "volume size %" PRIu64
                                            " bytes: give a size from 8M to 1T, e.g. --size 1G",
                                            size);
        _cleanup_close_ int root = open_root(true, err);
        if (root < 0)
                return root;
        _cleanup_close_ int dir = -1, lk = -1, img = -1;
        if (mkdirat(root, name, 0700) < 0) {
                if (errno == EEXIST)
                        return al_error_set_message(err, EEXIST, "volume \"%s\" already exists",
                                                    name);
                return al_error_set(err, errno, "creating volume %s", name);
        }
        dir = fs_openat2(root, name, O_RDONLY | O_DIRECTORY | O_CLOEXEC, 0,
                         RESOLVE_BENEATH | RESOLVE_NO_SYMLINKS);
        if (dir < 0) {
                r = al_error_set(err, dir, "volume %s", name);
                goto fail;
        }
        /* The lock first: an image without one is never attached. */
        lk = openat(dir, LOCK, O_RDWR | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0600);
        if (lk < 0 || flock(lk, LOCK_EX | LOCK_NB) < 0) {
                r = al_error_set(err, errno, "creating the lock of volume %s", name);
                goto fail;
        }
        if (geteuid() != 0) {
                /* Not root: a directory of files, given to each sandbox as
                 * a tmpfs of the volume's size (dirvol.c). */
                char sz[32];
                snprintf(sz, sizeof(sz), "%" PRIu64 "\n", size);
                if (mkdirat(dir, DIRVOL_DATA, 0700) < 0) {
                        r = al_error_set(err, errno, "creating volume %s", name);
                        goto fail;
                }
                img = openat(dir, DIRVOL_SIZE, O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC,
                             0600);
                r = img < 0 ? -errno : write_full(img, sz, strlen(sz));
                if (r < 0 || fsync(img) < 0) {
                        r = al_error_set(err, r < 0 ? r : -errno, "creating volume %s", name);
                        goto fail;
                }
                goto owner;
        }
        img = openat(dir, IMAGE, O_RDWR | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0600);
        if (img < 0 || ftruncate(img, (off_t)size) < 0) {
                r = al_error_set(err, errno, "creating the image of volume %s", name);
                goto fail;
        }
        /* mkfs.ext4 on the open image (/proc/self/fd/3 in the child): the
         * root directory belongs to the sandbox's host uid, no blocks are
         * reserved for root (the agent gets the whole size), and the
         * image's own files carry no set-id bit or device node. */
        char root_owner[64];
        snprintf(root_owner, sizeof(root_owner), "root_owner=%u:%u", (unsigned)SPAWN_ROOT_HOST_UID,
                 (unsigned)SPAWN_ROOT_HOST_GID);
        char *const argv[] = {"mkfs.ext4", "-q",       "-F", "-m",      "0",
                              "-E",        root_owner, "-L", "airlock", "/proc/self/fd/3",
                              NULL};
        char *const envp[] = {"PATH=/usr/sbin:/usr/bin:/sbin:/bin", NULL};
        struct child_spawn s = {
            .path = "mkfs.ext4",
            .argv = argv,
            .envp = envp,
            .fds = {CHILD_FD_NULL, CHILD_FD_NULL, CHILD_FD_NULL, img},
            .n_fds = 4,
            .search_path = true,
        };
        pid_t pid;
        r = child_spawn(&s, &pid, NULL);
        if (r < 0) {
                r = al_error_set(err, r, "running mkfs.ext4 for volume %s (e2fsprogs)", name);
                goto fail;
        }
        int st = child_wait(pid);
        if (st < 0 || !WIFEXITED(st) || WEXITSTATUS(st) != 0) {
                r = al_error_set_message(err, EIO, "mkfs.ext4 failed for volume %s", name);
                goto fail;
        }
        if (fsync(img) < 0) {
                r = al_error_set(err, errno, "writing volume %s", name);
                goto fail;
        }
owner:
        if (owner) {
                _cleanup_close_ int ofd =
                    openat(dir, OWNER, O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0600);
                r = ofd < 0 ? -errno : write_full(ofd, owner, strlen(owner));
                if (r < 0) {
                        r = al_error_set(err, r, "writing the owner of volume %s", name);
                        goto fail;
                }
        }
        return 0;
fail:
        fs_remove_tree(root, name, 3);
        return r;
}

static bool is_dirvol(int dir)
{
        return faccessat(dir, DIRVOL_SIZE, F_OK, AT_SYMLINK_NOFOLLOW) == 0;
}

/* The directory volumes this process attached: the sandbox's child mounts
 * each as a tmpfs and sends the tmpfs's root back over `sock`, which the
 * supervisor reads when the sandbox has ended, to save it. */
static struct dirvol_attach {
        char name[VOLUME_NAME_MAX + 1];
        dev_t dev;
        ino_t ino;
        int vol;     /* the volume's directory */
        int sock[2]; /* [0] read by the supervisor, [1] written by the child */
        bool readonly;
} dirvols[16];
static size_t n_dirvols;

static int attach_dirvol(const char *name, int dir, bool readonly, int *ret_mnt,
                         struct al_error *err)
{
        uint64_t size;
        int r = dirvol_read_size(dir, &size);
        if (r < 0)
                return al_error_set(err, r, "volume %s: reading its size", name);
        if (n_dirvols >= ARRAY_SIZE(dirvols))
                return al_error_set_message(err, E2BIG, "too many volumes (at most %zu)",
                                            ARRAY_SIZE(dirvols));
        struct dirvol_attach *a = &dirvols[n_dirvols];
        struct stat st;
        if (fstat(dir, &st) < 0)
                return al_error_set(err, errno, "volume %s", name);
        if (socketpair(AF_UNIX, SOCK_DGRAM | SOCK_CLOEXEC, 0, a->sock) < 0)
                return al_error_set(err, errno, "volume %s", name);
        int given = fcntl(dir, F_DUPFD_CLOEXEC, 3);
        a->vol = fcntl(dir, F_DUPFD_CLOEXEC, 3);
        if (given < 0 || a->vol < 0) {
                r = -errno;
                if (given >= 0)
                        close(given);
                if (a->vol >= 0)
                        close(a->vol);
                close(a->sock[0]);
                close(a->sock[1]);
                return al_error_set(err, r, "volume %s", name);
        }
        snprintf(a->name, sizeof(a->name), "%s", name);
        a->dev = st.st_dev;
        a->ino = st.st_ino;
        a->readonly = readonly;
        n_dirvols++;
        *ret_mnt = given;
        return 0;
}

int volume_child_mount(int fd, uid_t uid, gid_t gid, int *ret_mnt, struct al_error *err)
{
        struct stat st;
        if (fstat(fd, &st) < 0 || !S_ISDIR(st.st_mode))
                return 0;
        struct dirvol_attach *a = NULL;
        for (size_t i = 0; i < n_dirvols && !a; i++)
                if (dirvols[i].dev == st.st_dev && dirvols[i].ino == st.st_ino &&
                    dirvols[i].vol >= 0)
                        a = &dirvols[i];
        if (!a)
                return 0; /* a file system mounted by the parent (root) */
        int root = -1;
        int r = dirvol_mount(fd, uid, gid, ret_mnt, &root, err);
        if (r < 0)
                return r;
        if (!a->readonly) {
                char c = 0;
                struct iovec iov = {.iov_base = &c, .iov_len = 1};
                char control[CMSG_SPACE(sizeof(int))];
                memset(control, 0, sizeof(control));
                struct msghdr mh = {.msg_iov = &iov,
                                    .msg_iovlen = 1,
                                    .msg_control = control,
                                    .msg_controllen = sizeof(control)};
                struct cmsghdr *cm = CMSG_FIRSTHDR(&mh);
                cm->cmsg_level = SOL_SOCKET;
                cm->cmsg_type = SCM_RIGHTS;
                cm->cmsg_len = CMSG_LEN(sizeof(int));
                memcpy(CMSG_DATA(cm), &root, sizeof(int));
                if (sendmsg(a->sock[1], &mh, MSG_NOSIGNAL) < 0) {
                        r = -errno;
                        close(root);
                        close(*ret_mnt);
                        *ret_mnt = -1;
                        return al_error_set(err, r, "volume %s: handing its tmpfs over", a->name);
                }
        }
        close(root);
        return 1;
}

static void save_or_forget(bool save, volume_saved_fn fn, void *arg)
{
        for (size_t i = 0; i < n_dirvols; i++) {
                struct dirvol_attach *a = &dirvols[i];
                if (a->vol < 0)
                        continue;
                int root = -1;
                if (save && !a->readonly) {
                        char c;
                        struct iovec iov = {.iov_base = &c, .iov_len = 1};
                        char control[CMSG_SPACE(sizeof(int))];
                        struct msghdr mh = {.msg_iov = &iov,
                                            .msg_iovlen = 1,
                                            .msg_control = control,
                                            .msg_controllen = sizeof(control)};
                        if (recvmsg(a->sock[0], &mh, MSG_DONTWAIT | MSG_CMSG_CLOEXEC) > 0) {
                                struct cmsghdr *cm = CMSG_FIRSTHDR(&mh);
                                if (cm && cm->cmsg_type == SCM_RIGHTS)
                                        memcpy(&root, CMSG_DATA(cm), sizeof(int));
                        }
                }
                if (root >= 0) {
                        int r = dirvol_save(a->vol, root);
                        if (fn)
                                fn(arg, a->name, r);
                        close(root);
                }
                close(a->vol);
                close(a->sock[0]);
                close(a->sock[1]);
                a->vol = -1;
        }
        n_dirvols = 0;
}

void volume_save_all(volume_saved_fn fn, void *arg)
{
        save_or_forget(true, fn, arg);
}

void volume_forget_all(void)
{
        save_or_forget(false, NULL, NULL);
}

/* Loop devices whose backing file is `image` (dev, ino): a sandbox that is
 * using it or still letting it go. */
static bool image_in_use(dev_t dev, ino_t ino)
{
        DIR *d = opendir("/sys/block");
        if (!d)
                return false;
        bool busy = false;
        struct dirent *de;
        while (!busy && (de = readdir(d))) {
                if (strncmp(de->d_name, "loop", 4) != 0)
                        continue;
                _cleanup_free_ char *dev_path = xasprintf("/dev/%s", de->d_name);
                _cleanup_close_ int fd = open(dev_path, O_RDONLY | O_CLOEXEC | O_NONBLOCK);
                if (fd < 0)
                        continue;
                struct loop_info64 li;
                if (ioctl(fd, LOOP_GET_STATUS64, &li) < 0)
                        continue; /* unbound */
                if (li.lo_device == (uint64_t)dev && li.lo_inode == (uint64_t)ino)
                        busy = true;
        }
        closedir(d);
        return busy;
}

static void sleep_ms(long ms)
{
        struct timespec ts = {.tv_sec = ms / 1000, .tv_nsec = (ms % 1000) * 1000000L};
        while (nanosleep(&ts, &ts) < 0 && errno == EINTR)
                ;
}

/* A loop device on `img`, set up in one call (LOOP_CONFIGURE) so that no
 * other process can bind it between finding it free and using it. With
 * AUTOCLEAR the device lets go of the image when its last user (the
 * mounted file system) goes. Returns the device's fd. */
static int loop_attach(int img, bool readonly, char ret_path[static 32])
{
        _cleanup_close_ int ctl = open("/dev/loop-control", O_RDWR | O_CLOEXEC);
        if (ctl < 0)
                return -errno;
        for (int tries = 0; tries < 16; tries++) {
                int n = ioctl(ctl, LOOP_CTL_GET_FREE);
                if (n < 0)
                        return -errno;
                snprintf(ret_path, 32, "/dev/loop%d", n);
                int fd = open(ret_path, (readonly ? O_RDONLY : O_RDWR) | O_CLOEXEC);
                if (fd < 0)
                        return -errno;
                struct loop_config cfg = {.fd = (uint32_t)img};
                cfg.info.lo_flags = LO_FLAGS_AUTOCLEAR | (readonly ? LO_FLAGS_READ_ONLY : 0);
                if (ioctl(fd, LOOP_CONFIGURE, &cfg) == 0)
                        return fd;
                int e = errno;
                close(fd);
                if (e != EBUSY)
                        return -e;
        }
        return -EBUSY;
}

int volume_attach(const char *name, bool readonly, int *ret_lock, int *ret_mnt,
                  struct al_error *err)
{
        int r;
        _cleanup_close_ int dir = open_volume(name, err);
        if (dir < 0)
                return dir;
        _cleanup_close_ int lk = openat(dir, LOCK, O_RDWR | O_NOFOLLOW | O_CLOEXEC);
        if (lk < 0)
                return al_error_set(err, errno, "opening the lock of volume %s", name);
        if (flock(lk, (readonly ? LOCK_SH : LOCK_EX) | LOCK_NB) < 0) {
                if (errno == EWOULDBLOCK)
                        return al_error_set_message(
                            err, EBUSY,
                            readonly ? "volume %s is attached read-write to another sandbox; "
                                       "wait for it to end"
                                     : "volume %s is attached to another sandbox; a volume is "
                                       "written by one sandbox at a time (attach it with :ro "
                                       "to share it read-only)",
                            name);
                return al_error_set(err, errno, "locking volume %s", name);
        }
        if (is_dirvol(dir)) {
                r = attach_dirvol(name, dir, readonly, ret_mnt, err);
                if (r < 0)
                        return r;
                *ret_lock = TAKE_FD(lk);
                return 0;
        }
        r = need_root("attaching a volume", err);
        if (r < 0)
                return r;
        _cleanup_close_ int img =
            openat(dir, IMAGE, (readonly ? O_RDONLY : O_RDWR) | O_NOFOLLOW | O_CLOEXEC);
        if (img < 0)
                return al_error_set(err, errno, "opening the image of volume %s", name);
        struct stat st;
        if (fstat(img, &st) < 0 || !S_ISREG(st.st_mode))
                return al_error_set_message(err, EINVAL, "volume %s: its image is not a file",
                                            name);
        /* The lock is free, but the file system of the last sandbox to
         * write it may not be unmounted yet (its namespaces are torn down
         * after the supervisor's death released the lock). Two ext4
         * superblocks on one image would corrupt it: wait for the old one
         * to go. Read-only attachments share the image with each other. */
        if (!readonly) {
                int waited = 0;
                while (image_in_use(st.st_dev, st.st_ino)) {
                        if (waited >= STALE_WAIT_MS)
                                return al_error_set_message(
                                    err, EBUSY,
                                    "volume %s is still mounted by a sandbox that is ending; "
                                    "try again",
                                    name);
                        sleep_ms(50);
                        waited += 50;
                }
        }
        char dev[32];
        _cleanup_close_ int loop = loop_attach(img, readonly, dev);
        if (loop < 0)
                return al_error_set(err, loop, "setting up a loop device for volume %s", name);
        _cleanup_close_ int fs = fsopen("ext4", FSOPEN_CLOEXEC);
        if (fs < 0)
                return al_error_set(err, errno, "mounting volume %s", name);
        if (fsconfig(fs, FSCONFIG_SET_STRING, "source", dev, 0) < 0 ||
            (readonly && fsconfig(fs, FSCONFIG_SET_FLAG, "ro", NULL, 0) < 0) ||
            fsconfig(fs, FSCONFIG_SET_STRING, "errors", "remount-ro", 0) < 0 ||
            fsconfig(fs, FSCONFIG_CMD_CREATE, NULL, NULL, 0) < 0)
                return al_error_set(err, errno, "mounting volume %s (%s)", name, dev);
        unsigned attrs = MOUNT_ATTR_NOSUID | MOUNT_ATTR_NODEV | (readonly ? MOUNT_ATTR_RDONLY : 0);
        int mnt = fsmount(fs, FSMOUNT_CLOEXEC, attrs);
        if (mnt < 0)
                return al_error_set(err, errno, "mounting volume %s", name);
        *ret_lock = TAKE_FD(lk);
        *ret_mnt = mnt;
        return 0;
}

/* "rw", "ro" or NULL: how the volume is attached now, tested with the lock. */
static const char *attached(int lk)
{
        if (flock(lk, LOCK_EX | LOCK_NB) == 0) {
                flock(lk, LOCK_UN);
                return NULL;
        }
        if (flock(lk, LOCK_SH | LOCK_NB) == 0) {
                flock(lk, LOCK_UN);
                return "ro";
        }
        return "rw";
}

int volume_info(const char *name, json_t **ret, struct al_error *err)
{
        _cleanup_close_ int dir = open_volume(name, err);
        if (dir < 0)
                return dir;
        _cleanup_close_ int lk = openat(dir, LOCK, O_RDWR | O_NOFOLLOW | O_CLOEXEC);
        struct stat st;
        uint64_t size = 0, used = 0;
        if (lk < 0)
                return al_error_set(err, errno, "volume %s", name);
        if (is_dirvol(dir)) {
                int k = dirvol_read_size(dir, &size);
                if (k < 0 || (k = dirvol_used(dir, &used)) < 0)
                        return al_error_set(err, k, "volume %s", name);
        } else if (fstatat(dir, IMAGE, &st, AT_SYMLINK_NOFOLLOW) < 0) {
                return al_error_set(err, errno, "volume %s", name);
        } else {
                size = (uint64_t)st.st_size;
                used = (uint64_t)st.st_blocks * 512;
        }
        const char *how = attached(lk);
        _cleanup_free_ char *owner = NULL;
        size_t olen = 0;
        int r = read_file_at(dir, OWNER, OWNER_MAX, &owner, &olen);
        if (r < 0 && r != -ENOENT)
                return al_error_set(err, r, "reading the owner of volume %s", name);
        json_t *jowner = owner ? json_stringn(owner, olen) : json_null();
        if (!jowner)
                return al_error_set_message(err, EINVAL, "volume %s: its owner is not UTF-8", name);
        *ret = json_pack("{s:s, s:I, s:I, s:o, s:o}", "name", name, "size", (json_int_t)size,
                         "used", (json_int_t)used, "attached", how ? json_string(how) : json_null(),
                         "owner", jowner);
        return 0;
}

static int cmp_names(const void *a, const void *b)
{
        return strcmp(*(char *const *)a, *(char *const *)b);
}

int volume_list(json_t **ret, struct al_error *err)
{
        json_t *list = json_array();
        _cleanup_close_ int root = open_root(false, err);
        if (root == -ENOENT) {
                *ret = list;
                return 0;
        }
        if (root < 0) {
                json_decref(list);
                return root;
        }
        DIR *d = fdopendir(fcntl(root, F_DUPFD_CLOEXEC, 3));
        if (!d) {
                json_decref(list);
                return al_error_set(err, errno, "listing volumes");
        }
        char **names = NULL;
        size_t n = 0;
        struct dirent *de;
        while ((de = readdir(d)) && n < VOLUME_LIST_MAX) {
                if (volume_name_check(de->d_name))
                        continue;
                names = xrealloc(names, n + 1, sizeof(*names));
                names[n++] = xstrdup(de->d_name);
        }
        closedir(d);
        if (n > 1)
                qsort(names, n, sizeof(*names), cmp_names);
        for (size_t i = 0; i < n; i++) {
                json_t *v = NULL;
                struct al_error e = {0};
                if (volume_info(names[i], &v, &e) == 0)
                        json_array_append_new(list, v);
                free(names[i]);
        }
        free(names);
        *ret = list;
        return 0;
}

int volume_remove(const char *name, struct al_error *err)
{
        _cleanup_close_ int dir = open_volume(name, err);
        if (dir < 0)
                return dir;
        _cleanup_close_ int lk = openat(dir, LOCK, O_RDWR | O_NOFOLLOW | O_CLOEXEC);
        if (lk >= 0 && flock(lk, LOCK_EX | LOCK_NB) < 0)
                return al_error_set_message(err, EBUSY,
                                            "volume %s is attached to a running sandbox; stop "
                                            "the sandbox first",
                                            name);
        struct stat st;
        if (fstatat(dir, IMAGE, &st, AT_SYMLINK_NOFOLLOW) == 0 &&
            image_in_use(st.st_dev, st.st_ino))
                return al_error_set_message(err, EBUSY,
                                            "volume %s is still mounted by a sandbox that is "
                                            "ending; try again",
                                            name);
        _cleanup_close_ int root = open_root(false, err);
        if (root < 0)
                return root;
        /* Holding the lock while the tree goes: no attach can start. */
        int r = fs_remove_tree(root, name, FS_REMOVE_DEPTH_MAX);
        if (r < 0)
                return al_error_set(err, r, "removing volume %s", name);
        return 0;
}
