/* SPDX-License-Identifier: Apache-2.0 */
#pragma once

#include <stdbool.h>
#include <stddef.h>

/* `airlock run --repo`: the host clones into the sandbox's state directory
 * before the sandbox starts, and the clone becomes the workspace. */
struct run_git {
        char id[17];     /* the sandbox id, chosen here unless given */
        char *state_dir; /* <state_root>/sandboxes/<id> */
        char *workspace; /* <state_dir>/repo */
        char *base;      /* the commit checked out */
};

struct run_git_args {
        const char *repo;
        const char *rev;          /* NULL: the default branch */
        const char *secrets_file; /* GIT_TOKEN, GIT_USERNAME; NULL: none */
        const char *audit;        /* --audit; NULL: the default log */
        const char *home;
        const char *state_root; /* NULL: review_state_root() of the user and home */
        const char *id;         /* 16 lowercase hex digits; NULL: a random one */
        bool no_helper;         /* never ask the git credential helper */
};

/* Clone, write git.json and audit "git.clone". A given id that is malformed
 * is -EINVAL, one whose state directory exists -EEXIST. On failure msg holds
 * one line and nothing is left behind. */
int run_git_clone(struct run_git *g, const struct run_git_args *a, char *msg, size_t msglen);

/* After the run: the agent's new commits and how to export or push them. */
void run_git_report(const struct run_git *g, bool quiet);

void run_git_done(struct run_git *g);

/* The deadline of a host-side git command (gitops_set_deadline), from
 * AIRLOCK_GIT_TIMEOUT (seconds, 1 to 86400) or GITOPS_TIMEOUT_DEFAULT,
 * and an alarm a little after it that reports the overrun on stderr (TEXT),
 * as {"error": "timeout", "message"} on stdout (JSON_CODE, push --json) or
 * as {"error": MSG} on stdout (JSON, airlock-git git-clone), then exits
 * with status 1. */
enum git_deadline_out { GIT_DEADLINE_TEXT, GIT_DEADLINE_JSON_CODE, GIT_DEADLINE_JSON };
unsigned git_timeout_seconds(void);
void git_deadline_arm(const char *cmd, enum git_deadline_out out);
