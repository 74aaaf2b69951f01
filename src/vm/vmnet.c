/* SPDX-License-Identifier: Apache-2.0 */
/* The microvm tier's network link (vmnet.h). Built into the guest's static
 * init and into libairlock: libc only. */
#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/uio.h>
#include <unistd.h>

#include "vmnet.h"

static int write_all(int fd, const void *buf, size_t len)
{
        const unsigned char *p = buf;
        while (len) {
                ssize_t n = write(fd, p, len);
                if (n < 0 && errno == EINTR)
                        continue;
                if (n < 0 && errno == EAGAIN) {
                        /* The link is non-blocking for reads: wait here. */
                        struct pollfd w = {.fd = fd, .events = POLLOUT};
                        if (poll(&w, 1, -1) < 0 && errno != EINTR)
                                return -1;
                        continue;
                }
                if (n <= 0)
                        return -1;
                p += n;
                len -= (size_t)n;
        }
        return 0;
}

static int send_frame(struct vmnet *v, int type, int chan, const void *data, size_t len)
{
        unsigned char f[VMNET_HDR + VMNET_FRAME_MAX];
        f[0] = (unsigned char)type;
        f[1] = (unsigned char)chan;
        f[2] = (unsigned char)(len >> 8);
        f[3] = (unsigned char)len;
        if (len)
                memcpy(f + VMNET_HDR, data, len);
        return write_all(v->link, f, VMNET_HDR + len);
}

static int listen_on(uint16_t port)
{
        int fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
        if (fd < 0)
                return -errno;
        int one = 1;
        setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one));
        struct sockaddr_in a = {.sin_family = AF_INET, .sin_port = htons(port)};
        a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
        if (bind(fd, (struct sockaddr *)&a, sizeof(a)) < 0 || listen(fd, 64) < 0) {
                int e = errno;
                close(fd);
                return -e;
        }
        return fd;
}

int vmnet_init(struct vmnet *v, int link, bool guest, const uint16_t *ports, size_t n)
{
        memset(v, 0, sizeof(*v));
        v->link = link;
        v->guest = guest;
        for (size_t i = 0; i < VMNET_CHANS; i++)
                v->chans[i] = -1;
        for (size_t i = 0; i < VMNET_PORTS_MAX; i++)
                v->listen[i] = -1;
        if (n > VMNET_PORTS_MAX)
                return -E2BIG;
        for (size_t i = 0; i < n; i++) {
                v->ports[v->n_ports++] = ports[i];
                if (!guest)
                        continue;
                int fd = listen_on(ports[i]);
                if (fd < 0) {
                        vmnet_close(v);
                        return fd;
                }
                v->listen[i] = fd;
        }
        return 0;
}

size_t vmnet_pollfds(const struct vmnet *v, struct pollfd *p)
{
        size_t k = 0;
        p[k++] = (struct pollfd){.fd = v->link, .events = POLLIN};
        for (size_t i = 0; i < v->n_ports; i++)
                if (v->listen[i] >= 0)
                        p[k++] = (struct pollfd){.fd = v->listen[i], .events = POLLIN};
        for (size_t i = 0; i < VMNET_CHANS; i++)
                if (v->chans[i] >= 0)
                        p[k++] = (struct pollfd){.fd = v->chans[i], .events = POLLIN};
        return k;
}

static void drop_chan(struct vmnet *v, int c)
{
        if (v->chans[c] >= 0)
                close(v->chans[c]);
        v->chans[c] = -1;
}

static int connect_port(uint16_t port)
{
        int fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
        if (fd < 0)
                return -1;
        struct sockaddr_in a = {.sin_family = AF_INET, .sin_port = htons(port)};
        a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
        if (connect(fd, (struct sockaddr *)&a, sizeof(a)) < 0) {
                close(fd);
                return -1;
        }
        return fd;
}

/* One whole frame from the link. -1 ends the link. */
static int on_frame(struct vmnet *v, int type, int c, const unsigned char *d, size_t len)
{
        if (c >= VMNET_CHANS)
                return -1;
        switch (type) {
        case VMNET_OPEN: {
                if (v->guest || len != 2 || v->chans[c] >= 0)
                        return -1;
                uint16_t port = (uint16_t)(d[0] << 8 | d[1]);
                bool listed = false;
                for (size_t i = 0; i < v->n_ports; i++)
                        listed = listed || v->ports[i] == port;
                if (!listed)
                        return -1;
                int fd = connect_port(port);
                if (fd < 0)
                        return send_frame(v, VMNET_CLOSE, c, NULL, 0);
                v->chans[c] = fd;
                return 0;
        }
        case VMNET_DATA:
                /* Data for a channel this side already closed is dropped. */
                if (v->chans[c] >= 0 && write_all(v->chans[c], d, len) < 0) {
                        drop_chan(v, c);
                        return send_frame(v, VMNET_CLOSE, c, NULL, 0);
                }
                return 0;
        case VMNET_CLOSE:
                if (len)
                        return -1;
                drop_chan(v, c);
                return 0;
        default:
                return -1;
        }
}

static int read_link(struct vmnet *v)
{
        ssize_t n = read(v->link, v->in + v->in_len, sizeof(v->in) - v->in_len);
        if (n < 0 && (errno == EINTR || errno == EAGAIN))
                return 0;
        if (n <= 0)
                return -1;
        v->in_len += (size_t)n;
        size_t off = 0;
        while (v->in_len - off >= VMNET_HDR) {
                const unsigned char *h = v->in + off;
                size_t len = (size_t)h[2] << 8 | h[3];
                if (len > VMNET_FRAME_MAX)
                        return -1;
                if (v->in_len - off < VMNET_HDR + len)
                        break;
                if (on_frame(v, h[0], h[1], h + VMNET_HDR, len) < 0)
                        return -1;
                off += VMNET_HDR + len;
        }
        memmove(v->in, v->in + off, v->in_len - off);
        v->in_len -= off;
        return 0;
}

static int accept_on(struct vmnet *v, size_t i)
{
        int fd = accept4(v->listen[i], NULL, NULL, SOCK_CLOEXEC);
        if (fd < 0)
                return 0;
        int c = 0;
        while (c < VMNET_CHANS && v->chans[c] >= 0)
                c++;
        if (c == VMNET_CHANS) {
                close(fd);
                return 0;
        }
        unsigned char port[2] = {(unsigned char)(v->ports[i] >> 8), (unsigned char)v->ports[i]};
        v->chans[c] = fd;
        return send_frame(v, VMNET_OPEN, c, port, sizeof(port));
}

static int read_chan(struct vmnet *v, int c)
{
        unsigned char buf[VMNET_FRAME_MAX];
        /* Never blocks: a descriptor polled before a channel closed may
         * have been reused by the time it is read. */
        ssize_t n = recv(v->chans[c], buf, sizeof(buf), MSG_DONTWAIT);
        if (n < 0 && (errno == EINTR || errno == EAGAIN))
                return 0;
        if (n <= 0) {
                drop_chan(v, c);
                return send_frame(v, VMNET_CLOSE, c, NULL, 0);
        }
        return send_frame(v, VMNET_DATA, c, buf, (size_t)n);
}

int vmnet_step(struct vmnet *v, const struct pollfd *p, size_t n)
{
        for (size_t k = 0; k < n; k++) {
                if (!p[k].revents)
                        continue;
                int fd = p[k].fd, r = 0;
                if (fd == v->link) {
                        r = read_link(v);
                } else {
                        for (size_t i = 0; i < v->n_ports; i++)
                                if (v->listen[i] == fd)
                                        r = accept_on(v, i);
                        for (int c = 0; c < VMNET_CHANS; c++)
                                if (v->chans[c] == fd) {
                                        r = read_chan(v, c);
                                        break;
                                }
                }
                if (r < 0) {
                        vmnet_close(v);
                        return -1;
                }
        }
        return 0;
}

void vmnet_close(struct vmnet *v)
{
        for (int c = 0; c < VMNET_CHANS; c++)
                drop_chan(v, c);
        for (size_t i = 0; i < VMNET_PORTS_MAX; i++) {
                if (v->listen[i] >= 0)
                        close(v->listen[i]);
                v->listen[i] = -1;
        }
}
