/* SPDX-License-Identifier: Apache-2.0 */
/* The commits the agent made on top of the clone's base: counted, and
 * exported as an mbox of patches. */
#include <ctype.h>
#include <errno.h>
#include <stdio.h>
#include <string.h>
#include <strings.h>

#include "gitops-internal.h"

static int parse_oid(const char *hex, git_oid *ret, struct al_error *err)
{
        if (!hex || strlen(hex) != GITOPS_OID_HEX ||
            strspn(hex, "0123456789abcdef") != GITOPS_OID_HEX || git_oid_fromstr(ret, hex) < 0)
                return al_error_set_message(err, EINVAL, "bad commit id \"%s\"", hex ? hex : "");
        return 0;
}

static void short_oid(const git_oid *id, char buf[static SHORT_OID + 1])
{
        git_oid_tostr(buf, SHORT_OID + 1, id);
}

/* The commits base..HEAD, oldest first (*ret_v malloc'd; NULL when none). */
int gitops_new_commits(git_repository *repo, const char *base_hex, git_oid *ret_head,
                       git_oid **ret_v, size_t *ret_n, struct al_error *err)
{
        git_oid base, head;
        int r = parse_oid(base_hex, &base, err);
        if (r < 0)
                return r;
        if (git_reference_name_to_id(&head, repo, "HEAD") < 0)
                return gitops_fail_git(err, ENOENT, "the workspace's HEAD");
        *ret_head = head;
        *ret_v = NULL;
        *ret_n = 0;
        if (git_oid_equal(&head, &base))
                return 0;

        char hs[SHORT_OID + 1], bs[SHORT_OID + 1];
        short_oid(&head, hs);
        short_oid(&base, bs);
        int d = git_graph_descendant_of(repo, &head, &base);
        if (d < 0)
                return gitops_fail_git(err, EIO, "walking the workspace's history");
        if (d == 0)
                return al_error_set_message(
                    err, EPERM,
                    "the workspace's HEAD (%s) does not descend from the base commit "
                    "(%s)",
                    hs, bs);

        _cleanup_(revwalk_freep) git_revwalk *walk = NULL;
        if (git_revwalk_new(&walk, repo) < 0 ||
            git_revwalk_sorting(walk, GIT_SORT_TOPOLOGICAL | GIT_SORT_REVERSE) < 0 ||
            git_revwalk_push(walk, &head) < 0 || git_revwalk_hide(walk, &base) < 0)
                return gitops_fail_git(err, EIO, "walking the workspace's history");
        _cleanup_free_ git_oid *v = NULL;
        size_t n = 0, cap = 0;
        git_oid id;
        int gr;
        while ((gr = git_revwalk_next(&id, walk)) == 0) {
                if (n == COMMITS_MAX)
                        return al_error_set_message(err, E2BIG, "more than %d new commits",
                                                    COMMITS_MAX);
                if (n == cap) {
                        cap = cap ? cap * 2 : 16;
                        v = xrealloc(v, cap, sizeof(*v));
                }
                v[n++] = id;
        }
        if (gr != GIT_ITEROVER)
                return gitops_fail_git(err, EIO, "walking the workspace's history");
        *ret_v = TAKE_PTR(v);
        *ret_n = n;
        return 0;
}

/* Start libgit2, open (a private copy of) the agent's workspace, and list
 * its commits since base: what export, count and push begin with. */
static int workspace_commits(struct gitlib *lib, const char *workspace, const char *base,
                             struct agent_repo *a, git_oid *ret_head, git_oid **ret_v,
                             size_t *ret_n, struct al_error *err)
{
        int r = gitlib_up(lib, err);
        if (r < 0)
                return r;
        r = gitops_open_workspace(workspace, a, err);
        if (r < 0)
                return r;
        return gitops_new_commits(a->repo, base, ret_head, ret_v, ret_n, err);
}

int gitops_count(const char *workspace, const char *base, size_t *ret_n,
                 char ret_head[GITOPS_OID_HEX + 1], struct al_error *err)
{
        _cleanup_gitlib_ struct gitlib lib = {0};
        _cleanup_(agent_repo_close) struct agent_repo a = {0};
        git_oid head;
        _cleanup_free_ git_oid *v = NULL;
        size_t n;
        int r = workspace_commits(&lib, workspace, base, &a, &head, &v, &n, err);
        if (r < 0)
                return r;
        *ret_n = n;
        if (ret_head)
                git_oid_tostr(ret_head, GITOPS_OID_HEX + 1, &head);
        return 0;
}

/* libgit2's diff holds about 100 bytes per line of both versions of a
 * file: a blob of newlines would cost the host a hundred times its size
 * (16 MiB took 1.9 GB). A commit with a file whose versions hold more lines
 * together goes into the mbox as binary patches instead, which git am
 * applies the same (libgit2 shows all of a diff's files as binary or none:
 * its size limit is not applied where binary patches are shown). */
#define EXPORT_LINES_MAX (2u * 1000 * 1000)

/* The size of blob f of a delta (0 for none), from its header only. */
static uint64_t blob_size(git_odb *odb, const git_diff_file *f)
{
        size_t len = 0;
        git_object_t type;
        if (!(f->flags & GIT_DIFF_FLAG_VALID_ID) || git_oid_is_zero(&f->id) ||
            git_odb_read_header(&len, &type, odb, &f->id) < 0 || type != GIT_OBJECT_BLOB)
                return 0;
        return len;
}

static int blob_lines(git_repository *repo, const git_diff_file *f, uint64_t *ret)
{
        *ret = 0;
        if (!(f->flags & GIT_DIFF_FLAG_VALID_ID) || git_oid_is_zero(&f->id))
                return 0;
        _cleanup_(blob_freep) git_blob *b = NULL;
        if (git_blob_lookup(&b, repo, &f->id) < 0)
                return -EIO;
        const char *p = git_blob_rawcontent(b), *end = p + git_blob_rawsize(b);
        for (; p < end; (*ret)++) {
                const char *nl = memchr(p, '\n', (size_t)(end - p));
                p = nl ? nl + 1 : end;
        }
        return 0;
}

/* Whether a file of diff has versions of more than EXPORT_LINES_MAX lines
 * together. Only the blobs large enough to hold that many are read. */
static int too_many_lines(git_repository *repo, git_diff *diff, bool *ret, struct al_error *err)
{
        *ret = false;
        git_odb *odb = NULL;
        if (git_repository_odb(&odb, repo) < 0)
                return gitops_fail_git(err, EIO, "reading the objects");
        size_t n = git_diff_num_deltas(diff);
        int r = 0;
        for (size_t i = 0; i < n && r == 0; i++) {
                const git_diff_delta *dl = git_diff_get_delta(diff, i);
                uint64_t os = blob_size(odb, &dl->old_file), ns = blob_size(odb, &dl->new_file);
                if (os + ns <= EXPORT_LINES_MAX)
                        continue;
                uint64_t ol, nlines;
                if (blob_lines(repo, &dl->old_file, &ol) < 0 ||
                    blob_lines(repo, &dl->new_file, &nlines) < 0) {
                        r = gitops_fail_git(err, EIO, "reading a file's versions");
                        break;
                }
                if (ol + nlines > EXPORT_LINES_MAX)
                        *ret = true;
        }
        git_odb_free(odb);
        return r;
}

/* git's mail reader (git am: mailsplit, then mailinfo) ends a message's text
 * at the first line that starts a patch, and applies every diff from there
 * on; it starts a new message at a line that looks like an mbox separator,
 * and takes "From:", "Subject:" and "Date:" lines at the top of the text
 * for the mail's own. A commit message holding such lines would make
 * `git am` apply a change that is in no commit (a diff written in the
 * message) or another author or subject: what is exported must be what
 * the commits hold. */
static bool patch_break(const char *l, size_t n)
{
        if ((n >= 6 && memcmp(l, "diff -", 6) == 0) || (n >= 7 && memcmp(l, "Index: ", 7) == 0))
                return true;
        if (n < 3 || memcmp(l, "---", 3) != 0)
                return false;
        if (n >= 5 && l[3] == ' ' && !isspace((unsigned char)l[4]))
                return true;
        for (size_t i = 3; i < n; i++)
                if (!isspace((unsigned char)l[i]))
                        return false;
        return true;
}

/* "From " and a time ("12:34") anywhere after it: a superset of what git's
 * mailsplit takes for a separator. */
static bool from_line(const char *l, size_t n)
{
        if (n < 5 || memcmp(l, "From ", 5) != 0)
                return false;
        for (size_t i = 6; i + 1 < n; i++)
                if (l[i] == ':' && isdigit((unsigned char)l[i - 1]) &&
                    isdigit((unsigned char)l[i + 1]))
                        return true;
        return false;
}

static bool inbody_header(const char *l, size_t n)
{
        static const char *const names[] = {"from:", "subject:", "date:", ">from ", "[patch] "};
        for (size_t k = 0; k < ARRAY_SIZE(names); k++) {
                size_t m = strlen(names[k]);
                if (n >= m && strncasecmp(l, names[k], m) == 0)
                        return true;
        }
        return false;
}

/* What in body git am would read otherwise than as this commit's text
 * (NULL: nothing), and the line's number in *ret_line. */
static const char *misread_line(const char *body, size_t *ret_line)
{
        bool top = true;
        size_t no = 0;
        for (const char *l = body; l && *l;) {
                const char *nl = strchr(l, '\n');
                size_t n = nl ? (size_t)(nl - l) : strlen(l);
                no++;
                *ret_line = no;
                if (patch_break(l, n))
                        return "the start of a patch";
                if (from_line(l, n))
                        return "the start of another mail";
                bool blank = true;
                for (size_t i = 0; i < n; i++)
                        blank = blank && isspace((unsigned char)l[i]);
                if (top && !blank && inbody_header(l, n))
                        return "a mail header";
                top = top && blank;
                l = nl ? nl + 1 : NULL;
        }
        return NULL;
}

/* The diffstat of each patch names the files unquoted (the diff's own
 * header quotes them): a name holding a newline would put lines of the
 * agent's choosing into the patch text, which git am applies as a diff. */
static int names_plain(git_diff *diff, const char *id, struct al_error *err)
{
        size_t n = git_diff_num_deltas(diff);
        for (size_t i = 0; i < n; i++) {
                const git_diff_delta *dl = git_diff_get_delta(diff, i);
                const char *paths[] = {dl->old_file.path, dl->new_file.path};
                for (size_t k = 0; k < 2; k++) {
                        const char *p = paths[k];
                        bool bad = false;
                        for (const unsigned char *s = (const unsigned char *)p; s && *s; s++)
                                bad = bad || *s < 0x20 || *s == 0x7f;
                        if (!bad)
                                continue;
                        _cleanup_free_ char *e = gitops_escape(p, strlen(p), false);
                        return al_error_set_message(
                            err, EBADMSG,
                            "commit %s: the file name \"%s\" holds a control character, which "
                            "the patch's summary would carry raw and git am could read as "
                            "patch text; refusing to export. Rename the file, or send the "
                            "commits with airlock push",
                            id, e ? e : "?");
                }
        }
        return 0;
}

int gitops_export(const char *workspace, const char *base, FILE *out, size_t *ret_n,
                  struct al_error *err)
{
        _cleanup_gitlib_ struct gitlib lib = {0};
        _cleanup_(agent_repo_close) struct agent_repo a = {0};
        git_oid head;
        _cleanup_free_ git_oid *v = NULL;
        size_t n;
        int r = workspace_commits(&lib, workspace, base, &a, &head, &v, &n, err);
        if (r < 0)
                return r;
        git_repository *repo = a.repo;

        /* format-patch leaves merges out and numbers what is left. */
        size_t m = 0;
        for (size_t i = 0; i < n; i++) {
                _cleanup_(commit_freep) git_commit *c = NULL;
                if (git_commit_lookup(&c, repo, &v[i]) < 0)
                        return gitops_fail_git(err, EIO, "reading a commit");
                if (git_commit_parentcount(c) <= 1)
                        v[m++] = v[i];
        }

        /* Every message is checked before a byte is written. */
        for (size_t i = 0; i < m; i++) {
                _cleanup_(commit_freep) git_commit *c = NULL;
                char id[SHORT_OID + 1];
                short_oid(&v[i], id);
                if (git_commit_lookup(&c, repo, &v[i]) < 0)
                        return gitops_fail_git(err, EIO, id);
                size_t line = 0;
                const char *what = misread_line(git_commit_body(c), &line);
                if (what)
                        return al_error_set_message(
                            err, EBADMSG,
                            "commit %s: line %zu of its message's body would be read by git am "
                            "as %s, which would apply or record what the commit does not hold; "
                            "refusing to export. Reword the commit (the line must not start "
                            "with \"diff -\", \"---\", \"Index: \", \"From \" with a time, "
                            "or a mail header at the top), or send the commits with airlock push",
                            id, line, what);
        }

        git_email_create_options eo = GIT_EMAIL_CREATE_OPTIONS_INIT;
        for (size_t i = 0; i < m; i++) {
                char id[GITOPS_OID_HEX + 1];
                git_oid_tostr(id, sizeof(id), &v[i]);
                _cleanup_(commit_freep) git_commit *c = NULL;
                _cleanup_(commit_freep) git_commit *parent = NULL;
                _cleanup_(tree_freep) git_tree *tree = NULL;
                _cleanup_(tree_freep) git_tree *ptree = NULL;
                _cleanup_(diff_freep) git_diff *diff = NULL;
                _cleanup_(gitops_buf_disposep) git_buf buf = GIT_BUF_INIT;
                if (git_commit_lookup(&c, repo, &v[i]) < 0 || git_commit_tree(&tree, c) < 0 ||
                    (git_commit_parentcount(c) == 1 &&
                     (git_commit_parent(&parent, c, 0) < 0 || git_commit_tree(&ptree, parent) < 0)))
                        return gitops_fail_git(err, EIO, id);
                eo.diff_opts.flags &= ~(uint32_t)GIT_DIFF_FORCE_BINARY;
                if (git_diff_tree_to_tree(&diff, repo, ptree, tree, &eo.diff_opts) < 0)
                        return gitops_fail_git(err, EIO, id);
                bool many;
                r = too_many_lines(repo, diff, &many, err);
                if (r < 0)
                        return r;
                if (many) {
                        git_diff_free(TAKE_PTR(diff));
                        eo.diff_opts.flags |= GIT_DIFF_FORCE_BINARY;
                        if (git_diff_tree_to_tree(&diff, repo, ptree, tree, &eo.diff_opts) < 0)
                                return gitops_fail_git(err, EIO, id);
                }
                r = names_plain(diff, id, err);
                if (r < 0)
                        return r;
                const char *summary = git_commit_summary(c);
                if (git_email_create_from_diff(&buf, diff, i + 1, m, &v[i], summary ? summary : "",
                                               git_commit_body(c), git_commit_author(c), &eo) < 0)
                        return gitops_fail_git(err, EIO, id);
                if (fwrite(buf.ptr, 1, buf.size, out) != buf.size)
                        return al_error_set_message(err, EIO, "writing the patches: %s",
                                                    strerror(errno));
        }
        if (fflush(out) != 0)
                return al_error_set_message(err, EIO, "writing the patches: %s", strerror(errno));
        if (ret_n)
                *ret_n = m;
        return 0;
}
