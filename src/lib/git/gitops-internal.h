/* SPDX-License-Identifier: Apache-2.0 */
#pragma once

/* What the parts of gitops share and nothing outside them uses (gitops.h
 * is the API): limits, libgit2's lifetime and cleanups, the URL and
 * credential state clone and push pass to libgit2, the agent's repository
 * opened from its private copy, and the helpers one part defines for the
 * others. */

#include <git2.h>
#include <limits.h>
#include <stdbool.h>
#include <stdint.h>
#include <sys/types.h>

#include "gitops.h"
#include "util.h"

#define REV_MAX        1024
#define BRANCH_MAX     1024
#define COMMITS_MAX    10000
#define HELPER_OUT_MAX (64 * 1024)
#define STATE_MAX      (64 * 1024)
#define PUSH_REF       "refs/heads/airlock-push"
#define SHORT_OID      12

extern char **environ;

/* libgit2's global state lives as long as one of our calls. */
struct gitlib {
        bool up;
};

#define _cleanup_gitlib_ _cleanup_(gitlib_down)

DEFINE_TRIVIAL_CLEANUP_FUNC(git_repository *, git_repository_free, repo_freep)
DEFINE_TRIVIAL_CLEANUP_FUNC(git_remote *, git_remote_free, remote_freep)
DEFINE_TRIVIAL_CLEANUP_FUNC(git_object *, git_object_free, object_freep)
DEFINE_TRIVIAL_CLEANUP_FUNC(git_commit *, git_commit_free, commit_freep)
DEFINE_TRIVIAL_CLEANUP_FUNC(git_reference *, git_reference_free, ref_freep)
DEFINE_TRIVIAL_CLEANUP_FUNC(git_tree *, git_tree_free, tree_freep)
DEFINE_TRIVIAL_CLEANUP_FUNC(git_diff *, git_diff_free, diff_freep)
DEFINE_TRIVIAL_CLEANUP_FUNC(git_revwalk *, git_revwalk_free, revwalk_freep)
DEFINE_TRIVIAL_CLEANUP_FUNC(git_odb *, git_odb_free, odb_freep)
DEFINE_TRIVIAL_CLEANUP_FUNC(git_blob *, git_blob_free, blob_freep)
DEFINE_TRIVIAL_CLEANUP_FUNC(git_config *, git_config_free, config_freep)

/* A URL split into its parts (gitops-creds.c). */
struct url {
        char *scheme; /* lowercase */
        char *userinfo;
        char *host; /* lowercase; IPv6 literals keep their brackets */
        char *port; /* NULL: the scheme's default */
        char *path; /* from the '/' after the authority on; may be "" */
};

/* What `git credential fill` gave. */
struct helper_cred {
        char *protocol, *host, *path, *username, *password;
};

/* The credential callback's state, for one clone or push. */
struct cred_state {
        const struct gitops_creds *creds;
        struct url origin; /* empty scheme for local and scp-like URLs */
        const char *url_user;
        unsigned token_tries, helper_tries, ssh_tries, user_tries;
        struct helper_cred helper; /* what the helper gave, for approve/reject */
        bool helper_gave, helper_refused;
        bool gave_up;
        char msg[512];
};

/* Every object read from the agent's repository passes here: its size is
 * read from its header first (a few bytes inflated), and an object larger
 * than GITOPS_OBJECT_MAX, or one that would take the operation past
 * GITOPS_INFLATE_MAX in all, is refused before it is inflated. A 1.5 MB
 * loose object of zeros inflates to 1.5 GiB. */
struct inflate_budget {
        uint64_t used;
};

/* The agent's repository, opened from the private copy: objects from its
 * objects/ alone, each read capped, and the host user's config instead of
 * the repository's. */
struct agent_repo {
        git_repository *repo;
        char *copy;
        struct inflate_budget budget;
};

/* gitops.c */
int gitops_fail_git(struct al_error *err, int code, const char *what);
bool gitops_past_deadline(void);
int gitops_fail_deadline(struct al_error *err);
void gitops_wipe_free(char *s);
int gitlib_up(struct gitlib *g, struct al_error *err);
void gitops_buf_disposep(git_buf *b);
void gitops_rm_rf(const char *path);
void gitlib_down(struct gitlib *g);

/* gitops-creds.c */
void cred_state_init(struct cred_state *cs, const char *url, const char *url_user,
                     const struct gitops_creds *creds);
void cred_state_clear(struct cred_state *cs);
void cred_state_finish(struct cred_state *cs, bool ok);
int cred_cb(git_credential **out, const char *url, const char *username_from_url,
            unsigned int allowed, void *payload);
int gitops_fail_net(struct al_error *err, int gr, const struct cred_state *cs, const char *what);

/* gitops-copy.c */
void agent_repo_close(struct agent_repo *a);
int gitops_open_workspace(const char *workspace, struct agent_repo *a, struct al_error *err);

/* gitops-objcap.c */
int gitops_capped_backends(const char *objects, struct inflate_budget *budget,
                           git_odb_backend **ret_pack, git_odb_backend **ret_loose,
                           struct al_error *err);

/* gitops-export.c */
int gitops_new_commits(git_repository *repo, const char *base_hex, git_oid *ret_head,
                       git_oid **ret_v, size_t *ret_n, struct al_error *err);
