/* SPDX-License-Identifier: Apache-2.0 */
#include <criterion/criterion.h>
#include <errno.h>
#include <fcntl.h>
#include <linux/netlink.h>
#include <pthread.h>
#include <sched.h>
#include <signal.h>
#include <string.h>
#include <dirent.h>
#include <stdint.h>
#include <sys/ioctl.h>
#include <sys/stat.h>
#include <sys/sysmacros.h>
#include <sys/mount.h>
#include <sys/personality.h>
#include <sys/prctl.h>
#include <sys/ptrace.h>
#include <sys/socket.h>
#include <sys/syscall.h>
#include <sys/uio.h>
#include <sys/wait.h>
#include <unistd.h>

#include "seccomp.h"
#include "util.h"

/* Each attempt runs in a forked child under the filter and reports 0 for
 * success or the errno it got, through the child's exit status. Arguments
 * are chosen so that the call would fail harmlessly even without a filter
 * (missing paths, /dev/null instead of a terminal), so a broken filter shows
 * up as a wrong errno rather than as a changed host. */
typedef int (*attempt_fn)(void);

#define EXIT_INSTALL_FAILED 250

static int run_filtered(attempt_fn fn)
{
        int p[2];
        cr_assert_eq(pipe2(p, O_CLOEXEC), 0);
        pid_t pid = fork();
        cr_assert_geq(pid, 0, "fork: %s", strerror(errno));
        if (pid == 0) {
                struct al_error err = {0};
                close(p[0]);
                if (prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) < 0 || seccomp_install(&err) < 0) {
                        (void)!write(p[1], err.msg, strlen(err.msg));
                        _exit(EXIT_INSTALL_FAILED);
                }
                _exit(fn());
        }
        close(p[1]);
        char msg[AL_ERROR_MAX] = "";
        ssize_t n = read(p[0], msg, sizeof(msg) - 1);
        close(p[0]);
        int status = 0;
        cr_assert_eq(waitpid(pid, &status, 0), pid);
        cr_assert(!WIFEXITED(status) || WEXITSTATUS(status) != EXIT_INSTALL_FAILED,
                  "installing the filter failed: %s", n > 0 ? msg : "(no message)");
        return status;
}

static int result(long r)
{
        return r < 0 ? errno : 0;
}

#define expect_errno(fn, want)                                                                     \
        do {                                                                                       \
                int _st = run_filtered(fn);                                                        \
                cr_assert(WIFEXITED(_st), #fn ": child died with signal %d", WTERMSIG(_st));       \
                cr_assert_eq(WEXITSTATUS(_st), (want), #fn ": got %s (%d), want %s",               \
                             strerror(WEXITSTATUS(_st)), WEXITSTATUS(_st), strerror(want));        \
        } while (0)

#define expect_ok(fn) expect_errno(fn, 0)

/* Refused calls. */

static int try_mount(void)
{
        return result(mount("none", "/nonexistent-airlock-test", "tmpfs", 0, NULL));
}

static int try_umount(void)
{
        return result(umount2("/nonexistent-airlock-test", MNT_DETACH));
}

static int try_pivot_root(void)
{
        return result(syscall(SYS_pivot_root, "/nonexistent-a", "/nonexistent-b"));
}

static int try_open_tree(void)
{
        return result(syscall(SYS_open_tree, AT_FDCWD, "/nonexistent-airlock-test", 0));
}

static int try_fsopen(void)
{
        return result(syscall(SYS_fsopen, "tmpfs", 0));
}

static int try_chroot(void)
{
        return result(chroot("/nonexistent-airlock-test"));
}

Test(seccomp, mount_family_refused)
{
        expect_errno(try_mount, EPERM);
        expect_errno(try_umount, EPERM);
        expect_errno(try_pivot_root, EPERM);
        expect_errno(try_open_tree, EPERM);
        expect_errno(try_fsopen, EPERM);
        expect_errno(try_chroot, EPERM);
}

static int try_unshare_user(void)
{
        return result(unshare(CLONE_NEWUSER));
}

static int try_unshare_ns(void)
{
        return result(unshare(CLONE_NEWNS));
}

static int try_unshare_net(void)
{
        return result(unshare(CLONE_NEWNET));
}

static int try_unshare_time(void)
{
        return result(unshare(0x80 /* CLONE_NEWTIME */));
}

static int try_clone_newuser(void)
{
        long r = syscall(SYS_clone, CLONE_NEWUSER | SIGCHLD, 0, 0, 0, 0);
        if (r == 0)
                _exit(0);
        if (r > 0)
                waitpid((pid_t)r, NULL, 0);
        return result(r);
}

static int try_clone_newpid(void)
{
        long r = syscall(SYS_clone, CLONE_NEWPID | SIGCHLD, 0, 0, 0, 0);
        if (r == 0)
                _exit(0);
        if (r > 0)
                waitpid((pid_t)r, NULL, 0);
        return result(r);
}

struct clone3_args {
        uint64_t flags, pidfd, child_tid, parent_tid, exit_signal, stack, stack_size, tls;
};

static int try_clone3(void)
{
        struct clone3_args args = {.exit_signal = SIGCHLD};
        long r = syscall(SYS_clone3, &args, sizeof(args));
        if (r == 0)
                _exit(0);
        if (r > 0)
                waitpid((pid_t)r, NULL, 0);
        return result(r);
}

static int try_setns(void)
{
        int fd = open("/proc/self/ns/user", O_RDONLY | O_CLOEXEC);
        if (fd < 0)
                return 99;
        return result(setns(fd, 0));
}

Test(seccomp, namespaces_refused)
{
        expect_errno(try_unshare_user, EPERM);
        expect_errno(try_unshare_ns, EPERM);
        expect_errno(try_unshare_net, EPERM);
        expect_errno(try_unshare_time, EPERM);
        expect_errno(try_clone_newuser, EPERM);
        expect_errno(try_clone_newpid, EPERM);
        expect_errno(try_clone3, ENOSYS);
        expect_errno(try_setns, EPERM);
}

static int try_ptrace_traceme(void)
{
        return result(ptrace(PTRACE_TRACEME, 0, NULL, NULL));
}

static int try_process_vm_readv(void)
{
        char buf[8], src[8] = "x";
        struct iovec local = {buf, sizeof(buf)}, remote = {src, sizeof(src)};
        return result(process_vm_readv(getppid(), &local, 1, &remote, 1, 0));
}

static int try_keyctl(void)
{
        return result(syscall(SYS_keyctl, 0 /* KEYCTL_GET_KEYRING_ID */, -3, 0));
}

static int try_add_key(void)
{
        return result(syscall(SYS_add_key, "user", "airlock", "x", 1, -3));
}

static int try_bpf(void)
{
        return result(syscall(SYS_bpf, 0, NULL, 0));
}

static int try_perf_event_open(void)
{
        return result(syscall(SYS_perf_event_open, NULL, 0, -1, -1, 0));
}

static int try_userfaultfd(void)
{
        return result(syscall(SYS_userfaultfd, O_CLOEXEC));
}

static int try_io_uring_setup(void)
{
        char params[120] = {0};
        return result(syscall(SYS_io_uring_setup, 1, params));
}

static int try_finit_module(void)
{
        return result(syscall(SYS_finit_module, -1, "", 0));
}

static int try_open_by_handle_at(void)
{
        char handle[16] = {0};
        return result(syscall(SYS_open_by_handle_at, AT_FDCWD, handle, O_RDONLY));
}

static int try_personality(void)
{
        return result(personality(READ_IMPLIES_EXEC));
}

Test(seccomp, kernel_surface_refused)
{
        expect_errno(try_ptrace_traceme, EPERM);
        expect_errno(try_process_vm_readv, EPERM);
        expect_errno(try_keyctl, EPERM);
        expect_errno(try_add_key, EPERM);
        expect_errno(try_bpf, EPERM);
        expect_errno(try_perf_event_open, EPERM);
        expect_errno(try_userfaultfd, EPERM);
        expect_errno(try_io_uring_setup, EPERM);
        expect_errno(try_finit_module, EPERM);
        expect_errno(try_open_by_handle_at, EPERM);
        expect_errno(try_personality, EPERM);
}

/* /dev/null is no terminal: without the filter these fail with ENOTTY. */
static int ioctl_devnull(unsigned long request)
{
        int fd = open("/dev/null", O_RDWR | O_CLOEXEC);
        if (fd < 0)
                return 99;
        char c = 'x';
        return result(syscall(SYS_ioctl, fd, request, &c));
}

static int try_tiocsti(void)
{
        return ioctl_devnull(TIOCSTI);
}

static int try_tiocsti_high_bits(void)
{
        return ioctl_devnull(0x100000000UL | TIOCSTI);
}

static int try_tioclinux(void)
{
        return ioctl_devnull(TIOCLINUX);
}

static int try_tioclinux_high_bits(void)
{
        return ioctl_devnull(0xffffffff00000000UL | TIOCLINUX);
}

static int try_tcgets(void)
{
        return ioctl_devnull(TCGETS);
}

static int try_fionread(void)
{
        int p[2], n = -1;
        if (pipe2(p, O_CLOEXEC) < 0)
                return 99;
        if (write(p[1], "abc", 3) != 3)
                return 98;
        if (ioctl(p[0], FIONREAD, &n) < 0)
                return errno;
        return n == 3 ? 0 : 97;
}

Test(seccomp, ioctl)
{
        expect_errno(try_tiocsti, EPERM);
        expect_errno(try_tiocsti_high_bits, EPERM);
        expect_errno(try_tioclinux, EPERM);
        expect_errno(try_tioclinux_high_bits, EPERM);
        expect_errno(try_tcgets, ENOTTY);
        expect_ok(try_fionread);
}

static int socket_result(long domain, long type, long protocol)
{
        long fd = syscall(SYS_socket, domain, type, protocol);
        return result(fd);
}

static int try_packet(void)
{
        return socket_result(AF_PACKET, SOCK_RAW, 0);
}

static int try_packet_high_bits(void)
{
        return socket_result((1L << 32) | AF_PACKET, SOCK_RAW, 0);
}

static int try_vsock(void)
{
        return socket_result(AF_VSOCK, SOCK_STREAM, 0);
}

static int try_alg(void)
{
        return socket_result(AF_ALG, SOCK_SEQPACKET, 0);
}

static int try_raw_inet(void)
{
        return socket_result(AF_INET, SOCK_RAW, 1 /* ICMP */);
}

static int try_raw_inet_flags(void)
{
        return socket_result(AF_INET, SOCK_RAW | SOCK_CLOEXEC | SOCK_NONBLOCK, 1);
}

static int try_raw_inet6(void)
{
        return socket_result(AF_INET6, SOCK_RAW, 58 /* ICMPv6 */);
}

static int try_inet_packet(void)
{
        return socket_result(AF_INET, SOCK_PACKET, 0);
}

static int try_netlink_audit(void)
{
        return socket_result(AF_NETLINK, SOCK_RAW, NETLINK_AUDIT);
}

static int try_tcp(void)
{
        return socket_result(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
}

static int try_tcp_high_bits(void)
{
        return socket_result((1L << 32) | AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
}

static int try_udp6(void)
{
        return socket_result(AF_INET6, SOCK_DGRAM | SOCK_NONBLOCK, 0);
}

static int try_unix(void)
{
        return socket_result(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC, 0);
}

static int try_socketpair(void)
{
        int sv[2];
        return result(socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, sv));
}

static int try_netlink_route(void)
{
        return socket_result(AF_NETLINK, SOCK_RAW | SOCK_CLOEXEC, NETLINK_ROUTE);
}

Test(seccomp, sockets)
{
        expect_errno(try_packet, EAFNOSUPPORT);
        expect_errno(try_packet_high_bits, EAFNOSUPPORT);
        expect_errno(try_vsock, EAFNOSUPPORT);
        expect_errno(try_alg, EAFNOSUPPORT);
        expect_errno(try_raw_inet, EPERM);
        expect_errno(try_raw_inet_flags, EPERM);
        expect_errno(try_raw_inet6, EPERM);
        expect_errno(try_inet_packet, EPERM);
        expect_errno(try_netlink_audit, EPERM);
        expect_ok(try_tcp);
        expect_ok(try_tcp_high_bits);
        expect_ok(try_udp6);
        expect_ok(try_unix);
        expect_ok(try_socketpair);
        expect_ok(try_netlink_route);
}

/* Allowed calls. */

static int run_command(char *const argv[])
{
        pid_t pid = fork();
        if (pid < 0)
                return errno;
        if (pid == 0) {
                int fd = open("/dev/null", O_WRONLY | O_CLOEXEC);
                if (fd >= 0) {
                        dup2(fd, STDOUT_FILENO);
                        dup2(fd, STDERR_FILENO);
                }
                execv(argv[0], argv);
                _exit(127);
        }
        int status;
        if (waitpid(pid, &status, 0) < 0)
                return errno;
        if (!WIFEXITED(status))
                return 96;
        return WEXITSTATUS(status) == 0 ? 0 : 95;
}

static int try_exec_true(void)
{
        return run_command((char *const[]){"/bin/true", NULL});
}

static int try_shell_pipeline(void)
{
        return run_command((char *const[]){
            "/bin/sh", "-c",
            "set -e; d=$(mktemp -d); echo hi > $d/f; ls -la / | sort | head -n 3 >/dev/null; "
            "test \"$(cat $d/f | tr a-z A-Z)\" = HI; rm -r $d",
            NULL});
}

static int try_python(void)
{
        if (access("/usr/bin/python3", X_OK) < 0)
                return 0;
        return run_command((char *const[]){
            "/usr/bin/python3", "-c",
            "import socket, subprocess, threading, asyncio, multiprocessing.pool, tempfile\n"
            "t = threading.Thread(target=lambda: None); t.start(); t.join()\n"
            "assert subprocess.run(['/bin/true']).returncode == 0\n"
            "s = socket.socket(); s.bind(('127.0.0.1', 0)); s.close()\n"
            "asyncio.run(asyncio.sleep(0))\n"
            "with tempfile.TemporaryDirectory() as d: open(d + '/x', 'w').write('x')\n",
            NULL});
}

static void *thread_main(void *arg)
{
        return arg;
}

static int try_thread(void)
{
        pthread_t t;
        int r = pthread_create(&t, NULL, thread_main, NULL);
        if (r != 0)
                return r;
        return pthread_join(t, NULL);
}

static int try_unshare_none(void)
{
        return result(unshare(0));
}

static int try_unshare_files(void)
{
        return result(unshare(CLONE_FILES | CLONE_FS));
}

static int try_personality_query(void)
{
        return personality(0xffffffff) < 0 ? errno : 0;
}

Test(seccomp, userland_still_works)
{
        expect_ok(try_exec_true);
        expect_ok(try_shell_pipeline);
        expect_ok(try_python);
        expect_ok(try_thread);
        expect_ok(try_unshare_none);
        expect_ok(try_unshare_files);
        expect_ok(try_personality_query);
}

/* Syscalls of another ABI: x32 shares the x86-64 audit arch and differs only
 * by __X32_SYSCALL_BIT in the number, so the filter must look at it. */
#if defined(__x86_64__)
static int try_x32(void)
{
        return result(syscall(0x40000000L | SYS_getpid));
}

Test(seccomp, x32_killed)
{
        int st = run_filtered(try_x32);
        cr_assert(WIFSIGNALED(st), "x32 syscall not killed (exit %d)", WEXITSTATUS(st));
        cr_assert_eq(WTERMSIG(st), SIGSYS);
}
#endif

/* The filter relies on the caller's no_new_privs and must refuse to run
 * without it rather than set it behind the caller's back. */
Test(seccomp, requires_no_new_privs)
{
        pid_t pid = fork();
        cr_assert_geq(pid, 0);
        if (pid == 0) {
                struct al_error err = {0};
                int r = seccomp_install(&err);
                if (r >= 0)
                        _exit(1);
                if (prctl(PR_GET_NO_NEW_PRIVS, 0, 0, 0, 0) != 0)
                        _exit(2);
                if (!strstr(err.msg, "no_new_privs"))
                        _exit(3);
                _exit(0);
        }
        int st;
        cr_assert_eq(waitpid(pid, &st, 0), pid);
        cr_assert(WIFEXITED(st));
        cr_assert_eq(WEXITSTATUS(st), 0, "step %d", WEXITSTATUS(st));
}

/* Set-id bits, whatever call would set them: a file made inside lands on the
 * host. Each attempt works in a fresh directory made before the fork. */
static char mode_dir[64];

static const char *in_dir(const char *name)
{
        /* Two at a time: rename takes a pair. */
        static char path[2][128];
        static unsigned next;
        char *p = path[next++ % 2];
        snprintf(p, sizeof(path[0]), "%s/%s", mode_dir, name);
        return p;
}

static int make_plain(const char *name)
{
        int fd = open(in_dir(name), O_CREAT | O_WRONLY | O_CLOEXEC, 0755);
        if (fd < 0)
                return -1;
        close(fd);
        return 0;
}

static int try_chmod_suid(void)
{
        return make_plain("a") < 0 ? 200 : result(chmod(in_dir("a"), 04755));
}

static int try_chmod_sgid_high_bits(void)
{
        /* umode_t drops the high bits: 0x10000 must not hide the bit. */
        return make_plain("b") < 0 ? 200 : result(syscall(SYS_chmod, in_dir("b"), 0x10000L | 02755));
}

static int try_chmod_plain(void)
{
        return make_plain("c") < 0 ? 200 : result(chmod(in_dir("c"), 01777));
}

static int try_fchmod_suid(void)
{
        int fd = open(in_dir("d"), O_CREAT | O_WRONLY | O_CLOEXEC, 0644);
        return fd < 0 ? 200 : result(fchmod(fd, 06755));
}

static int try_fchmodat_suid(void)
{
        return make_plain("e") < 0 ? 200 : result(syscall(SYS_fchmodat, AT_FDCWD, in_dir("e"), 04755));
}

static int try_fchmodat2_suid(void)
{
        return make_plain("f") < 0 ? 200 : result(syscall(452, AT_FDCWD, in_dir("f"), 04755, 0));
}

static int try_open_creat_suid(void)
{
        return result(open(in_dir("g"), O_CREAT | O_WRONLY | O_CLOEXEC, 04755));
}

static int try_openat_creat_sgid(void)
{
        return result(syscall(SYS_openat, AT_FDCWD, in_dir("h"), O_CREAT | O_WRONLY, 02755));
}

static int try_open_tmpfile_suid(void)
{
        return result(open(mode_dir, O_TMPFILE | O_WRONLY | O_CLOEXEC, 04755));
}

static int try_open_no_create_junk_mode(void)
{
        /* Without O_CREAT the mode is not read: no reason to refuse. */
        return result(syscall(SYS_openat, AT_FDCWD, "/dev/null", O_RDONLY | O_CLOEXEC, 07777));
}

static int try_creat_suid(void)
{
        return result(syscall(SYS_creat, in_dir("i"), 04755));
}

static int try_openat2(void)
{
        struct {
                uint64_t flags, mode, resolve;
        } how = {.flags = O_CREAT | O_WRONLY, .mode = 04755};
        return result(syscall(SYS_openat2, AT_FDCWD, in_dir("j"), &how, sizeof(how)));
}

static int try_mkdir_sgid(void)
{
        return result(mkdir(in_dir("k"), 02755));
}

static int try_mkdirat_plain(void)
{
        return result(syscall(SYS_mkdirat, AT_FDCWD, in_dir("l"), 0755));
}

static int try_mknod_chr(void)
{
        return result(mknod(in_dir("m"), S_IFCHR | 0666, makedev(1, 3)));
}

static int try_mknodat_blk(void)
{
        return result(syscall(SYS_mknodat, AT_FDCWD, in_dir("n"), S_IFBLK | 0666, makedev(7, 0)));
}

static int try_mknod_reg_suid(void)
{
        return result(mknod(in_dir("o"), S_IFREG | 04755, 0));
}

static int try_mknod_fifo(void)
{
        return result(mknod(in_dir("p"), S_IFIFO | 0644, 0));
}

static int try_mknod_reg(void)
{
        return result(mknod(in_dir("q"), 0644, 0));
}

static int try_rename_whiteout(void)
{
        if (make_plain("r") < 0)
                return 200;
        return result(syscall(SYS_renameat2, AT_FDCWD, in_dir("r"), AT_FDCWD, in_dir("s"),
                              4 /* RENAME_WHITEOUT */));
}

static int try_rename_noreplace(void)
{
        if (make_plain("t") < 0)
                return 200;
        return result(syscall(SYS_renameat2, AT_FDCWD, in_dir("t"), AT_FDCWD, in_dir("u"),
                              1 /* RENAME_NOREPLACE */));
}

Test(seccomp, setid_modes_refused)
{
        snprintf(mode_dir, sizeof(mode_dir), "/tmp/airlock-test-seccomp-XXXXXX");
        cr_assert_not_null(mkdtemp(mode_dir));

        expect_errno(try_chmod_suid, EPERM);
        expect_errno(try_chmod_sgid_high_bits, EPERM);
        expect_errno(try_fchmod_suid, EPERM);
        expect_errno(try_fchmodat_suid, EPERM);
        expect_errno(try_fchmodat2_suid, EPERM);
        expect_errno(try_open_creat_suid, EPERM);
        expect_errno(try_openat_creat_sgid, EPERM);
        expect_errno(try_open_tmpfile_suid, EPERM);
        expect_errno(try_creat_suid, EPERM);
        expect_errno(try_openat2, ENOSYS);
        expect_errno(try_mkdir_sgid, EPERM);
        expect_errno(try_mknod_chr, EPERM);
        expect_errno(try_mknodat_blk, EPERM);
        expect_errno(try_mknod_reg_suid, EPERM);
        expect_errno(try_rename_whiteout, EPERM);

        expect_ok(try_chmod_plain);
        expect_ok(try_open_no_create_junk_mode);
        expect_ok(try_mkdirat_plain);
        expect_ok(try_mknod_fifo);
        expect_ok(try_mknod_reg);
        expect_ok(try_rename_noreplace);

        /* Nothing set-id was made behind the refusals. */
        DIR *d = opendir(mode_dir);
        cr_assert_not_null(d);
        struct dirent *de;
        while ((de = readdir(d))) {
                struct stat st;
                if (de->d_name[0] == '.')
                        continue;
                cr_assert_eq(fstatat(dirfd(d), de->d_name, &st, AT_SYMLINK_NOFOLLOW), 0);
                cr_assert_eq(st.st_mode & (S_ISUID | S_ISGID), 0, "%s: mode %o", de->d_name,
                             st.st_mode);
                cr_assert(!S_ISCHR(st.st_mode) && !S_ISBLK(st.st_mode), "%s is a device",
                          de->d_name);
                if (S_ISDIR(st.st_mode))
                        unlinkat(dirfd(d), de->d_name, AT_REMOVEDIR);
                else
                        unlinkat(dirfd(d), de->d_name, 0);
        }
        closedir(d);
        rmdir(mode_dir);
}
