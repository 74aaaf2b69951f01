/* SPDX-License-Identifier: Apache-2.0 */
#pragma once

#include <jansson.h>
#include <stdint.h>

/* The approvals ops' client side (docs/internals/approvals.md), shared by
 * `airlock approvals` and airlockd's /v1/approvals: one short request to a
 * supervisor's control socket (RUN_DIR/ID/control.sock), its one answer
 * line within timeout_ms. Needs no daemon. */

/* The pending approvals of sandbox `id`: *ret the "approvals" array.
 * -ENOENT: no such supervisor (or it is gone); -ETIMEDOUT; -EPROTO. */
int sv_approvals_list(const char *run_dir, const char *id, uint64_t timeout_ms, json_t **ret);

/* Decide approval `aid` (its sandbox is the part before the last '-'):
 * *ret the approval with "decision" and "decidedBy". -EINVAL: a malformed
 * id or decision; -ESRCH: not pending; -ENOENT, -ETIMEDOUT, -EPROTO as
 * above. */
int sv_approvals_decide(const char *run_dir, const char *aid, const char *decision, const char *by,
                        uint64_t timeout_ms, json_t **ret);

/* The sandbox id an approval id names, into id[17]; -EINVAL if none. */
int sv_approvals_sandbox_of(const char *aid, char id[17]);
