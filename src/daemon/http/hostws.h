/* SPDX-License-Identifier: Apache-2.0 */
#pragma once

#include "error.h"

struct event_base;
struct policy;

/* A create's host workspace, read in a child off the daemon's loop: a
 * path the daemon does not own (a FUSE mount whose server hangs, a dead
 * network share) can stall a stat or a read forever, and the loop serves
 * every grant. The child checks that ws is a directory and reads its
 * .airlock/isolation.json; the loop goes on meanwhile and hears its answer
 * (or its silence, after HOSTWS_TIMEOUT_MS, when the child is killed)
 * through an event. */
#define HOSTWS_TIMEOUT_MS 2000

struct hostws;

/* Called once, on the loop, with the child's answer: apply it with
 * hostws_apply_answer() before the hostws is freed. */
typedef void (*hostws_fn)(struct hostws *h, void *ud);

/* Start the child for ws. 0, or -errno with err set (nothing started,
 * done never called). */
int hostws_start(struct event_base *base, const char *ws, hostws_fn done, void *ud,
                 struct al_error *err);
/* The answer: applies the .airlock/isolation.json to p
 * (repo_config_apply_loaded). -ENOTDIR: not a directory; -ETIMEDOUT: it
 * did not answer in time; -EACCES: as root, another user could swap the
 * workspace (trusted.h; err names the directory); -EPERM: the
 * repository's minimumTier refuses p;
 * other -errno: the file is invalid or unreadable (err says why). */
int hostws_apply_answer(const struct hostws *h, struct policy *p, const char *home,
                        struct al_error *err);
void hostws_free(struct hostws *h);
