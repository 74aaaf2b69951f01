/* SPDX-License-Identifier: Apache-2.0 */
#pragma once

#include <stdbool.h>
#include <stdint.h>

#include "store.h"

/* Retention: what ended long enough ago is removed, by airlockd on a timer
 * (--retain) and by `airlock gc` on demand. */

#define PRUNE_RETAIN_DEFAULT_MS (7ull * 24 * 3600 * 1000)

/* "7d", "12h", "30m", "90s", "1.5": a retention period in milliseconds. */
int prune_parse_retain(const char *s, uint64_t *ret_ms);

/* Delete the records of sandboxes destroyed or failed before `cutoff_ms`,
 * with their processes. */
int prune_records(struct store *s, uint64_t cutoff_ms, uint64_t *ret_n);

/* Remove the review state (<state_root>/sandboxes/<id>/, review.h) of
 * sandboxes whose changes were accepted or discarded, last touched before
 * `cutoff_ms`. Changes still waiting for review are kept, as is the state
 * of any id `keep(id, ud)` says is alive (keep may be NULL). A missing
 * state root is nothing to prune. */
int prune_review_state(const char *state_root, uint64_t cutoff_ms,
                       bool (*keep)(const char *id, void *ud), void *ud, uint64_t *ret_n);
