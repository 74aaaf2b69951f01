/* SPDX-License-Identifier: Apache-2.0 */
#pragma once

#include <event2/http.h>
#include <stdbool.h>

#include "daemon.h"
#include "grants.h"

/* The API's review and git endpoints (docs/api.md, "Reviewing changes" and
 * "Repositories"). What they keep lives in STATE_DIR/kept/sandboxes/ID/, in
 * the layout review.h and gitops.h describe. */

/* GET /v1/sandboxes/{id}/diff */
void changes_diff(struct daemon *d, struct evhttp_request *req, const struct grant *g,
                  const char *id);
/* POST /v1/sandboxes/{id}/accept (accept) or /discard */
void changes_decide(struct daemon *d, struct evhttp_request *req, const struct grant *g,
                    const char *id, bool accept);
/* POST /v1/sandboxes/{id}/export */
void changes_export(struct daemon *d, struct evhttp_request *req, const struct grant *g,
                    const char *id);
/* POST /v1/sandboxes/{id}/push */
void changes_push(struct daemon *d, struct evhttp_request *req, const struct grant *g,
                  const char *id);

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
typedef void (*changes_clone_fn)(const char *id, const char *workspace, const char *base,
                                 int error, const char *message, void *userdata);

/* Clone url (at rev; NULL: the default branch) into
 * STATE_DIR/kept/sandboxes/ID/repo for a sandbox ID chosen here. */
int changes_clone(struct daemon *d, const char *url, const char *rev, changes_clone_fn done,
                  void *userdata, struct al_error *err);
