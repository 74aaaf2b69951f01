/* SPDX-License-Identifier: Apache-2.0 */
/* The sandbox's pid 1: it starts the command (spawn_init_main) or, in an idle
 * sandbox, the processes the supervisor asks for (spawn_init_serve, in
 * init-serve.c, with the prepared process of init-warm.c), forwards
 * signals, reaps everything and reports exits over the sync socket. This
 * file: what both share, the command's process, and spawn_init_main. */
#include <errno.h>
#include <fcntl.h>
#include <grp.h>
#include <poll.h>
#include <signal.h>
#include <stdint.h>
#include <string.h>
#include <sched.h>
#include <sys/auxv.h>
#include <sys/mman.h>
#include <sys/prctl.h>
#include <sys/signalfd.h>
#include <sys/socket.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

#include "confine.h"
#include "trace.h"
#include "util.h"
#include "spawn-internal.h"
#include "init-internal.h"

extern char **environ;

void init_set_stdio(int fd, int target)
{
        if (fd == target) {
                int fl = fcntl(fd, F_GETFD);
                if (fl >= 0)
                        fcntl(fd, F_SETFD, fl & ~FD_CLOEXEC);
        } else
                dup2(fd, target);
}

struct init_once init_once = {.landlock = -1};

/* Every disposition back to the default, the C library's own signals
 * (32 and 33, which its sigaction() refuses to touch) included: execve
 * keeps a signal ignored, so one ignored by whatever started Airlock would
 * otherwise reach every command. */
void init_reset_signals(void)
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
        init_once.signals_default = true;
}

/* The confinement of a command of this sandbox, before who and what. */
void init_command_config(const struct spawn_config *cfg, const char **paths, size_t max_paths,
                         struct confine_config *cc)
{
        struct mounts_config mc = {.policy = cfg->policy, .home = cfg->home};
        *cc = (struct confine_config){
            .policy = cfg->policy,
            .write_paths = paths,
            .n_write_paths = mounts_writable_paths(&mc, paths, max_paths),
            .keep_fd = -1,
            .landlock_fd = init_once.landlock,
            .seccomp_inherited = init_once.seccomp,
            .extra_filter = cfg->extra_filter,
        };
}

/* A command's process could not start it: say why over `errfd`, exit. */
_Noreturn void init_command_fail(int errfd, const char *argv0, int exec_errno, struct al_error *err)
{
        enum spawn_failure kind = SPAWN_FAILED_SETUP;
        int code = 125;
        if (exec_errno == ENOENT) {
                kind = SPAWN_FAILED_EXEC_NOT_FOUND;
                code = 127;
                al_error_set(err, 0, "%s: command not found", argv0);
        } else if (exec_errno) {
                kind = SPAWN_FAILED_EXEC;
                code = 126;
        }
        spawn_sync_send(errfd, SYNC_ERROR, err->code, kind, err->msg);
        _exit(code);
}

_Noreturn void init_command_main(struct child_ctx *ctx, const struct command *cmd, int errfd)
{
        const struct spawn_config *cfg = ctx->cfg;
        struct al_error err = {0};
        const char *paths[64];

        /* Handlers are the supervisor's, inherited by fork; pid 1 installs
         * none of its own, so one that reset them has nothing left here. */
        sigset_t none;
        sigemptyset(&none);
        if (!init_once.signals_default)
                init_reset_signals();
        sigprocmask(SIG_SETMASK, &none, NULL);

        /* Move stdio sources out of the way of 0-2 before placing them. */
        int in = fcntl(cmd->fds[0], F_DUPFD_CLOEXEC, 10);
        int out = fcntl(cmd->fds[1], F_DUPFD_CLOEXEC, 10);
        int errout = fcntl(cmd->fds[2], F_DUPFD_CLOEXEC, 10);
        init_set_stdio(in, 0);
        init_set_stdio(out, 1);
        init_set_stdio(errout, 2);

        struct confine_config cc;
        init_command_config(cfg, paths, ARRAY_SIZE(paths), &cc);
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
        init_command_fail(errfd, cmd->argv[0], exec_errno, &err);
}

/* pid 1's command line and environment are the supervisor's, inherited by
 * fork: the host's paths, flags and variables. /proc/1/cmdline is readable by
 * everyone inside, so wipe both and call it airlock-init.
 *
 * The kernel copied the argument strings, then the environment's, then the
 * executable's path (AT_EXECFN) one after another to the top of the first
 * stack: [argv[0], AT_EXECFN) holds every byte /proc/PID/cmdline and
 * /proc/PID/environ can show, known without reading /proc (about 30 us of a
 * cold start). When that is not how memory looks (no AT_EXECFN, or it lies
 * below argv[0] or implausibly far above), /proc/self/cmdline says how long
 * the command line is, as before. Strings the environment got since (on
 * the heap) are wiped one by one. */
#define INIT_STRINGS_MAX (32u << 20)

void init_wipe_host_identity(void)
{
        char *start = program_invocation_name;
        size_t len = 0;
        prctl(PR_SET_NAME, "airlock-init", 0, 0, 0);
        const char *execfn = (const char *)getauxval(AT_EXECFN);
        if (start && execfn > start && (size_t)(execfn - start) <= INIT_STRINGS_MAX) {
                len = (size_t)(execfn - start);
        } else {
                _cleanup_free_ char *cmdline = NULL;
                if (read_file_at(AT_FDCWD, "/proc/self/cmdline", 1 << 20, &cmdline, &len) < 0)
                        len = 0;
        }
        if (start && len > 0) {
                memset(start, 0, len);
                snprintf(start, len, "airlock-init");
        }
        for (char **e = environ; e && *e; e++)
                memset(*e, 0, strlen(*e));
}

/* Close every fd from 3 up but a, b and pid 1's Landlock ruleset (and the
 * trace's, confine.h). */
void init_close_all_but(int a, int b)
{
        int keep[] = {a, b, init_once.landlock};
        confine_close_except(keep, ARRAY_SIZE(keep));
}

static char **copy_strv(char *const *v)
{
        size_t n = 0;
        char **c = xcalloc(strv_length(v) + 1, sizeof(char *));
        for (; v && v[n]; n++)
                c[n] = xstrdup(v[n]);
        return c;
}

/* What the command's process starts from. */
struct command_start {
        struct child_ctx *ctx;
        int errfd;
        int close[3]; /* pid 1's ends: not the command's */
        int slave;    /* its terminal, or -1 */
        char **argv;  /* pid 1's own copies: it wipes the host's */
        char **envp;
};

static int command_start_main(void *arg)
{
        const struct command_start *st = arg;
        const struct spawn_config *cfg = st->ctx->cfg;
        al_trace_mark("cmd.start");
        for (size_t i = 0; i < ARRAY_SIZE(st->close); i++)
                if (st->close[i] >= 0)
                        close(st->close[i]);
        struct command c = {.argv = st->argv,
                            .envp = st->envp,
                            .fds = {cfg->stdin_fd, cfg->stdout_fd, cfg->stderr_fd}};
        if (st->slave >= 0) {
                c.fds[0] = c.fds[1] = c.fds[2] = st->slave;
                c.ctty = true;
        }
        init_command_main(st->ctx, &c, st->errfd);
}

/* The command's process shares pid 1's memory until its execve (as
 * posix_spawn does): no page table is copied, and pid 1 waits, suspended,
 * until the command has executed or exited (CLONE_VFORK). What it does
 * there is system calls on its own task (its own descriptors, signal
 * handlers, credentials, Landlock domain and seccomp filter: none is
 * shared) and writes to memory pid 1 does not read again but for
 * `environ`, which confine_exec() points at the command's environment and
 * is put back here. It runs on its own stack, with a guard page below.
 * pid 1 is already not dumpable and its host identity wiped: the command
 * runs before pid 1 is scheduled again. But for the microvm tier. */
#define COMMAND_STACK (512u << 10)

/* AddressSanitizer does not know that stack (it warns on every _exit of a
 * failed start, on the command's stderr): under it, the command is forked. */
#if defined(__SANITIZE_ADDRESS__)
#define COMMAND_FORK_ONLY 1
#elif defined(__has_feature)
#if __has_feature(address_sanitizer)
#define COMMAND_FORK_ONLY 1
#endif
#endif
#ifndef COMMAND_FORK_ONLY
#define COMMAND_FORK_ONLY 0
#endif

static pid_t start_command(struct command_start *st)
{
        /* The microvm tier's command process never executes: it starts
         * QEMU and relays for it until the end (microvm.c). It is forked,
         * and pid 1 goes on at once. */
        if (COMMAND_FORK_ONLY || st->ctx->cfg->policy->tier == POLICY_TIER_MICROVM) {
                pid_t pid = fork();
                if (pid == 0)
                        command_start_main(st);
                return pid;
        }
        long page = sysconf(_SC_PAGESIZE);
        size_t len = COMMAND_STACK + (size_t)page;
        char *stack = mmap(NULL, len, PROT_READ | PROT_WRITE,
                           MAP_PRIVATE | MAP_ANONYMOUS | MAP_STACK | MAP_NORESERVE, -1, 0);
        if (stack == MAP_FAILED)
                return -1;
        pid_t pid = -1;
        char **host_environ = environ;
        if (mprotect(stack, (size_t)page, PROT_NONE) == 0)
                pid = clone(command_start_main, stack + len, CLONE_VM | CLONE_VFORK | SIGCHLD, st);
        int saved = errno;
        environ = host_environ;
        munmap(stack, len);
        errno = saved;
        return pid;
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
        /* Every capability is dropped here, once, for pid 1 and the command
         * alike (bounding set, ambient, securebits, the sets): the command
         * inherits none, and pid 1 holds none when the command's first
         * instruction runs. The command's own steps need none (its uid is
         * already pid 1's; no_new_privs stands in for Landlock and seccomp).
         * When this fails, the command drops its own and reports what
         * refused it. */
        struct al_error caps_err = {0};
        confine_drop_caps(&caps_err);
        /* Not dumpable, and the host's command line and environment wiped,
         * before the command's process starts (it runs before pid 1 is
         * scheduled again): the agent never finds them in /proc/1. The
         * command's argv points into that command line: it gets a copy. */
        prctl(PR_SET_DUMPABLE, 0, 0, 0, 0);
        struct command_start start = {.ctx = ctx,
                                      .errfd = pair[1],
                                      .close = {pair[0], sync, master},
                                      .slave = slave,
                                      .argv = copy_strv(ctx->cfg->argv),
                                      .envp = copy_strv(ctx->cfg->envp)};
        init_wipe_host_identity();
        al_trace_mark("init.identity");
        pid_t cmd = start_command(&start);
        if (cmd < 0) {
                al_error_set(&err, errno, "starting the command's process");
                spawn_child_fail(sync, SPAWN_FAILED_SETUP, &err, 125);
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

        /* pid 1 needs nothing from here on: no stdio (it holds no
         * capability and is not dumpable since before the command started,
         * so the agent cannot reach into it through /proc). */
        strv_free(start.argv);
        strv_free(start.envp);
        confine_drop_caps(&err); /* nothing left to drop but after a failure */
        int devnull = open("/dev/null", O_RDWR | O_CLOEXEC);
        for (int fd = 0; fd < 3 && devnull >= 0; fd++)
                dup2(devnull, fd);
        init_close_all_but(sync, pair[0]);
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
