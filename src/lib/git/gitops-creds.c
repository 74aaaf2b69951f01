/* SPDX-License-Identifier: Apache-2.0 */
/* Repository URLs (cleaned of credentials, compared by origin) and the
 * credentials libgit2 asks for: the token, then `git credential fill`, each
 * tried a bounded number of times and only for the URL's own origin. */
#include <ctype.h>
#include <errno.h>
#include <fcntl.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include "child.h"
#include "gitops-internal.h"

static void url_clear(struct url *u)
{
        free(u->scheme);
        gitops_wipe_free(u->userinfo);
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

static void helper_cred_clear(struct helper_cred *c)
{
        free(c->protocol);
        free(c->host);
        free(c->path);
        free(c->username);
        gitops_wipe_free(c->password);
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
        gitops_wipe_free(input);
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
                        gitops_wipe_free(c->password);
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
        gitops_wipe_free(input);
}

void cred_state_init(struct cred_state *cs, const char *url, const char *url_user,
                     const struct gitops_creds *creds)
{
        memset(cs, 0, sizeof(*cs));
        cs->creds = creds;
        cs->url_user = url_user;
        if (url_parse(url, &cs->origin) < 0)
                memset(&cs->origin, 0, sizeof(cs->origin));
}

void cred_state_clear(struct cred_state *cs)
{
        url_clear(&cs->origin);
        helper_cred_clear(&cs->helper);
}

/* After the operation: tell the helper whether its credential worked, as git
 * itself does. */
void cred_state_finish(struct cred_state *cs, bool ok)
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
int cred_cb(git_credential **out, const char *url, const char *username_from_url,
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
int gitops_fail_net(struct al_error *err, int gr, const struct cred_state *cs, const char *what)
{
        if (cs->gave_up)
                return al_error_set_message(err, EACCES, "%s: %s", what, cs->msg);
        if (gr == GIT_EAUTH)
                return gitops_fail_git(err, EACCES, what);
        return gitops_fail_git(err, EIO, what);
}
