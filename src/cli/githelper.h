/* SPDX-License-Identifier: Apache-2.0 */
#pragma once

#include <stdbool.h>
#include <stddef.h>

/* The commands that need libgit2 live in a second program, airlock-git,
 * beside airlock: loading libgit2 and what it pulls in costs more than a
 * whole sandbox start, and `airlock run` must not pay for it. */

/* Replace this process with `airlock-git NAME ARGS...`; returns only on
 * failure, with the exit code to use. */
int githelper_exec(const char *name, int argc, char **argv);

/* Run `prog` (airlock or airlock-git, found beside this program) with
 * args; *ret_out is its stdout, at most `cap` bytes (the rest is read and
 * dropped), and *ret_status its exit status. stdin_null: its stdin is
 * /dev/null, else ours. -ENOENT when the program is not there. */
int githelper_capture(const char *prog, char *const *args, size_t cap, bool stdin_null,
                      char **ret_out, int *ret_status);

struct githelper_clone {
        char id[17];
        char *workspace;
};

/* `airlock run --repo`: clone on the host before the sandbox starts. On
 * failure msg holds one line and nothing is left behind. */
int githelper_clone(const char *repo, const char *rev, const char *secrets_file, const char *audit,
                    struct githelper_clone *ret, char *msg, size_t msglen);
void githelper_report(const char *id, bool quiet);
void githelper_clone_done(struct githelper_clone *c);
