/* SPDX-License-Identifier: Apache-2.0 */
#pragma once

#include <stddef.h>
#include <stdbool.h>

#include "daemon.h"
#include "grants.h"

/* What a create's "repo" asks of the daemon (changes.c): may the grant
 * have it cloned, and the clone. The review and git endpoints themselves
 * are http/changes.c. */

/* The CLI's one-line message (a job's stderr) without its "airlock: CMD: "
 * prefix, in buf. */
const char *changes_cli_message(const char *err, char *buf, size_t len);

/* Why a create's "repo" is refused. */
struct changes_refusal {
        int status;        /* 400 or 403 */
        const char *code;  /* NULL: bad_request (400) or limit_exceeded (403) */
        const char *limit; /* for limit_exceeded */
        char message[512];
};

/* May grant g have the daemon clone url? A local repository needs
 * allowHostWorkspace; a remote one must be on a --git-host host, since the
 * daemon's credentials go with the clone. */
int changes_check_repo(struct daemon *d, const struct grant *g, const char *url,
                       struct changes_refusal *ret);

/* Called once the clone is over: workspace and base on success, else error
 * (-EINVAL the request was bad, -EIO the clone failed, -ECANCELED the daemon
 * is stopping) and a message. */
typedef void (*changes_clone_fn)(const char *id, const char *workspace, const char *base, int error,
                                 const char *message, void *userdata);

/* Clone url (at rev; NULL: the default branch) into
 * STATE_DIR/kept/sandboxes/ID/repo for a sandbox ID chosen here. */
int changes_clone(struct daemon *d, const char *url, const char *rev, changes_clone_fn done,
                  void *userdata, struct al_error *err);
