/* SPDX-License-Identifier: Apache-2.0 */
/* Repository config: the workspace's .airlock/isolation.json (repo.h).
 * Written by whoever wrote the repository: hostile input, read without
 * following links, bounded, validated like the policy. */
#include <errno.h>
#include <fcntl.h>
#include <jansson.h>
#include <linux/openat2.h>
#include <stdarg.h>
#include <stdio.h>
#include <sys/stat.h>
#include <string.h>
#include <unistd.h>

#include "fs.h"
#include "image.h"
#include "policy-internal.h"
#include "repo.h"

#define REPO_CONFIG_PATH ".airlock/isolation.json"
#define REPO_CONFIG_MAX  (64 * 1024)
#define REPO_LIST_MAX    64

static bool image_id_like(const char *s)
{
        size_t n = strlen(s);
        if (n != 64)
                return false;
        for (size_t i = 0; i < n; i++)
                if (!((s[i] >= '0' && s[i] <= '9') || (s[i] >= 'a' && s[i] <= 'f')))
                        return false;
        return true;
}

static int fail(struct al_error *err, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static int fail(struct al_error *err, const char *fmt, ...)
{
        char msg[AL_ERROR_MAX];
        va_list ap;
        va_start(ap, fmt);
        vsnprintf(msg, sizeof(msg), fmt, ap);
        va_end(ap);
        return al_error_set_message(err, EINVAL, "%s: %s", REPO_CONFIG_PATH, msg);
}

static int get_tier(json_t *v, const char *key, bool *has, enum policy_tier *t,
                    struct al_error *err)
{
        if (!v)
                return 0;
        if (!json_is_string(v) || policy_tier_parse(json_string_value(v), t) < 0)
                return fail(err, "\"%s\" must be one of " POLICY_TIER_NAMES, key);
        *has = true;
        return 0;
}

/* A path inside the workspace: relative, no "..", "." or empty component. */
static bool rel_path_ok(const char *s)
{
        if (!s[0] || s[0] == '/' || strlen(s) > 1024)
                return false;
        for (const char *c = s; *c;) {
                size_t n = strcspn(c, "/");
                if (n == 0 || (n == 1 && c[0] == '.') || (n == 2 && c[0] == '.' && c[1] == '.'))
                        return false;
                for (size_t i = 0; i < n; i++)
                        if ((unsigned char)c[i] < 0x20 || c[i] == 0x7f)
                                return false;
                c += n;
                if (*c == '/')
                        c++;
                if (!*c && c[-1] == '/')
                        return false;
        }
        return true;
}

struct repo_config *repo_config_free(struct repo_config *rc)
{
        if (!rc)
                return NULL;
        free(rc->image);
        strv_free_n(rc->domains, rc->n_domains);
        for (size_t i = 0; i < rc->n_mounts; i++) {
                free(rc->mounts[i].source);
                free(rc->mounts[i].target);
        }
        free(rc->mounts);
        policy_kv_free_n(rc->env, rc->n_env);
        json_decref(rc->limits);
        free(rc);
        return NULL;
}

static int parse(json_t *doc, struct repo_config *rc, struct al_error *err)
{
        static const char *const keys[] = {
            "minimumTier", "recommendedTier", "image", "allowedDomains", "limits", "mounts", "env"};
        const char *key;
        json_t *v;
        size_t i;

        if (!json_is_object(doc))
                return fail(err, "the document must be a JSON object");
        json_object_foreach(doc, key, v)
        {
                bool known = false;
                for (i = 0; i < ARRAY_SIZE(keys); i++)
                        known = known || STREQ(key, keys[i]);
                if (!known)
                        return fail(err,
                                    "unknown key \"%s\" (known: minimumTier, "
                                    "recommendedTier, image, allowedDomains, limits, "
                                    "mounts, env)",
                                    SHOWN(key));
        }
        int r = get_tier(json_object_get(doc, "minimumTier"), "minimumTier", &rc->has_minimum,
                         &rc->minimum, err);
        if (r >= 0)
                r = get_tier(json_object_get(doc, "recommendedTier"), "recommendedTier",
                             &rc->has_recommended, &rc->recommended, err);
        if (r < 0)
                return r;
        if ((v = json_object_get(doc, "image"))) {
                /* A name as `airlock image import --name` takes, or an id:
                 * nothing else of the repository reaches a message. */
                if (!json_is_string(v) || (image_name_check(json_string_value(v)) &&
                                           !image_id_like(json_string_value(v))))
                        return fail(err, "\"image\" must be an image name (letters, digits, "
                                         "'.', '_' and '-') or a 64-digit image id");
                rc->image = xstrdup(json_string_value(v));
        }
        if ((v = json_object_get(doc, "allowedDomains"))) {
                json_t *e;
                if (!json_is_array(v) || json_array_size(v) > REPO_LIST_MAX)
                        return fail(err,
                                    "\"allowedDomains\" must be an array of at most %d "
                                    "host names",
                                    REPO_LIST_MAX);
                json_array_foreach(v, i, e)
                {
                        if (!json_is_string(e))
                                return fail(err, "\"allowedDomains[%zu]\" must be a string", i);
                        rc->domains =
                            strv_append(rc->domains, &rc->n_domains, json_string_value(e));
                }
        }
        if ((v = json_object_get(doc, "mounts"))) {
                json_t *e;
                if (!json_is_array(v) || json_array_size(v) > REPO_LIST_MAX)
                        return fail(err, "\"mounts\" must be an array of at most %d objects",
                                    REPO_LIST_MAX);
                rc->mounts = xcalloc(json_array_size(v) + 1, sizeof(*rc->mounts));
                json_array_foreach(v, i, e)
                {
                        const char *src = json_string_value(json_object_get(e, "source"));
                        const char *dst = json_string_value(json_object_get(e, "target"));
                        json_t *ro = json_object_get(e, "readonly");
                        if (!json_is_object(e) || !src || !dst ||
                            json_object_size(e) != 2u + (ro ? 1u : 0u))
                                return fail(err,
                                            "\"mounts[%zu]\" must be {\"source\": PATH in the "
                                            "workspace, \"target\": PATH}",
                                            i);
                        if (ro && !json_is_true(ro))
                                return fail(err,
                                            "\"mounts[%zu].readonly\": a repository's "
                                            "mounts are read-only; remove the key or set "
                                            "it to true",
                                            i);
                        if (!rel_path_ok(src))
                                return fail(err,
                                            "\"mounts[%zu].source\" must be a relative path "
                                            "inside the workspace, without \"..\" (got \"%s\")",
                                            i, SHOWN(src));
                        rc->mounts[rc->n_mounts].source = xstrdup(src);
                        rc->mounts[rc->n_mounts].target = xstrdup(dst);
                        rc->mounts[rc->n_mounts].readonly = true;
                        rc->n_mounts++;
                }
        }
        if ((v = json_object_get(doc, "env"))) {
                json_t *e;
                if (!json_is_object(v) || json_object_size(v) > REPO_LIST_MAX)
                        return fail(err, "\"env\" must be an object of at most %d strings",
                                    REPO_LIST_MAX);
                rc->env = xcalloc(json_object_size(v) + 1, sizeof(*rc->env));
                json_object_foreach(v, key, e)
                {
                        if (!json_is_string(e))
                                return fail(err, "\"env.%s\" must be a string", SHOWN(key));
                        rc->env[rc->n_env].key = xstrdup(key);
                        rc->env[rc->n_env].value = xstrdup(json_string_value(e));
                        rc->n_env++;
                }
        }
        if ((v = json_object_get(doc, "limits"))) {
                if (!json_is_object(v))
                        return fail(err, "\"limits\" must be an object");
                rc->limits = json_incref(v);
        }
        return 0;
}

int repo_config_read(const char *workspace, char **ret_text, size_t *ret_len, struct al_error *err)
{
        *ret_text = NULL;
        *ret_len = 0;
        if (!workspace)
                return 0;
        _cleanup_close_ int ws = open(workspace, O_PATH | O_DIRECTORY | O_CLOEXEC);
        if (ws < 0)
                return 0; /* the spawn reports a missing workspace */
        _cleanup_close_ int fd =
            fs_openat2(ws, REPO_CONFIG_PATH, O_RDONLY | O_NOFOLLOW | O_NONBLOCK | O_CLOEXEC, 0,
                       RESOLVE_BENEATH | RESOLVE_NO_SYMLINKS | RESOLVE_NO_MAGICLINKS);
        if (fd == -ENOENT)
                return 0;
        if (fd < 0)
                return al_error_set(err, -fd,
                                    "%s: cannot be read (a symbolic link or a path leaving the "
                                    "workspace is refused)",
                                    REPO_CONFIG_PATH);
        struct stat st;
        if (fstat(fd, &st) < 0 || !S_ISREG(st.st_mode))
                return fail(err, "not a regular file");
        if (st.st_size > REPO_CONFIG_MAX)
                return fail(err, "larger than 64 KiB, refused");
        _cleanup_free_ char *text = xcalloc(1, REPO_CONFIG_MAX + 1);
        size_t len = 0;
        for (;;) {
                ssize_t n = read(fd, text + len, REPO_CONFIG_MAX + 1 - len);
                if (n < 0 && errno == EINTR)
                        continue;
                if (n < 0)
                        return al_error_set(err, errno, "reading %s", REPO_CONFIG_PATH);
                if (n == 0)
                        break;
                len += (size_t)n;
                if (len > REPO_CONFIG_MAX)
                        return fail(err, "larger than 64 KiB, refused");
        }
        *ret_text = TAKE_PTR(text);
        *ret_len = len;
        return 0;
}

int repo_config_parse(const char *text, size_t len, struct repo_config **ret, struct al_error *err)
{
        *ret = NULL;
        if (len > REPO_CONFIG_MAX)
                return fail(err, "larger than 64 KiB, refused");
        json_error_t jerr;
        json_t *doc = json_loadb(text, len, JSON_REJECT_DUPLICATES, &jerr);
        if (!doc)
                return fail(err, "%d:%d: %s", jerr.line, jerr.column, jerr.text);
        struct repo_config *rc = xcalloc(1, sizeof(*rc));
        int r = parse(doc, rc, err);
        json_decref(doc);
        if (r < 0) {
                repo_config_free(rc);
                return r;
        }
        *ret = rc;
        return 0;
}

int repo_config_load(const char *workspace, struct repo_config **ret, struct al_error *err)
{
        *ret = NULL;
        _cleanup_free_ char *text = NULL;
        size_t len = 0;
        int r = repo_config_read(workspace, &text, &len, err);
        if (r < 0 || !text)
                return r;
        return repo_config_parse(text, len, ret, err);
}

static unsigned tier_rank(enum policy_tier t)
{
        return (unsigned)t; /* the enum is ordered by strength */
}

int repo_config_check_tier(const struct repo_config *rc, const struct policy *p,
                           struct al_error *err)
{
        if (!rc || !rc->has_minimum || tier_rank(p->tier) >= tier_rank(rc->minimum))
                return 0;
        return al_error_set_message(err, EPERM,
                                    "the repository requires tier %s or stronger (%s: "
                                    "minimumTier), and this run's tier is %s; run with --tier %s",
                                    policy_tier_name(rc->minimum), REPO_CONFIG_PATH,
                                    policy_tier_name(p->tier), policy_tier_name(rc->minimum));
}

/* A limit from the repository only ever tightens: 0 is "none" for the
 * limits that have one, so any value is tighter than 0. */
static uint64_t tighter(uint64_t cur, uint64_t asked)
{
        if (asked == 0)
                return cur;
        if (cur == 0)
                return asked;
        return asked < cur ? asked : cur;
}

int repo_config_apply(const struct repo_config *rc, struct policy *p, const char *base_dir,
                      const char *home, json_t **ret_applied, struct al_error *err)
{
        *ret_applied = NULL;
        if (!rc)
                return 0;
        int r = repo_config_check_tier(rc, p, err);
        if (r < 0)
                return r;
        json_t *applied = json_object();
        json_t *ignored = json_object();
        _cleanup_(policy_freep) struct policy *t = policy_dup(p);

        if (rc->has_minimum)
                json_object_set_new(applied, "minimumTier",
                                    json_string(policy_tier_name(rc->minimum)));
        /* The image decides every program the agent runs: the repository
         * picks among the operator's imported images only when trusted.
         * Untrusted, a container run with no image of its own is refused,
         * never given the repository's pick (nor a default). */
        if (rc->image && !t->image && t->tier == POLICY_TIER_CONTAINER) {
                if (!p->trust_repo_config) {
                        json_decref(applied);
                        json_decref(ignored);
                        return al_error_set_message(
                            err, EPERM,
                            "the repository names image \"%s\" (%s: image), and its config is "
                            "not trusted; name the image yourself (--image NAME, or the policy's "
                            "\"image\") or trust the repository (--trust-repo-config, or "
                            "\"trustRepoConfig\": true)",
                            rc->image, REPO_CONFIG_PATH);
                }
                t->image = xstrdup(rc->image);
                json_object_set_new(applied, "image", json_string(rc->image));
        } else if (rc->image && !p->trust_repo_config && t->image) {
                /* The operator's own image wins; say what was asked. */
                json_object_set_new(ignored, "image", json_string(rc->image));
        }
        if (rc->limits) {
                /* Validated by the policy's own parser, then only tightened. */
                _cleanup_(policy_freep) struct policy *l = policy_new();
                json_t *wrap = json_pack("{s:O}", "limits", rc->limits);
                char *text = json_dumps(wrap, JSON_COMPACT);
                json_decref(wrap);
                r = policy_load_string(l, text, REPO_CONFIG_PATH, err);
                free(text);
                if (r < 0) {
                        json_decref(applied);
                        json_decref(ignored);
                        return r;
                }
                json_t *lim = json_object();
                for (size_t i = 0; i < policy_n_limit_descs; i++) {
                        const struct limit_desc *d = &policy_limit_descs[i];
                        if (!(l->limits_set & d->bit))
                                continue;
                        uint64_t *cur = policy_limit_field(&t->limits, d);
                        uint64_t asked = *policy_limit_field(&l->limits, d);
                        uint64_t v = tighter(*cur, asked);
                        if (v != *cur) {
                                *cur = v;
                                t->limits_set |= d->bit;
                                json_object_set_new(lim, d->key, json_integer((json_int_t)v));
                        }
                }
                /* limits.io the same way (0 is "none" for each). */
                json_t *io = json_object();
                for (size_t i = 0; i < policy_n_io_descs; i++) {
                        const struct limit_desc *d = &policy_io_descs[i];
                        if (!(l->limits_set & d->bit))
                                continue;
                        uint64_t *cur = policy_io_field(&t->limits.io, d);
                        uint64_t v = tighter(*cur, *policy_io_field(&l->limits.io, d));
                        if (v != *cur) {
                                *cur = v;
                                t->limits_set |= d->bit;
                                json_object_set_new(io, d->key, json_integer((json_int_t)v));
                        }
                }
                if (json_object_size(io))
                        json_object_set_new(lim, "io", io);
                else
                        json_decref(io);
                json_object_set_new(applied, "limits", lim);
        }

        /* What widens the sandbox's reach, or puts the repository's words
         * into every process the agent starts (its environment: a loader,
         * shell or interpreter hook would run the repository's code before
         * the agent reads a line of it): only when trusted. */
        json_t *doms = json_array(), *mnts = json_array();
        for (size_t i = 0; i < rc->n_domains; i++)
                json_array_append_new(doms, json_string(rc->domains[i]));
        for (size_t i = 0; i < rc->n_mounts; i++)
                json_array_append_new(mnts, json_pack("{s:s, s:s}", "source", rc->mounts[i].source,
                                                      "target", rc->mounts[i].target));
        json_t *to = p->trust_repo_config ? applied : ignored;
        if (rc->n_env) {
                json_t *keys = json_array();
                for (size_t i = 0; i < rc->n_env; i++)
                        json_array_append_new(keys, json_string(rc->env[i].key));
                json_object_set_new(to, "env", keys);
        }
        if (rc->n_domains)
                json_object_set(to, "allowedDomains", doms);
        if (rc->n_mounts)
                json_object_set(to, "mounts", mnts);
        json_decref(doms);
        json_decref(mnts);
        if (p->trust_repo_config) {
                if (rc->n_domains && t->net_mode_set && t->net_mode == POLICY_NET_NONE) {
                        json_decref(applied);
                        json_decref(ignored);
                        return al_error_set_message(
                            err, EPERM,
                            "%s asks for network access (allowedDomains), and the policy's "
                            "network mode is \"none\"; remove one of them",
                            REPO_CONFIG_PATH);
                }
                for (size_t i = 0; i < rc->n_env; i++) {
                        bool set = false;
                        for (size_t j = 0; j < t->n_env; j++)
                                set = set || STREQ(t->env[j].key, rc->env[i].key);
                        if (!set) /* the operator's own value wins */
                                policy_add_env(t, rc->env[i].key, rc->env[i].value);
                }
                for (size_t i = 0; i < rc->n_domains; i++)
                        t->net_allow = strv_append(t->net_allow, &t->n_net_allow, rc->domains[i]);
                for (size_t i = 0; i < rc->n_mounts; i++) {
                        _cleanup_free_ char *src = NULL;
                        /* Inside the workspace, no link followed on the way. */
                        _cleanup_close_ int ws =
                            open(t->workspace, O_PATH | O_DIRECTORY | O_CLOEXEC);
                        _cleanup_close_ int fd =
                            ws < 0 ? -errno
                                   : fs_openat2(ws, rc->mounts[i].source, O_PATH | O_CLOEXEC, 0,
                                                RESOLVE_BENEATH | RESOLVE_NO_SYMLINKS |
                                                    RESOLVE_NO_MAGICLINKS);
                        if (fd < 0) {
                                json_decref(applied);
                                json_decref(ignored);
                                return al_error_set(err, -fd,
                                                    "%s: mounts[%zu].source \"%s\" (it must "
                                                    "exist inside the workspace, reached "
                                                    "without symbolic links)",
                                                    REPO_CONFIG_PATH, i, rc->mounts[i].source);
                        }
                        src = xasprintf("%s/%s", t->workspace, rc->mounts[i].source);
                        policy_add_mount(t, src, rc->mounts[i].target, true);
                        /* Checked now; opened again beneath the workspace,
                         * without links, when mounted (mounts.c). */
                        t->mounts[t->n_mounts - 1].in_workspace = xstrdup(rc->mounts[i].source);
                }
        }
        if (json_object_size(ignored))
                json_object_set_new(applied, "notTrusted", ignored);
        else
                json_decref(ignored);

        /* The whole again: the repository's entries are checked as the
         * policy's own are (names, targets, env values). */
        r = policy_finalize(t, base_dir, home, err);
        if (r < 0) {
                al_error_wrap(err, "%s", REPO_CONFIG_PATH);
                json_decref(applied);
                return r;
        }
        policy_commit(p, TAKE_PTR(t));
        *ret_applied = applied;
        return 0;
}

int repo_config_apply_loaded(struct policy *p, const char *workspace, const char *home,
                             const struct repo_config *rc, struct al_error *err)
{
        if (!rc)
                return 0;
        if (!p->workspace)
                p->workspace = xstrdup(workspace);
        json_t *applied = NULL;
        int r = repo_config_apply(rc, p, "/", home, &applied, err);
        if (r >= 0) {
                free(p->repo_applied);
                p->repo_applied = json_dumps(applied, JSON_COMPACT | JSON_SORT_KEYS);
        }
        json_decref(applied);
        return r;
}

int repo_config_apply_workspace(struct policy *p, const char *workspace, const char *home,
                                struct al_error *err)
{
        struct repo_config *rc = NULL;
        int r = repo_config_load(workspace, &rc, err);
        if (r < 0 || !rc)
                return r;
        r = repo_config_apply_loaded(p, workspace, home, rc, err);
        repo_config_free(rc);
        return r;
}
