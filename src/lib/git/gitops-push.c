/* SPDX-License-Identifier: Apache-2.0 */
/* Push the agent's commits to one branch of the remote, and nothing
 * else. */
#include <errno.h>
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>

#include "gitops-internal.h"

struct push_state {
        struct cred_state cs;
        const char *dst;
        char rejected[512];
        bool bad_update;
};

static int push_negotiation(const git_push_update **updates, size_t len, void *payload)
{
        struct push_state *ps = payload;
        if (len != 1 || !STREQ(updates[0]->dst_refname, ps->dst) ||
            !STREQ(updates[0]->src_refname, PUSH_REF)) {
                ps->bad_update = true;
                git_error_set_str(GIT_ERROR_NET, "the push would update other refs");
                return GIT_EUSER;
        }
        return 0;
}

static int push_progress(unsigned int current, unsigned int total, size_t bytes, void *payload)
{
        if (gitops_past_deadline()) {
                git_error_set_str(GIT_ERROR_NET, "the push took too long");
                return -1;
        }
        return 0;
}

static int pack_progress(int stage, uint32_t current, uint32_t total, void *payload)
{
        return push_progress(current, total, 0, payload);
}

static int push_update_reference(const char *refname, const char *status, void *payload)
{
        struct push_state *ps = payload;
        if (status && !ps->rejected[0])
                snprintf(ps->rejected, sizeof(ps->rejected), "%s: %s", refname, status);
        return 0;
}

static int cred_cb_push(git_credential **out, const char *url, const char *user,
                        unsigned int allowed, void *payload)
{
        struct push_state *ps = payload;
        return cred_cb(out, url, user, allowed, &ps->cs);
}

static bool branch_ok(const char *branch, const char *refname)
{
        int valid = 0;
        size_t n = strnlen(branch, BRANCH_MAX + 1);
        if (n == 0 || n > BRANCH_MAX || branch[0] == '-' || STREQ(branch, "HEAD"))
                return false;
        return git_reference_name_is_valid(&valid, refname) == 0 && valid;
}

static int push_to(git_repository *repo, const char *url, const char *refname, bool force,
                   struct push_state *ps, bool *ret_existed, struct al_error *err)
{
        _cleanup_(remote_freep) git_remote *remote = NULL;
        git_remote_create_options ro = GIT_REMOTE_CREATE_OPTIONS_INIT;
        ro.repository = repo;
        ro.flags = GIT_REMOTE_CREATE_SKIP_INSTEADOF | GIT_REMOTE_CREATE_SKIP_DEFAULT_FETCHSPEC;
        if (git_remote_create_with_opts(&remote, url, &ro) < 0)
                return gitops_fail_git(err, EINVAL, url);

        git_remote_callbacks cb = GIT_REMOTE_CALLBACKS_INIT;
        cb.credentials = cred_cb_push;
        cb.push_negotiation = push_negotiation;
        cb.push_update_reference = push_update_reference;
        cb.push_transfer_progress = push_progress;
        cb.pack_progress = pack_progress;
        cb.payload = ps;
        _cleanup_free_ char *what = xasprintf("pushing to %s", url);
        int gr = git_remote_connect(remote, GIT_DIRECTION_PUSH, &cb, NULL, NULL);
        if (gr < 0)
                return gitops_fail_net(err, gr, &ps->cs, what);

        const git_remote_head **heads;
        size_t n;
        if (git_remote_ls(&heads, &n, remote) < 0)
                return gitops_fail_git(err, EIO, what);
        bool existed = false;
        for (size_t i = 0; i < n; i++)
                if (STREQ(heads[i]->name, refname))
                        existed = true;
        *ret_existed = existed;
        if (existed && !force)
                return al_error_set_message(err, EEXIST, "branch \"%s\" already exists at %s",
                                            refname + strlen("refs/heads/"), url);

        _cleanup_free_ char *spec = xasprintf("%s%s:%s", force ? "+" : "", PUSH_REF, refname);
        char *specs[] = {spec};
        git_strarray refspecs = {specs, 1};
        git_push_options po = GIT_PUSH_OPTIONS_INIT;
        po.callbacks = cb;
        po.pb_parallelism = 1;
        gr = git_remote_upload(remote, &refspecs, &po);
        if (gr < 0)
                return gitops_fail_net(err, gr, &ps->cs, what);
        git_remote_disconnect(remote);
        if (ps->rejected[0])
                return al_error_set_message(err, EREMOTEIO, "%s: the remote refused %s", what,
                                            ps->rejected);
        return 0;
}

int gitops_push(const char *workspace, const char *url, const char *base, const char *branch,
                bool force, const struct gitops_creds *creds, struct gitops_push_result *ret,
                struct al_error *err)
{
        _cleanup_gitlib_ struct gitlib lib = {0};
        int r = gitlib_up(&lib, err);
        if (r < 0)
                return r;
        _cleanup_free_ char *refname = xasprintf("refs/heads/%s", branch ? branch : "");
        if (!branch || !branch_ok(branch, refname))
                return al_error_set_message(err, EINVAL, "bad branch name \"%s\"",
                                            branch ? branch : "");
        _cleanup_free_ char *clean = NULL, *user = NULL;
        r = gitops_url_clean(url, &clean, &user, err);
        if (r < 0)
                return r;

        /* The push goes out from the private copy of the agent's repository
         * (open_workspace): a repository the host owns, which reads no
         * config of the agent's; one ref of ours names what is pushed. */
        _cleanup_(agent_repo_close) struct agent_repo a = {0};
        r = gitops_open_workspace(workspace, &a, err);
        if (r < 0)
                return r;
        git_oid head;
        _cleanup_free_ git_oid *v = NULL;
        size_t n;
        r = gitops_new_commits(a.repo, base, &head, &v, &n, err);
        if (r < 0)
                return r;
        if (n == 0)
                return al_error_set_message(err, ENODATA,
                                            "nothing to push: the workspace's HEAD is the base "
                                            "commit");
        /* The copy keeps none of the agent's refs: only ours, so that no
         * name the agent chose can stand in its way or go along. */
        _cleanup_free_ char *refs = xasprintf("%s/refs", a.copy);
        _cleanup_free_ char *packed = xasprintf("%s/packed-refs", a.copy);
        gitops_rm_rf(refs);
        if ((mkdir(refs, 0700) < 0 && errno != EEXIST) || (unlink(packed) < 0 && errno != ENOENT))
                return al_error_set(err, errno, "preparing the push in %s", a.copy);
        _cleanup_(ref_freep) git_reference *ref = NULL;
        if (git_reference_create(&ref, a.repo, PUSH_REF, &head, 1, NULL) < 0)
                return gitops_fail_git(err, EIO, "preparing the push");
        git_repository *repo = a.repo;

        struct push_state ps = {.dst = refname};
        cred_state_init(&ps.cs, clean, user, creds);
        bool existed = false;
        r = push_to(repo, clean, refname, force, &ps, &existed, err);
        cred_state_finish(&ps.cs, r >= 0);
        cred_state_clear(&ps.cs);
        if (r < 0)
                return r;
        ret->commits = n;
        ret->replaced = existed;
        git_oid_tostr(ret->head, sizeof(ret->head), &head);
        return 0;
}
