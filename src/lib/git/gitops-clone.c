/* SPDX-License-Identifier: Apache-2.0 */
/* Clone on the host into a sandbox's workspace, and check out the
 * revision asked for. */
#include <errno.h>
#include <string.h>
#include <sys/stat.h>

#include "gitops-internal.h"

static int create_origin(git_remote **out, git_repository *repo, const char *name, const char *url,
                         void *payload)
{
        /* The URL used is the URL given: no insteadOf rewriting. */
        git_remote_create_options o = GIT_REMOTE_CREATE_OPTIONS_INIT;
        o.repository = repo;
        o.name = name;
        o.flags = GIT_REMOTE_CREATE_SKIP_INSTEADOF;
        return git_remote_create_with_opts(out, url, &o);
}

static bool rev_ok(const char *rev)
{
        size_t n = strnlen(rev, REV_MAX + 1);
        if (n == 0 || n > REV_MAX || rev[0] == '-')
                return false;
        for (size_t i = 0; i < n; i++)
                if ((unsigned char)rev[i] <= 0x20 || rev[i] == 0x7f)
                        return false;
        return true;
}

static int lookup_commit(git_repository *repo, const char *spec, git_commit **ret)
{
        _cleanup_(object_freep) git_object *obj = NULL;
        _cleanup_(object_freep) git_object *peeled = NULL;
        int r = git_revparse_single(&obj, repo, spec);
        if (r < 0)
                return r;
        r = git_object_peel(&peeled, obj, GIT_OBJECT_COMMIT);
        if (r < 0)
                return r;
        *ret = (git_commit *)TAKE_PTR(peeled);
        return 0;
}

/* Check out rev in a fresh clone. */
static int checkout_rev(git_repository *repo, const char *rev, git_oid *ret, struct al_error *err)
{
        _cleanup_(commit_freep) git_commit *commit = NULL;
        _cleanup_free_ char *local = NULL;
        int valid = 0;

        if (!rev) {
                if (lookup_commit(repo, "HEAD", &commit) < 0)
                        return gitops_fail_git(err, ENOENT, "the remote's default branch");
                git_oid_cpy(ret, git_commit_id(commit));
                return 0;
        }
        if (!rev_ok(rev))
                return al_error_set_message(err, EINVAL, "bad revision \"%s\"", rev);

        _cleanup_free_ char *remote_ref = xasprintf("refs/remotes/origin/%s", rev);
        _cleanup_free_ char *tag_ref = xasprintf("refs/tags/%s", rev);
        _cleanup_(ref_freep) git_reference *ref = NULL;
        if (git_reference_name_is_valid(&valid, remote_ref) == 0 && valid &&
            git_reference_lookup(&ref, repo, remote_ref) == 0) {
                if (lookup_commit(repo, remote_ref, &commit) < 0)
                        return gitops_fail_git(err, EINVAL, rev);
                local = xasprintf("refs/heads/%s", rev);
        } else if (git_reference_name_is_valid(&valid, tag_ref) == 0 && valid &&
                   git_reference_lookup(&ref, repo, tag_ref) == 0) {
                if (lookup_commit(repo, tag_ref, &commit) < 0)
                        return gitops_fail_git(err, EINVAL, rev);
        } else if (lookup_commit(repo, rev, &commit) < 0)
                return al_error_set_message(err, ENOENT, "revision \"%s\" is not in the repository",
                                            rev);

        git_checkout_options co = GIT_CHECKOUT_OPTIONS_INIT;
        co.checkout_strategy = GIT_CHECKOUT_FORCE;
        if (git_checkout_tree(repo, (git_object *)commit, &co) < 0)
                return gitops_fail_git(err, EIO, "checking out");

        if (local) {
                _cleanup_(ref_freep) git_reference *branch = NULL;
                if (git_reference_lookup(&branch, repo, local) == 0) {
                        if (!git_oid_equal(git_reference_target(branch), git_commit_id(commit)))
                                return al_error_set_message(
                                    err, EEXIST, "a local branch \"%s\" already exists", rev);
                } else {
                        if (git_branch_create(&branch, repo, rev, commit, 0) < 0)
                                return gitops_fail_git(err, EIO, "creating the branch");
                        /* As git_branch_set_upstream() would, without its remote
                         * lookup (which leaks in libgit2 1.5). */
                        _cleanup_(config_freep) git_config *cfg = NULL;
                        _cleanup_free_ char *k_remote = xasprintf("branch.%s.remote", rev);
                        _cleanup_free_ char *k_merge = xasprintf("branch.%s.merge", rev);
                        if (git_repository_config(&cfg, repo) < 0 ||
                            git_config_set_string(cfg, k_remote, "origin") < 0 ||
                            git_config_set_string(cfg, k_merge, local) < 0)
                                return gitops_fail_git(err, EIO, "setting the branch's upstream");
                }
                if (git_repository_set_head(repo, local) < 0)
                        return gitops_fail_git(err, EIO, "setting HEAD");
        } else if (git_repository_set_head_detached(repo, git_commit_id(commit)) < 0)
                return gitops_fail_git(err, EIO, "setting HEAD");
        git_oid_cpy(ret, git_commit_id(commit));
        return 0;
}

static int clone_progress(const git_indexer_progress *stats, void *payload)
{
        if (gitops_past_deadline()) {
                git_error_set_str(GIT_ERROR_NET, "the clone took too long");
                return -1;
        }
        return 0;
}

int gitops_clone(const char *url, const char *rev, const char *dest,
                 const struct gitops_creds *creds, char ret_base[static GITOPS_OID_HEX + 1],
                 struct al_error *err)
{
        _cleanup_free_ char *clean = NULL, *user = NULL;
        int r = gitops_url_clean(url, &clean, &user, err);
        if (r < 0)
                return r;
        struct stat st;
        if (lstat(dest, &st) == 0)
                return al_error_set_message(err, EEXIST, "clone destination \"%s\" already exists",
                                            dest);
        if (errno != ENOENT)
                return al_error_set(err, errno, "clone destination \"%s\"", dest);

        _cleanup_gitlib_ struct gitlib lib = {0};
        r = gitlib_up(&lib, err);
        if (r < 0)
                return r;

        struct cred_state cs;
        cred_state_init(&cs, clean, user, creds);
        git_clone_options o = GIT_CLONE_OPTIONS_INIT;
        /* Never hard-link objects from a local source: the agent could change
         * the source repository's files through the shared inodes. */
        o.local = GIT_CLONE_NO_LOCAL;
        o.remote_cb = create_origin;
        o.fetch_opts.callbacks.credentials = cred_cb;
        o.fetch_opts.callbacks.payload = &cs;
        o.fetch_opts.callbacks.transfer_progress = clone_progress;
        o.checkout_opts.checkout_strategy = GIT_CHECKOUT_SAFE;

        _cleanup_(repo_freep) git_repository *repo = NULL;
        int gr = git_clone(&repo, clean, dest, &o);
        cred_state_finish(&cs, gr == 0);
        if (gr < 0) {
                _cleanup_free_ char *what = xasprintf("cloning %s", clean);
                r = gitops_fail_net(err, gr, &cs, what);
                cred_state_clear(&cs);
                gitops_rm_rf(dest);
                return r;
        }
        cred_state_clear(&cs);

        git_oid base;
        r = checkout_rev(repo, rev, &base, err);
        if (r < 0) {
                al_error_wrap(err, "cloning %s", clean);
                git_repository_free(TAKE_PTR(repo));
                gitops_rm_rf(dest);
                return r;
        }
        git_oid_tostr(ret_base, GITOPS_OID_HEX + 1, &base);
        return 0;
}
