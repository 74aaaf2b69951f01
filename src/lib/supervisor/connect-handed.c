/* SPDX-License-Identifier: Apache-2.0 */
/* The direct path's handed sockets, cut at a rules change (connect-handed.h). */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <linux/sockios.h>
#include <sys/ioctl.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <unistd.h>

#include "connect-handed.h"
#include "connect-sockdiag.h"
#include "util.h"

struct cn_handed {
        dev_t dev;
        ino_t ino;
        bool seen, refused, cut, alive;
        const char *how;       /* the reason recorded for a cut */
        uint16_t lport, rport; /* its ports (network order), to know it there */
        int family;            /* from the socket table, to abort it there */
        struct inet_diag_sockid id;
        struct netgate_verdict v;
};

struct cn_handed_set {
        struct cn_handed *h;
        size_t n;
        size_t *by_ino; /* indices of h sorted by inode, for one run */
        bool have_ns;   /* the sandbox's pid namespace, read from a caller */
        dev_t nsdev;
        ino_t nsino;
        int nl;             /* the socket table (connect-sockdiag.h), opened ahead */
        long long sock_mnt; /* the socket file system's mount id; -1: not known */
        /* For one run: whether the socket table was read (else the scan
         * decides what is closed), and whether the scan read everything. */
        bool table, full;
};

struct fdinfo {
        unsigned long long ino;
        long long mnt_id;
        long long scm_fds; /* a Unix socket's descriptors in transit to it; -1: not said */
};

static int fdinfo_field(const char *buf, const char *name, long long *ret)
{
        const char *p = strstr(buf, name);
        if (!p)
                return -ENOENT;
        p += strlen(name);
        p += strspn(p, " \t");
        char *end = NULL;
        errno = 0;
        long long v = strtoll(p, &end, 10);
        if (errno || end == p || v < 0 || (*end != '\n' && *end != '\0'))
                return -EIO;
        *ret = v;
        return 0;
}

/* One fd's fdinfo (`name` in the directory `dir`), or -errno. */
static int read_fdinfo(int dir, const char *name, struct fdinfo *ret)
{
        _cleanup_close_ int f = openat(dir, name, O_RDONLY | O_CLOEXEC);
        if (f < 0)
                return -errno;
        char buf[1024];
        ssize_t n = read(f, buf, sizeof(buf) - 1);
        if (n <= 0)
                return n < 0 ? -errno : -EIO;
        buf[n] = '\0';
        long long ino = 0, mnt = 0, scm = -1;
        int r = fdinfo_field(buf, "\nino:", &ino);
        if (r < 0 || (r = fdinfo_field(buf, "\nmnt_id:", &mnt)) < 0)
                return r == -ENOENT ? -EIO : r;
        r = fdinfo_field(buf, "\nscm_fds:", &scm);
        if (r < 0 && r != -ENOENT)
                return r;
        *ret = (struct fdinfo){.ino = (unsigned long long)ino, .mnt_id = mnt, .scm_fds = scm};
        return 0;
}

/* The mount id every socket shows in its fdinfo, from one of ours. */
static long long sock_mount_id(int sock)
{
        _cleanup_close_ int own = sock < 0 ? socket(AF_UNIX, SOCK_DGRAM | SOCK_CLOEXEC, 0) : -1;
        _cleanup_close_ int dir = open("/proc/self/fdinfo", O_RDONLY | O_DIRECTORY | O_CLOEXEC);
        char name[16];
        snprintf(name, sizeof(name), "%d", sock < 0 ? own : sock);
        struct fdinfo fi;
        if (dir < 0 || (sock < 0 && own < 0) || read_fdinfo(dir, name, &fi) < 0)
                return -1;
        return fi.mnt_id;
}

struct cn_handed_set *cn_handed_new(void)
{
        struct cn_handed_set *s = xcalloc(1, sizeof(*s));
        s->h = xcalloc(CN_HANDED_MAX, sizeof(*s->h));
        s->by_ino = xcalloc(CN_HANDED_MAX, sizeof(*s->by_ino));
        /* Opened now, so that it is there when no fd can be opened later. */
        s->nl = cn_sockdiag_open();
        s->sock_mnt = sock_mount_id(s->nl);
        return s;
}

struct cn_handed_set *cn_handed_free(struct cn_handed_set *s)
{
        if (s) {
                if (s->nl >= 0)
                        close(s->nl);
                free(s->by_ino);
                free(s->h);
                free(s);
        }
        return NULL;
}

size_t cn_handed_count(const struct cn_handed_set *s)
{
        return s ? s->n : 0;
}

static int by_ino_cmp(const void *a, const void *b, void *ud)
{
        const struct cn_handed_set *s = ud;
        ino_t x = s->h[*(const size_t *)a].ino, y = s->h[*(const size_t *)b].ino;
        return x < y ? -1 : x > y;
}

static void index_inodes(struct cn_handed_set *s)
{
        for (size_t i = 0; i < s->n; i++)
                s->by_ino[i] = i;
        qsort_r(s->by_ino, s->n, sizeof(*s->by_ino), by_ino_cmp, s);
}

/* The first position in by_ino whose record has inode `ino`, or s->n. */
static size_t first_with(const struct cn_handed_set *s, unsigned long long ino)
{
        size_t lo = 0, hi = s->n;
        while (lo < hi) {
                size_t mid = lo + (hi - lo) / 2;
                if ((unsigned long long)s->h[s->by_ino[mid]].ino < ino)
                        lo = mid + 1;
                else
                        hi = mid;
        }
        return lo < s->n && (unsigned long long)s->h[s->by_ino[lo]].ino == ino ? lo : s->n;
}

static int pidns_of(pid_t pid, dev_t *dev, ino_t *ino)
{
        char path[64];
        struct stat st;
        snprintf(path, sizeof(path), "/proc/%d/ns/pid", (int)pid);
        if (stat(path, &st) < 0)
                return -errno;
        *dev = st.st_dev;
        *ino = st.st_ino;
        return 0;
}

static bool parse_pid(const char *name, pid_t *ret)
{
        char *end = NULL;
        if (name[0] < '1' || name[0] > '9')
                return false;
        errno = 0;
        long v = strtol(name, &end, 10);
        if (errno || *end || v <= 0 || v > INT32_MAX)
                return false;
        *ret = (pid_t)v;
        return true;
}

#define HIDDEN_MAX 256 /* sandbox processes one scan could not read, or kills */

enum pass {
        PASS_FIND,   /* the refused sockets: taken and shut down */
        PASS_QUEUED, /* the holders of Unix sockets with something queued */
};

struct scan {
        struct cn_handed_set *s;
        pid_t pid1; /* the sandbox's pid 1, or 0: none known */
        enum pass pass;
        size_t tasks, fds;
        bool truncated;
        pid_t hidden[HIDDEN_MAX]; /* in the sandbox, their fds unreadable */
        size_t n_hidden;
        pid_t victims[HIDDEN_MAX]; /* PASS_QUEUED: could receive one in transit */
        size_t n_victims;
};

/* PPid of pid from /proc/PID/status (readable whatever its dumpable flag),
 * or -errno. */
static pid_t parent_of(pid_t pid)
{
        char path[64];
        snprintf(path, sizeof(path), "/proc/%d/status", (int)pid);
        _cleanup_fclose_ FILE *f = fopen(path, "re");
        if (!f)
                return -errno;
        char line[256];
        while (fgets(line, sizeof(line), f)) {
                pid_t pp;
                if (strncmp(line, "PPid:", 5) == 0) {
                        line[strcspn(line, "\n")] = '\0';
                        const char *v = line + 5 + strspn(line + 5, " \t");
                        return parse_pid(v, &pp) ? pp : 0;
                }
        }
        return -EIO;
}

/* Whether pid descends from pid1: a process of the sandbox (orphans are
 * reparented within its pid namespace, never out of it). */
static bool descends_from(pid_t pid, pid_t pid1)
{
        for (int depth = 0; depth < 4096 && pid > 1; depth++) {
                pid_t pp = parent_of(pid);
                if (pp <= 0)
                        return false;
                if (pp == pid1)
                        return true;
                pid = pp;
        }
        return false;
}

static bool note_pid(pid_t *set, size_t *n, pid_t pid, bool *truncated)
{
        for (size_t i = 0; i < *n; i++)
                if (set[i] == pid)
                        return true;
        if (*n >= HIDDEN_MAX) {
                *truncated = true;
                return false;
        }
        set[(*n)++] = pid;
        return true;
}

/* A copy of fd `fd` of `pid`, or -errno. */
static int copy_fd(pid_t pid, int fd)
{
        _cleanup_close_ int pidfd = (int)syscall(SYS_pidfd_open, pid, 0);
        if (pidfd < 0)
                return -errno;
        int copy = (int)syscall(SYS_pidfd_getfd, pidfd, fd, 0);
        return copy < 0 ? -errno : copy;
}

/* The socket at `fd` of `pid` is record `h`: take it and shut it down.
 * Checked again on the copy (the fd may have been replaced meanwhile).
 * Returns -errno when it cannot be taken (gone: -ESRCH, -EBADF). */
static int take(struct cn_handed *h, pid_t pid, int fd)
{
        _cleanup_close_ int copy = copy_fd(pid, fd);
        if (copy < 0)
                return copy;
        struct stat st;
        if (fstat(copy, &st) < 0 || st.st_dev != h->dev || st.st_ino != h->ino)
                return 0;
        if (shutdown(copy, SHUT_RDWR) == 0 || errno == ENOTCONN) {
                h->cut = true;
                h->how = "revoked";
        }
        return 0;
}

static bool hide(struct scan *sc, pid_t pid);

/* Whether the Unix socket `copy` (fd `fd` of `pid`) may hold a socket in
 * transit: descriptors wait in what it has not received ("scm_fds" in its
 * fdinfo; without it, anything queued), or it listens (a connection not
 * yet accepted may hold some). */
static bool unix_may_hold(int copy, pid_t pid, int fd)
{
        int v = 0;
        socklen_t l = sizeof(v);
        if (getsockopt(copy, SOL_SOCKET, SO_DOMAIN, &v, &l) < 0 || v != AF_UNIX)
                return false;
        l = sizeof(v);
        if (getsockopt(copy, SOL_SOCKET, SO_ACCEPTCONN, &v, &l) == 0 && v)
                return true;
        char dir[48];
        snprintf(dir, sizeof(dir), "/proc/%d/fdinfo", (int)pid);
        char name[16];
        snprintf(name, sizeof(name), "%d", fd);
        _cleanup_close_ int d = open(dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
        struct fdinfo fi;
        if (d >= 0 && read_fdinfo(d, name, &fi) == 0 && fi.scm_fds >= 0)
                return fi.scm_fds > 0;
        if (ioctl(copy, SIOCINQ, &v) == 0 && v > 0)
                return true;
        /* A datagram of no bytes can carry descriptors: SIOCINQ says 0. */
        l = sizeof(v);
        if (getsockopt(copy, SOL_SOCKET, SO_TYPE, &v, &l) == 0 && v != SOCK_STREAM) {
                char b;
                return recv(copy, &b, 1, MSG_PEEK | MSG_DONTWAIT | MSG_TRUNC) >= 0;
        }
        return false;
}

/* One socket of a sandbox process, by its inode. Only sockets are ever
 * taken (pidfd_getfd): closing the copy of a file could block on its
 * file system (a flush). */
static void visit(struct scan *sc, pid_t pid, int fd, unsigned long long ino)
{
        struct cn_handed_set *s = sc->s;
        if (sc->pass == PASS_FIND) {
                for (size_t k = first_with(s, ino); k < s->n; k++) {
                        struct cn_handed *h = &s->h[s->by_ino[k]];
                        if ((unsigned long long)h->ino != ino)
                                break;
                        h->seen = true;
                        /* Listed but not to be taken (a ptrace check
                         * the listing does not make): killed if need be. */
                        if (h->refused && !h->cut && take(h, pid, fd) == -EPERM && !hide(sc, pid) &&
                            pid != sc->pid1)
                                sc->truncated = true;
                }
                return;
        }
        for (size_t i = 0; i < sc->n_victims; i++)
                if (sc->victims[i] == pid)
                        return;
        _cleanup_close_ int copy = copy_fd(pid, fd);
        struct stat st;
        if (copy < 0 || fstat(copy, &st) < 0 || !S_ISSOCK(st.st_mode) ||
            !unix_may_hold(copy, pid, fd))
                return;
        (void)note_pid(sc->victims, &sc->n_victims, pid, &sc->truncated);
}

static bool parse_fd(const char *name, int *ret)
{
        pid_t v = 0;
        if (!STREQ(name, "0") && !parse_pid(name, &v))
                return false;
        *ret = (int)v;
        return true;
}

/* One fd table: /proc/PID/task/TID/fd (the links name the sockets). */
static void scan_fds(struct scan *sc, pid_t pid, int fddir)
{
        DIR *d = fdopendir(fddir);
        if (!d) {
                close(fddir);
                sc->truncated = true;
                return;
        }
        struct dirent *de;
        while ((de = readdir(d))) {
                int fd;
                if (!parse_fd(de->d_name, &fd))
                        continue;
                if (++sc->fds > CN_HANDED_MAX_FDS) {
                        sc->truncated = true;
                        break;
                }
                char link[64];
                ssize_t n = readlinkat(dirfd(d), de->d_name, link, sizeof(link) - 1);
                if (n <= 0)
                        continue;
                link[n] = '\0';
                if (strncmp(link, "socket:[", 8) != 0)
                        continue;
                char *end = NULL;
                errno = 0;
                unsigned long long ino = strtoull(link + 8, &end, 10);
                if (errno || end == link + 8 || !STREQ(end, "]"))
                        continue;
                visit(sc, pid, fd, ino);
        }
        closedir(d);
}

/* One fd table through /proc/PID/task/TID/fdinfo: what an ordinary user
 * reads of a non-dumpable process of its own sandbox. Its fd directory is
 * owned by the root of the user namespace its memory belongs to, which the
 * sandbox does not map, so it is closed to the user; fdinfo and
 * pidfd_getfd(2) are allowed by the ptrace check, which the user passes as
 * the owner of the sandbox's user namespace. Sockets are told by their
 * mount: the kernel's one socket file system. */
static int scan_fdinfo(struct scan *sc, pid_t pid, int fdinfodir)
{
        if (sc->s->sock_mnt < 0) {
                close(fdinfodir);
                errno = EACCES; /* which are sockets is not known */
                return -EACCES;
        }
        DIR *d = fdopendir(fdinfodir);
        if (!d) {
                close(fdinfodir);
                return -errno;
        }
        struct dirent *de;
        while ((de = readdir(d))) {
                int fd;
                if (!parse_fd(de->d_name, &fd))
                        continue;
                if (++sc->fds > CN_HANDED_MAX_FDS) {
                        sc->truncated = true;
                        break;
                }
                struct fdinfo fi;
                int r = read_fdinfo(dirfd(d), de->d_name, &fi);
                if (r == -ENOENT)
                        continue; /* closed meanwhile */
                if (r < 0) {
                        sc->truncated = true;
                        break;
                }
                if (fi.mnt_id == sc->s->sock_mnt)
                        visit(sc, pid, fd, fi.ino);
        }
        closedir(d);
        return 0;
}

/* A process of the sandbox whose fds cannot be read at all: what it holds
 * is not known, so it is noted (killed if a refused socket is not reached
 * otherwise). False when it is not the sandbox's (or is its pid 1). */
static bool hide(struct scan *sc, pid_t pid)
{
        if (sc->pid1 <= 0 || pid == sc->pid1 || !descends_from(pid, sc->pid1))
                return false;
        (void)note_pid(sc->hidden, &sc->n_hidden, pid, &sc->truncated);
        return true;
}

static bool gone(int e)
{
        return e == ENOENT || e == ESRCH;
}

/* One task's fd table, by its links or else by fdinfo. */
static void scan_task(struct scan *sc, pid_t pid, int taskdir, pid_t tid)
{
        char p[48];
        snprintf(p, sizeof(p), "%d/fd", (int)tid);
        int dir = openat(taskdir, p, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
        if (dir >= 0) {
                scan_fds(sc, pid, dir);
                return;
        }
        if (gone(errno))
                return;
        if (errno == EACCES || errno == EPERM) {
                snprintf(p, sizeof(p), "%d/fdinfo", (int)tid);
                dir = openat(taskdir, p, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
                if (dir >= 0 && scan_fdinfo(sc, pid, dir) == 0)
                        return;
                if (gone(errno))
                        return;
        }
        if (errno != EACCES && errno != EPERM)
                sc->truncated = true; /* out of fds: not read, not known */
        else if (pid != sc->pid1 && !hide(sc, pid))
                sc->truncated = true; /* there but unreadable */
}

/* Every process of the pid namespace (dev, ino), every task's fd table. */
static int scan(struct scan *sc, dev_t nsdev, ino_t nsino)
{
        _cleanup_close_ int procfd = open("/proc", O_RDONLY | O_DIRECTORY | O_CLOEXEC);
        if (procfd < 0)
                return -errno;
        DIR *d = fdopendir(procfd);
        if (!d)
                return -errno;
        procfd = -1;
        struct dirent *de;
        while ((de = readdir(d))) {
                pid_t pid;
                if (!parse_pid(de->d_name, &pid))
                        continue;
                dev_t dev;
                ino_t ino;
                int r = pidns_of(pid, &dev, &ino);
                if (r < 0) {
                        /* Not readable: another user's, or the sandbox's
                         * but closed (noted). Out of fds: not known. */
                        if (r != -EACCES && r != -EPERM && !gone(-r))
                                sc->truncated = true;
                        else if (!gone(-r))
                                (void)hide(sc, pid);
                        if (sc->truncated)
                                break;
                        continue;
                }
                if (dev != nsdev || ino != nsino)
                        continue;
                /* Only what pid 1 started could be killed: the others'
                 * sockets are not even looked at. */
                if (sc->pass == PASS_QUEUED && (pid == sc->pid1 || !descends_from(pid, sc->pid1)))
                        continue;
                char path[64];
                snprintf(path, sizeof(path), "/proc/%d/task", (int)pid);
                DIR *t = opendir(path);
                if (!t) {
                        if (!gone(errno))
                                sc->truncated = true;
                        if (sc->truncated)
                                break;
                        continue;
                }
                struct dirent *te;
                while ((te = readdir(t))) {
                        pid_t tid;
                        if (!parse_pid(te->d_name, &tid))
                                continue;
                        if (++sc->tasks > CN_HANDED_MAX_TASKS) {
                                sc->truncated = true;
                                break;
                        }
                        scan_task(sc, pid, dirfd(t), tid);
                        if (sc->truncated)
                                break;
                }
                closedir(t);
                if (sc->truncated)
                        break;
        }
        closedir(d);
        return 0;
}

static void on_socket(void *ud, ino_t ino, int family, const struct inet_diag_sockid *id)
{
        struct cn_handed_set *s = ud;
        for (size_t k = first_with(s, (unsigned long long)ino); k < s->n; k++) {
                struct cn_handed *h = &s->h[s->by_ino[k]];
                if (h->ino != ino)
                        break;
                /* Its inode and its ports: this socket, not one that got
                 * a freed inode number again. */
                if (id->idiag_sport != h->lport || id->idiag_dport != h->rport)
                        continue;
                h->alive = true;
                h->family = family;
                h->id = *id;
        }
}

/* Which records' sockets still have a file, from the socket table. */
static int read_alive(struct cn_handed_set *s)
{
        for (size_t i = 0; i < s->n; i++)
                s->h[i].alive = false;
        if (s->nl < 0)
                s->nl = cn_sockdiag_open();
        if (s->nl < 0)
                return s->nl;
        int r = cn_sockdiag_walk(s->nl, on_socket, s);
        if (r < 0)
                for (size_t i = 0; i < s->n; i++)
                        s->h[i].alive = false;
        return r;
}

/* A refused record not cut yet whose socket may still be open somewhere:
 * so the socket table says; without it, any but one a scan that read
 * everything did not see (taken as closed). A socket the table does not
 * list has no file, or was reset: nothing can use it (its connect() is
 * refused, host_socket_reuse). */
static bool unreached(const struct cn_handed_set *s, const struct cn_handed *h)
{
        return h->refused && !h->cut && (s->table ? h->alive : h->seen || !s->full);
}

static size_t count_unreached(const struct cn_handed_set *s)
{
        size_t n = 0;
        for (size_t i = 0; i < s->n; i++)
                n += unreached(s, &s->h[i]);
        return n;
}

/* Kill a process of the sandbox (descent checked again on its pidfd, so a
 * pid reused meanwhile is not). */
static bool kill_in_sandbox(pid_t pid, pid_t pid1)
{
        _cleanup_close_ int pidfd = (int)syscall(SYS_pidfd_open, pid, 0);
        if (pidfd < 0 || !descends_from(pid, pid1))
                return false;
        return syscall(SYS_pidfd_send_signal, pidfd, SIGKILL, NULL, 0) == 0;
}

/* End the sandbox: its pid 1 is the caller's child, not reaped while this
 * runs, so its pid cannot have been reused (kill(2) when no pidfd can be
 * opened). */
static bool kill_pid1(pid_t pid1)
{
        if (pid1 <= 1)
                return false;
        _cleanup_close_ int pidfd = (int)syscall(SYS_pidfd_open, pid1, 0);
        if (pidfd >= 0)
                return syscall(SYS_pidfd_send_signal, pidfd, SIGKILL, NULL, 0) == 0;
        return kill(pid1, SIGKILL) == 0;
}

static void mark_killed(struct cn_handed_set *s)
{
        for (size_t i = 0; i < s->n; i++)
                if (unreached(s, &s->h[i])) {
                        s->h[i].cut = true;
                        s->h[i].how = "revoked_killed";
                }
}

/* Refused sockets open but in no fd table read: in transit inside an
 * SCM_RIGHTS message, or held by a process that could not be read. Fail
 * closed, as narrowly as what is known allows: the socket itself is
 * aborted (root); else every process of the sandbox that could not be read
 * or that holds a Unix socket with something queued (it could receive
 * one) is killed; else (nothing of the sandbox could be read, or nothing
 * there can hold it) the sandbox is ended. */
static void fail_closed(struct cn_handed_set *s, struct scan *sc, bool read_ok, dev_t nsdev,
                        ino_t nsino)
{
        for (size_t i = 0; s->table && i < s->n; i++) {
                struct cn_handed *h = &s->h[i];
                if (unreached(s, h) && cn_sockdiag_destroy(s->nl, h->family, &h->id) == 0) {
                        h->cut = true;
                        h->how = "revoked";
                }
        }
        if (count_unreached(s) == 0)
                return;
        size_t killed = 0;
        if (read_ok && !sc->truncated) {
                struct scan q = {.s = s, .pid1 = sc->pid1, .pass = PASS_QUEUED};
                if (scan(&q, nsdev, nsino) == 0 && !q.truncated) {
                        for (size_t i = 0; i < q.n_victims; i++)
                                killed += kill_in_sandbox(q.victims[i], sc->pid1);
                        for (size_t i = 0; i < sc->n_hidden; i++)
                                killed += kill_in_sandbox(sc->hidden[i], sc->pid1);
                }
        }
        if (killed == 0 && !kill_pid1(sc->pid1))
                return;
        mark_killed(s);
}

/* Forget the cut, and those whose socket is closed; how many were cut. */
static int compact(struct cn_handed_set *s, cn_handed_cut_fn cut, void *ud)
{
        size_t k = 0;
        int n = 0;
        for (size_t i = 0; i < s->n; i++) {
                struct cn_handed *h = &s->h[i];
                if (h->cut) {
                        if (cut)
                                cut(ud, &h->v, h->how);
                        n++;
                        continue;
                }
                if (s->table ? !h->alive : s->full && !h->seen)
                        continue;
                if (k != i)
                        s->h[k] = *h;
                k++;
        }
        s->n = k;
        return n;
}

/* After a scan (`full`: it read everything): the socket table is read when
 * a record was not seen or a refused one not cut (the one place that tells
 * a closed socket from one in transit); when every record was seen in an
 * fd table it has nothing to add. */
static void read_table(struct cn_handed_set *s, bool full)
{
        bool need = false;
        for (size_t i = 0; i < s->n && !need; i++)
                need = !s->h[i].seen || (s->h[i].refused && !s->h[i].cut);
        s->full = full;
        s->table = need && read_alive(s) == 0;
}

static int run(struct cn_handed_set *s, pid_t pid1, cn_handed_refused_fn refused,
               cn_handed_cut_fn cut, void *ud)
{
        dev_t nsdev = s->nsdev;
        ino_t nsino = s->nsino;
        int r = 0;
        if (!s->have_ns && (r = pidns_of(pid1, &nsdev, &nsino)) < 0 && !refused)
                return r;
        bool any = false;
        for (size_t i = 0; i < s->n; i++) {
                struct cn_handed *h = &s->h[i];
                h->seen = h->cut = false;
                h->how = NULL;
                h->refused = refused && refused(ud, &h->v);
                any |= h->refused;
        }
        index_inodes(s);
        s->full = false;
        if (!any && (s->table = read_alive(s) == 0))
                return compact(s, cut, ud); /* only the closed go */
        struct scan sc = {.s = s, .pid1 = pid1};
        bool read_ok = r == 0 && scan(&sc, nsdev, nsino) == 0;
        read_table(s, read_ok && !sc.truncated && sc.n_hidden == 0);
        if (read_ok && !sc.truncated && count_unreached(s) > 0) {
                /* One passed from process to process while the scan ran
                 * (in transit behind it) is in an fd table now. */
                struct scan again = {.s = s, .pid1 = pid1};
                read_ok = scan(&again, nsdev, nsino) == 0;
                sc = again;
                read_table(s, read_ok && !sc.truncated && sc.n_hidden == 0);
        }
        if (any && count_unreached(s) > 0)
                fail_closed(s, &sc, read_ok, nsdev, nsino);
        /* Nothing could cut or kill for those left: kept, tried again. */
        size_t left = any ? count_unreached(s) : 0;
        int n = compact(s, cut, ud);
        return left > 0 ? -EPERM : n;
}

int cn_handed_recheck(struct cn_handed_set *s, pid_t pid1, cn_handed_refused_fn refused,
                      cn_handed_cut_fn cut, void *ud)
{
        if (!s || s->n == 0)
                return 0;
        return run(s, pid1, refused, cut, ud);
}

static int port_of(const struct sockaddr_storage *ss, uint16_t *ret)
{
        if (ss->ss_family == AF_INET)
                *ret = ((const struct sockaddr_in *)ss)->sin_port;
        else if (ss->ss_family == AF_INET6)
                *ret = ((const struct sockaddr_in6 *)ss)->sin6_port;
        else
                return -EAFNOSUPPORT;
        return 0;
}

int cn_handed_add(struct cn_handed_set *s, pid_t pid, int sock, const struct netgate_verdict *v)
{
        struct stat st;
        if (fstat(sock, &st) < 0)
                return -errno;
        struct sockaddr_storage me, peer;
        socklen_t ml = sizeof(me), pl = sizeof(peer);
        uint16_t lport = 0, rport = 0;
        if (getsockname(sock, (struct sockaddr *)&me, &ml) < 0 ||
            getpeername(sock, (struct sockaddr *)&peer, &pl) < 0)
                return -errno;
        int r = port_of(&me, &lport);
        if (r < 0 || (r = port_of(&peer, &rport)) < 0)
                return r;
        if (!s->have_ns) {
                r = pidns_of(pid, &s->nsdev, &s->nsino);
                if (r < 0)
                        return r;
                s->have_ns = true;
        }
        if (s->n >= CN_HANDED_MAX)
                (void)run(s, pid, NULL, NULL, NULL);
        if (s->n >= CN_HANDED_MAX)
                return -ENOSPC;
        struct cn_handed *h = &s->h[s->n++];
        memset(h, 0, sizeof(*h));
        h->dev = st.st_dev;
        h->ino = st.st_ino;
        h->lport = lport;
        h->rport = rport;
        h->v = *v;
        return 0;
}

void cn_handed_pop(struct cn_handed_set *s)
{
        if (s->n > 0)
                s->n--;
}
