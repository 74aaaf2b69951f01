/* SPDX-License-Identifier: Apache-2.0 */
#pragma once

#include <jansson.h>
#include <stdbool.h>
#include <stdint.h>

#include "error.h"

/* Port forwards (docs/internals/ports.md): a listener on the host that
 * relays each connection to 127.0.0.1:PORT inside the sandbox's own network
 * namespace, so that a server the agent runs can be reached from the host
 * while the sandbox itself gets no network at all. The supervisor owns them;
 * they close with the sandbox. Every connection is audited (port.connect). */

struct sv_core;
struct sv_ports;

enum {
        SV_PORTS_MAX = 16,      /* forwards per sandbox */
        SV_PORTS_CONN_MAX = 32, /* open connections per forward */
};

struct sv_port_req {
        uint16_t port;      /* inside the sandbox: 1 to 65535 */
        uint16_t host_port; /* on the host; 0: any free port */
        char bind[64];      /* the host address, an IPv4 or IPv6 literal; "": 127.0.0.1 */
};

/* Parse "PORT[:HOSTPORT]" (-P): HOSTPORT defaults to PORT, 0 asks for any
 * free port. Returns 0, or -EINVAL with *why set. Pure. */
int sv_ports_parse_spec(const char *s, struct sv_port_req *ret, const char **why);

/* Check a bind address (an IP literal). Returns 0 or -EINVAL. Pure. */
int sv_ports_check_bind(const char *addr);

/* The forwards of the sandbox that `c` owns (its loop, its network namespace
 * fd, its audit log). */
struct sv_ports *sv_ports_new(struct sv_core *c);

/* Open a forward. *ret gets its description ({"port", "hostPort", "bind",
 * "connections"}; caller decrefs). -EEXIST: the port is forwarded already;
 * -ENOSPC: SV_PORTS_MAX; -EINVAL: a port the network gate itself listens on;
 * other -errno: the host listener could not be made (err says which). */
int sv_ports_open(struct sv_ports *p, const struct sv_port_req *req, json_t **ret,
                  struct al_error *err);

/* Close the forward of `port` and its connections (each recorded).
 * -ENOENT when there is none. */
int sv_ports_close(struct sv_ports *p, uint16_t port, const char *reason);

/* The open forwards, as an array of descriptions. */
json_t *sv_ports_list(const struct sv_ports *p);

/* Close everything (recorded as closed for `reason`) and free. NULL is fine. */
struct sv_ports *sv_ports_free(struct sv_ports *p, const char *reason);

/* A TCP socket, unconnected, that lives in the network namespace netns_fd
 * names, made by a short-lived child (ports.c says why that is safe).
 * Returns the fd (O_CLOEXEC, non-blocking) or -errno. */
int sv_ports_netns_socket(int netns_fd);
