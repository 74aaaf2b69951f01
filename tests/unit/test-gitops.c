/* SPDX-License-Identifier: Apache-2.0 */
#include <criterion/criterion.h>
#include <fcntl.h>
#include <ftw.h>
#include <git2.h>
#include <limits.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "gitops.h"
#include "util.h"

#include "gitops-test-remote.h"

static char seed[GITOPS_OID_HEX + 1];

static int rm_entry(const char *p, const struct stat *st, int flag, struct FTW *ftw)
{
        return remove(p);
}

/* Commit path=content on top of HEAD (or as a root commit when HEAD is
 * unborn or root is set) in the repository at dir, moving HEAD. */
static void commit_file(const char *dir, const char *path, const char *content, const char *msg,
                        bool root, char ret[GITOPS_OID_HEX + 1])
{
        git_repository *repo;
        cr_assert_eq(git_repository_open(&repo, dir), 0, "%s", git_error_last()->message);
        git_oid parent_id, blob, tree_id, id;
        git_commit *parent = NULL;
        git_tree *base = NULL, *tree;
        if (!root && git_reference_name_to_id(&parent_id, repo, "HEAD") == 0) {
                cr_assert_eq(git_commit_lookup(&parent, repo, &parent_id), 0);
                cr_assert_eq(git_commit_tree(&base, parent), 0);
        }
        cr_assert_eq(git_blob_create_from_buffer(&blob, repo, content, strlen(content)), 0);
        git_tree_update upd = {GIT_TREE_UPDATE_UPSERT, blob, GIT_FILEMODE_BLOB, path};
        cr_assert_eq(git_tree_create_updated(&tree_id, repo, base, 1, &upd), 0);
        cr_assert_eq(git_tree_lookup(&tree, repo, &tree_id), 0);
        git_signature *sig;
        static git_time_t when = 1700000000;
        cr_assert_eq(git_signature_new(&sig, "Test Agent", "agent@example.com", when++, 0), 0);
        const git_commit *parents[] = {parent};
        if (root) {
                cr_assert_eq(git_commit_create(&id, repo, NULL, sig, sig, NULL, msg, tree, 0, NULL),
                             0);
                cr_assert_eq(git_repository_set_head_detached(repo, &id), 0);
        } else
                cr_assert_eq(git_commit_create(&id, repo, "HEAD", sig, sig, NULL, msg, tree,
                                               parent ? 1 : 0, parents),
                             0, "%s", git_error_last()->message);
        git_oid_tostr(ret, GITOPS_OID_HEX + 1, &id);
        git_signature_free(sig);
        git_tree_free(tree);
        git_tree_free(base);
        git_commit_free(parent);
        git_repository_free(repo);
}

static void setup(void)
{
        gitops_test_remote("/var/tmp/airlock-test-gitops-XXXXXX");
        commit_file(bare, "README", "hello\n", "initial\n", false, seed);
}

static void teardown(void)
{
        nftw(top, rm_entry, 16, FTW_DEPTH | FTW_PHYS);
        git_libgit2_shutdown();
}

TestSuite(gitops, .init = setup, .fini = teardown);

static char *ref_target(const char *dir, const char *name)
{
        static char hex[GITOPS_OID_HEX + 1];
        git_repository *repo;
        git_oid id;
        cr_assert_eq(git_repository_open(&repo, dir), 0);
        int r = git_reference_name_to_id(&id, repo, name);
        git_repository_free(repo);
        if (r < 0)
                return NULL;
        git_oid_tostr(hex, sizeof(hex), &id);
        return hex;
}

/* The refs of a repository, one per line, sorted as listed. */
static size_t count_refs(const char *dir)
{
        git_repository *repo;
        git_strarray refs;
        cr_assert_eq(git_repository_open(&repo, dir), 0);
        cr_assert_eq(git_reference_list(&refs, repo), 0);
        size_t n = refs.count;
        git_strarray_dispose(&refs);
        git_repository_free(repo);
        return n;
}

static char *export_str(const char *base, size_t *ret_n, int *ret_r)
{
        char *buf = NULL;
        size_t len = 0;
        FILE *f = open_memstream(&buf, &len);
        struct al_error err = {0};
        *ret_r = gitops_export(ws, base, f, ret_n, &err);
        fclose(f);
        return buf;
}

static void clone_ws(char base[GITOPS_OID_HEX + 1])
{
        struct al_error err = {0};
        cr_assert_eq(gitops_clone(url, NULL, ws, NULL, base, &err), 0, "%s", err.msg);
}

static char *read_all(const char *path)
{
        char *buf = NULL;
        size_t len;
        cr_assert_eq(read_file_at(AT_FDCWD, path, 1 << 20, &buf, &len), 0, "%s", path);
        return buf;
}

static char *at(const char *base, const char *rel)
{
        static char bufs[4][PATH_MAX];
        static int next;
        char *b = bufs[next++ % 4];
        cr_assert_lt(snprintf(b, PATH_MAX, "%s/%s", base, rel), PATH_MAX);
        return b;
}

Test(gitops, clone_checks_out_default_branch)
{
        char base[GITOPS_OID_HEX + 1];
        clone_ws(base);
        cr_assert_str_eq(base, seed);
        _cleanup_free_ char *readme = read_all(at(ws, "README"));
        cr_assert_str_eq(readme, "hello\n");
        _cleanup_free_ char *config = read_all(at(ws, ".git/config"));
        cr_assert_not_null(strstr(config, url));
        cr_assert_str_eq(ref_target(ws, "HEAD"), seed);
}

Test(gitops, clone_revisions)
{
        char feature[GITOPS_OID_HEX + 1], tagged[GITOPS_OID_HEX + 1], tip[GITOPS_OID_HEX + 1];
        git_repository *repo;
        git_oid id;
        git_object *obj;
        cr_assert_eq(git_repository_open(&repo, bare), 0);
        git_oid_fromstr(&id, seed);
        cr_assert_eq(git_object_lookup(&obj, repo, &id, GIT_OBJECT_COMMIT), 0);
        git_reference *ref;
        cr_assert_eq(git_reference_create(&ref, repo, "refs/heads/feature", &id, 0, NULL), 0);
        git_reference_free(ref);
        cr_assert_eq(git_repository_set_head(repo, "refs/heads/feature"), 0);
        git_object_free(obj);
        git_repository_free(repo);
        commit_file(bare, "f", "feature\n", "on feature\n", false, feature);
        cr_assert_eq(git_repository_open(&repo, bare), 0);
        cr_assert_eq(git_repository_set_head(repo, "refs/heads/main"), 0);
        git_repository_free(repo);
        commit_file(bare, "t", "tagged\n", "to be tagged\n", false, tagged);
        cr_assert_eq(git_repository_open(&repo, bare), 0);
        git_oid_fromstr(&id, tagged);
        cr_assert_eq(git_object_lookup(&obj, repo, &id, GIT_OBJECT_COMMIT), 0);
        git_oid tag_id;
        cr_assert_eq(git_tag_create_lightweight(&tag_id, repo, "v1", obj, 0), 0);
        git_object_free(obj);
        git_repository_free(repo);
        commit_file(bare, "u", "tip\n", "tip\n", false, tip);

        struct al_error err = {0};
        char base[GITOPS_OID_HEX + 1];
        cr_assert_eq(gitops_clone(url, "feature", ws, NULL, base, &err), 0, "%s", err.msg);
        cr_assert_str_eq(base, feature);
        cr_assert_str_eq(ref_target(ws, "refs/heads/feature"), feature);
        _cleanup_free_ char *head = read_all(at(ws, ".git/HEAD"));
        cr_assert_str_eq(head, "ref: refs/heads/feature\n");
        _cleanup_free_ char *f = read_all(at(ws, "f"));
        cr_assert_str_eq(f, "feature\n");

        char ws2[PATH_MAX];
        snprintf(ws2, sizeof(ws2), "%s/ws2", top);
        cr_assert_eq(gitops_clone(url, "v1", ws2, NULL, base, &err), 0, "%s", err.msg);
        cr_assert_str_eq(base, tagged);
        cr_assert_eq(access(at(ws2, "u"), F_OK), -1);

        snprintf(ws2, sizeof(ws2), "%s/ws3", top);
        cr_assert_eq(gitops_clone(url, seed, ws2, NULL, base, &err), 0, "%s", err.msg);
        cr_assert_str_eq(base, seed);
        cr_assert_eq(access(at(ws2, "t"), F_OK), -1);

        snprintf(ws2, sizeof(ws2), "%s/ws4", top);
        cr_assert_eq(gitops_clone(url, "no-such-branch", ws2, NULL, base, &err), -ENOENT);
        cr_assert_not_null(strstr(err.msg, "no-such-branch"), "%s", err.msg);
        cr_assert_eq(access(ws2, F_OK), -1, "a failed clone leaves nothing");
}

Test(gitops, clone_refuses_existing_destination)
{
        struct al_error err = {0};
        char base[GITOPS_OID_HEX + 1];
        cr_assert_eq(mkdir(ws, 0700), 0);
        cr_assert_eq(gitops_clone(url, NULL, ws, NULL, base, &err), -EEXIST);
}

Test(gitops, export_has_the_new_commits_in_order)
{
        char base[GITOPS_OID_HEX + 1], c1[GITOPS_OID_HEX + 1], c2[GITOPS_OID_HEX + 1];
        clone_ws(base);
        size_t n = 99;
        int r;
        _cleanup_free_ char *none = export_str(base, &n, &r);
        cr_assert_eq(r, 0);
        cr_assert_eq(n, 0);
        cr_assert_str_eq(none, "");

        commit_file(ws, "a.txt", "first file\n", "first change\n\nwith a body\n", false, c1);
        commit_file(ws, "b.txt", "second file\n", "second change\n", false, c2);
        struct al_error err = {0};
        char head[GITOPS_OID_HEX + 1];
        cr_assert_eq(gitops_count(ws, base, &n, head, &err), 0, "%s", err.msg);
        cr_assert_eq(n, 2);
        cr_assert_str_eq(head, c2);

        _cleanup_free_ char *mbox = export_str(base, &n, &r);
        cr_assert_eq(r, 0);
        cr_assert_eq(n, 2);
        char from1[128], from2[128];
        snprintf(from1, sizeof(from1), "From %s Mon Sep 17 00:00:00 2001\n", c1);
        snprintf(from2, sizeof(from2), "\nFrom %s Mon Sep 17 00:00:00 2001\n", c2);
        cr_assert_eq(strncmp(mbox, from1, strlen(from1)), 0, "%s", mbox);
        char *p1 = strstr(mbox, "Subject: [PATCH 1/2] first change\n");
        char *p2 = strstr(mbox, from2);
        char *p3 = strstr(mbox, "Subject: [PATCH 2/2] second change\n");
        cr_assert(p1 && p2 && p3 && p1 < p2 && p2 < p3, "%s", mbox);
        cr_assert_not_null(strstr(mbox, "From: Test Agent <agent@example.com>\n"));
        cr_assert_not_null(strstr(mbox, "with a body\n"));
        cr_assert_not_null(strstr(mbox, "+++ b/a.txt\n"));
        cr_assert_not_null(strstr(mbox, "+second file\n"));
        size_t froms = 0;
        for (char *p = mbox; (p = strstr(p, "\nFrom ")); p++)
                froms++;
        cr_assert_eq(froms, 1, "one more patch after the first");
}

Test(gitops, push_creates_the_branch_with_exactly_the_new_commits)
{
        char base[GITOPS_OID_HEX + 1], c1[GITOPS_OID_HEX + 1], c2[GITOPS_OID_HEX + 1];
        clone_ws(base);
        commit_file(ws, "a.txt", "one\n", "one\n", false, c1);
        commit_file(ws, "b.txt", "two\n", "two\n", false, c2);
        size_t refs_before = count_refs(bare);

        struct al_error err = {0};
        struct gitops_push_result res;
        cr_assert_eq(gitops_push(ws, url, base, "agent/x", false, NULL, &res, &err), 0, "%s",
                     err.msg);
        cr_assert_eq(res.commits, 2);
        cr_assert_str_eq(res.head, c2);
        cr_assert(!res.replaced);
        cr_assert_str_eq(ref_target(bare, "refs/heads/agent/x"), c2);
        cr_assert_str_eq(ref_target(bare, "refs/heads/main"), seed, "nothing else moved");
        cr_assert_eq(count_refs(bare), refs_before + 1, "exactly one new ref");

        /* The branch holds base plus the two commits: c2's parent is c1, whose
         * parent is base. */
        git_repository *repo;
        git_oid id;
        git_commit *c, *p;
        cr_assert_eq(git_repository_open(&repo, bare), 0);
        git_oid_fromstr(&id, c2);
        cr_assert_eq(git_commit_lookup(&c, repo, &id), 0);
        cr_assert_eq(git_commit_parent(&p, c, 0), 0);
        char hex[GITOPS_OID_HEX + 1];
        cr_assert_str_eq(git_oid_tostr(hex, sizeof(hex), git_commit_id(p)), c1);
        git_commit_free(c);
        cr_assert_eq(git_commit_parent(&c, p, 0), 0);
        cr_assert_str_eq(git_oid_tostr(hex, sizeof(hex), git_commit_id(c)), base);
        git_commit_free(c);
        git_commit_free(p);
        git_repository_free(repo);

        /* The workspace got nothing from the push. */
        cr_assert_null(ref_target(ws, "refs/heads/airlock-push"));

        cr_assert_eq(gitops_push(ws, url, base, "agent/x", false, NULL, &res, &err), -EEXIST);
        cr_assert_not_null(strstr(err.msg, "agent/x"), "%s", err.msg);

        char c3[GITOPS_OID_HEX + 1];
        commit_file(ws, "c.txt", "three\n", "three\n", false, c3);
        cr_assert_eq(gitops_push(ws, url, base, "agent/x", false, NULL, &res, &err), -EEXIST);
        cr_assert_str_eq(ref_target(bare, "refs/heads/agent/x"), c2);
        cr_assert_eq(gitops_push(ws, url, base, "agent/x", true, NULL, &res, &err), 0, "%s",
                     err.msg);
        cr_assert(res.replaced);
        cr_assert_eq(res.commits, 3);
        cr_assert_str_eq(ref_target(bare, "refs/heads/agent/x"), c3);
}

Test(gitops, push_refusals)
{
        char base[GITOPS_OID_HEX + 1], orphan[GITOPS_OID_HEX + 1];
        clone_ws(base);
        struct al_error err = {0};
        struct gitops_push_result res;
        cr_assert_eq(gitops_push(ws, url, base, "agent/x", false, NULL, &res, &err), -ENODATA);
        cr_assert_eq(gitops_push(ws, url, base, "bad..name", false, NULL, &res, &err), -EINVAL);
        cr_assert_eq(gitops_push(ws, url, base, "-x", false, NULL, &res, &err), -EINVAL);
        cr_assert_eq(gitops_push(ws, url, base, "", false, NULL, &res, &err), -EINVAL);
        cr_assert_eq(gitops_push(ws, url, "xyz", "ok", false, NULL, &res, &err), -EINVAL);

        commit_file(ws, "x", "unrelated\n", "unrelated\n", true, orphan);
        cr_assert_eq(gitops_push(ws, url, base, "agent/y", false, NULL, &res, &err), -EPERM);
        cr_assert_not_null(strstr(err.msg, "does not descend"), "%s", err.msg);
        size_t n;
        int r;
        _cleanup_free_ char *out = export_str(base, &n, &r);
        cr_assert_eq(r, -EPERM);
        cr_assert_null(ref_target(bare, "refs/heads/agent/y"));
}

Test(gitops, hostile_workspace_layout_is_refused)
{
        char base[GITOPS_OID_HEX + 1], c1[GITOPS_OID_HEX + 1];
        clone_ws(base);
        commit_file(ws, "a", "a\n", "a\n", false, c1);
        struct al_error err = {0};
        size_t n;
        cr_assert_eq(mkdir(at(ws, ".git/objects/info"), 0755) < 0 && errno != EEXIST, 0);
        cr_assert_eq(write_full(open(at(ws, ".git/objects/info/alternates"),
                                     O_WRONLY | O_CREAT | O_CLOEXEC, 0644),
                                "/etc\n", 5),
                     0);
        cr_assert_eq(gitops_count(ws, base, &n, NULL, &err), -EPERM);
        cr_assert_not_null(strstr(err.msg, "alternates"), "%s", err.msg);
        unlink(at(ws, ".git/objects/info/alternates"));
        cr_assert_eq(gitops_count(ws, base, &n, NULL, &err), 0, "%s", err.msg);

        char moved[PATH_MAX];
        snprintf(moved, sizeof(moved), "%s/elsewhere.git", top);
        cr_assert_eq(rename(at(ws, ".git"), moved), 0);
        cr_assert_eq(symlink(moved, at(ws, ".git")), 0);
        cr_assert_eq(gitops_count(ws, base, &n, NULL, &err), -EPERM);
        struct gitops_push_result res;
        cr_assert_eq(gitops_push(ws, url, base, "agent/z", false, NULL, &res, &err), -EPERM);
}

Test(gitops, urls)
{
        struct al_error err = {0};
        char *u = NULL, *user = NULL;

        cr_assert_eq(gitops_url_clean("https://bob:hunter2@example.com/o/r.git", &u, &user, &err),
                     -EINVAL);
        cr_assert_null(strstr(err.msg, "hunter2"), "%s", err.msg);
        cr_assert_not_null(strstr(err.msg, "password"), "%s", err.msg);
        cr_assert_not_null(strstr(err.msg, "GIT_TOKEN"), "%s", err.msg);
        cr_assert_eq(gitops_url_clean("ssh://git:pw@example.com/r", &u, &user, &err), -EINVAL);

        cr_assert_eq(gitops_url_clean("https://bob@example.com:8443/o/r.git", &u, &user, &err), 0);
        cr_assert_str_eq(u, "https://example.com:8443/o/r.git");
        cr_assert_str_eq(user, "bob");
        free(u);
        free(user);

        cr_assert_eq(gitops_url_clean("HTTP://x%40y@Example.com/r", &u, &user, &err), 0);
        cr_assert_str_eq(u, "http://example.com/r");
        cr_assert_str_eq(user, "x@y");
        free(u);
        free(user);

        cr_assert_eq(gitops_url_clean("https://example.com/r", &u, &user, &err), 0);
        cr_assert_str_eq(u, "https://example.com/r");
        cr_assert_null(user);
        free(u);

        cr_assert_eq(gitops_url_clean("ssh://git@example.com/r", &u, &user, &err), 0);
        cr_assert_str_eq(u, "ssh://git@example.com/r");
        free(u);
        free(user);
        cr_assert_eq(gitops_url_clean("git@example.com:o/r.git", &u, &user, &err), 0);
        cr_assert_str_eq(u, "git@example.com:o/r.git");
        free(u);
        free(user);

        cr_assert_eq(chdir(top), 0);
        cr_assert_eq(gitops_url_clean("remote.git", &u, &user, &err), 0);
        cr_assert_str_eq(u, bare);
        free(u);
        free(user);
        cr_assert_eq(gitops_url_clean("missing.git", &u, &user, &err), -ENOENT);

        cr_assert_eq(gitops_url_clean("https://example.com/a b", &u, &user, &err), -EINVAL);
        cr_assert_eq(gitops_url_clean("https://example.com/a\nb", &u, &user, &err), -EINVAL);
        cr_assert_eq(gitops_url_clean("-uhttps://x", &u, &user, &err), -EINVAL);
        cr_assert_eq(gitops_url_clean("", &u, &user, &err), -EINVAL);
        cr_assert_eq(gitops_url_clean("https://x%00y@example.com/r", &u, &user, &err), -EINVAL);

        /* A clone from a URL with a password is refused before anything. */
        char base[GITOPS_OID_HEX + 1];
        cr_assert_eq(
            gitops_clone("https://bob:hunter2@127.0.0.1:1/r.git", NULL, ws, NULL, base, &err),
            -EINVAL);
        cr_assert_eq(access(ws, F_OK), -1);
}

Test(gitops, a_token_is_not_sent_over_plain_http_elsewhere)
{
        /* Nothing listens there: the clone fails before any credential is
         * asked; the point is that it fails cleanly and leaves nothing. */
        struct al_error err = {0};
        char base[GITOPS_OID_HEX + 1];
        struct gitops_creds creds = {.token = "sekrit"};
        cr_assert_lt(gitops_clone("http://127.0.0.1:1/r.git", NULL, ws, &creds, base, &err), 0);
        cr_assert_null(strstr(err.msg, "sekrit"));
        cr_assert_eq(access(ws, F_OK), -1);
}

Test(gitops, state_round_trip)
{
        cr_assert_eq(mkdir(ws, 0700), 0);
        struct al_error err = {0};
        struct gitops_state st = {.url = (char *)"https://example.com/r",
                                  .rev = NULL,
                                  .base = seed,
                                  .workspace = ws,
                                  .audit = (char *)"/a/log"};
        cr_assert_eq(gitops_state_write(ws, &st, &err), 0, "%s", err.msg);
        struct stat sb;
        cr_assert_eq(stat(at(ws, GITOPS_STATE), &sb), 0);
        cr_assert_eq(sb.st_mode & 0777, 0600);
        struct gitops_state back;
        cr_assert_eq(gitops_state_read(ws, &back, &err), 0, "%s", err.msg);
        cr_assert_str_eq(back.url, st.url);
        cr_assert_null(back.rev);
        cr_assert_null(back.user);
        cr_assert_str_eq(back.base, seed);
        cr_assert_str_eq(back.workspace, ws);
        cr_assert_str_eq(back.audit, "/a/log");
        gitops_state_clear(&back);
        cr_assert_eq(gitops_state_read(top, &back, &err), -ENOENT);
}

Test(gitops, escape_for_a_terminal)
{
        static const struct {
                const char *in, *out;
                bool nl;
        } cases[] = {
            {"plain text", "plain text", false},
            {"a\x1b]0;x\x07z", "a\\x1b]0;x\\x07z", false},
            {"csi \xc2\x9b" "2J", "csi \\u{009b}2J", false},
            {"raw \x9b" "2J", "raw \\x9b2J", false},
            {"del\x7f", "del\\x7f", false},
            {"l1\nl2\tx", "l1\\x0al2\\x09x", false},
            {"l1\nl2\tx\r", "l1\nl2\tx\\x0d", true},
            {"a.txt\xe2\x80\x8b", "a.txt\\u{200b}", false},
            {"\xe2\x80\xae" "gnp.exe", "\\u{202e}gnp.exe", false},
            {"caf\xc3\xa9", "caf\xc3\xa9", false},
            {"overlong \xc0\xaf", "overlong \\xc0\\xaf", false},
            {"cut \xe2\x80", "cut \\xe2\\x80", false},
        };
        for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
                char *e = gitops_escape(cases[i].in, strlen(cases[i].in), cases[i].nl);
                cr_expect_str_eq(e, cases[i].out, "case %zu", i);
                free(e);
        }
}
