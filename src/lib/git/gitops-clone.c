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

static uint64_t fetch_max = GITOPS_CLONE_FETCH_MAX;
static uint64_t checkout_max = GITOPS_CLONE_CHECKOUT_MAX;
static uint64_t entries_max = GITOPS_CLONE_ENTRIES_MAX;
static bool fetch_too_big;

void gitops_set_clone_limits(uint64_t fetch_bytes, uint64_t checkout_bytes, uint64_t entries)
{
        fetch_max = fetch_bytes ? fetch_bytes : GITOPS_CLONE_FETCH_MAX;
        checkout_max = checkout_bytes ? checkout_bytes : GITOPS_CLONE_CHECKOUT_MAX;
        entries_max = entries ? entries : GITOPS_CLONE_ENTRIES_MAX;
}

struct tree_size {
        git_odb *odb;
        uint64_t bytes, entries;
        int error; /* 0, or -errno (EFBIG past a limit) */
};

static int tree_size_cb(const char *root, const git_tree_entry *e, void *payload)
{
        struct tree_size *t = payload;
        if (gitops_past_deadline()) {
                t->error = -ETIMEDOUT;
                return -1;
        }
        if (++t->entries > entries_max) {
                t->error = -EFBIG;
                return -1;
        }
        if (git_tree_entry_type(e) != GIT_OBJECT_BLOB)
                return 0; /* a tree is walked into; a submodule's commit is not checked out */
        size_t len = 0;
        git_object_t type;
        if (git_odb_read_header(&len, &type, t->odb, git_tree_entry_id(e)) < 0) {
                t->error = -EIO;
                return -1;
        }
        /* A file takes at least a block. */
        t->bytes += (uint64_t)len + 4096;
        if (t->bytes > checkout_max) {
                t->error = -EFBIG;
                return -1;
        }
        return 0;
}

/* Refuse a commit whose checkout would pass the limits, before a file is
 * written: sizes come from the objects' headers, nothing is inflated. */
static int checkout_fits(git_repository *repo, const git_commit *commit, struct al_error *err)
{
        _cleanup_(tree_freep) git_tree *tree = NULL;
        _cleanup_(odb_freep) git_odb *odb = NULL;
        if (git_commit_tree(&tree, commit) < 0 || git_repository_odb(&odb, repo) < 0)
                return gitops_fail_git(err, EIO, "reading the tree to check out");
        struct tree_size t = {.odb = odb};
        int gr = git_tree_walk(tree, GIT_TREEWALK_PRE, tree_size_cb, &t);
        if (t.error == -EFBIG)
                return al_error_set_message(
                    err, EFBIG,
                    "its checkout is larger than Airlock takes (%llu MiB, %llu entries, at "
                    "most); refusing to write it",
                    (unsigned long long)(checkout_max >> 20), (unsigned long long)entries_max);
        if (t.error == -ETIMEDOUT)
                return gitops_fail_deadline(err);
        if (t.error < 0 || gr < 0)
                return gitops_fail_git(err, EIO, "reading the tree to check out");
        return 0;
}

/* Check out rev in a fresh clone. */
static int checkout_rev(git_repository *repo, const char *rev, git_oid *ret, struct al_error *err)
{
        _cleanup_(commit_freep) git_commit *commit = NULL;
        _cleanup_free_ char *local = NULL;
        int valid = 0;

        git_checkout_options co = GIT_CHECKOUT_OPTIONS_INIT;
        co.checkout_strategy = GIT_CHECKOUT_FORCE;
        if (!rev) {
                if (lookup_commit(repo, "HEAD", &commit) < 0)
                        return gitops_fail_git(err, ENOENT, "the remote's default branch");
                int r = checkout_fits(repo, commit, err);
                if (r < 0)
                        return r;
                if (git_checkout_head(repo, &co) < 0)
                        return gitops_fail_git(err, EIO, "checking out");
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

        int fr = checkout_fits(repo, commit, err);
        if (fr < 0)
                return fr;
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
        if (stats->received_bytes > fetch_max) {
                fetch_too_big = true;
                git_error_set(GIT_ERROR_NET,
                              "the remote sent more than %llu MiB; Airlock stops a clone there",
                              (unsigned long long)(fetch_max >> 20));
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
        /* Nothing is checked out until its size is known (checkout_rev). */
        o.checkout_opts.checkout_strategy = GIT_CHECKOUT_NONE;

        _cleanup_(repo_freep) git_repository *repo = NULL;
        fetch_too_big = false;
        int gr = git_clone(&repo, clean, dest, &o);
        cred_state_finish(&cs, gr == 0);
        if (gr < 0) {
                _cleanup_free_ char *what = xasprintf("cloning %s", clean);
                r = gitops_fail_net(err, gr, &cs, what);
                if (fetch_too_big) {
                        err->code = EFBIG;
                        r = -EFBIG;
                }
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
