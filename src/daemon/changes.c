/* SPDX-License-Identifier: Apache-2.0 */
/* The repositories a create may ask for: which ones a grant may have the
 * daemon clone, and the clone itself, done by airlock-git as a child
 * process (jobs.h). The API's review and git endpoints are http/changes.c. */
#include <ctype.h>
#include <errno.h>
#include <stdio.h>
#include <string.h>
#include <strings.h>

#include "sandbox.h"
#include "changes.h"
#include "jobs.h"
#include "util.h"

#define RESULT_OUT_MAX (1u << 20) /* a JSON result line */

/* The CLI's one-line message without its "airlock: CMD: " prefix. */
const char *changes_cli_message(const char *err, char *buf, size_t len)
{
        const char *m = err && *err ? err : "the command failed without a message";
        if (strncmp(m, "airlock: ", 9) == 0) {
                m += 9;
                const char *colon = strstr(m, ": ");
                if (colon && colon - m < 16)
                        m = colon + 2;
        }
        snprintf(buf, len, "%s", m);
        buf[strcspn(buf, "\n")] = '\0';
        return buf;
}

/* Create with {"repo", "rev"}: which repositories the daemon clones. */

static bool host_listed(struct daemon *d, const char *host, size_t n)
{
        for (char **h = d->git_hosts; h && *h; h++)
                if (strlen(*h) == n && strncasecmp(*h, host, n) == 0)
                        return true;
        return false;
}

int changes_check_repo(struct daemon *d, const struct grant *g, const char *url,
                       struct changes_refusal *ret)
{
        memset(ret, 0, sizeof(*ret));
        size_t n = strlen(url);
        for (size_t i = 0; i < n; i++)
                if ((unsigned char)url[i] <= ' ' || url[i] == 0x7f) {
                        ret->status = 400;
                        snprintf(ret->message, sizeof(ret->message),
                                 "\"repo\" holds a space or a control character");
                        return -EINVAL;
                }
        const char *sep = strstr(url, "://");
        const char *colon = strchr(url, ':');
        const char *slash = strchr(url, '/');
        bool local = url[0] == '/' || (sep && strncmp(url, "file://", 7) == 0);
        if (!local && !sep && !(colon && (!slash || colon < slash))) {
                ret->status = 400;
                snprintf(ret->message, sizeof(ret->message),
                         "\"repo\" must be a URL (https://host/path, ssh://…, host:path) or an "
                         "absolute path");
                return -EINVAL;
        }
        if (local) {
                if (g->allow_host_workspace)
                        return 0;
                ret->status = 403;
                ret->limit = "allowHostWorkspace";
                snprintf(ret->message, sizeof(ret->message),
                         "a repository on the host's file system needs a grant with "
                         "allowHostWorkspace");
                return -EPERM;
        }
        /* The authority: past "scheme://", up to the path. */
        const char *a = sep ? sep + 3 : url;
        size_t alen = sep ? strcspn(a, "/?#") : (size_t)(colon - url);
        const char *at = memrchr(a, '@', alen);
        if (at && sep && memchr(a, ':', (size_t)(at - a))) {
                ret->status = 400;
                snprintf(ret->message, sizeof(ret->message),
                         "\"repo\" must not hold a password: the daemon's own credentials "
                         "(GIT_TOKEN in --secrets, or the git credential helper) are used");
                return -EINVAL;
        }
        const char *host = at ? at + 1 : a;
        size_t hlen = alen - (size_t)(host - a);
        if (hlen && host[0] == '[') {
                const char *close = memchr(host, ']', hlen);
                hlen = close ? (size_t)(close - host) + 1 : hlen;
        } else if (sep) {
                const char *port = memchr(host, ':', hlen);
                if (port)
                        hlen = (size_t)(port - host);
        }
        if (hlen && host_listed(d, host, hlen))
                return 0;
        ret->status = 403;
        ret->code = "repo_refused";
        snprintf(ret->message, sizeof(ret->message),
                 "host \"%.*s\" is not one airlockd clones from (airlockd --git-host): the "
                 "daemon's git credentials go to those hosts only",
                 (int)(hlen > 200 ? 200 : hlen), host);
        return -EPERM;
}

struct clone_ctx {
        changes_clone_fn done;
        void *userdata;
        char id[17];
};

static void on_clone_done(const struct job_result *res, void *userdata)
{
        struct clone_ctx *c = userdata;
        size_t len = evbuffer_get_length(res->out);
        json_error_t jerr;
        json_t *o = res->exit_code < 0
                        ? NULL
                        : json_loadb((const char *)evbuffer_pullup(res->out, -1), len, 0, &jerr);
        const char *ws = json_string_value(json_object_get(o, "workspace"));
        const char *base = json_string_value(json_object_get(o, "base"));
        const char *error = json_string_value(json_object_get(o, "error"));
        char msg[1024];
        if (res->exit_code == 0 && ws && base)
                c->done(c->id, ws, base, 0, NULL, c->userdata);
        else if (res->exit_code < 0)
                c->done(c->id, NULL, NULL, -ECANCELED, "the daemon is stopping", c->userdata);
        else
                c->done(c->id, NULL, NULL, res->exit_code == 2 ? -EINVAL : -EIO,
                        error ? error : changes_cli_message(res->err, msg, sizeof(msg)),
                        c->userdata);
        json_decref(o);
        free(c);
}

int changes_clone(struct daemon *d, const char *url, const char *rev, changes_clone_fn done,
                  void *userdata, struct al_error *err)
{
        struct clone_ctx *c = xcalloc(1, sizeof(*c));
        int r;
        do {
                r = random_hex(c->id, 16);
                if (r < 0) {
                        free(c);
                        return al_error_set(err, r, "picking an id");
                }
        } while (sandbox_find(d, c->id));
        char *argv[20] = {d->git_bin,     "git-clone", "--repo", (char *)url,
                          "--state-root", d->keep_dir, "--id",   c->id};
        size_t argc = 8;
        if (rev) {
                argv[argc++] = "--rev";
                argv[argc++] = (char *)rev;
        }
        if (d->secrets_path) {
                argv[argc++] = "--secrets";
                argv[argc++] = d->secrets_path;
        }
        if (d->audit_path) {
                argv[argc++] = "--audit";
                argv[argc++] = d->audit_path;
        }
        if (!d->git_helper)
                argv[argc++] = "--no-helper";
        c->done = done;
        c->userdata = userdata;
        r = job_start(d, argv, RESULT_OUT_MAX, on_clone_done, c, err);
        if (r < 0)
                free(c);
        return r;
}
