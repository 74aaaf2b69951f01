/* SPDX-License-Identifier: Apache-2.0 */
/* The policy's lifetime: the defaults, the resource classes, copying and
 * committing a changed copy, messages, the setters the CLI uses, and
 * policy_finalize() (class defaults, absolute paths, the net mode). Loading
 * is in load.c (its network section in load-network.c), validation in
 * check.c (numbers in numbers.c), the canonical JSON in json.c. */
#include <errno.h>
#include <fnmatch.h>
#include <stdarg.h>
#include <stdio.h>
#include <string.h>

#include "policy-internal.h"

const char *const policy_mandatory_deny[] = {
    "~/.ssh",      "~/.aws",       "~/.gnupg",       "~/.config/gh",
    "~/.netrc",    "~/.docker",    "~/.kube",        "~/.git-credentials",
    "/etc/shadow", "/etc/gshadow", "/etc/ssh/*_key", NULL,
};

/* The design's table: memory, CPU time, network rate, maximum duration; the
 * CPU quota (thousandths of a cpu) as before. Rates are decimal megabytes. */
static const struct policy_class classes[] = {
    {"small", 256ULL << 20, 30, 1000000, 5 * 60 * 1000, 500},
    {"medium", 512ULL << 20, 60, 10000000, 15 * 60 * 1000, 1000},
    {"large", 1ULL << 30, 120, 50000000, 30 * 60 * 1000, 2000},
    {"xlarge", 4ULL << 30, 300, 100000000, 60 * 60 * 1000, 4000},
};

/* Indexed by the enums in policy.h. */
const char *const policy_workspace_modes[3] = {"rw", "ro", "overlay"};
const char *const policy_read_modes[2] = {"system", "host"};
const char *const policy_net_modes[2] = {"none", "gated"};

const struct limit_desc policy_limit_descs[] = {
    {"timeout", POLICY_LIMIT_TIMEOUT, KIND_DURATION, offsetof(struct policy_limits, timeout_ms), 0,
     INT64_MAX},
    {"cpuTime", POLICY_LIMIT_CPU_TIME, KIND_SECONDS, offsetof(struct policy_limits, cpu_time_s), 0,
     INT64_MAX},
    {"memory", POLICY_LIMIT_MEMORY, KIND_SIZE, offsetof(struct policy_limits, memory), MEMORY_MIN,
     INT64_MAX},
    {"pids", POLICY_LIMIT_PIDS, KIND_COUNT, offsetof(struct policy_limits, pids), PIDS_MIN,
     PIDS_MAX},
    {"cpus", POLICY_LIMIT_CPUS, KIND_CPUS, offsetof(struct policy_limits, cpus_milli),
     CPUS_MILLI_MIN, CPUS_MILLI_MAX},
    {"disk", POLICY_LIMIT_DISK, KIND_SIZE, offsetof(struct policy_limits, disk), 1, INT64_MAX},
    {"openFiles", POLICY_LIMIT_OPEN_FILES, KIND_COUNT, offsetof(struct policy_limits, open_files),
     OPEN_FILES_MIN, OPEN_FILES_MAX},
    {"fileSize", POLICY_LIMIT_FILE_SIZE, KIND_SIZE, offsetof(struct policy_limits, file_size), 1,
     INT64_MAX},
    {"output", POLICY_LIMIT_OUTPUT, KIND_SIZE, offsetof(struct policy_limits, output), 1,
     INT64_MAX},
    {"workspaceDisk", POLICY_LIMIT_WORKSPACE_DISK, KIND_SIZE,
     offsetof(struct policy_limits, workspace_disk), 0, INT64_MAX},
};

const size_t policy_n_limit_descs = ARRAY_SIZE(policy_limit_descs);

/* limits.io: 0 = unlimited. The kernel keeps operation counts in 32 bits and
 * reads UINT32_MAX as "max". */
const struct limit_desc policy_io_descs[] = {
    {"readBps", POLICY_LIMIT_IO, KIND_SIZE, offsetof(struct policy_io, read_bps), 0, INT64_MAX},
    {"writeBps", POLICY_LIMIT_IO, KIND_SIZE, offsetof(struct policy_io, write_bps), 0, INT64_MAX},
    {"readIops", POLICY_LIMIT_IO, KIND_COUNT, offsetof(struct policy_io, read_iops), 0,
     UINT32_MAX - 1},
    {"writeIops", POLICY_LIMIT_IO, KIND_COUNT, offsetof(struct policy_io, write_iops), 0,
     UINT32_MAX - 1},
};

const size_t policy_n_io_descs = ARRAY_SIZE(policy_io_descs);

uint64_t *policy_io_field(struct policy_io *io, const struct limit_desc *d)
{
        return (uint64_t *)((char *)io + d->offset);
}

const struct limit_desc *policy_io_desc_find(const char *key)
{
        for (size_t i = 0; i < ARRAY_SIZE(policy_io_descs); i++)
                if (STREQ(policy_io_descs[i].key, key))
                        return &policy_io_descs[i];
        return NULL;
}

uint64_t *policy_limit_field(struct policy_limits *l, const struct limit_desc *d)
{
        return (uint64_t *)((char *)l + d->offset);
}

const struct limit_desc *policy_limit_desc_find(const char *key)
{
        for (size_t i = 0; i < ARRAY_SIZE(policy_limit_descs); i++)
                if (STREQ(policy_limit_descs[i].key, key))
                        return &policy_limit_descs[i];
        return NULL;
}

const struct policy_class *policy_class_find(const char *name)
{
        if (!name)
                return NULL;
        for (size_t i = 0; i < ARRAY_SIZE(classes); i++)
                if (STREQ(classes[i].name, name))
                        return &classes[i];
        return NULL;
}

/* Lifetime */

void strv_free_n(char **v, size_t n)
{
        if (!v)
                return;
        for (size_t i = 0; i < n; i++)
                free(v[i]);
        free(v);
}

void policy_kv_free_n(struct policy_kv *kv, size_t n)
{
        if (!kv)
                return;
        for (size_t i = 0; i < n; i++) {
                free(kv[i].key);
                free(kv[i].value);
        }
        free(kv);
}

void mounts_free_n(struct policy_mount *m, size_t n)
{
        if (!m)
                return;
        for (size_t i = 0; i < n; i++) {
                free(m[i].source);
                free(m[i].volume);
                free(m[i].in_workspace);
                free(m[i].target);
        }
        free(m);
}

void policy_sentinels_free_n(struct policy_sentinel *v, size_t n)
{
        for (size_t i = 0; v && i < n; i++) {
                free(v[i].env);
                free(v[i].secret);
                strv_free_n(v[i].hosts, v[i].n_hosts);
                strv_free_n(v[i].cleartext_at, v[i].n_cleartext_at);
        }
        free(v);
}

void policy_routes_free_n(struct policy_route *r, size_t n)
{
        if (!r)
                return;
        for (size_t i = 0; i < n; i++) {
                free(r[i].name);
                free(r[i].upstream);
                policy_kv_free_n(r[i].inject, r[i].n_inject);
                strv_free_n(r[i].strip, r[i].n_strip);
                strv_free_n(r[i].record, r[i].n_record);
                free(r[i].ca_file);
        }
        free(r);
}

struct policy *policy_new(void)
{
        struct policy *p = xcalloc(1, sizeof(*p));
        const struct policy_class *c = policy_class_find("medium");

        p->workspace_mode = POLICY_WORKSPACE_RW;
        p->protect_git = true;
        p->allow_broad = false;
        p->read = POLICY_READ_SYSTEM;
        p->net_mode = POLICY_NET_NONE;
        p->class_name = xstrdup(c->name);
        p->limits = (struct policy_limits){
            .timeout_ms = c->timeout_ms,
            .cpu_time_s = 0, /* the class's, from policy_finalize() */
            .memory = c->memory,
            .pids = 256,
            .cpus_milli = c->cpus_milli,
            .disk = 1ULL << 30,
            .open_files = 1024,
            .file_size = 1ULL << 30,
            .output = 16ULL << 20,
        };
        p->uid = 1000;
        p->gid = 1000;
        p->budget.refusals = POLICY_REFUSALS_DEFAULT;
        p->ask_timeout_ms = POLICY_ASK_TIMEOUT_DEFAULT_MS;
        return p;
}

struct policy *policy_free(struct policy *p)
{
        if (!p)
                return NULL;
        free(p->workspace);
        strv_free_n(p->deny_read, p->n_deny_read);
        strv_free_n(p->allow_write, p->n_allow_write);
        strv_free_n(p->deny_write, p->n_deny_write);
        strv_free_n(p->allow_read, p->n_allow_read);
        mounts_free_n(p->mounts, p->n_mounts);
        strv_free_n(p->net_allow, p->n_net_allow);
        strv_free_n(p->net_deny, p->n_net_deny);
        strv_free_n(p->net_allow_private, p->n_net_allow_private);
        policy_kv_free_n(p->net_hosts, p->n_net_hosts);
        policy_kv_free_n(p->net_deny_reasons, p->n_net_deny_reasons);
        policy_routes_free_n(p->routes, p->n_routes);
        policy_sentinels_free_n(p->sentinels, p->n_sentinels);
        free(p->net_parent_proxy);
        strv_free_n(p->net_no_proxy, p->n_net_no_proxy);
        free(p->class_name);
        free(p->image);
        free(p->repo_applied);
        policy_kv_free_n(p->env, p->n_env);
        strv_free_n(p->tools_allow, p->n_tools_allow);
        policy_tools_free_n(p->tools, p->n_tools);
        free(p->hardware_json);
        free(p);
        return NULL;
}

void policy_freep(struct policy **p)
{
        policy_free(*p);
}

static char **strv_dup_n(char *const *v, size_t n)
{
        if (!v)
                return NULL;
        char **r = xcalloc(n + 1, sizeof(char *));
        for (size_t i = 0; i < n; i++)
                r[i] = xstrdup(v[i]);
        return r;
}

static struct policy_kv *kv_dup_n(const struct policy_kv *kv, size_t n)
{
        if (!kv)
                return NULL;
        struct policy_kv *r = xcalloc(n, sizeof(*r));
        for (size_t i = 0; i < n; i++) {
                r[i].key = xstrdup(kv[i].key);
                r[i].value = xstrdup(kv[i].value);
        }
        return r;
}

struct policy *policy_dup(const struct policy *p)
{
        struct policy *d = xcalloc(1, sizeof(*d));

        *d = *p;
        d->workspace = xstrdup(p->workspace);
        d->deny_read = strv_dup_n(p->deny_read, p->n_deny_read);
        d->allow_write = strv_dup_n(p->allow_write, p->n_allow_write);
        d->deny_write = strv_dup_n(p->deny_write, p->n_deny_write);
        d->allow_read = strv_dup_n(p->allow_read, p->n_allow_read);
        d->mounts = p->mounts ? xcalloc(p->n_mounts, sizeof(*d->mounts)) : NULL;
        for (size_t i = 0; d->mounts && i < p->n_mounts; i++) {
                d->mounts[i].source = p->mounts[i].source ? xstrdup(p->mounts[i].source) : NULL;
                d->mounts[i].volume = p->mounts[i].volume ? xstrdup(p->mounts[i].volume) : NULL;
                d->mounts[i].target = xstrdup(p->mounts[i].target);
                d->mounts[i].readonly = p->mounts[i].readonly;
                d->mounts[i].in_workspace =
                    p->mounts[i].in_workspace ? xstrdup(p->mounts[i].in_workspace) : NULL;
        }
        d->net_allow = strv_dup_n(p->net_allow, p->n_net_allow);
        d->net_deny = strv_dup_n(p->net_deny, p->n_net_deny);
        d->net_allow_private = strv_dup_n(p->net_allow_private, p->n_net_allow_private);
        d->net_hosts = kv_dup_n(p->net_hosts, p->n_net_hosts);
        d->net_deny_reasons = kv_dup_n(p->net_deny_reasons, p->n_net_deny_reasons);
        d->routes = p->routes ? xcalloc(p->n_routes, sizeof(*d->routes)) : NULL;
        for (size_t i = 0; d->routes && i < p->n_routes; i++) {
                const struct policy_route *s = &p->routes[i];
                struct policy_route *t = &d->routes[i];
                *t = *s;
                t->name = xstrdup(s->name);
                t->upstream = xstrdup(s->upstream);
                t->inject = kv_dup_n(s->inject, s->n_inject);
                t->strip = strv_dup_n(s->strip, s->n_strip);
                t->record = strv_dup_n(s->record, s->n_record);
                t->ca_file = xstrdup(s->ca_file);
        }
        d->sentinels = p->sentinels ? xcalloc(p->n_sentinels, sizeof(*d->sentinels)) : NULL;
        for (size_t i = 0; d->sentinels && i < p->n_sentinels; i++) {
                const struct policy_sentinel *s = &p->sentinels[i];
                d->sentinels[i] = (struct policy_sentinel){
                    .env = xstrdup(s->env),
                    .secret = xstrdup(s->secret),
                    .hosts = strv_dup_n(s->hosts, s->n_hosts),
                    .n_hosts = s->n_hosts,
                    .cleartext = s->cleartext,
                    .cleartext_at = strv_dup_n(s->cleartext_at, s->n_cleartext_at),
                    .n_cleartext_at = s->n_cleartext_at,
                };
        }
        d->net_parent_proxy = xstrdup(p->net_parent_proxy);
        d->net_no_proxy = strv_dup_n(p->net_no_proxy, p->n_net_no_proxy);
        d->class_name = xstrdup(p->class_name);
        d->image = xstrdup(p->image);
        d->repo_applied = xstrdup(p->repo_applied);
        d->env = kv_dup_n(p->env, p->n_env);
        d->tools_allow = strv_dup_n(p->tools_allow, p->n_tools_allow);
        d->tools = policy_tools_dup_n(p->tools, p->n_tools);
        d->hardware_json = xstrdup(p->hardware_json);
        return d;
}

void policy_commit(struct policy *p, struct policy *t)
{
        struct policy old = *p;
        *p = *t;
        *t = old;
        policy_free(t);
}

/* Messages */

int policy_fail(struct ctx *c, const char *fmt, ...)
{
        char msg[AL_ERROR_MAX];
        va_list ap;

        va_start(ap, fmt);
        vsnprintf(msg, sizeof(msg), fmt, ap);
        va_end(ap);
        if (c->origin)
                return al_error_set(c->err, 0, "%s: %s", c->origin, msg);
        return al_error_set(c->err, 0, "%s", msg);
}

/* Values are echoed in messages: keep them short, and free of bytes that a
 * terminal would act on. */
const char *policy_shown(char *buf, size_t size, const char *s)
{
        size_t n = 0;

        if (!s)
                s = "(null)";
        for (; *s && n + 4 < size; s++)
                buf[n++] = ((unsigned char)*s < 0x20 || *s == 0x7f) ? '?' : *s;
        if (*s) {
                n = n > 3 ? n - 3 : n;
                memcpy(buf + n, "...", 3);
                n += 3;
        }
        buf[n] = '\0';
        return buf;
}

int policy_fail_value(struct ctx *c, const char *path, const char *why, const char *value)
{
        return policy_fail(c, "\"%s\" %s (got \"%s\")", path, why, SHOWN(value));
}

size_t policy_path_push(struct ctx *c, const char *key)
{
        size_t old = strlen(c->path), n = old;

        if (n > 0 && n + 1 < sizeof(c->path))
                c->path[n++] = '.';
        for (; *key && n + 1 < sizeof(c->path); key++)
                c->path[n++] = ((unsigned char)*key < 0x20 || *key == 0x7f) ? '?' : *key;
        c->path[n] = '\0';
        return old;
}

size_t policy_path_push_index(struct ctx *c, size_t i)
{
        size_t old = strlen(c->path);
        snprintf(c->path + old, sizeof(c->path) - old, "[%zu]", i);
        return old;
}

void policy_path_pop(struct ctx *c, size_t mark)
{
        c->path[mark] = '\0';
}
/* Setters */

int policy_set_class(struct policy *p, const char *name, struct al_error *err)
{
        const struct policy_class *cl = policy_class_find(name);
        if (!cl)
                return al_error_set(err, 0, "unknown class \"%s\" (one of " CLASS_NAMES ")",
                                    SHOWN(name));
        free(p->class_name);
        p->class_name = xstrdup(cl->name);
        return 0;
}

const char *const policy_tier_names_v[POLICY_TIER_COUNT_] = {
    [POLICY_TIER_NAMESPACE] = "namespace",
    [POLICY_TIER_CONTAINER] = "container",
    [POLICY_TIER_GVISOR] = "gvisor",
    [POLICY_TIER_MICROVM] = "microvm",
};

const char *policy_tier_name(enum policy_tier t)
{
        return (unsigned)t < POLICY_TIER_COUNT_ ? policy_tier_names_v[t] : NULL;
}

int policy_tier_parse(const char *name, enum policy_tier *ret)
{
        for (unsigned i = 0; name && i < POLICY_TIER_COUNT_; i++)
                if (STREQ(name, policy_tier_names_v[i])) {
                        *ret = (enum policy_tier)i;
                        return 0;
                }
        return -EINVAL;
}

int policy_set_tier(struct policy *p, const char *name, struct al_error *err)
{
        enum policy_tier t;
        if (policy_tier_parse(name, &t) < 0)
                return al_error_set(err, 0, "unknown tier \"%s\" (one of " POLICY_TIER_NAMES ")",
                                    SHOWN(name));
        p->tier = t;
        return 0;
}

int policy_set_limit(struct policy *p, const char *key, const char *value, struct al_error *err)
{
        struct ctx c = {.err = err};
        bool io = key && strncmp(key, "io.", 3) == 0;
        const struct limit_desc *d = !key ? NULL
                                     : io ? policy_io_desc_find(key + 3)
                                          : policy_limit_desc_find(key);
        uint64_t v;

        if (!d)
                return al_error_set(err, 0, "unknown limit \"%s\"", SHOWN(key));
        policy_path_push(&c, "limits");
        if (io)
                policy_path_push(&c, "io");
        policy_path_push(&c, d->key);
        int r = value ? policy_parse_text(value, d->kind, &v) : -EINVAL;
        if (r == -ERANGE)
                return policy_fail(&c, "\"%s\" is too large", c.path);
        if (r == -EDOM)
                return policy_fail(&c, "\"%s\" must be 0 or at least 1ms (got \"%s\")", c.path,
                                   SHOWN(value));
        if (r < 0)
                return policy_fail(&c, "\"%s\" must be %s (got \"%s\")", c.path,
                                   policy_kind_what(d->kind, d->min), SHOWN(value));
        r = policy_check_range(&c, c.path, d->kind, v, d->min, d->max);
        if (r < 0)
                return r;
        if (io) {
                *policy_io_field(&p->limits.io, d) = v;
                p->limits_set |= d->bit;
                return 0;
        }
        policy_limit_store(p, d, v);
        return 0;
}

void policy_add_env(struct policy *p, const char *key, const char *value)
{
        for (size_t i = 0; i < p->n_env; i++)
                if (p->env[i].key && key && STREQ(p->env[i].key, key)) {
                        free(p->env[i].value);
                        p->env[i].value = xstrdup(value ? value : "");
                        return;
                }
        p->env = xrealloc(p->env, p->n_env + 1, sizeof(*p->env));
        p->env[p->n_env].key = xstrdup(key);
        p->env[p->n_env].value = xstrdup(value ? value : "");
        p->n_env++;
}

void policy_add_mount(struct policy *p, const char *source, const char *target, bool readonly)
{
        p->mounts = xrealloc(p->mounts, p->n_mounts + 1, sizeof(*p->mounts));
        p->mounts[p->n_mounts] = (struct policy_mount){
            .source = xstrdup(source),
            .target = xstrdup(target),
            .readonly = readonly,
        };
        p->n_mounts++;
}

size_t policy_host_mounts(const struct policy *p)
{
        size_t n = 0;
        for (size_t i = 0; i < p->n_mounts; i++)
                n += p->mounts[i].source != NULL;
        return n;
}

void policy_add_volume(struct policy *p, const char *name, const char *target, bool readonly)
{
        p->mounts = xrealloc(p->mounts, p->n_mounts + 1, sizeof(*p->mounts));
        p->mounts[p->n_mounts] = (struct policy_mount){
            .volume = xstrdup(name),
            .target = xstrdup(target),
            .readonly = readonly,
        };
        p->n_mounts++;
}

void policy_add_deny_read(struct policy *p, const char *path)
{
        p->deny_read = strv_append(p->deny_read, &p->n_deny_read, path);
}

/* Finalizing */

/* Make `path` absolute: "~" and "~/x" against home, relative paths against
 * base. Only "." components and repeated or trailing slashes are dropped;
 * ".." stays, since which directory it names depends on symlinks on disk. */
static int resolve_path(struct ctx *c, const char *name, char **path, const char *base,
                        const char *home)
{
        const char *s = *path;
        _cleanup_free_ char *joined = NULL;

        if (s[0] == '~') {
                if (!home)
                        return policy_fail(
                            c, "\"%s\" starts with \"~\" but no home directory is known", name);
                joined = xasprintf("%s/%s", home, s[1] ? s + 2 : "");
        } else if (s[0] == '/')
                joined = xstrdup(s);
        else
                joined = xasprintf("%s/%s", base, s);

        char *out = xcalloc(strlen(joined) + 2, 1);
        size_t n = 0;
        for (const char *q = joined; *q;) {
                q += strspn(q, "/");
                size_t len = strcspn(q, "/");
                if (len == 0 || (len == 1 && q[0] == '.')) {
                        q += len;
                        continue;
                }
                out[n++] = '/';
                memcpy(out + n, q, len);
                n += len;
                q += len;
        }
        if (n == 0)
                out[n++] = '/';
        out[n] = '\0';
        free(*path);
        *path = out;
        return 0;
}

static bool under_path(const char *path, const char *dir)
{
        size_t n = strlen(dir);
        if (STREQ(dir, "/"))
                return true;
        return strncmp(path, dir, n) == 0 && (path[n] == '\0' || path[n] == '/');
}

/* An allowRead entry shows again a part of a denyRead entry: it must lie
 * strictly under one, and never under the mandatory list (checked here for
 * the caller's home and absolute entries, and against every home's real
 * paths when the sandbox starts). Both are absolute and normalised here. */
static int check_allow_read(struct ctx *c, const struct policy *t, size_t i)
{
        const char *a = t->allow_read[i];
        char name[64];
        snprintf(name, sizeof(name), "filesystem.allowRead[%zu]", i);
        bool under = false;
        for (size_t j = 0; j < t->n_deny_read; j++)
                if (under_path(a, t->deny_read[j]) && !STREQ(a, t->deny_read[j]))
                        under = true;
        if (!under)
                return policy_fail_value(c, name,
                                         "must lie under a filesystem.denyRead entry (it re-allows "
                                         "reading part of one)",
                                         a);
        for (size_t j = 0; policy_mandatory_deny[j]; j++) {
                const char *m = policy_mandatory_deny[j];
                if (m[0] == '~') {
                        /* "~/.ssh" for any home: a component ".ssh" right
                         * after a home-like prefix is refused outright. */
                        const char *rest = m + 1;
                        const char *hit = strstr(a, rest);
                        size_t n = strlen(rest);
                        while (hit) {
                                if (hit[n] == '\0' || hit[n] == '/')
                                        return policy_fail_value(
                                            c, name,
                                            "is on the mandatory deny list and "
                                            "cannot be re-allowed",
                                            a);
                                hit = strstr(hit + 1, rest);
                        }
                } else if (under_path(a, m) || fnmatch(m, a, FNM_PATHNAME) == 0)
                        return policy_fail_value(
                            c, name, "is on the mandatory deny list and cannot be re-allowed", a);
        }
        return 0;
}

int policy_finalize(struct policy *p, const char *base_dir, const char *home, struct al_error *err)
{
        struct ctx c = {.origin = "policy", .err = err};
        _cleanup_free_ char *cwd = NULL;
        char name[128];
        int r;

        if (!base_dir) {
                cwd = get_current_dir_name();
                if (!cwd)
                        return al_error_set(err, errno, "policy: getting the current directory");
                base_dir = cwd;
        }
        if (base_dir[0] != '/')
                return policy_fail(&c, "base directory \"%s\" is not absolute", SHOWN(base_dir));
        if (home && home[0] != '/')
                return policy_fail(&c, "home directory \"%s\" is not absolute", SHOWN(home));

        r = policy_validate(&c, p);
        if (r < 0)
                return r;

        _cleanup_(policy_freep) struct policy *t = policy_dup(p);
        if (t->workspace) {
                r = resolve_path(&c, "workspace.path", &t->workspace, base_dir, home);
                if (r < 0)
                        return r;
        }
        for (size_t i = 0; i < t->n_deny_read; i++) {
                snprintf(name, sizeof(name), "filesystem.denyRead[%zu]", i);
                r = resolve_path(&c, name, &t->deny_read[i], base_dir, home);
                if (r < 0)
                        return r;
        }
        for (size_t i = 0; i < t->n_deny_write; i++) {
                snprintf(name, sizeof(name), "filesystem.denyWrite[%zu]", i);
                r = resolve_path(&c, name, &t->deny_write[i], base_dir, home);
                if (r < 0)
                        return r;
        }
        for (size_t i = 0; i < t->n_allow_read; i++) {
                snprintf(name, sizeof(name), "filesystem.allowRead[%zu]", i);
                r = resolve_path(&c, name, &t->allow_read[i], base_dir, home);
                if (r < 0)
                        return r;
                r = check_allow_read(&c, t, i);
                if (r < 0)
                        return r;
        }
        for (size_t i = 0; i < t->n_mounts; i++) {
                if (t->mounts[i].volume)
                        continue;
                snprintf(name, sizeof(name), "filesystem.mounts[%zu].source", i);
                r = resolve_path(&c, name, &t->mounts[i].source, base_dir, home);
                if (r < 0)
                        return r;
        }
        for (size_t i = 0; i < t->n_routes; i++) {
                if (!t->routes[i].ca_file)
                        continue;
                snprintf(name, sizeof(name), "network.routes[%zu].caFile", i);
                r = resolve_path(&c, name, &t->routes[i].ca_file, base_dir, home);
                if (r < 0)
                        return r;
        }

        const struct policy_class *cl = policy_class_find(t->class_name);
        if (!(t->limits_set & POLICY_LIMIT_MEMORY))
                t->limits.memory = cl->memory;
        if (!(t->limits_set & POLICY_LIMIT_CPUS))
                t->limits.cpus_milli = cl->cpus_milli;
        if (!(t->limits_set & POLICY_LIMIT_TIMEOUT))
                t->limits.timeout_ms = cl->timeout_ms;
        if (!(t->limits_set & POLICY_LIMIT_CPU_TIME))
                t->limits.cpu_time_s = cl->cpu_time_s;
        if (!t->budget.rate_set)
                t->budget.rate = cl->net_rate;
        if (!(t->limits_set & POLICY_LIMIT_FILE_SIZE))
                t->limits.file_size = t->limits.disk;

        /* A quota is set on a read-write workspace only: refuse what would
         * not be enforced. */
        if (t->limits.workspace_disk && (!t->workspace || t->workspace_mode != POLICY_WORKSPACE_RW))
                return policy_fail(&c,
                                   "\"limits.workspaceDisk\" needs a read-write workspace (in "
                                   "overlay mode \"limits.disk\" bounds the copy-on-write layer)");

        if (!t->net_mode_set)
                t->net_mode =
                    t->n_net_allow > 0 || t->n_routes > 0 || t->net_ask ? POLICY_NET_GATED
                                                                        : POLICY_NET_NONE;

        r = policy_tools_finalize(&c, t);
        if (r < 0)
                return r;

        policy_commit(p, TAKE_PTR(t));
        return 0;
}
