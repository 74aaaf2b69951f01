/* SPDX-License-Identifier: Apache-2.0 */
#include <ctype.h>
#include <dirent.h>
#include <fcntl.h>
#include <git2.h>
#include <git2/sys/odb_backend.h>
#include <git2/sys/repository.h>
#include <jansson.h>
#include <limits.h>
#include <stdarg.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/wait.h>

#include "child.h"
#include "fs.h"
#include "gitops.h"
#include "utf8.h"
#include "util.h"

#define REV_MAX        1024
#define BRANCH_MAX     1024
#define COMMITS_MAX    10000
#define HELPER_OUT_MAX (64 * 1024)
#define STATE_MAX      (64 * 1024)
#define PUSH_REF       "refs/heads/airlock-push"
#define SHORT_OID      12

extern char **environ;

/* A libgit2 failure: "<what>: <libgit2's message>". */
static int fail_git(struct al_error *err, int code, const char *what)
{
        const git_error *e = git_error_last();
        return al_error_set_message(err, code, "%s: %s", what,
                                    e && e->message ? e->message : "unknown error");
}

static uint64_t deadline_us; /* monotonic; 0: none */

void gitops_set_deadline(unsigned seconds)
{
        deadline_us = seconds ? now_monotonic_us() + (uint64_t)seconds * 1000000 : 0;
}

static bool past_deadline(void)
{
        return deadline_us && now_monotonic_us() > deadline_us;
}

static int fail_deadline(struct al_error *err)
{
        return al_error_set_message(err, ETIMEDOUT,
                                    "the host-side git operation took too long and was stopped");
}

static void wipe_free(char *s)
{
        if (s) {
                explicit_bzero(s, strlen(s));
                free(s);
        }
}

/* libgit2's global state lives as long as one of our calls. */
struct gitlib {
        bool up;
};

static void gitlib_down(struct gitlib *g)
{
        if (g->up)
                git_libgit2_shutdown();
}

static int gitlib_up(struct gitlib *g, struct al_error *err)
{
        if (git_libgit2_init() < 0)
                return fail_git(err, EIO, "initializing libgit2");
        g->up = true;
        /* Bounds what libgit2 keeps of objects read: with each object under
         * GITOPS_OBJECT_MAX, the memory an operation uses stays bounded. */
        git_libgit2_opts(GIT_OPT_SET_CACHE_MAX_SIZE, (ssize_t)GITOPS_OBJECT_MAX);
        return 0;
}

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
DEFINE_TRIVIAL_CLEANUP_FUNC(git_config *, git_config_free, config_freep)

static void buf_disposep(git_buf *b)
{
        git_buf_dispose(b);
}

/* ---- URLs ---- */

struct url {
        char *scheme; /* lowercase */
        char *userinfo;
        char *host; /* lowercase; IPv6 literals keep their brackets */
        char *port; /* NULL: the scheme's default */
        char *path; /* from the '/' after the authority on; may be "" */
};

static void url_clear(struct url *u)
{
        free(u->scheme);
        wipe_free(u->userinfo);
        free(u->host);
        free(u->port);
        free(u->path);
        memset(u, 0, sizeof(*u));
}

static bool scheme_char(char c, bool first)
{
        return isalpha((unsigned char)c) ||
               (!first && (isdigit((unsigned char)c) || c == '+' || c == '-' || c == '.'));
}

/* Length of "scheme" when s starts with "scheme://", else 0. */
static size_t scheme_len(const char *s)
{
        size_t i = 0;
        while (s[i] && scheme_char(s[i], i == 0))
                i++;
        return i > 0 && strncmp(s + i, "://", 3) == 0 ? i : 0;
}

static char *lower(char *s)
{
        for (char *p = s; p && *p; p++)
                *p = (char)tolower((unsigned char)*p);
        return s;
}

/* Parse "scheme://[userinfo@]host[:port][/path]". */
static int url_parse(const char *s, struct url *ret)
{
        size_t sl = scheme_len(s);
        if (!sl)
                return -EINVAL;
        struct url u = {0};
        u.scheme = lower(strndup(s, sl));
        const char *auth = s + sl + 3;
        size_t al = strcspn(auth, "/?#");
        const char *at = memrchr(auth, '@', al);
        const char *hp = auth;
        if (at) {
                u.userinfo = strndup(auth, (size_t)(at - auth));
                hp = at + 1;
        }
        const char *end = auth + al, *colon;
        if (*hp == '[') {
                const char *rb = memchr(hp, ']', (size_t)(end - hp));
                if (!rb) {
                        url_clear(&u);
                        return -EINVAL;
                }
                colon = rb + 1 < end && rb[1] == ':' ? rb + 1 : NULL;
                u.host = strndup(hp, (size_t)(rb + 1 - hp));
        } else {
                colon = memchr(hp, ':', (size_t)(end - hp));
                u.host = strndup(hp, (size_t)((colon ? colon : end) - hp));
        }
        lower(u.host);
        if (colon && colon + 1 < end)
                u.port = strndup(colon + 1, (size_t)(end - colon - 1));
        u.path = xstrdup(end);
        if (!u.scheme || !u.host || !u.path || (u.userinfo == NULL && at)) {
                url_clear(&u);
                return -ENOMEM;
        }
        *ret = u;
        return 0;
}

static bool is_http(const char *scheme)
{
        return STREQ(scheme, "http") || STREQ(scheme, "https");
}

static const char *default_port(const char *scheme)
{
        if (STREQ(scheme, "http"))
                return "80";
        if (STREQ(scheme, "https"))
                return "443";
        if (STREQ(scheme, "ssh"))
                return "22";
        return "";
}

static bool same_origin(const struct url *a, const struct url *b)
{
        const char *pa = a->port ? a->port : default_port(a->scheme);
        const char *pb = b->port ? b->port : default_port(b->scheme);
        return STREQ(a->scheme, b->scheme) && STREQ(a->host, b->host) && STREQ(pa, pb);
}

static bool is_loopback(const char *host)
{
        return STREQ(host, "localhost") || STREQ(host, "[::1]") ||
               (strncmp(host, "127.", 4) == 0 && strspn(host, "0123456789.") == strlen(host));
}

static int hexval(char c)
{
        if (c >= '0' && c <= '9')
                return c - '0';
        c = (char)tolower((unsigned char)c);
        return c >= 'a' && c <= 'f' ? c - 'a' + 10 : -1;
}

static int percent_decode(const char *s, char **ret)
{
        size_t n = strlen(s);
        _cleanup_free_ char *out = xcalloc(n + 1, 1);
        size_t j = 0;
        for (size_t i = 0; i < n; i++) {
                if (s[i] == '%') {
                        if (i + 2 >= n)
                                return -EINVAL;
                        int hi = hexval(s[i + 1]), lo = hexval(s[i + 2]);
                        if (hi < 0 || lo < 0)
                                return -EINVAL;
                        out[j++] = (char)(hi << 4 | lo);
                        i += 2;
                } else
                        out[j++] = s[i];
        }
        for (size_t i = 0; i < j; i++)
                if ((unsigned char)out[i] < 0x20 || out[i] == 0x7f)
                        return -EINVAL;
        *ret = TAKE_PTR(out);
        return 0;
}

int gitops_url_clean(const char *url, char **ret_url, char **ret_user, struct al_error *err)
{
        if (!url || !*url)
                return al_error_set_message(err, EINVAL, "empty repository URL");
        size_t n = strnlen(url, GITOPS_URL_MAX + 1);
        if (n > GITOPS_URL_MAX)
                return al_error_set_message(err, EINVAL, "repository URL longer than %d bytes",
                                            GITOPS_URL_MAX);
        for (size_t i = 0; i < n; i++)
                if ((unsigned char)url[i] <= 0x20 || url[i] == 0x7f)
                        return al_error_set_message(
                            err, EINVAL, "repository URL holds a space or a control character");
        if (url[0] == '-')
                return al_error_set_message(err, EINVAL, "repository URL \"%s\" starts with '-'",
                                            url);

        if (scheme_len(url)) {
                struct url u = {0};
                if (url_parse(url, &u) < 0)
                        return al_error_set_message(err, EINVAL, "malformed repository URL \"%s\"",
                                                    url);
                if (u.userinfo && strchr(u.userinfo, ':')) {
                        size_t ul = strcspn(u.userinfo, ":");
                        int r = al_error_set_message(
                            err, EINVAL,
                            "the repository URL \"%s://%.*s:***@%s%s%s%s\" holds a "
                            "password; give it as GIT_TOKEN in the secrets file instead",
                            u.scheme, (int)ul, u.userinfo, u.host, u.port ? ":" : "",
                            u.port ? u.port : "", u.path);
                        url_clear(&u);
                        return r;
                }
                if (!*u.host && !STREQ(u.scheme, "file")) {
                        url_clear(&u);
                        return al_error_set_message(err, EINVAL,
                                                    "repository URL \"%s\" names no host", url);
                }
                _cleanup_free_ char *user = NULL;
                char *clean;
                if (is_http(u.scheme) && u.userinfo) {
                        if (percent_decode(u.userinfo, &user) < 0) {
                                url_clear(&u);
                                return al_error_set_message(err, EINVAL,
                                                            "malformed user name in \"%s\"", url);
                        }
                        clean = xasprintf("%s://%s%s%s%s", u.scheme, u.host, u.port ? ":" : "",
                                          u.port ? u.port : "", u.path);
                } else
                        clean = xstrdup(url);
                url_clear(&u);
                *ret_url = clean;
                if (ret_user)
                        *ret_user = TAKE_PTR(user);
                return 0;
        }

        /* scp-like "[user@]host:path": a ':' before any '/'. */
        const char *colon = strchr(url, ':'), *slash = strchr(url, '/');
        if (colon && (!slash || colon < slash)) {
                *ret_url = xstrdup(url);
                if (ret_user)
                        *ret_user = NULL;
                return 0;
        }

        char abs[PATH_MAX];
        if (!realpath(url, abs))
                return al_error_set(err, errno, "repository \"%s\"", url);
        *ret_url = xstrdup(abs);
        if (ret_user)
                *ret_user = NULL;
        return 0;
}

/* ---- credentials ---- */

struct helper_cred {
        char *protocol, *host, *path, *username, *password;
};

static void helper_cred_clear(struct helper_cred *c)
{
        free(c->protocol);
        free(c->host);
        free(c->path);
        free(c->username);
        wipe_free(c->password);
        memset(c, 0, sizeof(*c));
}

/* Run `git credential ACTION` with input on its stdin; its stdout (bounded)
 * goes to ret_out when that is not NULL. The helper runs from "/" with no
 * repository in its environment: the directory Airlock was started from may
 * be an agent's workspace, whose config could name a helper of its choosing. */
static int helper_run(const char *action, const char *input, bool interactive, char **ret_out)
{
        static const char *const drop[] = {
            "GIT_DIR=",    "GIT_WORK_TREE=", "GIT_COMMON_DIR=", "GIT_TERMINAL_PROMPT=",
            "GIT_CONFIG=", "GIT_NAMESPACE="};
        _cleanup_strv_ char **env = NULL;
        size_t n_env = 0;
        for (char **e = environ; e && *e; e++) {
                bool keep = true;
                for (size_t i = 0; i < ARRAY_SIZE(drop); i++)
                        if (strncmp(*e, drop[i], strlen(drop[i])) == 0)
                                keep = false;
                if (keep)
                        env = strv_append(env, &n_env, *e);
        }
        if (!interactive)
                env = strv_append(env, &n_env, "GIT_TERMINAL_PROMPT=0");
        if (!env)
                env = strv_append(env, &n_env, "PATH=/usr/bin:/bin");

        int sv[2];
        if (socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, sv) < 0)
                return -errno;
        _cleanup_close_ int mine = sv[0], theirs = sv[1];

        char *argv[] = {(char *)"git", (char *)"credential", (char *)action, NULL};
        struct child_spawn cs = {.path = "git",
                                 .argv = argv,
                                 .envp = env,
                                 .fds = {theirs, theirs, CHILD_FD_NULL},
                                 .n_fds = 3,
                                 .cwd = "/",
                                 .search_path = true};
        pid_t pid;
        int r = child_spawn(&cs, &pid, NULL);
        if (r < 0)
                return r;
        closep(&theirs);
        theirs = -1;

        size_t ilen = strlen(input), off = 0;
        while (off < ilen) {
                ssize_t w = send(mine, input + off, ilen - off, MSG_NOSIGNAL);
                if (w < 0 && errno == EINTR)
                        continue;
                if (w < 0)
                        break; /* the helper left; its status says more */
                off += (size_t)w;
        }
        shutdown(mine, SHUT_WR);

        _cleanup_free_ char *out = xcalloc(HELPER_OUT_MAX + 1, 1);
        size_t len = 0;
        bool too_long = false;
        for (;;) {
                char tmp[4096];
                ssize_t m = read(mine, tmp, sizeof(tmp));
                if (m < 0 && errno == EINTR)
                        continue;
                if (m <= 0)
                        break;
                if (len + (size_t)m > HELPER_OUT_MAX)
                        too_long = true;
                else {
                        memcpy(out + len, tmp, (size_t)m);
                        len += (size_t)m;
                }
                explicit_bzero(tmp, sizeof(tmp));
        }
        int status;
        while (waitpid(pid, &status, 0) < 0)
                if (errno != EINTR)
                        return -errno;
        if (too_long) {
                explicit_bzero(out, len);
                return -EFBIG;
        }
        if (!WIFEXITED(status) || WEXITSTATUS(status) != 0) {
                explicit_bzero(out, len);
                return -EIO;
        }
        if (ret_out)
                *ret_out = TAKE_PTR(out);
        else
                explicit_bzero(out, len);
        return 0;
}

static char *helper_input(const struct helper_cred *c)
{
        return xasprintf("protocol=%s\nhost=%s\n%s%s%s%s%s%s%s%s%s\n", c->protocol, c->host,
                         c->path ? "path=" : "", c->path ? c->path : "", c->path ? "\n" : "",
                         c->username ? "username=" : "", c->username ? c->username : "",
                         c->username ? "\n" : "", c->password ? "password=" : "",
                         c->password ? c->password : "", c->password ? "\n" : "");
}

static int helper_fill(struct helper_cred *c, bool interactive)
{
        char *input = helper_input(c);
        _cleanup_free_ char *out = NULL;
        int r = helper_run("fill", input, interactive, &out);
        wipe_free(input);
        if (r < 0)
                return r;
        for (char *line = out; line && *line;) {
                char *nl = strchr(line, '\n');
                if (nl)
                        *nl = '\0';
                if (strncmp(line, "username=", 9) == 0) {
                        free(c->username);
                        c->username = xstrdup(line + 9);
                } else if (strncmp(line, "password=", 9) == 0) {
                        wipe_free(c->password);
                        c->password = xstrdup(line + 9);
                }
                line = nl ? nl + 1 : NULL;
        }
        explicit_bzero(out, strlen(out));
        return c->username && c->password ? 0 : -ENOENT;
}

static void helper_tell(const struct helper_cred *c, const char *action, bool interactive)
{
        char *input = helper_input(c);
        (void)helper_run(action, input, interactive, NULL);
        wipe_free(input);
}

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

static void cred_state_init(struct cred_state *cs, const char *url, const char *url_user,
                            const struct gitops_creds *creds)
{
        memset(cs, 0, sizeof(*cs));
        cs->creds = creds;
        cs->url_user = url_user;
        if (url_parse(url, &cs->origin) < 0)
                memset(&cs->origin, 0, sizeof(cs->origin));
}

static void cred_state_clear(struct cred_state *cs)
{
        url_clear(&cs->origin);
        helper_cred_clear(&cs->helper);
}

/* After the operation: tell the helper whether its credential worked, as git
 * itself does. */
static void cred_state_finish(struct cred_state *cs, bool ok)
{
        if (!cs->helper_gave)
                return;
        bool interactive = cs->creds && cs->creds->interactive;
        if (cs->helper_refused)
                helper_tell(&cs->helper, "reject", interactive);
        else if (ok)
                helper_tell(&cs->helper, "approve", interactive);
}

static int give_up(struct cred_state *cs, const char *fmt, ...)
    __attribute__((format(printf, 2, 3)));

static int give_up(struct cred_state *cs, const char *fmt, ...)
{
        va_list ap;
        va_start(ap, fmt);
        vsnprintf(cs->msg, sizeof(cs->msg), fmt, ap);
        va_end(ap);
        cs->gave_up = true;
        git_error_set_str(GIT_ERROR_NET, cs->msg);
        return GIT_EUSER;
}

/* libgit2 calls this again each time a credential is refused: every source
 * gets one attempt, then the operation fails. */
static int cred_cb(git_credential **out, const char *url, const char *username_from_url,
                   unsigned int allowed, void *payload)
{
        struct cred_state *cs = payload;
        const struct gitops_creds *creds = cs->creds;

        if (allowed & GIT_CREDENTIAL_USERPASS_PLAINTEXT) {
                struct url u = {0};
                if (!cs->origin.scheme || url_parse(url, &u) < 0)
                        return give_up(cs, "refusing a credential request for \"%s\"", url);
                bool same = same_origin(&u, &cs->origin);
                bool plain = STREQ(u.scheme, "http") && !is_loopback(u.host);
                _cleanup_free_ char *host =
                    u.port ? xasprintf("%s:%s", u.host, u.port) : xstrdup(u.host);
                _cleanup_free_ char *path = xstrdup(u.path[0] == '/' ? u.path + 1 : u.path);
                _cleanup_free_ char *scheme = xstrdup(u.scheme);
                url_clear(&u);
                /* A redirect must not carry the credential to another host. */
                if (!same)
                        return give_up(cs,
                                       "refusing to send a credential to %s://%s, which is "
                                       "not where the repository is",
                                       scheme, host);
                if (plain)
                        return give_up(cs,
                                       "refusing to send a credential over unencrypted "
                                       "http to %s",
                                       host);
                const char *user = creds && creds->username ? creds->username : cs->url_user;

                if (creds && creds->token) {
                        if (cs->token_tries++)
                                return give_up(cs, "%s refused the token (GIT_TOKEN)", host);
                        return git_credential_userpass_plaintext_new(
                            out, user ? user : GITOPS_TOKEN_USER, creds->token);
                }
                if (creds && creds->helper) {
                        if (cs->helper_tries++) {
                                cs->helper_refused = true;
                                return give_up(cs,
                                               "%s refused the credential from the git "
                                               "credential helper",
                                               host);
                        }
                        helper_cred_clear(&cs->helper);
                        cs->helper.protocol = xstrdup(scheme);
                        cs->helper.host = xstrdup(host);
                        cs->helper.path = *path ? xstrdup(path) : NULL;
                        cs->helper.username = user ? xstrdup(user) : NULL;
                        int r = helper_fill(&cs->helper, creds->interactive);
                        if (r < 0)
                                return give_up(cs,
                                               "%s asks for a credential and the git credential "
                                               "helper has none; give GIT_TOKEN in a secrets "
                                               "file (--secrets)",
                                               host);
                        cs->helper_gave = true;
                        return git_credential_userpass_plaintext_new(out, cs->helper.username,
                                                                     cs->helper.password);
                }
                return give_up(cs,
                               "%s asks for a credential; give GIT_TOKEN in a secrets file "
                               "(--secrets)",
                               host);
        }
        if (allowed & GIT_CREDENTIAL_SSH_KEY) {
                if (cs->ssh_tries++)
                        return give_up(cs, "the ssh agent's keys were refused for \"%s\"", url);
                return git_credential_ssh_key_from_agent(out, username_from_url ? username_from_url
                                                                                : "git");
        }
        if (allowed & GIT_CREDENTIAL_USERNAME) {
                if (cs->user_tries++)
                        return give_up(cs, "no user name for \"%s\"", url);
                return git_credential_username_new(out,
                                                   username_from_url ? username_from_url : "git");
        }
        return give_up(cs, "\"%s\" asks for a kind of credential Airlock does not give", url);
}

/* Map a failed network operation to -errno and a message. */
static int fail_net(struct al_error *err, int gr, const struct cred_state *cs, const char *what)
{
        if (cs->gave_up)
                return al_error_set_message(err, EACCES, "%s: %s", what, cs->msg);
        if (gr == GIT_EAUTH)
                return fail_git(err, EACCES, what);
        return fail_git(err, EIO, what);
}

/* ---- clone ---- */

static void rm_rf(const char *path)
{
        (void)fs_remove_tree(AT_FDCWD, path, FS_REMOVE_DEPTH_MAX);
}

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
                        return fail_git(err, ENOENT, "the remote's default branch");
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
                        return fail_git(err, EINVAL, rev);
                local = xasprintf("refs/heads/%s", rev);
        } else if (git_reference_name_is_valid(&valid, tag_ref) == 0 && valid &&
                   git_reference_lookup(&ref, repo, tag_ref) == 0) {
                if (lookup_commit(repo, tag_ref, &commit) < 0)
                        return fail_git(err, EINVAL, rev);
        } else if (lookup_commit(repo, rev, &commit) < 0)
                return al_error_set_message(err, ENOENT, "revision \"%s\" is not in the repository",
                                            rev);

        git_checkout_options co = GIT_CHECKOUT_OPTIONS_INIT;
        co.checkout_strategy = GIT_CHECKOUT_FORCE;
        if (git_checkout_tree(repo, (git_object *)commit, &co) < 0)
                return fail_git(err, EIO, "checking out");

        if (local) {
                _cleanup_(ref_freep) git_reference *branch = NULL;
                if (git_reference_lookup(&branch, repo, local) == 0) {
                        if (!git_oid_equal(git_reference_target(branch), git_commit_id(commit)))
                                return al_error_set_message(
                                    err, EEXIST, "a local branch \"%s\" already exists", rev);
                } else {
                        if (git_branch_create(&branch, repo, rev, commit, 0) < 0)
                                return fail_git(err, EIO, "creating the branch");
                        /* As git_branch_set_upstream() would, without its remote
                         * lookup (which leaks in libgit2 1.5). */
                        _cleanup_(config_freep) git_config *cfg = NULL;
                        _cleanup_free_ char *k_remote = xasprintf("branch.%s.remote", rev);
                        _cleanup_free_ char *k_merge = xasprintf("branch.%s.merge", rev);
                        if (git_repository_config(&cfg, repo) < 0 ||
                            git_config_set_string(cfg, k_remote, "origin") < 0 ||
                            git_config_set_string(cfg, k_merge, local) < 0)
                                return fail_git(err, EIO, "setting the branch's upstream");
                }
                if (git_repository_set_head(repo, local) < 0)
                        return fail_git(err, EIO, "setting HEAD");
        } else if (git_repository_set_head_detached(repo, git_commit_id(commit)) < 0)
                return fail_git(err, EIO, "setting HEAD");
        git_oid_cpy(ret, git_commit_id(commit));
        return 0;
}

static int clone_progress(const git_indexer_progress *stats, void *payload)
{
        if (past_deadline()) {
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
                r = fail_net(err, gr, &cs, what);
                cred_state_clear(&cs);
                rm_rf(dest);
                return r;
        }
        cred_state_clear(&cs);

        git_oid base;
        r = checkout_rev(repo, rev, &base, err);
        if (r < 0) {
                al_error_wrap(err, "cloning %s", clean);
                git_repository_free(TAKE_PTR(repo));
                rm_rf(dest);
                return r;
        }
        git_oid_tostr(ret_base, GITOPS_OID_HEX + 1, &base);
        return 0;
}

/* ---- the agent's repository ---- */

/* What the agent wrote is read once, into a private copy the host owns,
 * before libgit2 touches any of it: every file through openat() with
 * O_NOFOLLOW|O_NONBLOCK from directory fds opened the same way, regular
 * files only. A symbolic link, FIFO, socket or device anywhere in what is
 * read is refused, so neither a link into a host repository the sandbox
 * never saw nor a FIFO that would block forever gets past this point, and a
 * still-running sandbox that swaps a component cannot redirect a read: each
 * open is relative to a directory already verified. */

#define COPY_FILES_MAX (256 * 1024)
#define COPY_DEPTH_MAX 32

struct copy_ctx {
        const char *ws;
        size_t files;
        uint64_t bytes;
        struct al_error *err;
};

static int refuse_type(struct copy_ctx *c, const char *rel, mode_t mode)
{
        const char *what = S_ISLNK(mode)                    ? "a symbolic link"
                           : S_ISFIFO(mode)                 ? "a FIFO"
                           : S_ISSOCK(mode)                 ? "a socket"
                           : S_ISCHR(mode) || S_ISBLK(mode) ? "a device"
                           : S_ISDIR(mode)                  ? "a directory"
                                                            : "not a plain file";
        return al_error_set_message(
            c->err, EPERM, "%s/.git/%s is %s; refusing to read the repository", c->ws, rel, what);
}

static int copy_file(struct copy_ctx *c, int sdir, int ddir, const char *name, const char *rel)
{
        if (past_deadline())
                return fail_deadline(c->err);
        if (++c->files > COPY_FILES_MAX)
                return al_error_set_message(c->err, E2BIG,
                                            "%s/.git holds more than %d files; refusing to read it",
                                            c->ws, COPY_FILES_MAX);
        struct stat st;
        if (fstatat(sdir, name, &st, AT_SYMLINK_NOFOLLOW) < 0)
                return al_error_set(c->err, errno, "%s/.git/%s", c->ws, rel);
        /* Checked before the open so that no device is ever opened. */
        if (!S_ISREG(st.st_mode))
                return refuse_type(c, rel, st.st_mode);
        _cleanup_close_ int fd =
            openat(sdir, name, O_RDONLY | O_NOFOLLOW | O_NONBLOCK | O_NOCTTY | O_CLOEXEC);
        if (fd < 0)
                return errno == ELOOP ? refuse_type(c, rel, S_IFLNK)
                                      : al_error_set(c->err, errno, "%s/.git/%s", c->ws, rel);
        if (fstat(fd, &st) < 0)
                return al_error_set(c->err, errno, "%s/.git/%s", c->ws, rel);
        if (!S_ISREG(st.st_mode))
                return refuse_type(c, rel, st.st_mode);
        _cleanup_close_ int out =
            openat(ddir, name, O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0600);
        if (out < 0)
                return al_error_set(c->err, errno, "copying %s/.git/%s", c->ws, rel);
        char buf[64 * 1024];
        for (;;) {
                ssize_t n = read(fd, buf, sizeof(buf));
                if (n < 0 && errno == EINTR)
                        continue;
                if (n < 0)
                        return al_error_set(c->err, errno, "reading %s/.git/%s", c->ws, rel);
                if (n == 0)
                        break;
                c->bytes += (uint64_t)n;
                if (c->bytes > GITOPS_COPY_MAX)
                        return al_error_set_message(
                            c->err, EFBIG,
                            "%s/.git holds more than %llu MiB of objects and refs; refusing to "
                            "read it",
                            c->ws, (unsigned long long)(GITOPS_COPY_MAX >> 20));
                int r = write_full(out, buf, (size_t)n);
                if (r < 0)
                        return al_error_set(c->err, r, "copying %s/.git/%s", c->ws, rel);
        }
        return 0;
}

/* Which entries of a directory are read. */
enum copy_kind {
        COPY_REFS,    /* everything, recursively */
        COPY_OBJECTS, /* XX/ loose object directories and pack/ */
        COPY_LOOSE,   /* 38 hex digits */
        COPY_PACK,    /* pack-*.pack and pack-*.idx */
};

static bool all_hex(const char *s, size_t n)
{
        return strlen(s) == n && strspn(s, "0123456789abcdef") == n;
}

static bool ends_with(const char *s, const char *suffix)
{
        size_t n = strlen(s), m = strlen(suffix);
        return n >= m && STREQ(s + n - m, suffix);
}

static int copy_dir(struct copy_ctx *c, int sparent, int dparent, const char *name, const char *rel,
                    enum copy_kind kind, int depth);

static int copy_entries(struct copy_ctx *c, int sdir, int ddir, const char *rel,
                        enum copy_kind kind, int depth)
{
        int dup = fcntl(sdir, F_DUPFD_CLOEXEC, 3);
        if (dup < 0)
                return al_error_set(c->err, errno, "%s/.git/%s", c->ws, rel);
        DIR *d = fdopendir(dup);
        if (!d) {
                int e = errno;
                close(dup);
                return al_error_set(c->err, e, "%s/.git/%s", c->ws, rel);
        }
        int r = 0;
        struct dirent *de;
        while (r >= 0 && (errno = 0, de = readdir(d))) {
                const char *n = de->d_name;
                if (STREQ(n, ".") || STREQ(n, ".."))
                        continue;
                _cleanup_free_ char *sub = xasprintf("%s/%s", rel, n);
                switch (kind) {
                case COPY_REFS: {
                        struct stat st;
                        if (fstatat(sdir, n, &st, AT_SYMLINK_NOFOLLOW) < 0)
                                r = al_error_set(c->err, errno, "%s/.git/%s", c->ws, sub);
                        else if (S_ISDIR(st.st_mode))
                                r = copy_dir(c, sdir, ddir, n, sub, COPY_REFS, depth + 1);
                        else
                                r = copy_file(c, sdir, ddir, n, sub);
                        break;
                }
                case COPY_OBJECTS:
                        if (all_hex(n, 2))
                                r = copy_dir(c, sdir, ddir, n, sub, COPY_LOOSE, depth + 1);
                        else if (STREQ(n, "pack"))
                                r = copy_dir(c, sdir, ddir, n, sub, COPY_PACK, depth + 1);
                        break;
                case COPY_LOOSE:
                        if (all_hex(n, GITOPS_OID_HEX - 2))
                                r = copy_file(c, sdir, ddir, n, sub);
                        break;
                case COPY_PACK:
                        if (strncmp(n, "pack-", 5) == 0 &&
                            (ends_with(n, ".pack") || ends_with(n, ".idx")))
                                r = copy_file(c, sdir, ddir, n, sub);
                        break;
                }
        }
        if (r >= 0 && errno)
                r = al_error_set(c->err, errno, "reading %s/.git/%s", c->ws, rel);
        closedir(d);
        return r;
}

static int copy_dir(struct copy_ctx *c, int sparent, int dparent, const char *name, const char *rel,
                    enum copy_kind kind, int depth)
{
        if (depth > COPY_DEPTH_MAX)
                return al_error_set_message(c->err, E2BIG,
                                            "%s/.git/%s is nested too deep; refusing to read it",
                                            c->ws, rel);
        struct stat st;
        if (fstatat(sparent, name, &st, AT_SYMLINK_NOFOLLOW) < 0)
                return al_error_set(c->err, errno, "%s/.git/%s", c->ws, rel);
        if (!S_ISDIR(st.st_mode))
                return refuse_type(c, rel, st.st_mode);
        _cleanup_close_ int sdir =
            openat(sparent, name, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
        if (sdir < 0)
                return errno == ELOOP || errno == ENOTDIR
                           ? refuse_type(c, rel, S_IFLNK)
                           : al_error_set(c->err, errno, "%s/.git/%s", c->ws, rel);
        if (mkdirat(dparent, name, 0700) < 0)
                return al_error_set(c->err, errno, "copying %s/.git/%s", c->ws, rel);
        _cleanup_close_ int ddir =
            openat(dparent, name, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
        if (ddir < 0)
                return al_error_set(c->err, errno, "copying %s/.git/%s", c->ws, rel);
        return copy_entries(c, sdir, ddir, rel, kind, depth);
}

static int expect_absent(int dfd, const char *name, const char *ws, struct al_error *err)
{
        struct stat st;
        if (fstatat(dfd, name, &st, AT_SYMLINK_NOFOLLOW) == 0)
                return al_error_set_message(
                    err, EPERM,
                    "%s/.git/%s exists: the repository reads objects or refs from "
                    "elsewhere; refusing to use it",
                    ws, name);
        if (errno != ENOENT && errno != ENOTDIR)
                return al_error_set(err, errno, "%s/.git/%s", ws, name);
        return 0;
}

static void rm_rf(const char *path);

/* Copy HEAD, packed-refs, refs/ and the objects of <workspace>/.git into a
 * fresh private directory; *ret_dir gets its path (the caller removes it). */
static int copy_gitdir(const char *workspace, char **ret_dir, struct al_error *err)
{
        _cleanup_close_ int wfd = open(workspace, O_PATH | O_DIRECTORY | O_CLOEXEC);
        if (wfd < 0)
                return al_error_set(err, errno, "workspace \"%s\"", workspace);
        struct stat st;
        if (fstatat(wfd, ".git", &st, AT_SYMLINK_NOFOLLOW) < 0)
                return al_error_set(err, errno, "%s/.git", workspace);
        if (!S_ISDIR(st.st_mode))
                return al_error_set_message(
                    err, EPERM, "%s/.git is not a directory; refusing to use it", workspace);
        _cleanup_close_ int gfd =
            openat(wfd, ".git", O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
        if (gfd < 0)
                return al_error_set(err, errno, "%s/.git", workspace);
        int r;
        if ((r = expect_absent(gfd, "commondir", workspace, err)) < 0 ||
            (r = expect_absent(gfd, "objects/info/alternates", workspace, err)) < 0 ||
            (r = expect_absent(gfd, "objects/info/http-alternates", workspace, err)) < 0)
                return r;

        const char *tmp = secure_getenv("TMPDIR");
        _cleanup_free_ char *dir = xasprintf("%s/airlock-git-XXXXXX", tmp && *tmp ? tmp : "/tmp");
        if (!mkdtemp(dir))
                return al_error_set(err, errno, "creating a directory in %s",
                                    tmp && *tmp ? tmp : "/tmp");
        _cleanup_close_ int dfd = open(dir, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
        struct copy_ctx c = {.ws = workspace, .err = err};
        if (dfd < 0)
                r = al_error_set(err, errno, "%s", dir);
        else if ((r = copy_file(&c, gfd, dfd, "HEAD", "HEAD")) >= 0 &&
                 (r = copy_dir(&c, gfd, dfd, "refs", "refs", COPY_REFS, 1)) >= 0 &&
                 (r = copy_dir(&c, gfd, dfd, "objects", "objects", COPY_OBJECTS, 1)) >= 0) {
                if (fstatat(gfd, "packed-refs", &st, AT_SYMLINK_NOFOLLOW) == 0)
                        r = copy_file(&c, gfd, dfd, "packed-refs", "packed-refs");
                else if (errno != ENOENT)
                        r = al_error_set(err, errno, "%s/.git/packed-refs", workspace);
        }
        if (r < 0) {
                rm_rf(dir);
                return r;
        }
        *ret_dir = TAKE_PTR(dir);
        return 0;
}

/* Every object read from the agent's repository passes here: its size is
 * read from its header first (a few bytes inflated), and an object larger
 * than GITOPS_OBJECT_MAX, or one that would take the operation past
 * GITOPS_INFLATE_MAX in all, is refused before it is inflated. A 1.5 MB
 * loose object of zeros inflates to 1.5 GiB. */
struct inflate_budget {
        uint64_t used;
};

struct capped_backend {
        git_odb_backend parent;
        git_odb_backend *inner;
        struct inflate_budget *budget;
};

static int size_refused(const git_oid *id, size_t len, bool total)
{
        char hex[GITOPS_OID_HEX + 1];
        git_oid_tostr(hex, sizeof(hex), id);
        if (total)
                git_error_set(GIT_ERROR_ODB,
                              "reading object %.12s would inflate more than %llu MiB of the "
                              "agent's objects in all; refusing",
                              hex, (unsigned long long)(GITOPS_INFLATE_MAX >> 20));
        else
                git_error_set(GIT_ERROR_ODB,
                              "object %.12s inflates to %zu bytes, more than the %llu MiB "
                              "Airlock reads from an agent's repository; refusing",
                              hex, len, (unsigned long long)(GITOPS_OBJECT_MAX >> 20));
        return -1;
}

static int capped_read(void **buf, size_t *len, git_object_t *type, git_odb_backend *b,
                       const git_oid *id)
{
        struct capped_backend *cb = (struct capped_backend *)b;
        if (past_deadline()) {
                git_error_set_str(GIT_ERROR_ODB, "the operation took too long");
                return -1;
        }
        size_t size;
        git_object_t t;
        int r = cb->inner->read_header(&size, &t, cb->inner, id);
        if (r < 0)
                return r;
        if (size > GITOPS_OBJECT_MAX)
                return size_refused(id, size, false);
        if (cb->budget->used + size > GITOPS_INFLATE_MAX)
                return size_refused(id, size, true);
        cb->budget->used += size;
        return cb->inner->read(buf, len, type, cb->inner, id);
}

static int capped_read_header(size_t *len, git_object_t *type, git_odb_backend *b,
                              const git_oid *id)
{
        struct capped_backend *cb = (struct capped_backend *)b;
        return cb->inner->read_header(len, type, cb->inner, id);
}

static int capped_exists(git_odb_backend *b, const git_oid *id)
{
        struct capped_backend *cb = (struct capped_backend *)b;
        return cb->inner->exists(cb->inner, id);
}

static int capped_exists_prefix(git_oid *out, git_odb_backend *b, const git_oid *id, size_t n)
{
        struct capped_backend *cb = (struct capped_backend *)b;
        return cb->inner->exists_prefix(out, cb->inner, id, n);
}

static int capped_refresh(git_odb_backend *b)
{
        struct capped_backend *cb = (struct capped_backend *)b;
        return cb->inner->refresh ? cb->inner->refresh(cb->inner) : 0;
}

static int capped_foreach(git_odb_backend *b, git_odb_foreach_cb fn, void *payload)
{
        struct capped_backend *cb = (struct capped_backend *)b;
        return cb->inner->foreach (cb->inner, fn, payload);
}

static void capped_free(git_odb_backend *b)
{
        struct capped_backend *cb = (struct capped_backend *)b;
        cb->inner->free(cb->inner);
        free(cb);
}

static git_odb_backend *capped_new(git_odb_backend *inner, struct inflate_budget *budget)
{
        struct capped_backend *cb = xcalloc(1, sizeof(*cb));
        git_odb_init_backend(&cb->parent, GIT_ODB_BACKEND_VERSION);
        cb->parent.read = capped_read;
        cb->parent.read_header = capped_read_header;
        cb->parent.exists = capped_exists;
        cb->parent.exists_prefix = capped_exists_prefix;
        cb->parent.refresh = capped_refresh;
        cb->parent.foreach = capped_foreach;
        cb->parent.free = capped_free;
        cb->inner = inner;
        cb->budget = budget;
        return &cb->parent;
}

/* A packed object is inflated inside the pack reader, also as the base of
 * a delta, without passing capped_read: every object in the packs is
 * checked against the cap from its header before anything is read. */
struct pack_check {
        git_odb_backend *pack;
        int error;
};

static int pack_check_one(const git_oid *id, void *payload)
{
        struct pack_check *pc = payload;
        size_t size;
        git_object_t t;
        if (past_deadline()) {
                git_error_set_str(GIT_ERROR_ODB, "the operation took too long");
                return -1;
        }
        int r = pc->pack->read_header(&size, &t, pc->pack, id);
        if (r < 0)
                return r;
        if (size > GITOPS_OBJECT_MAX)
                return size_refused(id, size, false);
        return 0;
}

/* An object database over exactly <copy>/objects, each read capped. The
 * budget lives as long as the odb (it is freed with the last backend). */
static int capped_backends(const char *objects, struct inflate_budget *budget,
                           git_odb_backend **ret_pack, git_odb_backend **ret_loose,
                           struct al_error *err)
{
        git_odb_backend *pack = NULL, *loose = NULL;
        if (git_odb_backend_pack(&pack, objects) < 0)
                return fail_git(err, EIO, "reading the agent's packs");
        struct pack_check pc = {.pack = pack};
        if (pack->foreach (pack, pack_check_one, &pc) < 0) {
                pack->free(pack);
                return past_deadline() ? fail_deadline(err)
                                       : fail_git(err, EFBIG, "the agent's repository");
        }
        if (git_odb_backend_loose(&loose, objects, -1, 0, 0, 0) < 0) {
                pack->free(pack);
                return fail_git(err, EIO, "reading the agent's objects");
        }
        *ret_pack = capped_new(pack, budget);
        *ret_loose = capped_new(loose, budget);
        return 0;
}

/* The agent's repository, opened from the private copy: objects from its
 * objects/ alone, each read capped, and the host user's config instead of
 * the repository's. */
struct agent_repo {
        git_repository *repo;
        char *copy;
        struct inflate_budget budget;
};

static void agent_repo_close(struct agent_repo *a)
{
        if (a->repo)
                git_repository_free(a->repo);
        if (a->copy) {
                rm_rf(a->copy);
                free(a->copy);
        }
        memset(a, 0, sizeof(*a));
}

static int open_workspace(const char *workspace, struct agent_repo *a, struct al_error *err)
{
        int r = copy_gitdir(workspace, &a->copy, err);
        if (r < 0)
                return r;
        _cleanup_free_ char *objects = xasprintf("%s/objects", a->copy);
        if (git_repository_open_ext(&a->repo, a->copy,
                                    GIT_REPOSITORY_OPEN_NO_SEARCH | GIT_REPOSITORY_OPEN_BARE,
                                    NULL) < 0)
                return fail_git(err, EIO, workspace);
        _cleanup_(config_freep) git_config *cfg = NULL;
        if (git_config_open_default(&cfg) < 0 || git_repository_set_config(a->repo, cfg) < 0)
                return fail_git(err, EIO, "the host's git config");
        _cleanup_(odb_freep) git_odb *odb = NULL;
        git_odb_backend *pack = NULL, *loose = NULL;
        if (git_odb_new(&odb) < 0)
                return fail_git(err, EIO, workspace);
        r = capped_backends(objects, &a->budget, &pack, &loose, err);
        if (r < 0)
                return r;
        if (git_odb_add_backend(odb, pack, 2) < 0) {
                pack->free(pack);
                loose->free(loose);
                return fail_git(err, EIO, workspace);
        }
        if (git_odb_add_backend(odb, loose, 1) < 0) {
                loose->free(loose);
                return fail_git(err, EIO, workspace);
        }
        if (git_repository_set_odb(a->repo, odb) < 0)
                return fail_git(err, EIO, workspace);
        return 0;
}

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
static int new_commits(git_repository *repo, const char *base_hex, git_oid *ret_head,
                       git_oid **ret_v, size_t *ret_n, struct al_error *err)
{
        git_oid base, head;
        int r = parse_oid(base_hex, &base, err);
        if (r < 0)
                return r;
        if (git_reference_name_to_id(&head, repo, "HEAD") < 0)
                return fail_git(err, ENOENT, "the workspace's HEAD");
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
                return fail_git(err, EIO, "walking the workspace's history");
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
                return fail_git(err, EIO, "walking the workspace's history");
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
                return fail_git(err, EIO, "walking the workspace's history");
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
        r = open_workspace(workspace, a, err);
        if (r < 0)
                return r;
        return new_commits(a->repo, base, ret_head, ret_v, ret_n, err);
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
                        return fail_git(err, EIO, "reading a commit");
                if (git_commit_parentcount(c) <= 1)
                        v[m++] = v[i];
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
                _cleanup_(buf_disposep) git_buf buf = GIT_BUF_INIT;
                if (git_commit_lookup(&c, repo, &v[i]) < 0 || git_commit_tree(&tree, c) < 0 ||
                    (git_commit_parentcount(c) == 1 &&
                     (git_commit_parent(&parent, c, 0) < 0 || git_commit_tree(&ptree, parent) < 0)))
                        return fail_git(err, EIO, id);
                if (git_diff_tree_to_tree(&diff, repo, ptree, tree, &eo.diff_opts) < 0)
                        return fail_git(err, EIO, id);
                const char *summary = git_commit_summary(c);
                if (git_email_create_from_diff(&buf, diff, i + 1, m, &v[i], summary ? summary : "",
                                               git_commit_body(c), git_commit_author(c), &eo) < 0)
                        return fail_git(err, EIO, id);
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

/* ---- push ---- */

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
        if (past_deadline()) {
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
                return fail_git(err, EINVAL, url);

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
                return fail_net(err, gr, &ps->cs, what);

        const git_remote_head **heads;
        size_t n;
        if (git_remote_ls(&heads, &n, remote) < 0)
                return fail_git(err, EIO, what);
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
                return fail_net(err, gr, &ps->cs, what);
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
        r = open_workspace(workspace, &a, err);
        if (r < 0)
                return r;
        git_oid head;
        _cleanup_free_ git_oid *v = NULL;
        size_t n;
        r = new_commits(a.repo, base, &head, &v, &n, err);
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
        rm_rf(refs);
        if ((mkdir(refs, 0700) < 0 && errno != EEXIST) || (unlink(packed) < 0 && errno != ENOENT))
                return al_error_set(err, errno, "preparing the push in %s", a.copy);
        _cleanup_(ref_freep) git_reference *ref = NULL;
        if (git_reference_create(&ref, a.repo, PUSH_REF, &head, 1, NULL) < 0)
                return fail_git(err, EIO, "preparing the push");
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

/* ---- state ---- */

static json_t *jstr_or_null(const char *s)
{
        return s ? json_string(s) : json_null();
}

int gitops_state_write(const char *state_dir, const struct gitops_state *st, struct al_error *err)
{
        json_t *j = json_pack("{s:o, s:o, s:o, s:o, s:o, s:o}", "url", jstr_or_null(st->url),
                              "user", jstr_or_null(st->user), "rev", jstr_or_null(st->rev), "base",
                              jstr_or_null(st->base), "workspace", jstr_or_null(st->workspace),
                              "audit", jstr_or_null(st->audit));
        if (!j)
                return al_error_set_message(err, EINVAL, "%s/%s: a value is not valid UTF-8",
                                            state_dir, GITOPS_STATE);
        _cleanup_free_ char *s = json_dumps(j, JSON_INDENT(1) | JSON_SORT_KEYS);
        json_decref(j);
        if (!s)
                return al_error_set_message(err, ENOMEM, "%s/%s", state_dir, GITOPS_STATE);

        _cleanup_close_ int dfd = open(state_dir, O_PATH | O_DIRECTORY | O_CLOEXEC);
        if (dfd < 0)
                return al_error_set(err, errno, "%s", state_dir);
        char tmp[64];
        snprintf(tmp, sizeof(tmp), ".%s.%d", GITOPS_STATE, (int)getpid());
        _cleanup_close_ int fd =
            openat(dfd, tmp, O_WRONLY | O_CREAT | O_TRUNC | O_NOFOLLOW | O_CLOEXEC, 0600);
        if (fd < 0)
                return al_error_set(err, errno, "%s/%s", state_dir, tmp);
        int r = write_full(fd, s, strlen(s));
        if (r >= 0)
                r = write_full(fd, "\n", 1);
        if (r >= 0 && fsync(fd) < 0)
                r = -errno;
        if (r >= 0 && renameat(dfd, tmp, dfd, GITOPS_STATE) < 0)
                r = -errno;
        if (r < 0) {
                unlinkat(dfd, tmp, 0);
                return al_error_set(err, r, "writing %s/%s", state_dir, GITOPS_STATE);
        }
        return 0;
}

static char *jdup(json_t *j, const char *key, bool *ok)
{
        json_t *v = json_object_get(j, key);
        if (!v || json_is_null(v))
                return NULL;
        if (!json_is_string(v)) {
                *ok = false;
                return NULL;
        }
        return xstrdup(json_string_value(v));
}

int gitops_state_read(const char *state_dir, struct gitops_state *ret, struct al_error *err)
{
        _cleanup_close_ int dfd = open(state_dir, O_PATH | O_DIRECTORY | O_CLOEXEC);
        if (dfd < 0)
                return al_error_set(err, errno, "%s", state_dir);
        _cleanup_free_ char *buf = NULL;
        size_t len;
        int r = read_file_at(dfd, GITOPS_STATE, STATE_MAX, &buf, &len);
        if (r == -ENOENT)
                return al_error_set_message(err, ENOENT, "%s/%s: no such file", state_dir,
                                            GITOPS_STATE);
        if (r < 0)
                return al_error_set(err, r, "reading %s/%s", state_dir, GITOPS_STATE);
        json_t *j = json_loadb(buf, len, JSON_REJECT_DUPLICATES, NULL);
        if (!json_is_object(j)) {
                json_decref(j);
                return al_error_set_message(err, EINVAL, "%s/%s is not a JSON object", state_dir,
                                            GITOPS_STATE);
        }
        bool ok = true;
        struct gitops_state st = {
            .url = jdup(j, "url", &ok),
            .user = jdup(j, "user", &ok),
            .rev = jdup(j, "rev", &ok),
            .base = jdup(j, "base", &ok),
            .workspace = jdup(j, "workspace", &ok),
            .audit = jdup(j, "audit", &ok),
        };
        json_decref(j);
        if (!ok || !st.url || !st.base || !st.workspace || st.workspace[0] != '/') {
                gitops_state_clear(&st);
                return al_error_set_message(err, EINVAL, "%s/%s: missing or malformed fields",
                                            state_dir, GITOPS_STATE);
        }
        *ret = st;
        return 0;
}

void gitops_state_clear(struct gitops_state *st)
{
        free(st->url);
        free(st->user);
        free(st->rev);
        free(st->base);
        free(st->workspace);
        free(st->audit);
        memset(st, 0, sizeof(*st));
}

/* ---- terminal output ---- */

/* The code point at s (n bytes left) and its length, or -1 when s does not
 * start a well-formed UTF-8 sequence (overlong forms and surrogates are
 * not well-formed). */
static int utf8_decode(const unsigned char *s, size_t n, uint32_t *ret_cp)
{
        return utf8_decode_char(s, n, ret_cp);
}

/* Code points that show nothing or reorder what follows: a name or a
 * subject holding them does not read as what it is. */
static bool invisible(uint32_t cp)
{
        return cp == 0xad || cp == 0x61c || cp == 0x180e || (cp >= 0x200b && cp <= 0x200f) ||
               (cp >= 0x202a && cp <= 0x202e) || (cp >= 0x2060 && cp <= 0x2069) || cp == 0xfeff ||
               (cp >= 0xfff9 && cp <= 0xfffb);
}

char *gitops_escape(const char *s, size_t len, bool keep_newlines)
{
        /* At most 10 bytes out ("\u{10FFFF}") per byte in. */
        if (len > (SIZE_MAX - 1) / 10)
                return NULL;
        char *out = xcalloc(len * 10 + 1, 1);
        size_t j = 0;
        const unsigned char *u = (const unsigned char *)s;
        for (size_t i = 0; i < len;) {
                uint32_t cp;
                int k = utf8_decode(u + i, len - i, &cp);
                if (k < 0) {
                        j += (size_t)snprintf(out + j, 5, "\\x%02x", u[i]);
                        i++;
                        continue;
                }
                if (k == 1 && (cp == '\n' || cp == '\t') && keep_newlines)
                        out[j++] = (char)cp;
                else if (k == 1 && (cp < 0x20 || cp == 0x7f))
                        j += (size_t)snprintf(out + j, 5, "\\x%02x", cp);
                else if ((cp >= 0x80 && cp <= 0x9f) || invisible(cp))
                        j += (size_t)snprintf(out + j, 11, "\\u{%04x}", cp);
                else {
                        memcpy(out + j, u + i, (size_t)k);
                        j += (size_t)k;
                }
                i += (size_t)k;
        }
        out[j] = '\0';
        return out;
}
