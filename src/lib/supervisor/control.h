/* SPDX-License-Identifier: Apache-2.0 */
#pragma once

#include "error.h"
#include "policy.h"

struct secrets;
struct audit_options;

/* The supervisor of a long-lived sandbox (docs/control.md): it starts the
 * sandbox with an idle pid 1, then serves status, exec, attach, stdin,
 * signal and destroy requests on a unix socket until the sandbox is
 * destroyed or dies, and cleans up everything it made. */
struct control_config {
        const struct policy *policy; /* finalized; the workspace set */
        const char *id;              /* 16 lowercase hex digits */
        const char *run_dir;         /* the socket and state go to run_dir/id/ */
        const char *audit_path;      /* NULL: none */
        const struct audit_options *audit_rotate; /* NULL: the defaults */
        const char *keep_root;       /* an overlay workspace's changes go to
                                      * keep_root/sandboxes/id/ (review.h) */
        struct secrets *secrets;
        const char *account;
        const char *caller_home;
        int ready_fd; /* gets "ok\n" or "error: ...\n" once, then is closed; -1: none */
};

/* Returns when the sandbox is gone: 0, or -errno with `err` set when it
 * could not be started (the ready fd has been told too). */
int control_serve(const struct control_config *cfg, struct al_error *err);

