/* SPDX-License-Identifier: Apache-2.0 */
/* The escape probe: `escape-probe CASE [ARG...]` makes one escape attempt
 * from inside a sandbox and says what happened, in one line:
 *
 *   read-shadow: read /etc/shadow and /etc/gshadow: blocked (/etc/shadow: empty; ...)
 *
 * Exit status: 0 when the attempt was blocked (the expected outcome), 1 when
 * it succeeded (an escape), 2 on a usage error. `escape-probe --list` prints
 * the case names.
 *
 * Every attempt is built so that, should it succeed, it changes nothing
 * that matters: files it manages to create are removed, write opens never
 * write, and calls that would be destructive when permitted (reboot, kexec,
 * module loading, pivot_root) get arguments that the kernel rejects only
 * after its permission check, so "EPERM" means blocked and any other answer
 * means the permission check passed. The probe depends on nothing but libc. */

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <linux/bpf.h>
#include <linux/io_uring.h>
#include <linux/netlink.h>
#include <linux/perf_event.h>
#include <linux/reboot.h>
#include <net/ethernet.h>
#include <netinet/in.h>
#include <poll.h>
#include <sched.h>
#include <signal.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <arpa/inet.h>
#include <sys/ioctl.h>
#include <sys/mman.h>
#include <sys/mount.h>
#include <sys/personality.h>
#include <sys/prctl.h>
#include <sys/ptrace.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/sysmacros.h>
#include <sys/uio.h>
#include <sys/wait.h>
#include <unistd.h>

#define ARRAY_SIZE(a) (sizeof(a) / sizeof((a)[0]))

enum { BLOCKED = 0, ESCAPED = 1, USAGE = 2 };

#define WORKSPACE "/workspace"

static int case_argc;
static char **case_argv;

/* What happened, appended to as the attempt goes: "a: EPERM; b: 0 bytes". */
static char detail[2048];

__attribute__((format(printf, 1, 2))) static void note(const char *fmt, ...)
{
        size_t len = strlen(detail);
        if (len + 3 >= sizeof(detail))
                return;
        if (len > 0) {
                memcpy(detail + len, "; ", 3);
                len += 2;
        }
        va_list ap;
        va_start(ap, fmt);
        vsnprintf(detail + len, sizeof(detail) - len, fmt, ap);
        va_end(ap);
}

static const char *errname(int e)
{
        if (e == 0)
                return "success";
        const char *name = strerrorname_np(e);
        return name ? name : strerror(e);
}

/* Helpers: each returns >= 0 on success and -errno on failure. */

/* Read up to 4 KiB; returns the number of bytes read. */
static long read_some(const char *path)
{
        int fd = open(path, O_RDONLY | O_CLOEXEC | O_NOCTTY | O_NONBLOCK);
        if (fd < 0)
                return -errno;
        char buf[4096];
        ssize_t n = read(fd, buf, sizeof(buf));
        int e = errno;
        close(fd);
        return n < 0 ? -e : n;
}

/* Create a new file and remove it again. */
static int try_create(const char *path)
{
        int fd = open(path, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC | O_NOCTTY, 0600);
        if (fd < 0)
                return -errno;
        close(fd);
        unlink(path);
        return 0;
}

/* Open an existing file for writing, and write nothing. */
static int try_open_write(const char *path)
{
        int fd = open(path, O_WRONLY | O_CLOEXEC | O_NOCTTY | O_NONBLOCK);
        if (fd < 0)
                return -errno;
        close(fd);
        return 0;
}

static int try_open_read(const char *path)
{
        int fd = open(path, O_RDONLY | O_CLOEXEC | O_NOCTTY | O_NONBLOCK);
        if (fd < 0)
                return -errno;
        close(fd);
        return 0;
}

/* A file must not be readable with content: "read N bytes" is an escape. */
static bool check_unreadable(const char *path)
{
        long n = read_some(path);
        if (n > 0) {
                note("%s: read %ld bytes", path, n);
                return false;
        }
        if (n == 0)
                note("%s: empty", path);
        else if (n != -ENOENT)
                note("%s: %s", path, errname((int)-n));
        return true;
}

/* Nothing may be created at this path. */
static bool check_uncreatable(const char *path)
{
        int r = try_create(path);
        note("create %s: %s", path, errname(-r));
        return r < 0;
}

static bool check_unwritable(const char *path)
{
        int r = try_open_write(path);
        if (r == -ENOENT)
                return true;
        note("open %s for writing: %s", path, errname(-r));
        return r < 0;
}

/* A syscall that checks a privilege before its arguments: EPERM (or the
 * call not existing) means blocked, anything else means the check passed. */
static bool check_privileged(const char *what, long r)
{
        int e = r < 0 ? errno : 0;
        note("%s: %s", what, errname(e));
        return r < 0 && (e == EPERM || e == ENOSYS);
}

/* A call that must fail outright. */
static bool check_fails(const char *what, long r)
{
        int e = r < 0 ? errno : 0;
        note("%s: %s", what, errname(e));
        return r < 0;
}

/* A call returning a new fd that must not be handed out. */
static bool check_no_fd(const char *what, long fd)
{
        if (fd >= 0) {
                note("%s: got fd %ld", what, fd);
                close((int)fd);
                return false;
        }
        note("%s: %s", what, errname(errno));
        return true;
}

static int verdict(bool blocked)
{
        return blocked ? BLOCKED : ESCAPED;
}

/* Home directories to look into: /root, $HOME and everything in /home. */
static size_t list_homes(char homes[][256], size_t max)
{
        size_t n = 0;
        snprintf(homes[n++], 256, "/root");
        const char *home = getenv("HOME");
        if (home && home[0] == '/' && strcmp(home, "/root") != 0 && n < max)
                snprintf(homes[n++], 256, "%s", home);
        DIR *d = opendir("/home");
        if (d) {
                struct dirent *de;
                while ((de = readdir(d)) && n < max) {
                        if (de->d_name[0] == '.')
                                continue;
                        snprintf(homes[n], 256, "/home/%.240s", de->d_name);
                        if (!home || strcmp(homes[n], home) != 0)
                                n++;
                }
                closedir(d);
        }
        return n;
}

/* Every regular file in a directory must be unreadable. */
static bool check_dir_unreadable(const char *dir)
{
        bool ok = true;
        DIR *d = opendir(dir);
        if (!d) {
                if (errno != ENOENT)
                        note("%s: %s", dir, errname(errno));
                return true;
        }
        struct dirent *de;
        while ((de = readdir(d))) {
                if (de->d_name[0] == '.' &&
                    (!de->d_name[1] || (de->d_name[1] == '.' && !de->d_name[2])))
                        continue;
                char path[512];
                snprintf(path, sizeof(path), "%s/%s", dir, de->d_name);
                struct stat st;
                if (stat(path, &st) == 0 && S_ISREG(st.st_mode))
                        ok &= check_unreadable(path);
        }
        closedir(d);
        return ok;
}

/* A decimal number from lo to hi, or -1. */
static long parse_number(const char *s, long lo, long hi)
{
        char *end = NULL;
        errno = 0;
        long v = strtol(s, &end, 10);
        if (errno != 0 || end == s || *end != '\0' || v < lo || v > hi)
                return -1;
        return v;
}

static int unique_path(char *buf, size_t len, const char *dir, const char *name)
{
        return snprintf(buf, len, "%s/.airlock-probe-%s-%d", dir, name, (int)getpid());
}

/* ---- Reading what the sandbox must not see ---- */

static int case_read_shadow(void)
{
        bool ok = check_unreadable("/etc/shadow");
        ok &= check_unreadable("/etc/gshadow");
        return verdict(ok);
}

static int case_read_ssh_key(void)
{
        static const char *const names[] = {"id_rsa", "id_ed25519",      "id_ecdsa",
                                            "id_dsa", "authorized_keys", "known_hosts",
                                            "config", "id_ed25519_sk",   "id_ecdsa_sk"};
        char homes[64][256];
        size_t n = list_homes(homes, ARRAY_SIZE(homes));
        bool ok = true;
        for (size_t i = 0; i < n; i++) {
                char dir[300], path[400];
                snprintf(dir, sizeof(dir), "%s/.ssh", homes[i]);
                ok &= check_dir_unreadable(dir);
                for (size_t j = 0; j < ARRAY_SIZE(names); j++) {
                        snprintf(path, sizeof(path), "%s/%s", dir, names[j]);
                        ok &= check_unreadable(path);
                }
        }
        note("looked in %zu homes", n);
        return verdict(ok);
}

static int case_read_credentials(void)
{
        static const char *const files[] = {
            ".aws/credentials", ".aws/config",          ".netrc",
            ".git-credentials", ".config/gh/hosts.yml", ".docker/config.json",
            ".kube/config",     ".gnupg/pubring.kbx",   ".gnupg/trustdb.gpg",
        };
        static const char *const dirs[] = {".gnupg/private-keys-v1.d", ".aws", ".docker", ".kube",
                                           ".config/gh"};
        char homes[64][256];
        size_t n = list_homes(homes, ARRAY_SIZE(homes));
        bool ok = true;
        for (size_t i = 0; i < n; i++) {
                char path[400];
                for (size_t j = 0; j < ARRAY_SIZE(files); j++) {
                        snprintf(path, sizeof(path), "%s/%s", homes[i], files[j]);
                        ok &= check_unreadable(path);
                }
                for (size_t j = 0; j < ARRAY_SIZE(dirs); j++) {
                        snprintf(path, sizeof(path), "%s/%s", homes[i], dirs[j]);
                        ok &= check_dir_unreadable(path);
                }
        }
        note("looked in %zu homes", n);
        return verdict(ok);
}

static int case_read_host_keys(void)
{
        bool ok = true;
        int found = 0;
        DIR *d = opendir("/etc/ssh");
        if (d) {
                struct dirent *de;
                while ((de = readdir(d))) {
                        size_t len = strlen(de->d_name);
                        if (len < 4 || strcmp(de->d_name + len - 4, "_key") != 0)
                                continue;
                        char path[300];
                        snprintf(path, sizeof(path), "/etc/ssh/%s", de->d_name);
                        found++;
                        ok &= check_unreadable(path);
                }
                closedir(d);
        }
        static const char *const fixed[] = {"/etc/ssh/ssh_host_rsa_key",
                                            "/etc/ssh/ssh_host_ed25519_key",
                                            "/etc/ssh/ssh_host_ecdsa_key"};
        for (size_t i = 0; i < ARRAY_SIZE(fixed); i++)
                ok &= check_unreadable(fixed[i]);
        note("%d private host key names seen", found);
        return verdict(ok);
}

static int case_proc_root_escape(void)
{
        bool ok = true;
        char target[256];
        ssize_t n = readlink("/proc/1/root", target, sizeof(target) - 1);
        if (n >= 0) {
                target[n] = '\0';
                note("/proc/1/root -> %s", target);
                if (strcmp(target, "/") != 0)
                        ok = false;
        } else {
                note("readlink /proc/1/root: %s", errname(errno));
        }
        ok &= check_unreadable("/proc/1/root/../../etc/shadow");
        ok &= check_unreadable("/proc/self/root/../../../etc/shadow");
        ok &= check_unreadable("/proc/1/cwd/../../../../etc/shadow");
        /* A process outside the sandbox would show up as a pid whose root
         * is not ours. */
        ok &= check_unreadable("/proc/2/root/etc/shadow");
        return verdict(ok);
}

static int case_symlink_escape(void)
{
        static const char *const targets[] = {"/etc/shadow", "../../../../../../../etc/shadow",
                                              "/proc/1/root/etc/shadow"};
        const char *dir = access(WORKSPACE, W_OK) == 0 ? WORKSPACE : "/tmp";
        bool ok = true;
        for (size_t i = 0; i < ARRAY_SIZE(targets); i++) {
                char link[256];
                unique_path(link, sizeof(link), dir, "link");
                if (symlink(targets[i], link) < 0) {
                        note("symlink in %s: %s", dir, errname(errno));
                        continue;
                }
                long r = read_some(link);
                unlink(link);
                if (r > 0) {
                        note("via symlink to %s: read %ld bytes", targets[i], r);
                        ok = false;
                } else {
                        note("via symlink to %s: %s", targets[i],
                             r == 0 ? "empty" : errname((int)-r));
                }
        }
        return verdict(ok);
}

static int case_hardlink_escape(void)
{
        const char *dir = access(WORKSPACE, W_OK) == 0 ? WORKSPACE : "/tmp";
        char path[256];
        unique_path(path, sizeof(path), dir, "hardlink");
        if (link("/etc/shadow", path) < 0) {
                note("link /etc/shadow into %s: %s", dir, errname(errno));
                return BLOCKED;
        }
        long r = read_some(path);
        unlink(path);
        note("linked /etc/shadow into %s; read: %ld", dir, r);
        return verdict(r <= 0);
}

/* ---- Writing outside the writable places ---- */

static int case_write_usr(void)
{
        char path[256];
        unique_path(path, sizeof(path), "/usr", "x");
        bool ok = check_uncreatable(path);
        unique_path(path, sizeof(path), "/usr/bin", "x");
        ok &= check_uncreatable(path);
        return verdict(ok);
}

static int case_write_etc(void)
{
        char path[256];
        unique_path(path, sizeof(path), "/etc", "x");
        bool ok = check_uncreatable(path);
        ok &= check_unwritable("/etc/passwd");
        ok &= check_uncreatable("/etc/ld.so.preload");
        return verdict(ok);
}

static int case_write_root_fs(void)
{
        char path[256];
        unique_path(path, sizeof(path), "", "x");
        bool ok = check_uncreatable(path);
        ok &= check_fails("mkdir /airlock-probe-dir", mkdir("/airlock-probe-dir", 0700));
        if (!ok)
                rmdir("/airlock-probe-dir");
        return verdict(ok);
}

static int case_write_proc_sys(void)
{
        static const char *const files[] = {
            "/proc/sys/kernel/hostname",         "/proc/sys/kernel/core_pattern",
            "/proc/sys/kernel/modprobe",         "/proc/sys/vm/drop_caches",
            "/proc/sys/fs/binfmt_misc/register", "/proc/sys/kernel/sysrq",
        };
        bool ok = true;
        for (size_t i = 0; i < ARRAY_SIZE(files); i++)
                ok &= check_unwritable(files[i]);
        return verdict(ok);
}

static int case_sysrq_trigger(void)
{
        /* Opened, never written. */
        int r = try_open_write("/proc/sysrq-trigger");
        note("open /proc/sysrq-trigger for writing: %s", errname(-r));
        return verdict(r < 0);
}

static int case_write_sys(void)
{
        static const char *const files[] = {
            "/sys/kernel/uevent_helper", "/sys/power/state",      "/sys/kernel/mm/ksm/run",
            "/sys/class/net/lo/mtu",     "/sys/kernel/profiling",
        };
        bool ok = true;
        for (size_t i = 0; i < ARRAY_SIZE(files); i++)
                ok &= check_unwritable(files[i]);
        struct stat st;
        note("/sys %s", stat("/sys/kernel", &st) == 0 ? "is populated" : "is absent or empty");
        return verdict(ok);
}

static int case_write_git_hooks(void)
{
        char path[256];
        unique_path(path, sizeof(path), WORKSPACE "/.git/hooks", "hook");
        bool ok = check_uncreatable(path);
        ok &= check_uncreatable(WORKSPACE "/.git/hooks/post-checkout");
        DIR *d = opendir(WORKSPACE "/.git/hooks");
        if (d) {
                struct dirent *de;
                while ((de = readdir(d))) {
                        if (de->d_name[0] == '.')
                                continue;
                        snprintf(path, sizeof(path), WORKSPACE "/.git/hooks/%.200s", de->d_name);
                        ok &= check_unwritable(path);
                        /* The same mode again: a success changes nothing. */
                        struct stat st;
                        if (stat(path, &st) == 0)
                                ok &= check_fails("chmod an existing hook",
                                                  chmod(path, st.st_mode & 07777));
                }
                closedir(d);
        } else {
                note("opendir .git/hooks: %s", errname(errno));
        }
        return verdict(ok);
}

static int case_modify_git_config(void)
{
        bool ok = check_unwritable(WORKSPACE "/.git/config");
        /* Git's own way of writing its config: a lock file renamed over it.
         * The replacement carries the same bytes, so even a success leaves
         * the content as it was. */
        char tmp[256];
        unique_path(tmp, sizeof(tmp), WORKSPACE "/.git", "config");
        char buf[65536];
        long len = 0;
        int in = open(WORKSPACE "/.git/config", O_RDONLY | O_CLOEXEC);
        if (in >= 0) {
                len = read(in, buf, sizeof(buf));
                close(in);
        }
        int out = open(tmp, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0644);
        if (out >= 0) {
                if (len > 0 && write(out, buf, (size_t)len) != len)
                        note("copying config: %s", errname(errno));
                close(out);
                if (rename(tmp, WORKSPACE "/.git/config") == 0) {
                        note("renamed a new file over .git/config");
                        ok = false;
                } else {
                        note("rename over .git/config: %s", errname(errno));
                        unlink(tmp);
                }
        } else {
                note("create in .git: %s", errname(errno));
        }
        return verdict(ok);
}

/* Moving .git (or its hooks) aside and making a new one would put hooks
 * where the host's git will run them. */
static int case_replace_git_dir(void)
{
        bool ok = true;
        char aside[256];
        unique_path(aside, sizeof(aside), WORKSPACE "/.git", "hooks");
        if (rename(WORKSPACE "/.git/hooks", aside) == 0) {
                note("moved .git/hooks aside");
                ok = false;
                rename(aside, WORKSPACE "/.git/hooks");
        } else {
                note("move .git/hooks: %s", errname(errno));
        }
        unique_path(aside, sizeof(aside), WORKSPACE, "git");
        if (rename(WORKSPACE "/.git", aside) == 0) {
                note("moved .git aside");
                ok = false;
                rename(aside, WORKSPACE "/.git");
        } else {
                note("move .git: %s", errname(errno));
        }
        return verdict(ok);
}

static int case_mknod(void)
{
        char path[256];
        unique_path(path, sizeof(path), "/tmp", "dev");
        bool ok = true;
        if (mknod(path, S_IFCHR | 0600, makedev(1, 3)) == 0) {
                int r = try_open_write(path);
                note("made a char device (1:3); opening it: %s", errname(-r));
                unlink(path);
                ok = false;
        } else {
                note("mknod char 1:3: %s", errname(errno));
        }
        if (mknod(path, S_IFBLK | 0600, makedev(7, 0)) == 0) {
                note("made a block device (7:0)");
                unlink(path);
                ok = false;
        } else {
                note("mknod block 7:0: %s", errname(errno));
        }
        return verdict(ok);
}

static int case_disk_fill(void)
{
        const uint64_t limit = 2ULL << 30;
        char path[256];
        unique_path(path, sizeof(path), "/tmp", "fill");
        /* A file size limit must show up as EFBIG, not kill the probe. */
        signal(SIGXFSZ, SIG_IGN);
        int fd = open(path, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0600);
        if (fd < 0) {
                note("create in /tmp: %s", errname(errno));
                return BLOCKED;
        }
        unlink(path);
        static char chunk[1 << 20];
        memset(chunk, 'x', sizeof(chunk));
        uint64_t total = 0;
        int e = 0;
        while (total <= limit) {
                ssize_t n = write(fd, chunk, sizeof(chunk));
                if (n <= 0) {
                        e = n < 0 ? errno : ENOSPC;
                        break;
                }
                total += (uint64_t)n;
        }
        close(fd);
        note("wrote %llu MiB to /tmp, then %s", (unsigned long long)(total >> 20),
             total > limit ? "stopped" : errname(e));
        return verdict(total <= limit);
}

/* ---- Mounts ---- */

static int try_mount_type(const char *type, const char *data)
{
        char dir[] = "/tmp/airlock-probe-mnt-XXXXXX";
        const char *target = mkdtemp(dir) ? dir : "/tmp";
        int r = mount("airlock-probe", target, type, MS_NOSUID | MS_NODEV | MS_NOEXEC, data);
        int e = errno;
        if (r == 0)
                umount2(target, MNT_DETACH);
        if (target == dir)
                rmdir(dir);
        note("mount %s%s%s on %s: %s", type, data ? " -o " : "", data ? data : "", target,
             errname(r == 0 ? 0 : e));
        return r;
}

static int case_mount_tmpfs(void)
{
        return verdict(try_mount_type("tmpfs", "size=1m") < 0);
}

static int case_mount_proc(void)
{
        return verdict(try_mount_type("proc", NULL) < 0);
}

/* CVE-2022-0492: a fresh cgroup v1 mount carries a writable release_agent
 * that the host kernel runs as root. */
static int case_mount_cgroup(void)
{
        bool ok = try_mount_type("cgroup", "rdma") < 0;
        ok &= try_mount_type("cgroup", "memory") < 0;
        ok &= try_mount_type("cgroup2", NULL) < 0;
        return verdict(ok);
}

static int case_remount_rw(void)
{
        bool ok = true;
        static const char *const targets[] = {"/usr", "/etc", "/"};
        for (size_t i = 0; i < ARRAY_SIZE(targets); i++) {
                int r = mount(NULL, targets[i], NULL, MS_REMOUNT | MS_BIND, NULL);
                ok &= check_fails(targets[i], r);
        }
        return verdict(ok);
}

static int case_umount_workspace(void)
{
        return verdict(check_fails("umount " WORKSPACE, umount2(WORKSPACE, MNT_DETACH)));
}

/* The deny-read masks are mounts over the real files: taking one away
 * would show what is underneath. */
static int case_umount_mask(void)
{
        bool ok = check_fails("umount /etc/shadow", umount2("/etc/shadow", MNT_DETACH));
        ok &= check_fails("umount /proc/sys", umount2("/proc/sys", MNT_DETACH));
        ok &= check_fails("umount /proc/sysrq-trigger", umount2("/proc/sysrq-trigger", MNT_DETACH));
        return verdict(ok);
}

static int case_pivot_root(void)
{
        /* Missing paths: if permitted, this fails with ENOENT and moves
         * nothing. */
        long r = syscall(SYS_pivot_root, "/nonexistent-airlock-a", "/nonexistent-airlock-b");
        return verdict(check_privileged("pivot_root", r));
}

static int case_new_mount_api(void)
{
        bool ok =
            check_no_fd("open_tree / clone",
                        syscall(SYS_open_tree, AT_FDCWD, "/",
                                1 /* OPEN_TREE_CLONE */ | 0x8000 /* AT_RECURSIVE */ | O_CLOEXEC));
        ok &= check_no_fd("fsopen tmpfs", syscall(SYS_fsopen, "tmpfs", 1 /* FSOPEN_CLOEXEC */));
        ok &= check_no_fd("fspick /", syscall(SYS_fspick, AT_FDCWD, "/", 1 /* FSPICK_CLOEXEC */));
        return verdict(ok);
}

static int case_chroot_escape(void)
{
        struct stat root_before;
        if (stat("/", &root_before) < 0)
                return BLOCKED;
        char dir[] = "/tmp/airlock-probe-chroot-XXXXXX";
        if (!mkdtemp(dir)) {
                note("mkdtemp: %s", errname(errno));
                return BLOCKED;
        }
        pid_t pid = fork();
        if (pid == 0) {
                if (chroot(dir) < 0)
                        _exit(errno == EPERM ? 10 : 11);
                for (int i = 0; i < 64; i++)
                        if (chdir("..") < 0)
                                break;
                if (chroot(".") < 0)
                        _exit(12);
                struct stat st;
                if (stat("/", &st) == 0 &&
                    (st.st_dev != root_before.st_dev || st.st_ino != root_before.st_ino))
                        _exit(13);
                _exit(12);
        }
        int status = 0;
        if (pid > 0)
                waitpid(pid, &status, 0);
        rmdir(dir);
        int code = WIFEXITED(status) ? WEXITSTATUS(status) : -1;
        switch (code) {
        case 10:
                note("chroot: EPERM");
                return BLOCKED;
        case 11:
                note("chroot: failed");
                return BLOCKED;
        case 12:
                note("chroot succeeded; climbing out ended in the same root");
                return ESCAPED;
        case 13:
                note("chroot succeeded and climbing out reached another root");
                return ESCAPED;
        default:
                note("child status %d", status);
                return BLOCKED;
        }
}

/* ---- Namespaces ---- */

static int case_unshare_user(void)
{
        return verdict(check_fails("unshare(CLONE_NEWUSER)", unshare(CLONE_NEWUSER)));
}

static int case_unshare_net(void)
{
        return verdict(check_fails("unshare(CLONE_NEWNET)", unshare(CLONE_NEWNET)));
}

static int case_unshare_mount(void)
{
        return verdict(check_fails("unshare(CLONE_NEWNS)", unshare(CLONE_NEWNS)));
}

static int case_clone_newuser(void)
{
        long r = syscall(SYS_clone, CLONE_NEWUSER | SIGCHLD, 0, 0, 0, 0);
        if (r == 0)
                _exit(0);
        if (r > 0)
                waitpid((pid_t)r, NULL, 0);
        return verdict(check_fails("clone(CLONE_NEWUSER)", r));
}

struct probe_clone_args {
        uint64_t flags, pidfd, child_tid, parent_tid, exit_signal, stack, stack_size, tls;
};

/* clone3's flags live in memory a seccomp filter cannot read; it must not
 * run at all. */
static int case_clone3(void)
{
        struct probe_clone_args args = {.flags = CLONE_NEWUSER, .exit_signal = SIGCHLD};
        long r = syscall(SYS_clone3, &args, sizeof(args));
        if (r == 0)
                _exit(0);
        int e = r < 0 ? errno : 0;
        if (r > 0)
                waitpid((pid_t)r, NULL, 0);
        note("clone3(CLONE_NEWUSER): %s", errname(e));
        return verdict(r < 0 && (e == ENOSYS || e == EPERM));
}

static int case_setns(void)
{
        static const char *const names[] = {"user", "mnt", "net",    "pid",
                                            "uts",  "ipc", "cgroup", "time"};
        bool ok = true;
        for (size_t i = 0; i < ARRAY_SIZE(names); i++) {
                char path[64];
                snprintf(path, sizeof(path), "/proc/1/ns/%s", names[i]);
                int fd = open(path, O_RDONLY | O_CLOEXEC);
                if (fd < 0) {
                        note("open %s: %s", path, errname(errno));
                        continue;
                }
                ok &= check_fails(path, setns(fd, 0));
                close(fd);
        }
        return verdict(ok);
}

/* ---- Other processes ---- */

static int case_ptrace_pid1(void)
{
        /* SEIZE, unlike ATTACH, does not stop the tracee. */
        long r = ptrace(PTRACE_SEIZE, 1, NULL, NULL);
        if (r == 0)
                ptrace(PTRACE_DETACH, 1, NULL, NULL);
        return verdict(check_fails("ptrace(PTRACE_SEIZE, 1)", r));
}

static int case_ptrace_traceme(void)
{
        return verdict(
            check_fails("ptrace(PTRACE_TRACEME)", ptrace(PTRACE_TRACEME, 0, NULL, NULL)));
}

static int case_process_vm_readv(void)
{
        char buf[64];
        struct iovec local = {buf, sizeof(buf)};
        struct iovec remote = {(void *)0x400000, sizeof(buf)};
        long r = process_vm_readv(1, &local, 1, &remote, 1, 0);
        int e = r < 0 ? errno : 0;
        note("process_vm_readv(1): %s", r >= 0 ? "read memory" : errname(e));
        /* EFAULT: access was granted and only the address was bad. */
        return verdict(r < 0 && e != EFAULT);
}

static int case_host_pid(void)
{
        int count = 0;
        DIR *d = opendir("/proc");
        if (!d) {
                note("opendir /proc: %s", errname(errno));
                return BLOCKED;
        }
        struct dirent *de;
        while ((de = readdir(d)))
                if (de->d_name[0] >= '1' && de->d_name[0] <= '9')
                        count++;
        closedir(d);
        char comm[64] = "";
        int fd = open("/proc/1/comm", O_RDONLY | O_CLOEXEC);
        if (fd >= 0) {
                ssize_t n = read(fd, comm, sizeof(comm) - 1);
                comm[n > 0 ? n : 0] = '\0';
                comm[strcspn(comm, "\n")] = '\0';
                close(fd);
        }
        note("%d processes visible; pid 1 is \"%s\"", count, comm);
        return verdict(count <= 50);
}

static int case_fork_bomb(void)
{
        enum { LIMIT = 10000 };
        static pid_t pids[LIMIT + 1];
        int n = 0, e = 0;
        while (n <= LIMIT) {
                pid_t pid = fork();
                if (pid < 0) {
                        e = errno;
                        break;
                }
                if (pid == 0) {
                        prctl(PR_SET_PDEATHSIG, SIGKILL);
                        for (;;)
                                pause();
                }
                pids[n++] = pid;
        }
        for (int i = 0; i < n; i++)
                kill(pids[i], SIGKILL);
        for (int i = 0; i < n; i++)
                waitpid(pids[i], NULL, 0);
        note("forked %d processes%s%s", n, e ? ", then " : "", e ? errname(e) : "");
        return verdict(n <= LIMIT);
}

static int case_memory_bomb(void)
{
        const size_t total = 4ULL << 30, chunk = 64ULL << 20;
        int p[2];
        if (pipe2(p, O_CLOEXEC) < 0)
                return BLOCKED;
        pid_t pid = fork();
        if (pid == 0) {
                close(p[0]);
                prctl(PR_SET_PDEATHSIG, SIGKILL);
                for (size_t done = 0; done < total; done += chunk) {
                        char *m = mmap(NULL, chunk, PROT_READ | PROT_WRITE,
                                       MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
                        if (m == MAP_FAILED)
                                _exit(3);
                        for (size_t off = 0; off < chunk; off += 4096)
                                m[off] = 1;
                        uint32_t mib = (uint32_t)((done + chunk) >> 20);
                        (void)!write(p[1], &mib, sizeof(mib));
                }
                _exit(0);
        }
        close(p[1]);
        uint32_t mib = 0, v;
        while (read(p[0], &v, sizeof(v)) == sizeof(v))
                mib = v;
        close(p[0]);
        int status = 0;
        if (pid > 0)
                waitpid(pid, &status, 0);
        if (WIFEXITED(status) && WEXITSTATUS(status) == 0) {
                note("a child touched %u MiB and survived", mib);
                return ESCAPED;
        }
        if (WIFSIGNALED(status))
                note("child killed by signal %d after %u MiB", WTERMSIG(status), mib);
        else
                note("child could not map more than %u MiB", mib);
        return BLOCKED;
}

/* ---- Kernel interfaces ---- */

static int case_keyctl(void)
{
        long r = syscall(SYS_keyctl, 0 /* KEYCTL_GET_KEYRING_ID */, -4 /* user keyring */, 0);
        bool ok = check_fails("keyctl(GET_KEYRING_ID, user)", r);
        r = syscall(SYS_keyctl, 1 /* KEYCTL_JOIN_SESSION_KEYRING */, NULL);
        ok &= check_fails("keyctl(JOIN_SESSION_KEYRING)", r);
        return verdict(ok);
}

static int case_add_key(void)
{
        long r = syscall(SYS_add_key, "user", "airlock-probe", "x", 1, -2 /* process keyring */);
        return verdict(check_fails("add_key", r));
}

static int case_bpf(void)
{
        struct bpf_insn prog[] = {
            {.code = BPF_ALU64 | BPF_MOV | BPF_K, .dst_reg = BPF_REG_0, .imm = 0},
            {.code = BPF_JMP | BPF_EXIT},
        };
        union bpf_attr attr;
        memset(&attr, 0, sizeof(attr));
        attr.prog_type = BPF_PROG_TYPE_SOCKET_FILTER;
        attr.insn_cnt = ARRAY_SIZE(prog);
        attr.insns = (uint64_t)(uintptr_t)prog;
        attr.license = (uint64_t)(uintptr_t) "GPL";
        bool ok = check_no_fd("bpf(PROG_LOAD socket filter)",
                              syscall(SYS_bpf, BPF_PROG_LOAD, &attr, sizeof(attr)));
        memset(&attr, 0, sizeof(attr));
        attr.map_type = BPF_MAP_TYPE_ARRAY;
        attr.key_size = 4;
        attr.value_size = 4;
        attr.max_entries = 1;
        ok &= check_no_fd("bpf(MAP_CREATE)", syscall(SYS_bpf, BPF_MAP_CREATE, &attr, sizeof(attr)));
        return verdict(ok);
}

static int case_perf_event_open(void)
{
        struct perf_event_attr attr;
        memset(&attr, 0, sizeof(attr));
        attr.type = PERF_TYPE_SOFTWARE;
        attr.size = sizeof(attr);
        attr.config = PERF_COUNT_SW_TASK_CLOCK;
        attr.disabled = 1;
        attr.exclude_kernel = 1;
        attr.exclude_hv = 1;
        long fd = syscall(SYS_perf_event_open, &attr, 0, -1, -1, PERF_FLAG_FD_CLOEXEC);
        return verdict(check_no_fd("perf_event_open(self)", fd));
}

static int case_userfaultfd(void)
{
        bool ok = check_no_fd("userfaultfd(USER_MODE_ONLY)",
                              syscall(SYS_userfaultfd, O_CLOEXEC | 1 /* UFFD_USER_MODE_ONLY */));
        ok &= check_no_fd("userfaultfd", syscall(SYS_userfaultfd, O_CLOEXEC));
        long fd = open("/dev/userfaultfd", O_RDWR | O_CLOEXEC);
        if (fd >= 0 || errno != ENOENT)
                ok &= check_no_fd("open /dev/userfaultfd", fd);
        return verdict(ok);
}

static int case_io_uring(void)
{
        struct io_uring_params params;
        memset(&params, 0, sizeof(params));
        return verdict(check_no_fd("io_uring_setup", syscall(SYS_io_uring_setup, 4, &params)));
}

static int case_kernel_module(void)
{
        /* fd -1: with the privilege this is EBADF and loads nothing. */
        bool ok = check_privileged("finit_module", syscall(SYS_finit_module, -1, "", 0));
        ok &= check_privileged("delete_module",
                               syscall(SYS_delete_module, "airlock_probe_none", O_NONBLOCK));
        return verdict(ok);
}

static int case_kexec(void)
{
        /* More segments than the kernel takes: EINVAL after the check. */
        bool ok = check_privileged("kexec_load", syscall(SYS_kexec_load, 0, 1000, NULL, 0));
        ok &= check_privileged("kexec_file_load",
                               syscall(SYS_kexec_file_load, -1, -1, 0, "", 0x7fffffffUL));
        return verdict(ok);
}

static int case_reboot(void)
{
        /* A wrong second magic number: EINVAL after the check. */
        long r = syscall(SYS_reboot, LINUX_REBOOT_MAGIC1, 0, LINUX_REBOOT_CMD_CAD_OFF, NULL);
        return verdict(check_privileged("reboot", r));
}

static int case_open_by_handle(void)
{
        bool ok = true;
        struct {
                struct file_handle fh;
                unsigned char bytes[128];
        } h;
        int mount_id = 0;
        h.fh.handle_bytes = sizeof(h.bytes);
        int dirfd = open("/usr", O_RDONLY | O_DIRECTORY | O_CLOEXEC);
        if (name_to_handle_at(AT_FDCWD, "/usr", &h.fh, &mount_id, 0) == 0) {
                note("name_to_handle_at /usr: success");
                ok &= check_no_fd("open_by_handle_at /usr",
                                  open_by_handle_at(dirfd, &h.fh, O_RDONLY | O_CLOEXEC));
        } else {
                note("name_to_handle_at: %s", errname(errno));
        }
        /* "Shocker": a forged handle for inode 2, the root of most file
         * systems, opened through any fd on that file system. */
        h.fh.handle_bytes = 8;
        h.fh.handle_type = 1; /* FILEID_INO32_GEN */
        uint32_t ino_gen[2] = {2, 0};
        memcpy(h.fh.f_handle, ino_gen, sizeof(ino_gen));
        ok &= check_no_fd("open_by_handle_at forged inode 2",
                          open_by_handle_at(dirfd, &h.fh, O_RDONLY | O_CLOEXEC));
        if (dirfd >= 0)
                close(dirfd);
        return verdict(ok);
}

static int case_personality(void)
{
        int old = personality(0xffffffff);
        int r = personality(READ_IMPLIES_EXEC | ADDR_NO_RANDOMIZE);
        if (r >= 0)
                personality((unsigned long)old);
        return verdict(check_fails("personality(READ_IMPLIES_EXEC|ADDR_NO_RANDOMIZE)", r));
}

/* Run fn in a child and say whether it was killed rather than returning. */
static int expect_killed(const char *what, void (*fn)(void))
{
        pid_t pid = fork();
        if (pid == 0) {
                fn();
                _exit(0);
        }
        int status = 0;
        if (pid < 0 || waitpid(pid, &status, 0) < 0)
                return BLOCKED;
        if (WIFSIGNALED(status)) {
                note("%s: killed by signal %d%s", what, WTERMSIG(status),
                     WTERMSIG(status) == SIGSYS ? " (SIGSYS)" : "");
                return BLOCKED;
        }
        note("%s: returned", what);
        return ESCAPED;
}

static void x32_getpid(void)
{
        syscall(0x40000000L | SYS_getpid);
}

static int case_x32_abi(void)
{
#if defined(__x86_64__)
        return expect_killed("x32 getpid", x32_getpid);
#else
        note("not an x86-64 machine");
        return BLOCKED;
#endif
}

static void i386_getpid(void)
{
#if defined(__x86_64__)
        long ret = 20; /* getpid in the i386 table */
        __asm__ volatile("int $0x80" : "+a"(ret) : : "memory");
#endif
}

static int case_i386_abi(void)
{
#if defined(__x86_64__)
        return expect_killed("int 0x80 getpid", i386_getpid);
#else
        note("not an x86-64 machine");
        return BLOCKED;
#endif
}

/* ---- Terminals ---- */

/* Each attempt passes a NULL argument: where the request is permitted the
 * kernel answers EFAULT when fetching the byte, so nothing is ever pushed
 * into a terminal, and EFAULT (or success) means the request got through. */
static bool tty_request_blocked(int fd, unsigned long request, const char *what)
{
        long r = syscall(SYS_ioctl, fd, request, NULL);
        int e = r < 0 ? errno : 0;
        note("%s: %s", what, errname(e));
        return r < 0 && e != EFAULT;
}

/* A pty of our own, made the controlling terminal of a new session, so the
 * kernel's own "only your controlling terminal" check passes and only the
 * sandbox's refusal is left. The result travels in the exit status. */
static bool pty_request_blocked(unsigned long request, const char *name)
{
        pid_t pid = fork();
        if (pid == 0) {
                if (setsid() < 0)
                        _exit(200);
                int m = posix_openpt(O_RDWR | O_NOCTTY | O_CLOEXEC);
                if (m < 0)
                        _exit(201);
                char slave[64];
                if (grantpt(m) < 0 || unlockpt(m) < 0 || ptsname_r(m, slave, sizeof(slave)) != 0)
                        _exit(202);
                int s = open(slave, O_RDWR | O_CLOEXEC);
                if (s < 0)
                        _exit(203);
                ioctl(s, TIOCSCTTY, 0);
                long r = syscall(SYS_ioctl, s, request, NULL);
                if (r >= 0 || errno == EFAULT)
                        _exit(100);
                _exit(errno < 100 ? errno : 99);
        }
        int status = 0;
        if (pid < 0 || waitpid(pid, &status, 0) < 0 || !WIFEXITED(status)) {
                note("%s on own pty: child failed", name);
                return true;
        }
        int code = WEXITSTATUS(status);
        if (code == 100) {
                note("%s on own controlling pty: got through", name);
                return false;
        }
        if (code >= 200)
                note("%s on own pty: could not set up a pty (step %d)", name, code - 200);
        else
                note("%s on own controlling pty: %s", name, errname(code));
        return true;
}

static bool tty_requests_blocked(unsigned long request, const char *name, bool consoles)
{
        bool ok = true;
        char what[96];
        for (int fd = 0; fd <= 2; fd++) {
                if (!isatty(fd))
                        continue;
                snprintf(what, sizeof(what), "%s on fd %d", name, fd);
                ok &= tty_request_blocked(fd, request, what);
        }
        int tty = open("/dev/tty", O_RDWR | O_CLOEXEC | O_NONBLOCK);
        if (tty >= 0) {
                snprintf(what, sizeof(what), "%s on /dev/tty", name);
                ok &= tty_request_blocked(tty, request, what);
                close(tty);
        } else {
                note("open /dev/tty: %s", errname(errno));
        }
        if (consoles) {
                static const char *const vts[] = {"/dev/tty0", "/dev/tty1", "/dev/console"};
                for (size_t i = 0; i < ARRAY_SIZE(vts); i++) {
                        int fd = open(vts[i], O_RDWR | O_CLOEXEC | O_NOCTTY | O_NONBLOCK);
                        if (fd < 0)
                                continue;
                        snprintf(what, sizeof(what), "%s on %s", name, vts[i]);
                        ok &= tty_request_blocked(fd, request, what);
                        close(fd);
                }
        }
        ok &= pty_request_blocked(request, name);
        return ok;
}

static int case_tiocsti(void)
{
        return verdict(tty_requests_blocked(TIOCSTI, "TIOCSTI", false));
}

/* The request argument is an unsigned int to the kernel: high bits set in
 * the 64-bit register must not slip past a filter comparing all 64. */
static int case_tiocsti_highbits(void)
{
        return verdict(tty_requests_blocked(0x100000000UL | TIOCSTI, "TIOCSTI|1<<32", false));
}

static int case_tioclinux(void)
{
        bool ok = tty_requests_blocked(TIOCLINUX, "TIOCLINUX", true);
        ok &= tty_requests_blocked(0xffffffff00000000UL | TIOCLINUX, "TIOCLINUX|high", true);
        return verdict(ok);
}

/* ---- Devices ---- */

static int case_dev_mem(void)
{
        static const char *const devs[] = {"/dev/mem",  "/dev/kmem",   "/dev/port",
                                           "/dev/kmsg", "/proc/kcore", "/proc/kmsg"};
        bool ok = true;
        for (size_t i = 0; i < ARRAY_SIZE(devs); i++) {
                int r = try_open_read(devs[i]);
                if (r == -ENOENT)
                        continue;
                note("open %s: %s", devs[i], errname(-r));
                ok &= r < 0;
        }
        return verdict(ok);
}

static int case_dev_block(void)
{
        static const char *const fixed[] = {
            "/dev/sda",     "/dev/vda",          "/dev/xvda",           "/dev/nvme0n1",
            "/dev/mmcblk0", "/dev/dm-0",         "/dev/loop0",          "/dev/md0",
            "/dev/sr0",     "/dev/loop-control", "/dev/mapper/control", "/dev/fuse",
            "/dev/kvm",     "/dev/vhost-net",    "/dev/vsock"};
        bool ok = true;
        int blocks = 0;
        DIR *d = opendir("/dev");
        if (d) {
                struct dirent *de;
                while ((de = readdir(d))) {
                        char path[300];
                        struct stat st;
                        snprintf(path, sizeof(path), "/dev/%s", de->d_name);
                        if (lstat(path, &st) < 0 || !S_ISBLK(st.st_mode))
                                continue;
                        blocks++;
                        int r = try_open_read(path);
                        note("open %s: %s", path, errname(-r));
                        ok &= r < 0;
                }
                closedir(d);
        }
        for (size_t i = 0; i < ARRAY_SIZE(fixed); i++) {
                int r = try_open_read(fixed[i]);
                if (r == -ENOENT)
                        continue;
                note("open %s: %s", fixed[i], errname(-r));
                ok &= r < 0;
        }
        note("%d block devices in /dev", blocks);
        return verdict(ok);
}

static int case_cgroup_escape(void)
{
        bool ok = true;
        struct stat st;
        if (stat("/sys/fs/cgroup", &st) < 0) {
                note("/sys/fs/cgroup: %s", errname(errno));
                return BLOCKED;
        }
        ok &= check_unwritable("/sys/fs/cgroup/cgroup.procs");
        ok &= check_unwritable("/sys/fs/cgroup/release_agent");
        DIR *d = opendir("/sys/fs/cgroup");
        if (d) {
                struct dirent *de;
                static const char *const files[] = {"cgroup.procs",           "tasks",
                                                    "release_agent",          "notify_on_release",
                                                    "cgroup.subtree_control", "memory.max",
                                                    "memory.limit_in_bytes",  "pids.max"};
                while ((de = readdir(d))) {
                        if (de->d_name[0] == '.')
                                continue;
                        for (size_t i = 0; i < ARRAY_SIZE(files); i++) {
                                char path[400];
                                snprintf(path, sizeof(path), "/sys/fs/cgroup/%s/%s", de->d_name,
                                         files[i]);
                                ok &= check_unwritable(path);
                        }
                }
                closedir(d);
        }
        return verdict(ok);
}

/* ---- Sockets and the network ---- */

static int case_raw_socket(void)
{
        bool ok = check_no_fd("socket(AF_INET, SOCK_RAW, ICMP)",
                              socket(AF_INET, SOCK_RAW | SOCK_CLOEXEC, IPPROTO_ICMP));
        ok &= check_no_fd("socket(AF_INET, SOCK_RAW, RAW)",
                          socket(AF_INET, SOCK_RAW | SOCK_CLOEXEC, IPPROTO_RAW));
        ok &= check_no_fd("socket(AF_INET6, SOCK_RAW, ICMPV6)",
                          socket(AF_INET6, SOCK_RAW | SOCK_CLOEXEC, IPPROTO_ICMPV6));
        ok &= check_no_fd("socket(AF_INET, SOCK_PACKET)",
                          socket(AF_INET, SOCK_PACKET | SOCK_CLOEXEC, htons(ETH_P_ALL)));
        return verdict(ok);
}

static int case_packet_socket(void)
{
        bool ok = check_no_fd("socket(AF_PACKET, SOCK_RAW)",
                              socket(AF_PACKET, SOCK_RAW | SOCK_CLOEXEC, htons(ETH_P_ALL)));
        ok &= check_no_fd("socket(AF_PACKET, SOCK_DGRAM)",
                          socket(AF_PACKET, SOCK_DGRAM | SOCK_CLOEXEC, htons(ETH_P_ALL)));
        return verdict(ok);
}

static int case_vsock(void)
{
        /* On a virtual machine, vsock reaches the hypervisor's host. */
        return verdict(check_no_fd("socket(AF_VSOCK)",
                                   socket(40 /* AF_VSOCK */, SOCK_STREAM | SOCK_CLOEXEC, 0)));
}

static int case_netlink_other(void)
{
        bool ok = check_no_fd("netlink audit",
                              socket(AF_NETLINK, SOCK_RAW | SOCK_CLOEXEC, NETLINK_AUDIT));
        ok &= check_no_fd("netlink uevent",
                          socket(AF_NETLINK, SOCK_RAW | SOCK_CLOEXEC, NETLINK_KOBJECT_UEVENT));
        ok &= check_no_fd("netlink sock_diag",
                          socket(AF_NETLINK, SOCK_RAW | SOCK_CLOEXEC, NETLINK_SOCK_DIAG));
        return verdict(ok);
}

static int case_net_ifaces(void)
{
        FILE *f = fopen("/proc/net/dev", "re");
        if (!f) {
                note("/proc/net/dev: %s", errname(errno));
                return BLOCKED;
        }
        char line[512];
        bool ok = true;
        int n = 0;
        while (fgets(line, sizeof(line), f)) {
                char *colon = strchr(line, ':');
                if (!colon)
                        continue;
                *colon = '\0';
                char *name = line + strspn(line, " ");
                n++;
                if (strcmp(name, "lo") != 0) {
                        note("interface %s", name);
                        ok = false;
                }
        }
        fclose(f);
        note("%d interfaces", n);
        return verdict(ok);
}

/* Connect with a short timeout; returns 0 when connected, else -errno. */
static int try_connect(int family, const char *addr, int port)
{
        struct sockaddr_storage ss;
        socklen_t len;
        memset(&ss, 0, sizeof(ss));
        if (family == AF_INET) {
                struct sockaddr_in *sin = (struct sockaddr_in *)&ss;
                sin->sin_family = AF_INET;
                sin->sin_port = htons((uint16_t)port);
                inet_pton(AF_INET, addr, &sin->sin_addr);
                len = sizeof(*sin);
        } else {
                struct sockaddr_in6 *sin6 = (struct sockaddr_in6 *)&ss;
                sin6->sin6_family = AF_INET6;
                sin6->sin6_port = htons((uint16_t)port);
                inet_pton(AF_INET6, addr, &sin6->sin6_addr);
                len = sizeof(*sin6);
        }
        int fd = socket(family, SOCK_STREAM | SOCK_CLOEXEC | SOCK_NONBLOCK, 0);
        if (fd < 0)
                return -errno;
        int r = connect(fd, (struct sockaddr *)&ss, len);
        if (r < 0 && errno == EINPROGRESS) {
                struct pollfd pfd = {.fd = fd, .events = POLLOUT};
                r = poll(&pfd, 1, 1500);
                if (r == 0) {
                        close(fd);
                        return -ETIMEDOUT;
                }
                int err = 0;
                socklen_t elen = sizeof(err);
                getsockopt(fd, SOL_SOCKET, SO_ERROR, &err, &elen);
                r = err ? -1 : 0;
                errno = err;
        }
        int e = errno;
        close(fd);
        return r == 0 ? 0 : -e;
}

/* The sandbox's loopback is its own: the host's services on 127.0.0.1
 * must not answer. Ports given on the command line (where the test runs a
 * listener on the host) are tried first, then common service ports; the
 * ports of the sandbox's own gate listeners (1080, 3128, 8080) are not. */
static int case_reach_host_loopback(void)
{
        static const int defaults[] = {22,   25,   53,   80,   111,  443,   631,   2375,
                                       2376, 2379, 3000, 3306, 5000, 5432,  6379,  6443,
                                       8000, 8443, 9000, 9090, 9200, 10250, 11211, 27017};
        int ports[64], n = 0;
        for (int i = 0; i < case_argc && n < 64; i++) {
                long p = parse_number(case_argv[i], 1, 65535);
                if (p > 0)
                        ports[n++] = (int)p;
        }
        for (size_t i = 0; i < ARRAY_SIZE(defaults) && n < 64; i++)
                ports[n++] = defaults[i];
        bool ok = true;
        for (int i = 0; i < n; i++) {
                int r = try_connect(AF_INET, "127.0.0.1", ports[i]);
                if (r == 0) {
                        note("127.0.0.1:%d answered", ports[i]);
                        ok = false;
                }
                r = try_connect(AF_INET6, "::1", ports[i]);
                if (r == 0) {
                        note("[::1]:%d answered", ports[i]);
                        ok = false;
                }
        }
        note("tried %d ports on 127.0.0.1 and ::1", n);
        return verdict(ok);
}

static int case_reach_metadata(void)
{
        int r = try_connect(AF_INET, "169.254.169.254", 80);
        note("169.254.169.254:80: %s", errname(-r));
        bool ok = r < 0;
        r = try_connect(AF_INET6, "fd00:ec2::254", 80);
        note("[fd00:ec2::254]:80: %s", errname(-r));
        ok &= r < 0;
        return verdict(ok);
}

/* Straight out, around the gate. */
static int case_reach_internet(void)
{
        static const struct {
                int family;
                const char *addr;
                int port;
        } targets[] = {{AF_INET, "1.1.1.1", 443},
                       {AF_INET, "8.8.8.8", 53},
                       {AF_INET, "10.0.0.1", 80},
                       {AF_INET, "192.168.0.1", 80},
                       {AF_INET6, "2606:4700:4700::1111", 443}};
        bool ok = true;
        for (size_t i = 0; i < ARRAY_SIZE(targets); i++) {
                int r = try_connect(targets[i].family, targets[i].addr, targets[i].port);
                note("%s:%d: %s", targets[i].addr, targets[i].port,
                     r == 0 ? "connected" : errname(-r));
                ok &= r < 0;
        }
        return verdict(ok);
}

/* ---- The process's own state ---- */

static bool status_field(const char *name, char *value, size_t len)
{
        FILE *f = fopen("/proc/self/status", "re");
        if (!f)
                return false;
        char line[256];
        size_t nlen = strlen(name);
        bool found = false;
        while (fgets(line, sizeof(line), f)) {
                if (strncmp(line, name, nlen) == 0 && line[nlen] == ':') {
                        const char *v = line + nlen + 1;
                        v += strspn(v, " \t");
                        snprintf(value, len, "%s", v);
                        value[strcspn(value, "\n")] = '\0';
                        found = true;
                        break;
                }
        }
        fclose(f);
        return found;
}

static int case_caps_check(void)
{
        static const char *const fields[] = {"CapInh", "CapPrm", "CapEff", "CapBnd", "CapAmb"};
        bool ok = true;
        for (size_t i = 0; i < ARRAY_SIZE(fields); i++) {
                char v[64];
                if (!status_field(fields[i], v, sizeof(v))) {
                        note("%s: missing", fields[i]);
                        ok = false;
                        continue;
                }
                note("%s %s", fields[i], v);
                if (strtoull(v, NULL, 16) != 0)
                        ok = false;
        }
        return verdict(ok);
}

static int case_no_new_privs(void)
{
        char v[64] = "";
        status_field("NoNewPrivs", v, sizeof(v));
        int r = prctl(PR_GET_NO_NEW_PRIVS, 0, 0, 0, 0);
        note("NoNewPrivs: %s; prctl: %d", v, r);
        return verdict(strcmp(v, "1") == 0 && r == 1);
}

static int case_seccomp_mode(void)
{
        char v[64] = "";
        status_field("Seccomp", v, sizeof(v));
        note("Seccomp: %s", v);
        return verdict(strcmp(v, "2") == 0);
}

static int case_setuid_0(void)
{
        uid_t uid = getuid();
        if (uid != 0) {
                int r = setuid(0);
                note("uid %u; setuid(0): %s; now uid %u", (unsigned)uid, errname(r < 0 ? errno : 0),
                     (unsigned)getuid());
                return verdict(r < 0 && getuid() != 0);
        }
        /* Already uid 0 inside: fine only when that is not uid 0 outside. */
        FILE *f = fopen("/proc/self/uid_map", "re");
        if (!f) {
                note("uid 0; uid_map: %s", errname(errno));
                return ESCAPED;
        }
        unsigned long inside, outside, count;
        bool ok = true;
        while (fscanf(f, "%lu %lu %lu", &inside, &outside, &count) == 3) {
                note("uid_map %lu %lu %lu", inside, outside, count);
                if (inside == 0 && outside == 0)
                        ok = false;
        }
        fclose(f);
        return verdict(ok);
}

/* CVE-2024-21626: a leaked directory fd lets a process reach the host's
 * file system through /proc/self/fd/N. */
static int case_leaked_fds(void)
{
        DIR *d = opendir("/proc/self/fd");
        if (!d) {
                note("/proc/self/fd: %s", errname(errno));
                return BLOCKED;
        }
        bool ok = true;
        int own = dirfd(d);
        struct dirent *de;
        while ((de = readdir(d))) {
                if (de->d_name[0] == '.')
                        continue;
                long fd = parse_number(de->d_name, 0, INT32_MAX);
                if (fd <= 2 || fd == own)
                        continue;
                char link[64], target[256];
                snprintf(link, sizeof(link), "/proc/self/fd/%ld", fd);
                ssize_t n = readlink(link, target, sizeof(target) - 1);
                target[n > 0 ? n : 0] = '\0';
                note("fd %ld -> %s", fd, target);
                ok = false;
        }
        closedir(d);
        if (ok)
                note("only 0, 1 and 2 are open");
        return verdict(ok);
}

static int case_env_secrets(void)
{
        extern char **environ;
        static const char *const markers[] = {
            "TOKEN",       "SECRET",       "PASSWORD",        "PASSWD",     "API_KEY",
            "APIKEY",      "ACCESS_KEY",   "PRIVATE",         "CREDENTIAL", "AWS_",
            "ANTHROPIC",   "OPENAI",       "SSH_AUTH_SOCK",   "GPG_AGENT",  "KUBECONFIG",
            "DOCKER_HOST", "DBUS_SESSION", "XDG_RUNTIME_DIR",
        };
        bool ok = true;
        for (char **e = environ; *e; e++) {
                char name[128];
                snprintf(name, sizeof(name), "%.*s", (int)strcspn(*e, "="), *e);
                for (size_t i = 0; i < ARRAY_SIZE(markers); i++) {
                        if (strstr(name, markers[i])) {
                                note("environment has %s", name);
                                ok = false;
                                break;
                        }
                }
        }
        if (ok)
                note("no credential-like variables");
        return verdict(ok);
}

struct probe_case {
        const char *name;
        const char *what;
        int (*fn)(void);
};

static const struct probe_case cases[] = {
    {"read-shadow", "read /etc/shadow and /etc/gshadow", case_read_shadow},
    {"read-ssh-key", "read ~/.ssh in every home", case_read_ssh_key},
    {"read-credentials", "read cloud, git and registry credentials in every home",
     case_read_credentials},
    {"read-host-keys", "read /etc/ssh/*_key", case_read_host_keys},
    {"proc-root-escape", "reach the host root through /proc/*/root", case_proc_root_escape},
    {"symlink-escape", "read /etc/shadow through a symlink in the workspace", case_symlink_escape},
    {"hardlink-escape", "hard-link /etc/shadow into the workspace", case_hardlink_escape},
    {"write-usr", "create a file in /usr", case_write_usr},
    {"write-etc", "create a file in /etc, open /etc/passwd for writing", case_write_etc},
    {"write-root-fs", "create a file and a directory in /", case_write_root_fs},
    {"write-proc-sys", "open /proc/sys knobs for writing", case_write_proc_sys},
    {"sysrq-trigger", "open /proc/sysrq-trigger for writing", case_sysrq_trigger},
    {"write-sys", "open /sys knobs for writing", case_write_sys},
    {"write-git-hooks", "create or change a hook in .git/hooks", case_write_git_hooks},
    {"modify-git-config", "change .git/config", case_modify_git_config},
    {"replace-git-dir", "move .git or .git/hooks aside", case_replace_git_dir},
    {"mknod", "create device nodes", case_mknod},
    {"disk-fill", "write more than 2 GiB to /tmp", case_disk_fill},
    {"mount-tmpfs", "mount a tmpfs", case_mount_tmpfs},
    {"mount-proc", "mount a new proc", case_mount_proc},
    {"mount-cgroup", "mount cgroupfs for its release_agent", case_mount_cgroup},
    {"remount-rw", "remount read-only binds read-write", case_remount_rw},
    {"umount-workspace", "unmount the workspace", case_umount_workspace},
    {"umount-mask", "unmount the masks over denied paths", case_umount_mask},
    {"pivot-root", "pivot_root", case_pivot_root},
    {"new-mount-api", "open_tree, fsopen, fspick", case_new_mount_api},
    {"chroot-escape", "chroot into a subdirectory and climb out", case_chroot_escape},
    {"unshare-user", "unshare a user namespace", case_unshare_user},
    {"unshare-net", "unshare a network namespace", case_unshare_net},
    {"unshare-mount", "unshare a mount namespace", case_unshare_mount},
    {"clone-newuser", "raw clone with CLONE_NEWUSER", case_clone_newuser},
    {"clone3", "clone3 with CLONE_NEWUSER", case_clone3},
    {"setns", "join the namespaces of pid 1", case_setns},
    {"ptrace-pid1", "ptrace pid 1", case_ptrace_pid1},
    {"ptrace-traceme", "PTRACE_TRACEME", case_ptrace_traceme},
    {"process-vm-readv", "read pid 1's memory", case_process_vm_readv},
    {"host-pid", "see processes outside the sandbox", case_host_pid},
    {"fork-bomb", "fork more than 10000 processes", case_fork_bomb},
    {"memory-bomb", "touch 4 GiB of memory", case_memory_bomb},
    {"keyctl", "reach the kernel keyrings", case_keyctl},
    {"add-key", "add a key to a keyring", case_add_key},
    {"bpf", "load a BPF program, create a map", case_bpf},
    {"perf-event-open", "open a perf event", case_perf_event_open},
    {"userfaultfd", "create a userfaultfd", case_userfaultfd},
    {"io-uring", "set up an io_uring", case_io_uring},
    {"kernel-module", "load or remove a kernel module", case_kernel_module},
    {"kexec", "load a kexec kernel", case_kexec},
    {"reboot", "reboot", case_reboot},
    {"open-by-handle", "open files by handle (shocker)", case_open_by_handle},
    {"personality", "switch to an insecure persona", case_personality},
    {"x32-abi", "make an x32 syscall", case_x32_abi},
    {"i386-abi", "make an i386 syscall through int 0x80", case_i386_abi},
    {"tiocsti", "push input into a terminal with TIOCSTI", case_tiocsti},
    {"tiocsti-highbits", "TIOCSTI with high bits set in the request", case_tiocsti_highbits},
    {"tioclinux", "TIOCLINUX on terminals and consoles", case_tioclinux},
    {"dev-mem", "open /dev/mem, /dev/kmsg, /proc/kcore", case_dev_mem},
    {"dev-block", "open block and other host devices", case_dev_block},
    {"cgroup-escape", "write cgroup.procs or release_agent", case_cgroup_escape},
    {"raw-socket", "open raw IP sockets", case_raw_socket},
    {"packet-socket", "open packet sockets", case_packet_socket},
    {"vsock", "open a vsock socket", case_vsock},
    {"netlink-other", "open non-routing netlink sockets", case_netlink_other},
    {"net-ifaces", "see network interfaces other than lo", case_net_ifaces},
    {"reach-host-loopback", "connect to the host's loopback services", case_reach_host_loopback},
    {"reach-metadata", "connect to the cloud metadata service", case_reach_metadata},
    {"reach-internet", "connect out directly, around the gate", case_reach_internet},
    {"caps-check", "hold any capability", case_caps_check},
    {"no-new-privs", "run without no_new_privs", case_no_new_privs},
    {"seccomp-mode", "run without a seccomp filter", case_seccomp_mode},
    {"setuid-0", "become uid 0 of the host", case_setuid_0},
    {"leaked-fds", "inherit file descriptors from the host", case_leaked_fds},
    {"env-secrets", "inherit credentials through the environment", case_env_secrets},
};

int main(int argc, char **argv)
{
        if (argc == 2 && strcmp(argv[1], "--list") == 0) {
                for (size_t i = 0; i < ARRAY_SIZE(cases); i++)
                        printf("%s\n", cases[i].name);
                return 0;
        }
        if (argc < 2) {
                fprintf(stderr, "usage: %s CASE [ARG...] | --list\n", argv[0]);
                return USAGE;
        }
        for (size_t i = 0; i < ARRAY_SIZE(cases); i++) {
                if (strcmp(argv[1], cases[i].name) != 0)
                        continue;
                case_argc = argc - 2;
                case_argv = argv + 2;
                int r = cases[i].fn();
                printf("%s: %s: %s (%s)\n", cases[i].name, cases[i].what,
                       r == BLOCKED ? "blocked" : "ESCAPED", detail);
                fflush(stdout);
                return r;
        }
        fprintf(stderr, "%s: unknown case \"%s\" (--list shows them)\n", argv[0], argv[1]);
        return USAGE;
}
