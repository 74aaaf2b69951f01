/* SPDX-License-Identifier: Apache-2.0 */
/* Whether an address is the gate's own host (addr.h). The gate connects from
 * the host, so an address the kernel delivers locally reaches whatever
 * listens there on the wildcard address, through the host's loopback. The
 * kernel's own route for the address says so exactly: one RTM_GETROUTE
 * question on a netlink socket of the caller's network namespace, answered
 * within the sendto() that asks it. */
#include <errno.h>
#include <linux/netlink.h>
#include <linux/rtnetlink.h>
#include <netinet/in.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include "netgate/addr.h"
#include "util.h"

static int route_type(const struct netgate_addr *a, unsigned char *ret_type)
{
        struct {
                struct nlmsghdr nh;
                struct rtmsg rt;
                char attrs[RTA_SPACE(16)];
        } req;
        size_t alen = a->family == AF_INET ? 4 : 16;
        memset(&req, 0, sizeof(req));
        req.nh.nlmsg_len = NLMSG_LENGTH(sizeof(struct rtmsg));
        req.nh.nlmsg_type = RTM_GETROUTE;
        req.nh.nlmsg_flags = NLM_F_REQUEST;
        req.nh.nlmsg_seq = 1;
        req.rt.rtm_family = (unsigned char)a->family;
        req.rt.rtm_dst_len = (unsigned char)(alen * 8);
        struct rtattr *rta = (struct rtattr *)((char *)&req + NLMSG_ALIGN(req.nh.nlmsg_len));
        rta->rta_type = RTA_DST;
        rta->rta_len = (unsigned short)RTA_LENGTH(alen);
        memcpy(RTA_DATA(rta), a->bytes, alen);
        req.nh.nlmsg_len = NLMSG_ALIGN(req.nh.nlmsg_len) + RTA_ALIGN(rta->rta_len);

        _cleanup_close_ int fd =
            socket(AF_NETLINK, SOCK_RAW | SOCK_CLOEXEC | SOCK_NONBLOCK, NETLINK_ROUTE);
        if (fd < 0)
                return -errno;
        struct sockaddr_nl kernel = {.nl_family = AF_NETLINK};
        if (sendto(fd, &req, req.nh.nlmsg_len, 0, (struct sockaddr *)&kernel, sizeof(kernel)) < 0)
                return -errno;
        /* The kernel answers a route question before sendto() returns. */
        union {
                struct nlmsghdr nh;
                char buf[4096];
        } resp;
        ssize_t n;
        do
                n = recv(fd, &resp, sizeof(resp), MSG_DONTWAIT);
        while (n < 0 && errno == EINTR);
        if (n < 0)
                return -errno;
        struct nlmsghdr *nh = &resp.nh;
        if (!NLMSG_OK(nh, (size_t)n) || nh->nlmsg_seq != 1)
                return -EPROTO;
        if (nh->nlmsg_type == NLMSG_ERROR) {
                const struct nlmsgerr *e = NLMSG_DATA(nh);
                if (nh->nlmsg_len < NLMSG_LENGTH(sizeof(*e)))
                        return -EPROTO;
                /* No route at all (or a "prohibit" one): nothing here.
                 * Any other error (a blackhole is -EINVAL) is refused. */
                if (e->error == -ENETUNREACH || e->error == -EHOSTUNREACH || e->error == -EACCES) {
                        *ret_type = RTN_UNREACHABLE;
                        return 0;
                }
                return e->error < 0 ? e->error : -EPROTO;
        }
        if (nh->nlmsg_type != RTM_NEWROUTE || nh->nlmsg_len < NLMSG_LENGTH(sizeof(struct rtmsg)))
                return -EPROTO;
        const struct rtmsg *rt = NLMSG_DATA(nh);
        *ret_type = rt->rtm_type;
        return 0;
}

const char *netgate_addr_host_own(const struct netgate_addr *a)
{
        struct netgate_addr v4 = {.family = AF_INET};
        static const uint8_t mapped[12] = {0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0xff, 0xff};
        if (a->family == AF_INET6 && memcmp(a->bytes, mapped, 12) == 0) {
                /* A dual-stack socket reaches ::ffff:a.b.c.d at a.b.c.d. */
                memcpy(v4.bytes, a->bytes + 12, 4);
                a = &v4;
        }
        if (a->family != AF_INET && a->family != AF_INET6)
                return NULL;
        unsigned char type = 0;
        if (route_type(a, &type) < 0)
                return "host-address (the host's route to it could not be read)";
        switch (type) {
        case RTN_LOCAL: /* one of the host's own addresses */
        case RTN_ANYCAST:
                return "host-address (an address of the gate's own host)";
        case RTN_BROADCAST: /* every host of a network of the host's, itself too */
                return "host-address (a broadcast address of the host's networks)";
        default:
                return NULL;
        }
}
