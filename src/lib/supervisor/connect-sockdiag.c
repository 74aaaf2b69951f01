/* SPDX-License-Identifier: Apache-2.0 */
/* The kernel's TCP socket table, read and acted on (connect-sockdiag.h). */
#include <errno.h>
#include <linux/netlink.h>
#include <linux/sock_diag.h>
#include <netinet/in.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include "connect-sockdiag.h"

#define DIAG_BUF 32768

struct diag_req {
        struct nlmsghdr nlh;
        struct inet_diag_req_v2 r;
};

int cn_sockdiag_open(void)
{
        int nl = socket(AF_NETLINK, SOCK_RAW | SOCK_CLOEXEC, NETLINK_SOCK_DIAG);
        return nl < 0 ? -errno : nl;
}

/* Whatever an earlier request left unread (one cut short) is dropped, so
 * that the answers read next are this request's. */
static void drain(int nl)
{
        char buf[4096];
        while (recv(nl, buf, sizeof(buf), MSG_DONTWAIT) > 0) {
        }
}

static int send_req(int nl, struct diag_req *req)
{
        struct sockaddr_nl kernel = {.nl_family = AF_NETLINK};
        struct iovec iov = {.iov_base = req, .iov_len = sizeof(*req)};
        struct msghdr msg = {
            .msg_name = &kernel, .msg_namelen = sizeof(kernel), .msg_iov = &iov, .msg_iovlen = 1};
        drain(nl);
        if (sendmsg(nl, &msg, 0) < 0)
                return -errno;
        return 0;
}

static uint32_t next_seq(void)
{
        static uint32_t seq = 0x41726c6b; /* any start; only matched */
        return ++seq;
}

/* One family's dump: every message read until NLMSG_DONE. */
static int walk_family(int nl, int family, cn_sockdiag_fn fn, void *ud)
{
        struct diag_req req;
        memset(&req, 0, sizeof(req));
        req.nlh.nlmsg_len = sizeof(req);
        req.nlh.nlmsg_type = SOCK_DIAG_BY_FAMILY;
        req.nlh.nlmsg_flags = NLM_F_REQUEST | NLM_F_DUMP;
        req.nlh.nlmsg_seq = next_seq();
        req.r.sdiag_family = (uint8_t)family;
        req.r.sdiag_protocol = IPPROTO_TCP;
        req.r.idiag_states = ~0u;
        int r = send_req(nl, &req);
        if (r < 0)
                return r;
        static char buf[DIAG_BUF] __attribute__((aligned(NLMSG_ALIGNTO)));
        for (;;) {
                ssize_t n = recv(nl, buf, sizeof(buf), 0);
                if (n < 0) {
                        if (errno == EINTR)
                                continue;
                        return -errno;
                }
                if (n == 0)
                        return -EIO;
                for (struct nlmsghdr *h = (struct nlmsghdr *)buf; NLMSG_OK(h, n);
                     h = NLMSG_NEXT(h, n)) {
                        if (h->nlmsg_seq != req.nlh.nlmsg_seq)
                                continue;
                        if (h->nlmsg_type == NLMSG_DONE)
                                return 0;
                        if (h->nlmsg_type == NLMSG_ERROR) {
                                const struct nlmsgerr *e = NLMSG_DATA(h);
                                if (h->nlmsg_len < NLMSG_LENGTH(sizeof(*e)))
                                        return -EIO;
                                return e->error < 0 ? e->error : -EIO;
                        }
                        if (h->nlmsg_type != SOCK_DIAG_BY_FAMILY ||
                            h->nlmsg_len < NLMSG_LENGTH(sizeof(struct inet_diag_msg)))
                                continue;
                        const struct inet_diag_msg *m = NLMSG_DATA(h);
                        if (m->idiag_inode != 0)
                                fn(ud, (ino_t)m->idiag_inode, m->idiag_family, &m->id);
                }
        }
}

int cn_sockdiag_walk(int nl, cn_sockdiag_fn fn, void *ud)
{
        int r = walk_family(nl, AF_INET, fn, ud);
        if (r < 0)
                return r;
        return walk_family(nl, AF_INET6, fn, ud);
}

int cn_sockdiag_destroy(int nl, int family, const struct inet_diag_sockid *id)
{
        struct diag_req req;
        memset(&req, 0, sizeof(req));
        req.nlh.nlmsg_len = sizeof(req);
        req.nlh.nlmsg_type = SOCK_DESTROY;
        req.nlh.nlmsg_flags = NLM_F_REQUEST | NLM_F_ACK;
        req.nlh.nlmsg_seq = next_seq();
        req.r.sdiag_family = (uint8_t)family;
        req.r.sdiag_protocol = IPPROTO_TCP;
        req.r.idiag_states = ~0u;
        req.r.id = *id;
        int r = send_req(nl, &req);
        if (r < 0)
                return r;
        char buf[1024] __attribute__((aligned(NLMSG_ALIGNTO)));
        for (;;) {
                ssize_t n = recv(nl, buf, sizeof(buf), 0);
                if (n < 0) {
                        if (errno == EINTR)
                                continue;
                        return -errno;
                }
                if (n == 0)
                        return -EIO;
                for (struct nlmsghdr *h = (struct nlmsghdr *)buf; NLMSG_OK(h, n);
                     h = NLMSG_NEXT(h, n)) {
                        if (h->nlmsg_seq != req.nlh.nlmsg_seq || h->nlmsg_type != NLMSG_ERROR)
                                continue;
                        const struct nlmsgerr *e = NLMSG_DATA(h);
                        if (h->nlmsg_len < NLMSG_LENGTH(sizeof(*e)))
                                return -EIO;
                        return e->error;
                }
        }
}
