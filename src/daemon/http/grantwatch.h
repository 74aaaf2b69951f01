/* SPDX-License-Identifier: Apache-2.0 */
#pragma once

#include <stdbool.h>

/* A grant's long requests (a command's output, a process's events, a files
 * watch) are its reading while they last: each holds a grant watch, which
 * looks the grant up every GRANT_WATCH_MS whether or not anything flows,
 * and calls on_revoked once the grant is no longer in force. */

#define GRANT_WATCH_MS 1000

struct daemon;
struct grant_watch;

/* on_revoked(arg) runs on each check that finds the grant revoked, until
 * the watch is freed (which it may do, as may the free of what it
 * watches for). NULL when token_hash is empty. */
struct grant_watch *grant_watch_new(struct daemon *d, const char *token_hash,
                                    void (*on_revoked)(void *arg), void *arg);
struct grant_watch *grant_watch_free(struct grant_watch *w);
/* The grant of that token hash is no longer in force (revoked or gone). */
bool grant_hash_revoked(struct daemon *d, const char *token_hash);
