/* SPDX-License-Identifier: Apache-2.0 */
/* The sandbox's pid 1: it starts the command (spawn_init_main) or, in an idle
 * sandbox, the processes the supervisor asks for (spawn_init_serve), forwards
 * signals, reaps everything and reports exits over the sync socket. */
#include <errno.h>
#include <fcntl.h>
#include <grp.h>
#include <linux/capability.h>
#include <linux/sched.h>
#include <net/if.h>
#include <netinet/in.h>
#include <sched.h>
#include <signal.h>
#include <stdint.h>
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
#include "seccomp.h"
#include "spawn.h"
#include "trace.h"
#include "util.h"
#include "spawn-internal.h"

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
        bool ctty;        /* fds[0] is the sandbox's own pty slave */
        uint32_t as_user; /* 1 + another inside uid (policy "users"); 0: the sandbox's */
};

/* Work an idle sandbox's pid 1 does once, not per command; a command it
 * forks inherits the result. */
static bool signals_default;     /* every disposition is SIG_DFL already */
static int shared_landlock = -1; /* confine_landlock_build()'s ruleset */
static bool shared_seccomp;      /* pid 1 runs under the sandbox's filter */

/* Every disposition back to the default, the C library's own signals
 * (32 and 33, which its sigaction() refuses to touch) included: execve
 * keeps a signal ignored, so one ignored by whatever started Airlock would
 * otherwise reach every command. */
static void reset_signals(void)
{
        struct {
                void (*handler)(int);
                unsigned long flags;
                void (*restorer)(void);
                uint64_t mask;
        } dfl = {.handler = SIG_DFL};
        for (int sig = 1; sig <= 64; sig++)
                if (sig != SIGKILL && sig != SIGSTOP)
                        (void)syscall(SYS_rt_sigaction, sig, &dfl, NULL, sizeof(dfl.mask));
        signals_default = true;
}

/* The confinement of a command of this sandbox, before who and what. */
static void command_confine_config(const struct spawn_config *cfg, const char **paths,
                                   size_t max_paths, struct confine_config *cc)
{
        struct mounts_config mc = {.policy = cfg->policy, .home = cfg->home};
        *cc = (struct confine_config){
            .policy = cfg->policy,
            .write_paths = paths,
            .n_write_paths = mounts_writable_paths(&mc, paths, max_paths),
            .keep_fd = -1,
            .landlock_fd = shared_landlock,
            .seccomp_inherited = shared_seccomp,
            .extra_filter = cfg->extra_filter,
        };
}

static _Noreturn void command_main(struct child_ctx *ctx, const struct command *cmd, int errfd)
{
        const struct spawn_config *cfg = ctx->cfg;
        struct al_error err = {0};
        const char *paths[64];

        /* Handlers are the supervisor's, inherited by fork; pid 1 installs
         * none of its own, so one that reset them has nothing left here. */
        sigset_t none;
        sigemptyset(&none);
        if (!signals_default)
                reset_signals();
        sigprocmask(SIG_SETMASK, &none, NULL);

        /* Move stdio sources out of the way of 0-2 before placing them. */
        int in = fcntl(cmd->fds[0], F_DUPFD_CLOEXEC, 10);
        int out = fcntl(cmd->fds[1], F_DUPFD_CLOEXEC, 10);
        int errout = fcntl(cmd->fds[2], F_DUPFD_CLOEXEC, 10);
        set_stdio(in, 0);
        set_stdio(out, 1);
        set_stdio(errout, 2);

        struct confine_config cc;
        command_confine_config(cfg, paths, ARRAY_SIZE(paths), &cc);
        cc.uid = cmd->as_user ? cmd->as_user - 1 : ctx->uid;
        cc.gid = cmd->as_user ? cmd->as_user - 1 : ctx->gid;
        cc.cwd = cmd->cwd ? cmd->cwd : cfg->policy->workspace ? "/workspace" : cfg->home;
        cc.argv = cmd->argv;
        cc.envp = cmd->envp;
        cc.keep_fd = errfd;
        cc.ctty = cmd->ctty;
        int exec_errno = 0;
        /* Another user inside must not carry the supplementary groups the
         * sandbox inherited from its creator: they are the sandbox user's
         * own group inside. Where setgroups is denied there are none to
         * carry (a root caller dropped them before the clone). */
        if (cmd->as_user && setgroups(0, NULL) < 0 && getgroups(0, NULL) != 0) {
                al_error_set(&err, errno, "dropping the supplementary groups of uid %u",
                             (unsigned)(cmd->as_user - 1));
                spawn_sync_send(errfd, SYNC_ERROR, err.code, SPAWN_FAILED_SETUP, err.msg);
                _exit(125);
        }
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
        spawn_sync_send(errfd, SYNC_ERROR, err.code, kind, err.msg);
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

/* Close every fd from 3 up but a, b and pid 1's Landlock ruleset (and the
 * trace's, confine.h). */
static void close_all_but(int a, int b)
{
        int keep[] = {a, b, shared_landlock};
        confine_close_except(keep, ARRAY_SIZE(keep));
}

enum { INIT_MAX_PROCS = 256 };

struct init_proc {
        pid_t pid;
        int id;
};

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
static void init_exec(struct child_ctx *ctx, int sync, int sfd, struct init_proc *procs, int id,
                      uint32_t tty, uint32_t as_user, char *payload, size_t len, const int *fds,
                      size_t nfds)
{
        struct sync_msg m = {.type = SYNC_ERROR, .id = id, .value = SPAWN_FAILED_SETUP};
        const char *cwd;
        char **argv = NULL, **envp = NULL;
        int pair[2] = {-1, -1};
        int master = -1, slave = -1;
        int slot = -1;
        for (int i = 0; i < INIT_MAX_PROCS && slot < 0; i++)
                if (procs[i].pid == 0)
                        slot = i;
        bool want_tty = (tty & SYNC_TTY_ON) != 0;
        if ((want_tty ? nfds != 0 : nfds != 3) || slot < 0 ||
            parse_exec(payload, len, &cwd, &argv, &envp) < 0) {
                m.code = slot < 0 ? EAGAIN : EBADMSG;
                snprintf(m.text, sizeof(m.text), "%s",
                         slot < 0 ? "too many processes" : "malformed exec request");
                spawn_send_msg(sync, &m);
                return;
        }
        if (want_tty) {
                int r = spawn_pty_open((uint16_t)((tty >> 15) & 0x7fff), (uint16_t)(tty & 0x7fff),
                                       &master, &slave);
                if (r < 0) {
                        m.code = -r;
                        snprintf(m.text, sizeof(m.text), "opening a terminal: %s", strerror(-r));
                        spawn_send_msg(sync, &m);
                        goto out;
                }
        }
        if (socketpair(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC, 0, pair) < 0) {
                m.code = errno;
                snprintf(m.text, sizeof(m.text), "socketpair: %s", strerror(errno));
                spawn_send_msg(sync, &m);
                goto out;
        }
        pid_t pid = fork();
        if (pid < 0) {
                m.code = errno;
                snprintf(m.text, sizeof(m.text), "fork: %s", strerror(errno));
                spawn_send_msg(sync, &m);
                goto out;
        }
        if (pid == 0) {
                close(pair[0]);
                close(sync);
                close(sfd);
                struct command c = {
                    .argv = argv, .envp = envp, .cwd = *cwd ? cwd : NULL, .as_user = as_user};
                for (int i = 0; i < 3; i++)
                        c.fds[i] = want_tty ? slave : fds[i];
                c.ctty = want_tty;
                if (master >= 0)
                        close(master);
                command_main(ctx, &c, pair[1]);
        }
        close(pair[1]);
        pair[1] = -1;
        if (slave >= 0) {
                close(slave);
                slave = -1;
        }
        procs[slot].pid = pid;
        procs[slot].id = id;
        struct sync_msg r;
        if (spawn_sync_recv(pair[0], &r, NULL, 0, NULL) == 0 && r.type == SYNC_ERROR) {
                /* It ends by itself; its exit is not reported, its failure is. */
                procs[slot].id = -1;
                r.id = id;
                spawn_send_msg(sync, &r);
        } else if (master >= 0) {
                /* The terminal's master goes with the report that it started. */
                struct sync_msg started = {.type = SYNC_STARTED, .id = id};
                if (spawn_send_msg_fd(sync, &started, master) < 0)
                        kill(-pid, SIGKILL);
        } else {
                m.type = SYNC_STARTED;
                spawn_send_msg(sync, &m);
        }
out:
        if (master >= 0)
                close(master);
        if (slave >= 0)
                close(slave);
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
_Noreturn void spawn_init_serve(struct child_ctx *ctx)
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
        reset_signals();
        /* Every command gets the same rules on the same files: build them
         * once. A ruleset confines nobody until a process restricts itself
         * with it, and each one that does gets its own copy; pid 1 itself
         * stays unconfined, as before. When this fails every command builds
         * its own and reports why it could not. */
        {
                const char *paths[64];
                struct confine_config cc;
                command_confine_config(ctx->cfg, paths, ARRAY_SIZE(paths), &cc);
                if (confine_landlock_build(&cc, &shared_landlock, &err) < 0)
                        shared_landlock = -1;
                err = (struct al_error){0};
        }
        /* With "users", pid 1 keeps what it takes to start a process as
         * another of the sandbox's own users (setresuid, setresgid), and
         * nothing more; the process drops it before its execve. */
        confine_drop_caps_but(
            ctx->cfg->policy->users ? (1ull << CAP_SETUID) | (1ull << CAP_SETGID) : 0, &err);
        /* pid 1 puts itself under the filter every command gets (the kernel
         * checks and compiles it once, each fork shares it): it needs
         * nothing the filter refuses, and is the harder to misuse for it.
         * The gvisor tier's commands run without it. When this fails every
         * command loads its own, as the first one does. */
        err = (struct al_error){0};
        if (ctx->cfg->policy->tier != POLICY_TIER_GVISOR &&
            prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) == 0 && seccomp_install(&err) == 0)
                shared_seccomp = true;
        err = (struct al_error){0};
        int devnull = open("/dev/null", O_RDWR | O_CLOEXEC);
        for (int fd = 0; fd < 3 && devnull >= 0; fd++)
                dup2(devnull, fd);
        close_all_but(sync, sfd);
        if (sfd < 0 || !spawn_watch_owner(sync)) {
                kill(-1, SIGKILL);
                _exit(125);
        }

        spawn_sync_send(sync, SYNC_STARTED, 0, 0, NULL);
        release_startup_memory();

        _cleanup_free_ char *buf = xcalloc(1, sizeof(struct sync_msg) + EXEC_PAYLOAD_MAX);
        for (;;) {
                struct pollfd pfd[2] = {{.fd = sync, .events = POLLIN},
                                        {.fd = sfd, .events = POLLIN}};
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
                                                struct sync_msg m = {.type = SYNC_EXIT,
                                                                     .id = procs[i].id,
                                                                     .value = st};
                                                m.usage[0] = (uint64_t)ru.ru_utime.tv_sec * 1000 +
                                                             (uint64_t)ru.ru_utime.tv_usec / 1000;
                                                m.usage[1] = (uint64_t)ru.ru_stime.tv_sec * 1000 +
                                                             (uint64_t)ru.ru_stime.tv_usec / 1000;
                                                m.usage[2] = (uint64_t)ru.ru_maxrss;
                                                spawn_send_msg(sync, &m);
                                        }
                                        procs[i].pid = 0;
                                }
                }
                if (pfd[0].revents & (POLLIN | POLLHUP | POLLERR)) {
                        int fds[3];
                        size_t nfds = 0;
                        char control[CMSG_SPACE(sizeof(int) * 3)];
                        struct iovec iov = {.iov_base = buf,
                                            .iov_len = sizeof(struct sync_msg) + EXEC_PAYLOAD_MAX};
                        struct msghdr mh = {.msg_iov = &iov,
                                            .msg_iovlen = 1,
                                            .msg_control = control,
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
                                        init_exec(ctx, sync, sfd, procs, m.id, (uint32_t)m.value,
                                                  m.as_user, buf + sizeof(m), (size_t)n - sizeof(m),
                                                  fds, nfds);
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
_Noreturn void spawn_init_main(struct child_ctx *ctx)
{
        int sync = ctx->sync;
        int pair[2];
        struct al_error err = {0};

        sigset_t all;
        sigfillset(&all);
        sigprocmask(SIG_BLOCK, &all, NULL);

        if (socketpair(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC, 0, pair) < 0) {
                al_error_set(&err, errno, "socketpair");
                spawn_child_fail(sync, SPAWN_FAILED_SETUP, &err, 125);
        }
        int master = -1, slave = -1;
        if (ctx->cfg->pty.on) {
                int r = spawn_pty_open(ctx->cfg->pty.rows, ctx->cfg->pty.cols, &master, &slave);
                if (r < 0) {
                        al_error_set(&err, -r, "opening the command's terminal");
                        spawn_child_fail(sync, SPAWN_FAILED_SETUP, &err, 125);
                }
        }
        pid_t cmd = fork();
        if (cmd < 0) {
                al_error_set(&err, errno, "fork");
                spawn_child_fail(sync, SPAWN_FAILED_SETUP, &err, 125);
        }
        if (cmd == 0) {
                al_trace_mark("cmd.start");
                close(pair[0]);
                close(sync);
                struct command c = {
                    .argv = ctx->cfg->argv,
                    .envp = ctx->cfg->envp,
                    .fds = {ctx->cfg->stdin_fd, ctx->cfg->stdout_fd, ctx->cfg->stderr_fd}};
                if (slave >= 0) {
                        c.fds[0] = c.fds[1] = c.fds[2] = slave;
                        c.ctty = true;
                        close(master);
                }
                command_main(ctx, &c, pair[1]);
        }
        close(pair[1]);
        /* pid 1 keeps no end of the terminal: the master goes to the
         * supervisor, which sees EIO once the last process holding the
         * slave is gone. */
        if (slave >= 0)
                close(slave);
        if (master >= 0) {
                if (spawn_send_fds(sync, SYNC_PTY, &master, 1) < 0) {
                        kill(cmd, SIGKILL);
                        _exit(125);
                }
                close(master);
        }

        /* pid 1 needs nothing from here on: no privileges, no stdio, and not
         * dumpable, so the agent cannot reach into it through /proc. */
        prctl(PR_SET_DUMPABLE, 0, 0, 0, 0);
        wipe_host_identity();
        confine_drop_caps(&err);
        int devnull = open("/dev/null", O_RDWR | O_CLOEXEC);
        for (int fd = 0; fd < 3 && devnull >= 0; fd++)
                dup2(devnull, fd);
        close_all_but(sync, pair[0]);
        al_trace_mark("init.confined");

        struct sync_msg m;
        int r = spawn_sync_recv(pair[0], &m, NULL, 0, NULL);
        close(pair[0]);
        al_trace_mark("init.exec_seen");
        if (r == 0 && m.type == SYNC_ERROR) {
                spawn_sync_send(sync, SYNC_ERROR, m.code, m.value, m.text);
                int st;
                while (waitpid(cmd, &st, 0) < 0 && errno == EINTR)
                        ;
                _exit(125);
        }

        /* Every signal arrives here (all are blocked since before the fork,
         * so none was lost); the sync socket tells when the owner is gone. */
        int sfd = signalfd(-1, &all, SFD_CLOEXEC | SFD_NONBLOCK);
        if (sfd < 0 || !spawn_watch_owner(sync)) {
                kill(-1, SIGKILL);
                _exit(125);
        }
        spawn_sync_send(sync, SYNC_STARTED, 0, 0, NULL);

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
                                                al_trace_mark("init.cmd_exit");
                                        }
                        } else if (sig != SIGKILL && sig != SIGSTOP)
                                kill(cmd, sig);
                }
        }
        kill(-1, SIGKILL);
        while (waitpid(-1, NULL, 0) > 0 || errno == EINTR)
                ;
        al_trace_mark("init.reaped");
        if (!orphaned)
                spawn_sync_send(sync, SYNC_EXIT, 0, status, NULL);
        _exit(orphaned ? 125 : 0);
}
