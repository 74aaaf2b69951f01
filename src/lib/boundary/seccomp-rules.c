/* SPDX-License-Identifier: Apache-2.0 */
#include <errno.h>
#include <fcntl.h>
#include <linux/fs.h>
#include <linux/netlink.h>
#include <sched.h>
#include <stdint.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/prctl.h>
#include <sys/socket.h>
#include <sys/stat.h>

#define AIRLOCK_SECCOMP_IMPL
#include <seccomp.h> /* ours, then libseccomp's: see seccomp.h */
#include "seccomp-rules.h"
#include "util.h"

#ifndef SCMP_VER_MAJOR
#error "libseccomp's seccomp.h was not included"
#endif

#ifndef CLONE_NEWTIME
#define CLONE_NEWTIME 0x00000080
#endif

/* Every flag that creates a namespace. A new user namespace is the door to
 * most kernel attack surface (CVE-2022-0185, CVE-2023-32233 and many more
 * need CAP_SYS_ADMIN in some user namespace); the others are refused too, so
 * that the sandbox's view of the system cannot be rearranged from inside. */
#define NS_FLAGS_CLONE                                                                             \
        (CLONE_NEWNS | CLONE_NEWCGROUP | CLONE_NEWUTS | CLONE_NEWIPC | CLONE_NEWUSER |             \
         CLONE_NEWPID | CLONE_NEWNET)
#if defined(__s390__)
#error "clone takes its flags as the second argument on s390; adjust the clone rule"
#endif

/* For clone() the low byte is the exit signal; CLONE_NEWTIME only means
 * something to unshare() and clone3(). */
#define NS_FLAGS_UNSHARE (NS_FLAGS_CLONE | CLONE_NEWTIME)

/* What a normal userland needs. Names that do not exist on the running
 * architecture are skipped. Everything not listed here or handled below
 * fails with EPERM. */
/* clang-format off */
static const char *const allowed_syscalls[] = {
        /* files and directories */
        "read", "write", "readv", "writev", "pread64", "pwrite64", "preadv", "pwritev", "preadv2",
        "pwritev2", "close", "close_range", "lseek",
        "_llseek", "dup", "dup2", "dup3", "fcntl", "fcntl64", "flock", "fsync", "fdatasync", "sync",
        "syncfs", "sync_file_range", "truncate", "truncate64", "ftruncate", "ftruncate64",
        "fallocate", "fadvise64", "fadvise64_64", "readahead", "sendfile", "sendfile64",
        "copy_file_range", "splice", "tee", "vmsplice", "stat", "stat64", "lstat", "lstat64",
        "fstat", "fstat64", "newfstatat", "fstatat64", "statx", "statfs", "statfs64", "fstatfs",
        "fstatfs64", "access", "faccessat", "faccessat2", "readlink", "readlinkat", "getdents",
        "getdents64", "getcwd", "chdir", "fchdir", "rmdir",
        "link", "linkat", "symlink", "symlinkat", "unlink", "unlinkat", "rename", "renameat",
        "chown", "fchown", "lchown",
        "fchownat", "chown32", "fchown32", "lchown32", "umask", "utime", "utimes", "utimensat",
        "futimesat", "getxattr", "lgetxattr", "fgetxattr", "setxattr", "lsetxattr", "fsetxattr",
        "listxattr", "llistxattr", "flistxattr", "removexattr", "lremovexattr", "fremovexattr",
        "inotify_init", "inotify_init1", "inotify_add_watch", "inotify_rm_watch", "memfd_create",
        "memfd_secret", "cachestat",
        /* asynchronous I/O (the old interface; io_uring is refused) */
        "io_setup", "io_destroy", "io_submit", "io_cancel", "io_getevents", "io_pgetevents",
        "ioprio_get", "ioprio_set",
        /* polling, pipes, event fds */
        "pipe", "pipe2", "select", "_newselect", "pselect6", "poll", "ppoll", "epoll_create",
        "epoll_create1", "epoll_ctl", "epoll_ctl_old", "epoll_wait", "epoll_wait_old",
        "epoll_pwait", "epoll_pwait2", "eventfd", "eventfd2", "signalfd", "signalfd4",
        "timerfd_create", "timerfd_settime", "timerfd_gettime",
        /* memory */
        "brk", "mmap", "mmap2", "munmap", "mremap", "mprotect", "msync", "mincore", "madvise",
        "mlock", "mlock2", "munlock", "mlockall", "munlockall", "remap_file_pages", "membarrier",
        "pkey_alloc", "pkey_free", "pkey_mprotect", "get_mempolicy", "set_mempolicy",
        "map_shadow_stack", "mseal",
        /* processes and threads */
        "fork", "vfork", "execve", "execveat", "exit", "exit_group", "wait4", "waitid", "getpid",
        "getppid", "gettid", "getpgid", "setpgid", "getpgrp", "getsid", "setsid", "set_tid_address",
        "set_robust_list", "get_robust_list", "futex", "futex_waitv", "futex_wake", "futex_wait",
        "futex_requeue", "rseq", "arch_prctl", "set_thread_area", "get_thread_area", "prctl",
        "capget", "capset", "getpriority", "setpriority", "sched_yield", "sched_getaffinity",
        "sched_setaffinity", "sched_getparam", "sched_setparam", "sched_getscheduler",
        "sched_setscheduler", "sched_getattr", "sched_setattr", "sched_get_priority_max",
        "sched_get_priority_min", "sched_rr_get_interval", "getcpu", "getrlimit", "ugetrlimit",
        "setrlimit", "getrusage", "times", "pidfd_open", "pidfd_send_signal",
        "process_mrelease", "restart_syscall",
        /* credentials (inside the user namespace, without capabilities) */
        "getuid", "geteuid", "getgid", "getegid", "getresuid", "getresgid", "getgroups", "setuid",
        "setgid", "setreuid", "setregid", "setresuid", "setresgid", "setgroups", "setfsuid",
        "setfsgid", "getuid32", "geteuid32", "getgid32", "getegid32", "getresuid32", "getresgid32",
        "getgroups32", "setuid32", "setgid32", "setreuid32", "setregid32", "setresuid32",
        "setresgid32", "setgroups32", "setfsuid32", "setfsgid32",
        /* signals */
        "rt_sigaction", "rt_sigprocmask", "rt_sigreturn", "sigreturn", "rt_sigpending",
        "rt_sigsuspend", "rt_sigtimedwait", "rt_sigqueueinfo", "rt_tgsigqueueinfo", "sigaltstack",
        "kill", "tkill", "tgkill", "pause", "alarm",
        /* time */
        "nanosleep", "clock_nanosleep", "clock_gettime", "clock_getres", "gettimeofday", "time",
        "getitimer", "setitimer", "timer_create", "timer_settime", "timer_gettime",
        "timer_getoverrun", "timer_delete",
        /* sockets (socket and socketpair are checked below) */
        "bind", "connect", "listen", "accept", "accept4", "getsockname", "getpeername", "sendto",
        "recvfrom", "sendmsg", "recvmsg", "sendmmsg", "recvmmsg", "shutdown", "setsockopt",
        "getsockopt", "send", "recv",
        /* System V and POSIX IPC, private to the sandbox's IPC namespace */
        "shmget", "shmat", "shmdt", "shmctl", "semget", "semop", "semtimedop", "semctl", "msgget",
        "msgsnd", "msgrcv", "msgctl", "mq_open", "mq_unlink", "mq_timedsend", "mq_timedreceive",
        "mq_notify", "mq_getsetattr",
        /* system information */
        "uname", "sysinfo", "getrandom",
        /* further restriction of oneself is always fine */
        "seccomp", "landlock_create_ruleset", "landlock_add_rule", "landlock_restrict_self",
};
/* clang-format on */

/* Checked below, on their mode argument: open, openat, creat, chmod, fchmod,
 * fchmodat, fchmodat2, mkdir, mkdirat, mknod, mknodat; renameat2 on its
 * flags (no RENAME_WHITEOUT); openat2 answers ENOSYS. */

/* Left out on purpose, so refused with EPERM:
 *  - mounts: mount, umount2, pivot_root, move_mount, open_tree, fsopen,
 *    fsconfig, fsmount, fspick, mount_setattr, chroot;
 *  - other namespaces: setns (unshare and clone are checked below);
 *  - other processes' memory: ptrace, process_vm_readv/writev, kcmp,
 *    pidfd_getfd, process_madvise;
 *  - kernel keyrings, which are not namespaced (CVE-2016-0728): keyctl,
 *    add_key, request_key;
 *  - large kernel attack surface: bpf (CVE-2021-3490), perf_event_open
 *    (CVE-2013-2094), userfaultfd (the usual race widener), io_uring_*
 *    (CVE-2022-29582, CVE-2023-2598);
 *  - machine state: kexec_*, init_module, finit_module, delete_module, acct,
 *    swapon, swapoff, reboot, settimeofday, clock_settime, clock_adjtime,
 *    adjtimex, syslog, vhangup, quotactl, lookup_dcookie, nfsservctl,
 *    sethostname, setdomainname, iopl, ioperm, modify_ldt (CVE-2015-5157);
 *  - open_by_handle_at and name_to_handle_at: a file handle reaches any inode
 *    of the file system behind a bind mount (the 2014 "shocker" escape);
 *  - fanotify_*, mbind, migrate_pages, move_pages. */

/* Syscalls newer than some libseccomp releases know by name. From 424 on
 * the numbers are the same on every architecture but alpha. */
struct numbered_syscall {
        const char *name;
        int nr;
};

static const struct numbered_syscall numbered_syscalls[] = {
    {"cachestat", 451},    {"fchmodat2", 452},     {"map_shadow_stack", 453},
    {"futex_wake", 454},   {"futex_wait", 455},    {"futex_requeue", 456},
    {"mseal", 462},        {"setxattrat", 463},    {"getxattrat", 464},
    {"listxattrat", 465},  {"removexattrat", 466}, {"file_getattr", 468},
    {"file_setattr", 469},
};

static int resolve(const char *name)
{
        int nr = seccomp_syscall_resolve_name(name);
        if (nr != __NR_SCMP_ERROR)
                return nr;
#if !defined(__alpha__)
        for (size_t i = 0; i < ARRAY_SIZE(numbered_syscalls); i++)
                if (STREQ(numbered_syscalls[i].name, name))
                        return numbered_syscalls[i].nr;
#endif
        return __NR_SCMP_ERROR;
}

static int add_allowed(scmp_filter_ctx ctx, const char *const *names, size_t n,
                       struct al_error *err)
{
        for (size_t i = 0; i < n; i++) {
                int nr = resolve(names[i]);
                if (nr == __NR_SCMP_ERROR)
                        continue;
                int r = seccomp_rule_add(ctx, SCMP_ACT_ALLOW, nr, 0);
                if (r < 0)
                        return al_error_set(err, -r, "seccomp: adding rule for %s", names[i]);
        }
        return 0;
}

static int add_rule(scmp_filter_ctx ctx, uint32_t action, const char *name, unsigned n_cmp,
                    const struct scmp_arg_cmp *cmp, struct al_error *err)
{
        int nr = resolve(name);
        if (nr == __NR_SCMP_ERROR)
                return 0;
        int r = seccomp_rule_add_array(ctx, action, nr, n_cmp, cmp);
        if (r < 0)
                return al_error_set(err, -r, "seccomp: adding rule for %s", name);
        return 0;
}

/* Compare only the low 32 bits of an argument the kernel takes as an int:
 * the kernel drops the high bits, so a filter comparing all 64 would let
 * 0x100000000|TIOCSTI through as "not TIOCSTI". */
#define LOW32(arg, value) SCMP_CMP((arg), SCMP_CMP_MASKED_EQ, 0xffffffffULL, (uint32_t)(value))

/* Add rules that match every value of argument `arg` whose low 32 bits are
 * NOT in `excluded` (at most 32 * n rules). libseccomp has no masked
 * not-equal, and an unconditional rule on a syscall would swallow the
 * conditional ones, so the complement is spelled out as the branches of the
 * binary trie that lead away from the excluded values: each branch is one
 * masked equality on the bits above and including the branching bit. */
static int add_rules_except(scmp_filter_ctx ctx, uint32_t action, const char *name, unsigned arg,
                            const uint32_t *excluded, size_t n, int bit, uint32_t prefix,
                            struct al_error *err)
{
        uint32_t side[2][8];
        size_t count[2] = {0, 0};

        if (n > ARRAY_SIZE(side[0]))
                return al_error_set(err, EINVAL, "seccomp: too many excluded values for %s", name);
        for (size_t i = 0; i < n; i++) {
                unsigned b = (excluded[i] >> bit) & 1;
                side[b][count[b]++] = excluded[i];
        }
        for (unsigned b = 0; b < 2; b++) {
                uint32_t p = prefix | ((uint32_t)b << bit);
                int r;
                if (count[b] == 0) {
                        struct scmp_arg_cmp cmp =
                            SCMP_CMP(arg, SCMP_CMP_MASKED_EQ, (uint32_t)(~0U << bit), p);
                        r = add_rule(ctx, action, name, 1, &cmp, err);
                } else if (bit > 0) {
                        r = add_rules_except(ctx, action, name, arg, side[b], count[b], bit - 1, p,
                                             err);
                } else {
                        r = 0; /* an excluded value itself */
                }
                if (r < 0)
                        return r;
        }
        return 0;
}

/* TIOCSTI pushes bytes into a terminal's input queue: with the caller's
 * terminal that is command execution outside the sandbox (CVE-2016-7545,
 * CVE-2017-5226). TIOCLINUX can do the same through selection pasting on a
 * virtual console (CVE-2023-1523). Every other request is allowed; these two
 * fall through to the default EPERM. */
static int add_ioctl_rules(scmp_filter_ctx ctx, struct al_error *err)
{
        static const uint32_t refused[] = {TIOCSTI, TIOCLINUX};

        return add_rules_except(ctx, SCMP_ACT_ALLOW, "ioctl", 1, refused, ARRAY_SIZE(refused), 31,
                                0, err);
}

/* Families other than UNIX, IPv4, IPv6 and routing netlink answer
 * EAFNOSUPPORT, as if not built into the kernel. Within IPv4 and IPv6 only
 * stream, datagram and seqpacket sockets are allowed: raw and SOCK_PACKET
 * sockets forge packets, and link-level ones carry a history of kernel bugs
 * (CVE-2016-8655, CVE-2017-7308, CVE-2020-14386). What is not allowed falls
 * through to the default EPERM. */
static int add_socket_rules(scmp_filter_ctx ctx, struct al_error *err)
{
        static const uint32_t families[] = {AF_UNIX, AF_INET, AF_INET6, AF_NETLINK};
        static const uint32_t inet_families[] = {AF_INET, AF_INET6};
        static const uint32_t inet_types[] = {SOCK_STREAM, SOCK_DGRAM, SOCK_SEQPACKET};
        int r;

        r = add_rules_except(ctx, SCMP_ACT_ERRNO(EAFNOSUPPORT), "socket", 0, families,
                             ARRAY_SIZE(families), 31, 0, err);
        if (r < 0)
                return r;

        struct scmp_arg_cmp unix_cmp = LOW32(0, AF_UNIX);
        r = add_rule(ctx, SCMP_ACT_ALLOW, "socket", 1, &unix_cmp, err);
        if (r < 0)
                return r;
        r = add_rule(ctx, SCMP_ACT_ALLOW, "socketpair", 1, &unix_cmp, err);
        if (r < 0)
                return r;

        /* Only the routing family of netlink: addresses and routes of the
         * sandbox's own network namespace. */
        struct scmp_arg_cmp netlink_cmp[2] = {LOW32(0, AF_NETLINK), LOW32(2, NETLINK_ROUTE)};
        r = add_rule(ctx, SCMP_ACT_ALLOW, "socket", 2, netlink_cmp, err);
        if (r < 0)
                return r;

        /* The type argument carries SOCK_NONBLOCK and SOCK_CLOEXEC above
         * the low four bits that name the type. */
        for (size_t f = 0; f < ARRAY_SIZE(inet_families); f++) {
                for (size_t t = 0; t < ARRAY_SIZE(inet_types); t++) {
                        struct scmp_arg_cmp cmp[2] = {
                            LOW32(0, inet_families[f]),
                            SCMP_A1(SCMP_CMP_MASKED_EQ, 0xf, inet_types[t]),
                        };
                        r = add_rule(ctx, SCMP_ACT_ALLOW, "socket", 2, cmp, err);
                        if (r < 0)
                                return r;
                }
        }
        return 0;
}

/* What the agent writes lands on the host, and a workspace is often owned by
 * the caller (or idmapped onto its owner, root included): a setuid or setgid
 * file made inside would give its owner's privilege to any local user who
 * runs it afterwards. No capability is held inside, so ownership checks
 * cannot stop the owner of a file setting these bits; the filter refuses
 * them at every call that sets a mode. The kernel takes a mode as umode_t
 * and drops the high bits, so the masks look only at the bits that count.
 * File capabilities (security.capability) need CAP_SETFCAP and device nodes
 * CAP_MKNOD, both dropped; device types are refused here as well. */
#define SETID_BITS ((uint32_t)(S_ISUID | S_ISGID))
/* O_TMPFILE without the O_DIRECTORY it includes. */
#define CREATE_FLAGS ((uint32_t)(O_CREAT | (O_TMPFILE & ~O_DIRECTORY)))

static int add_mode_rules(scmp_filter_ctx ctx, struct al_error *err)
{
        /* Calls whose mode argument is always used: allowed when it has no
         * set-id bit, refused with the default EPERM otherwise. */
        static const struct {
                const char *name;
                unsigned mode_arg;
        } always[] = {
            {"chmod", 1}, {"fchmod", 1}, {"fchmodat", 2}, {"fchmodat2", 2},
            {"creat", 1}, {"mkdir", 1},  {"mkdirat", 2},
        };
        int r;

        for (size_t i = 0; i < ARRAY_SIZE(always); i++) {
                struct scmp_arg_cmp cmp =
                    SCMP_CMP(always[i].mode_arg, SCMP_CMP_MASKED_EQ, SETID_BITS, 0);
                r = add_rule(ctx, SCMP_ACT_ALLOW, always[i].name, 1, &cmp, err);
                if (r < 0)
                        return r;
        }

        /* open and openat read the mode only when creating: allowed when
         * they do not create, or when the mode has no set-id bit. */
        static const struct {
                const char *name;
                unsigned flags_arg, mode_arg;
        } opens[] = {{"open", 1, 2}, {"openat", 2, 3}};
        for (size_t i = 0; i < ARRAY_SIZE(opens); i++) {
                struct scmp_arg_cmp no_create =
                    SCMP_CMP(opens[i].flags_arg, SCMP_CMP_MASKED_EQ, CREATE_FLAGS, 0);
                struct scmp_arg_cmp no_setid =
                    SCMP_CMP(opens[i].mode_arg, SCMP_CMP_MASKED_EQ, SETID_BITS, 0);
                r = add_rule(ctx, SCMP_ACT_ALLOW, opens[i].name, 1, &no_create, err);
                if (r < 0)
                        return r;
                r = add_rule(ctx, SCMP_ACT_ALLOW, opens[i].name, 1, &no_setid, err);
                if (r < 0)
                        return r;
        }

        /* openat2 passes its mode in a struct a filter cannot read: refused
         * as "not implemented", so that callers fall back to openat. */
        r = add_rule(ctx, SCMP_ACT_ERRNO(ENOSYS), "openat2", 0, NULL, err);
        if (r < 0)
                return r;

        /* RENAME_WHITEOUT leaves a 0:0 character device behind the moved
         * name: a device node made by another call. */
        struct scmp_arg_cmp no_whiteout =
            SCMP_CMP(4, SCMP_CMP_MASKED_EQ, (uint32_t)RENAME_WHITEOUT, 0);
        r = add_rule(ctx, SCMP_ACT_ALLOW, "renameat2", 1, &no_whiteout, err);
        if (r < 0)
                return r;

        /* mknod: regular files, FIFOs and sockets without set-id bits (a
         * type of 0 means a regular file). Character and block devices are
         * refused whatever the capabilities. */
        static const uint32_t node_types[] = {0, S_IFREG, S_IFIFO, S_IFSOCK};
        static const struct {
                const char *name;
                unsigned mode_arg;
        } mknods[] = {{"mknod", 1}, {"mknodat", 2}};
        for (size_t i = 0; i < ARRAY_SIZE(mknods); i++)
                for (size_t t = 0; t < ARRAY_SIZE(node_types); t++) {
                        struct scmp_arg_cmp cmp =
                            SCMP_CMP(mknods[i].mode_arg, SCMP_CMP_MASKED_EQ,
                                     (uint32_t)S_IFMT | SETID_BITS, node_types[t]);
                        r = add_rule(ctx, SCMP_ACT_ALLOW, mknods[i].name, 1, &cmp, err);
                        if (r < 0)
                                return r;
                }
        return 0;
}

static int add_conditional_rules(scmp_filter_ctx ctx, struct al_error *err)
{
        int r;

        r = add_mode_rules(ctx, err);
        if (r < 0)
                return r;

        struct scmp_arg_cmp clone_cmp = SCMP_A0(SCMP_CMP_MASKED_EQ, NS_FLAGS_CLONE, 0);
        r = add_rule(ctx, SCMP_ACT_ALLOW, "clone", 1, &clone_cmp, err);
        if (r < 0)
                return r;

        struct scmp_arg_cmp unshare_cmp = SCMP_A0(SCMP_CMP_MASKED_EQ, NS_FLAGS_UNSHARE, 0);
        r = add_rule(ctx, SCMP_ACT_ALLOW, "unshare", 1, &unshare_cmp, err);
        if (r < 0)
                return r;

        /* clone3 passes its flags in memory a filter cannot read, so it is
         * refused as "not implemented" and libcs fall back to clone. */
        r = add_rule(ctx, SCMP_ACT_ERRNO(ENOSYS), "clone3", 0, NULL, err);
        if (r < 0)
                return r;

        /* prlimit64 sets only the caller's own limits (pid 0, as setrlimit
         * asks) and reads anyone's: another process of the sandbox user
         * could otherwise lower pid 1's, which every later command, of any
         * user inside, inherits. */
        struct scmp_arg_cmp own = LOW32(0, 0);
        r = add_rule(ctx, SCMP_ACT_ALLOW, "prlimit64", 1, &own, err);
        if (r < 0)
                return r;
        struct scmp_arg_cmp query = SCMP_A2(SCMP_CMP_EQ, 0);
        r = add_rule(ctx, SCMP_ACT_ALLOW, "prlimit64", 1, &query, err);
        if (r < 0)
                return r;

        /* Only the default persona and the query: other personas change
         * the address space layout (READ_IMPLIES_EXEC, ADDR_NO_RANDOMIZE). */
        static const uint32_t personas[] = {0 /* PER_LINUX */, 0xffffffff /* query */};
        for (size_t i = 0; i < ARRAY_SIZE(personas); i++) {
                struct scmp_arg_cmp cmp = LOW32(0, personas[i]);
                r = add_rule(ctx, SCMP_ACT_ALLOW, "personality", 1, &cmp, err);
                if (r < 0)
                        return r;
        }

        r = add_ioctl_rules(ctx, err);
        if (r < 0)
                return r;
        return add_socket_rules(ctx, err);
}

static void seccomp_releasep(scmp_filter_ctx *ctx)
{
        if (*ctx)
                seccomp_release(*ctx);
}

int seccomp_rules_build(scmp_filter_ctx *ret, struct al_error *err)
{
        _cleanup_(seccomp_releasep) scmp_filter_ctx ctx = NULL;
        int r;

        ctx = seccomp_init(SCMP_ACT_ERRNO(EPERM));
        if (!ctx)
                return al_error_set(err, ENOMEM, "seccomp: creating filter");

        /* Only the native architecture is in the filter. Syscalls of any
         * other ABI (i386 through int 0x80, x32 with __X32_SYSCALL_BIT, which
         * share AUDIT_ARCH_X86_64 and which libseccomp checks explicitly) take
         * the bad-arch action: their numbers mean different syscalls, so no
         * rule written for the native table can be trusted for them. */
        r = seccomp_attr_set(ctx, SCMP_FLTATR_ACT_BADARCH, SCMP_ACT_KILL_PROCESS);
        if (r < 0)
                return al_error_set(err, -r, "seccomp: setting the bad-arch action");
        r = seccomp_attr_set(ctx, SCMP_FLTATR_CTL_NNP, 0);
        if (r < 0)
                return al_error_set(err, -r, "seccomp: leaving no_new_privs to the caller");
        r = seccomp_attr_set(ctx, SCMP_FLTATR_API_SYSRAWRC, 1);
        if (r < 0)
                return al_error_set(err, -r, "seccomp: asking for raw error codes");
        /* A binary search over syscall numbers instead of a linear scan;
         * only speed depends on it, so a library without it is fine. */
        (void)seccomp_attr_set(ctx, SCMP_FLTATR_CTL_OPTIMIZE, 2);

        r = add_allowed(ctx, allowed_syscalls, ARRAY_SIZE(allowed_syscalls), err);
        if (r < 0)
                return r;
        r = add_conditional_rules(ctx, err);
        if (r < 0)
                return r;

        *ret = TAKE_PTR(ctx);
        return 0;
}
