/* SPDX-License-Identifier: Apache-2.0 */
/* Transparent mode on the host (connect-notify.h). */
#include <errno.h>
#include <event2/event.h>
#include <fcntl.h>
#include <linux/seccomp.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <linux/sockios.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/uio.h>
#include <sys/un.h>
#include <time.h>
#include <grp.h>
#include <limits.h>
#include <linux/openat2.h>
#include <stddef.h>
#include <sys/fsuid.h>
#include <sys/random.h>
#include <unistd.h>

#include "connect-handed.h"
#include "connect-notify.h"
#include "connect-take.h"
#include "connect-unix.h"
#include "fs.h"
#include "netgate/transparent.h"
#include "util.h"

#define CN_PENDING_MAX     256
#define CN_CONNECT_TIMEOUT 30 /* seconds, as the gate's own connects */
#define CN_UNIX_RETRY_US   10000

struct cn_pending {
        struct sv_connect_notify *cn;
        struct cn_pending *next, **pprev;
        uint64_t id;
        int target_fd; /* the caller's fd number */
        bool nonblock, cloexec, nodelay, keepalive;
        bool local; /* a local address, connected here on the caller's own socket */
        int sock;   /* the host's socket, connecting (or the caller's, to the relay) */
        int dup;    /* the caller's socket (pidfd_getfd) */
        int domain; /* its family */
        struct event *ev;
        struct netgate_verdict v;
        /* A Unix connect to a path: resolved and made by a helper process
         * (connect-unix.h), whose answer comes on res.answer; a blocking
         * caller's, to a listener whose backlog is full, is tried again
         * (unix_retry) until it is taken or times out. */
        pid_t tid;
        struct sockaddr_storage addr;
        size_t addr_len;
        uint64_t deadline_us;
        struct sv_unix_pending res;
        bool resolving; /* res holds a helper */
};

struct sv_connect_notify {
        struct event_base *base;
        struct netgate *g;
        int fd;
        struct event *ev;
        size_t notif_size, resp_size;
        struct cn_pending *pending;
        size_t n_pending;
        struct cn_handed_set *handed; /* the direct path's sockets handed over */
        long long sock_mnt;           /* the socket file system's mount id (connect-take.h) */
        pid_t pid1;                   /* the sandbox's pid 1; 0: not known, nothing handed */
        struct event *wait_ev;        /* a revoke's wait for its kills (connect-handed.h) */
        bool recheck_again;           /* a revoke came during it: rechecked after */
        pid_t recheck_pid1;
};

static int respond(struct sv_connect_notify *cn, uint64_t id, int error, uint32_t flags)
{
        _cleanup_free_ struct seccomp_notif_resp *resp = xcalloc(1, cn->resp_size);
        resp->id = id;
        resp->error = error ? -error : 0;
        resp->val = 0;
        resp->flags = flags;
        return ioctl(cn->fd, SECCOMP_IOCTL_NOTIF_SEND, resp) < 0 ? -errno : 0;
}

static bool id_valid(struct sv_connect_notify *cn, uint64_t id)
{
        return ioctl(cn->fd, SECCOMP_IOCTL_NOTIF_ID_VALID, &id) == 0;
}

static void pending_free(struct cn_pending *p)
{
        if (p->pprev) {
                *p->pprev = p->next;
                if (p->next)
                        p->next->pprev = p->pprev;
                p->cn->n_pending--;
        }
        if (p->ev)
                event_free(p->ev);
        if (p->resolving)
                sv_unix_connect_stop(&p->res);
        /* Both may be the sandbox's (the relay's socket is its own; the
         * direct path's is in its hands once added): cn_drop(). */
        cn_drop(p->sock);
        cn_drop(p->dup);
        free(p);
}

static void pending_add(struct sv_connect_notify *cn, struct cn_pending *p)
{
        p->next = cn->pending;
        if (p->next)
                p->next->pprev = &p->next;
        p->pprev = &cn->pending;
        cn->pending = p;
        cn->n_pending++;
}

/* Loopback and the local families stay inside the sandbox: its namespace
 * holds nothing else, so what the kernel reads again (after the caller may
 * have changed it) still cannot leave. */
static bool stays_inside(const struct sockaddr_storage *ss, size_t len)
{
        if (len < sizeof(sa_family_t))
                return true; /* the kernel refuses it */
        if (ss->ss_family == AF_INET) {
                if (len < sizeof(struct sockaddr_in))
                        return true;
                const struct sockaddr_in *in = (const void *)ss;
                uint32_t a = ntohl(in->sin_addr.s_addr) >> 24;
                return a == 127 || a == 0; /* 0.0.0.0/8 is this host: loopback */
        }
        if (ss->ss_family == AF_INET6) {
                if (len < sizeof(struct sockaddr_in6))
                        return true;
                const struct in6_addr *a = &((const struct sockaddr_in6 *)ss)->sin6_addr;
                static const uint8_t mapped_lo[13] = {0, 0, 0, 0,    0,    0,  0,
                                                      0, 0, 0, 0xff, 0xff, 127};
                return IN6_IS_ADDR_LOOPBACK(a) || IN6_IS_ADDR_UNSPECIFIED(a) ||
                       memcmp(a->s6_addr, mapped_lo, 13) == 0;
        }
        return true; /* AF_UNIX, AF_UNSPEC, AF_NETLINK, ...: nothing beyond */
}

/* What the caller's socket is: type and protocol, and the options the
 * host's socket takes over. */
static int inspect_socket(pid_t tid, int fd, struct cn_pending *p, bool *stream)
{
        unsigned long flags = 0;
        int r = cn_take_socket(tid, fd, p->cn->sock_mnt, &p->dup, &flags);
        if (r < 0)
                return r;
        int s = p->dup, type = 0, proto = 0, on = 0;
        socklen_t l = sizeof(type);
        if (getsockopt(s, SOL_SOCKET, SO_TYPE, &type, &l) < 0)
                return -errno; /* ENOTSOCK */
        l = sizeof(proto);
        if (getsockopt(s, SOL_SOCKET, SO_PROTOCOL, &proto, &l) < 0)
                return -errno;
        *stream = type == SOCK_STREAM && proto == IPPROTO_TCP;
        l = sizeof(p->domain);
        if (getsockopt(s, SOL_SOCKET, SO_DOMAIN, &p->domain, &l) < 0)
                return -errno;
        l = sizeof(on);
        p->nodelay = *stream && getsockopt(s, IPPROTO_TCP, TCP_NODELAY, &on, &l) == 0 && on;
        l = sizeof(on);
        p->keepalive = getsockopt(s, SOL_SOCKET, SO_KEEPALIVE, &on, &l) == 0 && on;
        p->nonblock = flags & O_NONBLOCK;
        p->cloexec = flags & O_CLOEXEC;
        return 0;
}

static void finish(struct cn_pending *p, int error)
{
        struct sv_connect_notify *cn = p->cn;
        if (p->local) {
                (void)respond(cn, p->id, error, 0);
                pending_free(p);
                return;
        }
        if (error) {
                netgate_transparent_record(cn->g, &p->v, "upstream_failed");
                (void)respond(cn, p->id, error, 0);
                pending_free(p);
                return;
        }
        if (p->v.relay) {
                /* Connected to the relay: the gate records it when it ends. */
                (void)respond(cn, p->id, 0, 0);
                pending_free(p);
                return;
        }
        if (!netgate_transparent_allowed_now(cn->g, &p->v)) {
                /* The rules changed while it connected (a revoke): the
                 * sandbox never gets it. */
                netgate_transparent_record(cn->g, &p->v, "revoked");
                (void)respond(cn, p->id, ECONNREFUSED, 0);
                pending_free(p);
                return;
        }
        int one = 1;
        if (p->nodelay)
                (void)setsockopt(p->sock, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one));
        if (p->keepalive)
                (void)setsockopt(p->sock, SOL_SOCKET, SO_KEEPALIVE, &one, sizeof(one));
        int fl = fcntl(p->sock, F_GETFL);
        if (fl >= 0 && !p->nonblock)
                (void)fcntl(p->sock, F_SETFL, fl & ~O_NONBLOCK);
        /* Recorded before it is handed over, so a later revoke can find
         * and cut it; one that cannot be recorded is not handed over. */
        int hr = cn->pid1 > 0 ? cn_handed_add(cn->handed, cn->pid1, p->sock, &p->v) : -ESRCH;
        if (hr < 0) {
                netgate_transparent_record(cn->g, &p->v,
                                           hr == -ENOSPC ? "connection_limit" : "upstream_failed");
                (void)respond(cn, p->id, ECONNREFUSED, 0);
                pending_free(p);
                return;
        }
        /* The host's socket, connected to the address that was checked,
         * takes the caller's fd number; then connect() returns 0. A caller
         * gone meanwhile (ENOENT) gets nothing. */
        struct seccomp_notif_addfd add = {
            .id = p->id,
            .flags = SECCOMP_ADDFD_FLAG_SETFD,
            .srcfd = (uint32_t)p->sock,
            .newfd = (uint32_t)p->target_fd,
            .newfd_flags = p->cloexec ? O_CLOEXEC : 0,
        };
        if (ioctl(cn->fd, SECCOMP_IOCTL_NOTIF_ADDFD, &add) < 0) {
                int e = errno;
                cn_handed_pop(cn->handed);
                netgate_transparent_record(cn->g, &p->v,
                                           e == ENOENT ? "client_closed" : "upstream_failed");
                if (e != ENOENT)
                        (void)respond(cn, p->id, e, 0);
                pending_free(p);
                return;
        }
        netgate_transparent_record(cn->g, &p->v, NULL);
        (void)respond(cn, p->id, 0, 0);
        pending_free(p);
}

static void connected(evutil_socket_t fd, short what, void *ud)
{
        struct cn_pending *p = ud;
        int error = 0;
        socklen_t l = sizeof(error);
        if (what & EV_TIMEOUT)
                error = ETIMEDOUT;
        else if (getsockopt(fd, SOL_SOCKET, SO_ERROR, &error, &l) < 0)
                error = errno;
        finish(p, error);
}

/* The host's socket is bound to a port chosen here before it connects.
 * A port the kernel picks at connect() is given up when the connection is
 * reset, and a reset socket may then be bound again: in the sandbox's hands
 * that would hold ports of the host's own network namespace. A port bound
 * by number stays with the socket (SOCK_BINDPORT_LOCK), so bind() on it
 * fails with EINVAL for as long as the sandbox holds it. */
static int bind_locked(int sock, int family)
{
        static unsigned lo = 0, hi = 0;
        if (lo == 0) {
                char buf[64] = "";
                _cleanup_close_ int f =
                    open("/proc/sys/net/ipv4/ip_local_port_range", O_RDONLY | O_CLOEXEC);
                ssize_t n = f >= 0 ? read(f, buf, sizeof(buf) - 1) : -1;
                if (n <= 0 || sscanf(buf, "%u %u", &lo, &hi) != 2 || lo < 1024 || hi > 65535 ||
                    lo >= hi) {
                        lo = 32768;
                        hi = 60999;
                }
        }
        for (int i = 0; i < 64; i++) {
                uint32_t r = 0;
                if (getrandom(&r, sizeof(r), 0) != sizeof(r))
                        return errno ? errno : EIO;
                uint16_t port = (uint16_t)(lo + r % (hi - lo + 1));
                struct sockaddr_storage me;
                memset(&me, 0, sizeof(me));
                socklen_t l;
                if (family == AF_INET6) {
                        struct sockaddr_in6 *in6 = (struct sockaddr_in6 *)&me;
                        in6->sin6_family = AF_INET6;
                        in6->sin6_port = htons(port);
                        l = sizeof(*in6);
                } else {
                        struct sockaddr_in *in = (struct sockaddr_in *)&me;
                        in->sin_family = AF_INET;
                        in->sin_port = htons(port);
                        l = sizeof(*in);
                }
                if (bind(sock, (struct sockaddr *)&me, l) == 0)
                        return 0;
                if (errno != EADDRINUSE)
                        return errno;
        }
        return EADDRNOTAVAIL;
}

static void start_connect(struct cn_pending *p)
{
        struct sv_connect_notify *cn = p->cn;
        struct sockaddr_storage ss;
        socklen_t len = netgate_addr_to_sockaddr(&p->v.addr, p->v.port, &ss);
        p->sock = socket(ss.ss_family, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
        int error = p->sock < 0 ? errno : bind_locked(p->sock, ss.ss_family);
        if (!error && connect(p->sock, (struct sockaddr *)&ss, len) < 0)
                error = errno;
        if (error != EINPROGRESS) {
                finish(p, error);
                return;
        }
        p->ev = event_new(cn->base, p->sock, EV_WRITE, connected, p);
        struct timeval tv = {CN_CONNECT_TIMEOUT, 0};
        if (!p->ev || event_add(p->ev, &tv) < 0)
                finish(p, ENOMEM);
}

/* The relay path: the sandbox's own socket (it lives in the sandbox's
 * namespace) is connected from here to the gate's relay listener, and the
 * gate is told which port it comes from; the gate tunnels it to the checked
 * address. Nothing of the caller's memory is read again. */
static void relay(struct sv_connect_notify *cn, struct cn_pending *p)
{
        uint16_t rport = netgate_relay_port(cn->g);
        if (rport == 0) {
                finish(p, ECONNREFUSED);
                return;
        }
        struct sockaddr_storage ss;
        memset(&ss, 0, sizeof(ss));
        socklen_t len;
        if (p->domain == AF_INET6) {
                struct sockaddr_in6 *in6 = (struct sockaddr_in6 *)&ss;
                in6->sin6_family = AF_INET6;
                in6->sin6_port = htons(rport);
                in6->sin6_addr.s6_addr[10] = in6->sin6_addr.s6_addr[11] = 0xff;
                in6->sin6_addr.s6_addr[12] = 127;
                in6->sin6_addr.s6_addr[15] = 1;
                len = sizeof(*in6);
        } else {
                struct sockaddr_in *in = (struct sockaddr_in *)&ss;
                in->sin_family = AF_INET;
                in->sin_port = htons(rport);
                in->sin_addr.s_addr = htonl(INADDR_LOOPBACK);
                len = sizeof(*in);
        }
        /* Non-blocking for this call only: the loop never waits on it. */
        int fl = fcntl(p->dup, F_GETFL);
        if (fl < 0 || fcntl(p->dup, F_SETFL, fl | O_NONBLOCK) < 0) {
                finish(p, errno);
                return;
        }
        int e = sv_connect_bounded(p->dup, (struct sockaddr *)&ss, len), r = e ? -1 : 0;
        (void)fcntl(p->dup, F_SETFL, fl);
        if (e == EINTR)
                e = EINPROGRESS; /* its flag cleared under us: the connect goes on */
        if (r < 0 && e != EINPROGRESS) {
                finish(p, e);
                return;
        }
        struct sockaddr_storage me;
        socklen_t mlen = sizeof(me);
        uint16_t src = 0;
        if (getsockname(p->dup, (struct sockaddr *)&me, &mlen) == 0)
                src = ntohs(me.ss_family == AF_INET6 ? ((struct sockaddr_in6 *)&me)->sin6_port
                                                     : ((struct sockaddr_in *)&me)->sin_port);
        if (src == 0 || netgate_relay_expect(cn->g, &p->v, src) < 0) {
                finish(p, EAGAIN);
                return;
        }
        p->sock = p->dup;
        p->dup = -1;
        if (r == 0) {
                finish(p, 0);
                return;
        }
        p->ev = event_new(cn->base, p->sock, EV_WRITE, connected, p);
        struct timeval tv = {CN_CONNECT_TIMEOUT, 0};
        if (!p->ev || event_add(p->ev, &tv) < 0)
                finish(p, ENOMEM);
}

/* Whether the caller's `fd` is a socket of the sandbox's own network
 * namespace, from a copy of it taken here (*dup). The direct path's sockets
 * are the host's: connected, they stay so, because a disconnected one
 * (connect(AF_UNSPEC)) would reach whatever the host reaches. Any doubt
 * (no SIOCGSKNS, another namespace) is "not its own". */
static int caller_socket(struct sv_connect_notify *cn, pid_t tid, int fd, int *dup, bool *own)
{
        *own = false;
        unsigned long flags = 0;
        int r = cn_take_socket(tid, fd, cn->sock_mnt, dup, &flags);
        if (r < 0)
                return r;
        char path[64];
        snprintf(path, sizeof(path), "/proc/%d/ns/net", (int)tid);
        struct stat mine, its;
        if (stat(path, &mine) < 0)
                return -errno;
        _cleanup_close_ int ns = ioctl(*dup, SIOCGSKNS);
        if (ns < 0)
                return errno == ENOTSOCK || errno == ENOTTY ? -ENOTSOCK : 0;
        if (fstat(ns, &its) < 0)
                return -errno;
        *own = its.st_dev == mine.st_dev && its.st_ino == mine.st_ino;
        return 0;
}

static void unix_retry(evutil_socket_t fd, short what, void *ud);

/* The answer of the helper resolving and connecting a Unix path, or the
 * caller's time run out while it waits (a mount that hangs). */
static void unix_answered(evutil_socket_t fd, short what, void *ud)
{
        struct cn_pending *p = ud;
        (void)fd;
        int r;
        if (what & EV_TIMEOUT) {
                sv_unix_connect_stop(&p->res);
                r = ETIMEDOUT;
        } else
                r = sv_unix_connect_answer(&p->res);
        p->resolving = false;
        if (!id_valid(p->cn, p->id)) {
                pending_free(p); /* the caller went away (a signal) */
                return;
        }
        if (r == EAGAIN && !p->nonblock && now_monotonic_us() < p->deadline_us) {
                event_free(p->ev);
                p->ev = evtimer_new(p->cn->base, unix_retry, p);
                struct timeval tv = {0, CN_UNIX_RETRY_US};
                if (p->ev && event_add(p->ev, &tv) == 0)
                        return;
                r = ENOMEM;
        }
        finish(p, r);
}

/* A helper resolves the path and connects, off the loop: a lookup that
 * crosses a hung mount waits there, and the loop answers everyone else. */
static void unix_start(struct cn_pending *p)
{
        int r = sv_unix_connect_start(p->tid, p->sock, (const struct sockaddr_un *)&p->addr,
                                      p->addr_len, &p->res);
        if (r < 0) {
                finish(p, -r);
                return;
        }
        p->resolving = true;
        if (p->ev)
                event_free(p->ev);
        p->ev = event_new(p->cn->base, p->res.answer, EV_READ, unix_answered, p);
        uint64_t now = now_monotonic_us();
        uint64_t left = p->deadline_us > now ? p->deadline_us - now : 0;
        struct timeval tv = {(time_t)(left / 1000000), (suseconds_t)(left % 1000000)};
        if (!p->ev || event_add(p->ev, &tv) < 0)
                finish(p, ENOMEM);
}

static void unix_retry(evutil_socket_t fd, short what, void *ud)
{
        struct cn_pending *p = ud;
        (void)fd;
        (void)what;
        if (!id_valid(p->cn, p->id)) {
                pending_free(p); /* the caller went away (a signal) */
                return;
        }
        unix_start(p);
}

/* Every connect() to a local address (loopback, AF_UNSPEC, Unix, netlink,
 * ...) is done here, on the host's copy of the caller's socket and with the
 * host's one copy of the address. Nothing is handed back to the kernel to
 * run again (SECCOMP_USER_NOTIF_FLAG_CONTINUE would read the descriptor and
 * the address a second time, after the check, and a racing thread could
 * by then have put a socket of the host's there). A socket that is not of
 * the sandbox's own network namespace (the direct path's) is refused:
 * connected where it was checked, it stays so. The answer is now, or when
 * a blocking caller's connection is made. */
static void local_connect(struct sv_connect_notify *cn, const struct seccomp_notif *req,
                          const struct sockaddr_storage *ss, size_t len)
{
        sa_family_t fam = len >= sizeof(sa_family_t) ? ss->ss_family : AF_UNSPEC;
        _cleanup_drop_ int dup = -1;
        bool own = false;
        int r = caller_socket(cn, req->pid, (int)req->data.args[0], &dup, &own);
        if (r < 0 || !id_valid(cn, req->id)) {
                (void)respond(cn, req->id, r < 0 ? -r : ESRCH, 0);
                return;
        }
        if (!own) {
                struct netgate_verdict v = {.port = 0};
                snprintf(v.host, sizeof(v.host), "%s",
                         fam == AF_UNSPEC ? "disconnect"
                         : fam == AF_UNIX ? "unix address"
                                          : "local address");
                v.reason = "host_socket_reuse";
                netgate_transparent_record(cn->g, &v, NULL);
                (void)respond(cn, req->id, fam == AF_UNSPEC ? EOPNOTSUPP : EISCONN, 0);
                return;
        }
        /* DNS over TCP to the name server's address: there is no TCP
         * listener on 127.0.0.1:53, the gate's relay serves it. */
        if (fam == AF_INET && len >= sizeof(struct sockaddr_in) &&
            ((const struct sockaddr_in *)ss)->sin_port == htons(53) &&
            ((const struct sockaddr_in *)ss)->sin_addr.s_addr == htonl(INADDR_LOOPBACK)) {
                int type = 0;
                socklen_t tl = sizeof(type);
                if (getsockopt(dup, SOL_SOCKET, SO_TYPE, &type, &tl) == 0 && type == SOCK_STREAM &&
                    cn->n_pending < CN_PENDING_MAX) {
                        struct cn_pending *p = xcalloc(1, sizeof(*p));
                        p->cn = cn;
                        p->id = req->id;
                        p->sock = -1;
                        p->dup = TAKE_FD(dup);
                        p->domain = AF_INET;
                        netgate_transparent_dns(&p->v);
                        pending_add(cn, p);
                        relay(cn, p);
                        return;
                }
        }
        /* With no host socket ever in the sandbox, whatever descriptor and
         * address the kernel reads again is the sandbox's own, in its own
         * namespaces: the kernel connects, and the listener sees its real
         * peer (SO_PEERCRED; runsc's control sockets check it). */
        if (fam == AF_UNIX && !netgate_transparent_host_sockets(cn->g)) {
                (void)respond(cn, req->id, 0, SECCOMP_USER_NOTIF_FLAG_CONTINUE);
                return;
        }
        /* A path is looked up in the file system: a helper does it (and
         * the connect), and the answer waits for the helper's. Its connect
         * is bounded as the loop's would be (sv_connect_bounded). */
        if (fam == AF_UNIX && sv_unix_is_path((const struct sockaddr_un *)ss, len)) {
                int ufl = fcntl(dup, F_GETFL);
                if (ufl < 0 || cn->n_pending >= CN_PENDING_MAX) {
                        (void)respond(cn, req->id, ufl < 0 ? errno : EAGAIN, 0);
                        return;
                }
                struct cn_pending *p = xcalloc(1, sizeof(*p));
                p->cn = cn;
                p->id = req->id;
                p->local = true;
                p->nonblock = ufl & O_NONBLOCK;
                p->dup = -1;
                p->sock = TAKE_FD(dup);
                p->tid = req->pid;
                memcpy(&p->addr, ss, len);
                p->addr_len = len;
                p->deadline_us = now_monotonic_us() + CN_CONNECT_TIMEOUT * 1000000ull;
                pending_add(cn, p);
                unix_start(p);
                return;
        }
        /* A blocking caller's socket is made non-blocking for this call
         * only, and its answer waits for the connection. */
        int fl = fcntl(dup, F_GETFL);
        if (fl < 0 || (!(fl & O_NONBLOCK) && fcntl(dup, F_SETFL, fl | O_NONBLOCK) < 0)) {
                (void)respond(cn, req->id, errno, 0);
                return;
        }
        if (fam == AF_UNIX)
                r = sv_unix_connect(req->pid, dup, (const struct sockaddr_un *)ss, len);
        else {
                r = sv_connect_bounded(dup, (const struct sockaddr *)ss, (unsigned)len);
                if (r == EINTR && (fam == AF_INET || fam == AF_INET6))
                        r = EINPROGRESS; /* its flag cleared under us: it goes on */
                else if (r == EINTR)
                        r = EAGAIN;
        }
        if (!(fl & O_NONBLOCK))
                (void)fcntl(dup, F_SETFL, fl);
        bool unix_wait = fam == AF_UNIX && r == EAGAIN;
        if ((r != EINPROGRESS && !unix_wait) || (fl & O_NONBLOCK) ||
            cn->n_pending >= CN_PENDING_MAX) {
                (void)respond(cn, req->id, r, 0);
                return;
        }
        struct cn_pending *p = xcalloc(1, sizeof(*p));
        p->cn = cn;
        p->id = req->id;
        p->local = true;
        p->dup = -1;
        p->sock = TAKE_FD(dup);
        pending_add(cn, p);
        struct timeval tv = {CN_CONNECT_TIMEOUT, 0};
        if (unix_wait) {
                /* The kernel would have waited for room in the listener's
                 * backlog: so does the caller, tried again every 10 ms. */
                p->tid = req->pid;
                memcpy(&p->addr, ss, len);
                p->addr_len = len;
                p->deadline_us = now_monotonic_us() + CN_CONNECT_TIMEOUT * 1000000ull;
                p->ev = evtimer_new(cn->base, unix_retry, p);
                tv = (struct timeval){0, CN_UNIX_RETRY_US};
        } else
                p->ev = event_new(cn->base, p->sock, EV_WRITE, connected, p);
        if (!p->ev || event_add(p->ev, &tv) < 0)
                finish(p, ENOMEM);
}

static void handle(struct sv_connect_notify *cn, const struct seccomp_notif *req)
{
        if (req->data.nr != __NR_connect) {
                (void)respond(cn, req->id, ENOSYS, 0);
                return;
        }
        int target_fd = (int)req->data.args[0];
        uint64_t uaddr = req->data.args[1];
        size_t len = (size_t)(uint32_t)req->data.args[2];
        struct sockaddr_storage ss;
        memset(&ss, 0, sizeof(ss));
        if (len > sizeof(ss)) {
                (void)respond(cn, req->id, EINVAL, 0);
                return;
        }
        /* The one read of the caller's memory: everything below decides on
         * and connects to this copy. */
        struct iovec local = {.iov_base = &ss, .iov_len = len};
        struct iovec remote = {.iov_base = (void *)(uintptr_t)uaddr, .iov_len = len};
        if (len > 0 && process_vm_readv(req->pid, &local, 1, &remote, 1, 0) != (ssize_t)len) {
                (void)respond(cn, req->id, EFAULT, 0);
                return;
        }
        /* The pid read from is still the caller's only if the notification
         * is still valid. */
        if (!id_valid(cn, req->id))
                return;
        if (stays_inside(&ss, len)) {
                local_connect(cn, req, &ss, len);
                return;
        }
        if (cn->n_pending >= CN_PENDING_MAX) {
                (void)respond(cn, req->id, EAGAIN, 0);
                return;
        }
        struct cn_pending *p = xcalloc(1, sizeof(*p));
        p->cn = cn;
        p->id = req->id;
        p->target_fd = target_fd;
        p->sock = p->dup = -1;
        bool stream = false;
        /* The sandbox's pid namespace, once: from its pid 1, or where an
         * ordinary user cannot read that (pid 1 is not dumpable) from the
         * caller's upwards (connect-handed.h). Read before the check that
         * the caller still is (its pid not another's meanwhile); not read, the
         * direct path refuses (cn_handed_add tries pid 1 again). */
        int learned = cn->pid1 > 0 ? cn_handed_learn_ns(cn->handed, cn->pid1, req->pid) : 0;
        int r = inspect_socket(req->pid, target_fd, p, &stream);
        if (r < 0 || !id_valid(cn, req->id)) {
                if (learned > 0)
                        cn_handed_forget_ns(cn->handed);
                (void)respond(cn, req->id, r < 0 ? -r : ESRCH, 0);
                pending_free(p);
                return;
        }
        netgate_transparent_decide(cn->g, (struct sockaddr *)&ss, (socklen_t)len, stream, &p->v);
        if (!p->v.allow) {
                netgate_transparent_record(cn->g, &p->v, NULL);
                (void)respond(cn, req->id,
                              stream && p->v.addr.family == AF_INET ? ECONNREFUSED : ENETUNREACH,
                              0);
                pending_free(p);
                return;
        }
        pending_add(cn, p);
        if (p->v.relay)
                relay(cn, p);
        else
                start_connect(p);
}

/* RECV blocks when nothing is pending, so it is called only while poll()
 * says a notification waits (one withdrawn meanwhile makes RECV fail with
 * ENOENT, it does not block). */
static void readable(evutil_socket_t fd, short what, void *ud)
{
        struct sv_connect_notify *cn = ud;
        (void)what;
        _cleanup_free_ struct seccomp_notif *req = xcalloc(1, cn->notif_size);
        for (int i = 0; i < 32; i++) {
                struct pollfd pfd = {.fd = fd, .events = POLLIN};
                if (poll(&pfd, 1, 0) <= 0)
                        return;
                if (!(pfd.revents & POLLIN)) {
                        /* Nothing in the sandbox uses the filter any more. */
                        if (pfd.revents & (POLLHUP | POLLERR | POLLNVAL))
                                event_del(cn->ev);
                        return;
                }
                memset(req, 0, cn->notif_size);
                if (ioctl(fd, SECCOMP_IOCTL_NOTIF_RECV, req) < 0)
                        continue; /* ENOENT: the caller went away before it was read */
                handle(cn, req);
        }
}

static void handed_wait(evutil_socket_t fd, short what, void *ud);

struct sv_connect_notify *sv_connect_notify_new(struct event_base *base, struct netgate *g, int fd,
                                                struct al_error *err)
{
        struct seccomp_notif_sizes sizes = {0};
        if (syscall(SYS_seccomp, SECCOMP_GET_NOTIF_SIZES, 0, &sizes) < 0) {
                al_error_set(err, errno, "transparent mode: reading the notification sizes");
                close(fd);
                return NULL;
        }
        struct sv_connect_notify *cn = xcalloc(1, sizeof(*cn));
        cn->base = base;
        cn->g = g;
        cn->fd = fd;
        cn->notif_size = sizes.seccomp_notif > sizeof(struct seccomp_notif)
                             ? sizes.seccomp_notif
                             : sizeof(struct seccomp_notif);
        cn->resp_size = sizes.seccomp_notif_resp > sizeof(struct seccomp_notif_resp)
                            ? sizes.seccomp_notif_resp
                            : sizeof(struct seccomp_notif_resp);
        cn->handed = cn_handed_new();
        cn_handed_wait_async(cn->handed);
        cn->sock_mnt = cn_sock_mount_id(-1);
        cn->wait_ev = evtimer_new(base, handed_wait, cn);
        cn->ev = event_new(base, fd, EV_READ | EV_PERSIST, readable, cn);
        if (!cn->ev || !cn->wait_ev || event_add(cn->ev, NULL) < 0) {
                al_error_set(err, ENOMEM, "transparent mode: watching the notifications");
                return sv_connect_notify_free(cn);
        }
        return cn;
}

struct sv_connect_notify *sv_connect_notify_free(struct sv_connect_notify *cn)
{
        if (!cn)
                return NULL;
        while (cn->pending) {
                struct cn_pending *p = cn->pending;
                (void)respond(cn, p->id, ECONNREFUSED, 0);
                pending_free(p);
        }
        if (cn->ev)
                event_free(cn->ev);
        if (cn->wait_ev)
                event_free(cn->wait_ev);
        cn_handed_free(cn->handed);
        close(cn->fd);
        free(cn);
        return NULL;
}

static void handed_cut(void *ud, const struct netgate_verdict *v, const char *reason);

/* A step of a revoke's wait for its kills; then a revoke that came
 * meanwhile. */
static void handed_wait(evutil_socket_t fd, short what, void *ud)
{
        struct sv_connect_notify *cn = ud;
        (void)fd;
        (void)what;
        unsigned next = 0;
        int r;
        while ((r = cn_handed_wait_step(cn->handed, handed_cut, cn->g, &next)) > 0) {
                struct timeval tv = {next / 1000, (suseconds_t)(next % 1000) * 1000};
                if (event_add(cn->wait_ev, &tv) == 0)
                        return;
                struct timespec ts = {next / 1000, (long)(next % 1000) * 1000000L};
                while (nanosleep(&ts, &ts) < 0 && errno == EINTR) {
                }
        }
        if (cn->recheck_again) {
                cn->recheck_again = false;
                (void)sv_connect_notify_recheck(cn, cn->recheck_pid1);
        }
}

static bool handed_refused(void *ud, const struct netgate_verdict *v)
{
        return !netgate_transparent_allowed_now(ud, v);
}

static void handed_cut(void *ud, const struct netgate_verdict *v, const char *reason)
{
        netgate_transparent_record(ud, v, reason);
}

void sv_connect_notify_set_sandbox(struct sv_connect_notify *cn, pid_t pid1)
{
        if (cn)
                cn->pid1 = pid1;
}

static int wait_arm(struct sv_connect_notify *cn, unsigned ms)
{
        struct timeval tv = {ms / 1000, (suseconds_t)(ms % 1000) * 1000};
        return event_add(cn->wait_ev, &tv);
}

int sv_connect_notify_recheck(struct sv_connect_notify *cn, pid_t pid1)
{
        if (!cn)
                return 0;
        if (cn_handed_waiting(cn->handed)) {
                cn->recheck_again = true;
                cn->recheck_pid1 = pid1;
                return -EINPROGRESS;
        }
        int r = cn_handed_recheck(cn->handed, pid1, handed_refused, handed_cut, cn->g);
        if (cn_handed_waiting(cn->handed) && wait_arm(cn, CN_HANDED_WAIT_FIRST_MS) < 0)
                handed_wait(-1, 0, cn); /* no timer: waited here */
        return r;
}
