/* SPDX-License-Identifier: Apache-2.0 */
#pragma once

/* What the host-side git commands share (cmd-git.c): the clone for
 * `airlock run --repo` there, `airlock export` and `airlock push` in
 * cmd-export.c. */

#include <jansson.h>
#include <stdio.h>

#include "error.h"
#include "gitops.h"
#include "secrets.h"

#define EXIT_BAD   1
#define EXIT_USAGE 2

/* "airlock: CMD: MESSAGE (see 'airlock CMD --help')" on stderr; EXIT_USAGE. */
int git_usage_error(const char *cmd, const char *fmt, ...) __attribute__((format(printf, 2, 3)));

/* The host-side secrets of FILE (GIT_TOKEN, GIT_USERNAME), or none. */
int git_load_secrets(const char *file, struct secrets **ret, struct al_error *err);

/* The credentials gitops uses: the secrets' token and user name, else the
 * URL's user; the git credential helper allowed, interactive on a terminal. */
struct gitops_creds git_creds_from(const struct secrets *s, const char *url_user);

/* Append one event to the audit log at path (none when path is NULL). The
 * fields never hold a credential by construction; a token is still redacted
 * should an error message ever quote it. */
int git_audit_event(const char *path, const char *token, const char *id, const char *kind,
                    json_t *fields, struct al_error *err);

/* fields' "ok", and its "error" when r < 0. */
void git_set_error(json_t *fields, int r, const struct al_error *err);

/* Print one line on stderr with the agent's bytes escaped. */
void git_say(const char *fmt, ...) __attribute__((format(printf, 1, 2)));

/* The mbox holds the agent's bytes (subjects, file names, messages). On a
 * terminal each line is shown escaped, so that an escape sequence cannot
 * drive the reader's terminal; into a file or a pipe it goes byte-exact,
 * as git am needs it. */
int git_copy_escaped(FILE *in, FILE *out);

/* A file (a partial output) the deadline's alarm (git_deadline_arm)
 * removes before it exits. */
void git_deadline_unlink(const char *path);
