/* SPDX-License-Identifier: Apache-2.0 */
/* Unix connects made by the host for a sandbox process (connect-unix.h). */
#include <errno.h>
#include <fcntl.h>
#include <grp.h>
#include <limits.h>
#include <linux/openat2.h>
#include <linux/sched.h>
#include <signal.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/fsuid.h>
#include <sys/prctl.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "connect-take.h"
#include "connect-unix.h"
#include "fs.h"
#include "util.h"

#ifndef P_PIDFD
#define P_PIDFD 3
#endif

/* The caller's file system identity (the fsuid, fsgid and groups in
 * /proc/TID/status, as the host sees them). */
struct caller_cred {
        uid_t fsuid;
        gid_t fsgid;
        gid_t groups[64];
        int n_groups;
};

static int read_cred(pid_t tid, struct caller_cred *c)
{
        char path[64], buf[8192];
        snprintf(path, sizeof(path), "/proc/%d/status", (int)tid);
        int r = cn_read_small(path, buf, sizeof(buf));
        if (r < 0)
                return r;
        const char *u = strstr(buf, "\nUid:"), *g = strstr(buf, "\nGid:"),
                   *gs = strstr(buf, "\nGroups:");
        unsigned a, b, cc, fs, ga, gb, gc, gfs;
        if (!u || !g || !gs || sscanf(u + 5, "%u %u %u %u", &a, &b, &cc, &fs) != 4 ||
            sscanf(g + 5, "%u %u %u %u", &ga, &gb, &gc, &gfs) != 4)
                return -EIO;
        c->fsuid = fs;
        c->fsgid = gfs;
        c->n_groups = 0;
        const char *p = gs + 8;
        for (;;) {
                while (*p == ' ' || *p == '\t')
                        p++;
                if (*p < '0' || *p > '9')
                        break;
                char *end = NULL;
                errno = 0;
                unsigned long v = strtoul(p, &end, 10);
                if (errno || v > UINT32_MAX)
                        return -EIO;
                if (c->n_groups == (int)ARRAY_SIZE(c->groups))
                        return -E2BIG;
                c->groups[c->n_groups++] = (gid_t)v;
                p = end;
        }
        return 0;
}

/* The host's file system identity is switched to the caller's while it
 * resolves and connects a Unix path for it, so the host's rights never
 * stand in for the caller's. A host that is the caller already (the
 * unprivileged case: one uid mapped) switches nothing; one that is neither
 * the caller nor root cannot act for it (-EACCES). */
struct cred_switch {
        bool switched;
        gid_t fsgid;
        gid_t groups[64];
        int n_groups;
};

static int cred_enter(const struct caller_cred *c, struct cred_switch *s)
{
        s->switched = false;
        gid_t mine[64];
        int n = getgroups((int)ARRAY_SIZE(mine), mine);
        bool same = n == c->n_groups && (uid_t)setfsuid((uid_t)-1) == c->fsuid &&
                    (gid_t)setfsgid((gid_t)-1) == c->fsgid;
        for (int i = 0; same && i < n; i++) {
                bool found = false;
                for (int j = 0; j < c->n_groups && !found; j++)
                        found = mine[i] == c->groups[j];
                same = found;
        }
        if (same && c->fsuid != 0)
                return 0;
        /* A caller that is the host's root: the host's capabilities, which
         * a switch of fsuid to 0 keeps, could exceed its own. Refused. */
        if (geteuid() != 0 || n < 0 || c->fsuid == 0)
                return -EACCES;
        s->n_groups = n;
        memcpy(s->groups, mine, sizeof(gid_t) * (size_t)n);
        s->fsgid = (gid_t)setfsgid((gid_t)-1);
        if (setgroups((size_t)c->n_groups, c->groups) < 0)
                return -errno;
        s->switched = true;
        (void)setfsgid(c->fsgid);
        (void)setfsuid(c->fsuid);
        if ((uid_t)setfsuid((uid_t)-1) != c->fsuid || (gid_t)setfsgid((gid_t)-1) != c->fsgid)
                return -EACCES;
        return 0;
}

static void cred_leave(struct cred_switch *s)
{
        if (!s->switched)
                return;
        (void)setfsuid(geteuid());
        (void)setfsgid(s->fsgid);
        if (setgroups((size_t)s->n_groups, s->groups) < 0)
                abort(); /* the host would go on with the caller's groups */
        s->switched = false;
}

/* A Unix socket path as the caller would reach it: beneath its root
 * (/proc/TID/root, symbolic links resolved inside it, no magic links), a
 * relative path from its working directory. Returns an O_PATH descriptor of
 * what the path names, which the host connects to through
 * /proc/self/fd/N. */
static int unix_path_open(pid_t tid, const char *name)
{
        char path[80];
        snprintf(path, sizeof(path), "/proc/%d/root", (int)tid);
        _cleanup_close_ int root = open(path, O_PATH | O_DIRECTORY | O_CLOEXEC);
        if (root < 0)
                return -errno;
        const uint64_t how = RESOLVE_IN_ROOT | RESOLVE_NO_MAGICLINKS;
        if (name[0] == '/')
                return fs_openat2(root, name, O_PATH | O_CLOEXEC, 0, how);
        /* The working directory, as a path beneath the caller's root: its
         * link read from the host, less the root's, and checked to name the
         * same directory (a directory moved or out of reach: ENOENT). */
        char rl[PATH_MAX], cl[PATH_MAX], full[PATH_MAX];
        ssize_t rn = readlink(path, rl, sizeof(rl) - 1);
        snprintf(path, sizeof(path), "/proc/%d/cwd", (int)tid);
        ssize_t cn = readlink(path, cl, sizeof(cl) - 1);
        if (rn <= 0 || cn <= 0)
                return -ENOENT;
        rl[rn] = cl[cn] = '\0';
        const char *rel = cl;
        if (!STREQ(rl, "/")) {
                size_t l = strlen(rl);
                if (strncmp(cl, rl, l) != 0 || (cl[l] != '/' && cl[l] != '\0'))
                        return -ENOENT;
                rel = cl + l;
        }
        _cleanup_close_ int cwd = open(path, O_PATH | O_DIRECTORY | O_CLOEXEC);
        _cleanup_close_ int again =
            fs_openat2(root, rel[0] ? rel : "/", O_PATH | O_DIRECTORY | O_CLOEXEC, 0, how);
        struct stat a, b;
        if (cwd < 0 || again < 0 || fstat(cwd, &a) < 0 || fstat(again, &b) < 0 ||
            a.st_dev != b.st_dev || a.st_ino != b.st_ino)
                return -ENOENT;
        if ((size_t)snprintf(full, sizeof(full), "%s/%s", rel, name) >= sizeof(full))
                return -ENAMETOOLONG;
        return fs_openat2(root, full, O_PATH | O_CLOEXEC, 0, how);
}

#ifndef sigev_notify_thread_id
#define sigev_notify_thread_id _sigev_un._tid
#endif

#define CONNECT_BOUND_NS (1000 * 1000)

static void on_bound(int sig)
{
        (void)sig;
}

/* A one-shot timer that signals this thread (a no-op handler, no
 * SA_RESTART), so that a connect() sleeping in the kernel returns EINTR.
 * Made once per process (a forked child makes its own). */
static bool bound_timer(timer_t *ret)
{
        static timer_t timer;
        static pid_t owner;
        if (owner == getpid()) {
                *ret = timer;
                return true;
        }
        int signo = SIGRTMIN + 5;
        struct sigaction sa = {.sa_handler = on_bound};
        sigemptyset(&sa.sa_mask);
        if (sigaction(signo, &sa, NULL) < 0)
                return false;
        struct sigevent sev = {.sigev_notify = SIGEV_THREAD_ID, .sigev_signo = signo};
        sev.sigev_notify_thread_id = gettid();
        if (timer_create(CLOCK_MONOTONIC, &sev, &timer) < 0)
                return false;
        owner = getpid();
        *ret = timer;
        return true;
}

int sv_connect_bounded(int sock, const struct sockaddr *sa, unsigned len)
{
        timer_t t;
        /* Without the timer, no connect on a shared socket: the loop would
         * be the sandbox's to stop. */
        if (!bound_timer(&t))
                return EAGAIN;
        struct itimerspec on = {.it_value = {.tv_nsec = CONNECT_BOUND_NS}}, off = {0};
        if (timer_settime(t, 0, &on, NULL) < 0)
                return EAGAIN;
        int r = connect(sock, sa, (socklen_t)len) < 0 ? errno : 0;
        (void)timer_settime(t, 0, &off, NULL);
        return r;
}

bool sv_unix_is_path(const struct sockaddr_un *su, size_t len)
{
        return len > offsetof(struct sockaddr_un, sun_path) && su->sun_path[0] != '\0';
}

int sv_unix_connect_start(pid_t tid, int sock, const struct sockaddr_un *su, size_t len,
                          struct sv_unix_pending *ret)
{
        if (!cn_helper_room())
                return -EAGAIN;
        int ans[2];
        if (pipe2(ans, O_CLOEXEC) < 0)
                return -errno;
        pid_t parent = getpid();
        int pidfd = -1;
        struct clone_args args;
        memset(&args, 0, sizeof(args));
        args.flags = CLONE_PIDFD;
        args.pidfd = (uint64_t)(uintptr_t)&pidfd;
        args.exit_signal = 0; /* no one else's wait() sees it */
        long pid = syscall(SYS_clone3, &args, sizeof(args));
        if (pid < 0) {
                int e = errno;
                close(ans[0]);
                close(ans[1]);
                return -e;
        }
        if (pid == 0) {
                /* A copy of the loop's process at this point; its identity
                 * switch is its own, and it goes with it. */
                (void)prctl(PR_SET_PDEATHSIG, SIGKILL, 0, 0, 0);
                if (getppid() != parent)
                        _exit(0);
                int r = sv_unix_connect(tid, sock, su, len);
                (void)!write(ans[1], &r, sizeof(r));
                _exit(0);
        }
        close(ans[1]);
        int reaped = fcntl(pidfd, F_DUPFD_CLOEXEC, 3);
        if (reaped < 0 || cn_helper_add(reaped) < 0) {
                /* Not tracked: it is stopped and waited for here (a fresh
                 * process, killable wherever it is). */
                if (reaped >= 0)
                        close(reaped);
                (void)syscall(SYS_pidfd_send_signal, pidfd, SIGKILL, NULL, 0);
                siginfo_t si;
                (void)waitid((idtype_t)P_PIDFD, (id_t)pidfd, &si, WEXITED | __WALL);
                close(pidfd);
                close(ans[0]);
                return -EAGAIN;
        }
        if (fcntl(ans[0], F_SETFL, O_NONBLOCK) < 0) {
                int e = errno;
                struct sv_unix_pending p = {ans[0], pidfd};
                sv_unix_connect_stop(&p);
                return -e;
        }
        *ret = (struct sv_unix_pending){.answer = ans[0], .pidfd = pidfd};
        return 0;
}

static void close_reset(int *fd)
{
        if (*fd >= 0)
                close(*fd);
        *fd = -1;
}

int sv_unix_connect_answer(struct sv_unix_pending *p)
{
        int r;
        ssize_t n = read(p->answer, &r, sizeof(r));
        if (n != (ssize_t)sizeof(r) || r < 0)
                r = EAGAIN; /* it ended without an answer: not made */
        close_reset(&p->answer);
        close_reset(&p->pidfd);
        return r;
}

void sv_unix_connect_stop(struct sv_unix_pending *p)
{
        if (p->pidfd >= 0)
                (void)syscall(SYS_pidfd_send_signal, p->pidfd, SIGKILL, NULL, 0);
        close_reset(&p->answer);
        close_reset(&p->pidfd);
}

/* connect() on the host's copy of the caller's own Unix socket, to `su`
 * (the host's one copy of the address). A path is resolved as the caller
 * would resolve it and with the caller's rights; an abstract or empty
 * address is the socket's own network namespace's, the sandbox's. */
int sv_unix_connect(pid_t tid, int sock, const struct sockaddr_un *su, size_t len)
{
        size_t off = offsetof(struct sockaddr_un, sun_path);
        if (len <= off || su->sun_path[0] == '\0') {
                int e = sv_connect_bounded(sock, (const struct sockaddr *)su, (unsigned)len);
                return e == EINTR ? EAGAIN : e; /* cut short: not made, tried again */
        }
        char name[sizeof(su->sun_path) + 1];
        size_t n = strnlen(su->sun_path, len - off);
        memcpy(name, su->sun_path, n);
        name[n] = '\0';
        struct caller_cred c;
        struct cred_switch sw;
        int r = read_cred(tid, &c);
        if (r < 0)
                return -r == E2BIG ? EACCES : -r;
        r = cred_enter(&c, &sw);
        if (r < 0) {
                cred_leave(&sw);
                return -r;
        }
        _cleanup_close_ int target = unix_path_open(tid, name);
        if (target < 0) {
                cred_leave(&sw);
                return -target == EXDEV ? ENOENT : -target;
        }
        struct sockaddr_un pu = {.sun_family = AF_UNIX};
        int pl = snprintf(pu.sun_path, sizeof(pu.sun_path), "/proc/self/fd/%d", target);
        r = sv_connect_bounded(sock, (const struct sockaddr *)&pu,
                               (unsigned)(off + (size_t)pl + 1));
        cred_leave(&sw);
        return r == EINTR ? EAGAIN : r; /* cut short: not made, tried again */
}
