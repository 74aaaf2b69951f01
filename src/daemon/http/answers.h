/* SPDX-License-Identifier: Apache-2.0 */
#pragma once

#include <event2/http.h>
#include <stdbool.h>
#include <stddef.h>

/* The bytes of host-job answers (a diff, an mbox, a job's JSON line) the
 * daemon holds for a grant (answers.c): what the job has printed so far,
 * then what of the answer its connection has not written yet. A client
 * that starts many jobs and reads none of their answers would otherwise
 * grow the daemon by up to 64 MiB each until its connections time out.
 *
 * Bounded per grant (AIRLOCK_ANSWER_GRANT_MAX bytes, 128 MiB by default)
 * and in all (AIRLOCK_ANSWER_MAX, 512 MiB); the grants that read another
 * grant's sandbox share at most half of the whole, so that readers cannot
 * deny the sandboxes' makers their own diffs. Both from the daemon's
 * environment, 1 MiB to 64 GiB. */

struct daemon;
struct answer_hold;

/* A hold charged to `grant`; `reader`: the grant did not make the sandbox
 * the answer is about. */
struct answer_hold *answer_hold_new(struct daemon *d, const char *grant, bool reader);

/* Whether the hold may start its job: each hold is a job (a process on
 * the host) or an answer not yet written, ANSWER_HOLDS_GRANT_MAX of them
 * per grant and ANSWER_HOLDS_MAX in all (readers' holds at most half).
 * 0, -EMFILE past the grant's, -ENFILE past the daemon's. */
#define ANSWER_HOLDS_GRANT_MAX 16
#define ANSWER_HOLDS_MAX       256
int answer_hold_admit(const struct answer_hold *h);

/* n more bytes: 0, -EDQUOT past the grant's bound, -ENOBUFS past the
 * daemon's (or the readers' share of it). Nothing is charged on failure. */
int answer_hold_charge(struct answer_hold *h, size_t n);

/* Send the answer: `body` (drained) with its type and status, through
 * reply_body. The hold, taken, keeps what of it waits in the connection's
 * output and lets go of each byte as it is written, and of all of it when
 * the connection ends (libevent says nothing of a connection that fails
 * after the answer: the hold looks at it every second). */
void answer_hold_reply(struct answer_hold *h, struct evhttp_request *req, int code,
                       const char *type, struct evbuffer *body);

/* Let go of everything held; NULL. */
struct answer_hold *answer_hold_free(struct answer_hold *h);

/* The refusal of an admission or a charge that failed with r (429 or 503
 * `unread_answers`, naming the bound and what to do). */
void answer_hold_refused(struct daemon *d, struct evhttp_request *req, const struct answer_hold *h,
                         int r);

/* Bytes held in all (for the tests of the bound). */
size_t answers_held(void);

/* The daemon stops: every hold whose answer is still on its way is let
 * go (jobs_shutdown() has ended the others). */
void answers_shutdown(void);
