/* SPDX-License-Identifier: Apache-2.0 */
#pragma once

#include "error.h"

/* `airlock run --control PATH`: a one-shot run's own control socket, on
 * request, serving the caps op only (docs/control.md): one JSON request
 * line per connection, one answer line. */

struct sv_core;
struct caps_socket;

/* Bind a unix socket at `path` (mode 0600, the caller's; a path that
 * exists is refused, nothing is removed to make room) and serve it on the
 * core's loop. */
int caps_socket_open(struct sv_core *c, const char *path, struct caps_socket **ret,
                     struct al_error *err);
/* Stop serving, close the clients and remove the socket (if it is still
 * the one made). NULL is fine. */
struct caps_socket *caps_socket_free(struct caps_socket *s);
