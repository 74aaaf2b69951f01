/* SPDX-License-Identifier: Apache-2.0 */
#pragma once

/* Host-side git: the host clones a repository into a sandbox's workspace,
 * and later exports or pushes what the agent committed there. Every network
 * operation and every credential stays on the host; nothing is ever written
 * into the workspace after the clone.
 *
 * The workspace is the agent's: its objects, refs and config are read as
 * hostile input. Export and push first copy HEAD, packed-refs, refs/ and the
 * objects of .git into a private directory the host owns, reading each file
 * with O_NOFOLLOW|O_NONBLOCK and refusing symbolic links, FIFOs and devices,
 * alternates and commondir; libgit2 then reads only that copy, with the
 * host user's config instead of the repository's, every object's size
 * checked from its header before it is inflated, and pushes from it.
 *
 * State: <state_root>/sandboxes/<id>/git.json (mode 0600)
 *   {"url": without userinfo, "user": the URL's user name or null,
 *    "rev": as given or null, "base": the commit the clone checked out,
 *    "workspace": absolute path, "audit": the run's audit log or null} */

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

#include "error.h"

#define GITOPS_OID_HEX    40
#define GITOPS_URL_MAX    4096
#define GITOPS_STATE      "git.json"
#define GITOPS_TOKEN_USER "x-access-token"

/* What the host reads of an agent's repository (export, push, count): at
 * most GITOPS_COPY_MAX bytes of objects and refs in .git, no object that
 * inflates to more than GITOPS_OBJECT_MAX bytes, and GITOPS_INFLATE_MAX
 * bytes inflated in all. Past any of them the operation is refused. */
#define GITOPS_COPY_MAX    (2ULL << 30)
#define GITOPS_OBJECT_MAX  (64ULL << 20)
#define GITOPS_INFLATE_MAX (1ULL << 30)

/* Host-side git operations stop with -ETIMEDOUT ("took too long") once
 * seconds have passed from now; 0 clears the deadline. Checked between
 * files, objects and transfer steps; a caller that must also bound a
 * blocking network call sets an alarm of its own a little later. */
#define GITOPS_TIMEOUT_DEFAULT 600
void gitops_set_deadline(unsigned seconds);

/* s (len bytes, any content) made safe to show on a terminal, malloc'd:
 * C0 controls (but newline and tab when keep_newlines), DEL, C1 controls
 * (U+0080..U+009F, and raw bytes 0x80..0x9F), bytes that are not UTF-8,
 * and invisible or bidi code points become \xNN or \u{NNNN}. A
 * backslash stays as it is. */
char *gitops_escape(const char *s, size_t len, bool keep_newlines);

struct gitops_creds {
        const char *token;    /* an HTTP password (GIT_TOKEN); NULL: none */
        const char *username; /* the user for token; NULL: the URL's, else x-access-token */
        bool helper;          /* without a token, ask `git credential fill` */
        bool interactive;     /* the helper may prompt on the terminal */
};

/* Split a repository URL (scheme://…, scp-like user@host:path, or a local
 * path) into the URL to record and use, and the user name it named. A URL
 * holding a password is refused (-EINVAL, the message masks it); http(s)
 * user names move to ret_user (percent-decoded), ssh ones stay, being no
 * credential. Control characters and whitespace are refused. A relative
 * local path is made absolute. ret_user may be NULL; both are malloc'd. */
int gitops_url_clean(const char *url, char **ret_url, char **ret_user, struct al_error *err);

/* What a clone may bring to the host's disk: GITOPS_CLONE_FETCH_MAX bytes
 * received, and a checkout of at most GITOPS_CLONE_CHECKOUT_MAX bytes of
 * files and GITOPS_CLONE_ENTRIES_MAX entries, counted from the tree before
 * anything is written (each object's size read from its header: a tree
 * that names one subtree many times, a few KiB sent, would otherwise write
 * terabytes). Past one the clone fails with -EFBIG and leaves nothing.
 * gitops_set_clone_limits changes them for this process (0: the default). */
#define GITOPS_CLONE_FETCH_MAX    (8ULL << 30)
#define GITOPS_CLONE_CHECKOUT_MAX (8ULL << 30)
#define GITOPS_CLONE_ENTRIES_MAX  (1000ULL * 1000)
void gitops_set_clone_limits(uint64_t fetch_bytes, uint64_t checkout_bytes, uint64_t entries);

/* Clone url into dest (created; it must not exist) and check out rev: a
 * branch (checked out as a local branch of that name), a tag or a commit
 * (detached), or the remote's default branch when rev is NULL. The clone's
 * origin is the cleaned URL. ret_base gets the commit's id (40 hex digits
 * and a NUL). creds may be NULL: no credentials. */
int gitops_clone(const char *url, const char *rev, const char *dest,
                 const struct gitops_creds *creds, char ret_base[static GITOPS_OID_HEX + 1],
                 struct al_error *err);

/* The commits reachable from the workspace's HEAD but not from base.
 * ret_head (may be NULL) gets HEAD's id. -EPERM (message set) when HEAD
 * does not descend from base. */
int gitops_count(const char *workspace, const char *base, size_t *ret_n,
                 char ret_head[GITOPS_OID_HEX + 1], struct al_error *err);

/* Write those commits, oldest first, to out as an mbox of patches, as
 * format-patch does: "From <id> Mon Sep 17 00:00:00 2001", From, Date,
 * "Subject: [PATCH n/m] …", the message, "---", a diffstat and the diff.
 * Merge commits are left out, as format-patch does. ret_n (may be NULL):
 * the patches written. -EPERM when HEAD does not descend from base. */
int gitops_export(const char *workspace, const char *base, FILE *out, size_t *ret_n,
                  struct al_error *err);

struct gitops_push_result {
        size_t commits;                /* commits new on top of base */
        char head[GITOPS_OID_HEX + 1]; /* what the branch now points at */
        bool replaced;                 /* the branch existed (force) */
};

/* Push the workspace's HEAD, which must descend from base, to
 * refs/heads/<branch> at url, and nothing else. Errors: -EINVAL a bad
 * branch name; -ENODATA HEAD is base (nothing to push); -EPERM HEAD does not
 * descend from base; -EEXIST the branch exists on the remote and !force;
 * -EACCES authentication failed; -EREMOTEIO the remote refused the update. */
int gitops_push(const char *workspace, const char *url, const char *base, const char *branch,
                bool force, const struct gitops_creds *creds, struct gitops_push_result *ret,
                struct al_error *err);

struct gitops_state {
        char *url;
        char *user;
        char *rev;
        char *base;
        char *workspace;
        char *audit;
};

/* Write <state_dir>/git.json atomically (mode 0600). */
int gitops_state_write(const char *state_dir, const struct gitops_state *st, struct al_error *err);
/* Read it back; -ENOENT when the sandbox has no git.json. */
int gitops_state_read(const char *state_dir, struct gitops_state *ret, struct al_error *err);
void gitops_state_clear(struct gitops_state *st);
