/* SPDX-License-Identifier: Apache-2.0 */
/* The direct path's handed sockets, cut at a rules change (connect-handed.h). */
#include <errno.h>
#include <netinet/in.h>
#include <signal.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

#include "connect-handed-internal.h"
#include "connect-sockdiag.h"
#include "util.h"

struct cn_handed_set *cn_handed_new(void)
{
        struct cn_handed_set *s = xcalloc(1, sizeof(*s));
        s->h = xcalloc(CN_HANDED_MAX, sizeof(*s->h));
        s->by_ino = xcalloc(CN_HANDED_MAX, sizeof(*s->by_ino));
        s->descent_max = CN_DESCENT_MAX;
        /* Opened now, so that it is there when no fd can be opened later. */
        s->nl = cn_sockdiag_open();
        s->sock_mnt = cn_sock_mount_id(s->nl);
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

static void on_socket(void *ud, ino_t ino, int family, const struct inet_diag_sockid *id)
{
        struct cn_handed_set *s = ud;
        for (size_t k = first_with(s, (unsigned long long)ino); k < s->n; k++) {
                struct cn_handed *h = &s->h[s->by_ino[k]];
                if (h->ino != ino)
                        break;
                /* Its inode, its ports and its cookie: this socket, not
                 * one that got a freed inode number again (32-bit, they
                 * wrap), whoever's it is. */
                uint64_t cookie = (uint64_t)id->idiag_cookie[1] << 32 | id->idiag_cookie[0];
                if (id->idiag_sport != h->lport || id->idiag_dport != h->rport ||
                    (h->cookie && cookie != h->cookie))
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
                if (s->h[i].pending) {
                        s->h[i].cut = true;
                        s->h[i].how = "revoked_killed";
                }
}

/* Whether the processes killed took the refused sockets left (pending)
 * with them: each is gone from the socket table within about 2.5 s (a
 * process's files close as it exits, after its memory is freed; the last
 * copy of a socket that was in transit to it a moment after). One still there was passed
 * on, or is held where no kill reached. Without the table there is
 * nothing to check against (a scan that read everything decided). */
static bool cut_by_kills(struct cn_handed_set *s)
{
        if (!s->table)
                return true;
        for (long ms = CN_HANDED_WAIT_FIRST_MS; ms <= CN_HANDED_WAIT_LAST_MS; ms *= 2) {
                struct timespec ts = {.tv_sec = ms / 1000, .tv_nsec = ms % 1000 * 1000000L};
                while (nanosleep(&ts, &ts) < 0 && errno == EINTR) {
                }
                if (read_alive(s) < 0)
                        return false;
                bool left = false;
                for (size_t i = 0; i < s->n && !left; i++)
                        left = s->h[i].pending && s->h[i].alive;
                if (!left)
                        return true;
        }
        return false;
}

/* Refused sockets open but in no fd table read: in transit inside an
 * SCM_RIGHTS message, or held by a process that could not be read. Fail
 * closed, as narrowly as what is known allows: the socket itself is
 * aborted (root); else every process of the sandbox that could not be read
 * or that holds a Unix socket with something queued (it could receive
 * one) is killed; else (nothing of the sandbox could be read, or nothing
 * there can hold it) the sandbox is ended. */
static void fail_closed(struct cn_handed_set *s, struct cn_scan *sc, bool read_ok, dev_t nsdev,
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
        for (size_t i = 0; i < s->n; i++)
                s->h[i].pending = unreached(s, &s->h[i]);
        size_t killed = 0;
        bool missed = false; /* one that could hold it lives on */
        if (read_ok && !sc->truncated) {
                struct cn_scan q = {.s = s, .pid1 = sc->pid1, .pass = CN_PASS_QUEUED};
                if (cn_scan(&q, nsdev, nsino) == 0 && !q.truncated) {
                        for (size_t i = 0; i < q.n_victims + sc->n_hidden; i++) {
                                pid_t pid =
                                    i < q.n_victims ? q.victims[i] : sc->hidden[i - q.n_victims];
                                int k = cn_kill_in_sandbox(s, pid, sc->pid1);
                                killed += k > 0;
                                missed |= k < 0;
                        }
                }
        }
        /* Whether the kills took the sockets along is seen on the caller's
         * timers (cn_handed_wait_step), the loop free meanwhile. */
        if (killed > 0 && !missed && s->table && s->async) {
                s->waiting = true;
                s->wait_pid1 = sc->pid1;
                s->wait_ms = CN_HANDED_WAIT_FIRST_MS;
                return;
        }
        /* Nothing killed, one not killed, or the socket still there after
         * the kills: the sandbox ends. */
        if ((killed == 0 || missed || !cut_by_kills(s)) && !kill_pid1(sc->pid1))
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
        if (!s->have_ns && (r = cn_pidns_of(pid1, &nsdev, &nsino)) < 0 && !refused)
                return r;
        bool any = false;
        for (size_t i = 0; i < s->n; i++) {
                struct cn_handed *h = &s->h[i];
                h->seen = h->cut = h->pending = false;
                h->how = NULL;
                h->refused = refused && refused(ud, &h->v);
                any |= h->refused;
        }
        index_inodes(s);
        s->full = false;
        if (!any && (s->table = read_alive(s) == 0))
                return compact(s, cut, ud); /* only the closed go */
        struct cn_scan sc = {.s = s, .pid1 = pid1};
        bool read_ok = r == 0 && cn_scan(&sc, nsdev, nsino) == 0;
        read_table(s, read_ok && !sc.truncated && sc.n_hidden == 0);
        if (read_ok && !sc.truncated && count_unreached(s) > 0) {
                /* One passed from process to process while the scan ran
                 * (in transit behind it) is in an fd table now. */
                struct cn_scan again = {.s = s, .pid1 = pid1};
                read_ok = cn_scan(&again, nsdev, nsino) == 0;
                sc = again;
                read_table(s, read_ok && !sc.truncated && sc.n_hidden == 0);
        }
        if (any && count_unreached(s) > 0)
                fail_closed(s, &sc, read_ok, nsdev, nsino);
        /* Nothing could cut or kill for those left: kept, tried again. */
        size_t left = any ? count_unreached(s) : 0;
        int n = compact(s, cut, ud);
        if (s->waiting)
                return -EINPROGRESS; /* the pending ones: cn_handed_wait_step */
        return left > 0 ? -EPERM : n;
}

void cn_handed_wait_async(struct cn_handed_set *s)
{
        s->async = true;
}

bool cn_handed_waiting(const struct cn_handed_set *s)
{
        return s && s->waiting;
}

int cn_handed_wait_step(struct cn_handed_set *s, cn_handed_cut_fn cut, void *ud,
                        unsigned *ret_next_ms)
{
        if (!s->waiting)
                return 0;
        bool left = true;
        if (read_alive(s) == 0) {
                left = false;
                for (size_t i = 0; i < s->n && !left; i++)
                        left = s->h[i].pending && s->h[i].alive;
        } else {
                s->table = s->full = false; /* nothing is known closed: all kept */
        }
        if (left && s->wait_ms * 2 <= CN_HANDED_WAIT_LAST_MS) {
                s->wait_ms *= 2;
                *ret_next_ms = s->wait_ms;
                return 1;
        }
        s->waiting = false;
        bool ended = !left || kill_pid1(s->wait_pid1);
        if (ended)
                mark_killed(s);
        for (size_t i = 0; i < s->n; i++)
                s->h[i].pending = false;
        int n = compact(s, cut, ud);
        return ended ? n : -EPERM;
}

int cn_handed_recheck(struct cn_handed_set *s, pid_t pid1, cn_handed_refused_fn refused,
                      cn_handed_cut_fn cut, void *ud)
{
        if (!s || s->n == 0)
                return 0;
        if (s->waiting)
                return -EINPROGRESS;
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

int cn_handed_add(struct cn_handed_set *s, pid_t pid1, int sock, const struct netgate_verdict *v)
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
                r = cn_pidns_of(pid1, &s->nsdev, &s->nsino);
                if (r < 0)
                        return r;
                s->have_ns = true;
        }
        if (s->n >= CN_HANDED_MAX && !s->waiting)
                (void)run(s, pid1, NULL, NULL, NULL);
        if (s->n >= CN_HANDED_MAX)
                return -ENOSPC;
        uint64_t cookie = 0;
        socklen_t cl = sizeof(cookie);
        if (getsockopt(sock, SOL_SOCKET, SO_COOKIE, &cookie, &cl) < 0)
                cookie = 0; /* an older kernel: the inode and ports alone */
        struct cn_handed *h = &s->h[s->n++];
        memset(h, 0, sizeof(*h));
        h->cookie = cookie;
        h->dev = st.st_dev;
        h->ino = st.st_ino;
        h->lport = lport;
        h->rport = rport;
        h->v = *v;
        return 0;
}

int cn_handed_learn_ns(struct cn_handed_set *s, pid_t pid1, pid_t caller)
{
        if (s->have_ns)
                return 0;
        int r = cn_pidns_of(pid1, &s->nsdev, &s->nsino);
        if (r < 0)
                r = cn_pidns_below_own(caller, &s->nsdev, &s->nsino);
        if (r < 0)
                return r;
        s->have_ns = true;
        return 1;
}

void cn_handed_forget_ns(struct cn_handed_set *s)
{
        s->have_ns = false;
}

void cn_handed_pop(struct cn_handed_set *s)
{
        if (s->n > 0)
                s->n--;
}
