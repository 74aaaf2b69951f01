/* SPDX-License-Identifier: Apache-2.0 */
#pragma once

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

/* The kill switch's client side (docs/internals/control.md, "stop"), shared
 * by `airlock stop` and airlockd's POST /v1/stop. It needs no daemon: the
 * sandboxes are found by their supervisors' run directories
 * (RUN_DIR/ID/control.sock), every supervisor is asked at once to stop
 * (freeze, close the gates, record sandbox.stopped, kill, destroy), and one
 * that does not answer within the bound is stopped from outside: its cgroup
 * frozen, the supervisor and every member killed, the cgroup removed. */

enum sv_stop_how {
        SV_STOP_NOT_FOUND = 0, /* no such sandbox in the run directory */
        SV_STOP_SUPERVISOR,    /* its supervisor stopped it and recorded it */
        SV_STOP_CGROUP,        /* stopped from outside; nothing recorded */
        SV_STOP_FAILED,        /* processes were left after the bound */
};

/* The how's name, as `airlock stop --json` and POST /v1/stop say it. */
const char *sv_stop_how_name(enum sv_stop_how h);

struct sv_stop_result {
        char id[17];
        enum sv_stop_how how;
        bool frozen;        /* every process was frozen before the kill */
        char frozen_at[40]; /* the supervisor's timestamp, "" otherwise */
        uint64_t freeze_ms;
        char message[256]; /* why it was not a clean stop */
};

/* Whether s is a sandbox id: 16 lowercase hex digits. */
bool sv_stop_id_ok(const char *s);

/* The ids with a run directory beneath run_dir, at most max of them, into
 * ret (a new array of strings); their count, or -errno. */
int sv_stop_list(const char *run_dir, size_t max, char ***ret);

/* Stop the n sandboxes in ids (each checked: sv_stop_id_ok) within about
 * timeout_ms plus the cgroup fallback's own bound; res[i] says how each
 * went. `by` names who stopped them in the audit log. Returns the number
 * not stopped (FAILED); NOT_FOUND counts as stopped-nothing, not failure. */
int sv_stop_many(const char *run_dir, char *const *ids, size_t n, const char *by,
                 uint64_t timeout_ms, struct sv_stop_result *res);
