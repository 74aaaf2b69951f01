/* SPDX-License-Identifier: Apache-2.0 */
/* pid 1 of an idle sandbox (spawn_init_serve): starts each process the
 * supervisor asks for, through the prepared process of init-warm.c when
 * there is one, else by a fork; signals them; reports each start, failure
 * and exit. */
#include <errno.h>
#include <fcntl.h>
#include <linux/capability.h>
#include <poll.h>
#include <signal.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/resource.h>
#include <sys/signalfd.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include "confine.h"
#include "idle.h"
#include "seccomp.h"
#include "trace.h"
#include "util.h"
#include "spawn-internal.h"
#include "init-internal.h"
enum { INIT_MAX_PROCS = 256 };

struct init_proc {
        pid_t pid;
        int id;
};

/* Parse an exec request's payload into argv/env arrays pointing into buf. */
int init_parse_exec(char *buf, size_t len, const char **cwd, char ***argv, char ***envp)
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

/* The forked process's answer on its channel: its failure, or the end of
 * the channel at execve (spawn_sync_recv: -ECONNRESET). Once it has
 * taken the sandbox's uid, any process inside running as that user may
 * signal it, and one that stops it before its execve would hold pid 1 here
 * for ever: no other request served, no kill (an exec's timeout) obeyed, no
 * exit reported. So while it has not answered, pid 1 looks every 100 ms
 * whether it is stopped; stopped, it is killed (-EINTR: it never ran its
 * command). A process that is only slow (a loaded machine, the microvm
 * tier writing its initramfs) is waited for as long as it takes. */
static int init_wait_execve(pid_t pid, int fd, struct sync_msg *r)
{
        for (;;) {
                struct pollfd p = {.fd = fd, .events = POLLIN};
                int n = poll(&p, 1, 100);
                if (n > 0 || (n < 0 && errno != EINTR))
                        return spawn_sync_recv(fd, r, NULL, 0, NULL);
                if (init_child_stopped(pid)) {
                        kill(pid, SIGKILL);
                        return -EINTR;
                }
        }
}

/* Start one requested process: it goes through init_command_main() exactly as a
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
            init_parse_exec(payload, len, &cwd, &argv, &envp) < 0) {
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
        pid_t pid = -1;
        if (!want_tty && as_user == 0 && (pid = warm_take(id, payload, len, fds, &pair[0])) > 0) {
                al_trace_mark("init.warm_handed");
                struct sync_msg r;
                enum warm_outcome w = warm_wait(pid, pair[0], &r);
                al_trace_mark("init.exec_seen");
                close(pair[0]);
                pair[0] = -1;
                if (w != WARM_UNTAKEN) {
                        /* Reaped as any; only a process that passed execve
                         * has its exit reported. */
                        procs[slot].pid = pid;
                        procs[slot].id = w == WARM_EXECED ? id : -1;
                        if (w == WARM_FAILED) {
                                r.id = id;
                                spawn_send_msg(sync, &r);
                        } else if (w == WARM_LOST) {
                                m.code = ETIMEDOUT;
                                snprintf(m.text, sizeof(m.text),
                                         "the command's process did not start within %d s",
                                         WARM_EXEC_TIMEOUT_MS / 1000);
                                spawn_send_msg(sync, &m);
                        } else {
                                m.type = SYNC_STARTED;
                                spawn_send_msg(sync, &m);
                        }
                        goto out;
                }
                /* It never took the request (killed or stopped while it
                 * waited): nothing ran, a fork serves it. */
        }
        if (socketpair(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC, 0, pair) < 0) {
                m.code = errno;
                snprintf(m.text, sizeof(m.text), "socketpair: %s", strerror(errno));
                spawn_send_msg(sync, &m);
                goto out;
        }
        pid = fork();
        if (pid < 0) {
                m.code = errno;
                snprintf(m.text, sizeof(m.text), "fork: %s", strerror(errno));
                spawn_send_msg(sync, &m);
                goto out;
        }
        if (pid == 0) {
                al_trace_mark("cmd.start");
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
                init_command_main(ctx, &c, pair[1]);
        }
        close(pair[1]);
        pair[1] = -1;
        if (slave >= 0) {
                close(slave);
                slave = -1;
        }
        procs[slot].pid = pid;
        procs[slot].id = id;
        al_trace_mark("init.forked");
        struct sync_msg r;
        int rr = init_wait_execve(pid, pair[0], &r);
        al_trace_mark("init.exec_seen");
        if (rr == -EINTR) {
                /* Stopped before its execve, and killed: nothing ran. */
                procs[slot].id = -1;
                m.code = EINTR;
                snprintf(m.text, sizeof(m.text),
                         "the command's process was stopped by a signal before it started "
                         "(another process of the sandbox sent it); it was killed");
                spawn_send_msg(sync, &m);
        } else if (rr == 0 && r.type == SYNC_ERROR) {
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
        init_wipe_host_identity();
        init_reset_signals();
        /* Every command gets the same rules on the same files: build them
         * once. A ruleset confines nobody until a process restricts itself
         * with it, and each one that does gets its own copy; pid 1 itself
         * stays unconfined, as before. When this fails every command builds
         * its own and reports why it could not. */
        {
                const char *paths[64];
                struct confine_config cc;
                init_command_config(ctx->cfg, paths, ARRAY_SIZE(paths), &cc);
                if (confine_landlock_build(&cc, &init_once.landlock, &err) < 0)
                        init_once.landlock = -1;
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
                init_once.seccomp = true;
        err = (struct al_error){0};
        int devnull = open("/dev/null", O_RDWR | O_CLOEXEC);
        for (int fd = 0; fd < 3 && devnull >= 0; fd++)
                dup2(devnull, fd);
        init_close_all_but(sync, sfd);
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
                /* The next prepared process is forked once nothing has
                 * happened for a millisecond: not right after an exit is
                 * reported, where its fork and confinement (a quarter of a
                 * millisecond of CPU) would run beside the supervisor and
                 * the daemon recording and answering that exit. */
                int ready = poll(pfd, 2, warm_wanted(ctx) ? 1 : -1);
                if (ready == 0)
                        warm_start(ctx, sync, sfd);
                if (ready <= 0)
                        continue;
                if (pfd[1].revents & POLLIN) {
                        struct signalfd_siginfo si;
                        while (read(sfd, &si, sizeof(si)) > 0)
                                ;
                        int st;
                        struct rusage ru;
                        pid_t pid;
                        while ((pid = wait4(-1, &st, WNOHANG, &ru)) > 0) {
                                if (warm_reaped(pid))
                                        continue; /* died unused */
                                for (int i = 0; i < INIT_MAX_PROCS; i++) {
                                        if (procs[i].pid != pid)
                                                continue;
                                        if (procs[i].id >= 0) {
                                                al_trace_mark("init.cmd_exit");
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
                        warm_check_stopped();
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
                        spawn_sync_take_fds(&mh, fds, 3, &nfds);
                        struct sync_msg m;
                        if ((size_t)n >= sizeof(m)) {
                                memcpy(&m, buf, sizeof(m));
                                if (m.type == SYNC_EXEC)
                                        al_trace_mark("init.exec_asked");
                                if (m.type == SYNC_EXEC) {
                                        init_exec(ctx, sync, sfd, procs, m.id, (uint32_t)m.value,
                                                  m.as_user, buf + sizeof(m), (size_t)n - sizeof(m),
                                                  fds, nfds);
                                        warm_served();
                                } else if (m.type == SYNC_KILL)
                                        for (int i = 0; i < INIT_MAX_PROCS; i++)
                                                if (procs[i].pid > 0 && procs[i].id == m.id) {
                                                        kill(-procs[i].pid, m.value);
                                                        kill(procs[i].pid, m.value);
                                                }
                        }
                        for (size_t i = 0; i < nfds; i++)
                                close(fds[i]);
                        /* The next process is forked from this memory: no
                         * request's argv or env goes with it. */
                        explicit_bzero(buf, n > 0 ? (size_t)n : 0);
                }
        }
        kill(-1, SIGKILL);
        while (waitpid(-1, NULL, 0) > 0 || errno == EINTR)
                ;
        _exit(0);
}
