/* SPDX-License-Identifier: Apache-2.0 */
#include <errno.h>
#include <event2/buffer.h>
#include <event2/bufferevent.h>
#include <event2/listener.h>
#include <fcntl.h>
#include <jansson.h>
#include <stdlib.h>
#include <poll.h>
#include <stdio.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/un.h>
#include <unistd.h>

#include "caps-socket.h"
#include "control-proto.h"
#include "core.h"
#include "util.h"

#define CAPS_SOCKET_LINE_MAX    (1u << 20)
#define CAPS_SOCKET_CLIENTS_MAX 16

struct caps_client {
        struct caps_socket *s;
        struct bufferevent *bev;
        struct caps_client *next;
        bool closing;
};

struct caps_socket {
        struct sv_core *core;
        struct evconnlistener *l;
        char *path;
        dev_t dev;
        ino_t ino;
        struct caps_client *clients;
        size_t n_clients;
};

static void client_free(struct caps_client *cl)
{
        struct caps_socket *s = cl->s;
        for (struct caps_client **p = &s->clients; *p; p = &(*p)->next)
                if (*p == cl) {
                        *p = cl->next;
                        break;
                }
        s->n_clients--;
        bufferevent_free(cl->bev);
        free(cl);
}

static void send_and_close(struct caps_client *cl, json_t *o)
{
        char *txt = o ? json_dumps(o, JSON_COMPACT) : NULL;
        json_decref(o);
        if (txt) {
                evbuffer_add(bufferevent_get_output(cl->bev), txt, strlen(txt));
                evbuffer_add(bufferevent_get_output(cl->bev), "\n", 1);
        }
        free(txt);
        cl->closing = true;
        bufferevent_disable(cl->bev, EV_READ);
        if (evbuffer_get_length(bufferevent_get_output(cl->bev)) == 0)
                client_free(cl);
}

static json_t *error(const char *code, const char *msg)
{
        return json_pack("{s:b, s:s, s:s}", "ok", 0, "error", code, "message", msg);
}

static void on_read(struct bufferevent *bev, void *arg)
{
        struct caps_client *cl = arg;
        if (cl->closing)
                return;
        struct evbuffer *in = bufferevent_get_input(bev);
        size_t len;
        char *line = evbuffer_readln(in, &len, EVBUFFER_EOL_LF);
        if (!line) {
                if (evbuffer_get_length(in) > CAPS_SOCKET_LINE_MAX)
                        send_and_close(cl, error(CONTROL_ERR_BAD_REQUEST, "request line too long"));
                return;
        }
        json_t *req = NULL;
        int op = control_parse_request(line, len, &req);
        free(line);
        if (op < 0)
                send_and_close(
                    cl, error(CONTROL_ERR_BAD_REQUEST, "expected a JSON object with \"op\""));
        else if (op != CONTROL_REQ_CAPS)
                send_and_close(cl, error(CONTROL_ERR_BAD_REQUEST,
                                         "airlock run's control socket serves the \"caps\" op "
                                         "only"));
        else {
                /* Who changed it is this socket's owner, whatever it says. */
                json_object_del(req, "by");
                send_and_close(cl, sv_core_caps_request(cl->s->core, req, "control-socket"));
        }
        json_decref(req);
}

static void on_write(struct bufferevent *bev, void *arg)
{
        struct caps_client *cl = arg;
        if (cl->closing && evbuffer_get_length(bufferevent_get_output(bev)) == 0)
                client_free(cl);
}

static void on_event(struct bufferevent *bev, short what, void *arg)
{
        if (what & (BEV_EVENT_EOF | BEV_EVENT_ERROR | BEV_EVENT_TIMEOUT))
                client_free(arg);
}

#ifndef SO_PEERPIDFD
#define SO_PEERPIDFD 77
#endif

/* How deep `pid`'s pid namespace lies below that of /proc: the number of
 * ids on its NSpid line less one (status is readable without ptrace
 * rights, unlike ns/). -1 when unreadable. */
static int pidns_depth(const char *pid)
{
        char p[64], line[256];
        snprintf(p, sizeof(p), "/proc/%s/status", pid);
        _cleanup_fclose_ FILE *f = fopen(p, "re");
        if (!f)
                return -1;
        while (fgets(line, sizeof(line), f)) {
                if (strncmp(line, "NSpid:", 6) != 0)
                        continue;
                int n = 0;
                for (const char *c = line + 6; *c;) {
                        c += strspn(c, " \t\n");
                        size_t k = strspn(c, "0123456789");
                        if (k == 0)
                                break;
                        n++;
                        c += k;
                }
                return n - 1;
        }
        return -1;
}

/* The socket's path may lie where the sandbox can see it (its workspace, a
 * host directory shown read-only: connect() needs no write access to the
 * mount), and the sandbox's processes run as the caller's uid: the
 * permission bits do not keep the agent out. Every sandbox has its own pid
 * namespace below the supervisor's: a peer deeper than the supervisor is
 * refused. The peer's pidfd, taken with the credentials, tells that its
 * pid still names it after /proc was read; anything unreadable is refused. */
static bool peer_outside_sandbox(int fd)
{
        struct ucred cr;
        socklen_t l = sizeof(cr);
        if (getsockopt(fd, SOL_SOCKET, SO_PEERCRED, &cr, &l) < 0 || cr.pid <= 0)
                return false;
        _cleanup_close_ int pidfd = -1;
        l = sizeof(int);
        if (getsockopt(fd, SOL_SOCKET, SO_PEERPIDFD, &pidfd, &l) < 0) {
                pidfd = (int)syscall(SYS_pidfd_open, cr.pid, 0);
                if (pidfd < 0)
                        return false;
        }
        char pid[24];
        snprintf(pid, sizeof(pid), "%d", (int)cr.pid);
        int peer = pidns_depth(pid), self = pidns_depth("self");
        if (peer < 0 || self < 0 || peer > self)
                return false;
        /* Still running (a pidfd polls readable once its process ended):
         * the pid read above was the peer's, not a reuse. */
        struct pollfd pfd = {.fd = pidfd, .events = POLLIN};
        return poll(&pfd, 1, 0) == 0;
}

static void on_accept(struct evconnlistener *l, evutil_socket_t fd, struct sockaddr *sa, int len,
                      void *arg)
{
        struct caps_socket *s = arg;
        if (!peer_outside_sandbox(fd)) {
                close(fd);
                return;
        }
        if (s->n_clients >= CAPS_SOCKET_CLIENTS_MAX) {
                close(fd);
                return;
        }
        struct caps_client *cl = xcalloc(1, sizeof(*cl));
        cl->s = s;
        cl->bev = bufferevent_socket_new(s->core->base, fd, BEV_OPT_CLOSE_ON_FREE);
        if (!cl->bev) {
                close(fd);
                free(cl);
                return;
        }
        cl->next = s->clients;
        s->clients = cl;
        s->n_clients++;
        bufferevent_setcb(cl->bev, on_read, on_write, on_event, cl);
        bufferevent_setwatermark(cl->bev, EV_READ, 0, CAPS_SOCKET_LINE_MAX + 1);
        struct timeval tv = {.tv_sec = 30, .tv_usec = 0};
        bufferevent_set_timeouts(cl->bev, &tv, &tv);
        bufferevent_enable(cl->bev, EV_READ | EV_WRITE);
}

int caps_socket_open(struct sv_core *c, const char *path, struct caps_socket **ret,
                     struct al_error *err)
{
        struct sockaddr_un sa = {.sun_family = AF_UNIX};
        if (!path || !*path || strlen(path) >= sizeof(sa.sun_path))
                return al_error_set_message(err, ENAMETOOLONG,
                                            "--control %s: a socket path is at most %zu bytes",
                                            path ? path : "", sizeof(sa.sun_path) - 1);
        /* Bound and listening under a staging name beside PATH, then renamed
         * to it (never over anything there): a client that waits for PATH
         * to appear is never refused for coming between bind and listen. */
        int n = snprintf(sa.sun_path, sizeof(sa.sun_path), "%s.%d~", path, (int)getpid());
        if (n < 0 || (size_t)n >= sizeof(sa.sun_path))
                return al_error_set_message(err, ENAMETOOLONG,
                                            "--control %s: a socket path is at most %zu bytes",
                                            path, sizeof(sa.sun_path) - 16);
        _cleanup_close_ int fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC | SOCK_NONBLOCK, 0);
        if (fd < 0)
                return al_error_set(err, errno, "--control %s", path);
        /* 0600 from the start: no moment when another user could connect. */
        mode_t old = umask(0177);
        int r = bind(fd, (struct sockaddr *)&sa, sizeof(sa));
        int e = errno;
        umask(old);
        if (r < 0)
                return al_error_set_message(err, e, "--control %s: %s%s", path,
                                            e == EADDRINUSE ? "its staging name exists: remove "
                                                            : strerror(e),
                                            e == EADDRINUSE ? sa.sun_path : "");
        struct stat st;
        if (lstat(sa.sun_path, &st) < 0 || listen(fd, 16) < 0 ||
            renameat2(AT_FDCWD, sa.sun_path, AT_FDCWD, path, RENAME_NOREPLACE) < 0) {
                e = errno;
                unlink(sa.sun_path);
                if (e == EEXIST)
                        return al_error_set_message(
                            err, e, "--control %s: the path exists; remove it or choose another",
                            path);
                return al_error_set(err, e, "--control %s", path);
        }
        struct caps_socket *s = xcalloc(1, sizeof(*s));
        s->core = c;
        s->path = xstrdup(path);
        s->dev = st.st_dev;
        s->ino = st.st_ino;
        s->l = evconnlistener_new(c->base, on_accept, s, LEV_OPT_CLOSE_ON_FREE, 0, fd);
        if (!s->l) {
                caps_socket_free(s);
                return al_error_set(err, ENOMEM, "--control %s", path);
        }
        TAKE_FD(fd);
        *ret = s;
        return 0;
}

struct caps_socket *caps_socket_free(struct caps_socket *s)
{
        if (!s)
                return NULL;
        while (s->clients)
                client_free(s->clients);
        if (s->l)
                evconnlistener_free(s->l);
        struct stat st;
        if (lstat(s->path, &st) == 0 && st.st_dev == s->dev && st.st_ino == s->ino &&
            S_ISSOCK(st.st_mode))
                unlink(s->path);
        free(s->path);
        free(s);
        return NULL;
}
