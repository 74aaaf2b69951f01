/* SPDX-License-Identifier: Apache-2.0 */
#include <errno.h>
#include <fcntl.h>
#include <grp.h>
#include <linux/sched.h>
#include <net/if.h>
#include <netinet/in.h>
#include <sched.h>
#include <signal.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/mount.h>
#include <poll.h>
#include <sys/prctl.h>
#include <sys/resource.h>
#include <sys/signalfd.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/wait.h>

#include "cgroup.h"
#include "confine.h"
#include "idle.h"
#include "mounts.h"
#include "spawn.h"
#include "util.h"

const uint16_t spawn_listen_ports[SPAWN_LISTEN_MAX] = {3128, 1080, 8080};

enum sync_type {
        SYNC_GO = 1,    /* parent -> child: maps written */
        SYNC_CGROUP,    /* parent -> child: cgroup joined (v1) */
        SYNC_LISTENERS, /* child -> parent: gate listener fds attached */
        SYNC_UPPER,     /* child -> parent: the review layer's upper directory */
        SYNC_STARTED,   /* pid 1 -> parent: the command passed execve */
        SYNC_ERROR,     /* child or pid 1 -> parent: a step failed */
        SYNC_EXIT,      /* pid 1 -> parent: the command's wait status */
        SYNC_EXEC,      /* parent -> pid 1: start a process (idle sandboxes) */
        SYNC_KILL,      /* parent -> pid 1: signal a process's group */
};

struct sync_msg {
        uint32_t type;
        int32_t code;  /* errno */
        int32_t value; /* enum spawn_failure, or a wait status, or a signal */
        int32_t id;    /* the process, in an idle sandbox */
        uint64_t usage[3]; /* SYNC_EXIT: user ms, system ms, max RSS KiB */
        char text[AL_ERROR_MAX];
};

/* An exec request's payload after the header: u32 argc, u32 envc, then
 * NUL-terminated cwd, argv and env strings. */
#define EXEC_PAYLOAD_MAX (128 * 1024)

static int sync_send(int fd, uint32_t type, int code, int value, const char *text)
{
        struct sync_msg m = {.type = type, .code = code, .value = value};
        if (text)
                snprintf(m.text, sizeof(m.text), "%s", text);
        ssize_t n;
        do
                n = send(fd, &m, sizeof(m), MSG_NOSIGNAL);
        while (n < 0 && errno == EINTR);
        return n == (ssize_t)sizeof(m) ? 0 : -EIO;
}

static int sync_recv(int fd, struct sync_msg *m, int *fds, size_t max_fds, size_t *ret_nfds)
{
        char control[CMSG_SPACE(sizeof(int) * SPAWN_LISTEN_MAX)];
        struct iovec iov = {.iov_base = m, .iov_len = sizeof(*m)};
        struct msghdr mh = {.msg_iov = &iov, .msg_iovlen = 1,
                            .msg_control = control, .msg_controllen = sizeof(control)};
        ssize_t n;
        int resets = 0;
        /* A peer that exits with our message unread in its queue makes the
         * kernel report ECONNRESET once, ahead of what it sent us before:
         * read on to get its last report. */
        do
                n = recvmsg(fd, &mh, MSG_CMSG_CLOEXEC);
        while (n < 0 && (errno == EINTR || (errno == ECONNRESET && resets++ < 1)));
        if (n < 0)
                return -errno;
        if (n == 0)
                return -ECONNRESET;
        if (n != (ssize_t)sizeof(*m))
                return -EBADMSG;
        m->text[sizeof(m->text) - 1] = '\0';
        if (ret_nfds)
                *ret_nfds = 0;
        for (struct cmsghdr *c = CMSG_FIRSTHDR(&mh); c; c = CMSG_NXTHDR(&mh, c)) {
                if (c->cmsg_level != SOL_SOCKET || c->cmsg_type != SCM_RIGHTS)
                        continue;
                size_t k = (c->cmsg_len - CMSG_LEN(0)) / sizeof(int);
                int *in = (int *)CMSG_DATA(c);
                for (size_t i = 0; i < k; i++) {
                        if (fds && ret_nfds && *ret_nfds < max_fds)
                                fds[(*ret_nfds)++] = in[i];
                        else
                                close(in[i]);
                }
        }
        return 0;
}

static int send_fds(int sock, uint32_t type, const int *fds, size_t n)
{
        struct sync_msg m = {.type = type};
        char control[CMSG_SPACE(sizeof(int) * SPAWN_LISTEN_MAX)];
        memset(control, 0, sizeof(control));
        struct iovec iov = {.iov_base = &m, .iov_len = sizeof(m)};
        struct msghdr mh = {.msg_iov = &iov, .msg_iovlen = 1,
                            .msg_control = control, .msg_controllen = CMSG_SPACE(sizeof(int) * n)};
        struct cmsghdr *c = CMSG_FIRSTHDR(&mh);
        c->cmsg_level = SOL_SOCKET;
        c->cmsg_type = SCM_RIGHTS;
        c->cmsg_len = CMSG_LEN(sizeof(int) * n);
        memcpy(CMSG_DATA(c), fds, sizeof(int) * n);
        return sendmsg(sock, &mh, MSG_NOSIGNAL) < 0 ? -errno : 0;
}

const char *spawn_userns_disabled_reason(void)
{
        _cleanup_free_ char *s = NULL;
        if (read_file_at(AT_FDCWD, "/proc/sys/user/max_user_namespaces", 64, &s, NULL) >= 0 &&
            strncmp(s, "0\n", 2) == 0)
                return "user namespaces are disabled (sysctl user.max_user_namespaces = 0)";
        free(s);
        s = NULL;
        if (geteuid() != 0 &&
            read_file_at(AT_FDCWD, "/proc/sys/kernel/unprivileged_userns_clone", 64, &s, NULL) >= 0 &&
            strncmp(s, "0\n", 2) == 0)
                return "unprivileged user namespaces are disabled (sysctl "
                       "kernel.unprivileged_userns_clone = 0)";
        free(s);
        s = NULL;
        if (geteuid() != 0 &&
            read_file_at(AT_FDCWD, "/proc/sys/kernel/apparmor_restrict_unprivileged_userns", 64, &s,
                         NULL) >= 0 &&
            strncmp(s, "1\n", 2) == 0)
                return "AppArmor restricts unprivileged user namespaces (sysctl "
                       "kernel.apparmor_restrict_unprivileged_userns = 1)";
        return NULL;
}

/* True when the only supplementary group is the caller's own gid: nothing
 * more would go into the sandbox (a root inside a user namespace that denies
 * setgroups is in this case). */
static bool only_own_group(void)
{
        gid_t groups[64];
        int n = getgroups(ARRAY_SIZE(groups), groups);
        if (n < 0)
                return false;
        for (int i = 0; i < n; i++)
                if (groups[i] != getegid())
                        return false;
        return true;
}

static int write_proc(pid_t pid, const char *file, const char *content)
{
        char path[64];
        snprintf(path, sizeof(path), "/proc/%d/%s", (int)pid, file);
        return write_file_at(AT_FDCWD, path, content);
}

static int write_maps(pid_t pid, uid_t uid_in, uid_t uid_out, gid_t gid_in, gid_t gid_out,
                      bool deny_setgroups)
{
        char buf[64];
        snprintf(buf, sizeof(buf), "%u %u 1\n", (unsigned)uid_in, (unsigned)uid_out);
        int r = write_proc(pid, "uid_map", buf);
        if (r < 0)
                return r;
        if (deny_setgroups) {
                r = write_proc(pid, "setgroups", "deny");
                if (r < 0 && r != -ENOENT)
                        return r;
        }
        snprintf(buf, sizeof(buf), "%u %u 1\n", (unsigned)gid_in, (unsigned)gid_out);
        return write_proc(pid, "gid_map", buf);
}

static pid_t sys_clone3(struct clone_args *args)
{
        return (pid_t)syscall(SYS_clone3, args, sizeof(*args));
}

static pid_t idmap_helper = -1;

/* A user namespace that maps the host owner of a tree to the sandbox's host
 * uid, for an idmapped mount: files owned by the caller's workspace owner
 * look like the sandbox user's own, and what the sandbox creates lands on
 * disk as that owner. Only root can make idmapped mounts. */
static int idmap_userns(uid_t owner_uid, gid_t owner_gid, uid_t to_uid, gid_t to_gid)
{
        int pipefd[2];
        if (pipe2(pipefd, O_CLOEXEC) < 0)
                return -errno;
        struct clone_args args = {.flags = CLONE_NEWUSER, .exit_signal = SIGCHLD};
        pid_t pid = sys_clone3(&args);
        if (pid < 0) {
                int r = -errno;
                close(pipefd[0]);
                close(pipefd[1]);
                return r;
        }
        if (pid == 0) {
                char c;
                close(pipefd[1]);
                while (read(pipefd[0], &c, 1) < 0 && errno == EINTR)
                        ;
                _exit(0);
        }
        close(pipefd[0]);
        int r = write_maps(pid, owner_uid, to_uid, owner_gid, to_gid, false);
        int fd = -1;
        if (r >= 0) {
                char path[64];
                snprintf(path, sizeof(path), "/proc/%d/ns/user", (int)pid);
                fd = open(path, O_RDONLY | O_CLOEXEC);
                if (fd < 0)
                        r = -errno;
        }
        close(pipefd[1]);
        /* It exits as soon as it reads EOF; reap it without waiting when
         * it already has, else later (spawn_reap_helpers). */
        if (waitpid(pid, NULL, WNOHANG) == 0)
                idmap_helper = pid;
        return r < 0 ? r : fd;
}

/* For a root caller: in *ret_fd the tree at `path` as a detached mount
 * idmapped to the sandbox's host uid, or -1 when a plain bind will do.
 * Returns 0, or -errno when the mount cannot be used at all (then *ret_fd is
 * -1 too).
 *
 * The agent's files land as the tree's owner: bob's project stays bob's,
 * and a root-owned tree gets root-owned files. That is the least privilege
 * that keeps the tree usable: mapped onto any other uid, the agent could not
 * change the files it was given, and what it made would belong to an
 * account that other processes (other sandboxes run as the same unprivileged
 * uid) could alter later. Ownership carries no privilege out with it: the
 * seccomp filter refuses every set-id mode and device node, and no
 * capability survives inside, so no file capability can be set either
 * (tests/escape/test_setuid.py). */
static int prepare_idmapped(const char *path, uid_t host_uid, gid_t host_gid, int *ret_fd,
                            struct al_error *err)
{
        *ret_fd = -1;
        _cleanup_close_ int fd = open(path, O_PATH | O_NOFOLLOW | O_CLOEXEC);
        if (fd < 0)
                return al_error_set(err, errno, "mount %s", path);
        struct stat st;
        if (fstat(fd, &st) < 0)
                return al_error_set(err, errno, "mount %s", path);
        if (S_ISLNK(st.st_mode))
                return al_error_set(err, ELOOP, "mount %s: is a symbolic link; give its target",
                                    path);
        if (st.st_uid == host_uid)
                return 0;
        _cleanup_close_ int userns = idmap_userns(st.st_uid, st.st_gid, host_uid, host_gid);
        if (userns < 0)
                return 0; /* a plain bind: the sandbox then sees the tree as not its own */
        int mnt = open_tree(fd, "", OPEN_TREE_CLONE | OPEN_TREE_CLOEXEC | AT_EMPTY_PATH |
                                            AT_RECURSIVE);
        if (mnt < 0)
                return 0;
        struct mount_attr attr = {.attr_set = MOUNT_ATTR_IDMAP, .userns_fd = (uint64_t)userns};
        if (mount_setattr(mnt, "", AT_EMPTY_PATH | AT_RECURSIVE, &attr, sizeof(attr)) < 0 &&
            mount_setattr(mnt, "", AT_EMPTY_PATH, &attr, sizeof(attr)) < 0) {
                close(mnt);
                return 0; /* the filesystem cannot be idmapped */
        }
        *ret_fd = mnt;
        return 0;
}

static int loopback_up(void)
{
        _cleanup_close_ int s = socket(AF_INET, SOCK_DGRAM | SOCK_CLOEXEC, 0);
        if (s < 0)
                return -errno;
        struct ifreq ifr;
        memset(&ifr, 0, sizeof(ifr));
        snprintf(ifr.ifr_name, sizeof(ifr.ifr_name), "lo");
        if (ioctl(s, SIOCGIFFLAGS, &ifr) < 0)
                return -errno;
        ifr.ifr_flags |= IFF_UP | IFF_RUNNING;
        if (ioctl(s, SIOCSIFFLAGS, &ifr) < 0)
                return -errno;
        return 0;
}

static int make_listener(uint16_t port)
{
        int s = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC | SOCK_NONBLOCK, 0);
        if (s < 0)
                return -errno;
        int one = 1;
        setsockopt(s, SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one));
        struct sockaddr_in sa = {.sin_family = AF_INET, .sin_port = htons(port),
                                 .sin_addr.s_addr = htonl(INADDR_LOOPBACK)};
        if (bind(s, (struct sockaddr *)&sa, sizeof(sa)) < 0 || listen(s, 256) < 0) {
                int r = -errno;
                close(s);
                return r;
        }
        return s;
}

struct child_ctx {
        const struct spawn_config *cfg;
        int sync;
        uid_t uid;
        gid_t gid;
        bool cgroup_in_clone;
        int workspace_fd;
        const int *mount_fds;
        const struct mounts_plan *plan;
};

/* A sandbox never outlives its owner (the supervisor, or `airlock run`).
 * The kernel sends pid 1 SIGKILL when the owner dies, and pid 1's death
 * empties the pid namespace. The parent-death signal is cleared by every
 * credential change that touches the effective or fs ids (setresuid,
 * setresgid), so it is set again after each one; then the owner is checked
 * once more, because it may have died before the signal was armed. getppid()
 * cannot tell: across a pid namespace it is 0 whether the owner lives or
 * not. The sync socket can: the owner holds its other end, and the kernel
 * closes it when the owner dies. Returns false when the owner is gone. */
static bool watch_owner(int sync)
{
        if (prctl(PR_SET_PDEATHSIG, SIGKILL, 0, 0, 0) < 0)
                return false;
        struct pollfd pfd = {.fd = sync, .events = POLLRDHUP};
        int n;
        do
                n = poll(&pfd, 1, 0);
        while (n < 0 && errno == EINTR);
        return !(n > 0 && (pfd.revents & (POLLHUP | POLLRDHUP | POLLERR | POLLNVAL)));
}

static _Noreturn void child_fail(int sync, enum spawn_failure kind, const struct al_error *e,
                                 int exit_code)
{
        sync_send(sync, SYNC_ERROR, e->code, kind, e->msg);
        _exit(exit_code);
}

static void set_stdio(int fd, int target)
{
        if (fd == target) {
                int fl = fcntl(fd, F_GETFD);
                if (fl >= 0)
                        fcntl(fd, F_SETFD, fl & ~FD_CLOEXEC);
        } else
                dup2(fd, target);
}

/* The command's process: stdio, then confine_and_exec(). Failures go to
 * pid 1 over `errfd` (close-on-exec: silence means execve worked). */
struct command {
        char *const *argv;
        char *const *envp;
        const char *cwd;
        int fds[3];
};

static _Noreturn void command_main(struct child_ctx *ctx, const struct command *cmd, int errfd)
{
        const struct spawn_config *cfg = ctx->cfg;
        struct al_error err = {0};
        const char *paths[64];

        sigset_t none;
        sigemptyset(&none);
        for (int sig = 1; sig < NSIG; sig++)
                signal(sig, SIG_DFL);
        sigprocmask(SIG_SETMASK, &none, NULL);

        /* Move stdio sources out of the way of 0-2 before placing them. */
        int in = fcntl(cmd->fds[0], F_DUPFD_CLOEXEC, 10);
        int out = fcntl(cmd->fds[1], F_DUPFD_CLOEXEC, 10);
        int errout = fcntl(cmd->fds[2], F_DUPFD_CLOEXEC, 10);
        set_stdio(in, 0);
        set_stdio(out, 1);
        set_stdio(errout, 2);

        struct mounts_config mc = {.policy = cfg->policy, .home = cfg->home};
        size_t n = mounts_writable_paths(&mc, paths, ARRAY_SIZE(paths));
        struct confine_config cc = {
                .policy = cfg->policy,
                .uid = ctx->uid,
                .gid = ctx->gid,
                .cwd = cmd->cwd ? cmd->cwd : cfg->policy->workspace ? "/workspace" : cfg->home,
                .write_paths = paths,
                .n_write_paths = n,
                .argv = cmd->argv,
                .envp = cmd->envp,
                .keep_fd = errfd,
        };
        int exec_errno = 0;
        confine_and_exec(&cc, &exec_errno, &err);

        enum spawn_failure kind = SPAWN_FAILED_SETUP;
        int code = 125;
        if (exec_errno == ENOENT) {
                kind = SPAWN_FAILED_EXEC_NOT_FOUND;
                code = 127;
                al_error_set(&err, 0, "%s: command not found", cmd->argv[0]);
        } else if (exec_errno) {
                kind = SPAWN_FAILED_EXEC;
                code = 126;
        }
        sync_send(errfd, SYNC_ERROR, err.code, kind, err.msg);
        _exit(code);
}

extern char **environ;

/* pid 1's command line and environment are the supervisor's, inherited by
 * fork: the host's paths, flags and variables. /proc/1/cmdline is readable by
 * everyone inside, so wipe both and call it airlock-init. */
static void wipe_host_identity(void)
{
        _cleanup_free_ char *cmdline = NULL;
        size_t len = 0;
        prctl(PR_SET_NAME, "airlock-init", 0, 0, 0);
        if (read_file_at(AT_FDCWD, "/proc/self/cmdline", 1 << 20, &cmdline, &len) >= 0 && len > 0) {
                char *start = program_invocation_name;
                memset(start, 0, len);
                snprintf(start, len, "airlock-init");
        }
        for (char **e = environ; e && *e; e++)
                memset(*e, 0, strlen(*e));
}

/* Close every fd from 3 up but a and b. */
static void close_all_but(int a, int b)
{
        int lo = a < b ? a : b, hi = a < b ? b : a;
        if (lo > 3)
                close_range(3, (unsigned)lo - 1, 0);
        if (hi > lo + 1)
                close_range((unsigned)lo + 1, (unsigned)hi - 1, 0);
        close_range((unsigned)hi + 1, ~0U, 0);
}

enum { INIT_MAX_PROCS = 256 };

struct init_proc {
        pid_t pid;
        int id;
};

static int send_msg(int fd, const struct sync_msg *m)
{
        ssize_t n;
        do
                n = send(fd, m, sizeof(*m), MSG_NOSIGNAL);
        while (n < 0 && errno == EINTR);
        return n == (ssize_t)sizeof(*m) ? 0 : -EIO;
}

/* Parse an exec request's payload into argv/env arrays pointing into buf. */
static int parse_exec(char *buf, size_t len, const char **cwd, char ***argv, char ***envp)
{
        uint32_t argc, envc;
        if (len < 8)
                return -EBADMSG;
        memcpy(&argc, buf, 4);
        memcpy(&envc, buf + 4, 4);
        if (argc == 0 || argc > 4096 || envc > 4096 || buf[len - 1] != '\0')
                return -EBADMSG;
        char **a = xcalloc(argc + 1, sizeof(char *));
        char **e = xcalloc(envc + 1, sizeof(char *));
        char *p = buf + 8, *end = buf + len;
        *cwd = p;
        p += strlen(p) + 1;
        for (uint32_t i = 0; i < argc + envc; i++) {
                if (p >= end) {
                        free(a);
                        free(e);
                        return -EBADMSG;
                }
                if (i < argc)
                        a[i] = p;
                else
                        e[i - argc] = p;
                p += strlen(p) + 1;
        }
        *argv = a;
        *envp = e;
        return 0;
}

/* Start one requested process: it goes through command_main() exactly as a
 * sandbox's first command does. */
static void init_exec(struct child_ctx *ctx, int sync, int sfd, struct init_proc *procs,
                      int id, char *payload, size_t len, const int *fds, size_t nfds)
{
        struct sync_msg m = {.type = SYNC_ERROR, .id = id, .value = SPAWN_FAILED_SETUP};
        const char *cwd;
        char **argv = NULL, **envp = NULL;
        int pair[2] = {-1, -1};
        int slot = -1;
        for (int i = 0; i < INIT_MAX_PROCS && slot < 0; i++)
                if (procs[i].pid == 0)
                        slot = i;
        if (nfds != 3 || slot < 0 || parse_exec(payload, len, &cwd, &argv, &envp) < 0) {
                m.code = slot < 0 ? EAGAIN : EBADMSG;
                snprintf(m.text, sizeof(m.text), "%s",
                         slot < 0 ? "too many processes" : "malformed exec request");
                send_msg(sync, &m);
                return;
        }
        if (socketpair(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC, 0, pair) < 0) {
                m.code = errno;
                snprintf(m.text, sizeof(m.text), "socketpair: %s", strerror(errno));
                send_msg(sync, &m);
                goto out;
        }
        pid_t pid = fork();
        if (pid < 0) {
                m.code = errno;
                snprintf(m.text, sizeof(m.text), "fork: %s", strerror(errno));
                send_msg(sync, &m);
                goto out;
        }
        if (pid == 0) {
                close(pair[0]);
                close(sync);
                close(sfd);
                struct command c = {.argv = argv, .envp = envp, .cwd = *cwd ? cwd : NULL,
                                    .fds = {fds[0], fds[1], fds[2]}};
                command_main(ctx, &c, pair[1]);
        }
        close(pair[1]);
        pair[1] = -1;
        procs[slot].pid = pid;
        procs[slot].id = id;
        struct sync_msg r;
        if (sync_recv(pair[0], &r, NULL, 0, NULL) == 0 && r.type == SYNC_ERROR) {
                /* It ends by itself; its exit is not reported, its failure is. */
                procs[slot].id = -1;
                r.id = id;
                send_msg(sync, &r);
        } else {
                m.type = SYNC_STARTED;
                send_msg(sync, &m);
        }
out:
        if (pair[0] >= 0)
                close(pair[0]);
        if (pair[1] >= 0)
                close(pair[1]);
        free(argv);
        free(envp);
}

/* pid 1 of an idle sandbox: runs processes on the supervisor's request,
 * reports each one's end, and takes the sandbox down when the supervisor
 * goes away. */
static _Noreturn void init_serve(struct child_ctx *ctx)
{
        int sync = ctx->sync;
        struct al_error err = {0};
        static struct init_proc procs[INIT_MAX_PROCS];

        sigset_t all;
        sigfillset(&all);
        sigprocmask(SIG_BLOCK, &all, NULL);
        sigset_t chld;
        sigemptyset(&chld);
        sigaddset(&chld, SIGCHLD);
        int sfd = signalfd(-1, &chld, SFD_CLOEXEC | SFD_NONBLOCK);

        prctl(PR_SET_DUMPABLE, 0, 0, 0, 0);
        wipe_host_identity();
        confine_drop_caps(&err);
        int devnull = open("/dev/null", O_RDWR | O_CLOEXEC);
        for (int fd = 0; fd < 3 && devnull >= 0; fd++)
                dup2(devnull, fd);
        close_all_but(sync, sfd);
        if (sfd < 0 || !watch_owner(sync)) {
                kill(-1, SIGKILL);
                _exit(125);
        }

        sync_send(sync, SYNC_STARTED, 0, 0, NULL);
        release_startup_memory();

        _cleanup_free_ char *buf = xcalloc(1, sizeof(struct sync_msg) + EXEC_PAYLOAD_MAX);
        for (;;) {
                struct pollfd pfd[2] = {{.fd = sync, .events = POLLIN}, {.fd = sfd, .events = POLLIN}};
                if (poll(pfd, 2, -1) < 0)
                        continue;
                if (pfd[1].revents & POLLIN) {
                        struct signalfd_siginfo si;
                        while (read(sfd, &si, sizeof(si)) > 0)
                                ;
                        int st;
                        struct rusage ru;
                        pid_t pid;
                        while ((pid = wait4(-1, &st, WNOHANG, &ru)) > 0)
                                for (int i = 0; i < INIT_MAX_PROCS; i++) {
                                        if (procs[i].pid != pid)
                                                continue;
                                        if (procs[i].id >= 0) {
                                                struct sync_msg m = {.type = SYNC_EXIT, .id = procs[i].id, .value = st};
                                                m.usage[0] = (uint64_t)ru.ru_utime.tv_sec * 1000 + (uint64_t)ru.ru_utime.tv_usec / 1000;
                                                m.usage[1] = (uint64_t)ru.ru_stime.tv_sec * 1000 + (uint64_t)ru.ru_stime.tv_usec / 1000;
                                                m.usage[2] = (uint64_t)ru.ru_maxrss;
                                                send_msg(sync, &m);
                                        }
                                        procs[i].pid = 0;
                                }
                }
                if (pfd[0].revents & (POLLIN | POLLHUP | POLLERR)) {
                        int fds[3];
                        size_t nfds = 0;
                        char control[CMSG_SPACE(sizeof(int) * 3)];
                        struct iovec iov = {.iov_base = buf, .iov_len = sizeof(struct sync_msg) + EXEC_PAYLOAD_MAX};
                        struct msghdr mh = {.msg_iov = &iov, .msg_iovlen = 1, .msg_control = control,
                                            .msg_controllen = sizeof(control)};
                        ssize_t n = recvmsg(sync, &mh, MSG_CMSG_CLOEXEC);
                        if (n < 0 && errno == EINTR)
                                continue;
                        if (n <= 0)
                                break; /* the supervisor is gone */
                        for (struct cmsghdr *c = CMSG_FIRSTHDR(&mh); c; c = CMSG_NXTHDR(&mh, c))
                                if (c->cmsg_level == SOL_SOCKET && c->cmsg_type == SCM_RIGHTS) {
                                        size_t k = (c->cmsg_len - CMSG_LEN(0)) / sizeof(int);
                                        int *in = (int *)CMSG_DATA(c);
                                        for (size_t i = 0; i < k; i++) {
                                                if (nfds < 3)
                                                        fds[nfds++] = in[i];
                                                else
                                                        close(in[i]);
                                        }
                                }
                        struct sync_msg m;
                        if ((size_t)n >= sizeof(m)) {
                                memcpy(&m, buf, sizeof(m));
                                if (m.type == SYNC_EXEC)
                                        init_exec(ctx, sync, sfd, procs, m.id, buf + sizeof(m),
                                                  (size_t)n - sizeof(m), fds, nfds);
                                else if (m.type == SYNC_KILL)
                                        for (int i = 0; i < INIT_MAX_PROCS; i++)
                                                if (procs[i].pid > 0 && procs[i].id == m.id) {
                                                        kill(-procs[i].pid, m.value);
                                                        kill(procs[i].pid, m.value);
                                                }
                        }
                        for (size_t i = 0; i < nfds; i++)
                                close(fds[i]);
                }
        }
        kill(-1, SIGKILL);
        while (waitpid(-1, NULL, 0) > 0 || errno == EINTR)
                ;
        _exit(0);
}

/* The sandbox's pid 1: starts the command, forwards signals to it, reaps
 * everything, and when the command ends, ends the rest of the tree. */
static _Noreturn void init_main(struct child_ctx *ctx)
{
        int sync = ctx->sync;
        int pair[2];
        struct al_error err = {0};

        sigset_t all;
        sigfillset(&all);
        sigprocmask(SIG_BLOCK, &all, NULL);

        if (socketpair(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC, 0, pair) < 0) {
                al_error_set(&err, errno, "socketpair");
                child_fail(sync, SPAWN_FAILED_SETUP, &err, 125);
        }
        pid_t cmd = fork();
        if (cmd < 0) {
                al_error_set(&err, errno, "fork");
                child_fail(sync, SPAWN_FAILED_SETUP, &err, 125);
        }
        if (cmd == 0) {
                close(pair[0]);
                close(sync);
                struct command c = {.argv = ctx->cfg->argv, .envp = ctx->cfg->envp,
                                    .fds = {ctx->cfg->stdin_fd, ctx->cfg->stdout_fd,
                                            ctx->cfg->stderr_fd}};
                command_main(ctx, &c, pair[1]);
        }
        close(pair[1]);

        /* pid 1 needs nothing from here on: no privileges, no stdio, and not
         * dumpable, so the agent cannot reach into it through /proc. */
        prctl(PR_SET_DUMPABLE, 0, 0, 0, 0);
        wipe_host_identity();
        confine_drop_caps(&err);
        int devnull = open("/dev/null", O_RDWR | O_CLOEXEC);
        for (int fd = 0; fd < 3 && devnull >= 0; fd++)
                dup2(devnull, fd);
        close_all_but(sync, pair[0]);

        struct sync_msg m;
        int r = sync_recv(pair[0], &m, NULL, 0, NULL);
        close(pair[0]);
        if (r == 0 && m.type == SYNC_ERROR) {
                sync_send(sync, SYNC_ERROR, m.code, m.value, m.text);
                int st;
                while (waitpid(cmd, &st, 0) < 0 && errno == EINTR)
                        ;
                _exit(125);
        }

        /* Every signal arrives here (all are blocked since before the fork,
         * so none was lost); the sync socket tells when the owner is gone. */
        int sfd = signalfd(-1, &all, SFD_CLOEXEC | SFD_NONBLOCK);
        if (sfd < 0 || !watch_owner(sync)) {
                kill(-1, SIGKILL);
                _exit(125);
        }
        sync_send(sync, SYNC_STARTED, 0, 0, NULL);

        int status = 0;
        bool done = false, orphaned = false;
        while (!done && !orphaned) {
                struct pollfd pfd[2] = {{.fd = sfd, .events = POLLIN},
                                        {.fd = sync, .events = POLLIN | POLLRDHUP}};
                if (poll(pfd, 2, -1) < 0)
                        continue;
                if (pfd[1].revents & (POLLHUP | POLLRDHUP | POLLERR | POLLNVAL)) {
                        orphaned = true; /* the owner died: take the tree down */
                } else if (pfd[1].revents & POLLIN) {
                        /* Nothing is expected here while a command runs. */
                        char discard[sizeof(struct sync_msg)];
                        if (recv(sync, discard, sizeof(discard), MSG_DONTWAIT) == 0)
                                orphaned = true;
                }
                if (!(pfd[0].revents & POLLIN))
                        continue;
                struct signalfd_siginfo si;
                while (read(sfd, &si, sizeof(si)) == (ssize_t)sizeof(si)) {
                        int sig = (int)si.ssi_signo;
                        if (sig == SIGCHLD) {
                                int st;
                                pid_t p;
                                while ((p = waitpid(-1, &st, WNOHANG)) > 0)
                                        if (p == cmd) {
                                                status = st;
                                                done = true;
                                        }
                        } else if (sig != SIGKILL && sig != SIGSTOP)
                                kill(cmd, sig);
                }
        }
        kill(-1, SIGKILL);
        while (waitpid(-1, NULL, 0) > 0 || errno == EINTR)
                ;
        if (!orphaned)
                sync_send(sync, SYNC_EXIT, 0, status, NULL);
        _exit(orphaned ? 125 : 0);
}

static _Noreturn void child_main(struct child_ctx *ctx)
{
        const struct spawn_config *cfg = ctx->cfg;
        const struct policy *p = cfg->policy;
        struct al_error err = {0};
        struct sync_msg m;
        int r;

        if (!watch_owner(ctx->sync))
                _exit(125);

        r = sync_recv(ctx->sync, &m, NULL, 0, NULL);
        if (r < 0 || m.type != SYNC_GO)
                _exit(125);

        /* Become the sandbox user now: files and mount points made during
         * setup must belong to an id mapped in the namespace. The map has
         * no uid 0 (or the caller is not it), so the capabilities of the
         * namespace's creator survive the change until dropped explicitly. */
        if (setresgid(ctx->gid, ctx->gid, ctx->gid) < 0 ||
            setresuid(ctx->uid, ctx->uid, ctx->uid) < 0) {
                al_error_set(&err, errno, "switching to uid %u", (unsigned)ctx->uid);
                child_fail(ctx->sync, SPAWN_FAILED_SETUP, &err, 125);
        }
        /* setresuid() cleared the parent-death signal. */
        if (!watch_owner(ctx->sync))
                _exit(125);

        r = loopback_up();
        if (r < 0) {
                al_error_set(&err, r, "bringing up lo");
                child_fail(ctx->sync, SPAWN_FAILED_SETUP, &err, 125);
        }

        if (p->net_mode == POLICY_NET_GATED) {
                int fds[SPAWN_LISTEN_MAX];
                for (int i = 0; i < SPAWN_LISTEN_MAX; i++) {
                        fds[i] = make_listener(spawn_listen_ports[i]);
                        if (fds[i] < 0) {
                                al_error_set(&err, fds[i], "listening on 127.0.0.1:%u",
                                             spawn_listen_ports[i]);
                                child_fail(ctx->sync, SPAWN_FAILED_SETUP, &err, 125);
                        }
                }
                r = send_fds(ctx->sync, SYNC_LISTENERS, fds, SPAWN_LISTEN_MAX);
                for (int i = 0; i < SPAWN_LISTEN_MAX; i++)
                        close(fds[i]);
                if (r < 0)
                        _exit(125);
        }

        struct mounts_config mc = {
                .plan = ctx->plan,
                .policy = p,
                .home = cfg->home,
                .uid = ctx->uid,
                .gid = ctx->gid,
                .caller_home = cfg->caller_home,
                .workspace_fd = ctx->workspace_fd,
                .mount_fds = ctx->mount_fds,
        };
        int upper = -1;
        r = mounts_build_root(&mc, &upper, &err);
        if (r < 0)
                child_fail(ctx->sync, SPAWN_FAILED_SETUP, &err, 125);
        if (upper >= 0) {
                r = send_fds(ctx->sync, SYNC_UPPER, &upper, 1);
                close(upper);
                if (r < 0)
                        _exit(125);
        }

        if (sethostname("airlock", 7) < 0) {
                al_error_set(&err, errno, "setting the host name");
                child_fail(ctx->sync, SPAWN_FAILED_SETUP, &err, 125);
        }

        /* On v1 the parent moves this process into the cgroup while the
         * root is being built (the move waits for an RCU grace period, so it
         * runs in parallel); wait for it, then root the cgroup namespace
         * there, so the sandbox sees its own cgroup as "/". */
        if (!ctx->cgroup_in_clone) {
                if (cfg->cgroup) {
                        r = sync_recv(ctx->sync, &m, NULL, 0, NULL);
                        if (r < 0 || m.type != SYNC_CGROUP)
                                _exit(125);
                }
                if (unshare(CLONE_NEWCGROUP) < 0) {
                        al_error_set(&err, errno, "creating the cgroup namespace");
                        child_fail(ctx->sync, SPAWN_FAILED_SETUP, &err, 125);
                }
        }

        if (cfg->argv)
                init_main(ctx);
        init_serve(ctx);
}

static void kill_and_reap(pid_t pid)
{
        if (pid <= 0)
                return;
        kill(pid, SIGKILL);
        while (waitpid(pid, NULL, 0) < 0 && errno == EINTR)
                ;
}

int spawn_sandbox(const struct spawn_config *cfg, struct spawn_result *ret, struct al_error *err)
{
        const struct policy *p = cfg->policy;
        struct child_ctx ctx = {.cfg = cfg, .uid = p->uid, .gid = p->gid, .workspace_fd = -1};
        struct mounts_plan *plan = NULL;
        _cleanup_free_ int *mount_fds = NULL;
        int sp[2] = {-1, -1};
        int r;

        ret->pid = -1;
        ret->sync_fd = -1;
        ret->pidfd = -1;
        ret->upper_fd = -1;
        ret->failure = SPAWN_FAILED_SETUP;
        for (int i = 0; i < SPAWN_LISTEN_MAX; i++)
                ret->listen_fds[i] = -1;

        bool root = (geteuid() == 0);
        uid_t host_uid = root ? SPAWN_ROOT_HOST_UID : geteuid();
        gid_t host_gid = root ? SPAWN_ROOT_HOST_GID : getegid();
        ret->host_uid = host_uid;

        if (p->workspace) {
                struct stat st;
                if (stat(p->workspace, &st) < 0)
                        return al_error_set(err, errno, "workspace %s", p->workspace);
                if (!S_ISDIR(st.st_mode))
                        return al_error_set(err, ENOTDIR, "workspace %s", p->workspace);
        }
        r = mounts_prepare_workspace(p, err);
        if (r < 0)
                return r;
        r = mounts_plan_new(p, cfg->caller_home, &plan, err);
        if (r < 0)
                return r;
        ctx.plan = plan;

        if (root) {
                /* The sandbox keeps its creator's supplementary groups for good
                 * (setgroups is denied inside): root's must not go with it. */
                if (setgroups(0, NULL) < 0 && !only_own_group()) {
                        r = al_error_set(err, errno, "dropping supplementary groups");
                        goto fail;
                }
                if (p->workspace && p->workspace_mode != POLICY_WORKSPACE_RO) {
                        r = prepare_idmapped(p->workspace, host_uid, host_gid, &ctx.workspace_fd,
                                             err);
                        if (r < 0)
                                goto fail;
                }
                mount_fds = xcalloc(p->n_mounts + 1, sizeof(int));
                for (size_t i = 0; i < p->n_mounts; i++) {
                        mount_fds[i] = -1;
                        if (p->mounts[i].readonly)
                                continue;
                        r = prepare_idmapped(p->mounts[i].source, host_uid, host_gid,
                                             &mount_fds[i], err);
                        if (r < 0)
                                goto fail;
                }
                ctx.mount_fds = mount_fds;
        }

        if (socketpair(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC, 0, sp) < 0) {
                r = al_error_set(err, errno, "socketpair");
                goto fail;
        }

        struct clone_args args = {
                .flags = CLONE_NEWUSER | CLONE_NEWNS | CLONE_NEWPID | CLONE_NEWNET | CLONE_NEWIPC |
                         CLONE_NEWUTS | CLONE_PIDFD,
                .exit_signal = SIGCHLD,
        };
        int pidfd = -1;
        args.pidfd = (uint64_t)(uintptr_t)&pidfd;
        /* v2 places the child at clone: the cgroup must exist first. */
        if (cfg->cgroup && cfg->cgroup->ops == &cgroup_v2_ops) {
                r = cgroup_realize(cfg->cgroup, err);
                if (r < 0)
                        goto fail;
        }
        if (cfg->cgroup && cfg->cgroup->dir_fd >= 0) {
                args.flags |= CLONE_INTO_CGROUP | CLONE_NEWCGROUP;
                args.cgroup = (uint64_t)cfg->cgroup->dir_fd;
                ctx.cgroup_in_clone = true;
        }
        ctx.sync = sp[1];

        pid_t pid = sys_clone3(&args);
        if (pid < 0) {
                r = -errno;
                const char *why = spawn_userns_disabled_reason();
                if (r == -ENOSYS)
                        r = al_error_set(err, ENOSYS, "this kernel lacks clone3 (Linux 5.3 or later is needed)");
                else if (why && (r == -EPERM || r == -ENOSPC || r == -EACCES || r == -EINVAL))
                        r = al_error_set(err, 0, "cannot create the sandbox: %s", why);
                else
                        r = al_error_set(err, r, "creating the sandbox's namespaces");
                goto fail;
        }
        if (pid == 0) {
                close(sp[0]);
                child_main(&ctx);
        }
        close(sp[1]);
        sp[1] = -1;
        ret->pid = pid;
        ret->pidfd = pidfd;

        r = write_maps(pid, p->uid, host_uid, p->gid, host_gid, true);
        if (r < 0) {
                const char *why = spawn_userns_disabled_reason();
                if (why)
                        r = al_error_set(err, 0, "cannot create the sandbox: %s", why);
                else
                        r = al_error_set(err, r, "writing the sandbox's uid/gid maps");
                goto fail;
        }
        r = sync_send(sp[0], SYNC_GO, 0, 0, NULL);
        if (r < 0) {
                r = al_error_set(err, r, "starting the sandbox");
                goto fail;
        }
        if (cfg->cgroup && !ctx.cgroup_in_clone) {
                r = cgroup_realize(cfg->cgroup, err);
                if (r < 0)
                        goto fail;
                r = cfg->cgroup->ops->attach(cfg->cgroup, pid, err);
                if (r < 0)
                        goto fail;
                /* A child that already failed has closed its end; its
                 * report is read below. */
                (void)sync_send(sp[0], SYNC_CGROUP, 0, 0, NULL);
        }

        for (;;) {
                struct sync_msg m;
                int fds[SPAWN_LISTEN_MAX];
                size_t nfds = 0;
                r = sync_recv(sp[0], &m, fds, SPAWN_LISTEN_MAX, &nfds);
                if (r < 0) {
                        r = al_error_set(err, r, "sandbox setup ended unexpectedly");
                        goto fail;
                }
                if (m.type == SYNC_LISTENERS) {
                        for (size_t i = 0; i < nfds; i++)
                                ret->listen_fds[i] = fds[i];
                        continue;
                }
                if (m.type == SYNC_UPPER) {
                        for (size_t i = 0; i < nfds; i++) {
                                if (ret->upper_fd < 0)
                                        ret->upper_fd = fds[i];
                                else
                                        close(fds[i]);
                        }
                        continue;
                }
                if (m.type == SYNC_STARTED)
                        break;
                if (m.type == SYNC_ERROR) {
                        if (err) {
                                err->code = m.code;
                                snprintf(err->msg, sizeof(err->msg), "%s", m.text);
                        }
                        ret->failure = (enum spawn_failure)m.value;
                        r = m.code ? -m.code : -EINVAL;
                        if (m.value == SPAWN_FAILED_SETUP && (m.code == EPERM || m.code == EACCES)) {
                                const char *why = spawn_userns_disabled_reason();
                                if (why)
                                        al_error_wrap(err, "%s", why);
                        }
                        goto fail;
                }
                r = al_error_set(err, EBADMSG, "sandbox setup sent an unexpected message");
                goto fail;
        }

        ret->sync_fd = sp[0];
        ret->failure = SPAWN_OK;
        if (idmap_helper > 0) {
                while (waitpid(idmap_helper, NULL, 0) < 0 && errno == EINTR)
                        ;
                idmap_helper = -1;
        }
        mounts_plan_free(plan, p->n_mounts);
        if (ctx.workspace_fd >= 0)
                close(ctx.workspace_fd);
        for (size_t i = 0; mount_fds && i < p->n_mounts; i++)
                if (mount_fds[i] >= 0)
                        close(mount_fds[i]);
        return 0;

fail:
        if (ret->pid > 0)
                kill_and_reap(ret->pid);
        ret->pid = -1;
        if (ret->pidfd >= 0)
                close(ret->pidfd);
        ret->pidfd = -1;
        for (int i = 0; i < SPAWN_LISTEN_MAX; i++)
                if (ret->listen_fds[i] >= 0) {
                        close(ret->listen_fds[i]);
                        ret->listen_fds[i] = -1;
                }
        if (ret->upper_fd >= 0)
                close(ret->upper_fd);
        ret->upper_fd = -1;
        if (sp[0] >= 0)
                close(sp[0]);
        if (sp[1] >= 0)
                close(sp[1]);
        if (ctx.workspace_fd >= 0)
                close(ctx.workspace_fd);
        for (size_t i = 0; mount_fds && i < p->n_mounts; i++)
                if (mount_fds[i] >= 0)
                        close(mount_fds[i]);
        mounts_plan_free(plan, p->n_mounts);
        return r;
}

int spawn_read_exit(int sync_fd, int *ret_status)
{
        struct sync_msg m;
        int r = sync_recv(sync_fd, &m, NULL, 0, NULL);
        if (r < 0)
                return r;
        if (m.type != SYNC_EXIT)
                return -EBADMSG;
        *ret_status = m.value;
        return 0;
}

int spawn_exec_request(int sync_fd, int id, char *const *argv, char *const *envp, const char *cwd,
                       const int fds[3])
{
        size_t argc = strv_length(argv), envc = strv_length(envp);
        size_t len = 8 + strlen(cwd ? cwd : "") + 1;
        for (size_t i = 0; i < argc; i++)
                len += strlen(argv[i]) + 1;
        for (size_t i = 0; i < envc; i++)
                len += strlen(envp[i]) + 1;
        if (argc == 0 || len > EXEC_PAYLOAD_MAX)
                return -E2BIG;
        _cleanup_free_ char *payload = xcalloc(1, len);
        uint32_t a = (uint32_t)argc, e = (uint32_t)envc;
        memcpy(payload, &a, 4);
        memcpy(payload + 4, &e, 4);
        char *p = payload + 8;
        p = stpcpy(p, cwd ? cwd : "") + 1;
        for (size_t i = 0; i < argc; i++)
                p = stpcpy(p, argv[i]) + 1;
        for (size_t i = 0; i < envc; i++)
                p = stpcpy(p, envp[i]) + 1;

        struct sync_msg m = {.type = SYNC_EXEC, .id = id};
        char control[CMSG_SPACE(sizeof(int) * 3)];
        memset(control, 0, sizeof(control));
        struct iovec iov[2] = {{.iov_base = &m, .iov_len = sizeof(m)},
                               {.iov_base = payload, .iov_len = len}};
        struct msghdr mh = {.msg_iov = iov, .msg_iovlen = 2, .msg_control = control,
                            .msg_controllen = CMSG_SPACE(sizeof(int) * 3)};
        struct cmsghdr *c = CMSG_FIRSTHDR(&mh);
        c->cmsg_level = SOL_SOCKET;
        c->cmsg_type = SCM_RIGHTS;
        c->cmsg_len = CMSG_LEN(sizeof(int) * 3);
        memcpy(CMSG_DATA(c), fds, sizeof(int) * 3);
        return sendmsg(sync_fd, &mh, MSG_NOSIGNAL) < 0 ? -errno : 0;
}

int spawn_kill_request(int sync_fd, int id, int sig)
{
        struct sync_msg m = {.type = SYNC_KILL, .id = id, .value = sig};
        return send_msg(sync_fd, &m);
}

int spawn_read_event(int sync_fd, struct spawn_event *ev)
{
        struct sync_msg m;
        int r = sync_recv(sync_fd, &m, NULL, 0, NULL);
        if (r < 0)
                return r;
        memset(ev, 0, sizeof(*ev));
        ev->id = m.id;
        switch (m.type) {
        case SYNC_STARTED:
                ev->type = SPAWN_EVENT_STARTED;
                break;
        case SYNC_ERROR:
                ev->type = SPAWN_EVENT_FAILED;
                ev->failure = (enum spawn_failure)m.value;
                ev->err = m.code;
                snprintf(ev->message, sizeof(ev->message), "%s", m.text);
                break;
        case SYNC_EXIT:
                ev->type = SPAWN_EVENT_EXIT;
                ev->status = m.value;
                ev->cpu_user_ms = m.usage[0];
                ev->cpu_system_ms = m.usage[1];
                ev->max_rss_kb = m.usage[2];
                break;
        default:
                return -EBADMSG;
        }
        return 0;
}
