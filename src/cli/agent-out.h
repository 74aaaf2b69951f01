/* SPDX-License-Identifier: Apache-2.0 */
#pragma once

#include <jansson.h>
#include <stdbool.h>
#include <stdio.h>

/* airlock agent's output: the transcript as it happens (JSON lines to a
 * file, a readable line each to stderr), and what the agent produced, read
 * through airlock and airlock-git. */

struct transcript {
        FILE *f;
        bool quiet;
};

/* One transcript entry (taken over). */
void agent_out_entry(void *ud, json_t *e);


/* An mbox of patches (airlock export) into one patch each, and each one's
 * subject, appended to the arrays. */
void agent_out_split_mbox(const char *mbox, json_t *patches, json_t *messages);
