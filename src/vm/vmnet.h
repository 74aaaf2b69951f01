/* SPDX-License-Identifier: Apache-2.0 */
#pragma once

/* The microvm tier's network link (docs/tiers.md): the guest's TCP
 * connections to 127.0.0.1:<a gate port> carried over one virtio port to
 * the sandbox QEMU runs in, where they are connected to the gate's own
 * listener on that port. The same engine runs on both ends: in the guest's
 * init (static, no libairlock) and in the host side (tier/microvm.c).
 *
 * A frame is 4 bytes, type, channel, length (big-endian 16 bits), then the
 * payload: OPEN (2 bytes: the port), DATA, CLOSE. Only the guest opens; the
 * host side takes every frame as hostile: a bad type, channel, length or
 * port, or an OPEN of a channel in use, ends the link. */

#include <poll.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#define VMNET_CHANS     64
#define VMNET_PORTS_MAX 8
#define VMNET_HDR       4
#define VMNET_FRAME_MAX 16384

enum { VMNET_OPEN = 1, VMNET_DATA = 2, VMNET_CLOSE = 3 };

struct vmnet {
        int link;
        bool guest; /* accepts on listeners and opens; else connects */
        uint16_t ports[VMNET_PORTS_MAX];
        int listen[VMNET_PORTS_MAX]; /* the guest's listeners, or -1 */
        size_t n_ports;
        int chans[VMNET_CHANS];
        unsigned char in[VMNET_HDR + VMNET_FRAME_MAX];
        size_t in_len;
};

/* Sets up `v` over `link` (O_NONBLOCK: reads never wait, writes do) for `ports`; the guest also
 * listens on each on 127.0.0.1 (loopback must be up). 0 or -errno. */
int vmnet_init(struct vmnet *v, int link, bool guest, const uint16_t *ports, size_t n);

/* The descriptors to poll, at most 1 + VMNET_PORTS_MAX + VMNET_CHANS. */
size_t vmnet_pollfds(const struct vmnet *v, struct pollfd *p);

/* Handles what poll found; -1 when the link has ended (closed, or a
 * protocol error), after which every channel is closed. */
int vmnet_step(struct vmnet *v, const struct pollfd *p, size_t n);

void vmnet_close(struct vmnet *v);
