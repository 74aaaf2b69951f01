/* SPDX-License-Identifier: Apache-2.0 */
/* The microvm tier's network link, host side (src/vm/vmnet.h): what the
 * guest sends is hostile; a listed port is connected, anything else ends
 * the link. */
#include <arpa/inet.h>
#include <criterion/criterion.h>
#include <errno.h>
#include <netinet/in.h>
#include <poll.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include "../../src/vm/vmnet.h"

TestSuite(vmnet, .timeout = 20);

struct fixture {
        struct vmnet v;
        int guest; /* the guest's end of the link */
        int gate;  /* a listener standing for the gate's */
        uint16_t port;
};

static void setup_link(struct fixture *f)
{
        int sp[2];
        cr_assert_eq(socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, sp), 0);
        f->guest = sp[0];
        f->gate = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
        struct sockaddr_in a = {.sin_family = AF_INET};
        a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
        cr_assert_eq(bind(f->gate, (struct sockaddr *)&a, sizeof(a)), 0);
        cr_assert_eq(listen(f->gate, 8), 0);
        socklen_t len = sizeof(a);
        getsockname(f->gate, (struct sockaddr *)&a, &len);
        f->port = ntohs(a.sin_port);
        cr_assert_eq(vmnet_init(&f->v, sp[1], false, &f->port, 1), 0);
}

static void send_frame(int fd, int type, int chan, const void *d, size_t len)
{
        unsigned char h[4] = {(unsigned char)type, (unsigned char)chan, (unsigned char)(len >> 8),
                              (unsigned char)len};
        cr_assert_eq(write(fd, h, 4), 4);
        if (len)
                cr_assert_eq(write(fd, d, len), (ssize_t)len);
}

static void send_open(int fd, int chan, uint16_t port)
{
        unsigned char p[2] = {(unsigned char)(port >> 8), (unsigned char)port};
        send_frame(fd, VMNET_OPEN, chan, p, 2);
}

/* One poll and step of the host side: its result. */
static int step(struct fixture *f)
{
        struct pollfd p[1 + VMNET_PORTS_MAX + VMNET_CHANS];
        size_t n = vmnet_pollfds(&f->v, p);
        cr_assert_gt(poll(p, n, 2000), 0, "nothing to do");
        return vmnet_step(&f->v, p, n);
}

static bool gate_has_connection(struct fixture *f, int wait_ms)
{
        struct pollfd p = {.fd = f->gate, .events = POLLIN};
        return poll(&p, 1, wait_ms) == 1;
}

Test(vmnet, a_listed_port_is_carried_both_ways)
{
        struct fixture f;
        setup_link(&f);
        send_open(f.guest, 5, f.port);
        cr_assert_eq(step(&f), 0);
        cr_assert(gate_has_connection(&f, 2000));
        int conn = accept(f.gate, NULL, NULL);
        cr_assert_geq(conn, 0);

        send_frame(f.guest, VMNET_DATA, 5, "GET /", 5);
        cr_assert_eq(step(&f), 0);
        char buf[64] = "";
        cr_assert_eq(read(conn, buf, sizeof(buf)), 5);
        cr_assert_eq(memcmp(buf, "GET /", 5), 0);

        cr_assert_eq(write(conn, "200", 3), 3);
        cr_assert_eq(step(&f), 0);
        unsigned char got[7];
        cr_assert_eq(read(f.guest, got, sizeof(got)), 7);
        cr_assert_eq(got[0], VMNET_DATA);
        cr_assert_eq(got[1], 5);
        cr_assert_eq(got[3], 3);
        cr_assert_eq(memcmp(got + 4, "200", 3), 0);

        /* The gate closes: the guest hears CLOSE. */
        close(conn);
        cr_assert_eq(step(&f), 0);
        cr_assert_eq(read(f.guest, got, 4), 4);
        cr_assert_eq(got[0], VMNET_CLOSE);
        cr_assert_eq(got[1], 5);
        vmnet_close(&f.v);
}

static void refused(void (*send)(struct fixture *f))
{
        struct fixture f;
        setup_link(&f);
        send(&f);
        cr_assert_eq(step(&f), -1, "the link should have ended");
        cr_assert_not(gate_has_connection(&f, 100), "nothing may reach the gate");
}

static void unlisted_port(struct fixture *f)
{
        send_open(f->guest, 0, (uint16_t)(f->port + 1));
}
static void channel_out_of_range(struct fixture *f)
{
        send_open(f->guest, VMNET_CHANS, f->port);
}
static void frame_too_long(struct fixture *f)
{
        unsigned char h[4] = {VMNET_DATA, 0, 0xff, 0xff};
        cr_assert_eq(write(f->guest, h, 4), 4);
}
static void unknown_type(struct fixture *f)
{
        send_frame(f->guest, 9, 0, NULL, 0);
}
static void short_open(struct fixture *f)
{
        send_frame(f->guest, VMNET_OPEN, 0, "x", 1);
}
static void close_with_payload(struct fixture *f)
{
        send_frame(f->guest, VMNET_CLOSE, 0, "x", 1);
}

Test(vmnet, an_unlisted_port_ends_the_link)
{
        refused(unlisted_port);
}
Test(vmnet, a_channel_out_of_range_ends_the_link)
{
        refused(channel_out_of_range);
}
Test(vmnet, a_frame_over_the_bound_ends_the_link)
{
        refused(frame_too_long);
}
Test(vmnet, an_unknown_type_ends_the_link)
{
        refused(unknown_type);
}
Test(vmnet, a_malformed_open_ends_the_link)
{
        refused(short_open);
}
Test(vmnet, a_close_with_a_payload_ends_the_link)
{
        refused(close_with_payload);
}

Test(vmnet, reopening_a_channel_in_use_ends_the_link)
{
        struct fixture f;
        setup_link(&f);
        send_open(f.guest, 1, f.port);
        cr_assert_eq(step(&f), 0);
        send_open(f.guest, 1, f.port);
        cr_assert_eq(step(&f), -1);
}

Test(vmnet, data_for_a_closed_channel_is_dropped)
{
        struct fixture f;
        setup_link(&f);
        send_frame(f.guest, VMNET_DATA, 3, "late", 4);
        cr_assert_eq(step(&f), 0);
        cr_assert_not(gate_has_connection(&f, 100));
        vmnet_close(&f.v);
}

Test(vmnet, the_link_closing_ends_it)
{
        struct fixture f;
        setup_link(&f);
        close(f.guest);
        cr_assert_eq(step(&f), -1);
}
