/* SPDX-License-Identifier: Apache-2.0 */
#pragma once

#include "error.h"

struct policy;

/* A create's host workspace, read in a child with a time limit: a path
 * the daemon does not own (a FUSE mount whose server hangs, a dead
 * network share) can stall a stat or a read forever, and the event loop
 * serves every grant. Checks that ws is a directory and applies its
 * .airlock/isolation.json to p (repo_config_apply_loaded). -ENOTDIR: not
 * a directory; -ETIMEDOUT: it did not answer within HOSTWS_TIMEOUT_MS;
 * -EPERM: the repository's minimumTier refuses p; other -errno: the file
 * is invalid (err says why). */
#define HOSTWS_TIMEOUT_MS 2000

int hostws_apply(struct policy *p, const char *ws, const char *home, struct al_error *err);
