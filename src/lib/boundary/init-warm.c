/* SPDX-License-Identifier: Apache-2.0 */
#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include "confine.h"
#include "trace.h"
#include "util.h"
#include "spawn-internal.h"
#include "init-internal.h"

/* An idle sandbox's prepared process. pid 1 forks it ahead of the next
 * request, and it goes at once through every step of confine_and_exec()
 * that does not depend on the request: a new session, every descriptor but
 * its channel closed, the limits, the sandbox's own uid and gid,
 * no_new_privs, the Landlock rules, no capabilities, the seccomp filter
 * (inherited from pid 1). Then it waits, with no signal blocked, for one
 * request: argv, env, cwd and the three stdio descriptors; it places them,
 * changes directory and calls execve. It is used once; pid 1 forks the
 * next one after the answer. A request it cannot serve exactly as a forked
 * process would (a terminal, another uid) takes the fork path, as does
 * every request of a sandbox whose confinement pid 1 could not prepare once
 * (no shared ruleset or filter, the gvisor and microvm tiers, a container's
 * own filter). Nothing carries from one command to the next: each is a
 * fresh process, forked after the previous request was answered and the
 * request buffer wiped. */
static pid_t warm_pid = -1;
static int warm_fd = -1;
/* The prepared process died unused (killed from inside, or its setup
 * failed): not replaced until a request has been served the other way, so
 * that killing it costs pid 1 at most one fork per request. */
static bool warm_lost;

/* It counts against limits.pids like any process: a sandbox held to a few
 * gets none, so that it never takes the one its command would fork. An
 * OCI container (airlock-runtime, spawn_config.rootfs) gets none either:
 * its processes are its tooling's to count and list, and it starts few. */
enum { WARM_MIN_PIDS = 64 };

static bool warm_possible(const struct child_ctx *ctx)
{
        const struct spawn_config *cfg = ctx->cfg;
        uint64_t pids = cfg->policy->limits.pids;
        return init_once.landlock >= 0 && init_once.seccomp && init_once.signals_default &&
               !cfg->extra_filter && !cfg->rootfs && (pids == 0 || pids >= WARM_MIN_PIDS) &&
               cfg->policy->tier != POLICY_TIER_GVISOR && cfg->policy->tier != POLICY_TIER_MICROVM;
}

static _Noreturn void warm_main(struct child_ctx *ctx, int fd)
{
        const struct spawn_config *cfg = ctx->cfg;
        struct al_error err = {0};
        const char *paths[64];
        struct confine_config cc;

        /* Dispositions are the defaults already (pid 1 reset them); none is
         * blocked, so a signal sent to it while it waits acts now (it dies
         * and is replaced) instead of pending into the command. */
        sigset_t none;
        sigemptyset(&none);
        sigprocmask(SIG_SETMASK, &none, NULL);
        init_command_config(cfg, paths, ARRAY_SIZE(paths), &cc);
        cc.uid = ctx->uid;
        cc.gid = ctx->gid;
        cc.keep_fd = fd;
        if (confine_prepare(&cc, &err) < 0)
                _exit(125); /* unused: the request is served by a fork, which reports it */
        al_trace_mark("warm.ready");

        size_t cap = sizeof(struct sync_msg) + EXEC_PAYLOAD_MAX;
        char *buf = xcalloc(1, cap);
        int fds[3];
        size_t nfds = 0;
        char control[CMSG_SPACE(sizeof(int) * 3)];
        struct iovec iov = {.iov_base = buf, .iov_len = cap};
        struct msghdr mh = {.msg_iov = &iov,
                            .msg_iovlen = 1,
                            .msg_control = control,
                            .msg_controllen = sizeof(control)};
        ssize_t n;
        do
                n = recvmsg(fd, &mh, MSG_CMSG_CLOEXEC);
        while (n < 0 && errno == EINTR);
        if (n <= 0)
                _exit(0); /* pid 1 let it go */
        /* Taken: from here a death of this process may be its command's
         * (pid 1 tells it from one before, which never ran). */
        spawn_sync_send(fd, SYNC_GO, 0, 0, NULL);
        al_trace_mark("warm.request");
        spawn_sync_take_fds(&mh, fds, 3, &nfds);
        const char *cwd;
        char **argv, **envp;
        struct sync_msg m;
        if ((size_t)n < sizeof(m) || nfds != 3 || (mh.msg_flags & (MSG_TRUNC | MSG_CTRUNC)) ||
            (memcpy(&m, buf, sizeof(m)), m.type != SYNC_EXEC) ||
            init_parse_exec(buf + sizeof(m), (size_t)n - sizeof(m), &cwd, &argv, &envp) < 0) {
                al_error_set(&err, EBADMSG, "malformed exec request");
                spawn_sync_send(fd, SYNC_ERROR, err.code, SPAWN_FAILED_SETUP, err.msg);
                _exit(125);
        }
        int in = fcntl(fds[0], F_DUPFD_CLOEXEC, 10);
        int out = fcntl(fds[1], F_DUPFD_CLOEXEC, 10);
        int errout = fcntl(fds[2], F_DUPFD_CLOEXEC, 10);
        init_set_stdio(in, 0);
        init_set_stdio(out, 1);
        init_set_stdio(errout, 2);
        cc.cwd = *cwd ? cwd : cfg->policy->workspace ? "/workspace" : cfg->home;
        if (cc.cwd && chdir(cc.cwd) < 0) {
                al_error_set(&err, errno, "changing to %s", cc.cwd);
                init_command_fail(fd, argv[0], 0, &err);
        }
        cc.argv = argv;
        cc.envp = envp;
        int exec_errno = 0;
        confine_exec(&cc, &exec_errno, &err);
        init_command_fail(fd, argv[0], exec_errno, &err);
}

/* Fork the next prepared process, if this sandbox uses them and has none. */
void warm_start(struct child_ctx *ctx, int sync, int sfd)
{
        int wp[2];
        if (warm_pid > 0 || warm_lost || !warm_possible(ctx))
                return;
        /* Out of processes (limits.pids reached) or descriptors: tried
         * again once a request has been served, not every millisecond. */
        if (socketpair(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC, 0, wp) < 0) {
                warm_lost = true;
                return;
        }
        al_trace_mark("init.warm_fork");
        pid_t pid = fork();
        if (pid < 0) {
                close(wp[0]);
                close(wp[1]);
                warm_lost = true;
                return;
        }
        if (pid == 0) {
                close(wp[0]);
                close(sync);
                close(sfd);
                warm_main(ctx, wp[1]);
        }
        close(wp[1]);
        warm_pid = pid;
        warm_fd = wp[0];
}

/* Let the prepared process go (it is reaped with the rest). */
static void warm_drop(void)
{
        if (warm_pid > 0)
                kill(warm_pid, SIGKILL);
        if (warm_fd >= 0)
                close(warm_fd);
        warm_pid = -1;
        warm_fd = -1;
}

/* Hand a request to the prepared process: its pid, with *ret_fd the channel
 * on which it reports a failure or, closed by execve, its start; -1 when
 * there is none or it could not take the request (nothing was started). */
pid_t warm_take(int id, const char *payload, size_t len, const int *fds, int *ret_fd)
{
        if (warm_pid <= 0)
                return -1;
        struct sync_msg m = {.type = SYNC_EXEC, .id = id};
        char control[CMSG_SPACE(sizeof(int) * 3)];
        memset(control, 0, sizeof(control));
        struct iovec iov[2] = {{.iov_base = &m, .iov_len = sizeof(m)},
                               {.iov_base = (void *)payload, .iov_len = len}};
        struct msghdr mh = {.msg_iov = iov,
                            .msg_iovlen = 2,
                            .msg_control = control,
                            .msg_controllen = sizeof(control)};
        struct cmsghdr *c = CMSG_FIRSTHDR(&mh);
        c->cmsg_level = SOL_SOCKET;
        c->cmsg_type = SCM_RIGHTS;
        c->cmsg_len = CMSG_LEN(sizeof(int) * 3);
        memcpy(CMSG_DATA(c), fds, sizeof(int) * 3);
        ssize_t n;
        do
                n = sendmsg(warm_fd, &mh, MSG_NOSIGNAL | MSG_DONTWAIT);
        while (n < 0 && errno == EINTR);
        if (n != (ssize_t)(sizeof(m) + len)) {
                warm_drop();
                return -1;
        }
        pid_t pid = warm_pid;
        *ret_fd = warm_fd;
        warm_pid = -1;
        warm_fd = -1;
        return pid;
}

bool init_child_stopped(pid_t pid)
{
        siginfo_t si = {0};
        return waitid(P_PID, (id_t)pid, &si, WSTOPPED | WNOHANG) == 0 && si.si_pid == pid &&
               si.si_code == CLD_STOPPED;
}

bool warm_wanted(const struct child_ctx *ctx)
{
        return warm_pid < 0 && !warm_lost && warm_possible(ctx);
}

bool warm_reaped(pid_t pid)
{
        if (pid != warm_pid)
                return false;
        close(warm_fd);
        warm_fd = -1;
        warm_pid = -1;
        warm_lost = true;
        return true;
}

void warm_check_stopped(void)
{
        /* Stopped while it waited (a process inside can signal it): it
         * would hold the next request up. */
        if (warm_pid > 0 && init_child_stopped(warm_pid)) {
                warm_drop();
                warm_lost = true;
        }
}

void warm_served(void)
{
        warm_lost = false;
}

/* What the prepared process said before its channel closed (execve or
 * death): whether it had taken the request, and its failure if any. */
static enum warm_outcome warm_said(int fd, struct sync_msg *m)
{
        bool taken = false;
        struct sync_msg x;
        while (spawn_sync_recv(fd, &x, NULL, 0, NULL) == 0) {
                if (x.type == SYNC_GO)
                        taken = true;
                else if (x.type == SYNC_ERROR) {
                        *m = x;
                        return WARM_FAILED;
                }
        }
        return taken ? WARM_EXECED : WARM_UNTAKEN;
}

enum warm_outcome warm_wait(pid_t pid, int fd, struct sync_msg *m)
{
        /* No event but the end of its channel wakes pid 1 (its answer that
         * it took the request is read then): one wake-up, as for a fork. */
        uint64_t deadline = now_monotonic_us() + (uint64_t)WARM_EXEC_TIMEOUT_MS * 1000;
        for (;;) {
                uint64_t now = now_monotonic_us();
                int left = now >= deadline ? 0 : (int)((deadline - now + 999) / 1000);
                struct pollfd p = {.fd = fd, .events = 0};
                /* Looked at every 100 ms: stopped (by a process inside),
                 * it is let go at once, not at the deadline. */
                int n = poll(&p, 1, left < 100 ? left : 100);
                if (n < 0 && errno == EINTR)
                        continue;
                if (n > 0)
                        return warm_said(fd, m);
                if (left <= 100 || init_child_stopped(pid))
                        break;
        }
        /* Stopped: killed, it says what it had sent. Nothing: the request
         * never ran (a fork serves it). That it had taken it: it cannot be
         * told whether it got further, so the request is refused. */
        kill(pid, SIGKILL);
        enum warm_outcome w = warm_said(fd, m);
        return w == WARM_UNTAKEN ? WARM_UNTAKEN : WARM_LOST;
}
