/* SPDX-License-Identifier: Apache-2.0 */
#pragma once

#include <stddef.h>
#include "daemon.h"

/* The warm pool (pool.c): sandboxes started ahead, per class, handed to the
 * creates that fit them. */

/* A pooled sandbox for this create, or NULL. */
struct sandbox *pool_take(struct daemon *d, const char *class_name);
void pool_refill(struct daemon *d);
void pool_refill_later(struct daemon *d);
size_t pool_ready(struct daemon *d);
