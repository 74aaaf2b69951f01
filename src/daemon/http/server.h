/* SPDX-License-Identifier: Apache-2.0 */
#pragma once

#include "daemon.h"
#include "error.h"

/* The API server (server.c), for airlockd.c: libevent's HTTP server on
 * d->base, every request to the router. Its listeners and their guard are
 * httpguard.h. */

int api_setup(struct daemon *d, struct al_error *err);
/* Stopping: answer the requests still waiting on a supervisor. */
void api_shutdown(struct daemon *d);
