/* SPDX-License-Identifier: Apache-2.0 */
/* The sandbox's fd tables, read for the direct path's handed sockets
 * (connect-handed-internal.h): each refused one found is taken and shut
 * down; the holders of what cannot be reached are found to be killed. */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <linux/nsfs.h>
#include <linux/sockios.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <unistd.h>

#include "connect-handed-internal.h"
#include "util.h"

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
long long cn_sock_mount_id(int sock)
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

int cn_pidns_of(pid_t pid, dev_t *dev, ino_t *ino)
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

/* Pid namespaces nest at most 32 deep (MAX_PID_NS_LEVEL). */
#define PIDNS_DEPTH_MAX 33

int cn_pidns_within(pid_t pid, dev_t dev, ino_t ino)
{
        char path[64];
        snprintf(path, sizeof(path), "/proc/%d/ns/pid", (int)pid);
        int fd = open(path, O_RDONLY | O_CLOEXEC);
        if (fd < 0)
                return -errno;
        int r = 0;
        for (int depth = 0; depth < PIDNS_DEPTH_MAX; depth++) {
                struct stat st;
                if (fstat(fd, &st) < 0) {
                        r = -errno;
                        break;
                }
                if (st.st_dev == dev && st.st_ino == ino) {
                        r = 1;
                        break;
                }
                /* EPERM: the top (or beyond what this process sees). */
                int parent = ioctl(fd, NS_GET_PARENT);
                if (parent < 0) {
                        r = errno == EPERM ? 0 : -errno;
                        break;
                }
                close(fd);
                fd = parent;
        }
        close(fd);
        return r;
}

int cn_pidns_below_own(pid_t pid, dev_t *dev, ino_t *ino)
{
        struct stat own;
        if (stat("/proc/self/ns/pid", &own) < 0)
                return -errno;
        char path[64];
        snprintf(path, sizeof(path), "/proc/%d/ns/pid", (int)pid);
        int fd = open(path, O_RDONLY | O_CLOEXEC);
        if (fd < 0)
                return -errno;
        int r = -EPERM;
        for (int depth = 0; depth < PIDNS_DEPTH_MAX; depth++) {
                struct stat st, up;
                int parent = fstat(fd, &st) < 0 ? -1 : ioctl(fd, NS_GET_PARENT);
                if (parent < 0) {
                        r = -errno; /* EPERM: this process's own, or not below it */
                        break;
                }
                bool found =
                    fstat(parent, &up) == 0 && up.st_dev == own.st_dev && up.st_ino == own.st_ino;
                close(fd);
                fd = parent;
                if (found) {
                        *dev = st.st_dev;
                        *ino = st.st_ino;
                        r = 0;
                        break;
                }
        }
        close(fd);
        return r;
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

/* Whether pid descends from pid1, a process of the sandbox (orphans are
 * reparented within its pid namespace, never out of it): 1; 0 when it
 * does not (or is gone); -1 when it cannot be told: its parents go deeper
 * than are followed (s->descent_max). */
static int descent(const struct cn_handed_set *s, pid_t pid, pid_t pid1)
{
        for (unsigned depth = 0; depth < s->descent_max && pid > 1; depth++) {
                pid_t pp = parent_of(pid);
                if (pp <= 0)
                        return 0;
                if (pp == pid1)
                        return 1;
                pid = pp;
        }
        return pid > 1 ? -1 : 0;
}

static bool descends_from(const struct cn_handed_set *s, pid_t pid, pid_t pid1)
{
        return descent(s, pid, pid1) > 0;
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

/* A copy of fd `fd` of `pid`, listed as a socket, or -errno: taken only
 * if it still is one (the fd may have been replaced since it was listed;
 * anything else is let go by a closer, connect-take.h). */
static int copy_fd(pid_t pid, int fd)
{
        _cleanup_close_ int pidfd = (int)syscall(SYS_pidfd_open, pid, 0);
        if (pidfd < 0)
                return -errno;
        int copy = -1;
        int r = cn_copy_socket(pidfd, fd, &copy);
        return r < 0 ? r : copy;
}

/* The socket at `fd` of `pid` is record `h`: take it and shut it down.
 * Checked again on the copy (the fd may have been replaced meanwhile).
 * Returns -errno when it cannot be taken (gone: -ESRCH, -EBADF). */
static int take(struct cn_handed *h, pid_t pid, int fd)
{
        _cleanup_drop_ int copy = copy_fd(pid, fd);
        if (copy == -ENOTSOCK)
                return -ESTALE; /* another file now: not it */
        if (copy < 0)
                return copy;
        struct stat st;
        if (fstat(copy, &st) < 0 || st.st_dev != h->dev || st.st_ino != h->ino)
                return 0;
        /* The same inode number on another socket (they wrap): not it. */
        uint64_t cookie = 0;
        socklen_t cl = sizeof(cookie);
        if (h->cookie &&
            (getsockopt(copy, SOL_SOCKET, SO_COOKIE, &cookie, &cl) < 0 || cookie != h->cookie))
                return -ESTALE;
        if (shutdown(copy, SHUT_RDWR) == 0 || errno == ENOTCONN) {
                h->cut = true;
                h->how = "revoked";
        }
        return 0;
}

static bool hide(struct cn_scan *sc, pid_t pid);

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
static void visit(struct cn_scan *sc, pid_t pid, int fd, unsigned long long ino)
{
        struct cn_handed_set *s = sc->s;
        if (sc->pass == CN_PASS_FIND) {
                for (size_t k = first_with(s, ino); k < s->n; k++) {
                        struct cn_handed *h = &s->h[s->by_ino[k]];
                        if ((unsigned long long)h->ino != ino)
                                break;
                        bool was = h->seen;
                        h->seen = true;
                        int t = h->refused && !h->cut ? take(h, pid, fd) : 0;
                        if (t == -ESTALE)
                                h->seen = was; /* another socket: not seen */
                        if (t == -EAGAIN)
                                sc->truncated = true; /* every closer hangs: not taken */
                        /* Listed but not to be taken (a ptrace check
                         * the listing does not make): killed if need be. */
                        if (t == -EPERM && !hide(sc, pid) && pid != sc->pid1)
                                sc->truncated = true;
                }
                return;
        }
        for (size_t i = 0; i < sc->n_victims; i++)
                if (sc->victims[i] == pid)
                        return;
        _cleanup_drop_ int copy = copy_fd(pid, fd);
        struct stat st;
        if (copy < 0 || fstat(copy, &st) < 0 || !S_ISSOCK(st.st_mode) ||
            !unix_may_hold(copy, pid, fd))
                return;
        /* One that could receive it but cannot be told from a process
         * outside the sandbox cannot be killed: the sandbox ends instead. */
        if (sc->unsure)
                sc->truncated = true;
        else
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
static void scan_fds(struct cn_scan *sc, pid_t pid, int fddir)
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
static int scan_fdinfo(struct cn_scan *sc, pid_t pid, int fdinfodir)
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
static bool hide(struct cn_scan *sc, pid_t pid)
{
        if (sc->pid1 <= 0 || pid == sc->pid1 || !descends_from(sc->s, pid, sc->pid1))
                return false;
        (void)note_pid(sc->hidden, &sc->n_hidden, pid, &sc->truncated);
        return true;
}

static bool gone(int e)
{
        return e == ENOENT || e == ESRCH;
}

/* One task's fd table, by its links or else by fdinfo. */
static void scan_task(struct cn_scan *sc, pid_t pid, int taskdir, pid_t tid)
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

/* Every process of the pid namespace (dev, ino) and those nested in it,
 * every task's fd table. */
int cn_scan(struct cn_scan *sc, dev_t nsdev, ino_t nsino)
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
                int r = cn_pidns_within(pid, nsdev, nsino);
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
                if (r == 0)
                        continue;
                /* Only what pid 1 started could be killed: the others'
                 * sockets are not even looked at. One whose descent
                 * cannot be told is (unsure): it may be the sandbox's. */
                if (sc->pass == CN_PASS_QUEUED) {
                        int dsc = pid == sc->pid1 ? 0 : descent(sc->s, pid, sc->pid1);
                        if (dsc == 0)
                                continue;
                        sc->unsure = dsc < 0;
                }
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

/* Kill a process of the sandbox (descent checked again on its pidfd, so a
 * pid reused meanwhile is not). */
int cn_kill_in_sandbox(const struct cn_handed_set *s, pid_t pid, pid_t pid1)
{
        _cleanup_close_ int pidfd = (int)syscall(SYS_pidfd_open, pid, 0);
        if (pidfd < 0)
                return errno == ESRCH ? 0 : -1;
        int d = descent(s, pid, pid1);
        if (d <= 0)
                return d; /* 0: the pid is another's now, the process gone */
        if (syscall(SYS_pidfd_send_signal, pidfd, SIGKILL, NULL, 0) == 0)
                return 1;
        return errno == ESRCH ? 0 : -1;
}
