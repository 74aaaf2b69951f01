/* SPDX-License-Identifier: Apache-2.0 */
/* The direct path's handed sockets, cut at a rules change (connect-handed.h). */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <unistd.h>

#include "connect-handed.h"
#include "util.h"

struct cn_handed {
        dev_t dev;
        ino_t ino;
        bool seen, refused, cut;
        struct netgate_verdict v;
};

struct cn_handed_set {
        struct cn_handed *h;
        size_t n;
        bool have_ns; /* the sandbox's pid namespace, read from a caller */
        dev_t nsdev;
        ino_t nsino;
};

struct cn_handed_set *cn_handed_new(void)
{
        struct cn_handed_set *s = xcalloc(1, sizeof(*s));
        s->h = xcalloc(CN_HANDED_MAX, sizeof(*s->h));
        return s;
}

struct cn_handed_set *cn_handed_free(struct cn_handed_set *s)
{
        if (s) {
                free(s->h);
                free(s);
        }
        return NULL;
}

size_t cn_handed_count(const struct cn_handed_set *s)
{
        return s ? s->n : 0;
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

#define HIDDEN_MAX 256 /* sandbox processes one scan could not read */

struct scan {
        struct cn_handed_set *s;
        pid_t pid1; /* the sandbox's pid 1, or 0: none known */
        size_t tasks, fds;
        bool truncated;
        pid_t hidden[HIDDEN_MAX]; /* in the sandbox, their fds unreadable */
        size_t n_hidden;
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

/* The socket at `fd` of `pid` is record `h`: take it and shut it down.
 * Checked again on the copy (the fd may have been replaced meanwhile). */
static void take(struct cn_handed *h, pid_t pid, int fd)
{
        _cleanup_close_ int pidfd = (int)syscall(SYS_pidfd_open, pid, 0);
        if (pidfd < 0)
                return;
        _cleanup_close_ int copy = (int)syscall(SYS_pidfd_getfd, pidfd, fd, 0);
        struct stat st;
        if (copy < 0 || fstat(copy, &st) < 0 || st.st_dev != h->dev || st.st_ino != h->ino)
                return;
        if (shutdown(copy, SHUT_RDWR) == 0 || errno == ENOTCONN)
                h->cut = true;
}

/* One fd table: /proc/PID/task/TID/fd. */
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
                if (de->d_name[0] == '.')
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
                pid_t parsed = 0;
                if (!STREQ(de->d_name, "0") && !parse_pid(de->d_name, &parsed))
                        continue;
                int fd = (int)parsed;
                for (size_t i = 0; i < sc->s->n; i++) {
                        struct cn_handed *h = &sc->s->h[i];
                        if ((unsigned long long)h->ino != ino)
                                continue;
                        h->seen = true;
                        if (h->refused && !h->cut)
                                take(h, pid, fd);
                }
        }
        closedir(d);
}

/* A process of the sandbox whose entries cannot be read (it made itself
 * non-dumpable): what it holds is not known, so it is noted for
 * cut_hidden. False when it is not the sandbox's (or is its pid 1). */
static bool hide(struct scan *sc, pid_t pid)
{
        if (sc->pid1 <= 0 || pid == sc->pid1 || !descends_from(pid, sc->pid1))
                return false;
        for (size_t i = 0; i < sc->n_hidden; i++)
                if (sc->hidden[i] == pid)
                        return true;
        if (sc->n_hidden < HIDDEN_MAX)
                sc->hidden[sc->n_hidden++] = pid;
        else
                sc->truncated = true;
        return true;
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
                if (r < 0 && r != -ENOENT && hide(sc, pid))
                        continue;
                if (r < 0 || dev != nsdev || ino != nsino)
                        continue;
                char path[64];
                snprintf(path, sizeof(path), "/proc/%d/task", (int)pid);
                DIR *t = opendir(path);
                if (!t)
                        continue; /* gone */
                struct dirent *te;
                while ((te = readdir(t))) {
                        pid_t tid;
                        if (!parse_pid(te->d_name, &tid))
                                continue;
                        if (++sc->tasks > CN_HANDED_MAX_TASKS) {
                                sc->truncated = true;
                                break;
                        }
                        char fdp[32];
                        snprintf(fdp, sizeof(fdp), "%d/fd", (int)tid);
                        int fddir = openat(dirfd(t), fdp, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
                        if (fddir < 0) {
                                if (errno != ENOENT && !hide(sc, pid))
                                        sc->truncated = true; /* there but unreadable */
                                continue;
                        }
                        scan_fds(sc, pid, fddir);
                }
                closedir(t);
                if (sc->truncated)
                        break;
        }
        closedir(d);
        return 0;
}

/* Forget the cut and (after a full scan) the unseen; how many were cut. */
static int compact(struct cn_handed_set *s, bool full, cn_handed_cut_fn cut, void *ud)
{
        size_t k = 0;
        int n = 0;
        for (size_t i = 0; i < s->n; i++) {
                struct cn_handed *h = &s->h[i];
                if (h->cut) {
                        if (cut)
                                cut(ud, &h->v);
                        n++;
                        continue;
                }
                if (full && !h->seen)
                        continue;
                h->seen = h->refused = false;
                if (k != i)
                        s->h[k] = *h;
                k++;
        }
        s->n = k;
        return n;
}

/* Refused sockets not found, and sandbox processes that could not be
 * read: fail closed. Each such process is killed (it may hold one; a pid
 * reused meanwhile is not, as descent is checked again on its pidfd), and
 * the refused sockets it could hold are recorded cut. */
static void cut_hidden(struct cn_handed_set *s, struct scan *sc)
{
        bool unfound = false;
        for (size_t i = 0; i < s->n; i++)
                unfound |= s->h[i].refused && !s->h[i].cut;
        if (!unfound || sc->n_hidden == 0)
                return;
        size_t killed = 0;
        for (size_t i = 0; i < sc->n_hidden; i++) {
                _cleanup_close_ int pidfd = (int)syscall(SYS_pidfd_open, sc->hidden[i], 0);
                if (pidfd < 0 || !descends_from(sc->hidden[i], sc->pid1))
                        continue;
                if (syscall(SYS_pidfd_send_signal, pidfd, SIGKILL, NULL, 0) == 0)
                        killed++;
        }
        if (killed == 0)
                return;
        for (size_t i = 0; i < s->n; i++)
                if (s->h[i].refused && !s->h[i].cut && !s->h[i].seen)
                        s->h[i].cut = true;
}

static int run(struct cn_handed_set *s, pid_t pid1, cn_handed_refused_fn refused,
               cn_handed_cut_fn cut, void *ud)
{
        dev_t nsdev = s->nsdev;
        ino_t nsino = s->nsino;
        int r = 0;
        if (!s->have_ns && (r = pidns_of(pid1, &nsdev, &nsino)) < 0)
                return r;
        struct scan sc = {.s = s, .pid1 = refused ? pid1 : 0};
        for (size_t i = 0; i < s->n; i++) {
                s->h[i].seen = s->h[i].cut = false;
                s->h[i].refused = refused && refused(ud, &s->h[i].v);
        }
        r = scan(&sc, nsdev, nsino);
        if (r < 0) {
                for (size_t i = 0; i < s->n; i++)
                        s->h[i].seen = s->h[i].refused = s->h[i].cut = false;
                return r;
        }
        cut_hidden(s, &sc);
        /* What a process that could not be read holds is not known: its
         * sockets may be among the unseen, which are kept. */
        return compact(s, !sc.truncated && sc.n_hidden == 0, cut, ud);
}

int cn_handed_recheck(struct cn_handed_set *s, pid_t pid1, cn_handed_refused_fn refused,
                      cn_handed_cut_fn cut, void *ud)
{
        if (!s || s->n == 0)
                return 0;
        return run(s, pid1, refused, cut, ud);
}

int cn_handed_add(struct cn_handed_set *s, pid_t pid, int sock, const struct netgate_verdict *v)
{
        struct stat st;
        if (fstat(sock, &st) < 0)
                return -errno;
        if (!s->have_ns) {
                int r = pidns_of(pid, &s->nsdev, &s->nsino);
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
        h->v = *v;
        return 0;
}

void cn_handed_pop(struct cn_handed_set *s)
{
        if (s->n > 0)
                s->n--;
}
