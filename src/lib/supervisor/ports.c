/* SPDX-License-Identifier: Apache-2.0 */
/* Port forwards: host listeners whose connections are relayed into the
 * sandbox's network namespace (ports.h, docs/internals/ports.md).
 *
 * How the supervisor reaches inside: spawn keeps an fd of the sandbox's
 * network namespace (taken right after clone, spawn.c). For each connection
 * a short-lived child of the supervisor joins that namespace (and, when the
 * supervisor is not root, the sandbox's user namespace first, which its
 * owner may enter and which gives it nothing but rights over the sandbox's
 * own namespaces), makes one unconnected TCP socket, hands it back over a
 * socketpair and exits. A socket keeps the namespace it was made in, so the
 * supervisor then connects it to 127.0.0.1:PORT from its own loop. The
 * child joins neither the mount nor the pid namespace: the sandbox cannot
 * see it, signal it or read its memory; it holds no fd but its channel and
 * the two namespace fds, its signals are blocked, and it lives for two
 * system calls. The sandbox is given nothing: no fd, no process, no route;
 * it only sees a connection arrive on its loopback from 127.0.0.1. */
#include <arpa/inet.h>
#include <errno.h>
#include <event2/buffer.h>
#include <event2/bufferevent.h>
#include <event2/event.h>
#include <event2/listener.h>
#include <linux/nsfs.h>
#include <netinet/in.h>
#include <sched.h>
#include <signal.h>
#include <stdio.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/socket.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

#include "core.h"
#include "events.h"
#include "ports.h"
#include "spawn.h"
#include "util.h"

/* What one direction of a connection may hold in host memory. */
#define PORTS_BUF_HIGH (256 * 1024)

struct port_fwd;

struct port_conn {
        struct port_fwd *f;
        struct port_conn *prev, *next;
        struct bufferevent *bev[2]; /* 0: the host client, 1: inside the sandbox */
        bool eof[2], shut[2];
        bool connected;
        uint64_t bytes[2]; /* [0]: to the sandbox, [1]: from it */
        uint64_t start_us;
        char peer[INET6_ADDRSTRLEN + 8];
};

struct port_fwd {
        struct sv_ports *p;
        struct evconnlistener *listener;
        uint16_t port, host_port;
        char bind[64];
        struct port_conn *conns;
        unsigned n_conns;
        uint64_t accepted, refused;
};

struct sv_ports {
        struct sv_core *core;
        struct port_fwd *fwd[SV_PORTS_MAX];
};

int sv_ports_parse_spec(const char *s, struct sv_port_req *ret, const char **why)
{
        const char *colon = strchr(s, ':');
        char inner[8];
        size_t n = colon ? (size_t)(colon - s) : strlen(s);
        uint64_t port, host;
        if (n == 0 || n >= sizeof(inner)) {
                *why = "expected PORT or PORT:HOSTPORT, e.g. 3000 or 3000:8080";
                return -EINVAL;
        }
        memcpy(inner, s, n);
        inner[n] = '\0';
        if (safe_atou64(inner, &port) < 0 || port == 0 || port > 65535) {
                *why = "the sandbox's port must be a number from 1 to 65535";
                return -EINVAL;
        }
        host = port;
        if (colon && (safe_atou64(colon + 1, &host) < 0 || host > 65535)) {
                *why = "the host port must be a number from 0 (any free port) to 65535";
                return -EINVAL;
        }
        memset(ret, 0, sizeof(*ret));
        ret->port = (uint16_t)port;
        ret->host_port = (uint16_t)host;
        return 0;
}

/* An IPv4 or IPv6 literal into a socket address. */
static int parse_addr(const char *addr, uint16_t port, struct sockaddr_storage *ss, socklen_t *len)
{
        memset(ss, 0, sizeof(*ss));
        struct sockaddr_in *in4 = (struct sockaddr_in *)ss;
        struct sockaddr_in6 *in6 = (struct sockaddr_in6 *)ss;
        if (inet_pton(AF_INET, addr, &in4->sin_addr) == 1) {
                in4->sin_family = AF_INET;
                in4->sin_port = htons(port);
                *len = sizeof(*in4);
                return 0;
        }
        if (inet_pton(AF_INET6, addr, &in6->sin6_addr) == 1) {
                in6->sin6_family = AF_INET6;
                in6->sin6_port = htons(port);
                *len = sizeof(*in6);
                return 0;
        }
        return -EINVAL;
}

int sv_ports_check_bind(const char *addr)
{
        struct sockaddr_storage ss;
        socklen_t len;
        return parse_addr(addr, 0, &ss, &len);
}

struct sv_ports *sv_ports_new(struct sv_core *c)
{
        struct sv_ports *p = xcalloc(1, sizeof(*p));
        p->core = c;
        return p;
}

/* The socket maker (the comment at the top says why it is safe). */

static void close_all_but(const int keep[3])
{
        int k[3] = {keep[0], keep[1], keep[2]};
        for (int i = 0; i < 3; i++)
                for (int j = i + 1; j < 3; j++)
                        if (k[j] < k[i]) {
                                int t = k[i];
                                k[i] = k[j];
                                k[j] = t;
                        }
        unsigned from = 0;
        for (int i = 0; i < 3; i++) {
                if (k[i] < 0)
                        continue;
                if ((unsigned)k[i] > from)
                        syscall(SYS_close_range, from, (unsigned)k[i] - 1, 0);
                from = (unsigned)k[i] + 1;
        }
        syscall(SYS_close_range, from, ~0U, 0);
}

_Noreturn static void socket_child(int chan, int netns_fd, int userns_fd)
{
        int keep[3] = {chan, netns_fd, userns_fd};
        close_all_but(keep);
        int e = 0, fd = -1;
        /* Root may join the network namespace alone; its owner needs the
         * sandbox's user namespace first (it has every capability there). */
        if (setns(netns_fd, CLONE_NEWNET) < 0) {
                e = errno;
                if (e == EPERM && userns_fd >= 0 && setns(userns_fd, CLONE_NEWUSER) == 0)
                        e = setns(netns_fd, CLONE_NEWNET) < 0 ? errno : 0;
        }
        if (e == 0) {
                fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC | SOCK_NONBLOCK, 0);
                if (fd < 0)
                        e = errno;
        }
        char cbuf[CMSG_SPACE(sizeof(int))];
        memset(cbuf, 0, sizeof(cbuf));
        struct iovec iov = {.iov_base = &e, .iov_len = sizeof(e)};
        struct msghdr msg = {.msg_iov = &iov, .msg_iovlen = 1};
        if (fd >= 0) {
                msg.msg_control = cbuf;
                msg.msg_controllen = sizeof(cbuf);
                struct cmsghdr *cm = CMSG_FIRSTHDR(&msg);
                cm->cmsg_level = SOL_SOCKET;
                cm->cmsg_type = SCM_RIGHTS;
                cm->cmsg_len = CMSG_LEN(sizeof(int));
                memcpy(CMSG_DATA(cm), &fd, sizeof(int));
        }
        (void)sendmsg(chan, &msg, MSG_NOSIGNAL);
        _exit(0);
}

int sv_ports_netns_socket(int netns_fd)
{
        if (netns_fd < 0)
                return -EBADF;
        int sv[2];
        if (socketpair(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC, 0, sv) < 0)
                return -errno;
        _cleanup_close_ int userns_fd = ioctl(netns_fd, NS_GET_USERNS);
        /* The child must not run the loop's signal handlers (they would
         * write to the loop's own signal pipe): it starts with every signal
         * blocked. */
        sigset_t all, old;
        sigfillset(&all);
        sigprocmask(SIG_BLOCK, &all, &old);
        pid_t pid = fork();
        if (pid == 0)
                socket_child(sv[1], netns_fd, userns_fd);
        int fork_errno = errno;
        sigprocmask(SIG_SETMASK, &old, NULL);
        close(sv[1]);
        if (pid < 0) {
                close(sv[0]);
                return -fork_errno;
        }
        int e = EPROTO, fd = -1;
        char cbuf[CMSG_SPACE(sizeof(int))];
        struct iovec iov = {.iov_base = &e, .iov_len = sizeof(e)};
        struct msghdr msg = {
            .msg_iov = &iov, .msg_iovlen = 1, .msg_control = cbuf, .msg_controllen = sizeof(cbuf)};
        ssize_t n;
        while ((n = recvmsg(sv[0], &msg, MSG_CMSG_CLOEXEC)) < 0 && errno == EINTR)
                ;
        if (n == (ssize_t)sizeof(e)) {
                struct cmsghdr *cm = CMSG_FIRSTHDR(&msg);
                if (cm && cm->cmsg_level == SOL_SOCKET && cm->cmsg_type == SCM_RIGHTS &&
                    cm->cmsg_len == CMSG_LEN(sizeof(int)))
                        memcpy(&fd, CMSG_DATA(cm), sizeof(int));
        } else {
                e = EPROTO;
        }
        close(sv[0]);
        while (waitpid(pid, NULL, 0) < 0 && errno == EINTR)
                ;
        if (fd >= 0)
                return fd;
        return -(e ? e : EPROTO);
}

/* Connections */

static struct events_port fwd_ev(const struct port_fwd *f)
{
        return (struct events_port){.port = f->port, .host_port = f->host_port, .bind = f->bind};
}

static void conn_record(struct port_conn *c, const char *result, const char *message)
{
        struct events_port ep = fwd_ev(c->f);
        sv_core_record(c->f->p->core, "port.connect",
                       events_port_connect(&ep, c->peer, c->bytes[0], c->bytes[1],
                                           (now_monotonic_us() - c->start_us) / 1000, result,
                                           message));
}

static void conn_end(struct port_conn *c, const char *result, const char *message)
{
        struct port_fwd *f = c->f;
        conn_record(c, result, message);
        if (c->prev)
                c->prev->next = c->next;
        else
                f->conns = c->next;
        if (c->next)
                c->next->prev = c->prev;
        f->n_conns--;
        for (int i = 0; i < 2; i++)
                if (c->bev[i])
                        bufferevent_free(c->bev[i]);
        free(c);
}

/* Move what each side sent to the other, as far as the other's queue has
 * room (the rest waits in the input, whose watermark stops reading); pass
 * an end of stream on once everything before it is written. */
static void conn_pump(struct port_conn *c)
{
        for (int s = 0; s < 2; s++) {
                int d = 1 - s;
                struct evbuffer *in = bufferevent_get_input(c->bev[s]);
                struct evbuffer *out = bufferevent_get_output(c->bev[d]);
                size_t have = evbuffer_get_length(in), queued = evbuffer_get_length(out);
                size_t room = queued < PORTS_BUF_HIGH ? PORTS_BUF_HIGH - queued : 0;
                size_t n = have < room ? have : room;
                if (n > 0) {
                        evbuffer_remove_buffer(in, out, n);
                        c->bytes[s] += n;
                }
                if (c->eof[s] && !c->shut[d] && evbuffer_get_length(in) == 0 &&
                    evbuffer_get_length(out) == 0 && (d == 0 || c->connected)) {
                        shutdown(bufferevent_getfd(c->bev[d]), SHUT_WR);
                        c->shut[d] = true;
                }
        }
        if (c->shut[0] && c->shut[1])
                conn_end(c, "closed", NULL);
}

static void on_conn_read(struct bufferevent *bev, void *arg)
{
        conn_pump(arg);
}

static void on_conn_write(struct bufferevent *bev, void *arg)
{
        conn_pump(arg);
}

static void on_conn_event(struct port_conn *c, int side, short what)
{
        if (what & BEV_EVENT_CONNECTED) {
                c->connected = true;
                conn_pump(c);
                return;
        }
        if (what & BEV_EVENT_EOF) {
                c->eof[side] = true;
                bufferevent_disable(c->bev[side], EV_READ);
                conn_pump(c);
                return;
        }
        if (what & BEV_EVENT_ERROR) {
                int e = EVUTIL_SOCKET_ERROR();
                if (side == 1 && !c->connected)
                        conn_end(c, "refused", e ? strerror(e) : "nothing listens on the port");
                else
                        conn_end(c, "error", e ? strerror(e) : "connection error");
        }
}

static void on_client_event(struct bufferevent *bev, short what, void *arg)
{
        on_conn_event(arg, 0, what);
}

static void on_inner_event(struct bufferevent *bev, short what, void *arg)
{
        on_conn_event(arg, 1, what);
}

static void format_peer(const struct sockaddr *sa, char *buf, size_t size)
{
        char host[INET6_ADDRSTRLEN] = "?";
        uint16_t port = 0;
        if (sa->sa_family == AF_INET) {
                const struct sockaddr_in *in4 = (const void *)sa;
                inet_ntop(AF_INET, &in4->sin_addr, host, sizeof(host));
                port = ntohs(in4->sin_port);
                snprintf(buf, size, "%s:%u", host, port);
        } else if (sa->sa_family == AF_INET6) {
                const struct sockaddr_in6 *in6 = (const void *)sa;
                inet_ntop(AF_INET6, &in6->sin6_addr, host, sizeof(host));
                port = ntohs(in6->sin6_port);
                snprintf(buf, size, "[%s]:%u", host, port);
        } else {
                snprintf(buf, size, "?");
        }
}

static void on_accept(struct evconnlistener *l, evutil_socket_t fd, struct sockaddr *sa, int len,
                      void *arg)
{
        struct port_fwd *f = arg;
        struct sv_core *core = f->p->core;
        if (f->n_conns >= SV_PORTS_CONN_MAX) {
                /* Refused at once. Only the first refusal is written down
                 * (the count goes into port.closed): a client that keeps
                 * knocking cannot fill the audit log. */
                close(fd);
                struct events_port ep = fwd_ev(f);
                if (f->refused++ == 0)
                        sv_core_record(core, "port.refused",
                                       events_port_refused(&ep, SV_PORTS_CONN_MAX));
                return;
        }
        struct port_conn *c = xcalloc(1, sizeof(*c));
        c->f = f;
        c->start_us = now_monotonic_us();
        format_peer(sa, c->peer, sizeof(c->peer));
        c->next = f->conns;
        if (c->next)
                c->next->prev = c;
        f->conns = c;
        f->n_conns++;
        f->accepted++;
        c->bev[0] = bufferevent_socket_new(core->base, fd, BEV_OPT_CLOSE_ON_FREE);
        int inner = sv_ports_netns_socket(core->sp.netns_fd);
        if (!c->bev[0] || inner < 0) {
                if (!c->bev[0])
                        close(fd);
                if (inner >= 0)
                        close(inner);
                conn_end(c, "error",
                         inner < 0 ? "could not make a socket in the sandbox's network namespace"
                                   : "out of memory");
                return;
        }
        c->bev[1] = bufferevent_socket_new(core->base, inner, BEV_OPT_CLOSE_ON_FREE);
        if (!c->bev[1]) {
                close(inner);
                conn_end(c, "error", "out of memory");
                return;
        }
        bufferevent_setcb(c->bev[0], on_conn_read, on_conn_write, on_client_event, c);
        bufferevent_setcb(c->bev[1], on_conn_read, on_conn_write, on_inner_event, c);
        for (int i = 0; i < 2; i++) {
                bufferevent_setwatermark(c->bev[i], EV_READ, 0, PORTS_BUF_HIGH);
                bufferevent_setwatermark(c->bev[i], EV_WRITE, PORTS_BUF_HIGH / 2, 0);
                bufferevent_enable(c->bev[i], EV_READ | EV_WRITE);
        }
        struct sockaddr_in to = {.sin_family = AF_INET, .sin_port = htons(f->port)};
        to.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
        if (bufferevent_socket_connect(c->bev[1], (struct sockaddr *)&to, sizeof(to)) < 0)
                conn_end(c, "refused", "could not connect inside the sandbox");
}

/* Forwards */

static json_t *fwd_json(const struct port_fwd *f)
{
        return json_pack("{s:i, s:i, s:s, s:i, s:I}", "port", f->port, "hostPort", f->host_port,
                         "bind", f->bind, "connections", f->n_conns, "accepted",
                         (json_int_t)f->accepted);
}

static void fwd_free(struct port_fwd *f, const char *reason)
{
        while (f->conns)
                conn_end(f->conns, "closed", reason);
        if (f->listener)
                evconnlistener_free(f->listener);
        struct events_port ep = fwd_ev(f);
        sv_core_record(f->p->core, "port.closed",
                       events_port_closed(&ep, reason, f->accepted, f->refused));
        free(f);
}

int sv_ports_open(struct sv_ports *p, const struct sv_port_req *req, json_t **ret,
                  struct al_error *err)
{
        const char *bind_addr = req->bind[0] ? req->bind : "127.0.0.1";
        if (req->port == 0)
                return al_error_set(err, EINVAL, "port 0: expected 1 to 65535");
        if (p->core->sp.netns_fd < 0)
                return al_error_set(err, EBADF, "the sandbox's network namespace is not reachable");
        if (p->core->policy && p->core->policy->net_mode == POLICY_NET_GATED)
                for (int i = 0; i < SPAWN_LISTEN_MAX; i++)
                        if (req->port == spawn_listen_ports[i])
                                return al_error_set(err, 0,
                                                    "port %u is the network gate's own listener "
                                                    "inside the sandbox; forward another port",
                                                    req->port);
        int free_slot = -1;
        for (int i = 0; i < SV_PORTS_MAX; i++) {
                if (p->fwd[i] && p->fwd[i]->port == req->port) {
                        al_error_set(err, 0, "port %u is forwarded already (host port %u)",
                                     req->port, p->fwd[i]->host_port);
                        return -EEXIST;
                }
                if (!p->fwd[i] && free_slot < 0)
                        free_slot = i;
        }
        if (free_slot < 0) {
                al_error_set(err, 0, "at most %d ports may be forwarded per sandbox", SV_PORTS_MAX);
                return -ENOSPC;
        }
        struct sockaddr_storage ss;
        socklen_t len;
        if (parse_addr(bind_addr, req->host_port, &ss, &len) < 0)
                return al_error_set(err, EINVAL, "bind address \"%s\": expected an IP address",
                                    bind_addr);
        _cleanup_close_ int fd =
            socket(ss.ss_family, SOCK_STREAM | SOCK_CLOEXEC | SOCK_NONBLOCK, 0);
        if (fd < 0)
                return al_error_set(err, errno, "creating the host listener");
        int one = 1;
        (void)setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one));
        if (bind(fd, (struct sockaddr *)&ss, len) < 0)
                return al_error_set(err, errno, "listening on %s port %u for sandbox port %u",
                                    bind_addr, req->host_port, req->port);
        if (listen(fd, 64) < 0)
                return al_error_set(err, errno, "listening on %s port %u", bind_addr,
                                    req->host_port);
        struct sockaddr_storage got;
        socklen_t glen = sizeof(got);
        uint16_t host_port = req->host_port;
        if (getsockname(fd, (struct sockaddr *)&got, &glen) == 0)
                host_port =
                    ntohs(got.ss_family == AF_INET ? ((struct sockaddr_in *)&got)->sin_port
                                                   : ((struct sockaddr_in6 *)&got)->sin6_port);
        struct port_fwd *f = xcalloc(1, sizeof(*f));
        f->p = p;
        f->port = req->port;
        f->host_port = host_port;
        snprintf(f->bind, sizeof(f->bind), "%s", bind_addr);
        f->listener =
            evconnlistener_new(p->core->base, on_accept, f, LEV_OPT_CLOSE_ON_FREE, -1, fd);
        if (!f->listener) {
                free(f);
                return al_error_set(err, ENOMEM, "watching the host listener");
        }
        TAKE_FD(fd);
        struct events_port ep = fwd_ev(f);
        if (sv_core_record(p->core, "port.opened", events_port_opened(&ep)) < 0) {
                evconnlistener_free(f->listener);
                free(f);
                return al_error_set(err, EIO, "recording the forward");
        }
        p->fwd[free_slot] = f;
        if (ret)
                *ret = fwd_json(f);
        return 0;
}

int sv_ports_close(struct sv_ports *p, uint16_t port, const char *reason)
{
        for (int i = 0; i < SV_PORTS_MAX; i++)
                if (p->fwd[i] && p->fwd[i]->port == port) {
                        fwd_free(p->fwd[i], reason);
                        p->fwd[i] = NULL;
                        return 0;
                }
        return -ENOENT;
}

json_t *sv_ports_list(const struct sv_ports *p)
{
        json_t *a = json_array();
        for (int i = 0; p && i < SV_PORTS_MAX; i++)
                if (p->fwd[i])
                        json_array_append_new(a, fwd_json(p->fwd[i]));
        return a;
}

struct sv_ports *sv_ports_free(struct sv_ports *p, const char *reason)
{
        if (!p)
                return NULL;
        for (int i = 0; i < SV_PORTS_MAX; i++)
                if (p->fwd[i]) {
                        fwd_free(p->fwd[i], reason);
                        p->fwd[i] = NULL;
                }
        free(p);
        return NULL;
}
