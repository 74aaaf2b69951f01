/* SPDX-License-Identifier: Apache-2.0 */
#pragma once

#include "error.h"

/* Runs whose owner died. A sandbox's tree dies with its owner (spawn.c: the
 * parent-death signal and pid 1 watching the sync socket), but an owner that
 * is killed outright (kill -9) can neither remove the sandbox's cgroups nor
 * record its end. So every run leaves a small record, <state_root>/runs/<id>,
 * locked (flock) by its owner for as long as it lives: the kernel drops the
 * lock when the owner dies, however it dies. The next Airlock command that
 * sweeps the same state root finds records nobody holds and finishes those
 * runs: what is left of the tree is killed, the cgroups go, and the audit log
 * gets one `sandbox.destroyed` event with "reason":"owner_died" (unless the
 * run recorded its own end just before it died). The record goes last, so a
 * sweep that fails halfway is retried by the next one; the lock makes two
 * concurrent sweeps finish a run once. A sweep also reclaims the project ids
 * of limits.workspaceDisk that a killed owner left on a workspace
 * (quota_sweep(), the same lock-while-alive leases under <state_root>/quota). */

struct supervisor_config;
struct supervisor_result;
struct control_config;

/* supervisor_run() for `airlock run`: sweep cfg->state_root, record the run
 * there (its sandbox id, cgroups and audit log), run it, drop the record.
 * A run that cannot be recorded is not started (-errno, `err` set). */
int orphans_run(const struct supervisor_config *cfg, struct supervisor_result *res,
                struct al_error *err);

/* control_serve() for `airlock supervise`, recorded under cfg->keep_root the
 * same way. Its end is not audited by a sweep: the daemon that started the
 * supervisor notices its death and records it. */
int orphans_serve(const struct control_config *cfg, struct al_error *err);

/* Finish every run recorded under state_root whose owner is gone. Returns
 * the number finished, or -errno with `err` naming the first failure (the
 * others are still tried; a run that could not be finished keeps its record
 * for the next sweep). A missing directory is no run. */
int orphans_sweep(const char *state_root, struct al_error *err);
