/* SPDX-License-Identifier: Apache-2.0 */
#pragma once

#include "daemon.h"

/* The daemon's housekeeping each --gc-interval (gc.c): sandboxes past
 * their time, the state database's health, pruning old records. */

/* Run it every --gc-interval from now on. */
void gc_start(struct daemon *d);
